"""Design only: the share of runs with a config within 95% of the optimum among the first K
proposals of each start design (the model held back: n_init K + 1), over many seeds, noisy
replay. As run on 2026-12-07 (RESULTS.md, "what costs sgemm"), with the screened candidates'
diffs (maxpro_small.diff, mix_small.diff) applied in a worktree put first on sys.path:

    PYTHONPATH=WORKTREE python design_hits.py 10 60 benchmarks/data/riscv/sgemm/*.json.gz

In today's code ``{"design": "maxpro"}`` is MaxPro and ``{}`` is MaxPro on small spaces."""
import sys, statistics as st
from pathlib import Path
from tunex.targets.replay import ReplayTarget
from tunex.search import get_strategy
from tunex.trial import Measurement
K = int(sys.argv[1]); seeds = int(sys.argv[2]); files = sys.argv[3:]
designs = {"maximin": {"design": "maximin"}, "mp": {"design": "maxpro_small"},
           "random": {"design": "random"}, "mix": {"design": "mix_small"}}
for f in files:
    tgt = ReplayTarget(f, noisy=True, seed=0)
    opt = tgt.optimum()
    out = {}
    for name, opts in designs.items():
        firsts = []
        for s in range(seeds):
            t = ReplayTarget(f, noisy=True, seed=s)
            srch = get_strategy("model", t.space, seed=s)
            for k, v in dict(opts, n_init=K + 1).items():
                setattr(srch, k, v)
            first = K + 1
            for i in range(K):
                c = srch.ask(1)
                if not c: break
                c = c[0]
                m = t.measure(t.build(t.workload(), c))
                srch.tell([m])
                if t.true_time(c) <= opt / 0.95 and first > K:
                    first = i + 1
            firsts.append(first)
        out[name] = (sum(x <= K for x in firsts) / seeds, st.mean(firsts))
    print(Path(f).parent.name + '/' + Path(f).name, tgt.space.size, {k: (round(a, 2), round(b, 1)) for k, (a, b) in out.items()}, flush=True)
