"""Per run: the early poll's gain (the poll_from7 files against the default's stored runs)
beside the features of poll_evidence_features.py; rank correlations per run and per space,
quartiles, per family."""

from __future__ import annotations

import collections
import gzip
import json
import math
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

R = Path(__file__).parent
BASE = [("complete_k1_small_seeds0-19.json.gz", "k1"),
        ("complete_k3k1_small_seeds20-39.json.gz", "k1"),
        ("middle_exact_large_seeds0-19.json.gz", "midr"),
        ("middle_exact_large_seeds20-39.json.gz", "midr")]
VARIANT = [("poll_from7_small_seeds0-19.json.gz", "pf7"),
           ("poll_from7_small_seeds20-39.json.gz", "pf7"),
           ("poll_early_large_seeds0-19.json.gz", "pf7"),
           ("poll_from7_large_seeds20-39.json.gz", "pf7")]
NAMES = ["best_over_median", "cv_log", "rho_dist", "best_idx", "n_ok"]


def load(name: str, variant: str) -> dict[tuple[str, int], int]:
    with gzip.open(R / name) as fh:
        runs = json.load(fh)["loo"]["runs"][variant]
    return {(sp, int(s)): r["cold"]["t95"] if r["cold"]["t95"] is not None else r["budget"] + 1
            for sp, seeds in runs.items() for s, r in seeds.items()}


def main() -> None:
    base: dict[tuple[str, int], int] = {}
    for name, v in BASE:
        for k, t in load(name, v).items():
            base.setdefault(k, t)
    var: dict[tuple[str, int], int] = {}
    for name, v in VARIANT:
        var.update(load(name, v))
    with gzip.open(R / "poll_evidence_features_seeds0-39.json.gz") as fh:
        feats = json.load(fh)
    rows = [(sp, math.log2(base[(sp, s)] / t), feats[sp][str(s)], base[(sp, s)])
            for (sp, s), t in var.items() if (sp, s) in base and str(s) in feats.get(sp, {})]
    print(len(rows), "runs,", len({r[0] for r in rows}), "spaces")
    for n in NAMES:
        pairs = np.array([(f[n], g) for _, g, f, _ in rows if f.get(n) is not None])
        by: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        for sp, g, f, _ in rows:
            if f.get(n) is not None:
                by[sp].append((f[n], g))
        means = np.array([np.mean(v, axis=0) for v in by.values()])
        print(f"{n:18s} rho over runs {spearmanr(pairs[:, 0], pairs[:, 1]).correlation:+.3f}  "
              f"over spaces {spearmanr(means[:, 0], means[:, 1]).correlation:+.3f}")
    for n in NAMES[:4]:  # quartiles of the runs not solved by the seventh trial
        xs = sorted((f[n], g) for _, g, f, b in rows if f.get(n) is not None and b > 7)
        q = len(xs) // 4
        print(n, [f"{xs[i * q][0]:.3f}..{xs[(i + 1) * q - 1][0]:.3f}: "
                  f"{np.mean([g for _, g in xs[i * q:(i + 1) * q]]):+.3f}" for i in range(4)])
    fam: dict[str, tuple[list[float], list[float]]] = collections.defaultdict(lambda: ([], []))
    for sp, g, f, _ in rows:
        fam[sp.split("/")[0]][0 if f.get("best_idx") == 6 else 1].append(g)
    for k, (mid, other) in sorted(fam.items()):
        print(f"{k:16s} middle best: {len(mid):3d} runs {np.mean(mid) if mid else 0:+.3f}   "
              f"other: {len(other):3d} runs {np.mean(other):+.3f}")


if __name__ == "__main__":
    main()
