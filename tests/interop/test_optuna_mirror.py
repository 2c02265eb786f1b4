"""A search mirrored into an Optuna storage as its trials end (what optuna-dashboard reads)."""

from __future__ import annotations

from pathlib import Path

import optuna

from tests._data import recorded
from tunex.cli import main
from tunex.db import Database


def test_search_is_mirrored_trial_by_trial_and_resumes(tmp_path: Path, capsys) -> None:
    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    db, storage = tmp_path / "run.db", f"sqlite:///{tmp_path / 'optuna.db'}"
    base = ["search", "--target", f"replay:{data}", "--strategy", "random", "--seed", "4",
            "--db", str(db), "-q"]
    assert main([*base, "--budget", "12trials"]) == 0  # recorded before the mirror existed
    assert main([*base, "--budget", "30trials", "--optuna-storage", storage]) == 0
    with Database(db, create=False) as d:
        (w,) = d.workloads()
        trials = d.trials(w)
        best = d.best(w)
    study = optuna.load_study(study_name=f"tunex:{w.kernel}:{w.digest}", storage=storage)
    mirrored = sorted(study.get_trials(), key=lambda t: t.user_attrs["tunex_trial"])
    assert [t.user_attrs["tunex_trial"] for t in mirrored] == [t.number for t in trials]
    for ft, t in zip(mirrored, trials):
        m = t.measurement
        assert ft.params == dict(m.config)
        assert ft.user_attrs["status"] == m.status.value
        assert (ft.state == optuna.trial.TrialState.COMPLETE) == m.ok
        assert ft.value == (m.value if m.ok else None)
    assert best is not None and study.best_value == best.value
    assert main([*base, "--budget", "30trials", "--optuna-storage", storage]) == 0
    assert len(study.get_trials()) == 30  # nothing twice
    capsys.readouterr()
    assert main([*base, "--budget", "31trials", "--optuna-storage", "nosuch://x"]) == 2
    assert "cannot open Optuna storage" in capsys.readouterr().err


def test_a_storage_in_the_tuning_database_is_refused(tmp_path: Path, capsys) -> None:
    """Optuna's tables (one of them ``trials``) never go into the tuning database; a storage
    that is another kind of SQLite file is one line, not a traceback."""
    import sqlite3

    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    db = tmp_path / "run.db"
    base = ["search", "--target", f"replay:{data}", "--strategy", "random", "--seed", "4",
            "--db", str(db), "-q"]
    assert main([*base, "--budget", "3trials"]) == 0

    def tables(path: Path) -> set[str]:
        with sqlite3.connect(path) as c:
            return {r[0] for r in c.execute("select name from sqlite_master where type='table'")}

    before = tables(db)
    capsys.readouterr()
    for storage in (f"sqlite:///{db}", f"sqlite:///{tmp_path}/./run.db"):
        assert main([*base, "--budget", "6trials", "--optuna-storage", storage]) == 2
        assert "is the tuning database" in capsys.readouterr().err
    assert tables(db) == before and "studies" not in before
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as c:
        c.execute("create table trials (x integer)")
    assert main([*base, "--budget", "6trials", "--optuna-storage", f"sqlite:///{other}"]) == 2
    assert "another application's SQLite database" in capsys.readouterr().err
    assert tables(other) == {"trials"}  # Optuna added its tables to it before it failed
    another = tmp_path / "another.db"  # another tunex database
    assert main(["search", "--target", f"replay:{data}", "--budget", "2trials", "-q", "--db",
                 str(another)]) == 0
    mine = tables(another)
    capsys.readouterr()
    assert main([*base, "--budget", "6trials", "--optuna-storage", f"sqlite:///{another}"]) == 2
    assert "is a tunex tuning database" in capsys.readouterr().err
    assert tables(another) == mine
    notdb = tmp_path / "notes.txt"
    notdb.write_text("not a database")
    assert main([*base, "--budget", "6trials", "--optuna-storage", f"sqlite:///{notdb}"]) == 2
    assert "cannot open Optuna storage" in capsys.readouterr().err
    with Database(db, create=False) as d:
        assert d.count(d.workloads()[0]) == 3
