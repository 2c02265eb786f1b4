"""Trials as data: a pandas DataFrame per database (or workload), and parquet files of it."""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, Any

from tunex.errors import DatabaseError
from tunex.trial import Workload, canonical_json

if TYPE_CHECKING:
    import pandas as pd

    from tunex.db._database import Database

__all__ = ["decisions_dataframe", "find_workloads", "problem_label", "target_label",
           "to_dataframe", "write_parquet"]

_TIMES = ("started_at", "ended_at", "recorded_at")


def problem_label(workload: Workload) -> str:
    """A workload's problem as people write it: ``M=256 N=256 K=256`` (JSON for nested values)."""
    return " ".join(f"{k}={v if isinstance(v, (int, float, str)) else canonical_json(v)}"
                    for k, v in workload.problem.items()) or "-"


def target_label(workload: Workload) -> str:
    """A workload's target in a few words: its device and architecture (or core)."""
    t = dict(workload.target)
    parts = [str(t[k]) for k in ("device", "arch", "core") if k in t]
    return " ".join(parts) or canonical_json(t)


def find_workloads(db: Database, workload: str | Workload | None = None, *,
                   kernel: str | None = None) -> list[Workload]:
    """The workloads a command is about: all of them (of ``kernel`` when given), or the one
    ``workload`` names: a :class:`Workload`, or its digest or a unique prefix of it (as
    ``tunex db workloads`` shows them).

    Raises:
        DatabaseError: no workload, or several, match ``workload``.
    """
    if isinstance(workload, Workload):
        return [workload]
    found = db.workloads(kernel)
    if workload is None:
        return found
    text = workload.strip().lower()
    hits = [w for w in found if w.digest.startswith(text)] if text else []
    if len(hits) == 1:
        return hits
    where = f" of kernel {kernel!r}" if kernel else ""
    if not hits:
        raise DatabaseError(f"no workload {workload!r}{where} in {db!r}: `tunex db workloads "
                            "--db ...` lists them; pass a digest or a unique prefix of one")
    listed = ", ".join(f"{w.digest} ({w.kernel} {problem_label(w)})" for w in hits[:4])
    raise DatabaseError(f"workload {workload!r} is ambiguous in {db!r} ({listed}"
                        f"{', ...' if len(hits) > 4 else ''}): give more of the digest")


def require_kernel(db: Database, kernel: str | None) -> None:
    """Refuse a ``kernel`` the database holds no workload of (a misspelt ``--kernel`` would
    export or report nothing, and say nothing), naming the kernels it holds."""
    if kernel is None or db.workloads(kernel):
        return
    kernels = sorted({w.kernel for w in db.workloads()})
    raise DatabaseError(f"no workload of kernel {kernel!r} in {db!r}"
                        + (f" (its kernels: {', '.join(map(repr, kernels[:8]))}"
                           f"{', ...' if len(kernels) > 8 else ''})" if kernels
                           else " (it holds no workload yet)")
                        + ": pass one of its kernels, or leave --kernel out")


def to_dataframe(db: Database, workload: str | Workload | None = None, *,
                 kernel: str | None = None) -> pd.DataFrame:
    """Every trial (of ``workload``, or of the whole database; of ``kernel`` when given) as a
    pandas DataFrame, one row per trial, in (workload, trial) order.

    Columns: ``trial``, ``status``, ``time_ms`` (median, NaN for a failure), one column per
    config parameter (typed: ``Int64``, ``Float64``, ``boolean``, ``string``; a tuple such as a
    permutation stays a tuple), then ``workload`` (digest), ``kernel``, ``problem`` (e.g.
    ``M=256 N=256``), ``compile_ms``, ``worker``, ``strategy``, ``error``, ``started_at``,
    ``ended_at``, ``recorded_at`` (timezone-aware UTC datetimes), ``repeats``, ``times_ms``
    (the runtime of each repeat) and ``facts`` (JSON text). Parameters that clash with those
    names are ``config.<name>``, as in :meth:`Database.export_rows`.

    ``workload``: a :class:`Workload`, or its digest or a unique prefix of it.
    """
    import pandas as pd

    one = find_workloads(db, workload, kernel=kernel)[0] if workload is not None else None
    records = db._export(one, kernel)
    labels = {}
    rows = []
    for row, full in records:
        spec = full["workload_spec"]
        if row["workload"] not in labels:
            labels[row["workload"]] = problem_label(Workload.from_dict(spec))
        rows.append({**row, "problem": labels[row["workload"]],
                     "recorded_at": full["recorded_at"], "repeats": len(full["times_ms"]),
                     "times_ms": tuple(full["times_ms"]),
                     "facts": canonical_json(full["facts"])})
    head = ["trial", "status", "time_ms"]
    tail = ["workload", "kernel", "problem", "compile_ms", "worker", "strategy", "error",
            *_TIMES, "repeats", "times_ms", "facts"]
    params = sorted({k for r in rows for k in r} - set(head) - set(tail))
    df = pd.DataFrame.from_records(rows, columns=[*head, *params, *tail])
    for col in params:
        if not df[col].map(lambda v: isinstance(v, (tuple, list, dict))).any():
            df[col] = df[col].convert_dtypes()
    for col in ("trial", "repeats"):
        df[col] = df[col].astype("int64")
    for col in ("time_ms", "compile_ms"):
        df[col] = df[col].astype("float64")
    for col in ("status", "workload", "kernel", "problem", "worker", "strategy", "error",
                "facts"):
        df[col] = df[col].astype("string")
    for col in _TIMES:
        df[col] = pd.to_datetime(df[col], unit="s", utc=True)
    return df


