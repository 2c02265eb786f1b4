"""Features of the first 7 trials of the default model search, per space and seed (a one-off
analysis of 2026-12-07, RESULTS section "the decorator on an H100 with the middle itself").

    python poll_evidence_features.py CHECKOUT SEEDS OUT.json

CHECKOUT: a checkout of the code whose searches are analysed (825d89a: the ordered replay of
the stored poll_from7 runs); the recorded spaces are read from /work/main/benchmarks/data and
/work/shared/data/spaces (this machine's layout).
"""

from __future__ import annotations

import glob
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

REPO = Path(sys.argv[1])
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
import search_efficiency as se  # noqa: E402

from tunex.targets.replay import ReplayTarget  # noqa: E402

DATA = "/work/main/benchmarks/data"
SHARED = "/work/shared/data/spaces/kernel_tuner"


def files() -> dict[str, str]:
    out = {}
    for f in glob.glob(f"{DATA}/*.json.gz") + glob.glob(f"{DATA}/h100/*/*.json.gz"):
        stem = os.path.basename(f).split(".")[0]
        out[f"{stem.split('_H')[0]}/{stem}"] = f
    for f in glob.glob(f"{DATA}/riscv/*/*.json.gz") + glob.glob(f"{SHARED}/*/*.json.gz"):
        out[f"{Path(f).parent.name}/{os.path.basename(f).split('.')[0]}"] = f
    return out


def one(args: tuple[str, str, int]) -> tuple[str, int, dict[str, float]]:
    key, f, seed = args
    ms = se.run_tunex(Path(f), "model", seed, 7, 1e-9, keep_measurements=True)["_measurements"]
    names = ReplayTarget(f).space.names
    ok = [m for m in ms if m.ok]
    res: dict[str, float] = {"n_ok": len(ok), "n": len(ms)}
    if len(ok) >= 3:
        v = np.array([m.value for m in ok])
        b = ok[int(np.argmin(v))]
        res["best_over_median"] = float(v.min() / np.median(v))
        res["cv_log"] = float(np.std(np.log(v)))
        d = np.array([sum(m.config[n] != b.config[n] for n in names) for m in ok])
        others = d > 0
        if others.sum() >= 3 and len(set(d[others])) > 1:
            res["rho_dist"] = float(spearmanr(d[others], v[others]).correlation)
        res["best_idx"] = ms.index(b)  # 6: the seventh proposal, the middle of the ranges
    return key, seed, res


if __name__ == "__main__":
    jobs = [(k, f, s) for k, f in sorted(files().items()) for s in range(int(sys.argv[2]))]
    out: dict[str, dict[int, dict[str, float]]] = {}
    with ProcessPoolExecutor(2) as ex:
        for k, s, r in ex.map(one, jobs, chunksize=4):
            out.setdefault(k, {})[s] = r
    Path(sys.argv[3]).write_text(json.dumps(out))
    print(len(out), "spaces")
