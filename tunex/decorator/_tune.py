"""Tuning on a miss: the tuner's loop on the call's own arguments, within the budget.

The loop is :class:`tunex.tuner.Tuner`'s, the same the ``tunex search`` command runs, with a
:class:`~tunex.decorator._target.CallTarget` (configs compiled ahead of time in the shared build
pool, measured on the call's tensors in the calling thread while the pool builds the next ones).
What the decorator adds is where to start: the default config, the resolution's approximate
candidates (a pack's nearest entry, the cost model's pick) and the best configs of the kernel's
other shapes in the database are measured first; the strategy (``"model"`` by default, whatever
form the budget takes) is warm-started from those other shapes' trials; the close leaders are
measured again before one wins.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunex.decorator import _runtime as R
from tunex.decorator._target import CallTarget, best_of_siblings
from tunex.errors import ConfigError
from tunex.search import SearchStrategy, get_strategy
from tunex.space import Space
from tunex.trial import Config, Workload

__all__ = ["TuningMixin"]

log = R.log


class _Listed(SearchStrategy):
    """The configs of a list, in order (``prune_configs_by``'s pruned list)."""

    name = "listed"

    def __init__(self, space: Space, configs: Sequence[Config]) -> None:
        super().__init__(space)
        self._queue = list(configs)

    def _ask(self, n: int) -> list[Config] | None:
        out: list[Config] = []
        while self._queue and len(out) < n:
            c = self._queue.pop(0)
            self.proposals += 1
            if self._fresh(c):
                out.append(c)
        return out or None


class TuningMixin:
    """The tuning half of :class:`~tunex.decorator.Autotuned` (its attributes, declared here)."""

    name: str
    budget: Any
    strategy: str
    seed: int | None
    remeasure: int
    db_spec: Any
    tunings: int
    reset_to_zero: list[str]
    prune_configs_by: dict[str, Any]
    _tconfigs: dict[Config, Any]
    _user_pre_hook: Any
    options: Any

    if TYPE_CHECKING:  # provided by the other parts of Autotuned
        def default_config(self, space: Space) -> Config: ...

    def _reset(self, full: dict[str, Any]) -> None:
        """Before the tuned call's own launch: what ``reset_to_zero`` (or the user's pre-hook
        with ``reset_only=True``) does, since the benchmark runs left their results there."""
        if self._user_pre_hook is not None:
            self._user_pre_hook(full, reset_only=True)
            return
        for n in self.reset_to_zero:
            full[n].zero_()

    def _candidates(self, named: Mapping[str, Any], kwargs: Mapping[str, Any]
                    ) -> list[Config] | None:
        """triton.autotune's ``prune_configs_by`` applied to the config list, or None."""
        if not self._tconfigs or not self.prune_configs_by:
            return None
        tcs = list(self._tconfigs.values())
        early = self.prune_configs_by.get("early_config_prune")
        if early is not None:
            tcs = list(early(tcs, dict(named), **kwargs))
            if not tcs:
                raise ConfigError(f"{self.name}: early_config_prune returned no config; it "
                                  "must return at least one")
        perf = self.prune_configs_by.get("perf_model")
        if perf is not None:
            top_k = self.prune_configs_by.get("top_k", 1.0)
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self._tconfigs) * top_k))
            est = {id(tc): perf(**named, **tc.all_kwargs()) for tc in tcs}
            tcs = sorted(tcs, key=lambda tc: est[id(tc)])[:int(top_k)]
        back = {id(tc): c for c, tc in self._tconfigs.items()}
        return [back[id(tc)] for tc in tcs]

    def _tune(self, workload: Workload, space: Space, grid: Any, args: tuple[Any, ...],
              kwargs: Mapping[str, Any], named: Mapping[str, Any],
              extra: Mapping[str, Any]) -> tuple[Config, str, dict[str, Any]]:
        """Search the space on the call's arguments within the budget, recording each trial."""
        from tunex.cluster import CallerExecutor, shared_build_pool
        from tunex.tuner import Tuner

        missed = time.monotonic()  # a time budget bounds the whole call, set-up included
        db = R.open_db(self.db_spec, create=True)
        assert db is not None
        self.tunings += 1
        default = self.default_config(space)
        # where this tuning began: a process that ends before the decision that ends it is
        # recorded leaves this mark last, and the next miss resumes the search
        R.record(R.Selection(self.name, workload, default, "tuning",
                             f"tuning began, budget {self.budget}", "on_miss"), self.db_spec)
        candidates = self._candidates(named, kwargs)
        strategy: SearchStrategy
        if candidates is not None:
            strategy, first = _Listed(space, [c for c in candidates if c in space]), []
        else:
            siblings = best_of_siblings(db.history(kernel=workload.kernel, exclude=workload),
                                        workload, space)
            first = [default, *extra.get("seeds", ()), *siblings]
            strategy = get_strategy(self.strategy, space, seed=self.seed)
        label = strategy.name
        strategy.name = f"autotune:{label}"  # how its trials are recorded: tuned on a miss
        target = CallTarget(self, workload, grid, args, kwargs)  # type: ignore[arg-type]
        builder = target.builder()
        pool = None
        if builder is not None:
            try:
                pool = shared_build_pool()
            except OSError as exc:  # no processes here (a sandbox): Triton's JIT compiles
                log.warning("%s: no build processes (%s); compiling in this process", self.name,
                            exc)
                builder = None
        executor = CallerExecutor(target, pool, builder)
        try:
            result = Tuner(target, space, workload=workload, db=db, strategy=strategy,
                           budget=self.budget, executor=executor, seed=self.seed,
                           remeasure=self.remeasure, patience=self.options.patience,
                           like=self.options.like, related=self.options.related,
                           prior=self.options.prior, first=first,
                           started=missed).run()
        finally:
            executor.close()
            target.close()
        if result.stopped == "interrupted":  # a Ctrl-C ends the program, not just the tuning;
            # every trial is recorded and the next miss (in this process too) resumes it
            raise KeyboardInterrupt(f"{self.name}: tuning {dict(workload.problem)} interrupted "
                                    f"after {result.trials} trials; the next call resumes it")
        done = {m.config: m for m in db.measurements(workload)}
        best = db.best(workload, space)
        new, secs = result.new_trials, result.seconds
        where = "built in parallel" if pool is not None else "JIT"
        if best is None:
            failures = sum(1 for m in done.values() if not m.ok and m.config in space)
            log.warning("%s: every one of %d configs failed while tuning %s; using the default "
                        "config (the trials are in %r)", self.name, failures,
                        dict(workload.problem), db)
            # nothing was tuned: the selection reads as the default it is
            return default, (f"tuned {new} trials in {secs:.1f} s, all failed: default config"), {
                "trials": new, "source": "default"}
        base = done.get(default)
        speedup = None
        if base is not None and base.ok:
            speedup = base.value / best.value
            gain = f"{speedup:.2f}x over default"
        elif base is not None:
            gain = "default config failed"
        else:
            gain = "default not measured"
        fails = sum(1 for m in done.values() if not m.ok)
        used = (result.transfer or {}).get("used", 0)
        reason = (f"tuned {new} trials in {secs:.1f} s ({label}, {where}"
                  + (f", {fails} failed" if fails else "") + f"; {result.stopped}"
                  + (f"; warm start from {used} other workload{'s' * (used != 1)}"
                     if used else "") + f"), {gain}")
        return best.config, reason, {"trials": new, "speedup": speedup, "time_ms": best.value,
                                     "transfer": used}
