"""``riscv-sim``: RVV kernels measured without hardware, by QEMU and a cycle model of a core.

Each trial's binary runs once under ``qemu-riscv64 -cpu rv64,v=true,vlen=V`` (V: the core's
VLEN), which checks its outputs against the kernel's NumPy reference; a QEMU TCG plugin (built by
``scripts/install-riscv.sh``) counts how often each translated block of the kernel's ``tx_*``
functions ran. The estimate is

    cycles = sum over executed blocks of  count(block) x cycles(block)

where ``cycles(block)`` is llvm-mca-19's steady-state cycles per iteration of the block on the
core's scheduling model (x280, p670), or, for a core llvm-mca has no model of (the SpacemiT
X60), the sum of its instructions' measured reciprocal throughputs on the real core
(rvv-bench tables in ``../shared/data/riscv``) at the SEW and LMUL they run with. It is
deterministic (the same binary gives the same cycles, whatever the machine is doing), so the
target is not noisy and tunex does not re-measure. QEMU's wall time is not the answer: it is
not even monotonic in LMUL.

What the estimate ignores: caches and memory bandwidth (every load hits), branch
mispredictions, the latency of dependencies that cross block boundaries, and the vtype of a
block entered from a vsetvli that does not precede it in address order. It ranks how much work
the core's pipelines do, which is what LMUL, unroll and tile choices change; the benchmark
compares its ranking with instruction counts and with llvm-mca alone (benchmarks/RESULTS.md).

``make_target("riscv-sim:x280")`` (cores: x60, x280, p670); options after ``?``:
``timeout`` (seconds per build or run), ``check`` (compare outputs, default on).
Measurements are in milliseconds at the core's nominal clock (facts hold the cycles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunex.targets._c import RunResult
from tunex.targets.riscv._cross import CrossTarget

__all__ = ["RiscvSimTarget"]


class RiscvSimTarget(CrossTarget):
    """C/RVV kernels under QEMU, timed by the core's cycle model (module docstring)."""

    name = "riscv-sim"
    noisy = False
    measure_slots = None  # any CPU simulates: measure on all of them
    needs = ("clang", "qemu", "plugin", "objdump", "mca")

    def __init__(self, core: str = "x280", *, timeout: float = 300.0,
                 check: bool = True) -> None:
        super().__init__(core, timeout=timeout, repeats=1, warmup=0, flush_kb=0, check=check)

    @property
    def model(self) -> str:
        c = self.core
        return f"llvm-mca-19:{c.mcpu}" if c.mca_model else f"rvv-bench:{c.table}"

    def fingerprint(self) -> Mapping[str, Any]:
        return {"device": f"riscv-sim:{self.core.name}", "arch": self.core.mcpu,
                "vlen": self.core.vlen, "model": self.model,
                "clang": self._versions.get("clang", "?")}

    def run(self, binary: Path, argv: Sequence[str], cwd: Path) -> RunResult:
        from tunex.targets.riscv._cycles import function_ranges

        ranges = function_ranges(binary, self.tc)
        lo = min((r[0] for r in ranges), default=None)
        hi = max((r[1] for r in ranges), default=None)
        qemu = self.tc.qemu_argv(self.core, cwd / "counts.txt", lo, hi)
        result = self._run_process([*qemu, str(binary), *argv], cwd)
        return RunResult(result.returncode, result.stdout, result.stderr, result.seconds,
                         {"qemu_seconds": round(result.seconds, 4)}, result.timed_out,
                         extra=ranges)

    def timing(self, result: RunResult, binary: Path) -> tuple[tuple[float, ...], dict[str, Any]]:
        from tunex.targets.riscv._cycles import estimate, read_counts

        counts = read_counts(binary.parent / "counts.txt")
        est = estimate(binary, counts, self.core, self.tc, result.extra)
        ms = est.cycles / (self.core.clock_ghz * 1e6)
        return (ms,), {"cycles": est.cycles, "insns": est.insns,
                       "vector_insns": est.vector_insns, "blocks": est.blocks,
                       "model": est.model}
