"""Where the good configs of recorded spaces lie, and which warm starts are extrapolations.

Three read-only looks at recordings and stored leave-one-out runs (seconds each):

- ``middle FILE...``: per recorded space, the mean distance of its configs within 95% of the
  optimum from the middle of each ordered numeric parameter's range (0: the middle, 1: an
  end; parameters of 3 or more values), minus the same over all its configs: below 0, the
  good configs lie nearer the middle than the space does.
  With ``--by-device``, also each space against the mean of the other kernels' spaces
  recorded on its device (leave-one-kernel-out): how often the signs agree, that is whether
  a device's other kernels tell where a new kernel's good configs lie (the start design of a
  kernel's first search could be chosen so).
- ``outside RUNS --loo-data DIR...``: the stored warm and cold runs of ``search_efficiency.py
  --loo`` (variant ``model``), split by whether the held-out space's problem lies outside its
  siblings' (one size above or below all of theirs): runs within 95% by trial 20 (warm), and
  on how many spaces the warm median is above the cold one.
- ``heldout FILE``: a first search of the recording from the shipped prior less itself, as
  ``ModelSearch`` takes it; each other workload held out in turn, a model of the rest with and
  without the columns relative to the problem sizes picks one of its measured configs, scored
  as a share of its best (the check on the siblings tried for ``race_start="agree"``).

Usage: ``python benchmarks/optima_where.py middle benchmarks/data/*.json.gz``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tunex.targets.replay import ReplayTarget  # noqa: E402


def middle(target: ReplayTarget) -> tuple[float, float, int, int] | None:
    """(good configs' mean distance from the middle, all configs', good, size), or ``None``
    where the space has no ordered numeric parameter of 3 or more values."""
    points = list(target.space)
    times = np.array([target.true_time(c) for c in points])
    good = times.min() / times >= 0.95
    ordered = []
    for p in target.space.params:
        vals = getattr(p, "values", None)
        if vals and len(vals) >= 3 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            ordered.append((p.name, sorted(set(vals))))
    if not ordered:
        return None

    def edge(c: Any) -> float:
        return float(np.mean([abs(sv.index(c[n]) / (len(sv) - 1) - 0.5) * 2
                              for n, sv in ordered]))

    d = np.array([edge(c) for c in points])
    return float(d[good].mean()), float(d.mean()), int(good.sum()), len(points)


def by_device(rows: list[tuple[str, str, float]]) -> None:
    """Each space's statistic against the mean of the other kernels' on its device."""
    agree = total = middle_n = 0
    for kernel, device, x in rows:
        others = [y for k, d, y in rows if d == device and k != kernel]
        if not others:
            print(f"  {kernel} on {device}: no other kernel recorded there")
            continue
        guess = statistics.fmean(others)
        total += 1
        agree += (guess < 0) == (x < 0)
        middle_n += x < 0
        print(f"  {kernel:24s} {device:28s} own {x:+.2f}  its device's other kernels "
              f"{guess:+.2f} ({len(others)} spaces)")
    print(f"signs agree on {agree} of {total} spaces (always guessing the middle: {middle_n})")


def _sizes(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in ReplayTarget(path).workload().problem.items():
        for i, x in enumerate(v if isinstance(v, list) else [v]):
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                out[f"{k}[{i}]" if isinstance(v, list) else k] = x
    return out


def outside(runs_file: Path, roots: list[Path]) -> None:
    loo = json.loads(gzip.decompress(runs_file.read_bytes()))["loo"]
    runs, facts = loo["runs"]["model"], loo["facts"]
    files = {p.name: p for r in roots for p in r.rglob("*.json*")}
    sizes = {sp: _sizes(files[facts[sp]["file"]]) for sp in runs}
    rows: dict[bool, list[tuple[int, int, bool]]] = {True: [], False: []}
    for sp, seeds in runs.items():
        family = sp.split("/")[0]
        others = [sizes[o] for o in runs if o != sp and o.split("/")[0] == family]
        out = False
        for k, v in sizes[sp].items():
            vals = [o[k] for o in others if k in o]
            out |= bool(vals) and (v > max(vals) or v < min(vals))
        cold = [r["cold_default"]["t95"] or 101 for r in seeds.values()]
        warm = [r["warm"]["t95"] or 31 for r in seeds.values()]
        rows[out].append((sum(t <= 20 for t in warm), len(warm),
                          statistics.median(warm) > statistics.median(cold)))
    for out, name in ((True, "outside"), (False, "inside")):
        r = rows[out]
        print(f"{name} their siblings' problems: {len(r)} spaces, warm 95% within 20 in "
              f"{sum(x[0] for x in r)} of {sum(x[1] for x in r)} runs, warm median above "
              f"cold on {sum(x[2] for x in r)}")


def heldout(path: Path) -> None:
    from tunex.cost_model import GBMRanker
    from tunex.db.prior import Prior
    from tunex.search._model import ModelSearch

    target = ReplayTarget(path)
    w = target.workload()
    taken = Prior.shipped().without(like=w).related(w, target.space.names)
    st = ModelSearch(target.space, seed=0)
    st.warm_start(taken, current=w, guessed={x.kernel for x, _ in taken} - {w.kernel})
    if st._other is None:
        print("the prior holds nothing a search of it takes")
        return
    X, y, g = st._other
    k = st.features.n_relative
    for gi in np.unique(g):
        held = g == gi
        vals = y[held]
        best = np.nanmin(np.where(np.isfinite(vals), vals, np.nan))
        shares = []
        for cols in (slice(None, -k if k else None), slice(None)):
            m = GBMRanker(random_state=1).fit(X[~held][:, cols], y[~held], g[~held])
            shares.append(best / vals[int(np.argmax(m.predict(X[held][:, cols])))])
        print(f"workload {gi} ({held.sum()} trials) held out: the pick without the relative "
              f"columns {shares[0]:.3f} of its best, with them {shares[1]:.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("middle")
    m.add_argument("files", nargs="+", type=Path)
    m.add_argument("--by-device", action="store_true")
    o = sub.add_parser("outside")
    o.add_argument("runs", type=Path)
    o.add_argument("--loo-data", type=Path, action="append", required=True)
    h = sub.add_parser("heldout")
    h.add_argument("file", type=Path)
    args = p.parse_args()
    if args.cmd == "middle":
        rows = []
        for f in args.files:
            t = ReplayTarget(f)
            got = middle(t)
            if got is not None:
                g, a, n, size = got
                print(f"{g - a:+.2f}  good {g:.2f}  all {a:.2f}  within 95% {n:>5} of "
                      f"{size:>6}  {f}")
                rows.append((str(t.doc_meta.get("kernel_name")), str(t.fingerprint()["device"]),
                             g - a))
        if args.by_device:
            by_device(rows)
    elif args.cmd == "outside":
        outside(args.runs, args.loo_data)
    else:
        heldout(args.file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
