"""Exploration variants of the ``model`` strategy, measured like benchmarks/search_efficiency.py.

Each variant is a small subclass of :class:`tunex.search._model.ModelSearch` that changes how a
refit turns the history into an order of candidates (the rest of the strategy is the same).
The runs use the search-efficiency benchmark's own loop (``run_tunex``: noisy replay of a
recorded space, budget 200 measured configs) and the optimum it stored, so the figures sit
beside the ``model`` rows of benchmarks/RESULTS.md.

Usage::

    python benchmarks/model_variants.py VARIANT [VARIANT ...] --spaces 'gemm*,convolution*' \\
        --seeds 20 --jobs 2

Variants (``NAME`` or ``NAME-key=value-...``): ``base`` (the committed strategy), ``boot``
(a bootstrap resample of the trials per fit: Thompson sampling; options ``keep`` = best trials
always in the resample, ``pboot`` = share of fits that resample, ``n_init``), ``ens`` (a
rolling ensemble of the last ``K`` bootstrap fits, one new per refit, ranked by mean +
``kappa`` std of standardised scores), ``alt`` (refits alternate between a fit on all trials,
ranked greedily, and ``ens-K=5-kappa=1.0``), ``rf`` (SMAC-style: a LightGBM random forest on
log(time), expected improvement from the trees' spread). Results accumulate in
``benchmarks/results/model_variants/VARIANT.json`` (space -> seed -> run record); a run
already there is not repeated. The table compares each space with the committed ``model`` runs
of benchmarks/results/search_efficiency.json on the same seeds.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import numpy as np  # noqa: E402

from tunex.cost_model import GBMRanker  # noqa: E402
from tunex.search._model import ModelSearch  # noqa: E402

BASE = HERE / "results" / "search_efficiency.json"
OUT = HERE / "results" / "model_variants"
DATA = ROOT.parent / "shared" / "data" / "spaces" / "kernel_tuner"


class Boot(ModelSearch):
    """Each refit ranks with a model fit on a bootstrap resample of the trials."""

    def __init__(self, space: Any, seed: int | None = None, keep: int = 0, pboot: float = 1.0,
                 **kw: Any) -> None:
        super().__init__(space, seed=seed, **kw)
        self.keep, self.pboot = keep, pboot

    def _xy(self) -> tuple[np.ndarray, np.ndarray]:
        told = list(self.history.values())
        return (np.vstack([self._row(m.config) for m in told]),
                np.array([m.value for m in told]))

    def _set_order(self, scores: np.ndarray) -> None:
        assert self._cands is not None, "variants score enumerable spaces only"
        scores = scores + self.rng.uniform(0, 1e-9, len(self._cands))
        self._order = [self._cands[i] for i in np.argsort(-scores)]
        self._pos = 0
        self._told_at_fit = len(self.history)

    def _resample(self, n: int) -> np.ndarray:
        return self.rng.integers(n, size=n)

    def _fit(self) -> None:
        X, y = self._xy()
        idx = self._resample(len(y))
        if self.rng.random() >= self.pboot:
            idx = np.arange(len(y))
        elif self.keep:
            top = np.argsort(np.where(np.isfinite(y), y, np.inf))[:self.keep]
            idx = np.concatenate([idx, np.setdiff1d(top, idx)])
        model = GBMRanker(random_state=int(self.rng.integers(2**31)), **self.model_options)
        model.fit(X[idx], y[idx])
        self._set_order(model.predict(self._cand_X))


class Ens(Boot):
    """A rolling ensemble of bootstrap rankers, one new member per refit, ranked by the
    members' mean + ``kappa`` standard deviations (scores standardised per member)."""

    def __init__(self, space: Any, seed: int | None = None, K: int = 5, kappa: float = 1.0,
                 **kw: Any) -> None:
        super().__init__(space, seed=seed, **kw)
        self.K, self.kappa = K, kappa
        self._members: list[np.ndarray] = []

    def _fit(self) -> None:
        X, y = self._xy()
        idx = self._resample(len(y))
        model = GBMRanker(random_state=int(self.rng.integers(2**31)), **self.model_options)
        model.fit(X[idx], y[idx])
        s = model.predict(self._cand_X)
        self._members = [*self._members, (s - s.mean()) / (s.std() + 1e-12)][-self.K:]
        S = np.array(self._members)
        self._set_order(S.mean(0) + self.kappa * S.std(0))


class Alt(Ens):
    """Refits alternate: the ensemble's upper bound, then a greedy fit on all trials."""

    def __init__(self, space: Any, seed: int | None = None, **kw: Any) -> None:
        super().__init__(space, seed=seed, **{"K": 5, "kappa": 1.0, **kw})
        self._fits = 0

    def _fit(self) -> None:
        self._fits += 1
        if self._fits % 2:
            Ens._fit(self)
            return
        X, y = self._xy()
        model = GBMRanker(random_state=int(self.rng.integers(2**31)), **self.model_options)
        model.fit(X, y)
        self._set_order(model.predict(self._cand_X))


