"""``tunex doctor``: what this machine offers tunex, and what installs each missing piece.

Looks, never changes anything: GPUs and their architecture, the Triton, torch and CUDA
versions, the RISC-V toolchain and simulator pieces (found as the riscv targets find them), the C
compiler of the ``cpu`` target, Ray and a reachable cluster, the optional Python packages, and
the tuning database.

::

    from tunex.doctor import diagnose

    for check in diagnose(db="tunex.db"):
        print(check.area, check.name, check.state, check.detail, check.fix)
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass

__all__ = ["Check", "diagnose"]


@dataclass(frozen=True)
class Check:
    """One finding.

    Attributes:
        area: ``python``, ``gpu``, ``riscv``, ``cpu``, ``cluster`` or ``database``.
        name: what was looked for.
        state: ``"ok"``; ``"missing"`` (absent: the targets or commands that need it fail with
            a message naming ``fix``); or ``"none"`` (nothing wrong: e.g. no GPU on this
            machine, no database yet, no cluster running).
        detail: what was found (versions, paths, devices) or what is absent.
        fix: the command that installs or starts it, for what is not ok.
    """

    area: str
    name: str
    state: str
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _python() -> Iterator[Check]:
    from tunex import __version__

    yield Check("python", "tunex", "ok", f"{__version__} on Python {platform.python_version()} "
                f"({sys.executable})")
    extras = (("matplotlib", "matplotlib", "report", "tunex report"),
              ("pyarrow", "pyarrow", "parquet", "db export --format parquet"),
              ("cmaes", "cmaes", "cmaes", "optuna:cmaes"),
              ("psycopg", "psycopg", "postgres", "PostgreSQL databases"))
    for name, dist, extra, used in extras:
        v = _version(dist)
        how = f"pip install 'tunex[{extra}]'"
        yield (Check("python", name, "ok", f"{v} ({used})") if v else
               Check("python", name, "missing", f"not installed: needed for {used}", how))


def _gpu() -> Iterator[Check]:
    torch_v, triton_v = _version("torch"), _version("triton")
    if torch_v is None:
        smi = shutil.which("nvidia-smi")
        listed = ""
        if smi:
            done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30,
                                  check=False)
            listed = done.stdout.strip().replace("\n", "; ")
        yield Check("gpu", "torch", "missing", "not installed" + (f" ({listed})" if listed
                    else ""), "bash scripts/install-triton.sh (or pip install 'tunex[triton]')")
    else:
        import torch

        cuda = torch.version.cuda or getattr(torch.version, "hip", None)
        yield Check("gpu", "torch", "ok", f"{torch_v}, built for "
                    + (f"CUDA {torch.version.cuda}" if torch.version.cuda else
                       f"ROCm {cuda}" if cuda else "CPU only"))
        from tunex.identity import gpu_properties

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            why = ("torch is a CPU build" if not cuda
                   else "torch sees no device (driver, CUDA_VISIBLE_DEVICES?)")
            yield Check("gpu", "GPUs", "none", f"none: {why}; the triton_gpu target needs one "
                        "(Triton's interpreter runs the decorator's kernels on the CPU)")
        for i in range(n):
            p = gpu_properties(i)
            yield Check("gpu", f"GPU {i}", "ok", f"{p['name']} ({p['arch']}, "
                        f"{p['sm_count']} SMs, {p['smem'] // 1024} KiB shared memory per "
                        "block)")
    yield (Check("gpu", "triton", "ok", triton_v) if triton_v else
           Check("gpu", "triton", "missing", "not installed: the triton_gpu target and "
                 "@tunex.autotune need it", "pip install 'tunex[triton]'"))


def _riscv() -> Iterator[Check]:
    from tunex.errors import TargetError
    from tunex.targets.riscv._toolchain import CORES, Toolchain

    found = Toolchain.find(need=())
    versions = found.versions()
    what = {"clang": "cross compiler", "lld": "linker", "mca": "llvm-mca (cycle model)",
            "objdump": "disassembler", "nm": "symbols", "qemu": "QEMU user mode (riscv64)",
            "plugin": "tunex's QEMU plugin (block counts)"}
    for name, role in what.items():
        path = getattr(found, name)
        if path is not None:
            yield Check("riscv", name, "ok", f"{path}" + (f" ({versions[name]})"
                                                          if name in versions else "") +
                        f": {role}")
            continue
        try:
            Toolchain.find(need=(name,))
            fix = "bash scripts/install-riscv.sh (in a checkout of tunex)"
        except TargetError as e:  # its message says what installs the tool
            fix = str(e).split(": ", 1)[-1]
        yield Check("riscv", name, "missing", f"not found: {role}", fix)
    yield (Check("riscv", "sysroot", "ok", f"{found.sysroot}: riscv64 C library (static links)")
           if found.sysroot else
           Check("riscv", "sysroot", "missing", "no /usr/riscv64-linux-gnu: riscv64 C library",
                 "apt-get install libc6-dev-riscv64-cross (or, in a checkout of tunex, "
                 "bash scripts/install-riscv.sh)"))
    yield Check("riscv", "cores", "ok", ", ".join(f"{c.name} (VLEN {c.vlen})"
                                                  for c in CORES.values()))


def _cpu() -> Iterator[Check]:
    from tunex.errors import TargetError
    from tunex.targets import make_target

    try:
        t = make_target("cpu")
        fp = t.fingerprint()
        yield Check("cpu", "cpu target", "ok", f"{fp.get('device')}, {fp.get('compiler')}")
    except TargetError as e:
        yield Check("cpu", "cpu target", "missing", str(e).split(";")[0],
                    "apt-get install clang-19 (or, in a checkout of tunex, "
                    "bash scripts/install-riscv.sh)")


def _cluster(address: str | None) -> Iterator[Check]:
    v = _version("ray")
    if v is None:
        yield Check("cluster", "ray", "missing", "not installed: needed for --ray only "
                    "(trials run locally without it)", "pip install 'tunex[ray]'")
        return
    yield Check("cluster", "ray", "ok", v)
    from tunex.cluster._ray import _reachable, _resolve
    from tunex.errors import ClusterError

    try:
        where = _resolve(address or "auto")
    except ClusterError:
        yield Check("cluster", "cluster", "none", "no running cluster (RAY_ADDRESS unset, "
                    "no `ray start` cluster here): --ray without an address starts a local "
                    "one", "ray start --head")
        return
    try:
        _reachable(where, timeout=3.0)
        yield Check("cluster", "cluster", "ok", f"{where} answers (use --ray {where})")
    except ClusterError as e:
        yield Check("cluster", "cluster", "missing", str(e).split(";")[0],
                    "ray start --head (or check the address and the firewall)")


def _database(url: str) -> Iterator[Check]:
    from tunex.db import SCHEMA_VERSION, Database
    from tunex.errors import DatabaseError

    try:
        with Database(url, create=False) as db:
            workloads = db.workloads()
            trials = sum(db.count(w) for w in workloads)
            kernels = sorted({w.kernel for w in workloads})
            yield Check("database", url, "ok",
                        f"schema {SCHEMA_VERSION}{' (read-only)' if db.readonly else ''}, "
                        f"{len(workloads)} workload{'s' * (len(workloads) != 1)}, "
                        f"{trials} trial{'s' * (trials != 1)}"
                        + (f" ({', '.join(kernels[:6])}{', ...' if len(kernels) > 6 else ''})"
                           if kernels else ""))
    except DatabaseError as e:
        if "no tuning database" in str(e) and "://" not in url:
            yield Check("database", url, "none", "none yet: `tunex search` creates it",
                        f"tunex search ... --db {url}")
        else:
            yield Check("database", url, "missing", str(e))


def diagnose(db: str = "tunex.db", ray_address: str | None = None) -> list[Check]:
    """Every check, in order: python, gpu, riscv, cpu, cluster, database."""
    checks: list[Check] = []
    for part in (_python(), _gpu(), _riscv(), _cpu(), _cluster(ray_address), _database(db)):
        checks.extend(part)
    return checks


def environment() -> dict[str, str]:
    """Variables that change what tunex does, as set now."""
    names = ("TUNEX_MODE", "TUNEX_PACKS", "TUNEX_DB", "TUNEX_CACHE", "TUNEX_CLANG", "TUNEX_QEMU",
             "TUNEX_QEMU_PLUGIN", "RAY_ADDRESS", "CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET")
    return {n: os.environ[n] for n in names if n in os.environ}
