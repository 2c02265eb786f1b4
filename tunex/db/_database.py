"""The tuning database: every trial, recorded the moment it ends.

:class:`Database` is built in three rooms: ``_engine`` (opening, transactions, errors),
``_records`` (recording and querying trials, declared spaces, claims, the decorator's
decisions) and this module (export to and import from files)."""

from __future__ import annotations

import contextlib
import csv
import datetime
import gzip
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tunex._io import read_bounded
from tunex.db import _schema as S
from tunex.db._records import (
    CLAIM_LEASE_S,
    Claims,
    Decision,
    Records,
    Trial,
    _grouped,
    _space_json,
    _trial_values,
    claim_owner,
)
from tunex.errors import DatabaseError
from tunex.space import Space
from tunex.trial import Config, Measurement, Status, Workload, canonical_json

__all__ = ["CLAIM_LEASE_S", "EXPORT_FORMATS", "Claims", "Database", "Decision", "Trial",
           "claim_owner"]

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
_FULL = ("config", "times_ms", "facts", "workload_spec", "recorded_at", "workload_space")
_RESERVED = frozenset(_HEAD + _TAIL + _FULL)

class Database(Records):
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
        def query(conn: Connection) -> tuple[list[Any], dict[int, str]]:
            rows = self._trial_rows(conn, workload, kernel=kernel)
            w = S.workloads.c
            ids = {r.workload_id for r in rows}
            spaces = {wid: doc for wid, doc in conn.execute(sa.select(w.id, w.space))
                      if wid in ids and doc is not None}
            return rows, spaces

        rows, spaces = self._read("export", query)
        out = []
        for wl, group in _grouped(rows):
            spec = wl.to_dict()
            space = spaces.get(group[0].workload_id)
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
                if space is not None and r is group[0]:  # once: what an import checks against
                    try:
                        full["workload_space"] = json.loads(space)
                    except ValueError as exc:
                        raise self._damaged_space(r.workload_id, exc) from None
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
                text, None as an empty cell, text that a spreadsheet would run as a formula,
                such as ``=HYPERLINK(...)`` or ``-2+3``, behind an apostrophe), ``"json"`` (a
                list of objects) or ``"jsonl"`` (one object per line). The JSON objects hold
                the keys of :meth:`export_rows` plus ``config``, ``times_ms``, ``facts``,
                ``workload_spec`` and ``recorded_at``, so :meth:`import_trials` can rebuild
                every trial exactly; a workload's first
                trial also holds ``workload_space``, its declared space (what an import into a
                database that does not know it checks the trials against). ``"parquet"``: the
                typed table of :func:`tunex.db.to_dataframe` (needs pyarrow). Default: from
                the file's suffix (before ``.gz``: a path ending in ``.gz`` is written
                gzip'd, and imports as it is), else csv. CSV and parquet write times as dates
                (UTC), the JSON formats as seconds since the epoch. The JSON formats are
                strict JSON: a number it has no token for (the NaN or infinite times of a
                timer that failed) is written as the string ``"NaN"``, ``"Infinity"`` or
                ``"-Infinity"``, which an import reads back as the number.

        Only trials travel: the decisions ``@tunex.autotune`` recorded (:meth:`decisions`) say
        what processes of one machine picked and why, and stay in their database.
            workload: only this workload's trials.
            kernel: only this kernel's trials.
        """
        fmt = format or _format_from_suffix(path_or_file)
        if fmt not in EXPORT_FORMATS:
            raise DatabaseError(
                f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}"
            )
        if fmt == "parquet":
            if _gzipped(path_or_file):
                raise DatabaseError("parquet compresses its own columns: write the parquet "
                                    "export to a .parquet file, not a .gz one")
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
                lines = [json.dumps(_strict({**row, **full}), allow_nan=False)
                         for row, full in records]
                if fmt == "jsonl":
                    f.writelines(line + "\n" for line in lines)
                else:
                    f.write("[\n" + ",\n".join(lines) + ("\n]\n" if lines else "]\n"))
        return len(records)

    def import_trials(self, path: str | os.PathLike[str] | IO[str]) -> int:
        """Import the trials of a ``json`` or ``jsonl`` :meth:`export`; return how many were new.

        All or nothing: one transaction, and a malformed file imports nothing. A trial already
        present (same workload, same config, same ``started_at``) is skipped, so importing the
        same file twice adds nothing the second time. Imported trials are numbered after the
        trials already in the database, in the order of the file; their ``strategy`` and
        ``recorded_at`` are kept. CSV exports cannot be imported: they lack the full workload.
        """
        items, declared = _read_export(path)
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
                if wid not in present:
                    next_number[wid] = self._next_number(conn, wid)
                    present[wid] = {
                        (r.config_key, r.started_at)
                        for r in conn.execute(
                            sa.select(t.config_key, t.started_at).where(t.workload_id == wid)
                        )
                    }
                key = (m.config.key, m.started_at)
                if key in present[wid]:  # already here: nothing to check or add
                    continue
                if wid not in checks:
                    checks[wid] = self._import_check(conn, wid, workload, declared.get(workload))
                problems = checks[wid](m.config)
                if problems:
                    raise DatabaseError(
                        f"{name}: record {i} does not belong to workload {workload.kernel} "
                        f"{workload.problem}: {dict(m.config)} ({'; '.join(problems)}); nothing "
                        "was imported. Fix or drop that record, or import into another --db")
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

    def _import_check(self, conn: Connection, wid: int, workload: Workload,
                      exported: Space | None = None) -> Callable[[Config], list[str]]:
        """How an imported config of ``workload`` is checked: against its declared space; else
        against the space tunex's kernel registry gives it; else against the parameters'
        domains in the space the export file declares for it (the trials it holds were
        recorded there, some perhaps before a constraint was added); either space is then
        declared, in this transaction. Else for the same parameters, each of one kind of
        value, as the workload's other trials (so nothing a feature encoding would choke on
        gets in)."""
        space = self._stored_space(conn, wid)
        if space is None:
            from tunex.kernel import known_space

            space = known_space(workload)
            check = None
            if space is None and exported is not None:
                space = exported
                check = Space(exported.params, name=exported.name).violations
            if space is not None:
                doc = _space_json(space)
                conn.execute(S.workloads.update().where(S.workloads.c.id == wid)
                             .values(space=doc))
            if check is not None:
                return check
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

# -- helpers -----------------------------------------------------------------------------------


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


def _gzipped(path_or_file: object) -> bool:
    """Whether an export goes to a ``.gz`` file: written gzip'd, in the format before ``.gz``."""
    return isinstance(path_or_file, (str, os.PathLike)) and \
        os.fspath(path_or_file).lower().endswith(".gz")


