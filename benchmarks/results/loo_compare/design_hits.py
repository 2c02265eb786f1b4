"""Design only: the share of runs with a config within 95% of the optimum among the first K
proposals of each start design (the model held back: n_init K + 1), over many seeds, noisy
replay. As run on 2026-12-07 (RESULTS.md, "what costs sgemm"), with the screened candidates'
diffs (maxpro_small.diff, mix_small.diff) applied in a worktree put first on sys.path:

    PYTHONPATH=WORKTREE python design_hits.py 10 60 benchmarks/data/riscv/sgemm/*.json.gz

In today's code ``{"design": "maxpro"}`` is MaxPro and ``{}`` is MaxPro on small spaces.
"""

import statistics as st
import sys
from pathlib import Path

from tunex.search import get_strategy
from tunex.targets.replay import ReplayTarget

DESIGNS = {"maximin": {"design": "maximin"}, "mp": {"design": "maxpro_small"},
           "random": {"design": "random"}, "mix": {"design": "mix_small"}}


def first_hit(path: str, seed: int, k: int, options: dict, optimum: float) -> int:
    """The proposal (1-based) of the first config within 95%, or k + 1."""
    target = ReplayTarget(path, noisy=True, seed=seed)
    search = get_strategy("model", target.space, seed=seed)
    for name, value in dict(options, n_init=k + 1).items():
        setattr(search, name, value)
    for i in range(k):
        asked = search.ask(1)
        if not asked:
            break
        config = asked[0]
        search.tell([target.measure(target.build(target.workload(), config))])
        if target.true_time(config) <= optimum / 0.95:
            return i + 1
    return k + 1


def main() -> None:
    k, seeds, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    for path in files:
        target = ReplayTarget(path, noisy=True, seed=0)
        out = {}
        for name, options in DESIGNS.items():
            firsts = [first_hit(path, s, k, options, target.optimum()) for s in range(seeds)]
            out[name] = (round(sum(x <= k for x in firsts) / seeds, 2), round(st.mean(firsts), 1))
        print(f"{Path(path).parent.name}/{Path(path).name}", target.space.size, out, flush=True)


if __name__ == "__main__":
    main()
