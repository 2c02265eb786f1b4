"""The matmul spaces recorded on the H200 (benchmarks/data/) replay as the kernel's own space."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the matmul kernel needs torch (scripts/install-triton.sh)")
pytest.importorskip("triton", reason="the matmul kernel needs triton (scripts/install-triton.sh)")

from tunex.targets import make_target
from tunex.targets.replay import ReplayTarget
from tunex.tuner import Tuner

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
RECORDED = sorted(DATA.glob("matmul_H200_*.json.gz"))


def test_recordings_are_committed() -> None:
    assert len(RECORDED) >= 3


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_replay_rebuilds_the_kernel_space(path: Path) -> None:
    replay = ReplayTarget(path)
    m, n, k = replay.doc_meta["problem_size"]
    space, _ = make_target("triton_gpu:sm_90").prepare("matmul", {"M": m, "N": n, "K": k})
    assert set(replay.space) == set(space)  # same points: restrictions carry the constraints
    with gzip.open(path, "rt") as f:
        cache = json.load(f)["cache"]
    assert len(cache) == space.size  # every point was measured
    times = [e["time"] for e in cache.values()]
    assert all(isinstance(t, float) and t > 0 for t in times)
    assert all(len(e["times"]) >= 5 and e["compile_time"] > 0 for e in cache.values())
    assert replay.optimum() == min(times)
    result = Tuner(replay, replay.space, strategy="random", budget="40trials", seed=0).run()
    assert result.best is not None and result.best.value >= replay.optimum()
