"""Resolution order of the decorator: in-process cache, database, packs, the database's
nearest tuned workload, cost model, default; tuning on a miss when the mode says so."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunex.decorator import _runtime as R
from tunex.decorator._configs import Entry
from tunex.errors import ConfigError, DatabaseError, TunexError
from tunex.space import Space
from tunex.trial import Config, Workload

__all__ = ["ResolutionMixin", "canonical_problem"]

log = R.log


def _plain(value: Any) -> Any:
    """A key value as the database stores it (dtypes become their short name)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    text = str(value)
    return text[6:] if text.startswith("torch.") else text

class ResolutionMixin:
    """How :class:`~tunex.decorator.Autotuned` picks a config for a new workload (its
    attributes, declared here)."""

    name: str
    kernel_hash: str
    arg_names: list[str]
    _given: set[str]
    key_names: list[str]
    interpreted: bool
    mode: str
    seed: int | None
    db_spec: Any
    model_path: Any
    listener: Any
    space: Space
    last: Any
    best_config: Any
    _tconfigs: dict[Config, Any]
    _buckets: dict[str, Callable[[Any], Any]]
    _problem_fn: Any
    _bind_fn: Any
    _dtype_names: list[str] | None
    _by_workload: dict[str, tuple[Entry, Config]]
    _bound_spaces: dict[str, Space]
    _stale_warned: set[str]

    if TYPE_CHECKING:  # provided by the other parts of Autotuned
        def _bind(self, args: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
            ...

        def _entry(self, config: Config) -> Entry:
            ...

        def default_config(self, space: Space) -> Config:
            ...

        def triton_config(self, config: Config) -> Any:
            ...

        def _tune(self, workload: Workload, space: Space, grid: Any, args: tuple[Any, ...],
                  kwargs: Mapping[str, Any], named: Mapping[str, Any],
                  extra: Mapping[str, Any]) -> tuple[Config, str, dict[str, Any]]:
            ...

    def workload(self, named: Mapping[str, Any]) -> tuple[Workload, dict[str, Any]]:
        """The workload of a call's named arguments, and its key before bucketing.

        The problem is the bucketed key plus the tensor arguments' dtypes, or what
        ``problem=`` makes of the named arguments.
        """
        problem: dict[str, Any] = {}
        raw: dict[str, Any] = {}
        v: Any
        for n in self.key_names:
            v = named.get(n)
            if hasattr(v, "dtype"):
                v = v.dtype
            elif isinstance(v, float) and v.is_integer():  # 100.0 == 100: one raw cache key,
                v = int(v)  # so one workload too (else the first call's config served both)
            raw[n] = _plain(v)
            problem[n] = _plain(self._buckets[n](v))
        if self._problem_fn is not None:
            problem = dict(self._problem_fn(named))
        else:
            for n in self._dtype_names or ():
                v = named.get(n)
                problem[f"{n}.dtype"] = _plain(v.dtype) if hasattr(v, "dtype") else None
        return Workload(self.name, self.kernel_hash, problem, self.fingerprint()), raw

    def fingerprint(self) -> dict[str, Any]:
        """The device fingerprint of this kernel's workloads in this process."""
        return dict(R.fingerprint(self.interpreted))

    def known(self, problem: Mapping[str, Any]) -> tuple[Config, str, float | None]:
        """What the database or a pack holds for this workload problem (as :meth:`workload`
        makes it), found without launching, tuning or asking the cost model: the config,
        where it comes from (``"db"``, ``"pack"``, or ``"default"`` when neither has one) and
        its measured median time in ms when the database or an exact-device pack has one."""
        workload = Workload(self.name, self.kernel_hash, dict(problem), self.fingerprint())
        config, source, _reason, extra = self._lookup(workload, self._space_for(workload),
                                                      "never", model=False)
        assert config is not None  # mode "never" always names a config
        t = extra.get("time_ms")
        return config, source, None if t is None else float(t)

    def _space_for(self, workload: Workload) -> Space:
        space = self.space
        if not space.problem or space.is_bound:
            return space
        k = canonical_problem(workload)
        hit = self._bound_spaces.get(k)
        if hit is None and self._bind_fn is not None:
            hit = self._bind_fn(space, workload)
            self._bound_spaces[k] = hit
        if hit is None:
            values = {n: workload.problem[n] for n in space.problem
                      if n in workload.problem and n not in space.bound}
            missing = [n for n in space.problem if n not in values and n not in space.bound]
            if missing:
                raise ConfigError(
                    f"{self.name}: the space's problem sizes {missing} are not keys of the "
                    f"kernel ({self.key_names}); add them to key=... or bind them first "
                    "(space.bind(...))")
            hit = space.bind(**values)
            self._bound_spaces[k] = hit
        return hit

    def _resolve(self, grid: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
                 ) -> tuple[Entry, bool]:
        started = time.perf_counter()
        named = self._bind(args, kwargs)
        self._check_complete(named)
        workload, raw = self.workload(named)
        wkey = workload.key
        mode = R.resolve_mode(self.mode)
        known = self._by_workload.get(wkey)
        if known is not None:
            self._select(workload, raw, known[1], "cache", "same bucket as an earlier call",
                         mode, started)
            return known[0], False
        space = self._space_for(workload)
        config, source, reason, extra = self._lookup(workload, space, mode)
        tuned = False
        if config is None:
            assert mode == "on_miss"
            config, reason, extra = self._tune(workload, space, grid, args, kwargs, named,
                                               extra)
            source, tuned = extra.pop("source", "tuned"), True
        entry = self._entry(config)
        self._by_workload[wkey] = (entry, config)
        self.best_config = self.triton_config(config) if self._tconfigs else config
        self._select(workload, raw, config, source, reason, mode, started, **extra)
        return entry, tuned

    def _check_complete(self, named: Mapping[str, Any]) -> None:
        """Refuse a call that leaves out an argument no config gives, before it is keyed,
        tuned or recorded (it would be resolved under ``None`` only for the launch to fail)."""
        missing = [n for n in self.arg_names if n not in named and n not in self._given]
        if missing:
            raise TypeError(f"{self.name}() missing required argument(s) {missing}: pass them "
                            "to the call (nothing was tuned or recorded for it)")

    def _select(self, workload: Workload, raw: Mapping[str, Any], config: Config, source: str,
                reason: str, mode: str, started: float, **extra: Any) -> None:
        sel = R.Selection(self.name, workload, config, source, reason, mode, dict(raw),
                          seconds=time.perf_counter() - started, **extra)
        self.last = sel
        R.notify(sel, self.listener)
        R.record(sel, self.db_spec)

    def _valid(self, config: Config, space: Space) -> bool:
        return config in space

    def _lookup(self, workload: Workload, space: Space, mode: str, model: bool = True
                ) -> tuple[Config | None, str, str, dict[str, Any]]:
        """Database, packs, model (unless ``model=False``), default; None for on_miss when
        tuning is due (with the approximate candidates worth measuring first in
        ``extra["seeds"]``)."""
        seeds: list[Config] = []
        db = None
        try:
            db = R.open_db(self.db_spec, create=False)
            best = db.best(workload, space) if db is not None else None
        except DatabaseError as exc:
            if mode == "on_miss":
                raise
            R.db_error(exc)
            best = None
        if best is not None:
            resume = self._interrupted(db, workload) if mode == "on_miss" else None
            if resume is None:
                return best.config, "db", f"best in {db!r}, median {best.value:.4g} ms", {
                    "time_ms": best.value}
            # the search goes on where it stopped: what seeded its start is in its trials
            log.info("%s %s: %s", self.name, dict(workload.problem), resume)
            return None, "", "", {"seeds": [self.default_config(space)]}
        match = self._pack_match(workload, space)
        if match is not None:
            if mode != "on_miss" or match.tier == "exact":
                return match.config, "pack", match.reason, {"time_ms": match.entry.median_ms
                                                            if match.tier == "exact" else None}
            seeds.append(match.config)
        if mode == "never" and db is not None:  # before the model: nearer the best
            near = self._nearest_tuned(workload, space, db)  # (benchmarks/predict_unseen.py)
            if near is not None:
                return near[0], "db", near[1], {}
        if mode != "pinned" and model:
            picked = self._model_pick(workload, space, db)
            if picked is not None:
                if mode == "never":
                    return picked[0], "model", picked[1], {}
                seeds.append(picked[0])
        default = self.default_config(space)
        if mode == "on_miss":
            return None, "", "", {"seeds": [default, *seeds]}
        why = "no database row, pack or cost model for this workload"
        if mode == "pinned":
            why = "pinned: no database row or pack for this workload"
            log.warning("%s: %s; using the default config %s", self.name, why, dict(default))
        return default, "default", why, {}

    def _interrupted(self, db: Any, workload: Workload) -> str | None:
        """Why an ``on_miss`` call tunes a workload the database already has a best for, or
        None: a tuning on a miss begun by a process that has ended (killed, or a Ctrl-C or
        error out of this process's own tuning) before it recorded where it ended. Its
        trials are kept and the search resumes within the budget (the trials recorded
        count). Once only: a resumed tuning that ends the same way leaves the best so far in
        use, for a config that ends the process would otherwise end every run."""
        try:
            cut = db.cut_short(workload)
        except DatabaseError as exc:
            R.db_error(exc)
            return None
        if not cut:
            return None  # never tuned on a miss here, or the newest tuning ended as it should
        last = cut[-1]
        # (misses are serialized by the kernel's lock: one of this process is not running now)
        if not (last.by_this_process() or last.process_ended()):
            return None  # still tuning in another process (or one of another host)
        trials = db.count(workload)
        if len(cut) > 1:
            log.warning("%s %s: its tuning on a miss was cut short %d times in a row (the "
                        "last in process %d); using the best of its %d trials, not tuning it "
                        "again (if a config ends the process, `tunex report` shows the trials "
                        "that came before)", self.name, dict(workload.problem), len(cut), last.pid,
                        trials)
            return None
        return (f"resuming the tuning cut short in process {last.pid} on {last.host} "
                f"({trials} trials recorded)")

    def _pack_match(self, workload: Workload, space: Space) -> Any:
        from tunex.db.packs import resolve

        packs = R.loaded_packs()
        if not packs:
            return None
        match = resolve(packs, workload)
        if match is not None and not self._valid(match.config, space):
            log.warning("%s: %s gives %s, which is not in the kernel's space; ignoring it",
                        self.name, match.reason, dict(match.config))
            return None
        if match is None:
            for p in packs:
                hashes = p.kernels().get(self.name)
                if hashes and self.kernel_hash not in hashes and p.label not in self._stale_warned:
                    self._stale_warned.add(p.label)
                    log.warning(
                        "%s: pack %s holds configs for another version of this kernel (source "
                        "hash %s, this one is %s); they are not used: re-tune and export a new "
                        "pack", self.name, p.label, ",".join(sorted(hashes)), self.kernel_hash)
        return match

    def _nearest_tuned(self, workload: Workload, space: Space,
                       db: Any) -> tuple[Config, str] | None:
        """The best config of the database's nearest other workload of this kernel, ranked as
        a pack's entries are (same source, same device or architecture, nearest problem in
        log2), that is valid here; the workloads are ranked first, so only the trials of the
        ones tried are read."""
        from tunex.db.packs import rank_workloads

        try:
            others = [w for w in db.workloads(kernel=self.name) if w != workload]
            for w, near in rank_workloads(others, workload):
                best = db.best(w, space)
                if best is not None:  # else nothing of it is valid here: the next one
                    return best.config, f"nearest tuned workload in {db!r}: {near.reason}"
        except DatabaseError as exc:
            R.db_error(exc)
        return None

    # -- cost model ----------------------------------------------------------------------------

    def model_file(self, db: Any = None) -> Path | None:
        """Where this kernel's cost model lives: ``model=`` or, beside a file database,
        ``tunex-models/<kernel>.json``."""
        if self.model_path is not None:
            return Path(os.fspath(self.model_path))
        path = getattr(db, "path", None)
        if path is None:
            return None
        return Path(path).parent / "tunex-models" / f"{self.name}.json"

    def _model_pick(self, workload: Workload, space: Space,
                    db: Any) -> tuple[Config, str] | None:
        path = self.model_file(db)
        if path is None or not path.exists():
            return None
        from tunex.decorator._model import predict_best

        try:
            return predict_best(path, space, workload, self.seed)
        except TunexError as exc:
            log.warning("%s: cost model %s unusable (%s); not using it", self.name, path, exc)
            return None

    def train_model(self, db: Any = None, path: str | os.PathLike[str] | None = None) -> Path:
        """Fit a cost model on every trial of this kernel in the database and save it where
        the runtime looks for it (:meth:`model_file`, or ``path``); return the file."""
        from tunex.decorator._model import train

        database = R.open_db(db if db is not None else self.db_spec, create=False)
        if database is None:
            raise ConfigError(f"{self.name}: no tuning database to train a cost model from")
        target = Path(os.fspath(path)) if path is not None else self.model_file(database)
        if target is None:
            raise ConfigError(f"{self.name}: pass path=... to save the cost model (the "
                              "database is not a file)")
        return train(database, self.name, self.space, target)


def canonical_problem(workload: Workload) -> str:
    """What a bound space depends on: the problem key and the device."""
    from tunex.trial import canonical_json

    return canonical_json([workload.problem, workload.target])

