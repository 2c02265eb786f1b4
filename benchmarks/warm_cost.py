"""The cost of a warm start from a large database: the strategy's time per trial, and the trials
to 95% of the optimum, when the other workloads hold many trials.

The held-out space is a recorded one (noisy replay, scored by recorded means); its sources are
every recorded config of the same kernel's other spaces (``--sources``, default: the three other
GPUs of Kernel Tuner's older convolution), up to ``--rows`` of each: a database after long
searches of the kernel elsewhere. Each ``--variants`` entry (options of the ``model`` strategy)
runs ``--seeds`` searches of ``--trials`` trials, one trial at a time through ``ask``/``tell``;
reported per variant: the median and mean milliseconds of ``ask`` + ``tell`` per trial, the
warm start's own seconds, and the median trials to 95% (``trials + 1`` where not reached).

Usage: ``python benchmarks/warm_cost.py --rows 6768 --seeds 5 --trials 40 --variants
'{"cap": {}, "all": {"transfer_rows": null}}' [--out results.json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tunex.search._model import ModelSearch  # noqa: E402
from tunex.targets.replay import ReplayTarget  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "spaces" / "kernel_tuner"


def sources(paths: list[Path], rows: int) -> list[tuple[Any, list[Any]]]:
    out = []
    for p in paths:
        t = ReplayTarget(p)
        w = t.workload()
        out.append((w, [t.measure(t.build(w, c)) for c in list(t.space)[:rows]]))
    return out


def run(target: Path, srcs: list[tuple[Any, list[Any]]], options: dict[str, Any], seed: int,
        trials: int) -> dict[str, Any]:
    tgt = ReplayTarget(target, noisy=True, seed=seed)
    optimum = tgt.optimum()
    st = ModelSearch(tgt.space, seed=seed, **options)
    t0 = time.perf_counter()
    st.warm_start(srcs, current=tgt.workload())
    warm_s = time.perf_counter() - t0
    per, t95, best = [], None, float("inf")
    for i in range(1, trials + 1):
        t0 = time.perf_counter()
        got = st.ask(1)
        if not got:  # the space is used up
            break
        c = got[0]
        spent = time.perf_counter() - t0
        m = tgt.measure(tgt.build(tgt.workload(), c))
        t0 = time.perf_counter()
        st.tell([m])
        per.append(1000 * (spent + time.perf_counter() - t0))
        best = min(best, tgt.true_time(c))
        if t95 is None and optimum / best >= 0.95:
            t95 = i
    return {"ms": per, "warm_s": warm_s, "t95": t95}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", type=Path, default=DATA / "convolution_kt" / "RTX_3090.json.gz")
    p.add_argument("--sources", type=Path, nargs="+", default=[
        DATA / "convolution_kt" / f"{d}.json.gz"
        for d in ("RTX_2080_Ti", "RTX_Titan", "RTX_3060_laptop")])
    p.add_argument("--rows", type=int, default=10**9, help="trials of each source at most")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--trials", type=int, default=40)
    p.add_argument("--variants", default='{"model": {}}')
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    srcs = sources(args.sources, args.rows)
    print(f"{args.target.parent.name}/{args.target.name}: warm start from "
          f"{sum(len(m) for _, m in srcs):,} trials of {len(srcs)} other workloads", flush=True)
    report: dict[str, Any] = {"rows": sum(len(m) for _, m in srcs), "variants": {}}
    for name, options in json.loads(args.variants).items():
        runs = [run(args.target, srcs, options, seed, args.trials) for seed in range(args.seeds)]
        ms = [x for r in runs for x in r["ms"]]
        t95 = [r["t95"] or args.trials + 1 for r in runs]
        row = {"median_ms": statistics.median(ms), "mean_ms": statistics.mean(ms),
               "warm_s": statistics.median(r["warm_s"] for r in runs),
               "t95_median": statistics.median(t95), "t95": t95}
        report["variants"][name] = row
        print(f"  {name}: ask + tell per trial median {row['median_ms']:.0f} ms, mean "
              f"{row['mean_ms']:.0f} ms; warm start {row['warm_s']:.2f} s; trials to 95% "
              f"median {row['t95_median']} {t95}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
