"""Median trials to 95% on the 17 H100 Triton spaces: Optuna's samplers and random (stored
runs, seeds 0-19) beside stored leave-one-out runs of `model` variants, and on how many spaces
each variant's median is the lowest of five (ties counted).

    python benchmarks/results/loo_compare/sampler_medians.py FILE:VARIANT [FILE:VARIANT ...]

e.g. `maxpro_small_seeds0-19.json.gz:mp middle_at_small_seeds0-19.json.gz:c6` (paths relative
to this folder or absolute)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # benchmarks/
import search_efficiency as se  # noqa: E402

OTHERS = ["optuna:tpe", "optuna:cmaes", "optuna:qmc", "random"]


def load(path: str) -> dict:
    p = Path(path) if Path(path).exists() else HERE / path
    with gzip.open(p) as f:
        return json.load(f)


def main(args: list[str]) -> None:
    cmp = load("h100_triton_cold_warm_compare_seeds0-19.json.gz")
    variants = [(name, load(path)["loo"]) for path, name in (a.rsplit(":", 1) for a in args)]
    lowest = dict.fromkeys((n for n, _ in variants), 0)
    for space in sorted(cmp["runs"]):
        med = {st: float(np.median(se.compare_runs(cmp, space, st, 20, 100))) for st in OTHERS}
        row = [space] + [f"{st.removeprefix('optuna:')} {m:g}" for st, m in med.items()]
        for name, doc in variants:
            m = float(np.median(se.loo_runs(doc, name, space, 20, 100)))
            row.append(f"{name} {m:g}")
            lowest[name] += m <= min(med.values())
        print(" | ".join(row))
    print("lowest median of five:", ", ".join(f"{n} {k} of 17" for n, k in lowest.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
