"""The command line in scripts, logs and pipes: JSON output, one log line per trial, logging
options after the subcommand, --version, defaults in --help, no traceback into `head`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tunex
from tests._data import recorded
from tunex.cli import main

ROOT = Path(tunex.__file__).resolve().parents[1]


def tunex_cli(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tunex.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300, **kwargs)


def search(db: Path, budget: str, *extra: str) -> list[str]:
    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    return ["search", "--target", f"replay:{data}", "--strategy", "random", "--seed", "1",
            "--budget", budget, "--db", str(db), *extra]


def test_one_log_line_per_trial_and_json_summary(tmp_path: Path, capsys) -> None:
    db = tmp_path / "run.db"
    assert main(search(db, "6trials")) == 0  # capsys: not a terminal
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("tunex: trial")]
    assert [x.split()[2] for x in lines] == [f"{i}/6" for i in range(1, 7)]
    assert "best" in lines[-1] and "block_size_x=" in lines[-1]
    failed = sum(x.split()[3] == "runtime_error;" for x in lines)  # pnpoly records some
    assert f"failures: {f'runtime_error {failed}' if failed else 'none'};" in lines[-1]
    # what the executor does then (replay runs each trial inline: nothing left in flight)
    assert "; builds: 0 queued, 0 running; measuring: inline 0; " in lines[-1]
    assert main(search(db, "9trials", "--json")) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert "tunex: trial" not in captured.err  # --json: the summary only
    assert (summary["trials"], summary["new_trials"], summary["stopped"]) == (9, 3,
                                                                              "trial budget")
    assert summary["kernel"] == "cn_pnpoly" and set(summary["config"]) >= {"tile_size"}
    assert summary["best_ms"] > 0 and set(summary["failures"]) <= {"runtime_error"}
    assert main(["db", "workloads", "--db", str(db), "--json"]) == 0
    (w,) = json.loads(capsys.readouterr().out)
    assert w["workload"] == summary["workload"] and w["trials"] == 9
    assert w["best_ms"] == summary["best_ms"]


def test_version_help_defaults_and_strategies(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"tunex {tunex.__version__}"
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 100trials)" in text and "(default: model)" in text
    assert "(default: $TUNEX_DB, else ~/.cache/tunex/tunex.db)" in text  # one default db
    assert "--log-level LEVEL" in text
    assert main(["strategies"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line and line[0] != " "}
    assert "also: grid" in rows["exhaustive"] and "default" in rows["model"]
    assert {"random", "optuna:VARIANT"} <= set(rows) and "proposals" in out


def test_logging_options_after_the_subcommand(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    assert tunex_cli(*search(db, "3trials"), "-q").returncode == 0
    again = tunex_cli(*search(db, "4trials"), "-q", "-v")
    assert again.returncode == 0 and "INFO tunex: resuming" in again.stderr
    quiet = tunex_cli(*search(db, "5trials"), "-q", "--log-level", "error")
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr
    bad = tunex_cli("db", "best", "--db", str(db), "--log-level", "loud")
    assert bad.returncode == 2 and "invalid choice: 'loud'" in bad.stderr


def test_no_traceback_when_the_reader_goes_away(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    assert main(["db", "import", str(recorded("pnpoly/RTX_2080_Ti.json.gz")), "--db",
                 str(db)]) == 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(f"{sys.executable} -m tunex.cli db export --db {db} | head -n 2",
                          shell=True, capture_output=True, text=True, env=env, timeout=300)
    assert len(done.stdout.splitlines()) == 2 and done.stdout.startswith("trial,status")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
