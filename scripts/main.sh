#!/usr/bin/env bash
# The main job with embedded defaults: set up, then tune on this machine's best target into the
# default SQLite database ($TUNEX_DB, else ~/.cache/tunex/tunex.db: the one every tunex entry
# point and the library launchers read), resuming if it was run before.
#   - a machine with an NVIDIA GPU and Triton: the library's fp16 matmul at 4096^3 on the GPU;
#   - otherwise: the library's sgemm (C, register-tiled, loop order and unroll in its space) on
#     this machine's CPU, compiled with clang-19 and timed for real (the C toolchain is installed
#     by scripts/setup.sh --riscv, which also brings the RISC-V simulator targets).
# Extra arguments go to `tunex search` (e.g. --budget 30m --strategy optuna:tpe). At the end it
# writes report.html here (`tunex report`: convergence, top configs, what matters).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TUNEX=.venv/bin/tunex

if .venv/bin/python -c "import torch, triton, sys; sys.exit(not torch.cuda.is_available())" \
        2>/dev/null; then
    "$TUNEX" search matmul --target triton_gpu --shape M=4096,N=4096,K=4096,dtype=fp16 \
        --budget 10m "$@"
else
    bash scripts/setup.sh --riscv
    "$TUNEX" search sgemm --target cpu --shape M=512,N=512,K=512 --budget 3m,150trials \
        "$@"
    "$TUNEX" db best
fi
exec "$TUNEX" report -o report.html
