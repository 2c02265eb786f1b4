"""The tuning database: every trial, recorded the moment it ends."""

from __future__ import annotations

import contextlib
import csv
import datetime
import itertools
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

from tunex.db import _schema as S
from tunex.errors import DatabaseError, SpaceError
from tunex.space import Space
from tunex.trial import Config, Measurement, Status, Workload, canonical_json

__all__ = ["CLAIM_LEASE_S", "EXPORT_FORMATS", "Claims", "Database", "Trial", "claim_owner"]

T = TypeVar("T")

#: Formats accepted by :meth:`Database.export`; only the JSON ones can be imported again.
EXPORT_FORMATS = ("csv", "json", "jsonl", "parquet")

_HEAD = ("trial", "status", "time_ms")
_TAIL = (
    "workload",
    "kernel",
    "compile_ms",
    "worker",
    "strategy",
    "error",
    "started_at",
    "ended_at",
)
# Extra keys of a JSON export: enough to rebuild the trial exactly on import.
_FULL = ("config", "times_ms", "facts", "workload_spec", "recorded_at")
_RESERVED = frozenset(_HEAD + _TAIL + _FULL)

_SQLITE_MAGIC = b"SQLite format 3\x00"
_BUSY_TIMEOUT_MS = 30_000
_CONNECT_TIMEOUT_S = 5
_WRITE_RETRIES = 30
_PG_SCHEMA_LOCK = 0x74756E6578  # "tunex": serialises concurrent schema creation on a server
_PG_RETRY_CODES = ("40001", "40P01")  # serialization failure, deadlock

#: Seconds a claim counts without a heartbeat from its owner (a search heartbeats its claims
#: several times per lease; a claim of a process that died on this host ends at once).
CLAIM_LEASE_S = 120.0
_HOST = socket.gethostname()


def claim_owner() -> str:
    """A new owner name for claims: ``host:pid:token``, unique per search."""
    return f"{_HOST}:{os.getpid()}:{os.urandom(4).hex()}"


def _owner_dead(owner: str) -> bool:
    """Whether ``owner`` (see :func:`claim_owner`) was a process of this host that is gone."""
    rest, _, _token = owner.rpartition(":")
    host, _, pid = rest.rpartition(":")
    if host != _HOST:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError, OverflowError):
        return False
    return False


@dataclass(frozen=True)
class Claims:
    """What :meth:`Database.claim` gave.

    Attributes:
        granted: the keys now claimed by the caller, in the order asked.
        measured: keys that already have a recorded trial.
        busy: keys claimed by another live search.
        full: the trial limit was reached before every key could be claimed.
        used: trials recorded plus live claims of the workload, after this call.
    """

    granted: tuple[str, ...]
    measured: tuple[str, ...]
    busy: tuple[str, ...]
    full: bool
    used: int


@dataclass(frozen=True)
class Trial:
    """One recorded trial.

    Attributes:
        number: the trial's number within its workload: 1, 2, 3, ... in order of recording.
        workload: what was tuned.
        measurement: what was measured (failures included).
        strategy: name of the search strategy that proposed the config, when known.
        recorded_at: when the trial was written to the database (seconds since the epoch).
    """

    number: int
    workload: Workload
    measurement: Measurement
    strategy: str | None
    recorded_at: float


