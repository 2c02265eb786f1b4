"""Gradient-boosted ranking model (LightGBM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tunex.cost_model._base import CostModel

__all__ = ["GBMRanker"]


def relevance(y: np.ndarray, n_labels: int = 31) -> np.ndarray:
    """Integer relevance labels from runtimes within one workload.

    Successes get 1..n_labels-1 by percentile rank (the fastest gets the top label), failures
    (``inf``/``nan``) get 0. Ranks rather than raw times make the labels immune to outliers and
    comparable across workloads of very different runtimes.
    """
    y = np.asarray(y, dtype=np.float64)
    out = np.zeros(len(y), dtype=np.int32)
    ok = np.isfinite(y)
    n_ok = int(ok.sum())
    if n_ok:
        order = np.argsort(np.argsort(y[ok], kind="stable"), kind="stable")  # 0 = fastest
        pct = order / max(n_ok - 1, 1)
        out[ok] = 1 + np.floor((n_labels - 2) * (1.0 - pct) + 1e-9).astype(np.int32)
    return out


class GBMRanker(CostModel):
    """LightGBM ranker (LambdaRank by default) that orders configs of a workload by speed.

    Rows of one workload are split into random queries of ``query_size`` rows: ranking is
    learned within a workload only, and the pairwise cost stays linear in the history.
    ``objective="regression"`` fits ``-log(runtime / best)`` instead (failures below the worst).

    Args:
        objective: ``"lambdarank"``, ``"rank_xendcg"`` or ``"regression"``.
        n_estimators, num_leaves, learning_rate, min_child_samples: LightGBM's usual knobs.
            40 trees at a learning rate of 0.2 rank as 80 at 0.1 did (leave-one-out over the
            34 recorded spaces: cold, warm and from the shipped prior, level) in half the
            time: a fit's cost on a search's few hundred rows is per tree and per feature,
            not per row (benchmarks/RESULTS.md, "40 trees").
        subsample, colsample: row/column bagging; with a new ``random_state`` per fit they
            make successive fits differ a little, which the model-guided search uses as
            exploration.
        query_size: rows per ranking query.
        random_state: seed.
    """

    def __init__(self, objective: str = "lambdarank", n_estimators: int = 40,
                 num_leaves: int = 15, learning_rate: float = 0.2, min_child_samples: int = 3,
                 subsample: float = 0.85, colsample: float = 0.85, query_size: int = 64,
                 random_state: int | None = None) -> None:
        self.objective = objective
        self.n_estimators = n_estimators
        self.num_leaves = num_leaves
        self.learning_rate = learning_rate
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample = colsample
        self.query_size = query_size
        self.random_state = random_state

    def _lgb_params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "objective": self.objective, "num_leaves": self.num_leaves,
            "learning_rate": self.learning_rate, "min_data_in_leaf": self.min_child_samples,
            "min_data_in_bin": 1, "bagging_fraction": self.subsample, "bagging_freq": 1,
            "feature_fraction": self.colsample, "verbosity": -1, "num_threads": 1,
            "seed": 0 if self.random_state is None else int(self.random_state),
            "deterministic": True, "force_row_wise": True,
        }
        if self.objective in ("lambdarank", "rank_xendcg"):
            p["lambdarank_truncation_level"] = 16
        return p

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None,
            weights: np.ndarray | None = None) -> GBMRanker:
        """Fit on rows ``X`` with runtimes ``y`` (``inf``/``nan``: failed); ``groups`` names
        each row's workload (rankings are learned within one), ``weights`` scale each row's
        share of the loss."""
        import lightgbm as lgb

        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        y = np.where(np.isnan(y), np.inf, y)
        if groups is None:
            groups = np.zeros(len(y), dtype=np.int64)
        groups = np.asarray(groups)
        rng = np.random.default_rng(self.random_state)
        rows: list[np.ndarray] = []
        labels: list[np.ndarray] = []
        sizes: list[int] = []
        for g in np.unique(groups):
            idx = np.flatnonzero(groups == g)
            if self.objective == "regression":
                yy = y[idx]
                ok = np.isfinite(yy)
                t = np.zeros(len(idx))
                if ok.any():
                    logs = np.log(yy[ok])
                    t[ok] = logs.min() - logs
                    t[~ok] = t[ok].min() - 1.0
                rows.append(idx)
                labels.append(t)
                continue
            lab = relevance(y[idx])
            perm = rng.permutation(len(idx))
            for s in range(0, len(idx), self.query_size):
                part = perm[s:s + self.query_size]
                rows.append(idx[part])
                labels.append(lab[part])
                sizes.append(len(part))
        order = np.concatenate(rows)
        w = None if weights is None else np.asarray(weights, dtype=np.float64)[order]
        data = lgb.Dataset(X[order], label=np.concatenate(labels), weight=w,
                           group=sizes if sizes else None, free_raw_data=True)
        self.booster_ = lgb.train(self._lgb_params(), data, num_boost_round=self.n_estimators)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster_.predict(np.asarray(X, dtype=np.float64)))

    def save(self, path: str | Path) -> None:
        doc = {"format": "tunex.GBMRanker", "version": 1, "params": self.get_params(),
               "n_features_in": self.n_features_in_, "booster": self.booster_.model_to_string()}
        Path(path).write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | Path) -> GBMRanker:
        import lightgbm as lgb

        from tunex.errors import TunexError

        try:
            doc = json.loads(Path(path).read_text())
            if doc.get("format") != "tunex.GBMRanker":
                raise ValueError("not a tunex GBMRanker file")
            model = cls(**doc["params"])
            model.booster_ = lgb.Booster(model_str=doc["booster"])
            model.n_features_in_ = doc["n_features_in"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TunexError(f"cannot load cost model from {path}: {e}; retrain it") from None
        return model
