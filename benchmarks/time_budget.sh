#!/usr/bin/env bash
# How exactly a time budget holds: three `tunex search` runs of sgemm on the host CPU with
# --budget 20s; prints each run's own seconds (the search, from its JSON line), its trials by
# kind and the span from the first trial's start to the last one's end.
# usage: bash benchmarks/time_budget.sh LABEL   (from the repository root, after scripts/setup.sh)
set -u
for i in 1 2 3; do
  rm -f /tmp/tb_$1_$i.db
  t0=$(date +%s.%N)
  .venv/bin/tunex search sgemm --target cpu --shape M=256,N=256,K=256 --budget 20s --seed $i --db /tmp/tb_$1_$i.db -q > /tmp/tb_$1_$i.log 2>&1
  t1=$(date +%s.%N)
  .venv/bin/python -c "
from tunex.db import Database
from collections import Counter
d=Database('/tmp/tb_$1_$i.db'); w=d.workloads()[0]; ts=d.trials(w); s=[t.measurement for t in ts]
c=Counter(t.strategy for t in ts)
import json; run = json.loads(open('/tmp/tb_$1_$i.log').read().strip().splitlines()[-1])
print('$1 seed $i wall', round($t1-$t0,1), 'search seconds', run['seconds'], 'trials', dict(c), 'first start to last end', round(max(m.ended_at for m in s)-min(m.started_at for m in s),2))"
done