class Database:
    """The tuning database: every trial of every workload, recorded the moment it ends.

    Args:
        url: where the database lives.

            - a plain path (``"tunex.db"``, a :class:`~pathlib.Path`): an SQLite file, in WAL
              mode, with a 30 s busy timeout and foreign keys on. Missing parent directories are
              created.
            - ``"sqlite://"``: an in-memory database, private to this object (for tests).
            - any SQLAlchemy URL, e.g. ``"postgresql+psycopg://user:pw@host/tunex"``
              (``postgresql://`` alone means psycopg 3 too).
        create: create the database (file and tables) when it does not exist yet. With
            ``create=False`` a missing or empty database is an error.

    Opening checks what is there and never modifies what is not a tunex database: a file that
    is not SQLite, a corrupt or truncated one, another application's SQLite database, or a
    database written by a newer tunex all raise :class:`~tunex.errors.DatabaseError` and are
    left untouched. A database of an older schema is migrated, in one transaction.

    Several processes (and threads) may record into the same database at once: each
    :meth:`record` is its own committed transaction, and trial numbers stay unique and gapless.
    Open one ``Database`` per process; a ``Database`` pickles as its URL and reopens on the
    other side.

    Every method raises :class:`~tunex.errors.DatabaseError` when the database cannot be read or
    written; its message says what to do.

    Attributes:
        url: the SQLAlchemy URL of the database, password included (pass it to another process
            to open the same database). ``repr()`` and error messages mask the password.
        path: the SQLite file, or None for in-memory and server databases.
    """

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
                # it; immutable=1 reads the file as it is, without them
                self.readonly = True
                self._url = URL.create("sqlite", database=f"file:{self.path}",
                                       query={"mode": "ro", "immutable": "1", "uri": "true"})
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
                    f"{self._shown} holds no tuning database yet: pass create=True to start one "
                    "there, or pass the --db of an existing one"
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
        assert self._engine is not None
        raw = self._engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA journal_mode")
            row = cursor.fetchone()
            if row is None or str(row[0]).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()
        finally:
            raw.close()

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection. Further use of this object raises DatabaseError."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> Database:
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
        return (Database, (self.url,))

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
            if "locked" in low or "busy" in low:
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

    # -- writing -------------------------------------------------------------------------------

    def record(self, workload: Workload, m: Measurement, *, strategy: str | None = None,
               claim: str | None = None) -> int:
        """Write one trial and commit it at once; return its number within the workload.

        Numbers are 1, 2, 3, ... in order of recording, without gaps, and unique even when
        several processes record into the same workload at once. Failed measurements are
        recorded like any other. ``claim`` is the key the trial was claimed under
        (:meth:`claim`); the claim ends in the same transaction.

        Raises:
            DatabaseError: the workload has a declared space (:meth:`declare_space`) and the
                config is not one of its points; nothing is recorded.
        """
        values = _trial_values(m, strategy, time.time())

        def tx(conn: Connection, new_ids: dict[str, int]) -> int:
            wid = self._workload_id(conn, workload, new_ids)
            number = self._next_number(conn, wid)
            space = self._stored_space(conn, wid)
            if space is not None:
                problems = space.violations(m.config)
                if problems:
                    raise DatabaseError(
                        f"refused a trial of {workload.kernel}: {dict(m.config)} is not in the "
                        f"workload's space ({'; '.join(problems)}); nothing was recorded")
            conn.execute(S.trials.insert().values(workload_id=wid, number=number, **values))
            if claim is not None:
                c = S.claims.c
                conn.execute(S.claims.delete().where(c.workload_id == wid,
                                                     c.config_key == claim))
            return number

        return self._write("record a trial in", tx)

    # -- spaces --------------------------------------------------------------------------------

    def declare_space(self, workload: Workload, space: Space) -> None:
        """Keep ``space`` (bound) as the space of ``workload``: every trial recorded or imported
        for it from now on must be one of its points. A search declares the space it searches
        (replacing an older declaration: the code that runs is the truth). Constraints written
        as Python callables cannot be stored; their parameters' domains still are."""
        doc = _space_json(space)

        def tx(conn: Connection, new_ids: dict[str, int]) -> None:
            wid = self._workload_id(conn, workload, new_ids)
            w = S.workloads.c
            stored = conn.execute(sa.select(w.space).where(w.id == wid)).scalar()
            if stored != doc:
                conn.execute(S.workloads.update().where(w.id == wid).values(space=doc))
            self._spaces[wid] = (doc, Space.from_dict(json.loads(doc)))

        self._write("declare a space in", tx)

    def space(self, workload: Workload) -> Space | None:
        """The declared space of ``workload`` (:meth:`declare_space`), or None."""

        def query(conn: Connection) -> Space | None:
            wid = self._find_workload(conn, workload)
            return None if wid is None else self._stored_space(conn, wid)

        return self._read("read", query)

    def _stored_space(self, conn: Connection, wid: int) -> Space | None:
        w = S.workloads.c
        doc = conn.execute(sa.select(w.space).where(w.id == wid)).scalar()
        if doc is None:
            return None
        cached = self._spaces.get(wid)
        if cached is not None and cached[0] == doc:
            return cached[1]
        try:
            space = Space.from_dict(json.loads(doc))
        except (ValueError, TypeError, SpaceError) as exc:
            raise DatabaseError(
                f"tuning database {self._shown} holds a damaged space for workload {wid} "
                f"({_first_line(exc)}): run the search again to declare it anew, or pass "
                "another --db") from exc
        self._spaces[wid] = (doc, space)
        return space

    # -- claims --------------------------------------------------------------------------------

    def claim(self, workload: Workload, keys: Sequence[str], *, owner: str,
              limit: int | None = None, lease: float = CLAIM_LEASE_S) -> Claims:
        """Claim configs (by :attr:`Config.key`, or any token for a repeat measurement) before
        measuring them, in one transaction: a key already measured or claimed by another live
        search is skipped, and no key is granted once the workload's trials plus live claims
        reach ``limit``. So concurrent searches of one workload never measure a config twice
        and together stop at exactly their trial budget.

        Claims end when their trial is recorded (``record(..., claim=key)``), on
        :meth:`release`, or when their owner sends no :meth:`heartbeat` for ``lease`` seconds
        (at once when the owner was a process of this host that died).
        """
        now = time.time()

        def tx(conn: Connection, new_ids: dict[str, int]) -> Claims:
            wid = self._workload_id(conn, workload, new_ids)
            if not self._sqlite:  # claimers of one workload queue on its row
                conn.execute(sa.select(S.workloads.c.id).where(S.workloads.c.id == wid)
                             .with_for_update())
            c, t = S.claims.c, S.trials.c
            live: dict[str, str] = {}
            stale = []
            for r in conn.execute(sa.select(c.config_key, c.owner, c.heartbeat_at)
                                  .where(c.workload_id == wid)):
                if now - r.heartbeat_at > lease or (r.owner != owner and _owner_dead(r.owner)):
                    stale.append(r.config_key)
                else:
                    live[r.config_key] = r.owner
            if stale:
                conn.execute(S.claims.delete().where(c.workload_id == wid,
                                                     c.config_key.in_(stale)))
            recorded = int(conn.execute(sa.select(sa.func.count()).select_from(S.trials)
                                        .where(t.workload_id == wid)).scalar_one())
            wanted = list(dict.fromkeys(keys))
            done = {r[0] for r in conn.execute(
                sa.select(t.config_key).where(t.workload_id == wid, t.config_key.in_(wanted)))}
            used = recorded + len(live)
            granted: list[str] = []
            measured: list[str] = []
            busy: list[str] = []
            full = False
            for key in wanted:
                if key in done:
                    measured.append(key)
                elif key in live:
                    (granted if live[key] == owner else busy).append(key)
                elif limit is not None and used >= limit:
                    full = True
                    break
                else:
                    conn.execute(S.claims.insert().values(workload_id=wid, config_key=key,
                                                          owner=owner, heartbeat_at=now))
                    granted.append(key)
                    used += 1
            return Claims(tuple(granted), tuple(measured), tuple(busy), full, used)

        return self._write("claim configs in", tx)

    def heartbeat(self, owner: str) -> None:
        """Keep ``owner``'s claims alive (a search calls it several times per lease)."""
        c = S.claims.c

        def tx(conn: Connection, new_ids: dict[str, int]) -> None:
            conn.execute(S.claims.update().where(c.owner == owner)
                         .values(heartbeat_at=time.time()))

        self._write("renew claims in", tx)

    def release(self, owner: str) -> None:
        """End every claim of ``owner`` (a search that stops releases what it did not measure)."""
        c = S.claims.c

        def tx(conn: Connection, new_ids: dict[str, int]) -> None:
            conn.execute(S.claims.delete().where(c.owner == owner))

        self._write("release claims in", tx)

    def import_trials(self, path: str | os.PathLike[str] | IO[str]) -> int:
        """Import the trials of a ``json`` or ``jsonl`` :meth:`export`; return how many were new.

        All or nothing: one transaction, and a malformed file imports nothing. A trial already
        present (same workload, same config, same ``started_at``) is skipped, so importing the
        same file twice adds nothing the second time. Imported trials are numbered after the
        trials already in the database, in the order of the file; their ``strategy`` and
        ``recorded_at`` are kept. CSV exports cannot be imported: they lack the full workload.
        """
        items = _read_export(path)
        name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else getattr(
            path, "name", "<file>")

        def tx(conn: Connection, new_ids: dict[str, int]) -> int:
            t = S.trials.c
            present: dict[int, set[tuple[str, float]]] = {}
            next_number: dict[int, int] = {}
            rows: list[dict[str, Any]] = []
            checks: dict[int, Callable[[Config], list[str]]] = {}
            for i, (workload, m, strategy, recorded_at) in enumerate(items, start=1):
                wid = self._workload_id(conn, workload, new_ids)
                if wid not in checks:
                    checks[wid] = self._import_check(conn, wid, workload)
                problems = checks[wid](m.config)
                if problems:
                    raise DatabaseError(
                        f"{name}: record {i} does not belong to workload {workload.kernel} "
                        f"{workload.problem}: {dict(m.config)} ({'; '.join(problems)}); nothing "
                        "was imported. Fix or drop that record, or import into another --db")
                if wid not in present:
                    next_number[wid] = self._next_number(conn, wid)
                    present[wid] = {
                        (r.config_key, r.started_at)
                        for r in conn.execute(
                            sa.select(t.config_key, t.started_at).where(t.workload_id == wid)
                        )
                    }
                key = (m.config.key, m.started_at)
                if key in present[wid]:
                    continue
                present[wid].add(key)
                rows.append(
                    {
                        "workload_id": wid,
                        "number": next_number[wid],
                        **_trial_values(m, strategy, recorded_at),
                    }
                )
                next_number[wid] += 1
            if rows:
                conn.execute(S.trials.insert(), rows)
            return len(rows)

        return self._write("import trials into", tx)

    def _import_check(self, conn: Connection, wid: int, workload: Workload
                      ) -> Callable[[Config], list[str]]:
        """How an imported config of ``workload`` is checked: against its declared space; else
        against the space tunex's kernel registry gives it (then declared, in this
        transaction); else for the same parameters, each of one kind of value, as the
        workload's other trials (so nothing a feature encoding would choke on gets in)."""
        space = self._stored_space(conn, wid)
        if space is None:
            from tunex.kernel import known_space

            space = known_space(workload)
            if space is not None:
                doc = _space_json(space)
                conn.execute(S.workloads.update().where(S.workloads.c.id == wid)
                             .values(space=doc))
        if space is not None:
            return space.violations
        t = S.trials.c
        first = conn.execute(sa.select(t.config).where(t.workload_id == wid)
                             .order_by(t.number).limit(1)).scalar()
        shape: dict[str, str] | None = (
            _config_shape(Config.from_json(first)) if first is not None else None)

        def consistent(config: Config) -> list[str]:
            nonlocal shape
            mine = _config_shape(config)
            if shape is None:
                shape = mine
                return []
            problems = [f"missing parameter {n!r}" for n in shape if n not in mine]
            problems += [f"unknown parameter {n!r}" for n in mine if n not in shape]
            problems += [f"{n}={config[n]!r} is a {mine[n]} where the workload's other trials "
                         f"hold a {shape[n]}" for n in mine if n in shape and mine[n] != shape[n]]
            return problems

        return consistent

    # -- reading -------------------------------------------------------------------------------

    def _trial_rows(
        self,
        conn: Connection,
        workload: Workload | None = None,
        *,
        kernel: str | None = None,
        ok_only: bool = False,
    ) -> list[Any]:
        """Trial rows joined with their workload, in (workload, number) order."""
        t, w = S.trials.c, S.workloads.c
        query = sa.select(
            t.number,
            t.config,
            t.status,
            t.times_ms,
            t.compile_ms,
            t.facts,
            t.error,
            t.worker,
            t.strategy,
            t.started_at,
            t.ended_at,
            t.recorded_at,
            t.workload_id,
            w.digest,
            w.kernel,
            w.kernel_hash,
            w.problem,
            w.target,
        ).join_from(S.trials, S.workloads, t.workload_id == w.id)
        if workload is not None:
            wid = self._find_workload(conn, workload)
            if wid is None:
                return []
            query = query.where(t.workload_id == wid)
        if kernel is not None:
            query = query.where(w.kernel == kernel)
        if ok_only:
            query = query.where(t.status == Status.OK.value, t.value_ms.is_not(None))
        return list(conn.execute(query.order_by(t.workload_id, t.number)))

    def trials(self, workload: Workload) -> list[Trial]:
        """Every trial of ``workload``, failures included, in trial-number order."""
        rows = self._read("read", lambda conn: self._trial_rows(conn, workload))
        return [
            Trial(r.number, workload, self._measurement(r), r.strategy, r.recorded_at) for r in rows
        ]

    def measurements(self, workload: Workload) -> list[Measurement]:
        """The measurements of :meth:`trials`, equal to the ones recorded (``facts`` come back
        as JSON values: tuples inside facts become lists)."""
        return [t.measurement for t in self.trials(workload)]

    def count(self, workload: Workload) -> int:
        """How many trials ``workload`` has, failures included."""

        def query(conn: Connection) -> int:
            wid = self._find_workload(conn, workload)
            if wid is None:
                return 0
            t = S.trials.c
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(S.trials).where(t.workload_id == wid)
                ).scalar_one()
            )

        return self._read("read", query)

    def best(self, workload: Workload) -> Measurement | None:
        """The best config of ``workload`` as ranked by :meth:`top_k`; None without an ok trial.

        For a config measured once this is its stored measurement: the lowest median runtime
        (:attr:`Measurement.value`) among the trials with status ok.
        """
        top = self.top_k(workload, 1)
        return top[0] if top else None

    def top_k(self, workload: Workload, k: int) -> list[Measurement]:
        """The ``k`` best distinct configs of ``workload``, best first; failures never rank.

        A config measured several times (e.g. a leader re-measured before a winner is declared)
        is ranked once, by the median of all its ok runtimes pooled: its measurement then has
        ``times_ms`` of every ok trial in trial order, ``started_at`` of the first,
        ``ended_at``, ``compile_ms``, ``facts``, ``worker`` and ``error`` of the last. A
        config measured once comes back exactly as recorded. Ties go to the config measured
        first.
        """
        if k < 0:
            raise ValueError(f"top_k needs k >= 0, got {k}")
        if k == 0:
            return []
        rows = self._read("read", lambda conn: self._trial_rows(conn, workload, ok_only=True))
        return self._rank(rows)[:k]

    def _rank(self, rows: Sequence[Any]) -> list[Measurement]:
        by_config: dict[str, list[Measurement]] = {}
        for r in rows:
            by_config.setdefault(r.config, []).append(self._measurement(r))
        pooled = [_pool(ms) for ms in by_config.values()]  # dicts keep first-measured order
        return sorted(pooled, key=lambda m: m.value)

    def best_per_workload(self, kernel: str | None = None) -> list[tuple[Workload, Measurement]]:
        """(workload, best measurement) of every workload with an ok trial, in the order the
        workloads were first recorded; only those of ``kernel`` when given. "Best" is as in
        :meth:`best`."""
        rows = self._read("read", lambda conn: self._trial_rows(conn, kernel=kernel, ok_only=True))
        return [(wl, self._rank(group)[0]) for wl, group in _grouped(rows)]

    def workloads(self, kernel: str | None = None) -> list[Workload]:
        """Every workload in the database (only those of ``kernel`` when given), in the order
        they were first recorded."""
        w = S.workloads.c
        query = sa.select(w.kernel, w.kernel_hash, w.problem, w.target).order_by(w.id)
        if kernel is not None:
            query = query.where(w.kernel == kernel)
        rows = self._read("read", lambda conn: list(conn.execute(query)))
        return [_workload_of(r) for r in rows]

    def history(
        self,
        kernel: str | None = None,
        exclude: Workload | None = None,
    ) -> list[tuple[Workload, list[Measurement]]]:
        """Every workload's measurements, failures included, in trial order: what a cost model
        learns from and transfers to a new workload.

        Args:
            kernel: only workloads of this kernel.
            exclude: leave this workload out (typically the one being tuned).
        """
        rows = self._read("read", lambda conn: self._trial_rows(conn, kernel=kernel))
        return [
            (wl, [self._measurement(r) for r in group])
            for wl, group in _grouped(rows)
            if wl != exclude
        ]

    # -- export --------------------------------------------------------------------------------

    def export_rows(self, workload: Workload | None = None, *,
                    kernel: str | None = None) -> list[dict[str, Any]]:
        """One flat dict per trial (of ``workload``, or of every workload; only ``kernel``'s
        when given), in trial order.

        Keys, in order: ``trial``, ``status``, ``time_ms`` (median runtime, None for a failed
        trial), one key per config parameter (sorted; a parameter whose name clashes with one of
        these keys is named ``config.<name>``), then ``workload`` (its digest), ``kernel``,
        ``compile_ms``, ``worker``, ``strategy``, ``error``, ``started_at``, ``ended_at``.
        """
        return [row for row, _ in self._export(workload, kernel)]

    def _export(self, workload: Workload | None, kernel: str | None = None
                ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        rows = self._read("export", lambda conn: self._trial_rows(conn, workload, kernel=kernel))
        out = []
        for wl, group in _grouped(rows):
            spec = wl.to_dict()
            for r in group:
                m = self._measurement(r)
                row: dict[str, Any] = {
                    "trial": r.number,
                    "status": m.status.value,
                    "time_ms": m.value if m.ok else None,
                }
                params = {(f"config.{k}" if k in _RESERVED else k): v for k, v in m.config.items()}
                row.update(sorted(params.items()))
                row.update(
                    workload=r.digest,
                    kernel=wl.kernel,
                    compile_ms=m.compile_ms,
                    worker=m.worker,
                    strategy=r.strategy,
                    error=m.error,
                    started_at=m.started_at,
                    ended_at=m.ended_at,
                )
                full = {
                    "config": m.config.to_dict(),
                    "times_ms": list(m.times_ms),
                    "facts": dict(m.facts),
                    "workload_spec": spec,
                    "recorded_at": r.recorded_at,
                }
                out.append((row, full))
        return out

    def export(
        self,
        path_or_file: str | os.PathLike[str] | IO[str],
        *,
        format: str | None = None,
        workload: Workload | None = None,
        kernel: str | None = None,
    ) -> int:
        """Write the trials (of ``workload``, or all) to a file; return the number of rows.

        Args:
            path_or_file: a path, or a text file opened for writing.
            format: ``"csv"`` (the rows of :meth:`export_rows`; tuples and dicts as JSON
                text, None as an empty cell), ``"json"`` (a list of objects) or ``"jsonl"``
                (one object per line). The JSON objects hold the keys of :meth:`export_rows`
                plus ``config``, ``times_ms``, ``facts``, ``workload_spec`` and ``recorded_at``,
                so :meth:`import_trials` can rebuild every trial exactly. ``"parquet"``: the
                typed table of :func:`tunex.db.to_dataframe` (needs pyarrow). Default: from
                the file's suffix, else csv. CSV and parquet write times as dates (UTC), the
                JSON formats as seconds since the epoch.
            workload: only this workload's trials.
            kernel: only this kernel's trials.
        """
        fmt = format or _format_from_suffix(path_or_file)
        if fmt not in EXPORT_FORMATS:
            raise DatabaseError(
                f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}"
            )
        if fmt == "parquet":
            from tunex.db._frames import write_parquet

            return write_parquet(self, path_or_file, workload=workload, kernel=kernel)
        records = self._export(workload, kernel)
        with _opened(path_or_file) as f:
            if fmt == "csv":
                params = sorted({k for row, _ in records for k in row} - set(_HEAD + _TAIL))
                writer = csv.DictWriter(f, fieldnames=[*_HEAD, *params, *_TAIL])
                writer.writeheader()
                for row, _ in records:
                    writer.writerow({k: _iso(v) if k in ("started_at", "ended_at")
                                     else _csv_cell(v) for k, v in row.items()})
            else:
                lines = [json.dumps({**row, **full}) for row, full in records]
                if fmt == "jsonl":
                    f.writelines(line + "\n" for line in lines)
                else:
                    f.write("[\n" + ",\n".join(lines) + ("\n]\n" if lines else "]\n"))
        return len(records)

    def _measurement(self, row: Any) -> Measurement:
        try:
            status = Status(row.status)
        except ValueError:
            raise DatabaseError(
                f"tuning database {self._shown} holds a trial with unknown status "
                f"{row.status!r}, probably written by a newer tunex: upgrade tunex"
            ) from None
        return Measurement(
            config=Config.from_json(row.config),
            status=status,
            times_ms=tuple(json.loads(row.times_ms)),
            compile_ms=row.compile_ms,
            facts=json.loads(row.facts),
            error=row.error,
            worker=row.worker,
            started_at=row.started_at,
            ended_at=row.ended_at,
        )


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
                f"no tuning database at {path}: check the --db path, or pass create=True to "
                "start a new one"
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


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _json_default(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays
        return value.tolist()
    return repr(value)  # a fact we cannot store faithfully must not stop a search


def _plain_value(v: Any) -> bool:
    if isinstance(v, list):
        return all(_plain_value(x) for x in v)
    return v is None or (isinstance(v, (bool, int, float, str)) and (
        not isinstance(v, float) or v == v))


def _config_shape(config: Config) -> dict[str, str]:
    """Each parameter's kind of value: ``number``, ``bool``, ``str``, ``list`` or ``none``."""
    def kind(v: Any) -> str:
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, (int, float)):
            return "number"
        if isinstance(v, str):
            return "str"
        if v is None:
            return "none"
        return "list"

    return {k: kind(v) for k, v in config.items()}


