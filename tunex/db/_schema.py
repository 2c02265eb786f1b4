"""Tables of the tuning database, its schema version and the migrations between versions.

JSON values (configs, problem keys, target fingerprints, runtimes, facts) are stored as TEXT so
that the same schema works on SQLite and on any server SQLAlchemy speaks to.

To change the schema: edit the tables below to the new shape, append a step to
:data:`MIGRATIONS` that brings a database of the previous version to it (plain SQL that works
on SQLite and PostgreSQL; never use the table objects there, they describe only the newest
version), and add a test that migrates a database of the previous version.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    select,
    text,
    update,
)

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "create_schema",
    "meta",
    "metadata",
    "migrate",
    "read_version",
    "claims",
    "decisions",
    "trials",
    "workloads",
]

metadata = MetaData()

meta = Table(
    "tunex_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

workloads = Table(
    "workloads",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(64), nullable=False, unique=True),
    Column("kernel", Text, nullable=False),
    Column("kernel_hash", Text, nullable=False),
    Column("problem", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    # The bound space searched for this workload (Space.to_dict as JSON), where a search or an
    # import declared one: what every trial entering the database is checked against.
    Column("space", Text),
)

trials = Table(
    "trials",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workload_id", Integer, ForeignKey("workloads.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("config_key", Text, nullable=False),
    Column("config", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("value_ms", Double),
    Column("times_ms", Text, nullable=False),
    Column("compile_ms", Double),
    Column("facts", Text, nullable=False),
    Column("error", Text),
    Column("worker", Text),
    Column("strategy", Text),
    Column("started_at", Double, nullable=False),
    Column("ended_at", Double, nullable=False),
    Column("recorded_at", Double, nullable=False),
    UniqueConstraint("workload_id", "number", name="uq_trials_workload_number"),
    Index("ix_trials_workload_value", "workload_id", "value_ms"),
)

# A config (or a re-measurement slot) a running search took before measuring it: concurrent
# searches of one workload skip each other's configs, and a trial budget counts recorded trials
# plus live claims. A claim is dropped in the transaction that records its trial; one whose
# owner stopped heartbeating (or, on the same host, died) no longer counts.
claims = Table(
    "claims",
    metadata,
    Column("workload_id", Integer, ForeignKey("workloads.id"), primary_key=True),
    Column("config_key", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("heartbeat_at", Double, nullable=False),
)

# What ``@tunex.autotune`` picked for each new workload it met, where from and why: one row per
# resolution (a process that meets a workload resolves it once), kept for ``tunex report``.
decisions = Table(
    "decisions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workload_id", Integer, ForeignKey("workloads.id"), nullable=False),
    Column("config", Text, nullable=False),
    Column("source", String(32), nullable=False),
    Column("detail", Text),
    Column("mode", String(32)),
    Column("key", Text),
    Column("trial", Integer),
    Column("time_ms", Double),
    Column("seconds", Double),
    Column("host", Text),
    Column("pid", Integer),
    Column("decided_at", Double, nullable=False),
    Index("ix_decisions_workload", "workload_id", "decided_at"),
)

VERSION_KEY = "schema_version"


def _v1_to_v2(conn: Connection) -> None:
    # v1 had neither the strategy that proposed a trial nor the index behind best/top-k.
    conn.execute(text("ALTER TABLE trials ADD COLUMN strategy TEXT"))
    conn.execute(text("CREATE INDEX ix_trials_workload_value ON trials (workload_id, value_ms)"))


def _v2_to_v3(conn: Connection) -> None:
    # v2 kept neither the space of a workload nor claims of running searches.
    conn.execute(text("ALTER TABLE workloads ADD COLUMN space TEXT"))
    conn.execute(text(
        "CREATE TABLE claims (workload_id INTEGER NOT NULL REFERENCES workloads (id), "
        "config_key TEXT NOT NULL, owner TEXT NOT NULL, heartbeat_at DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (workload_id, config_key))"))


def _v3_to_v4(conn: Connection) -> None:
    # v3 did not keep the decorator's decisions.
    key = "SERIAL PRIMARY KEY" if conn.dialect.name == "postgresql" else "INTEGER PRIMARY KEY"
    conn.execute(text(
        f"CREATE TABLE decisions (id {key}, workload_id INTEGER NOT NULL "
        "REFERENCES workloads (id), config TEXT NOT NULL, source VARCHAR(32) NOT NULL, "
        "detail TEXT, mode VARCHAR(32), key TEXT, trial INTEGER, time_ms DOUBLE PRECISION, "
        "seconds DOUBLE PRECISION, host TEXT, pid INTEGER, "
        "decided_at DOUBLE PRECISION NOT NULL)"))
    conn.execute(text("CREATE INDEX ix_decisions_workload ON decisions (workload_id, decided_at)"))


#: ``MIGRATIONS[i]`` brings a database from schema version ``i + 1`` to ``i + 2``.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v1_to_v2, _v2_to_v3, _v3_to_v4)

#: The schema version this tunex writes; databases of older versions are migrated on open.
SCHEMA_VERSION: int = len(MIGRATIONS) + 1


def read_version(conn: Connection) -> int | None:
    """The schema version stored in ``tunex_meta``; None when the row is missing or unreadable."""
    value = conn.execute(select(meta.c.value).where(meta.c.key == VERSION_KEY)).scalar()
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def create_schema(conn: Connection) -> None:
    """Create the newest schema in an empty database (inside the caller's transaction)."""
    metadata.create_all(conn)
    conn.execute(meta.insert().values(key=VERSION_KEY, value=str(SCHEMA_VERSION)))


def migrate(conn: Connection, version: int) -> None:
    """Apply every step from ``version`` to :data:`SCHEMA_VERSION` (inside the caller's
    transaction, so a failed step leaves the database as it was)."""
    for step in MIGRATIONS[version - 1 :]:
        step(conn)
    conn.execute(update(meta).where(meta.c.key == VERSION_KEY).values(value=str(SCHEMA_VERSION)))
