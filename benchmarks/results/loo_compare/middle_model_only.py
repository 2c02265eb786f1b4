"""The model alone, with and without the distance-from-the-middle columns: a ranker (the
search's GBMRanker) fit on n uniform configs of a 625-point space of four ordered parameters
(5 values each), times ``1 + sum((u - c)^2)`` with ``u`` each value's position in its list
scaled to [0, 1] and 2% noise, ranks the configs it was not fit on; Spearman with the columns
minus without, 20 seeds, for the optimum ``c`` at the middle and at an end. As run on
2026-12-07 (RESULTS.md, "each ordered parameter's distance from the middle"), with
middle_feature.diff applied in a worktree put first on sys.path:

    PYTHONPATH=WORKTREE python middle_model_only.py
"""

import numpy as np

from tunex.cost_model import FeatureExtractor, GBMRanker
from tunex.search._model import rank_correlation
from tunex.space import Choice, Int, Pow2, Space

SPACE = Space([Pow2("BM", 16, 256), Pow2("BN", 16, 256), Choice("w", [1, 2, 4, 8, 16]),
               Int("s", 1, 5)])
CONFIGS = list(SPACE)


def position(c, name):
    values = SPACE.param(name).values
    return values.index(c[name]) / (len(values) - 1)


for label, centre in (("middle", 0.5), ("end", 1.0)):
    t = np.array([1 + sum((position(c, p) - centre) ** 2 for p in SPACE.names) for c in CONFIGS])
    for n in (10, 15, 20):
        without, gain, wins = [], [], 0
        for seed in range(20):
            rng = np.random.default_rng(seed)
            fit = rng.choice(len(CONFIGS), n, replace=False)
            rest = np.setdiff1d(np.arange(len(CONFIGS)), fit)
            y = t * rng.lognormal(0, 0.02, len(t))
            r = []
            for middle in (False, True):
                X = FeatureExtractor(SPACE, middle=middle).transform(CONFIGS)
                model = GBMRanker(random_state=seed).fit(X[fit], y[fit])
                r.append(rank_correlation(model.predict(X[rest]), t[rest]))
            without.append(r[0])
            gain.append(r[1] - r[0])
            wins += r[1] > r[0]
        print(f"{label:6s} n={n:2d}  without {np.mean(without):.2f}  with "
              f"{np.mean(without) + np.mean(gain):.2f}  better on {wins} of 20")
