"""Optuna's samplers through its ask/tell interface, made aware of constraints and failures.

Optuna samples the Cartesian product of the parameters. Two things make its samplers work on
kernel spaces (measured in benchmarks/RESULTS.md):

* a point the constraints exclude never reaches a worker: it is told to the sampler at once as a
  bad value and the sampler is asked again;
* a failed trial, and a repeat of a known config, are told as values (the worst value seen plus
  a margin; the known value), not as ``TrialState.FAIL``. Samplers ignore failed trials, so with
  FAIL they keep proposing the same bad or already-measured point.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import optuna

from tunex.errors import StrategyError
from tunex.search._base import SearchStrategy
from tunex.space import Space
from tunex.trial import Config, Measurement

__all__ = ["OptunaSearch"]

_PENALTY_MARGIN = math.log(2.0)  # failures score as twice as slow as the worst success
# re-asks per slot before falling back to a fresh random point: on small constrained spaces the
# samplers keep proposing excluded or measured points; 8 instead of 64 cut TPE's time per
# 100-trial search 3.8x there and left its trials to 95% unchanged (benchmarks/RESULTS.md)
_MAX_RETRIES = 8
_MAX_RETRIES_GP = 6  # a GP ask costs a model fit: give up on excluded points sooner
_CMAES = ("cmaes", "cma-es", "cma")  # names of the CMA-ES variant


def _sampler(variant: str, seed: int | None, source: list[optuna.trial.FrozenTrial] | None = None
             ) -> optuna.samplers.BaseSampler:
    s = optuna.samplers
    if seed is not None:  # Optuna's samplers seed NumPy's legacy generator: 32 bits at most
        seed %= 2**32
    if variant in ("", "tpe"):
        return s.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    if variant == "tpe-independent":
        return s.TPESampler(seed=seed)
    if variant in _CMAES:
        try:
            import cmaes  # noqa: F401
        except ImportError as e:
            raise StrategyError("optuna:cmaes needs cmaes: pip install 'tunex[cmaes]'") from e
        if source:
            with warnings.catch_warnings():  # both arguments are marked experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return s.CmaEsSampler(seed=seed, warn_independent_sampling=False,
                                      with_margin=True, source_trials=source)
        return s.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if variant == "gp":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise StrategyError("optuna:gp needs torch: pip install 'tunex[gp]'") from e
        return s.GPSampler(seed=seed)
    if variant == "qmc":
        return s.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)
    if variant == "random":
        return s.RandomSampler(seed=seed)
    raise StrategyError(
        f"unknown Optuna sampler {variant!r}; choose tpe, tpe-independent, cmaes, gp, qmc, random"
    )


class OptunaSearch(SearchStrategy):
    """An Optuna sampler (``variant``: tpe, cmaes, gp, qmc, random) on a tunex space.

    Ordered parameters are given to Optuna as integer indices (so CMA-ES and GP see their
    order), the others as categorical. The objective is ``log(runtime)``. ``retries``: proposals
    of excluded or known points per slot before a fresh uniform point is taken instead (default
    8; 6 for GP, whose every proposal costs a fit). ``source``: trials already measured on
    this workload; CMA-ES then starts from a distribution fit to their best tenth (warm-started
    CMA-ES, with margin for the integer indices), the other samplers ignore it.
    """

    name = "optuna"

    def __init__(self, space: Space, *, seed: int | None = None, variant: str = "tpe",
                 retries: int | None = None, source: Sequence[Measurement] = ()) -> None:
        super().__init__(space, seed=seed)
        self.variant = variant or "tpe"
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._dists: dict[str, optuna.distributions.BaseDistribution] = {}
        for p in space.params:
            n = len(p.values)
            if p.ordered and n > 1:
                self._dists[p.name] = optuna.distributions.IntDistribution(0, n - 1)
            else:
                self._dists[p.name] = optuna.distributions.CategoricalDistribution(list(range(n)))
        self.study = optuna.create_study(
            direction="minimize",
            sampler=_sampler(self.variant, seed,
                             self._source(source) if source and self.variant in _CMAES else None))
        self._open: dict[Config, list[optuna.trial.Trial]] = {}
        self._orphans: list[optuna.trial.Trial] = []  # excluded points told once a value exists
        self._worst: float | None = None
        self._retries = retries or (_MAX_RETRIES_GP if self.variant == "gp" else _MAX_RETRIES)

    # -- mapping between Optuna's index params and configs --------------------------------------

    def _config(self, trial: optuna.trial.Trial) -> Config:
        return Config({p.name: p.values[int(trial.params[p.name])] for p in self.space.params})

    def _params(self, config: Config) -> dict[str, Any]:
        return {p.name: p.index(config[p.name]) for p in self.space.params}

    def _source(self, measurements: Sequence[Measurement]) -> list[optuna.trial.FrozenTrial]:
        """Successful trials over the ordered parameters only (what CMA-ES models); empty
        where they are too few for a best tenth."""
        ordered: dict[str, optuna.distributions.BaseDistribution] = {
            n: d for n, d in self._dists.items()
            if isinstance(d, optuna.distributions.IntDistribution)}
        ok = [m for m in measurements if m.ok and m.value > 0 and m.config in self.space]
        if not ordered or len(ok) < 10:
            return []
        return [optuna.trial.create_trial(
            params={n: v for n, v in self._params(m.config).items() if n in ordered},
            distributions=ordered, value=math.log(m.value)) for m in ok]

    def _penalty(self) -> float | None:
        return None if self._worst is None else self._worst + _PENALTY_MARGIN

    def _score(self, m: Measurement) -> float | None:
        return math.log(m.value) if m.ok and m.value > 0 else self._penalty()

    # -- ask/tell -------------------------------------------------------------------------------

    def _ask(self, n: int) -> list[Config] | None:
        out: list[Config] = []
        for _ in range(n):
            picked = None
            for _ in range(self._retries):
                trial = self.study.ask(self._dists)
                self.proposals += 1
                config = self._config(trial)
                if config in self.history:
                    value = self._score(self.history[config])
                    if value is None:
                        self._orphans.append(trial)
                    else:
                        self.study.tell(trial, value)
                elif config in self.pending or config in out:
                    self._open.setdefault(config, []).append(trial)
                elif config not in self.space:
                    if self._penalty() is None:
                        self._orphans.append(trial)
                    else:
                        self.study.tell(trial, self._penalty())
                else:
                    self._open.setdefault(config, []).append(trial)
                    picked = config
                    break
            if picked is None:  # the sampler is stuck on known points: add a fresh one
                fresh = self._random_fresh(1, also=out)
                if fresh is None:
                    break
                picked = fresh[0]
                self.study.enqueue_trial(self._params(picked))
                self._open.setdefault(picked, []).append(self.study.ask(self._dists))
            out.append(picked)
        return out or None

    def _tell(self, measurements: Sequence[Measurement]) -> None:
        for m in measurements:
            if m.ok and m.value > 0:
                v = math.log(m.value)
                self._worst = v if self._worst is None else max(self._worst, v)
        for m in measurements:
            value = self._score(m)
            trials = self._open.pop(m.config, [])
            if not trials and value is not None and m.config in self.space:
                # told without being asked (a resumed search): teach the sampler anyway
                self.study.add_trial(optuna.trial.create_trial(
                    params=self._params(m.config), distributions=self._dists, value=value))
                continue
            if value is None:
                self._orphans.extend(trials)
                continue
            for t in trials:
                self.study.tell(t, value)
        penalty = self._penalty()
        if penalty is not None and self._orphans:
            for t in self._orphans:
                self.study.tell(t, penalty)
            self._orphans.clear()