def decisions_dataframe(db: Database, workload: str | Workload | None = None, *,
                        kernel: str | None = None) -> pd.DataFrame:
    """What ``@tunex.autotune`` decided (:meth:`Database.decisions`: of ``workload``, or of the
    whole database; of ``kernel`` when given) as a pandas DataFrame, one row per decision,
    oldest first within each workload.

    Columns: ``decided_at`` (a timezone-aware UTC datetime), ``source`` (``db``, ``pack``,
    ``model``, ``default``, ``tuned``), ``config`` (JSON text), ``detail``, ``trial`` (the
    trial a database or tuned config came from, ``Int64``), ``time_ms``, ``seconds``, ``mode``,
    ``key`` (JSON text: the call's key before bucketing), ``host``, ``pid``, then ``workload``
    (digest), ``kernel`` and ``problem``.
    """
    import pandas as pd

    one = find_workloads(db, workload, kernel=kernel)[0] if workload is not None else None
    columns = ["decided_at", "source", "config", "detail", "trial", "time_ms", "seconds",
               "mode", "key", "host", "pid", "workload", "kernel", "problem"]
    rows = [{"decided_at": d.decided_at, "source": d.source, "config": d.config.to_json(),
             "detail": d.detail, "trial": d.trial, "time_ms": d.time_ms, "seconds": d.seconds,
             "mode": d.mode, "key": None if d.key is None else canonical_json(d.key),
             "host": d.host, "pid": d.pid, "workload": d.workload.digest,
             "kernel": d.workload.kernel, "problem": problem_label(d.workload)}
            for d in db.decisions(one, kernel=kernel)]
    df = pd.DataFrame.from_records(rows, columns=columns)
    for col in ("trial", "pid"):
        df[col] = df[col].astype("Int64")
    for col in ("time_ms", "seconds"):
        df[col] = df[col].astype("float64")
    for col in ("source", "config", "detail", "mode", "key", "host", "workload", "kernel",
                "problem"):
        df[col] = df[col].astype("string")
    df["decided_at"] = pd.to_datetime(df["decided_at"], unit="s", utc=True, errors="coerce")
    return df


def write_parquet(db: Database, path_or_file: str | os.PathLike[str] | IO[Any], *,
                  workload: str | Workload | None = None, kernel: str | None = None) -> int:
    """Write :func:`to_dataframe` to a parquet file; return the number of trials written.

    A parameter column whose values mix types across workloads (an int in one kernel, a string
    in another) is written as JSON text, since a parquet column has one type.
    """
    try:
        import pyarrow as pa
    except ImportError:
        raise DatabaseError("parquet export needs pyarrow: pip install 'tunex[parquet]' (or "
                            "export csv/json/jsonl)") from None
    df = to_dataframe(db, workload, kernel=kernel)
    for col in [c for c in df.columns if df[c].dtype == "object"]:
        try:
            pa.array(df[col])
        except (pa.ArrowException, TypeError, ValueError):
            df[col] = df[col].map(lambda v: None if v is None else canonical_json(v))
    target: Any = path_or_file
    if not isinstance(path_or_file, (str, os.PathLike)):
        target = getattr(path_or_file, "buffer", path_or_file)  # a text stream's bytes
    try:
        df.to_parquet(target, index=False)
    except OSError as exc:
        raise DatabaseError(f"cannot write parquet file {path_or_file} ({exc}): check the path "
                            "and its permissions") from exc
    return len(df)
