"""Median trials to 95% on the 17 H100 Triton spaces: Optuna's samplers and random (stored
runs) beside stored leave-one-out runs of `model` variants, and on how many spaces each
variant's median is the lowest of five (ties counted), and on how many no sampler is
significantly faster (one-sided Mann-Whitney U run by run, Holm's correction over the four).

    python benchmarks/results/loo_compare/sampler_medians.py [--compare FILE] [--seeds N]
        FILE:VARIANT [FILE:VARIANT ...]

e.g. `maxpro_small_seeds0-19.json.gz:mp middle_at_small_seeds0-19.json.gz:c6` (paths relative
to this folder or absolute). The same VARIANT named in several files pools their runs (e.g.
seeds 0-19 from one and 20-39 from another); `--seeds N` reads seeds 0..N-1 of each side
(default 20), `--compare` the samplers' runs (default: the stored seeds 0-19)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # benchmarks/
import search_efficiency as se  # noqa: E402

OTHERS = ["optuna:tpe", "optuna:cmaes", "optuna:qmc", "random"]


def load(path: str) -> dict:
    p = Path(path) if Path(path).exists() else HERE / path
    return se.read_json(p)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", default="h100_triton_cold_warm_compare_seeds0-19.json.gz")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("variants", nargs="+", metavar="FILE:VARIANT")
    args = ap.parse_args(argv)
    cmp = load(args.compare)
    pooled: dict[str, dict] = {}
    for path, name in (a.rsplit(":", 1) for a in args.variants):
        runs = pooled.setdefault(name, {"runs": {name: {}}})["runs"][name]
        for space, by_seed in load(path)["loo"]["runs"].get(name, {}).items():
            runs.setdefault(space, {}).update(by_seed)
    from scipy.stats import mannwhitneyu

    lowest = dict.fromkeys(pooled, 0)
    unbeaten = dict.fromkeys(pooled, 0)
    for space in sorted(cmp["runs"]):
        runs = {st: se.compare_runs(cmp, space, st, args.seeds, 100) for st in OTHERS}
        med = {st: float(np.median(r)) for st, r in runs.items()}
        row = [space] + [f"{st.removeprefix('optuna:')} {m:g}" for st, m in med.items()]
        for name, doc in pooled.items():
            t = se.loo_runs(doc, name, space, args.seeds, 100)
            m = float(np.median(t))
            faster = se.holm({st: float(mannwhitneyu(r, t, alternative="less").pvalue)
                              for st, r in runs.items()})
            row.append(f"{name} {m:g} ({len(t)} runs"
                       + (f"; significantly faster: {', '.join(sorted(faster))})" if faster
                          else ")"))
            lowest[name] += m <= min(med.values())
            unbeaten[name] += not faster
        print(" | ".join(row))
    n = len(cmp["runs"])
    print("lowest median of five:", ", ".join(f"{v} {k} of {n}" for v, k in lowest.items()))
    print("no sampler significantly faster:",
          ", ".join(f"{v} {k} of {n}" for v, k in unbeaten.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
