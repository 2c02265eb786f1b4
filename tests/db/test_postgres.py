"""The tuning database on a real PostgreSQL server (started by the ``postgres_url`` fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tunex.db import SCHEMA_VERSION, Database
from tunex.errors import DatabaseError
from tunex.trial import Config, Measurement, Status

from .test_database import (
    CONV,
    MM,
    MM2,
    check_writers,
    fill,
    ok,
    run_writers,
    sample_measurements,
)
from .test_database import (
    test_a_config_that_once_gave_a_wrong_result_never_ranks as wrong_result_never_ranks,
)

pytestmark = pytest.mark.postgres



def test_a_wrong_result_keeps_a_config_from_ranking_on_a_server(pg_url: str) -> None:
    with Database(pg_url) as db:
        wrong_result_never_ranks(db)


def test_round_trip_numbers_and_ranking(pg_url: str) -> None:
    ms = sample_measurements()
    with Database(pg_url) as db:
        assert db.path is None and db.url == pg_url
        assert [db.record(MM, m, strategy="tpe") for m in ms] == [1, 2, 3, 4, 5, 6]
        assert db.record(CONV, ms[0]) == 1
    with Database(pg_url, create=False) as db:
        assert db.measurements(MM) == ms  # floats, tuples, failures: exactly
        assert db.count(MM) == 6 and db.count(MM2) == 0
        assert db.best(MM) == ms[3]
        assert db.top_k(MM, 10) == [ms[3], ms[0], ms[5]]
        assert [w for w, _ in db.best_per_workload("matmul")] == [MM]
        assert [w for w, _ in db.history(exclude=MM)] == [CONV]
        db.record(MM, ok(ms[3].config, 0.75, 5.0, 5.0))  # re-measured: pooled median 5.0
        assert db.best(MM) == ms[0]


def test_several_processes_writing_at_once_lose_nothing(pg_url: str) -> None:
    got = run_writers(pg_url)  # the writers also race to create the schema
    with Database(pg_url) as db:
        check_writers(db, got)


def test_export_import_round_trip(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    with Database(tmp_path / "local.db") as local:
        ms = fill(local)
        local.export(path)
    with Database(pg_url) as db:
        assert db.import_trials(path) == 7
        assert db.import_trials(path) == 0
        assert db.measurements(MM) == ms


def test_empty_database_with_create_false_and_newer_schema(pg_url: str) -> None:
    with pytest.raises(DatabaseError, match="holds no tuning database yet"):
        Database(pg_url, create=False)
    Database(pg_url).close()
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE tunex_meta SET value = '7' WHERE key = 'schema_version'")
    engine.dispose()
    with pytest.raises(
        DatabaseError,
        match=rf"newer tunex \(schema 7, this tunex knows "
        rf"{SCHEMA_VERSION}\): upgrade tunex",
    ):
        Database(pg_url)


def test_failures_are_stored(pg_url: str) -> None:
    with Database(pg_url) as db:
        db.record(MM, Measurement.failed(Config(b=1), Status.WORKER_LOST, "node died"))
        (back,) = db.measurements(MM)
        assert db.best(MM) is None
    assert back.status is Status.WORKER_LOST and back.error == "node died"
    assert back.times_ms == ()


def test_a_v1_database_is_migrated_with_its_data(pg_url: str) -> None:
    ms = sample_measurements()[:4]
    with Database(pg_url) as db:
        for m in ms:
            db.record(MM, m)
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:  # back to the v1 shape
        conn.exec_driver_sql("DROP INDEX ix_trials_workload_value")
        conn.exec_driver_sql("ALTER TABLE trials DROP COLUMN strategy")
        conn.exec_driver_sql("ALTER TABLE workloads DROP COLUMN space")
        conn.exec_driver_sql("DROP TABLE claims")
        conn.exec_driver_sql("DROP TABLE decisions")
        conn.exec_driver_sql("UPDATE tunex_meta SET value = '1'")
    with Database(pg_url) as db:
        assert db.measurements(MM) == ms and db.best(MM) == ms[3]
        assert db.record(MM, ok(Config(b=1), 1.0), strategy="tpe") == 5
        assert db.trials(MM)[-1].strategy == "tpe"
        # the migrated table numbers its rows as the created one does
        first = db.record_decision(MM, ms[3].config, "db", mode="never")
        second = db.record_decision(MM, Config(b=1), "tuned", mode="on_miss")
        assert db.decisions(MM) == [first, second] and first.trial == 4
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT value FROM tunex_meta").scalar() == "4"
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes("trials")}
    engine.dispose()
    assert "ix_trials_workload_value" in indexes