def _format_from_suffix(path_or_file: object) -> str:
    if isinstance(path_or_file, (str, os.PathLike)):
        path = Path(os.fspath(path_or_file))
        suffix = (path.with_suffix("") if _gzipped(path) else path).suffix.lower().lstrip(".")
        if suffix in EXPORT_FORMATS:
            return suffix
    return "csv"


@contextlib.contextmanager
def _opened(path_or_file: str | os.PathLike[str] | IO[str]) -> Iterator[IO[str]]:
    if isinstance(path_or_file, (str, os.PathLike)):
        try:
            with (gzip.open(path_or_file, "wt", encoding="utf-8", newline="")
                  if _gzipped(path_or_file)
                  else open(path_or_file, "w", encoding="utf-8", newline="")) as f:
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


#: How an export writes the numbers JSON has no token for (NaN, Infinity are not JSON).
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _strict(value: Any) -> Any:
    """``value`` with every non-finite float (the times of a timer that failed, a fact) as its
    name in :data:`_NONFINITE`, so that an export is strict JSON for any reader."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


#: What a spreadsheet reads as the start of a formula (OWASP's list for CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (tuple, list, dict)):
        return canonical_json(value)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value  # text stays text: a kernel name or error is never run as a formula
    return value


_Item = tuple[Workload, Measurement, "str | None", float]
#: The most a gzip'd export may unpack to.
_MAX_UNPACKED = 1 << 30


def _read_export(source: str | os.PathLike[str] | IO[str]
                 ) -> tuple[list[_Item], dict[Workload, Space]]:
    """The trials of an export file, and the spaces it declares for their workloads."""
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        try:
            raw = read_bounded(name, _MAX_UNPACKED)
            if raw[:2] == b"\x1f\x8b":  # a gzip'd export (db export -o FILE.json.gz)
                with gzip.GzipFile(fileobj=io.BytesIO(raw)) as z:
                    raw = z.read(_MAX_UNPACKED + 1)  # a small file may unpack to any size
                if len(raw) > _MAX_UNPACKED:
                    raise DatabaseError(f"{name} unpacks to over {_MAX_UNPACKED >> 30} GiB (a "
                                        "gzip bomb?); nothing was imported")
        except (OSError, EOFError, ValueError) as exc:  # ValueError: not a regular file
            raise DatabaseError(f"cannot read {name} ({exc}): check the path; nothing was "
                                "imported") from exc
        if raw[:4] == b"PAR1":
            raise DatabaseError(f"{name} is a parquet export, which names no full workload and "
                                "cannot be imported; nothing was imported. Export with "
                                "--format json or jsonl to move trials between databases")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatabaseError(f"{name} is not a tunex json/jsonl export ({exc}); nothing was "
                                "imported") from exc
    else:
        name = getattr(source, "name", "<file>")
        text = source.read()
    start = text.lstrip()[:1]
    if not start:
        return [], {}
    try:
        if start == "[":
            records = json.loads(text)
        elif start == "{":
            try:  # one object, maybe over several lines: a single record, or not an export
                records = [json.loads(text)]
            except ValueError:
                records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            raise ValueError("it is not JSON")
    except (ValueError, RecursionError) as exc:  # nested deeper than the JSON reader goes
        raise DatabaseError(
            f"{name} is not a tunex json/jsonl export ({exc}); nothing was imported. CSV exports "
            "cannot be imported: export with format='json' or 'jsonl'"
        ) from exc
    from tunex.db.packs import PACK_FORMAT

    if len(records) == 1 and isinstance(records[0], dict) and \
            records[0].get("format") == PACK_FORMAT:
        raise DatabaseError(f"{name} is a config pack, not a trials export; nothing was "
                            f"imported: import it with `tunex pack import {name}`")
    if len(records) == 1 and isinstance(records[0], dict) and \
            isinstance(records[0].get("results"), list) and "schema_version" in records[0]:
        raise DatabaseError(f"{name} holds T4 results, which name no workload and cannot be "
                            "imported; nothing was imported. Export with --format json or "
                            "jsonl (or kernel_tuner) to move trials between databases")
    items = []
    declared: dict[Workload, Space] = {}
    for i, rec in enumerate(records, start=1):
        try:
            items.append(_item_of(rec))
            if rec.get("workload_space") is not None:
                declared.setdefault(items[-1][0], Space.from_dict(rec["workload_space"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise DatabaseError(
                f"{name}: record {i} is not a full tunex trial ({type(exc).__name__}: {exc}); "
                "nothing was imported. Import a json/jsonl file written by Database.export"
            ) from exc
    return items, declared


def _item_of(rec: Mapping[str, Any]) -> _Item:
    spec = rec["workload_spec"]
    if not isinstance(spec, Mapping):
        raise TypeError("workload_spec is not an object")
    if not isinstance(spec["kernel"], str) or not spec["kernel"]:
        raise TypeError(f"workload_spec's kernel {spec['kernel']!r} is not a name")
    if not isinstance(spec.get("kernel_hash", ""), str):
        raise TypeError(f"workload_spec's kernel_hash {spec['kernel_hash']!r} is not text")
    for key in ("problem", "target"):
        if not isinstance(spec.get(key, {}), Mapping):
            raise TypeError(f"workload_spec's {key} {spec[key]!r} is not an object")
    times = rec["times_ms"]
    if not isinstance(times, list) or any(
            isinstance(t, bool) or (not isinstance(t, (int, float))
                                    and not (isinstance(t, str) and t in _NONFINITE))
            for t in times):
        raise TypeError(f"times_ms {times!r} is not a list of times in ms")
    config = rec["config"]
    if not isinstance(config, Mapping) or not config:
        raise TypeError("config is not a non-empty object")
    for k, v in config.items():
        if not k or not _plain_value(v):
            raise TypeError(f"config parameter {k!r} holds {v!r}: a parameter value is a "
                            "number, string, bool or a list of them")
    compile_ms = rec.get("compile_ms")
    if compile_ms is not None and (isinstance(compile_ms, bool) or not isinstance(
            compile_ms, (int, float)) or not 0 <= compile_ms < math.inf):
        raise TypeError(f"compile_ms {compile_ms!r} is not a time in ms")
    for key in ("error", "worker", "strategy"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise TypeError(f"{key} {rec[key]!r} is not text")
    if rec.get("facts") is not None and not isinstance(rec["facts"], Mapping):
        raise TypeError("facts is not an object")
    m = Measurement(
        config=Config(config),
        status=Status(rec["status"]),
        times_ms=tuple(_NONFINITE[t] if isinstance(t, str) else t for t in times),
        compile_ms=rec.get("compile_ms"),
        facts=dict(rec.get("facts") or {}),
        error=rec.get("error"),
        worker=rec.get("worker"),
        started_at=_moment("started_at", rec["started_at"]),
        ended_at=_moment("ended_at", rec["ended_at"]),
    )
    recorded_at = rec.get("recorded_at")
    return (
        Workload.from_dict(spec),
        m,
        rec.get("strategy"),
        _moment("recorded_at", recorded_at) if recorded_at is not None else time.time(),
    )


#: Seconds since the epoch that every export can write as a date (pandas' datetime64[ns]
#: ends in 2262): a trial stored outside would break ``db export`` and ``tunex report``.
MOMENTS = (0.0, 9.2e9)


def _moment(key: str, value: Any) -> float:
    t = float(value)
    if not MOMENTS[0] <= t < MOMENTS[1]:  # NaN and infinities too
        raise ValueError(f"{key} {value!r} is not a time in seconds since the epoch between "
                         "1970 and 2262")
    return t
