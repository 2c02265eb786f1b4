"""Cost-model predictions for workloads nothing was tuned for.

``Autotuned.train_model()`` fits a :class:`~tunex.cost_model.GBMRanker` on every trial of the
kernel in the database (all shapes, all devices: problem sizes, target facts, an indicator per
device or dtype name, and each parameter relative to each problem size that differs are
features) and saves it with a small JSON description of its feature columns. At runtime, in
``never`` mode, a workload with no database row and no pack gets the config the model ranks
first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tunex.errors import ConfigError, TunexError
from tunex.space import Space
from tunex.trial import Config, Workload

__all__ = ["predict_best", "train"]

_FORMAT = "tunex.autotune.model"
_ENUMERATE = 20_000
_SAMPLE = 4_096


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def train(db: Any, kernel: str, space: Space, path: Path, *, relative: bool = True,
          relative_pairs: bool = False) -> Path:
    """Fit a ranker on ``kernel``'s history in ``db`` and save it to ``path`` (+ ``.meta.json``);
    ``relative``: also each parameter relative to each problem size that differs between the
    workloads, ``relative_pairs``: and the sums of two of those (the blocks of a 2-D grid;
    :class:`~tunex.cost_model.FeatureExtractor`; off: for this one pick, leave-one-out over
    21 spaces, they score a median 0.80 of the optimum against 0.83 without, RESULTS.md)."""
    from tunex.cost_model import FeatureExtractor, GBMRanker, trainable

    usable, partial = [], []
    for w, ms in db.history(kernel=kernel):
        keep, other = trainable(space, ms)  # trials of older versions of the space too
        if keep:
            usable.append((w, keep))
            partial.append(other)
    if not usable:
        raise ConfigError(f"no trial of kernel {kernel!r} in {db!r} fits its space: tune some "
                          "workloads first (mode='on_miss' or tunex search)")
    fe = FeatureExtractor.for_workloads(space, [w for w, _ in usable], relative=relative,
                                        relative_pairs=relative_pairs)
    X = np.vstack([fe.transform([m.config for m in ms], w, partial=p)
                   for (w, ms), p in zip(usable, partial)])
    y = np.concatenate([[m.value for m in ms] for _, ms in usable])
    g = np.concatenate([np.full(len(ms), i) for i, (_, ms) in enumerate(usable)])
    model = GBMRanker(random_state=0).fit(X, y, g)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    meta = {"format": _FORMAT, "kernel": kernel, "problem_keys": list(fe.problem_keys),
            "target_keys": list(fe.target_keys),
            "categories": [list(c) for c in fe.categories], "relative": list(fe.relative),
            "relative_pairs": fe.relative_pairs,
            "workloads": len(usable), "trials": len(y)}
    _meta_path(path).write_text(json.dumps(meta, indent=1))
    return path


def predict_best(path: Path, space: Space, workload: Workload,
                 seed: int | None = None) -> tuple[Config, str]:
    """The config of ``space`` the model at ``path`` ranks first for ``workload``, and why."""
    from tunex.cost_model import FeatureExtractor, GBMRanker

    try:
        meta = json.loads(_meta_path(path).read_text())
        if meta.get("format") != _FORMAT:
            raise ValueError("not a tunex autotune model description")
        problem_keys = [str(k) for k in meta["problem_keys"]]
        target_keys = [str(k) for k in meta["target_keys"]]
        # written since 2026-12-03; a model from before has neither
        categories = [(str(a), str(b), str(c)) for a, b, c in meta.get("categories", ())]
        relative = [str(k) for k in meta.get("relative", ())]
        pairs = meta.get("relative_pairs", False)  # written since 2026-12-03 (afternoon)
        if not isinstance(pairs, bool):
            raise ValueError(f"relative_pairs is {pairs!r}, not true or false")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TunexError(f"cannot read {_meta_path(path)} ({exc}); retrain the model") from None
    model = GBMRanker.load(path)
    try:
        fe = FeatureExtractor(space, problem_keys, target_keys, categories=categories,
                              relative=relative, relative_pairs=pairs)
    except ValueError as exc:
        raise TunexError(f"cannot read {_meta_path(path)} ({exc}); retrain the model") from None
    if space.size <= _ENUMERATE:
        cands = list(space)
    else:
        cands = space.sample(_SAMPLE, rng=0 if seed is None else seed)
    X = fe.transform(cands, workload)
    if X.shape[1] != model.n_features_in_:
        raise TunexError(f"the model has {model.n_features_in_} features, this space gives "
                         f"{X.shape[1]}: the space changed; retrain the model")
    scores = model.predict(X)
    best = cands[int(np.argmax(scores))]
    reason = (f"cost model {path.name} (trained on {meta.get('workloads', '?')} workloads) "
              f"ranked {len(cands)} candidates")
    return best, reason
