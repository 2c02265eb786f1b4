"""Mirror a search's trials into an Optuna storage as they finish, for optuna-dashboard.

::

    tunex search ... --optuna-storage sqlite:///optuna.db
    optuna-dashboard sqlite:///optuna.db        # pip install optuna-dashboard; open :8080

The tuning database stays the record: the mirror is a view, written after each trial is
recorded, and a failure to write it is logged, never stops the search.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Sequence
from typing import Any

from tunex.errors import TunexError
from tunex.space import Space
from tunex.trial import Measurement, Workload

__all__ = ["OptunaMirror"]

log = logging.getLogger("tunex")


def _plain(v: Any) -> Any:
    """Optuna's categorical choices are None, bool, int, float or str."""
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def _same_database(storage: str, database: str) -> bool:
    from tunex.db._engine import _resolve_url

    try:
        (a, a_path), (b, b_path) = _resolve_url(storage), _resolve_url(database)
    except TunexError:
        return False  # a URL that does not parse: Optuna's error says so
    if a_path is not None or b_path is not None:
        return a_path is not None and b_path is not None and (
            os.path.realpath(a_path) == os.path.realpath(b_path))
    return (a.get_backend_name(), a.host, a.port, a.database) == (
        b.get_backend_name(), b.host, b.port, b.database)


def _foreign_sqlite(storage: str) -> str | None:
    """What an existing SQLite file named by ``storage`` is when it is not an Optuna storage
    (Optuna would add its tables to it before failing on a clash), else None."""
    import sqlite3

    from tunex.db._engine import _resolve_url

    try:
        _, path = _resolve_url(storage)
    except TunexError:
        return None
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as c:
            tables = {r[0] for r in c.execute("select name from sqlite_master where "
                                              "type='table'")}
    except sqlite3.Error:
        return None  # not SQLite at all: Optuna's error says so, and it writes nothing
    if not tables or "studies" in tables:
        return None
    return "a tunex tuning database" if "tunex_meta" in tables else "another application's " \
        f"SQLite database (tables {', '.join(sorted(tables)[:4])})"


class OptunaMirror:
    """An ``on_trial`` hook that adds each finished trial to an Optuna study.

    The study is named ``tunex:<kernel>:<workload digest>`` (one per workload; an existing one
    is continued) and minimises the median time in ms. Failed trials are ``FAIL`` trials with
    the status as a user attribute; every trial carries its tunex trial number.

    Args:
        storage: an Optuna storage URL (``sqlite:///optuna.db``, a PostgreSQL URL, ...).
        space: the space searched: parameters become categorical distributions of its values.
        workload: what is searched.
        database: the URL or file of the tuning database, if any: a storage in that same
            database is refused (Optuna would add its tables, one of them ``trials``, there).
    """

    def __init__(self, storage: str, space: Space, workload: Workload,
                 database: str | None = None) -> None:
        import optuna

        if database is not None and _same_database(storage, database):
            raise TunexError(f"--optuna-storage {storage!r} is the tuning database: Optuna "
                             "would write its own tables into it; pass another storage, such "
                             "as sqlite:///optuna.db")
        other = _foreign_sqlite(storage)
        if other is not None:
            raise TunexError(f"--optuna-storage {storage!r} is {other}: Optuna would add its "
                             "tables to it; pass a storage of its own, such as "
                             "sqlite:///optuna.db")
        self.optuna = optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.name = f"tunex:{workload.kernel}:{workload.digest}"
        try:
            self.study = optuna.create_study(storage=storage, study_name=self.name,
                                             direction="minimize", load_if_exists=True)
            self.study.set_user_attr("workload", workload.to_dict())
            self.mirrored = {t.user_attrs.get("tunex_trial") for t in self.study.get_trials(
                deepcopy=False)}
        except Exception as e:  # Optuna raises many kinds for a bad URL or an unusable file
            raise TunexError(f"cannot open Optuna storage {storage!r} ({e}): pass a storage "
                             "URL such as sqlite:///optuna.db, of a file that only Optuna "
                             "writes") from None
        self.distributions = {
            p.name: optuna.distributions.CategoricalDistribution(
                list(dict.fromkeys(_plain(v) for v in p.values)))
            for p in space.params}

    def sync(self, measurements: Sequence[Measurement]) -> int:
        """Add the trials recorded before this session (numbered 1, 2, ... in order) that the
        study lacks; return how many were added."""
        added = 0
        for number, m in enumerate(measurements, start=1):
            if number not in self.mirrored:
                self(m, number)
                added += 1
        return added

    def __call__(self, m: Measurement, number: int) -> None:
        if number in self.mirrored:
            return
        params = {k: _plain(v) for k, v in m.config.items() if k in self.distributions}
        ok = m.ok and math.isfinite(m.value)
        try:
            self.study.add_trial(self.optuna.trial.create_trial(
                state=self.optuna.trial.TrialState.COMPLETE if ok
                else self.optuna.trial.TrialState.FAIL,
                value=m.value if ok else None, params=params,
                distributions={k: self.distributions[k] for k in params},
                user_attrs={"tunex_trial": number, "status": m.status.value,
                            "repeats": len(m.times_ms), "worker": m.worker or ""}))
            self.mirrored.add(number)
        except Exception as e:  # the mirror is a view: never stop the search for it
            log.warning("could not mirror trial %d into Optuna study %s: %s", number,
                        self.name, e)
