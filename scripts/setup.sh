#!/usr/bin/env bash
# Set up tunex on a fresh machine, idempotently: a virtual environment in .venv with tunex
# (editable) and its dependencies. Every step is skipped when already done.
#   scripts/setup.sh          core: what `tunex search` needs, with `tunex report` (matplotlib)
#                             and parquet exports (pyarrow)
#   scripts/setup.sh --riscv  also the RISC-V toolchain (clang-19, lld, llvm-mca, qemu-user, the
#                             cross libc, the QEMU plugin) and OpenSSH: scripts/install-riscv.sh
#   scripts/setup.sh --test   also the test tools, torch (CPU) + triton for the ahead-of-time
#                             and interpreter tests, Debian's PostgreSQL for the server tests,
#                             Debian's chromium (renders `tunex report` pages in the tests),
#                             and the RISC-V toolchain (as --riscv)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
VPY="$PWD/.venv/bin/python"

stamp=".venv/.tunex-installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    "$VPY" -m pip install --quiet --disable-pip-version-check -e ".[report,parquet]"
    touch "$stamp"
fi

if [ "${1:-}" = "--riscv" ] || [ "${1:-}" = "--test" ]; then
    bash scripts/install-riscv.sh
fi

if [ "${1:-}" = "--test" ]; then
    if [ ! -f "$stamp.dev" ]; then
        # torch pinned first: a bare 'torch' requirement would pull a CUDA build of several GB
        PYTHON="$VPY" bash scripts/install-triton.sh
        "$VPY" -m pip install --quiet --disable-pip-version-check -e ".[dev,postgres]"
        touch "$stamp.dev"
    fi
    bash scripts/install-postgres.sh
    bash scripts/install-chromium.sh
fi
