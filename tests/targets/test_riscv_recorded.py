"""The RISC-V spaces recorded exhaustively on riscv-sim (benchmarks/data/riscv/) replay as the
kernel's own space on that core."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tunex.kernel import Isa, get_kernel
from tunex.targets.replay import ReplayTarget
from tunex.targets.riscv._toolchain import get_core

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"

RISCV = sorted((DATA / "riscv").glob("*/*.json.gz"))


def test_riscv_recordings_are_committed() -> None:
    assert len(RISCV) >= 4  # sgemm at two sizes on two cores


@pytest.mark.parametrize("path", RISCV, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_riscv_replay_is_the_kernel_space_on_that_core(path: Path) -> None:
    """A recording holds every point of the kernel's space bound to the core's facts, each
    checked and given a cycle count; its replay searches the same space."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    kernel = get_kernel(doc["kernel_name"])
    core = get_core(doc["device_name"].split(":")[1])
    isa = Isa(core.name, "riscv64", True, core.vlen, 32)
    problem = dict(zip(kernel.dims, doc["problem_size"]))
    space = kernel.bind(kernel.space(), kernel.problem_key(problem), isa.facts())
    cache = doc["cache"]
    assert len(cache) == space.size
    as_recorded = {",".join("".join(v) if isinstance(v, tuple) else str(v)
                            for v in (c[k] for k in doc["tune_params_keys"])) for c in space}
    assert as_recorded == set(cache)
    ok = [e for e in cache.values() if e["status"] == "ok"]
    assert len(ok) >= 0.95 * len(cache) and all(e["cycles"] > 0 for e in ok)
    replay = ReplayTarget(path)
    assert replay.space.size == space.size
    assert replay.optimum() == min(e["time"] for e in ok)
