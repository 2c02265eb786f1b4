"""Model-guided search: a gradient-boosted ranker proposes what to measure next.

After a small random design, each round fits :class:`~tunex.cost_model.GBMRanker` on every
trial so far (failures included, as the worst label) and proposes the unmeasured configs it
ranks highest. Candidates are the whole valid space when it is small enough to enumerate
(exact argmax over the model), otherwise a pool of uniform samples plus mutations of the best
configs found (an evolutionary step that keeps the search local where the model is sure).
Exploration comes from bagging with a fresh seed per fit (Thompson-style: each fit is one
plausible model) and from a share of uniform random proposals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tunex.cost_model import FeatureExtractor, GBMRanker
from tunex.search._base import SearchStrategy
from tunex.space import Space
from tunex.trial import Config, Measurement, Workload

__all__ = ["ModelSearch"]


class ModelSearch(SearchStrategy):
    """Cost-model-guided search (the default strategy).

    Args:
        space: the bound space.
        seed: random seed.
        n_init: random trials before the first model (fewer after a warm start).
        explore: share of proposals drawn uniformly at random.
        refit_every: refit once this share of the history is new (at least one trial).
        enumerate_limit: spaces up to this many valid points are scored whole.
        pool: candidates per round for larger spaces.
        interactions: give the model log2 pairwise products of numeric parameters.
        model: options for :class:`GBMRanker`.
    """

    name = "model"

    def __init__(self, space: Space, *, seed: int | None = None, variant: str = "",
                 n_init: int = 10, explore: float = 0.05, refit_every: float = 0.02,
                 enumerate_limit: int = 250_000, pool: int = 2048, interactions: bool = True,
                 model: dict[str, Any] | None = None) -> None:
        super().__init__(space, seed=seed)
        self.interactions = interactions
        self.n_init = n_init
        self.explore = explore
        self.refit_every = refit_every
        self.pool = pool
        self.model_options = dict(model or {})
        if variant:
            self.model_options.setdefault("objective", variant)
        self.features = FeatureExtractor(space, interactions=interactions)
        self.workload: Workload | None = None
        self._other: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._cands: list[Config] | None = None
        self._cand_X: np.ndarray | None = None
        if space.size <= enumerate_limit:
            self._cands = list(space)
            self._cand_X = self.features.transform(self._cands)
        self._order: list[Config] = []  # candidates by descending score, from the last fit
        self._pos = 0
        self._told_at_fit = -1
        self._rows: dict[Config, np.ndarray] = {}

    # -- transfer -------------------------------------------------------------------------------

    def warm_start(self, others: Sequence[tuple[Workload, Sequence[Measurement]]],
                   current: Workload | None = None) -> None:
        """Learn from other workloads of the same kernel (other shapes or devices).

        Their trials train the first model, so the search starts from what was fast there,
        and they stay in the training set, weighed down as this workload's own trials grow.
        """
        usable = [(w, ms) for w, ms in others if ms]
        if not usable:
            return
        self.workload = current
        self.features = FeatureExtractor.for_workloads(
            self.space, [w for w, _ in usable] + ([current] if current else []),
            interactions=self.interactions)
        X, y, g = [], [], []
        for gi, (w, ms) in enumerate(usable):
            keep = [m for m in ms if all(m.config.get(n) in self.space.param(n)
                                         for n in self.space.names)]
            if not keep:
                continue
            X.append(self.features.transform([m.config for m in keep], w))
            y.append([m.value for m in keep])
            g.append(np.full(len(keep), gi + 1))
        if X:
            self._other = (np.vstack(X), np.concatenate(y), np.concatenate(g))
        if self._cands is not None:
            self._cand_X = self.features.transform(self._cands, current)
        self._rows.clear()

    # -- ask/tell -------------------------------------------------------------------------------

    def _row(self, c: Config) -> np.ndarray:
        r = self._rows.get(c)
        if r is None:
            r = self.features.transform([c], self.workload)[0]
            self._rows[c] = r
        return r

    def _fit(self) -> None:
        told = list(self.history.values())
        X = np.vstack([self._row(m.config) for m in told]) if told else np.empty(
            (0, len(self.features.feature_names)))
        y = np.array([m.value for m in told])
        g = np.zeros(len(told), dtype=np.int64)
        if self._other is not None:
            oX, oy, og = self._other
            keep = max(0.1, 1.0 - len(told) / 200.0)  # own trials take over as they grow
            n = int(len(oy) * keep)
            sel = self.rng.choice(len(oy), size=n, replace=False) if n < len(oy) else slice(None)
            X = np.vstack([X, oX[sel]])
            y = np.concatenate([y, oy[sel]])
            g = np.concatenate([g, og[sel]])
        model = GBMRanker(random_state=int(self.rng.integers(2**31)), **self.model_options)
        model.fit(X, y, g)
        cands = self._candidates()
        CX = self._cand_X if cands is self._cands and self._cand_X is not None else (
            self.features.transform(cands, self.workload))
        scores = model.predict(CX) + self.rng.uniform(0, 1e-9, len(cands))
        self._order = [cands[i] for i in np.argsort(-scores)]
        self._pos = 0
        self._told_at_fit = len(self.history)

    def _candidates(self) -> list[Config]:
        if self._cands is not None:
            return self._cands
        pool = set(self.space.sample(self.pool, self.rng, exclude=self.history.keys()))
        ok = sorted((m for m in self.history.values() if m.ok), key=lambda m: m.value)
        for m in ok[:8]:  # local moves around the leaders
            pool.update(self.space.neighbours(m.config))
            pool.update(self._mutate(m.config, ok))
        return [c for c in pool if self._fresh(c)]

    def _mutate(self, config: Config, ok: list[Measurement], k: int = 16) -> list[Config]:
        """Crossover with other good configs plus random resets of one or two parameters."""
        out = []
        names = self.space.names
        for _ in range(k):
            d = dict(config)
            if len(ok) > 1 and self.rng.random() < 0.5:
                other = ok[int(self.rng.integers(min(len(ok), 16)))].config
                for n in names:
                    if self.rng.random() < 0.5:
                        d[n] = other[n]
            for n in self.rng.choice(names, size=int(self.rng.integers(1, 3)), replace=False):
                vals = self.space.param(str(n)).values
                d[str(n)] = vals[int(self.rng.integers(len(vals)))]
            c = Config(d)
            if c in self.space:
                out.append(c)
        return out

    def _stale(self) -> bool:
        told = len(self.history)
        new = told - self._told_at_fit
        return self._told_at_fit < 0 or new >= max(1, math.ceil(self.refit_every * told))

    def _ask(self, n: int) -> list[Config] | None:
        warm = self._other is not None
        if len(self.history) < (min(2, self.n_init) if warm else self.n_init) and not (
                warm and not self.history):
            return self._random_fresh(n)
        if self._stale():
            self._fit()
        out: list[Config] = []
        while len(out) < n:
            if self.rng.random() < self.explore:
                got = self._random_fresh(1)
                if got and got[0] not in out:
                    out.append(got[0])
                    continue
            while self._pos < len(self._order) and not (
                    self._fresh(self._order[self._pos]) and self._order[self._pos] not in out):
                self._pos += 1
            if self._pos >= len(self._order):
                if self._cands is not None:
                    break  # every enumerated candidate is measured or pending
                self._fit()  # pool used up: draw a new one
                if not self._order:
                    break
                continue
            out.append(self._order[self._pos])
            self.proposals += 1
            self._pos += 1
        if not out:
            return self._random_fresh(n)
        return out
