"""The strategy's own time per trial (ask + tell) of a first search on a recorded space, cold
and from the prior tunex ships, and the cost of one cost-model fit on that search's rows.

    python benchmarks/step_cost.py --space matmul_H200_512x4096x1024 --trials 50 --seeds 0,1
    python benchmarks/step_cost.py --fits        # one fit's ms by rows x features, 5 fits each

Run it from two checkouts (``--root``) alternately to compare code side by side
(benchmarks/RESULTS.md, "40 trees").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, default=HERE.parent, help="the tunex checkout to time")
    p.add_argument("--space", default="matmul_H200_512x4096x1024",
                   help="a recording of benchmarks/data (its kernel is left out of the prior)")
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--modes", default="cold,prior")
    p.add_argument("--fits", action="store_true", help="time single fits instead")
    args = p.parse_args(argv)
    sys.path[:0] = [str(args.root), str(args.root / "benchmarks")]
    from search_efficiency import run_tunex

    from tunex.db.prior import Prior
    from tunex.targets.replay import ReplayTarget

    path = args.root / "benchmarks" / "data" / f"{args.space}.json.gz"
    kernel = args.space.split("_H200")[0]
    optimum = min(ReplayTarget(path).true_time(c) for c in ReplayTarget(path).space)
    if args.fits:
        return time_fits(path, kernel)
    for mode in args.modes.split(","):
        for seed in map(int, args.seeds.split(",")):
            prior = Prior.shipped("NVIDIA H200").without({kernel}) if mode == "prior" else None
            ms = run_tunex(path, "model", seed, args.trials, optimum, keep_measurements=True,
                           prior=prior)["_step_ms"]
            print(f"{mode} seed {seed}: median {statistics.median(ms):.1f} ms, p90 "
                  f"{sorted(ms)[int(0.9 * len(ms))]:.1f}, mean {statistics.mean(ms):.1f} "
                  f"({len(ms)} trials)", flush=True)
    return 0


def time_fits(path: Path, kernel: str) -> int:
    """One fit's time on the rows of a 12-trial first search from the prior (all its
    features, and the 27 of a cold search's), and on 60 of those rows."""
    import numpy as np

    from tunex.cost_model import GBMRanker
    from tunex.db.prior import Prior
    from tunex.search import get_strategy
    from tunex.targets.replay import ReplayTarget
    from tunex.tuner import Budget, Tuner

    t = ReplayTarget(path, noisy=True, seed=0)
    cold = len(get_strategy("model", t.space, seed=0).features.feature_names)
    s = get_strategy("model", t.space, seed=0)
    Tuner(t, t.space, workload=t.workload(), strategy=s, budget=Budget(trials=12), remeasure=0,
          prior=Prior.shipped("NVIDIA H200").without({kernel})).run()
    X, y, g, w = s._training()
    for label, rows, cols in (("all", slice(None), slice(None)), ("cold columns", slice(None),
                              slice(0, cold)), ("60 rows", slice(0, 60), slice(None))):
        ts = []
        for r in range(5):
            t0 = time.perf_counter()
            GBMRanker(random_state=r).fit(X[rows][:, cols], y[rows], g[rows],
                                          None if w is None else w[rows])
            ts.append(time.perf_counter() - t0)
        shape = X[rows][:, cols].shape
        print(f"{label}: {shape[0]} rows x {shape[1]} features: {1000 * np.median(ts):.1f} ms "
              "(median of 5 fits)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
