"""The tuning database on SQLite: storage, ranking, concurrency, damaged files, migrations."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import multiprocessing
import os
import pickle
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tunex.db import SCHEMA_VERSION, Database, Trial
from tunex.errors import DatabaseError
from tunex.trial import Config, Measurement, Status, Workload

MM = Workload("matmul", "abc123", {"M": 1024, "N": 512, "dtype": "fp16"}, {"device": "H100"})
MM2 = Workload("matmul", "abc123", {"M": 64, "N": 64, "dtype": "fp16"}, {"device": "H100"})
CONV = Workload("conv", "def456", {"C": 64}, {"device": "H100"})


def ok(config: Config, *times: float, **kwargs) -> Measurement:
    return Measurement(config, Status.OK, times, **kwargs)


def sample_measurements() -> list[Measurement]:
    return [
        ok(
            Config(block=64, order=(2, 0, 1), vec=True),
            1.25,
            1.5,
            1.0 / 3.0,
            compile_ms=812.5,
            facts={"regs": 96, "smem": 49152, "spills": [0, 1]},
            worker="gpu0",
            started_at=1700000000.123456,
            ended_at=1700000001.654321,
        ),
        Measurement.failed(
            Config(block=256, order=(0, 1, 2), vec=False),
            Status.COMPILE_ERROR,
            "out of resources: shared memory",
            compile_ms=20.0,
            worker="cpu3",
        ),
        Measurement.failed(Config(block=128, order=(1, 0, 2), vec=True), Status.TIMEOUT),
        ok(Config(block=32, order=(0, 2, 1), vec=False), 0.75, worker="gpu1"),
        Measurement(Config(block=16, order=(0, 1, 2), vec=True), Status.OK, ()),  # ok, no times
        ok(Config(block=64, order=(0, 1, 2), vec=False), 2.0, 2.5),
    ]


@pytest.fixture
def db(tmp_path: Path):
    with Database(tmp_path / "tune.db") as database:
        yield database


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- storage -----------------------------------------------------------------------------------


def test_measurements_round_trip_exactly_including_failures(tmp_path: Path) -> None:
    ms = sample_measurements()
    path = tmp_path / "tune.db"
    with Database(path) as db:
        numbers = [db.record(MM, m, strategy="tpe" if i % 2 else None) for i, m in enumerate(ms)]
        assert numbers == [1, 2, 3, 4, 5, 6]
        assert db.measurements(MM) == ms
    with Database(path, create=False) as db:  # and after reopening
        back = db.measurements(MM)
        trials = db.trials(MM)
    assert back == ms
    assert back[0].config["order"] == (2, 0, 1) and isinstance(back[0].config["order"], tuple)
    assert back[0].times_ms[2] == 1.0 / 3.0
    assert back[1].times_ms == () and math.isinf(back[1].value)
    assert back[1].error == "out of resources: shared memory" and back[1].compile_ms == 20.0
    assert back[2].status is Status.TIMEOUT
    assert [t.number for t in trials] == [1, 2, 3, 4, 5, 6]
    assert [t.strategy for t in trials] == [None, "tpe"] * 3
    assert all(isinstance(t, Trial) and t.workload == MM for t in trials)
    assert all(abs(t.recorded_at - time.time()) < 60 for t in trials)


def test_numbers_count_per_workload_and_unknown_workloads_are_empty(db: Database) -> None:
    cfg = Config(block=1)
    assert [db.record(MM, ok(cfg, 1.0)) for _ in range(3)] == [1, 2, 3]
    assert db.record(CONV, ok(cfg, 1.0)) == 1
    assert db.record(MM, Measurement.failed(cfg, Status.RUNTIME_ERROR)) == 4
    assert (db.count(MM), db.count(CONV), db.count(MM2)) == (4, 1, 0)
    assert db.trials(MM2) == [] and db.measurements(MM2) == []
    assert db.best(MM2) is None and db.top_k(MM2, 3) == []


def test_in_memory_databases_are_private_and_thread_safe() -> None:
    with Database("sqlite://") as a, Database("sqlite://") as b:
        assert a.path is None
        a.record(MM, ok(Config(x=1), 1.0))
        assert (a.count(MM), b.count(MM)) == (1, 0)

        def write(worker: int) -> None:
            for i in range(25):
                a.record(MM, ok(Config(x=i), 1.0, worker=str(worker)))

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [t.number for t in a.trials(MM)] == list(range(1, 102))


def test_closed_database_says_so(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db")
    db.close()
    with pytest.raises(DatabaseError, match="closed: open a new Database"):
        db.count(MM)


def test_database_pickles_as_its_url(db: Database) -> None:
    db.record(MM, ok(Config(x=1), 1.0))
    clone = pickle.loads(pickle.dumps(db))
    try:
        assert clone.url == db.url and clone.count(MM) == 1
    finally:
        clone.close()
    with Database("sqlite://") as memory, pytest.raises(DatabaseError, match="in-memory"):
        pickle.dumps(memory)


# -- ranking -----------------------------------------------------------------------------------


def test_best_and_top_k_rank_ok_trials_only(db: Database) -> None:
    ms = sample_measurements()
    for m in ms:
        db.record(MM, m)
    assert db.best(MM) == ms[3]  # 0.75 ms
    assert db.top_k(MM, 10) == [ms[3], ms[0], ms[5]]  # failures and empty ok never rank
    assert db.top_k(MM, 2) == [ms[3], ms[0]]
    assert db.top_k(MM, 0) == []
    with pytest.raises(ValueError):
        db.top_k(MM, -1)

    # a space that dropped block 32 (the best): the best of its own points, then the rest
    from tunex.space import Bool, Choice, Permutation, Space

    now = Space([Choice("block", [16, 64, 128, 256]), Permutation("order", (0, 1, 2)),
                 Bool("vec")])
    assert db.best(MM, now) == ms[0] and db.top_k(MM, 10, now) == [ms[0], ms[5]]
    assert db.best_per_workload() == [(MM, ms[3])]
    db.declare_space(MM, now)  # what a search of the changed kernel declares: its best now
    assert db.best_per_workload() == [(MM, ms[0])]

    only_failures = Workload("matmul", "x", {"M": 1})
    db.record(only_failures, Measurement.failed(Config(b=1), Status.WRONG_RESULT))
    assert db.best(only_failures) is None and db.top_k(only_failures, 5) == []


def test_a_remeasured_config_is_ranked_by_its_pooled_median(db: Database) -> None:
    a, b = Config(block=32), Config(block=64)
    db.record(MM, ok(a, 1.0, 1.0, 1.0, started_at=10.0, ended_at=11.0))  # lucky first run
    db.record(MM, ok(b, 1.5, 1.5, 1.5))
    db.record(MM, Measurement.failed(a, Status.TIMEOUT))  # failures do not join the pool
    db.record(MM, ok(a, 2.0, 2.0, 2.0, 2.0, started_at=20.0, ended_at=21.0, worker="gpu1"))
    top = db.top_k(MM, 5)
    assert [m.config for m in top] == [b, a]  # a pooled: median of 1,1,1,2,2,2,2 = 2.0
    assert top[1].times_ms == (1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0)
    assert (top[1].value, top[1].started_at, top[1].ended_at, top[1].worker) == (
        2.0,
        10.0,
        21.0,
        "gpu1",
    )
    assert db.best(MM) == top[0]
    assert [m.value for m in db.top_k(MM, 5)] == [1.5, 2.0]


def test_a_config_that_once_gave_a_wrong_result_never_ranks(db: Database) -> None:
    # a kernel that is right on one run and wrong on another (a race, an uninitialised read)
    # is not correct: its ok runs do not make it a winner, in top_k, best or best_per_workload
    a, b = Config(block=32), Config(block=64)
    db.record(MM, ok(a, 1.0))
    db.record(MM, ok(b, 1.5))
    db.record(MM, Measurement.failed(a, Status.WRONG_RESULT, "y: 1 of 100 elements off"))
    db.record(MM2, ok(a, 1.0))  # another workload's wrong result says nothing of this one
    assert [m.config for m in db.top_k(MM, 5)] == [b]
    assert db.best(MM).config == b
    assert [(w, m.config) for w, m in db.best_per_workload()] == [(MM, b), (MM2, a)]


def test_ranking_reads_the_trials_once_not_once_per_trial(db: Database) -> None:
    # best/top_k/best_per_workload once rescanned a workload's trials for every trial (a
    # correlated subquery looking for wrong results): db workloads took over 10 minutes on a
    # database of 100k trials. Each statement they run is checked by SQLite's own plan.
    db.record(MM, ok(Config(block=32), 1.0))
    statements: list[tuple[str, object]] = []
    engine = db._engine
    assert engine is not None

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        db.best(MM), db.top_k(MM, 3), db.best_per_workload()
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    ranked = [(s, p) for s, p in statements if "wrong_result" in str(p) or "wrong" in s]
    assert ranked
    with sqlite3.connect(db.path) as con:
        for statement, parameters in ranked:
            plan = con.execute(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
            assert not [row for row in plan if "CORRELATED" in row[-1]], plan


def test_ties_go_to_the_config_measured_first(db: Database) -> None:
    for block in (8, 4, 16):
        db.record(MM, ok(Config(block=block), 1.0))
    assert [m.config["block"] for m in db.top_k(MM, 3)] == [8, 4, 16]


def test_workloads_best_per_workload_and_history(db: Database) -> None:
    db.record(MM, ok(Config(b=1), 3.0))
    db.record(CONV, ok(Config(b=1), 9.0))
    db.record(MM, ok(Config(b=2), 2.0))
    db.record(MM2, Measurement.failed(Config(b=1), Status.COMPILE_ERROR))
    db.record(CONV, ok(Config(b=2), 7.0))

    assert db.workloads() == [MM, CONV, MM2]
    assert db.workloads("matmul") == [MM, MM2] and db.workloads("nope") == []
    best = db.best_per_workload()
    assert [(w, m.value) for w, m in best] == [(MM, 2.0), (CONV, 7.0)]  # MM2 has no ok trial
    assert [w for w, _ in db.best_per_workload("conv")] == [CONV]

    history = db.history()
    assert [w for w, _ in history] == [MM, CONV, MM2]
    assert [m.value for m in history[0][1]] == [3.0, 2.0]
    assert history[2][1][0].status is Status.COMPILE_ERROR  # failures are data
    assert [w for w, _ in db.history("matmul", exclude=MM)] == [MM2]
    assert db.history(exclude=CONV) == [h for h in history if h[0] != CONV]


# -- several processes ---------------------------------------------------------------------------


def record_many(url: str, worker: int, n: int, barrier, results) -> None:
    """Child process: open the database (all at once), record n trials, report the numbers."""
    barrier.wait()
    with Database(url) as db:
        numbers = [
            db.record(
                MM, ok(Config(worker=worker, i=i), 1.0 + i, worker=f"w{worker}"), strategy="random"
            )
            for i in range(n)
        ]
    results.put((worker, numbers))


def run_writers(url: str, processes: int = 4, per_process: int = 50) -> dict[int, list[int]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=record_many, args=(url, w, per_process, barrier, results))
        for w in range(processes)
    ]
    for p in procs:
        p.start()
    try:
        got = dict(results.get(timeout=120) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    return got


def check_writers(
    db: Database, got: dict[int, list[int]], processes: int = 4, per_process: int = 50
) -> None:
    total = processes * per_process
    trials = db.trials(MM)
    assert db.count(MM) == total
    assert [t.number for t in trials] == list(range(1, total + 1))
    assert sorted(n for numbers in got.values() for n in numbers) == list(range(1, total + 1))
    for worker, numbers in got.items():
        assert numbers == sorted(numbers)  # each writer's trials in its own order
        mine = [t for t in trials if t.measurement.worker == f"w{worker}"]
        assert [t.number for t in mine] == numbers
        assert [t.measurement.config["i"] for t in mine] == list(range(per_process))


def test_several_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"  # created by the writers themselves, all at once
    got = run_writers(str(path))
    with Database(path, create=False) as db:
        check_writers(db, got)


def test_opening_a_new_file_waits_out_a_writer_instead_of_failing(tmp_path: Path) -> None:
    # Switching a new file to write-ahead logging while another connection holds its write
    # lock makes SQLite answer "database is locked" at once, busy_timeout or not (that is how
    # processes creating one database together failed); opening must wait the writer out.
    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    release.start()
    try:
        start = time.monotonic()
        with Database(path) as db:
            db.record(MM, ok(Config(a=1), 1.0), strategy="random")
        assert time.monotonic() - start >= 0.4  # it did wait for the writer
    finally:
        release.join()
        other.close()
    with Database(path, create=False) as db:
        assert db.count(MM) == 1


# -- damaged, foreign, missing and newer files -----------------------------------------------


def no_side_files(path: Path) -> bool:
    return not any(Path(f"{path}{s}").exists() for s in ("-wal", "-shm", "-journal"))


def test_ctrl_c_inside_a_write_leaves_no_lock_behind(tmp_path: Path, monkeypatch) -> None:
    """A Ctrl-C that lands in the driver in the middle of a write: the connection SQLAlchemy
    dropped kept its cursor (held by the traceback's frames in a reference cycle), so SQLite
    kept the write lock until the garbage collector ran, and the search's release of its
    claims right after waited 30 s and failed with "another process kept it locked"."""
    import gc

    from sqlalchemy.engine import default

    path = tmp_path / "kbi.db"
    with Database(path) as db:
        real = default.DefaultDialect.do_execute
        statements: list[str] = []

        def counted(self, cursor, statement, parameters, context=None):
            statements.append(statement)
            real(self, cursor, statement, parameters, context)

        db.record(MM, ok(Config(a=0), 1.0))
        monkeypatch.setattr(default.DefaultDialect, "do_execute", counted)
        db.record(MM, ok(Config(a=-1), 1.0))
        monkeypatch.setattr(default.DefaultDialect, "do_execute", real)
        for n in range(1, len(statements) + 1):  # after the first, second, ... statement
            calls = iter(range(n, 0, -1))

            def do_execute(self, cursor, statement, parameters, context=None, calls=calls):
                real(self, cursor, statement, parameters, context)
                if next(calls, 0) == 1:
                    raise KeyboardInterrupt

            monkeypatch.setattr(default.DefaultDialect, "do_execute", do_execute)
            gc.disable()  # what would free the lock by chance
            try:
                with pytest.raises(KeyboardInterrupt):
                    db.record(MM, ok(Config(a=n), 1.0))
                other = sqlite3.connect(path, timeout=0)
                try:
                    other.execute("BEGIN IMMEDIATE")  # "database is locked" before
                    other.execute("ROLLBACK")
                finally:
                    other.close()
            finally:
                gc.enable()
                monkeypatch.setattr(default.DefaultDialect, "do_execute", real)
        assert db.record(MM, ok(Config(a=99), 1.0)) >= 2


def test_random_bytes_are_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(os.urandom(4096))
    before = file_digest(path)
    for create in (True, False):
        with pytest.raises(DatabaseError) as err:
            Database(path, create=create)
        assert str(path) in str(err.value)
        assert "move it aside or pass another --db" in str(err.value)
    assert file_digest(path) == before and no_side_files(path)


def filled_database(path: Path, n: int = 300) -> None:
    with Database(path) as db:
        for i in range(n):
            db.record(MM, ok(Config(block=i, note="x" * 200), 1.0 + i))


@pytest.mark.parametrize("keep", [0.5, 60 / 4096])
def test_truncated_file_is_refused_and_left_untouched(tmp_path: Path, keep: float) -> None:
    path = tmp_path / "cut.db"
    filled_database(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    before = file_digest(path)
    with pytest.raises(DatabaseError, match=r"truncated.*move it aside or pass another --db"):
        Database(path)
    assert file_digest(path) == before and no_side_files(path)


def test_garbled_pages_are_reported_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "garbled.db"
    filled_database(path, 50)
    data = bytearray(path.read_bytes())
    data[4096:] = os.urandom(len(data) - 4096)  # keep page 1 (the schema), garble the rest
    path.write_bytes(bytes(data))
    before = file_digest(path)
    with (
        pytest.raises(DatabaseError, match=r"corrupt.*move it aside or pass another --db"),
        Database(path) as db,
    ):
        db.trials(MM)
    assert file_digest(path) == before


def test_another_applications_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()
    before = file_digest(path)
    with pytest.raises(DatabaseError, match=r"another application \(tables: users\)"):
        Database(path)
    assert file_digest(path) == before and no_side_files(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_database_of_a_newer_tunex_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with Database(path) as db:
        db.record(MM, ok(Config(x=1), 1.0))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE tunex_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = file_digest(path)
    with pytest.raises(DatabaseError) as err:
        Database(path)
    assert (
        f"written by a newer tunex (schema 99, this tunex knows {SCHEMA_VERSION}): upgrade tunex"
    ) in str(err.value)
    assert file_digest(path) == before


def test_missing_or_empty_file_with_create_false(tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "none.db"
    with pytest.raises(DatabaseError, match=r"no tuning database at .*none\.db"):
        Database(missing, create=False)
    assert not missing.exists() and not missing.parent.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(DatabaseError, match="create=True"):
        Database(empty, create=False)
    with Database(missing) as db:  # create=True makes the directory and the file
        assert db.count(MM) == 0
    assert missing.exists()


def test_unreachable_server_fails_fast_with_masked_url() -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql+psycopg://tunex:s3cret-pw@127.0.0.1:{free_port()}/tuning"
    start = time.monotonic()
    with pytest.raises(DatabaseError) as err:
        Database(url)
    message = str(err.value)
    assert time.monotonic() - start < 10
    assert "s3cret-pw" not in message and "tunex:***@127.0.0.1" in message
    assert "check that the server is running" in message


def free_port() -> int:
    """A local port nothing listens on (free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_repr_and_errors_mask_the_password() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(DatabaseError) as err:
        Database(f"postgresql://me:hunter2@127.0.0.1:{free_port()}/db")  # psycopg 3 by default
    assert "hunter2" not in str(err.value) and "postgresql+psycopg://me:***@" in str(err.value)


# -- migrations ----------------------------------------------------------------------------------

V1_SCHEMA = """
CREATE TABLE tunex_meta (key VARCHAR(64) NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE workloads (
    id INTEGER NOT NULL PRIMARY KEY, digest VARCHAR(64) NOT NULL UNIQUE, kernel TEXT NOT NULL,
    kernel_hash TEXT NOT NULL, problem TEXT NOT NULL, target TEXT NOT NULL,
    created_at FLOAT NOT NULL);
CREATE TABLE trials (
    id INTEGER NOT NULL PRIMARY KEY, workload_id INTEGER NOT NULL REFERENCES workloads (id),
    number INTEGER NOT NULL, config_key TEXT NOT NULL, config TEXT NOT NULL,
    status VARCHAR(32) NOT NULL, value_ms FLOAT, times_ms TEXT NOT NULL, compile_ms FLOAT,
    facts TEXT NOT NULL, error TEXT, worker TEXT, started_at FLOAT NOT NULL,
    ended_at FLOAT NOT NULL, recorded_at FLOAT NOT NULL,
    CONSTRAINT uq_trials_workload_number UNIQUE (workload_id, number));
INSERT INTO tunex_meta VALUES ('schema_version', '1');
"""


def make_v1(path: Path, ms: list[Measurement]) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.execute(
        "INSERT INTO workloads VALUES (1, ?, ?, ?, ?, ?, 0.0)",
        (MM.digest, MM.kernel, MM.kernel_hash, json.dumps(MM.problem), json.dumps(MM.target)),
    )
    for number, m in enumerate(ms, start=1):
        conn.execute(
            "INSERT INTO trials (workload_id, number, config_key, config, status, value_ms, "
            "times_ms, compile_ms, facts, error, worker, started_at, ended_at, recorded_at) "
            "VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 5.0)",
            (
                number,
                m.config.key,
                m.config.key,
                m.status.value,
                m.value if m.ok else None,
                json.dumps(list(m.times_ms)),
                m.compile_ms,
                json.dumps(dict(m.facts)),
                m.error,
                m.worker,
                m.started_at,
                m.ended_at,
            ),
        )
    conn.commit()
    conn.close()


def schema_of(path: Path) -> tuple[dict[str, set[str]], set[str]]:
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        insp = sa.inspect(engine)
        columns = {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}
        indexes = {str(i["name"]) for t in columns for i in insp.get_indexes(t)}
        return columns, indexes
    finally:
        engine.dispose()


def assert_migrated(path: Path, tmp_path: Path, index: str) -> None:
    """``path`` is at the current schema version, with the schema of a fresh database."""
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM tunex_meta").fetchall() == [(str(SCHEMA_VERSION),)]
    conn.close()
    fresh = tmp_path / "fresh.db"
    Database(fresh).close()
    assert schema_of(path) == schema_of(fresh)
    assert index in schema_of(path)[1]


def test_a_v1_database_is_migrated_with_its_data(tmp_path: Path) -> None:
    assert SCHEMA_VERSION == 4
    ms = sample_measurements()[:4]
    path = tmp_path / "v1.db"
    make_v1(path, ms)
    with Database(path, create=False) as db:
        assert db.measurements(MM) == ms
        assert [t.strategy for t in db.trials(MM)] == [None] * 4
        assert db.best(MM) == ms[3]
        assert db.record(MM, ok(Config(block=1), 0.5), strategy="tpe") == 5
        assert db.trials(MM)[-1].strategy == "tpe"
    assert_migrated(path, tmp_path, "ix_trials_workload_value")


def make_v3(path: Path, ms: list[Measurement]) -> None:
    """A database as tunex wrote it at schema 3: v1, brought to v3 by the steps of the time."""
    from tunex.db import _schema

    make_v1(path, ms)
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            for step in _schema.MIGRATIONS[:2]:
                step(conn)
            conn.execute(sa.text("UPDATE tunex_meta SET value = '3' "
                                 "WHERE key = 'schema_version'"))
    finally:
        engine.dispose()


def test_a_v3_database_is_migrated_and_records_decisions(tmp_path: Path) -> None:
    ms = sample_measurements()[:4]
    path = tmp_path / "v3.db"
    make_v3(path, ms)
    assert "decisions" not in schema_of(path)[0]
    with Database(path, create=False) as db:
        assert db.measurements(MM) == ms and db.decisions() == []
        d = db.record_decision(MM, ms[3].config, "db", detail="best in the database",
                               mode="never", key={"M": 1000}, time_ms=0.75, seconds=0.01)
        assert d.trial == 4  # the trial the config came from
        assert db.decisions(MM) == [d]
    assert_migrated(path, tmp_path, "ix_decisions_workload")


# -- decisions of the decorator ------------------------------------------------------------------


def test_decisions_round_trip(db: Database) -> None:
    from tunex.db import decisions_dataframe

    ms = fill(db)  # MM: a config measured ok as trial 1, one that failed as trial 2
    tuned = db.record_decision(MM, ms[0].config, "tuned", detail="tuned 6 trials in 1.0 s",
                               mode="on_miss", key={"M": 1000, "N": 500, "dtype": "fp16"},
                               time_ms=ms[0].value, seconds=1.0)
    failed = db.record_decision(MM, ms[1].config, "default", mode="never")
    pack = db.record_decision(MM2, Config(block=64, order=(0, 1, 2), vec=True), "pack",
                              detail="pack mylib-1.2 exact device", mode="never")
    conv = db.record_decision(CONV, Config(tile=(2, 2), status="x"), "model", detail="predicted")
    assert (tuned.trial, failed.trial, pack.trial, conv.trial) == (1, None, None, None)
    assert tuned.host == socket.gethostname() and tuned.pid == os.getpid()
    assert tuned.decided_at <= failed.decided_at <= time.time()
    # in workload order (as first recorded), oldest first within one; values as recorded
    assert db.decisions() == [tuned, failed, conv, pack]
    assert db.decisions(MM) == [tuned, failed] and db.decisions(MM2) == [pack]
    assert db.decisions(kernel="conv") == [conv]
    assert db.decisions(Workload("unknown")) == []
    assert db.decisions(MM)[0].key == {"M": 1000, "N": 500, "dtype": "fp16"}
    assert db.decisions(CONV)[0].config == Config(tile=(2, 2), status="x")
    # a decision makes its workload known, with no trial (MM2 had none)
    assert MM2 in db.workloads() and db.count(MM2) == 0 and db.best(MM2) is None
    with pytest.raises(ValueError, match="unknown decision source 'cache'"):
        db.record_decision(MM, ms[0].config, "cache")

    df = decisions_dataframe(db, MM.digest[:8])
    assert list(df["source"]) == ["tuned", "default"] and len(df) == 2
    assert list(df.columns[:5]) == ["decided_at", "source", "config", "detail", "trial"]
    assert str(df["trial"].dtype) == "Int64" and df["trial"].iloc[0] == 1
    assert df["trial"].isna().iloc[1] and str(df["decided_at"].dt.tz) == "UTC"
    assert json.loads(df["key"].iloc[0]) == {"M": 1000, "N": 500, "dtype": "fp16"}
    assert set(decisions_dataframe(db)["kernel"]) == {"matmul", "conv"}


def test_tunings_that_recorded_no_end_are_cut_short_until_one_ends(db: Database) -> None:
    ms = fill(db)
    assert db.cut_short(MM) == []  # none began
    first = db.record_decision(MM, ms[0].config, "tuning", mode="on_miss")
    assert db.decisions(MM) == [] and db.decisions(MM, begun=True) == [first]  # marks hidden
    assert db.cut_short(MM) == [first] and not first.process_ended()  # this process: running
    assert first.by_this_process()
    other = db.record_decision(MM2, ms[0].config, "tuning")  # another workload's: its own
    second = db.record_decision(MM, ms[0].config, "tuning", mode="on_miss")
    assert db.cut_short(MM) == [first, second] and db.cut_short(MM2) == [other]
    tuned = db.record_decision(MM, ms[0].config, "tuned", mode="on_miss")
    assert db.cut_short(MM) == [] and db.decisions(MM) == [tuned]  # its process ended it
    third = db.record_decision(MM, ms[0].config, "tuning", mode="on_miss")
    assert db.cut_short(MM) == [third]
    # another process's decision ends it only if it is a tuning's end (they share the search)
    fourth = db.record_decision(MM, ms[0].config, "tuning", mode="on_miss")
    with sqlite3.connect(db.path) as conn:
        conn.execute("UPDATE decisions SET pid = pid + 1 WHERE id = (SELECT max(id) FROM "
                     "decisions)")  # the fourth mark: another process's
    fourth = dataclasses.replace(fourth, pid=fourth.pid + 1)
    assert db.cut_short(MM) == [third, fourth]
    db.record_decision(MM, ms[0].config, "db", mode="never")  # this process's: ends the third
    assert db.cut_short(MM) == [fourth]
    db.record_decision(MM, ms[0].config, "tuned", mode="on_miss")
    assert db.cut_short(MM) == []
    third = db.record_decision(MM, ms[0].config, "tuning", mode="on_miss")
    # a mark of a process that is gone (as the decorator's resume sees it)
    import subprocess
    import sys
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = dataclasses.replace(third, pid=int(gone.stdout))
    assert not dead.by_this_process()
    assert dead.process_ended() and not dataclasses.replace(third, host="elsewhere",
                                                            pid=dead.pid).process_ended()


def test_decisions_stay_in_their_database_on_export(db: Database, tmp_path: Path) -> None:
    fill(db)
    db.record_decision(MM, Config(block=64, order=(2, 0, 1), vec=True), "db", mode="never")
    path = tmp_path / "trials.jsonl"
    n = db.export(path)
    assert n == len(db.export_rows()) and "never" not in path.read_text()
    with Database(tmp_path / "copy.db") as copy:
        assert copy.import_trials(path) == n
        assert copy.decisions() == [] and copy.measurements(MM) == db.measurements(MM)


def test_a_failed_migration_leaves_the_database_as_it_was(tmp_path: Path, monkeypatch) -> None:
    from tunex.db import _schema

    def broken(conn: sa.Connection) -> None:
        conn.execute(sa.text("ALTER TABLE trials ADD COLUMN strategy TEXT"))
        raise sa.exc.OperationalError("step 2", {}, Exception("disk on fire"))

    path = tmp_path / "v1.db"
    make_v1(path, sample_measurements()[:2])
    monkeypatch.setattr(_schema, "MIGRATIONS", (broken,))
    with pytest.raises(DatabaseError, match="disk on fire"):
        Database(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM tunex_meta").fetchall() == [("1",)]
    assert "strategy" not in {row[1] for row in conn.execute("PRAGMA table_info(trials)")}
    conn.close()


# -- export and import ---------------------------------------------------------------------------


def fill(db: Database) -> list[Measurement]:
    ms = sample_measurements()
    for i, m in enumerate(ms):
        db.record(MM, m, strategy="grid" if i % 2 else None)
    db.record(CONV, ok(Config(tile=(4, 4), status="clash"), 3.0), strategy="tpe")
    return ms


def test_export_rows(db: Database) -> None:
    ms = fill(db)
    rows = db.export_rows(MM)
    assert len(rows) == len(ms)
    assert list(rows[0]) == [
        "trial",
        "status",
        "time_ms",
        "block",
        "order",
        "vec",
        "workload",
        "kernel",
        "compile_ms",
        "worker",
        "strategy",
        "error",
        "started_at",
        "ended_at",
    ]
    assert rows[0]["time_ms"] == ms[0].value and rows[0]["order"] == (2, 0, 1)
    assert (rows[1]["status"], rows[1]["time_ms"], rows[1]["error"]) == (
        "compile_error",
        None,
        "out of resources: shared memory",
    )
    assert rows[1]["workload"] == MM.digest and rows[1]["strategy"] == "grid"
    assert [r["trial"] for r in rows] == list(range(1, 7))
    conv = db.export_rows(CONV)[0]
    assert conv["config.status"] == "clash" and conv["status"] == "ok"  # a clashing name
    assert len(db.export_rows()) == 7


def test_export_csv(db: Database, tmp_path: Path) -> None:
    fill(db)
    path = tmp_path / "out.csv"
    assert db.export(path) == 7
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames is not None
    assert reader.fieldnames[:3] == ["trial", "status", "time_ms"]
    assert reader.fieldnames[-8:] == [
        "workload",
        "kernel",
        "compile_ms",
        "worker",
        "strategy",
        "error",
        "started_at",
        "ended_at",
    ]
    assert set(reader.fieldnames[3:-8]) == {
        "block",
        "config.status",
        "order",
        "tile",
        "vec",
    }
    assert rows[0]["order"] == "[2,0,1]" and float(rows[0]["time_ms"]) == 1.25
    assert rows[1]["time_ms"] == "" and rows[1]["status"] == "compile_error"
    assert rows[6]["tile"] == "[4,4]" and rows[6]["kernel"] == "conv"
    buffer = io.StringIO()
    assert db.export(buffer, format="csv", workload=CONV) == 1
    assert len(buffer.getvalue().strip().splitlines()) == 2


def test_export_csv_keeps_text_that_looks_like_a_formula_text(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db")
    w = Workload("=HYPERLINK(\"http://x\")", "h", {"n": 1}, {"device": "cpu"})
    m = Measurement(Config(flag="@SUM(A1)", opt="-O3", n=-2), Status.COMPILE_ERROR,
                    error="+cmd|' /C calc'!A0")
    db.record(w, m)
    path = tmp_path / "out.csv"
    assert db.export(path) == 1
    with open(path, newline="") as f:
        row = next(csv.DictReader(f))
    assert row["kernel"] == "'=HYPERLINK(\"http://x\")" and row["flag"] == "'@SUM(A1)"
    assert row["opt"] == "'-O3" and row["error"] == "'+cmd|' /C calc'!A0"
    assert row["n"] == "-2"  # a number is a number
    assert db.export_rows()[0]["kernel"] == w.kernel  # only the CSV cell is escaped


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_export_import_round_trip(tmp_path: Path, fmt: str) -> None:
    src = Database(tmp_path / "src.db")
    ms = fill(src)
    path = tmp_path / f"trials.{fmt}"
    assert src.export(path) == 7  # format from the suffix
    records = (
        json.loads(path.read_text())
        if fmt == "json"
        else [json.loads(line) for line in path.read_text().splitlines()]
    )
    assert records[0]["trial"] == 1 and records[0]["workload_spec"] == MM.to_dict()

    with Database(tmp_path / "dst.db") as dst:
        dst.record(MM, ok(Config(block=999, order=(0, 1, 2), vec=True), 9.0))  # one of its own
        assert dst.import_trials(path) == 7
        assert dst.measurements(MM)[1:] == ms
        assert [t.number for t in dst.trials(MM)] == list(range(1, 8))
        assert [t.strategy for t in dst.trials(MM)][1:] == [t.strategy for t in src.trials(MM)]
        assert dst.best(CONV) == src.best(CONV)
        assert dst.import_trials(path) == 0  # nothing twice
        assert src.import_trials(path) == 0
        assert dst.count(MM) == 7
    src.close()


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_an_export_to_a_gz_file_is_gzipped_and_imports(tmp_path: Path, fmt: str) -> None:
    """``-o trials.json.gz`` wrote plain CSV (the format read from ``.gz``, unknown) into a
    file named .json.gz; it is now the format before ``.gz``, gzip'd, and imports as it is."""
    import gzip

    from tunex.cli import main

    src = Database(tmp_path / "src.db")
    ms = fill(src)
    path = tmp_path / f"trials.{fmt}.gz"
    assert src.export(path) == 7
    plain = tmp_path / f"trials.{fmt}"
    src.export(plain)
    assert gzip.decompress(path.read_bytes()) == plain.read_bytes()
    with pytest.raises(DatabaseError, match=r"not a \.gz one"):
        src.export(tmp_path / "trials.parquet.gz")
    src.close()
    if fmt != "csv":
        assert main(["db", "import", str(path), "--db", str(tmp_path / "dst.db")]) == 0
        with Database(tmp_path / "dst.db") as dst:
            assert dst.measurements(MM) == ms


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_an_export_of_a_failed_timer_is_strict_json_and_imports(tmp_path: Path,
                                                                fmt: str) -> None:
    """A trial whose timer gave NaN or infinite times keeps them (as a runtime error): the
    export wrote them as NaN and Infinity tokens, which are not JSON (jq, JSON.parse and
    strict readers refuse the file)."""
    import math

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    src = Database(tmp_path / "src.db")
    src.record(MM, ok(Config(block=1, order=(0, 1, 2), vec=True), 1.0))
    src.record(MM, Measurement(Config(block=2, order=(0, 1, 2), vec=True), Status.OK,
                               (math.nan, math.inf, -math.inf, 2.0)))
    src.record(MM, Measurement(Config(block=3, order=(0, 1, 2), vec=True), Status.OK, (1.5,),
                               facts={"ipc": math.nan}))
    path = tmp_path / f"t.{fmt}"
    assert src.export(path) == 3
    text = path.read_text()
    records = (json.loads(text, parse_constant=refuse) if fmt == "json"
               else [json.loads(line, parse_constant=refuse) for line in text.splitlines()])
    assert records[1]["times_ms"] == ["NaN", "Infinity", "-Infinity", 2.0]
    assert records[1]["status"] == "runtime_error"
    assert records[2]["facts"] == {"ipc": "NaN"}
    with Database(tmp_path / "dst.db") as dst:
        assert dst.import_trials(path) == 3
        got = dst.measurements(MM)[1]
        assert got.status is Status.RUNTIME_ERROR and got.error == src.measurements(MM)[1].error
        assert [str(t) for t in got.times_ms] == ["nan", "inf", "-inf", "2.0"]
        assert dst.best(MM) == src.best(MM)
    src.close()


def test_import_skips_only_what_is_present(db: Database, tmp_path: Path) -> None:
    fill(db)
    path = tmp_path / "all.jsonl"
    db.export(path, format="jsonl")
    with Database(tmp_path / "partial.db") as other:
        other.import_trials(io.StringIO("".join(path.read_text().splitlines(True)[:3])))
        assert other.count(MM) == 3
        assert other.import_trials(path) == 4
        assert other.measurements(MM) == db.measurements(MM)


def test_import_of_a_pack_or_of_one_indented_record_says_what_it_is(db: Database,
                                                                   tmp_path: Path) -> None:
    # both start with "{" over several lines, and were read as jsonl: "Expecting property name
    # enclosed in double quotes: line 1 column 2", which sends the user looking for a typo
    from tunex.db import export_pack

    fill(db)
    pack = tmp_path / "mylib.json"
    export_pack(db, pack, name="mylib", version="1")
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(DatabaseError, match=r"is a config pack.*tunex pack import"):
            dst.import_trials(pack)
        one = tmp_path / "one.json"
        db.export(one, format="json")
        one.write_text(json.dumps(json.loads(one.read_text())[0], indent=2))
        assert dst.import_trials(one) == 1
        assert dst.measurements(MM) == db.measurements(MM)[:1]


def test_import_of_a_parquet_or_t4_export_says_what_it_is(db: Database, tmp_path: Path) -> None:
    """A parquet export was refused as unreadable ('utf-8' codec can't decode ...: check the
    path), T4 results as 'record 1 is not a full tunex trial (KeyError: workload_spec)'."""
    pytest.importorskip("pyarrow")
    from tunex.interop import export_t4

    fill(db)
    parquet, t4 = tmp_path / "t.parquet", tmp_path / "t4.json"
    db.export(parquet)
    export_t4(db, MM, t4)
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(DatabaseError, match=r"t\.parquet is a parquet export.*--format json"):
            dst.import_trials(parquet)
        with pytest.raises(DatabaseError, match=r"t4\.json holds T4 results.*--format json"):
            dst.import_trials(t4)
        assert dst.workloads() == []


@pytest.mark.parametrize("change, says", [
    ({"times_ms": "12"}, r"times_ms '12' is not a list"),  # was two repeats, 1 and 2 ms
    ({"times_ms": [True]}, r"times_ms \[True\] is not a list"),  # was 1 ms
    ({"workload_spec": {"kernel": "mm", "problem": [1, 2]}}, r"problem \[1, 2\] is not an"),
    ({"workload_spec": {"kernel": "mm", "target": "gpu"}}, r"target 'gpu' is not an object"),
    ({"workload_spec": {"kernel": 5}}, r"kernel 5 is not a name"),  # was the kernel '5'
])
def test_import_refuses_a_workload_or_times_of_the_wrong_kind(db: Database, tmp_path: Path,
                                                              change: dict, says: str) -> None:
    """Such records were imported: as other times than written, or as a workload that then
    broke db workloads, db best and tunex report with a traceback."""
    fill(db)
    path = tmp_path / "t.jsonl"
    db.export(path, format="jsonl", workload=MM)
    rec = json.loads(path.read_text().splitlines()[0])
    path.write_text(json.dumps({**rec, **change}) + "\n")
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(DatabaseError, match=r"record 1 .*" + says):
            dst.import_trials(path)
        assert dst.workloads() == []


def test_import_is_all_or_nothing(db: Database, tmp_path: Path) -> None:
    fill(db)
    path = tmp_path / "bad.jsonl"
    db.export(path, format="jsonl")
    lines = path.read_text().splitlines()
    broken = json.loads(lines[4])
    del broken["workload_spec"]
    lines[4] = json.dumps(broken)
    path.write_text("\n".join(lines) + "\n")
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(DatabaseError, match=r"record 5 .*nothing was imported"):
            dst.import_trials(path)
        assert dst.workloads() == []
        csv_path = tmp_path / "t.csv"
        db.export(csv_path)
        with pytest.raises(DatabaseError, match="CSV exports cannot be imported"):
            dst.import_trials(csv_path)


def test_export_rejects_unknown_format(db: Database, tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="use one of csv, json, jsonl"):
        db.export(tmp_path / "x.xml", format="xml")


@pytest.mark.parametrize("folder", ["src", "runs?2 #1 100%"])
def test_an_archived_database_on_a_read_only_medium_can_be_read(tmp_path, folder):
    """db export, best, workloads and pack export read a database they cannot write (issue:
    hardening, item 9); recording into it is a clear DatabaseError. A "?", "#" or "%" in its
    path made it 'unable to open database file' (the path went into a URI as is)."""
    import subprocess

    from tunex.cli import main as cli
    from tunex.errors import DatabaseError
    from tunex.trial import Config, Measurement, Status, Workload

    src = tmp_path / folder
    src.mkdir()
    wl = Workload("k", "", {"n": 1}, {"device": "d"})
    with Database(str(src / "a.db")) as db:
        for i in range(3):
            db.record(wl, Measurement(Config(a=i), Status.OK, (1.0 + i,)))
    ro = tmp_path / f"{folder} (read-only)"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True).returncode \
            or subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)],
                              capture_output=True).returncode:
        subprocess.run(["umount", str(ro)], capture_output=True)
        pytest.skip("cannot make a read-only bind mount here (needs root)")
    try:
        with Database(str(ro / "a.db"), create=False) as db:
            assert db.readonly and db.count(wl) == 3 and db.best(wl).value == 1.0
            with pytest.raises(DatabaseError):
                db.record(wl, Measurement(Config(a=9), Status.OK, (0.5,)))
        assert cli(["db", "export", "--db", str(ro / "a.db"), "--format", "csv", "-o",
                    str(tmp_path / "t.csv")]) == 0
        assert cli(["db", "best", "--db", str(ro / "a.db"), "--json"]) == 0
        assert cli(["db", "workloads", "--db", str(ro / "a.db")]) == 0
        assert cli(["pack", "export", "--db", str(ro / "a.db"), "-o",
                    str(tmp_path / "p.json")]) == 0
        assert sorted(p.name for p in ro.iterdir()) == ["a.db"]  # no -wal/-shm written
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_a_read_only_database_reads_the_trials_still_in_its_log(tmp_path):
    """A database a search wrote (and was killed, or still runs) keeps its last trials in its
    -wal file; opened read-only it was read as immutable, without them: db export, best and
    report silently left those trials out."""
    import shutil
    import subprocess

    from tunex.trial import Config, Measurement, Status, Workload

    src = tmp_path / "src"
    src.mkdir()
    wl = Workload("k", "", {"n": 1}, {"device": "d"})
    with Database(str(src / "a.db")) as db:
        db.record(wl, Measurement(Config(a=0), Status.OK, (3.0,)))
        holder = sqlite3.connect(src / "a.db")  # as a live writer would: no checkpoint at close
        holder.execute("select count(*) from trials").fetchall()
        for i in (1, 2):
            db.record(wl, Measurement(Config(a=i), Status.OK, (3.0 - i,)))
    try:
        assert (src / "a.db-wal").stat().st_size > 0
        for suffix in ("", "-wal"):  # an archive copied without its -shm
            shutil.copy(src / f"a.db{suffix}", src / f"b.db{suffix}")
        ro = tmp_path / "ro"
        ro.mkdir()
        if subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True
                          ).returncode or subprocess.run(
                ["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode:
            subprocess.run(["umount", str(ro)], capture_output=True)
            pytest.skip("cannot make a read-only bind mount here (needs root)")
        try:
            with Database(str(ro / "a.db"), create=False) as db:
                assert db.readonly and db.count(wl) == 3 and db.best(wl).value == 1.0
            with pytest.raises(DatabaseError, match="holds trials in its write-ahead log"):
                Database(str(ro / "b.db"), create=False)
        finally:
            holder.close()  # SQLite closes this process's other handles on the file with it
            assert subprocess.run(["umount", str(ro)], capture_output=True).returncode == 0
    finally:
        holder.close()


@pytest.mark.parametrize("key, value, says", [
    ("started_at", 1e300, "started_at .*between 1970 and 2262"),
    ("ended_at", math.inf, "ended_at .*between 1970 and 2262"),
    ("started_at", -1e20, "started_at .*between 1970 and 2262"),
    ("recorded_at", 1e12, "recorded_at .*between 1970 and 2262"),
    ("started_at", float("nan"), "started_at nan is not a time"),
    ("compile_ms", "abc", "compile_ms 'abc' is not a time in ms"),
    ("compile_ms", -5, "compile_ms -5 is not a time in ms"),
    ("error", {"why": 1}, "error .* is not text"),
    ("strategy", 7, "strategy 7 is not text"),
    ("facts", [1, 2], "facts is not an object"),
])
def test_import_refuses_a_record_it_cannot_store_naming_record_and_field(
        db: Database, tmp_path: Path, key: str, value, says: str) -> None:
    """A hand-edited export: times that are not dates any export can write were stored and
    broke every later `db export` and `tunex report`; fields of the wrong kind failed in the
    database layer ('report it as a tunex bug') without naming the record."""
    db.record(MM, ok(Config(block=64), 1.0))
    path = tmp_path / "one.jsonl"
    db.export(path, format="jsonl")
    record = json.loads(path.read_text())
    record[key] = value
    path.write_text(json.dumps(record) + "\n")
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(DatabaseError, match=rf"record 1 .*{says}"):
            dst.import_trials(path)
        assert dst.workloads() == []
        dst.record(MM, ok(Config(block=32), 2.0))
        assert dst.export(io.StringIO(), format="csv") == 1


def test_a_declared_space_is_not_counted_again(db: Database, monkeypatch) -> None:
    """A search declares the space it has counted; the database keeps that one (counting a
    large constrained space takes seconds) unless only part of it could be written out."""
    from tunex.space import Choice, Int, Space

    space = Space([Int("a", 0, 40), Int("b", 0, 40)], ["a * b <= 300", "a != b"])
    size = space.size
    counted: list[int] = []
    real = Space._count
    monkeypatch.setattr(Space, "_count", lambda self, *a: counted.append(1) or real(self, *a))
    db.declare_space(MM, space)
    kept = db.space(MM)
    assert kept is not None and kept.size == size and not counted
    assert Config(a=3, b=3) not in kept and Config(a=3, b=4) in kept
    # a callable constraint is not stored: the database keeps the parameters' domains only
    partial = Space([Choice("a", [1, 2, 3])], [lambda a: a != 2])
    db.declare_space(MM2, partial)
    kept = db.space(MM2)
    assert kept is not None and kept is not partial and kept.size == 3
    # whole: only a space stored with its constraints (what an export may write as the space)
    assert db.space(MM2, whole=True) is None and db.space(MM, whole=True) is not None


def test_a_declared_spaces_names_are_read_without_counting_it(tmp_path, monkeypatch) -> None:
    """What the related-kernel rule reads of every other kernel's space: its parameter names,
    from the declaration, without making (and counting) the space; None where none is
    declared."""
    from tunex.space import Int, Space

    with Database(tmp_path / "n.db") as db:
        db.declare_space(MM, Space([Int("a", 0, 40), Int("b", 0, 40)], ["a * b <= 300"]))
        db.record(CONV, ok(Config(c=1), 1.0))
    counted: list[int] = []
    monkeypatch.setattr(Space, "_count", lambda self, *a: counted.append(1) or 0)
    with Database(tmp_path / "n.db") as db:  # a new process's view: nothing cached
        assert db.space_names(MM) == ["a", "b"] and db.space_names(CONV) is None
        assert db.space_names(Workload("never", "x")) is None
    assert not counted
