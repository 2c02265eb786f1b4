"""Careless or hostile input at the doors a user walks through gets one clear error, never a
traceback and never a silent no-op (issue: hardening, items 7 and 8)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunex.cli import main
from tunex.db import Database
from tunex.errors import BudgetError, TargetError
from tunex.targets import make_target
from tunex.trial import Config, Measurement, Status
from tunex.tuner import Budget

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "data" / "matmul_H200_1024x1024x1024.json.gz"


@pytest.mark.parametrize("text", ["0m", "0trials", "0s,10trials", "2h,500trials,3h",
                                  "10trials,20trials", "", "abc", "-5m"])
def test_budgets_that_allow_nothing_or_say_two_things_are_refused(text):
    with pytest.raises(BudgetError):
        Budget.parse(text)


def test_budgets_that_mean_something_still_parse():
    assert Budget.parse("1h30m") == Budget(5400.0, None)
    assert Budget.parse("2h, 500trials") == Budget(7200.0, 500)


@pytest.mark.parametrize("times", [(float("nan"),), (1.0, -0.5), (math.inf,)])
def test_a_measurement_with_invalid_times_is_a_failure_not_a_winner(times):
    m = Measurement(Config(a=1), Status.OK, times)
    assert m.status is Status.RUNTIME_ERROR and m.value == math.inf and "invalid" in m.error


def test_memory_database_is_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Database(":memory:") as db:
        assert db.path is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spec,says", [
    ("replay:", "needs its path"),
    (f"replay:{RECORDED}?bogus=1", "no option 'bogus'"),
    (f"replay:{RECORDED}?seed=abc", "options are"),
    (f"replay:{RECORDED.parent}", "is a directory"),
    ("cpu?repeats=0", "repeats >= 1"),
])
def test_target_specs_that_cannot_work_name_what_to_write(spec, says):
    with pytest.raises(TargetError, match=says):
        make_target(spec)


@pytest.mark.parametrize("extra,says", [
    (["--batch", "-3"], "--batch -3"),
    (["--workers", "-1"], "--workers -1"),
    (["--seed", "-1"], "--seed -1"),
    (["--budget", "0trials"], "allows no trial"),
    (["--shape", "M=4"], "drop the kernel and --shape"),
    (["--measure-timeout", "0"], "--measure-timeout"),
])
def test_search_arguments_that_would_run_nothing_are_errors(extra, says, tmp_path, capsys):
    rc = main(["search", "--target", f"replay:{RECORDED}", "--db", str(tmp_path / "x.db"),
               "-q", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and "Traceback" not in err
    assert not (tmp_path / "x.db").exists() or "--budget" in extra


def test_ctrl_c_exits_130_and_keeps_every_finished_trial(tmp_path):
    db = tmp_path / "int.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunex.cli", "search", "--target", f"replay:{RECORDED}",
         "--budget", "100000trials", "--db", str(db), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # interrupt once trials are being recorded
        time.sleep(0.5)
        if db.exists() and db.stat().st_size > 0:
            with Database(str(db), create=False) as d:
                if any(d.count(w) >= 5 for w in d.workloads()):
                    break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "run again to resume" in err
