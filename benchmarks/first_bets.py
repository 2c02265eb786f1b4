"""What a warm start's first proposals are worth, before any trial: for each recorded space, the
other workloads' best configs (the favourites the search proposes among its first) and the
model fit on their trials alone (its best configs for this workload), each scored by the
recording's own times as a share of its optimum (1.0: the best config; 0.95 is the benchmark's
"within 95%").

The other workloads are what a first search of the space takes from a prior (a trials export
such as the ones tunex ships), less the space's own recording, as
``search_efficiency.py --sources prior-space`` runs it. One seed: the favourites do not depend
on it, the model's fit a little.

    python benchmarks/first_bets.py --prior tunex/db/prior_data/h200_triton.jsonl.gz \
        benchmarks/data/*.json.gz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_efficiency import _kernel_and_names

from tunex.db.prior import Prior
from tunex.search._model import ModelSearch
from tunex.targets.replay import ReplayTarget


def first_bets(prior: Prior, path: Path, top: int, seed: int,
               options: dict[str, object] | None = None) -> dict[str, object] | None:
    """The favourites' and the model's picks for the recording at ``path``, as shares of its
    optimum (``None``: the prior holds nothing a search of it would take)."""
    target = ReplayTarget(path)
    workload, optimum = target.workload(), target.optimum()
    taken = prior.without(like=workload).related(workload, _kernel_and_names(path)[1])
    if not taken:
        return None
    search = ModelSearch(target.space, seed=seed, **(options or {}))  # type: ignore[arg-type]
    search.warm_start(taken, current=workload,
                      guessed={w.kernel for w, _ in taken} - {workload.kernel})
    favourites = [optimum / target.true_time(c) for c in search._queue]
    model: list[float] = []
    if search._prior is not None and search._cands is not None and search._cand_X is not None:
        scores = search._prior.predict(search._cand_X)
        model = [optimum / target.true_time(search._cands[i])
                 for i in np.argsort(-scores)[:top]]
    share = np.mean([optimum / target.true_time(c) >= 0.95 for c in target.space])
    return {"size": target.space.size, "random": float(share), "favourites": favourites,
            "model": model}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prior", required=True, action="append",
                   help="a trials export standing for the prior (repeatable)")
    p.add_argument("--top", type=int, default=4, help="the model's best configs to score")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--options", default="{}",
                   help="ModelSearch options as JSON, e.g. '{\"relative\": false}'")
    p.add_argument("recordings", nargs="+", type=Path)
    args = p.parse_args()
    prior = Prior.load(*args.prior)
    print("| space | valid points | share within 95% | favourites, as queued | "
          f"the model's best {args.top} |")
    print("|---|---:|---:|---|---|")
    for path in args.recordings:
        got = first_bets(prior, path, args.top, args.seed, json.loads(args.options))
        if got is None:
            print(f"| {path.parent.name}/{path.name.split('.')[0]} | | | nothing taken | |")
            continue

        def fmt(xs: object) -> str:
            return ", ".join(f"{x:.2f}" for x in xs)  # type: ignore[attr-defined]

        print(f"| {path.parent.name}/{path.name.split('.')[0]} | {got['size']:,} | "
              f"{got['random']:.3f} | {fmt(got['favourites'])} | {fmt(got['model'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