def _space_json(space: Space) -> str:
    try:
        doc = space.to_dict()
    except SpaceError:  # callable constraints: keep the parameters' domains
        doc = {"name": space.name, "params": [p.to_dict() for p in space.params],
               "constraints": [], "problem": [], "bound": None, "partial": True}
    return json.dumps(doc, sort_keys=True, default=_json_default)


def _trial_values(m: Measurement, strategy: str | None, recorded_at: float) -> dict[str, Any]:
    return {
        "config_key": m.config.key,
        "config": m.config.to_json(),
        "status": m.status.value,
        "value_ms": m.value if m.ok else None,
        "times_ms": json.dumps(list(m.times_ms)),
        "compile_ms": m.compile_ms,
        "facts": json.dumps(dict(m.facts), sort_keys=True, default=_json_default),
        "error": m.error,
        "worker": m.worker,
        "strategy": strategy,
        "started_at": m.started_at,
        "ended_at": m.ended_at,
        "recorded_at": recorded_at,
    }


def _workload_of(row: Any) -> Workload:
    return Workload(row.kernel, row.kernel_hash, json.loads(row.problem), json.loads(row.target))


def _grouped(rows: Iterable[Any]) -> Iterator[tuple[Workload, list[Any]]]:
    for _, group in itertools.groupby(rows, key=lambda r: r.workload_id):
        members = list(group)
        yield _workload_of(members[0]), members


