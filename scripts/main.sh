#!/usr/bin/env bash
# The main job with embedded defaults: set up, then tune on this machine's best target into a
# local SQLite database (tunex.db), resuming if it was run before.
#   - a machine with an NVIDIA GPU and Triton: the library's fp16 matmul at 4096^3 on the GPU;
#   - otherwise: a search replayed on a recorded GPU tuning space (no GPU needed).
# Extra arguments go to `tunex search` (e.g. --budget 30m --strategy optuna:tpe).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TUNEX=.venv/bin/tunex

if .venv/bin/python -c "import torch, triton, sys; sys.exit(not torch.cuda.is_available())" \
        2>/dev/null; then
    exec "$TUNEX" search matmul --target triton_gpu --shape M=4096,N=4096,K=4096,dtype=fp16 \
        --budget 10m --db tunex.db "$@"
fi

data=""
for f in benchmarks/data/*.json.gz ../shared/data/spaces/kernel_tuner/convolution/A100.json.gz; do
    if [ -f "$f" ]; then data="$f"; break; fi
done
if [ -z "$data" ]; then
    echo "main.sh: no recorded space found (benchmarks/data/ or ../shared/data/spaces)" >&2
    exit 1
fi
"$TUNEX" search --target "replay:$data?noisy=1" --strategy model --budget 200trials \
    --db tunex.db "$@"
exec "$TUNEX" db best --db tunex.db
