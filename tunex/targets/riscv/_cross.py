"""What the RISC-V targets share: cross-compiling a C kernel for a core and its build facts."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunex.kernel import Isa
from tunex.targets._c import CTarget
from tunex.targets.riscv._toolchain import Core, Toolchain, get_core

__all__ = ["CrossTarget"]


class CrossTarget(CTarget):
    """A C target whose binaries are built for a RISC-V core with clang-19 (any host).

    The core (``x60``, ``x280``, ``p670``) sets ``-mcpu`` and so the VLEN the compiler may
    assume; :attr:`isa` tells the kernels' templates and constraints the same.
    """

    #: Tools the target needs on the machine that builds and measures.
    needs: tuple[str, ...] = ("clang",)

    def __init__(self, core: str = "x280", **options: Any) -> None:
        super().__init__(**options)
        self.core: Core = get_core(str(core))
        self.isa = Isa(self.core.name, "riscv64", True, self.core.vlen, 32)
        self.tc = Toolchain.find(need=self.needs)

    def __getstate__(self) -> dict[str, Any]:  # references are recomputed where measured
        state = dict(self.__dict__, _refs={})
        state.pop("_versions", None)
        return state

    @functools.cached_property
    def _versions(self) -> Mapping[str, str]:
        return self.tc.versions()

    def compile(self, sources: Sequence[Path], out: Path) -> subprocess.CompletedProcess[str]:
        return self.tc.cross_compile(list(sources), out, self.core, timeout=self.timeout)

    def build_facts(self, binary: Path) -> dict[str, Any]:
        from tunex.targets.riscv._cycles import function_ranges, static_facts

        facts: dict[str, Any] = {"binary_bytes": binary.stat().st_size}
        if self.tc.objdump is None:
            return facts
        ranges = function_ranges(binary, self.tc)
        facts.update(static_facts(binary, self.core, self.tc, ranges))
        return facts
