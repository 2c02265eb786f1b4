"""Tuning on a miss: measure configs on the call's own arguments, within a budget.

The loop is the tuner's (ask -> measure -> record -> tell), run in the calling process because
the measurement needs the user's tensors: the default config and the resolution's approximate
candidates first, then the search strategy; each trial is written to the database as it ends;
the close leaders are measured again before one wins.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunex.autotune import _runtime as R
from tunex.errors import ConfigError
from tunex.space import Space
from tunex.trial import Config, Measurement, Status, Workload

__all__ = ["TuningMixin", "best_in"]

log = R.log

_CLOSE = 1.03  # leaders within 3% of the best are re-measured before one is declared


def best_in(db: Any, workload: Workload, space: Space) -> Measurement | None:
    """The database's best config of ``workload`` that belongs to ``space`` (a kernel whose
    config list changed keeps its trials; only the ones still possible count)."""
    for m in db.top_k(workload, 64):
        if m.config in space:
            return m
    return None


class TuningMixin:
    """The tuning half of :class:`~tunex.autotune.Autotuned` (its attributes, declared here)."""

    name: str
    space: Space
    budget: Any
    strategy: str
    seed: int | None
    remeasure: int
    interpreted: bool
    warmup_ms: int
    rep_ms: int
    db_spec: Any
    tunings: int
    reset_to_zero: list[str]
    restore_value: list[str]
    prune_configs_by: dict[str, Any]
    _tconfigs: dict[Config, Any]
    _bench: Callable[[Callable[[], Any], Config], Sequence[float]] | None
    _do_bench: Callable[..., Any] | None
    _user_pre_hook: Callable[..., Any] | None
    _user_post_hook: Callable[..., Any] | None
    _restore_copies: dict[str, Any]
    _run: Callable[..., Any]

    def _entry(self, config: Config) -> tuple[dict[str, Any], Any]:
        raise NotImplementedError

    def default_config(self, space: Space) -> Config:
        raise NotImplementedError

    def _bench_pre(self, full: dict[str, Any], reset_only: bool = False) -> None:
        if self._user_pre_hook is not None:
            if reset_only:
                self._user_pre_hook(full, reset_only=True)
            else:
                self._user_pre_hook(full)
            return
        for n in self.reset_to_zero:
            full[n].zero_()
        if not reset_only and self.restore_value:
            self._restore_copies = {n: full[n].clone() for n in self.restore_value}

    def _bench_post(self, full: dict[str, Any], exception: BaseException | None) -> None:
        if self._user_post_hook is not None:
            self._user_post_hook(full, exception=exception)
            return
        for n in self.restore_value:
            if n in self._restore_copies:
                full[n].copy_(self._restore_copies[n])
        self._restore_copies = {}

    def measure(self, config: Config, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                named: Mapping[str, Any], grid: Any) -> Measurement:
        """Time ``config`` on the call's own arguments; a config that fails is a failed
        measurement, never an exception."""
        kw, hook = self._entry(config)
        launch_kw = {k: v for k, v in kw.items() if k != "warmup"}
        full = {**named, **launch_kw}
        run = self._run

        def call() -> None:
            if hook is not None:
                hook(args, kwargs)
            self._bench_pre(full)
            try:
                run(*args, grid=grid, **kwargs, **kw)
            except BaseException as e:
                try:
                    self._bench_post(full, e)
                finally:
                    raise
            self._bench_post(full, None)

        facts = R.env_facts()
        start = time.time()
        try:
            t0 = time.perf_counter()
            call()  # compiles the config; its errors surface here
            _sync()
            compile_ms = (time.perf_counter() - t0) * 1e3
            times = self._time(call, config)
        except Exception as exc:
            status = _failure_status(exc)
            text = f"{type(exc).__name__}: {exc}".strip()
            log.debug("%s: config %s failed (%s)", self.name, dict(config), text)
            return Measurement.failed(config, status, text[:4000], facts=facts,
                                      started_at=start, ended_at=time.time())
        if not times or not all(math.isfinite(t) for t in times):
            return Measurement.failed(config, Status.RUNTIME_ERROR,
                                      "the benchmark returned no finite time", facts=facts,
                                      started_at=start, ended_at=time.time())
        return Measurement(config, Status.OK, tuple(times), compile_ms=compile_ms, facts=facts,
                           started_at=start, ended_at=time.time())

    def _time(self, call: Callable[[], None], config: Config) -> list[float]:
        if self._bench is not None:
            return [float(t) for t in self._bench(call, config)]
        if self._do_bench is not None:  # triton.autotune's do_bench(kernel_call, quantiles)
            got = self._do_bench(call, quantiles=(0.5, 0.2, 0.8))
            return [float(t) for t in (got if isinstance(got, (list, tuple)) else [got])]
        if not self.interpreted and _cuda():
            import triton.testing

            got = triton.testing.do_bench(call, warmup=self.warmup_ms, rep=self.rep_ms,
                                          return_mode="all")
            return [float(t) for t in got]
        out = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    def _remeasure(self, workload: Workload, space: Space, done: Mapping[Config, Measurement],
                   db: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                   named: Mapping[str, Any], grid: Any) -> int:
        """Measure the leaders within 3% of the best again (the database pools their runs), so
        one noisy timing does not pick the winner; return the trials added."""
        ok = sorted((m for c, m in done.items() if m.ok and c in space), key=lambda m: m.value)
        close = [m.config for m in ok[:4] if m.value <= ok[0].value * _CLOSE] if ok else []
        if len(close) < 2:
            return 0
        for _ in range(self.remeasure):
            for c in close:
                db.record(workload, self.measure(c, args, kwargs, named, grid),
                          strategy="autotune:remeasure")
        return self.remeasure * len(close)

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
        from tunex.search import get_strategy

        db = R.open_db(self.db_spec, create=True)
        assert db is not None
        started = time.monotonic()
        self.tunings += 1
        done: dict[Config, Measurement] = {m.config: m for m in db.measurements(workload)}
        limit = self.budget.trials if self.budget.trials is not None else math.inf
        seconds = self.budget.seconds if self.budget.seconds is not None else math.inf
        candidates = self._candidates(named, kwargs)
        strategy_name = self.strategy
        if candidates is not None:
            queue = [c for c in candidates if c in space]
            strategy = None
        else:
            queue = [c for c in dict.fromkeys(extra.get("seeds", ())) if c in space]
            if space.size <= limit:
                strategy_name = "exhaustive"  # the budget covers the space: measure it all
            strategy = get_strategy(strategy_name, space, seed=self.seed)
            if done:
                strategy.tell(list(done.values()))
        default = self.default_config(space)
        new = 0
        idle = 0
        while new < limit and time.monotonic() - started < seconds:
            if queue:
                c = queue.pop(0)
            elif strategy is not None:
                asked = strategy.ask(1)
                if not asked:
                    break
                c = asked[0]
            else:
                break
            if c in done:
                if strategy is not None:
                    strategy.tell([done[c]])
                idle += 1
                if idle > 10 * max(space.size, 1):
                    break
                continue
            m = self.measure(c, args, kwargs, named, grid)
            db.record(workload, m, strategy=f"autotune:{strategy_name}")
            done[c] = m
            new += 1
            if strategy is not None:
                strategy.tell([m])
        new += self._remeasure(workload, space, done, db, args, kwargs, named, grid)
        best = best_in(db, workload, space)
        secs = time.monotonic() - started
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
        reason = (f"tuned {new} trials in {secs:.1f} s ({strategy_name}"
                  + (f", {fails} failed" if fails else "") + f"), {gain}")
        return best.config, reason, {"trials": new, "speedup": speedup, "time_ms": best.value}



def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False

def _sync() -> None:
    if _cuda():
        import torch

        torch.cuda.synchronize()

def _failure_status(exc: BaseException) -> Status:
    names = {c.__name__ for c in type(exc).__mro__}
    if "OutOfResources" in names:
        return Status.PRUNED
    if names & {"CompilationError", "CompileTimeAssertionFailure", "PTXASError"}:
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR

