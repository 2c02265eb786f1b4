#!/usr/bin/env bash
# The tuning loop's own cost per trial, side by side for source trees (e.g. a git worktree of
# an older commit, and this checkout): `tunex search --strategy random` of 1,500 trials on a
# recorded 17k-point space (replay answers at once, so what is timed is tunex: the strategy's
# asks, the claims, the database writes), a fresh SQLite database each run, alternating.
# Usage: bash benchmarks/loop_overhead.sh TREE [TREE ...]   (prints: round tree seconds)
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$HERE/.venv/bin/python}
D=${DATA:-$HERE/../shared/data/spaces/kernel_tuner/gemm_clblast/RTX_2080_Ti.json.gz}
TMP=$(mktemp -d)
cd "$TMP"  # python -m puts the working directory first on the path: not a source tree
for round in 1 2 3; do
  for tree in "$@"; do
    rm -f "$TMP"/lb.db*
    s=$(date +%s.%N)
    PYTHONPATH=$tree "$PY" -m tunex.cli search --target "replay:$D" --strategy random \
      --budget 1500trials --seed "$round" --db "$TMP/lb.db" -q > /dev/null
    e=$(date +%s.%N)
    echo "$round $tree $(python3 -c "print(round($e - $s, 1))")"
  done
done
rm -rf "$TMP"
