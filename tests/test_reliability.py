"""Budgets that hold whatever runs them: concurrent searches of one workload, reruns of a finished
search, and a tuner killed with SIGKILL at random points (issue: hardening).

Each search here is a real ``tunex search`` subprocess on a recorded space that ships with the
repository, writing one SQLite file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tunex.db import Database, Trial
from tunex.errors import TunexError

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "data" / "matmul_H200_1024x1024x1024.json.gz"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The database every search of a test writes: an SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "tune.db")
    return str(request.getfixturevalue("pg_url"))


def search(db: str, budget: str, seed: int, *, noisy: bool = True,
           strategy: str = "random") -> subprocess.Popen[str]:
    spec = f"replay:{RECORDED}" + (f"?noisy=1&seed={seed}" if noisy else "")
    return subprocess.Popen(
        [sys.executable, "-m", "tunex.cli", "search", "--target", spec, "--strategy", strategy,
         "--seed", str(seed), "--budget", budget, "--db", str(db), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)


def finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return out


def trials_of(db: str) -> list[Trial]:
    with Database(db, create=False) as d:
        (workload,) = d.workloads()
        return d.trials(workload)


def check_exact(trials: list[Trial], budget: int) -> None:
    """Exactly ``budget`` trials, numbered 1..budget, no config measured twice except by the
    re-measurement of the leaders."""
    assert [t.number for t in trials] == list(range(1, budget + 1))
    searched = Counter(t.measurement.config for t in trials if t.strategy != "remeasure")
    assert max(searched.values()) == 1, [c for c, n in searched.items() if n > 1][:3]


def test_concurrent_searches_of_one_workload_share_its_budget(db: str) -> None:
    procs = [search(db, "80trials", seed) for seed in range(4)]
    for p in procs:
        finish(p)
    trials = trials_of(db)
    check_exact(trials, 80)
    remeasured = [t for t in trials if t.strategy == "remeasure"]
    assert 1 <= len(remeasured) <= 4
    with Database(db, create=False) as d:  # every claim was ended
        assert d.claim(d.workloads()[0], ["probe"], owner="probe").used == 81


def test_rerunning_a_finished_noisy_search_adds_nothing(db: str) -> None:
    finish(search(db, "40trials", 1))
    first = trials_of(db)
    check_exact(first, 40)
    for seed in (2, 3):
        finish(search(db, "40trials", seed))
    assert trials_of(db) == first


@pytest.mark.slow
def test_a_tuner_killed_at_random_points_resumes_to_exactly_its_budget(db: str) -> None:
    budget = 400
    rng = random.Random(7)
    kills = 0
    for threshold in sorted(rng.sample(range(20, budget - 40), 5)):
        proc = search(db, f"{budget}trials", kills, noisy=True, strategy="model")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with Database(db, create=False) as d:
                    ws = d.workloads()
                    if ws and d.count(ws[0]) >= threshold:
                        break
            except TunexError:  # not created yet by the search
                pass
            time.sleep(rng.uniform(0.0, 0.05))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
    assert kills >= 3  # the search was killed mid-run, not after it ended
    finish(search(db, f"{budget}trials", 99, noisy=True, strategy="model"))
    check_exact(trials_of(db), budget)