def _pool(ms: list[Measurement]) -> Measurement:
    if len(ms) == 1:
        return ms[0]
    last = ms[-1]
    return last.replace(
        times_ms=tuple(t for m in ms for t in m.times_ms), started_at=ms[0].started_at
    )


def _format_from_suffix(path_or_file: object) -> str:
    if isinstance(path_or_file, (str, os.PathLike)):
        suffix = Path(os.fspath(path_or_file)).suffix.lower().lstrip(".")
        if suffix in EXPORT_FORMATS:
            return suffix
    return "csv"


@contextlib.contextmanager
def _opened(path_or_file: str | os.PathLike[str] | IO[str]) -> Iterator[IO[str]]:
    if isinstance(path_or_file, (str, os.PathLike)):
        try:
            with open(path_or_file, "w", encoding="utf-8", newline="") as f:
                yield f
        except OSError as exc:
            raise DatabaseError(
                f"cannot write export file {os.fspath(path_or_file)} ({exc}): "
                "check the path and its permissions"
            ) from exc
    else:
        yield path_or_file


def _iso(seconds: float) -> str:
    """A timestamp as ISO 8601 in UTC, to the microsecond: readable, and sorts as text."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(
        timespec="microseconds")


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (tuple, list, dict)):
        return canonical_json(value)
    return value


_Item = tuple[Workload, Measurement, "str | None", float]


def _read_export(source: str | os.PathLike[str] | IO[str]) -> list[_Item]:
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DatabaseError(f"cannot read {name} ({exc}): check the path") from exc
    else:
        name = getattr(source, "name", "<file>")
        text = source.read()
    start = text.lstrip()[:1]
    if not start:
        return []
    try:
        if start == "[":
            records = json.loads(text)
        elif start == "{":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            raise ValueError("it is not JSON")
    except ValueError as exc:
        raise DatabaseError(
            f"{name} is not a tunex json/jsonl export ({exc}); nothing was imported. CSV exports "
            "cannot be imported: export with format='json' or 'jsonl'"
        ) from exc
    items = []
    for i, rec in enumerate(records, start=1):
        try:
            items.append(_item_of(rec))
        except (KeyError, TypeError, ValueError) as exc:
            raise DatabaseError(
                f"{name}: record {i} is not a full tunex trial ({type(exc).__name__}: {exc}); "
                "nothing was imported. Import a json/jsonl file written by Database.export"
            ) from exc
    return items


def _item_of(rec: Mapping[str, Any]) -> _Item:
    spec = rec["workload_spec"]
    if not isinstance(spec, Mapping):
        raise TypeError("workload_spec is not an object")
    config = rec["config"]
    if not isinstance(config, Mapping) or not config:
        raise TypeError("config is not a non-empty object")
    for k, v in config.items():
        if not k or not _plain_value(v):
            raise TypeError(f"config parameter {k!r} holds {v!r}: a parameter value is a "
                            "number, string, bool or a list of them")
    m = Measurement(
        config=Config(config),
        status=Status(rec["status"]),
        times_ms=tuple(rec["times_ms"]),
        compile_ms=rec.get("compile_ms"),
        facts=dict(rec.get("facts") or {}),
        error=rec.get("error"),
        worker=rec.get("worker"),
        started_at=float(rec["started_at"]),
        ended_at=float(rec["ended_at"]),
    )
    recorded_at = rec.get("recorded_at")
    return (
        Workload.from_dict(spec),
        m,
        rec.get("strategy"),
        float(recorded_at) if recorded_at is not None else time.time(),
    )