class RF(Boot):
    """SMAC-style: a LightGBM random forest on log(time) (failures: the worst + a margin),
    candidates ranked by expected improvement from the spread of the trees' predictions."""

    def __init__(self, space: Any, seed: int | None = None, trees: int = 48, leaves: int = 64,
                 min_leaf: int = 2, bag: float = 0.8, feat: float = 0.8,
                 fail_margin: float = 1.0, **kw: Any) -> None:
        super().__init__(space, seed=seed, **kw)
        self.trees, self.leaves, self.min_leaf = trees, leaves, min_leaf
        self.bag, self.feat, self.fail_margin = bag, feat, fail_margin

    def _fit(self) -> None:
        import lightgbm as lgb
        from scipy.stats import norm

        X, y = self._xy()
        ok = np.isfinite(y)
        t = np.empty(len(y))
        t[ok] = np.log(y[ok])
        t[~ok] = (t[ok].max() if ok.any() else 0.0) + self.fail_margin
        params = {"boosting": "rf", "objective": "regression", "num_leaves": self.leaves,
                  "min_data_in_leaf": self.min_leaf, "min_data_in_bin": 1,
                  "bagging_fraction": self.bag, "bagging_freq": 1,
                  "feature_fraction": self.feat, "verbosity": -1, "num_threads": 1,
                  "seed": int(self.rng.integers(2**31)), "deterministic": True,
                  "force_row_wise": True, "min_sum_hessian_in_leaf": 0.0}
        booster = lgb.train(params, lgb.Dataset(X, t), num_boost_round=self.trees)
        # each tree's own prediction: its leaf's output for every candidate
        leaf = booster.predict(self._cand_X, pred_leaf=True).astype(np.int64)
        table = np.zeros((leaf.shape[1], int(leaf.max()) + 1))
        for tree in range(leaf.shape[1]):
            for node in np.unique(leaf[:, tree]):
                table[tree, node] = booster.get_leaf_output(tree, int(node))
        P = table[np.arange(leaf.shape[1])[None, :], leaf]
        mu, sd = P.mean(1), P.std(1) + 1e-9
        imp = (t[ok].min() if ok.any() else t.min()) - mu
        self._set_order(imp * norm.cdf(imp / sd) + sd * norm.pdf(imp / sd))


KINDS: dict[str, type[ModelSearch]] = {"base": ModelSearch, "boot": Boot, "ens": Ens,
                                       "alt": Alt, "rf": RF}


def make(name: str, space: Any, seed: int | None) -> ModelSearch:
    """The variant ``NAME-key=value-...`` (numbers as numbers)."""
    kind, *parts = name.split("-")
    opts: dict[str, Any] = {}
    for part in parts:
        key, _, value = part.partition("=")
        opts[key] = float(value) if "." in value else int(value)
    if kind not in KINDS:
        raise SystemExit(f"unknown variant {name!r}; kinds: {', '.join(KINDS)}")
    return KINDS[kind](space, seed=seed, **opts)


def _one(task: tuple[str, str, int, float]) -> tuple[str, int, dict[str, Any]]:
    import search_efficiency as se

    variant, space, seed, optimum = task
    se.get_strategy = lambda spec, sp, seed=None: make(variant, sp, seed)  # type: ignore
    return space, seed, se.run_tunex(DATA / f"{space}.json.gz", "model", seed, 200, optimum)


def run(variant: str, patterns: list[str], seeds: int, jobs: int) -> dict[str, Any]:
    base = json.loads(BASE.read_text())
    spaces = [s for s in base["spaces"] if any(fnmatch.fnmatch(s, p) for p in patterns)]
    out = OUT / f"{variant}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    tasks = [(variant, s, k, base["spaces"][s]["optimum"]) for s in spaces
             for k in range(seeds) if str(k) not in res.get(s, {})]
    t0 = time.time()
    with ProcessPoolExecutor(jobs) as ex:
        for space, seed, rec in ex.map(_one, tasks):
            res.setdefault(space, {})[str(seed)] = rec
            out.write_text(json.dumps(res))
    print(f"{variant}: {len(tasks)} runs in {time.time() - t0:.0f} s -> {out}")
    for s in spaces:
        mine = [res[s][str(k)]["t95"] or 201 for k in range(seeds) if str(k) in res.get(s, {})]
        ref = [r["t95"] or 201 for k, r in base["runs"][s]["model"].items() if int(k) < seeds]
        print(f"  {s:26s} trials to 95%: median {statistics.median(mine):6.1f} "
              f"(model {statistics.median(ref):6.1f}), within 100: "
              f"{sum(x <= 100 for x in mine) / len(mine):4.0%} "
              f"(model {sum(x <= 100 for x in ref) / len(ref):4.0%}), runs {len(mine)}")
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variants", nargs="+")
    p.add_argument("--spaces", default="*", help="comma list of globs on 'kernel/GPU'")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    for v in args.variants:
        run(v, args.spaces.split(","), args.seeds, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
