"""Where a held-out space's 95% set sits among its siblings' favourites (leave-one-out).

A warm search proposes its siblings' best configs first (``ModelSearch.warm_start``: round robin
over the siblings, nearest problem and device first, each sibling's configs by its measured
time). This counts, per held-out space and seed, the position in that round robin (over all of
each sibling's measured configs) of the first config within 95% of the held-out optimum: if it
is never early, no ordering or number of the siblings' favourites can make a warm start fast,
and only the model can. The siblings' trials are the cold searches that
``search_efficiency.py --loo --no-cold --cold-cache DIR`` keeps in DIR (run that first).

    python benchmarks/seed_positions.py --cold-cache DIR --spaces 'matmul/*'
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from search_efficiency import LOO_DATA, ReplayTarget, cold_cache_path, loo_spaces  # noqa: E402

from tunex.search._model import _distance  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold-cache", type=Path, required=True)
    ap.add_argument("--spaces", default="*", help="comma list of globs on 'family/name'")
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--budget", type=int, default=100, help="the cold searches' budget")
    args = ap.parse_args(argv)
    spaces = loo_spaces(LOO_DATA, [p.strip() for p in args.spaces.split(",")])
    families: dict[str, list[tuple[str, str]]] = {}
    for s, (family, path) in loo_spaces(LOO_DATA).items():
        families.setdefault(family, []).append((s, str(path)))
    print("| space | seeds | median position | within 6 | within 20 |\n|---|---:|---:|---:|---:|")
    for space, (family, path) in spaces.items():
        members = families[family]
        if len(members) < 2:
            continue
        here = ReplayTarget(path)
        best = here.optimum()
        pos = []
        for seed in range(args.seeds):
            f = cold_cache_path(args.cold_cache, members, seed, args.budget)
            if not f.exists():
                continue
            cold = pickle.loads(f.read_bytes())
            wl = cold[space]["_workload"]
            sibs = sorted((s for s, _ in members if s != space),
                          key=lambda s: _distance(cold[s]["_workload"], wl))
            lists = [[m.config for m in sorted((m for m in cold[s]["_measurements"] if m.ok),
                                                key=lambda m: m.value)] for s in sibs]
            order: list = []
            for rank in range(max(map(len, lists))):
                for c in (x[rank] for x in lists if rank < len(x)):
                    if c not in order:
                        order.append(c)
            pos.append(next((i + 1 for i, c in enumerate(order) if c in here.space
                             and best / here.true_time(c) >= 0.95), len(order) + 1))
        if pos:
            print(f"| {space} | {len(pos)} | {statistics.median(pos):g} | "
                  f"{sum(p <= 6 for p in pos)} | {sum(p <= 20 for p in pos)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
