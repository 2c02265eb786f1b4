#!/usr/bin/env bash
# Set up (test tools, torch CPU + triton, PostgreSQL), then run the CPU test suite.
# GPU tests (-m gpu) and RISC-V tests (-m riscv) skip where their hardware is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# the recorded spaces of ../shared are part of the suite here: missing ones fail, never skip
export TUNEX_REQUIRE_SHARED="${TUNEX_REQUIRE_SHARED:-1}"
exec .venv/bin/python -m pytest -q -m "not gpu" "$@"
