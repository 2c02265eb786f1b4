"""Recording and reading trials: numbering, declared spaces, claims of running searches, and
the queries (best, top-k, history) the tuner, the decorator and the CLI ask."""

from __future__ import annotations

import itertools
import json
import math
import os
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tunex.db import _schema as S
from tunex.db._engine import Store, _first_line
from tunex.errors import DatabaseError, SpaceError
from tunex.space import Space
from tunex.trial import Config, Measurement, Status, Workload, settled

__all__ = ["CLAIM_LEASE_S", "DECISION_SOURCES", "Claims", "Decision", "Records", "Trial",
           "claim_owner"]

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
    return _gone(host, pid)


def _gone(host: str | None, pid: Any) -> bool:
    """Whether process ``pid`` of ``host`` is known to have ended: only this host's processes
    can be asked; a process of another host, or an unreadable pid, is taken as running."""
    if host != _HOST:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, TypeError, ValueError, OverflowError):
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


#: Where a decision of ``@tunex.autotune`` can come from (:attr:`Decision.source`).
DECISION_SOURCES = ("db", "pack", "model", "default", "tuned", "tuning")


@dataclass(frozen=True)
class Decision:
    """A config ``@tunex.autotune`` picked for a workload new to its process, as the database
    keeps it (:meth:`Database.decisions`); the listeners of the decorator get the same as a
    :class:`tunex.autotune.Selection`.

    Attributes:
        workload: what the config was picked for.
        config: the config picked.
        source: where it came from: ``"db"`` (the database's best trial), ``"pack"`` (a config
            pack), ``"model"`` (the cost model's prediction), ``"default"`` (the kernel's
            default config), or ``"tuned"`` (tuned on the miss, its trials recorded);
            ``"tuning"`` marks where a tuning on a miss began (its config: the default, the
            first measured; listed by :meth:`Database.decisions` only when asked): a mark that
            its process never followed with a decision was cut short, and the next
            ``on_miss`` call resumes that search.
        detail: why, in one line, e.g. ``"pack mylib-1.2 exact device"`` or ``"tuned 40
            trials in 6.1 s (model, built in parallel; trial budget), 1.23x over default"``.
        mode: the decorator's mode then (``"never"``, ``"on_miss"``).
        key: the call's key values before bucketing.
        trial: the number of the workload's first successful trial of this config when the
            database held one as the decision was recorded: the trial a ``"db"`` or
            ``"tuned"`` config came from.
        time_ms: the config's median runtime when it was known (database, tuning, an
            exact-device pack).
        seconds: how long the decision took, tuning included.
        host, pid: the process that decided.
        decided_at: when (seconds since the epoch).
    """

    workload: Workload
    config: Config
    source: str
    detail: str | None = None
    mode: str | None = None
    key: dict[str, Any] | None = None
    trial: int | None = None
    time_ms: float | None = None
    seconds: float | None = None
    host: str | None = None
    pid: int | None = None
    decided_at: float = 0.0

    def by_this_process(self) -> bool:
        """Whether this process recorded it."""
        return (self.host, self.pid) == (_HOST, os.getpid())

    def process_ended(self) -> bool:
        """Whether the process that recorded this decision ran on this host and has ended
        (one of another host is taken as running: it cannot be asked)."""
        return _gone(self.host, self.pid)


