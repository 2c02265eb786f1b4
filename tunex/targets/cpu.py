"""The host CPU: C kernels compiled natively (``-O3 -march=native``) and timed for real.

The kernels' portable form is built here (plain C with vectorisation pragmas; RVV intrinsics
need a RISC-V core), so the C path, register tiling, unroll and loop order get real
measurements on any machine. Each measurement runs the binary once: ``warmup`` untimed calls,
then ``repeats`` calls timed with ``CLOCK_MONOTONIC``, a cache flush before each (``flush_kb``),
and the median of the repeats is the answer.

``make_target("cpu")``; options after ``?``: ``repeats``, ``warmup``, ``flush_kb``,
``timeout``, ``cc`` (compiler; default clang-19, else clang, else cc), ``march`` (default
``native``).
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunex.errors import TargetError
from tunex.kernel import Isa
from tunex.targets._c import CTarget, RunResult

__all__ = ["CpuTarget", "host_isa"]


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    model: str = platform.processor() or platform.machine()
    flags: frozenset[str] = frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, flags
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    f = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
    return (m.group(1).strip() if m else model), frozenset(f.group(1).split() if f else ())


def host_isa() -> Isa:
    """This machine's SIMD facts: the widest vector register and how many there are."""
    _, flags = _cpuinfo()
    arch = platform.machine()
    if "avx512f" in flags:
        return Isa("host", arch, False, 512, 32)
    if "avx2" in flags or "avx" in flags:
        return Isa("host", arch, False, 256, 16)
    return Isa("host", arch, False, 128, 32 if arch in ("aarch64", "arm64") else 16)


class CpuTarget(CTarget):
    """C kernels on this machine's CPU (see the module docstring)."""

    name = "cpu"

    def __init__(self, *, cc: str | None = None, march: str = "native", repeats: int = 15,
                 warmup: int = 2, flush_kb: int = 8192, timeout: float = 120.0,
                 check: bool = True) -> None:
        super().__init__(timeout=timeout, repeats=repeats, warmup=warmup, flush_kb=flush_kb,
                         check=check)
        found = next(filter(None, map(shutil.which, [cc] if cc else
                                      ["clang-19", "clang", "cc"])), None)
        if found is None:
            raise TargetError(f"no C compiler found ({cc or 'clang-19, clang or cc'}); run "
                              "scripts/install-riscv.sh (or apt-get install clang-19)")
        self.cc = found
        self.march = str(march)
        self.isa = host_isa()

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, _refs={})

    @functools.cached_property
    def _compiler_version(self) -> str:
        done = subprocess.run([self.cc, "--version"], capture_output=True, text=True)
        return (done.stdout.splitlines() or ["unknown"])[0].strip()

    def fingerprint(self) -> Mapping[str, Any]:
        model, _ = _cpuinfo()
        return {"device": model, "arch": self.isa.arch, "vlen": self.isa.vlen,
                "compiler": self._compiler_version, "march": self.march}

    def compile(self, sources: Sequence[Path], out: Path) -> subprocess.CompletedProcess[str]:
        argv = [self.cc, "-O3", f"-march={self.march}", "-std=c11", "-o", str(out),
                *map(str, sources), "-lm"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout)

    def run(self, binary: Path, argv: Sequence[str], cwd: Path) -> RunResult:
        return self._run_process([str(binary), *argv], cwd)
