#!/usr/bin/env bash
# The H200 runs behind benchmarks/RESULTS.md "## Triton on the H200", for the device tool.
# Phase A: GPU test suite, flash-attention benchmark (with RECORD=1 first the matmul space
#          recording committed under benchmarks/data/).
# Phase B: matmul benchmark (tunex vs triton.autotune vs cuBLAS), using the recordings; the
#          shapes MxNxK,... in SHAPES (default: all four), BUDGET seconds per kernel.
# Phase C: checks only (GPU suite, an exhaustive search through the `tunex` command).
# Run from the repository root, with the tunex dependencies carried as wheels in .whl/
# (../shared/tools/device-wheels.sh optuna lightgbm sqlalchemy alembic colorlog mako greenlet
# cmaes). Results go to $OUT (the device tool's folder) or ./h200-out.
set -uo pipefail
phase="${1:?usage: h200_triton.sh A|B|C}"
OUT="${OUT:-$PWD/h200-out}"
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1
workers=$(( $(nproc) - 1 ))
log="$OUT/h200_$phase.log"  # one log per phase: the device tool returns at most 8 files
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log"
# Measure the cubins the builds made; fall back to recompiling with the JIT in the measuring
# process if that does not work with this Triton.
load=binary
python3 benchmarks/triton_gpu.py smoke --load binary 2>&1 | tee -a "$log" || load=jit
echo "load=$load" | tee -a "$log"
case "$phase" in
A)
    timeout 200 python3 -m pytest -m gpu tests -q -rs -p no:cacheprovider --continue-on-collection-errors 2>&1 | tee -a "$log"
    if [ "${RECORD:-0}" = 1 ]; then
        python3 benchmarks/triton_gpu.py record --load $load --out "$OUT/data" --workers "$workers" \
            --deadline 270 2>&1 | tee -a "$log"
    fi
    python3 benchmarks/triton_gpu.py bench --load $load --only attention --out "$OUT" --workers "$workers" \
        --fa-budget "${FA_BUDGET:-40}" --deadline 300 2>&1 | tee -a "$log"
    ;;
C)  # checks only: the GPU suite and a search through the CLI
    timeout 200 python3 -m pytest -m gpu tests -q -rs -p no:cacheprovider --continue-on-collection-errors 2>&1 | tee -a "$log"
    python3 -m tunex.cli search softmax --target "triton_gpu?load=$load" --shape M=4096,N=1000 \
        --strategy exhaustive --budget 60s --workers "$workers" --db /tmp/tunex-c.db -q 2>&1 | tee -a "$log"
    ;;
B)
    python3 benchmarks/triton_gpu.py bench --load $load --only matmul --out "$OUT" --workers "$workers" \
        --budget "${BUDGET:-60}" --shapes "${SHAPES:-}" --recorded benchmarks/data --deadline 540 \
        2>&1 | tee -a "$log"
    ;;
esac
