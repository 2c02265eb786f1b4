"""The tuning database's engine: opening (and refusing what is not a tunex database), schema
creation and migration, transactions with retries, and the translation of driver errors into
one-line :class:`~tunex.errors.DatabaseError` messages that say what to do."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import sqlite3
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

from tunex.db import _schema as S
from tunex.errors import DatabaseError
from tunex.space import Space
from tunex.trial import Workload, canonical_json

__all__ = ["Store"]

T = TypeVar("T")
S_ = TypeVar("S_", bound="Store")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_BUSY_TIMEOUT_MS = 30_000
_CONNECT_TIMEOUT_S = 5
_WRITE_RETRIES = 30
_PG_SCHEMA_LOCK = 0x74756E6578  # "tunex": serialises concurrent schema creation on a server
_PG_RETRY_CODES = ("40001", "40P01")  # serialization failure, deadlock


class Store:
    """Opening, transactions and workload ids: what every part of :class:`Database` stands on
    (see its docstring)."""

    def __init__(
        self, url: str | os.PathLike[str] | URL = "tunex.db", *, create: bool = True
    ) -> None:
        self._url, self.path = _resolve_url(url)
        self.url: str = self._url.render_as_string(hide_password=False)
        self._shown = (
            str(self.path) if self.path else self._url.render_as_string(hide_password=True)
        )
        self._backend = self._url.get_backend_name()
        self._sqlite = self._backend == "sqlite"
        self._lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        self._workload_ids: dict[str, int] = {}
        self._spaces: dict[int, tuple[str, Space]] = {}
        self._engine: Engine | None = None
        #: Opened read-only: an archived database in a directory (or on a medium) this process
        #: cannot write; reading works, recording raises DatabaseError.
        self.readonly = False
        if self.path is not None:
            _check_sqlite_file(self.path, create)
            if not create and self.path.exists() and not (
                    os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)):
                # SQLite in WAL mode writes -wal/-shm files beside the database even to read
                # it; immutable=1 reads the file as it is, without them. Trials still in the
                # log (a search killed, or running) are read through the -shm there, if any:
                # immutable=1 would silently leave them out.
                self.readonly = True
                query = {"mode": "ro", "immutable": "1", "uri": "true"}
                wal = Path(f"{self.path}-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    if not Path(f"{self.path}-shm").exists():
                        raise DatabaseError(
                            f"{self._shown} is read-only and holds trials in its write-ahead "
                            f"log ({wal.name}) that cannot be read without writing beside it: "
                            "copy the database with its -wal file to a writable directory, "
                            "or open it once where it can be written")
                    del query["immutable"]
                # a URI: "?", "#" and "%" in the path are quoted (else it opened another file)
                self._url = URL.create("sqlite", database=f"file:{quote(str(self.path))}",
                                       query=query)
        self._engine = self._make_engine()
        try:
            self._open(create)
        except BaseException:
            self.close()
            raise

    # -- opening -------------------------------------------------------------------------------

    def _make_engine(self) -> Engine:
        try:
            if self._sqlite:
                kwargs: dict[str, Any] = {}
                if self.path is None:
                    # One shared connection, so every thread sees the same in-memory database.
                    kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
                    self._lock = threading.RLock()
                engine = sa.create_engine(self._url, **kwargs)
                sa.event.listen(engine, "connect", _sqlite_on_connect)
                sa.event.listen(engine, "begin", _sqlite_on_begin)
                return engine
            connect_args: dict[str, Any] = {}
            if self._backend == "postgresql" and "connect_timeout" not in self._url.query:
                connect_args["connect_timeout"] = _CONNECT_TIMEOUT_S
            return sa.create_engine(self._url, connect_args=connect_args, pool_pre_ping=True)
        except ImportError as exc:
            raise DatabaseError(
                f"cannot open tuning database {self._shown}: its driver is not installed "
                f"({exc}): install it (for PostgreSQL: pip install 'tunex[postgres]')"
            ) from exc
        except sa_exc.SQLAlchemyError as exc:
            raise DatabaseError(
                f"cannot open tuning database {self._shown}: {_first_line(exc)}; pass a file "
                "path or a SQLAlchemy URL such as postgresql+psycopg://user@host/dbname"
            ) from exc

    def _open(self, create: bool) -> None:
        with self._errors("open"):
            with self._lock, self._connect() as conn:
                version = self._schema_state(conn)
            if version == 0 and not create:
                raise DatabaseError(
                    f"{self._shown} holds no tuning database yet: name an existing one with "
                    "--db (`tunex search` starts one; from Python, Database(..., create=True))"
                )
            if self.readonly:
                if version < S.SCHEMA_VERSION:
                    raise DatabaseError(
                        f"{self._shown} is read-only and of an older schema ({version}): copy "
                        "it to a writable directory, where tunex upgrades it on opening")
                return
            if self._sqlite and self.path is not None:
                self._use_wal()
            if version < S.SCHEMA_VERSION:
                self._write("set up", self._set_up)

    def _schema_state(self, conn: Connection) -> int:
        """The stored schema version, 0 for an empty database; raises for anything else."""
        names = {n for n in sa.inspect(conn).get_table_names() if not n.startswith("sqlite_")}
        if S.meta.name not in names:
            clash = names & {S.workloads.name, S.trials.name}
            if names and (self._sqlite or clash):
                listed = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
                raise DatabaseError(
                    f"{self._shown} is a database of another application (tables: {listed}), "
                    "not a tunex tuning database; tunex left it untouched: pass another --db"
                )
            return 0
        version = S.read_version(conn)
        if version is None or version < 1:
            raise DatabaseError(
                f"tuning database {self._shown} has no valid schema version in its tunex_meta "
                "table, so it is damaged; tunex left it untouched: move it aside or pass "
                "another --db"
            )
        if version > S.SCHEMA_VERSION:
            raise DatabaseError(
                f"tuning database {self._shown} was written by a newer tunex (schema {version}, "
                f"this tunex knows {S.SCHEMA_VERSION}): upgrade tunex (pip install -U tunex), "
                "or pass another --db"
            )
        return version

    def _set_up(self, conn: Connection, new_ids: dict[str, int]) -> None:
        if self._backend == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK)))
        version = self._schema_state(conn)  # again: another process may have got here first
        if version == 0:
            S.create_schema(conn)
        elif version < S.SCHEMA_VERSION:
            S.migrate(conn, version)

    def _use_wal(self) -> None:
        """Switch the file to write-ahead logging, once, whoever gets there first.

        The switch takes an exclusive lock. When several processes open a new file at once,
        two of them can each hold a shared lock while waiting for the other's: SQLite then
        answers "database is locked" at once, without waiting out busy_timeout (waiting would
        deadlock). So the switch is retried, with a random pause, until busy_timeout is spent.
        """
        assert self._engine is not None
        deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
        while True:
            raw = self._engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("PRAGMA journal_mode")
                row = cursor.fetchone()
                if row is None or str(row[0]).lower() != "wal":
                    cursor.execute("PRAGMA journal_mode=WAL")
                cursor.close()
                return
            except sqlite3.Error as exc:  # the raw connection raises the driver's own errors
                where = f"cannot open tuning database {self._shown} in write-ahead-log mode"
                if not _is_busy(exc):
                    raise DatabaseError(
                        f"{where} ({_first_line(exc)}): check that the file and its directory "
                        "are writable, on a local file system, or pass another --db") from exc
                if time.monotonic() > deadline:
                    raise DatabaseError(
                        f"{where}: another process kept it locked for over "
                        f"{_BUSY_TIMEOUT_MS // 1000} s; retry, and look for a hung process "
                        "holding it") from exc
            finally:
                raw.close()
            time.sleep(random.uniform(0.005, 0.05))

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection. Further use of this object raises DatabaseError."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self: S_) -> S_:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self._shown!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        if self._sqlite and self.path is None:
            raise DatabaseError(
                "an in-memory tuning database cannot be shared with another process: "
                "open a file (Database('tunex.db')) or a server URL instead"
            )
        return (type(self), (self.url,))

    def _connect(self) -> Connection:
        if self._engine is None:
            raise DatabaseError(
                f"tuning database {self._shown} is closed: open a new Database to use it again"
            )
        return self._engine.connect()

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except (KeyboardInterrupt, SystemExit) as exc:
            # Ctrl-C inside the driver: SQLAlchemy drops the connection, but the frames of the
            # traceback hold its cursor in a reference cycle, and a SQLite connection closed
            # with a cursor open keeps its transaction (the write lock) until the garbage
            # collector runs: the search's release of its claims then waited out
            # busy_timeout on its own process's lock. Freed here, the lock goes at once.
            traceback.clear_frames(exc.__traceback__)
            raise
        except sa_exc.DBAPIError as exc:
            raise self._translate(exc, action) from exc
        except sa_exc.SQLAlchemyError as exc:
            raise DatabaseError(
                f"cannot {action} tuning database {self._shown}: {self._reason(exc)}; "
                "if it persists, pass another --db and report it as a tunex bug"
            ) from exc

    def _reason(self, exc: BaseException) -> str:
        reason = _first_line(getattr(exc, "orig", None) or exc)
        if self._url.password:
            reason = reason.replace(self._url.password, "***")
        return reason

    def _translate(self, exc: sa_exc.DBAPIError, action: str) -> DatabaseError:
        reason = self._reason(exc)
        low = reason.lower()
        where = f"tuning database {self._shown}"
        if self._sqlite:
            if "malformed" in low or "not a database" in low or "encrypted" in low:
                return DatabaseError(
                    f"{where} is corrupt ({reason}); tunex did not change it: move it aside "
                    "or pass another --db"
                )
            if _is_busy(low):
                return DatabaseError(
                    f"cannot {action} {where}: another process kept it locked for over "
                    f"{_BUSY_TIMEOUT_MS // 1000} s ({reason}); retry, and look for a hung "
                    "process holding it"
                )
            if "readonly" in low or "unable to open" in low or "disk i/o" in low:
                return DatabaseError(
                    f"cannot {action} {where} ({reason}): check that the file and its "
                    "directory are writable and the disk is not full, or pass another --db"
                )
            return DatabaseError(
                f"cannot {action} {where}: {reason}; if it persists, move the file aside or "
                "pass another --db"
            )
        if isinstance(exc, sa_exc.OperationalError) or exc.connection_invalidated:
            return DatabaseError(
                f"cannot {action} {where}: {reason}; check that the server is running and "
                "that the URL (host, port, user, password, database name) is right"
            )
        return DatabaseError(
            f"cannot {action} {where}: {reason}; check that the database was not changed by "
            "hand (its tables belong to tunex), or pass another --db"
        )

    def _read(self, action: str, fn: Callable[[Connection], T]) -> T:
        with self._lock, self._errors(action), self._connect() as conn:
            return fn(conn)

    def _write(self, action: str, fn: Callable[[Connection, dict[str, int]], T]) -> T:
        """Run ``fn`` in one write transaction and commit it; retry it when a concurrent
        writer on a server took the same trial number or workload first."""
        with self._lock, self._errors(action):
            for attempt in itertools.count():
                new_ids: dict[str, int] = {}
                try:
                    with self._connect() as conn:
                        if self._sqlite:
                            # Take the write lock at BEGIN: numbering needs a stable max().
                            conn.execution_options(tunex_begin="IMMEDIATE")
                        with conn.begin():
                            result = fn(conn, new_ids)
                except sa_exc.DBAPIError as exc:
                    if attempt >= _WRITE_RETRIES or not self._retryable(exc):
                        raise
                    time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
                    continue
                self._workload_ids.update(new_ids)
                return result
        raise AssertionError("unreachable")

    def _retryable(self, exc: sa_exc.DBAPIError) -> bool:
        if self._sqlite:
            return False
        if isinstance(exc, sa_exc.IntegrityError):
            return True
        code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
        return code in _PG_RETRY_CODES

    def _find_workload(self, conn: Connection, workload: Workload) -> int | None:
        digest = workload.digest
        if digest in self._workload_ids:
            return self._workload_ids[digest]
        w = S.workloads.c
        row = conn.execute(
            sa.select(w.id, w.kernel, w.kernel_hash, w.problem, w.target).where(w.digest == digest)
        ).first()
        if row is None:
            return None
        stored = Workload(
            row.kernel, row.kernel_hash, json.loads(row.problem), json.loads(row.target)
        )
        if stored != workload:
            raise DatabaseError(
                f"tuning database {self._shown} holds another workload under digest {digest} "
                f"({stored.key} vs {workload.key}); report this as a tunex bug"
            )
        self._workload_ids[digest] = row.id
        return int(row.id)

    def _workload_id(self, conn: Connection, workload: Workload, new_ids: dict[str, int]) -> int:
        """The workload's id, inserting the workload if needed (recorded in ``new_ids`` until
        the transaction commits)."""
        digest = workload.digest
        if digest in new_ids:
            return new_ids[digest]
        found = self._find_workload(conn, workload)
        if found is not None:
            return found
        values = {
            "digest": digest,
            "kernel": workload.kernel,
            "kernel_hash": workload.kernel_hash,
            "problem": canonical_json(workload.problem),
            "target": canonical_json(workload.target),
            "created_at": time.time(),
        }
        if self._backend == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            conn.execute(
                pg_insert(S.workloads)
                .values(values)
                .on_conflict_do_nothing(index_elements=["digest"])
            )
        else:
            conn.execute(S.workloads.insert().values(values))
        wid = conn.execute(
            sa.select(S.workloads.c.id).where(S.workloads.c.digest == digest)
        ).scalar_one()
        new_ids[digest] = int(wid)
        return int(wid)

    def _next_number(self, conn: Connection, wid: int) -> int:
        if not self._sqlite:
            # Writers of one workload queue on its row; the unique constraint is the backstop.
            conn.execute(
                sa.select(S.workloads.c.id).where(S.workloads.c.id == wid).with_for_update()
            )
        t = S.trials.c
        top = conn.execute(sa.select(sa.func.max(t.number)).where(t.workload_id == wid)).scalar()
        return int(top or 0) + 1

# -- helpers -----------------------------------------------------------------------------------


def _resolve_url(url: str | os.PathLike[str] | URL) -> tuple[URL, Path | None]:
    if isinstance(url, URL):
        parsed = url
    elif url == ":memory:":  # SQLite's own name for an in-memory database, not a file name
        return URL.create("sqlite"), None
    elif isinstance(url, os.PathLike) or "://" not in url:
        path = Path(os.fspath(url)).expanduser().absolute()
        return URL.create("sqlite", database=str(path)), path
    else:
        try:
            parsed = make_url(url)
        except sa_exc.ArgumentError as exc:
            raise DatabaseError(
                f"cannot parse database URL {url!r}: pass a file path or a SQLAlchemy URL such "
                "as postgresql+psycopg://user@host/dbname"
            ) from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database
        if (
            db
            and db != ":memory:"
            and parsed.query.get("mode") != "memory"
            and not db.startswith("file:")
        ):
            path = Path(db).expanduser().absolute()
            return parsed.set(database=str(path)), path
    return parsed, None


def _corrupt(path: Path, why: str) -> DatabaseError:
    return DatabaseError(
        f"{path} is not a usable tunex tuning database: {why}. tunex did not change it: "
        "move it aside or pass another --db"
    )


def _check_sqlite_file(path: Path, create: bool) -> None:
    """Refuse, before SQLite touches it, a file that is not a sound SQLite database."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if not create:
            raise DatabaseError(
                f"no tuning database at {path}: check the --db path (`tunex search` starts "
                "one; from Python, Database(..., create=True))"
            ) from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(
                f"cannot create the directory of tuning database {path} ({exc}): pass another --db"
            ) from exc
        return
    if not path.is_file():
        raise _corrupt(path, "it is not a regular file")
    if size == 0:
        return  # SQLite's own view of an empty file: an empty database
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise DatabaseError(
            f"cannot read tuning database {path} ({exc}): check its "
            "permissions, or pass another --db"
        ) from exc
    if not header.startswith(_SQLITE_MAGIC):
        raise _corrupt(path, "it is not an SQLite file")
    if len(header) < 100:
        raise _corrupt(path, f"it is truncated ({size} bytes)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise _corrupt(path, "its header is damaged")
    pages = int.from_bytes(header[28:32], "big")
    # The page count in the header is valid when the change counter matches; a pending WAL
    # may legitimately hold pages the main file does not have yet.
    wal = Path(f"{path}-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0
    if pages and header[92:96] == header[24:28] and not wal_pending and size < pages * page_size:
        raise _corrupt(path, f"it is truncated ({size} bytes, its header says {pages * page_size})")


def _sqlite_on_connect(dbapi_conn: Any, record: Any) -> None:
    dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _sqlite_on_begin)
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("tunex_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def _is_busy(exc: object) -> bool:
    low = str(exc).lower()
    return "locked" in low or "busy" in low


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
