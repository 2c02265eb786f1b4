"""Feature extraction: config encoding + problem sizes + target facts + compile-time facts."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tunex.space import Pow2, Space
from tunex.trial import Config, Measurement, Workload, flatten

__all__ = ["FeatureExtractor", "flatten", "trainable"]

_PAIR_LIMIT = 128  # relative pair columns at most (``relative_pairs``)


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return None


def trainable(space: Space, measurements: Sequence[Measurement], other_spaces: bool = True
              ) -> tuple[list[Measurement], bool]:
    """The measurements a cost model over ``space`` can learn from, and whether any is of
    another version of the space: those whose config holds one of each parameter's values,
    then, with ``other_spaces``, those whose config names more than half of its parameters
    (recorded before a parameter was added, or with a value since dropped), which
    :meth:`FeatureExtractor.transform` encodes with ``partial``."""
    names = space.names
    exact: list[Measurement] = []
    other: list[Measurement] = []
    for m in measurements:
        c = m.config
        if all(n in c and c[n] in space.param(n) for n in names):
            exact.append(m)
        elif other_spaces and 2 * sum(n in c for n in names) > len(names):
            other.append(m)
    return exact + other, bool(other)


class FeatureExtractor:
    """Turns (configs, workload) into a numeric matrix a cost model can learn from.

    Columns: the space's encoding of each config (log2 for powers of two, positions for
    permutations, ...), then the numeric problem sizes of the workload (lists spread out as
    ``key[i]``; log2 of positive
    values, so shapes a factor apart are equally far apart), then numeric target facts (e.g.
    number of SMs, shared memory per block), then any compile-time ``facts`` given per config.
    Problem and target columns are what lets a model trained on other shapes or devices
    transfer to a new one.

    Args:
        space: the space the configs come from.
        problem_keys: problem-size names to include (default: all numeric ones of the first
            workload seen by :meth:`fit_keys`).
        target_keys: numeric target facts to include.
        fact_keys: per-config compile-time facts to include (missing ones are ``nan``).
        categories: ``(source, key, value)`` indicator columns, ``source`` being ``"problem"``
            or ``"target"``: 1 where the workload's ``key`` is ``value`` (a device name, a
            dtype), so a model trained on several devices can tell their trials apart.
        relative: problem sizes (of ``problem_keys``) each positive numeric parameter is also
            given relative to, as ``log2(param / size)``: the share of a dimension one block
            covers, the same quantity at every shape, so a model trained on other shapes can
            say "a block the size of the row" where the absolute block size differs.
        relative_pairs: also the sum of two such columns of different parameters and
            different sizes, ``log2(param_a * param_b / (size_i * size_j))``: minus log2 of
            the number of blocks a grid over two dimensions has (output tiles of a matrix
            product), which trees cannot form from the columns one at a time. Left out where
            there would be more than 128 of them (many parameters and sizes: each column
            costs every fit and prediction).
    """

    def __init__(self, space: Space, problem_keys: Sequence[str] = (),
                 target_keys: Sequence[str] = (), fact_keys: Sequence[str] = (),
                 interactions: bool = True,
                 categories: Sequence[tuple[str, str, str]] = (),
                 relative: Sequence[str] = (), relative_pairs: bool = False) -> None:
        self.space = space
        self.relative_pairs = relative_pairs
        self.problem_keys = tuple(problem_keys)
        unknown = [k for k in relative if k not in self.problem_keys]
        if unknown:
            raise ValueError(f"relative sizes {unknown} are not among the problem keys "
                             f"{list(self.problem_keys)}")
        self.relative = tuple(relative)
        self.target_keys = tuple(target_keys)
        self.fact_keys = tuple(fact_keys)
        self.categories = tuple(categories)
        self.interactions = interactions
        # Kernel performance hangs on products (threads = bx * by, tile = tx * ty, smem ~
        # BLOCK_M * BLOCK_K * stages) that trees split badly on raw values; log2 of each
        # positive numeric parameter and sums of pairs of them (log2 of pairwise products) make
        # those axis-aligned.
        self._logcols: list[int] = []
        self._is_log: list[bool] = []  # Pow2 columns are log2 already
        col = 0
        for p in space.params:
            numeric = p.width == 1 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                for v in p.values)
            if numeric and len(p.values) > 1:
                self._logcols.append(col)
                self._is_log.append(isinstance(p, Pow2))
            col += p.width
        # (param a, size i, param b, size j) of each relative pair column: none without
        # relative_pairs or past _PAIR_LIMIT
        P, S = len(self._logcols), len(self.relative)
        pairs = [(a, i, b, j) for a in range(P) for b in range(a + 1, P)
                 for i in range(S) for j in range(S) if i != j] if relative_pairs else []
        self._pairs = pairs if len(pairs) <= _PAIR_LIMIT else []

    @classmethod
    def for_workloads(cls, space: Space, workloads: Sequence[Workload],
                      fact_keys: Sequence[str] = (), interactions: bool = True,
                      relative: bool = False, relative_pairs: bool = False,
                      anchor: Workload | None = None) -> FeatureExtractor:
        """Include every problem size and target fact that is numeric in all ``workloads``, and
        an indicator per value of those that are text in all of them and differ (at most 16
        values); with ``relative``, the parameters relative to each problem size that is
        positive in all of them and differs between them.

        ``anchor`` (the workload searched, among ``workloads``): its problem sizes count where
        they are numeric in every workload that names them and at least one other names them,
        the others' columns ``nan`` (other kernels, whose problems name other sizes: a
        matmul's ``M`` is a flash attention's nothing, and need not take the matmul's ``M``
        from a matmul with TMA)."""
        def common(maps: Sequence[Mapping[str, Any]]) -> list[str]:
            keys = set(maps[0]) if maps else set()
            for m in maps[1:]:
                keys &= set(m)
            return sorted(keys)

        def numeric_keys(maps: Sequence[Mapping[str, Any]]) -> list[str]:
            return [k for k in common(maps) if all(_num(m[k]) is not None for m in maps)]

        def categories(src: str, maps: Sequence[Mapping[str, Any]]
                       ) -> list[tuple[str, str, str]]:
            out = []
            for k in common(maps):
                if all(isinstance(m[k], str) for m in maps):
                    values = sorted({m[k] for m in maps})
                    if 1 < len(values) <= 16:
                        out += [(src, k, v) for v in values]
            return out

        problems = [flatten(w.problem) for w in workloads]
        targets = [flatten(w.target) for w in workloads]
        sizes = numeric_keys(problems)
        if anchor is not None:
            own = flatten(anchor.problem)
            sizes = sorted(k for k in own if sum(k in m for m in problems) > 1 and all(
                _num(m[k]) is not None for m in problems if k in m))
        varying = [k for k in sizes if all((_num(m[k]) or 0) > 0 for m in problems if k in m)
                   and len({_num(m[k]) for m in problems if k in m}) > 1] if relative else []
        return cls(space, sizes, numeric_keys(targets), fact_keys, interactions,
                   categories("problem", problems) + categories("target", targets), varying,
                   relative_pairs)

    def _log2(self, X: np.ndarray) -> np.ndarray:
        """log2 of each positive numeric parameter (the ``_logcols`` of ``X``)."""
        L = X[:, self._logcols].copy()
        raw = [i for i, is_log in enumerate(self._is_log) if not is_log]
        L[:, raw] = np.log2(L[:, raw])
        return L

    def _derived(self, X: np.ndarray, L: np.ndarray | None = None
                 ) -> tuple[np.ndarray, list[str]]:
        """Pairwise log2 products; ``L``: :meth:`_log2` of ``X`` where already computed."""
        if not self.interactions or not self._logcols:
            return np.empty((len(X), 0)), []
        names = self.space.feature_names
        cols = self._logcols
        L = self._log2(X) if L is None else L
        parts = [L]
        labels = [f"log2({names[c]})" for c in cols]
        for i in range(len(cols)):
            for j in range(i + 1, len(cols)):
                parts.append(L[:, i:i + 1] + L[:, j:j + 1])
                labels.append(f"log2({names[cols[i]]}*{names[cols[j]]})")
        return np.hstack(parts), labels

    def _relative(self, L: np.ndarray, workload: Workload | None) -> np.ndarray:
        """``log2(param / size)`` for each log-scaled parameter (``L``: :meth:`_log2`) and
        each ``relative`` size."""
        if not self.relative or not self._logcols:
            return np.empty((len(L), 0))
        problem = flatten(workload.problem) if workload else {}
        sizes = [_num(problem.get(k)) for k in self.relative]
        logs = np.array([math.log2(v) if v is not None and v > 0 else math.nan for v in sizes])
        R = L[:, :, None] - logs[None, None, :]
        out = R.reshape(len(L), -1)
        if self._pairs:
            a, i, b, j = np.array(self._pairs).T
            out = np.hstack([out, R[:, a, i] + R[:, b, j]])
        return out

    @property
    def n_relative(self) -> int:
        """How many of the last columns are relative to the problem sizes (see ``relative``)."""
        if not self.relative or not self._logcols:
            return 0
        return len(self._logcols) * len(self.relative) + len(self._pairs)

    @property
    def feature_names(self) -> list[str]:
        names = self.space.feature_names
        return (names + self._derived(np.ones((1, sum(
                    p.width for p in self.space.params))))[1]
                + [f"problem.{k}" for k in self.problem_keys]
                + [f"target.{k}" for k in self.target_keys]
                + [f"{src}.{k}={v}" for src, k, v in self.categories]
                + [f"fact.{k}" for k in self.fact_keys]
                + [f"log2({names[c]}/problem.{k})" for c in self._logcols
                   for k in self.relative]
                + [f"log2({names[self._logcols[a]]}*{names[self._logcols[b]]}/"
                   f"(problem.{self.relative[i]}*problem.{self.relative[j]}))"
                   for a, i, b, j in self._pairs])

    def context(self, workload: Workload | None) -> np.ndarray:
        """The per-workload columns (problem sizes and target facts) as one row."""
        vals: list[float] = []
        for src, keys in ((flatten(workload.problem) if workload else {}, self.problem_keys),
                          (flatten(workload.target) if workload else {}, self.target_keys)):
            for k in keys:
                v = _num(src.get(k))
                if v is None:
                    vals.append(math.nan)
                else:
                    vals.append(math.log2(v) if v > 0 else v)
        maps = {"problem": flatten(workload.problem) if workload else {},
                "target": flatten(workload.target) if workload else {}}
        vals += [float(maps[src].get(k) == v) for src, k, v in self.categories]
        return np.asarray(vals, dtype=np.float64)

    def transform(self, configs: Sequence[Config], workload: Workload | None = None,
                  facts: Sequence[Mapping[str, Any]] | None = None,
                  partial: bool = False) -> np.ndarray:
        """One row per config; ``partial``: configs recorded under another version of the
        space, whose missing or foreign values are ``nan`` (see :meth:`Space.encode`)."""
        X = self.space.encode(configs, partial=partial)
        L = self._log2(X)  # shared by the pairwise products and the relative sizes
        ctx = self.context(workload)
        parts = [X, self._derived(X, L)[0], np.broadcast_to(ctx, (len(configs), ctx.size))]
        if self.fact_keys:
            F = np.full((len(configs), len(self.fact_keys)), math.nan)
            for i, f in enumerate(facts or ()):
                for j, k in enumerate(self.fact_keys):
                    v = _num(f.get(k))
                    if v is not None:
                        F[i, j] = v
            parts.append(F)
        parts.append(self._relative(L, workload))
        return np.hstack(parts)
