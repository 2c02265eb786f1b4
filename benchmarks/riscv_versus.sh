#!/usr/bin/env bash
# Tuned against the default build, for every RISC-V kernel at two sizes on the cycle model of
# the X280, the X60 and the P670, and on this machine's CPU for real: the rows of RESULTS.md "RISC-V".
# Each row: a `model` search within BUDGET trials, then the default build (the kernel's plain
# C form at clang-19 -O3, autovectorised at the compiler's own LMUL) and the winner measured
# again side by side (interleaved rounds on the cpu target). Rows go to
# benchmarks/results/riscv_versus.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
BUDGET="${BUDGET:-80trials}"
run() { $PY benchmarks/riscv.py versus --budget "$BUDGET" "$@"; }
for core in x280 x60 p670; do
    run --target "riscv-sim:$core" --kernel sgemm --shape M=128,N=128,K=128
    run --target "riscv-sim:$core" --kernel sgemm --shape M=256,N=256,K=256
    run --target "riscv-sim:$core" --kernel softmax_c --shape M=64,N=1000
    run --target "riscv-sim:$core" --kernel softmax_c --shape M=256,N=4096
    run --target "riscv-sim:$core" --kernel conv2d --shape C=16,F=16,H=34,W=34
    run --target "riscv-sim:$core" --kernel conv2d --shape C=32,F=32,H=66,W=66
done
run --target cpu --kernel sgemm --shape M=256,N=256,K=256 --rounds 7
run --target cpu --kernel sgemm --shape M=512,N=512,K=512 --rounds 7
run --target cpu --kernel softmax_c --shape M=256,N=4096 --rounds 7
run --target cpu --kernel conv2d --shape C=32,F=32,H=66,W=66 --rounds 7