class Records(Store):
    """Writing and reading trials (see :class:`Database`)."""

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
            d = json.loads(doc)
            # a space written out whole is the one given: keep it, with the valid points it has
            # counted already (counting a large constrained space again takes seconds)
            self._spaces[wid] = (doc, Space.from_dict(d) if d.get("partial") else space)

        self._write("declare a space in", tx)

    def space(self, workload: Workload, whole: bool = False) -> Space | None:
        """The declared space of ``workload`` (:meth:`declare_space`), or None; with ``whole``,
        None too where only its domains could be stored (constraints written as Python
        callables)."""

        def query(conn: Connection) -> Space | None:
            wid = self._find_workload(conn, workload)
            if wid is None:
                return None
            space = self._stored_space(conn, wid)
            if whole and space is not None and json.loads(self._spaces[wid][0]).get("partial"):
                return None
            return space

        return self._read("read", query)

    def space_names(self, workload: Workload) -> list[str] | None:
        """The parameter names of the declared space of ``workload``, or None: read from its
        declaration without making the space (which counts its valid points)."""

        def query(conn: Connection) -> list[str] | None:
            wid = self._find_workload(conn, workload)
            if wid is None:
                return None
            w = S.workloads.c
            doc = conn.execute(sa.select(w.space).where(w.id == wid)).scalar()
            if doc is None:
                return None
            try:
                return [str(p["name"]) for p in json.loads(doc)["params"]]
            except (ValueError, TypeError, KeyError) as exc:
                raise self._damaged_space(wid, exc) from exc

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
            raise self._damaged_space(wid, exc) from exc
        self._spaces[wid] = (doc, space)
        return space

    def _damaged_space(self, wid: int, exc: Exception) -> DatabaseError:
        return DatabaseError(
            f"tuning database {self._shown} holds a damaged space for workload {wid} "
            f"({_first_line(exc)}): run the search again to declare it anew, or pass "
            "another --db")

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
            done = settled(conn.execute(
                sa.select(t.config_key, t.status).where(t.workload_id == wid,
                                                        t.config_key.in_(wanted))))
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

    # -- decisions of the decorator ------------------------------------------------------------

    def record_decision(self, workload: Workload, config: Config, source: str, *,
                        detail: str | None = None, mode: str | None = None,
                        key: dict[str, Any] | None = None, time_ms: float | None = None,
                        seconds: float | None = None) -> Decision:
        """Keep what ``@tunex.autotune`` picked for ``workload`` (see :class:`Decision`), in
        one committed transaction; return it as recorded. The decorator calls this once per
        workload new to its process, off its dispatch path; the config need not be in the
        workload's declared space (a pack or a default config may not be)."""
        if source not in DECISION_SOURCES:
            raise ValueError(f"unknown decision source {source!r}: use one of "
                             f"{', '.join(DECISION_SOURCES)}")
        now = time.time()
        values = {
            "config": config.to_json(),
            "source": source,
            "detail": detail,
            "mode": mode,
            "key": None if key is None else json.dumps(key, sort_keys=True,
                                                       default=_json_default),
            "time_ms": time_ms,
            "seconds": seconds,
            "host": _HOST,
            "pid": os.getpid(),
            "decided_at": now,
        }

        def tx(conn: Connection, new_ids: dict[str, int]) -> int | None:
            wid = self._workload_id(conn, workload, new_ids)
            t = S.trials.c
            trial = conn.execute(
                sa.select(sa.func.min(t.number)).where(
                    t.workload_id == wid, t.config_key == config.key,
                    t.status == Status.OK.value)).scalar()
            conn.execute(S.decisions.insert().values(workload_id=wid, trial=trial, **values))
            return None if trial is None else int(trial)

        trial = self._write("record a decision in", tx)
        return Decision(workload, config, source, detail, mode,
                        None if key is None else dict(key), trial, time_ms, seconds, _HOST,
                        os.getpid(), now)

    def cut_short(self, workload: Workload) -> list[Decision]:
        """The marks (source ``"tuning"``) of ``workload``'s newest tunings on a miss that
        recorded no end, oldest first: the ones after the last mark that ended, by a decision
        of its own process after it or by any tuning's end (``"tuned"``) after it (processes
        tuning one workload at once share its search). Empty where the newest tuning ended, or
        none began. One may still be running: :meth:`Decision.process_ended` says whether its
        process is gone."""
        decisions = self.decisions(workload, begun=True)

        def ended(mark: Decision) -> bool:
            return any(d.source != "tuning" and d.decided_at >= mark.decided_at
                       and (d.source == "tuned" or (d.host, d.pid) == (mark.host, mark.pid))
                       for d in decisions)

        out: list[Decision] = []
        for d in reversed(decisions):
            if d.source == "tuning":
                if ended(d):
                    break
                out.append(d)
        return out[::-1]

    def decisions(self, workload: Workload | None = None, *, kernel: str | None = None,
                  begun: bool = False) -> list[Decision]:
        """The decisions ``@tunex.autotune`` recorded (:meth:`record_decision`): of
        ``workload``, or of every workload (only ``kernel``'s when given), oldest first within
        each workload, workloads in the order they were first recorded. The marks where its
        tunings began (source ``"tuning"``) only with ``begun=True``."""
        d, w = S.decisions.c, S.workloads.c

        def query(conn: Connection) -> list[Any]:
            q = sa.select(d.config, d.source, d.detail, d.mode, d.key, d.trial, d.time_ms,
                          d.seconds, d.host, d.pid, d.decided_at, d.workload_id, w.kernel,
                          w.kernel_hash, w.problem, w.target
                          ).join_from(S.decisions, S.workloads, d.workload_id == w.id)
            if workload is not None:
                wid = self._find_workload(conn, workload)
                if wid is None:
                    return []
                q = q.where(d.workload_id == wid)
            if kernel is not None:
                q = q.where(w.kernel == kernel)
            if not begun:
                q = q.where(d.source != "tuning")
            return list(conn.execute(q.order_by(d.workload_id, d.decided_at, d.id)))

        rows = self._read("read", query)
        out = []
        for wl, group in _grouped(rows):
            for r in group:
                out.append(Decision(wl, Config.from_json(r.config), r.source, r.detail, r.mode,
                                    None if r.key is None else json.loads(r.key), r.trial,
                                    r.time_ms, r.seconds, r.host, r.pid, r.decided_at))
        return out

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
            # a config that gave a wrong result once (a race, an uninitialised read) is not
            # correct, whatever its other runs gave: it never ranks
            # (uncorrelated, so it runs once: correlated, it rescanned the workload's trials
            # for every row, minutes at 100k trials)
            wrong = S.trials.alias("wrong")
            wrongs = sa.select(wrong.c.workload_id, wrong.c.config_key).where(
                wrong.c.status == Status.WRONG_RESULT.value)
            if workload is not None:
                wrongs = wrongs.where(wrong.c.workload_id == wid)
            query = query.where(
                t.status == Status.OK.value, t.value_ms.is_not(None),
                sa.tuple_(t.workload_id, t.config_key).not_in(wrongs))
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

    def best(self, workload: Workload, space: Space | None = None) -> Measurement | None:
        """The best config of ``workload`` as ranked by :meth:`top_k`; None without an ok trial.

        For a config measured once this is its stored measurement: the lowest median runtime
        (:attr:`Measurement.value`) among the trials with status ok. ``space``: the best
        that is one of its points (trials of an earlier version of the space do not count).
        """
        top = self.top_k(workload, 1, space)
        return top[0] if top else None

    def top_k(self, workload: Workload, k: int, space: Space | None = None
              ) -> list[Measurement]:
        """The ``k`` best distinct configs of ``workload``, best first; failures never rank,
        nor does a config with a ``wrong_result`` trial, whatever its other trials gave.

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
        ranked = self._rank(rows)
        if space is not None:
            ranked = [m for m in ranked if m.config in space]
        return ranked[:k]

    def _rank(self, rows: Sequence[Any]) -> list[Measurement]:
        by_config: dict[str, list[Measurement]] = {}
        for r in rows:
            by_config.setdefault(r.config, []).append(self._measurement(r))
        pooled = [_pool(ms) for ms in by_config.values()]  # dicts keep first-measured order
        return sorted(pooled, key=lambda m: m.value)

    def best_per_workload(self, kernel: str | None = None) -> list[tuple[Workload, Measurement]]:
        """(workload, best measurement) of every workload with an ok trial, in the order the
        workloads were first recorded; only those of ``kernel`` when given. "Best" is as in
        :meth:`best`, among the points of the workload's declared space (:meth:`declare_space`:
        trials of an earlier version of it are no config to ship or show as the best)."""
        rows = self._read("read", lambda conn: self._trial_rows(conn, kernel=kernel, ok_only=True))
        out = []
        for wl, group in _grouped(rows):
            space = self.space(wl)
            best = [m for m in self._rank(group) if space is None or m.config in space]
            if best:
                out.append((wl, best[0]))
        return out

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

    def _measurement(self, row: Any) -> Measurement:
        try:
            status = Status(row.status)
        except ValueError:
            raise DatabaseError(
                f"tuning database {self._shown} holds a trial with unknown status "
                f"{row.status!r}, probably written by a newer tunex: upgrade tunex"
            ) from None
        try:
            config = Config.from_json(row.config)
            if not all(isinstance(v, (int, float, str, tuple)) or v is None
                       for v in config.values()):
                raise ValueError("a config value is neither a number, a string nor a list")
            times = json.loads(row.times_ms)
            if not isinstance(times, list) or not all(
                    isinstance(t, (int, float)) and not isinstance(t, bool) for t in times):
                raise ValueError("its times are not a list of numbers")
            facts = json.loads(row.facts)
            if not isinstance(facts, dict):
                raise ValueError("its facts are not an object")
            return Measurement(
                config=config, status=status, times_ms=tuple(times),
                compile_ms=_number_or(row.compile_ms, None), facts=facts, error=row.error,
                worker=row.worker, started_at=_timestamp(row.started_at),
                ended_at=_timestamp(row.ended_at))
        except (ValueError, TypeError, AttributeError) as exc:  # ConfigError is a ValueError
            raise DatabaseError(
                f"tuning database {self._shown} holds a damaged trial (number "
                f"{getattr(row, 'number', '?')}: {_first_line(exc)}), written by something other "
                "than tunex: delete that row, or move the database aside and pass another --db"
            ) from None


def _number_or(value: Any, default: Any) -> Any:
    """A stored number as a float; ``default`` where it is not a finite one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return float(value)


#: The latest time a calendar shows (9999-12-31 23:59:59 UTC), in seconds since 1970.
_LAST_SECOND = 253_402_300_799.0


def _timestamp(value: Any) -> float:
    """A stored time in seconds since 1970; 0.0 (unknown) where a damaged row holds one no
    calendar shows (text, negative, past the year 9999): the trial is kept, and every export
    and the report can print its times."""
    t = _number_or(value, 0.0)
    return t if 0.0 <= t <= _LAST_SECOND else 0.0


# -- helpers -----------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays
        return value.tolist()
    return repr(value)  # a fact we cannot store faithfully must not stop a search


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
    try:
        return Workload(row.kernel, row.kernel_hash, json.loads(row.problem),
                        json.loads(row.target))
    except (ValueError, TypeError) as exc:
        raise DatabaseError(
            f"the tuning database holds a damaged workload (kernel {row.kernel!r}: "
            f"{_first_line(exc)}), written by something other than tunex: move the database "
            "aside and pass another --db") from None


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
