#!/usr/bin/env bash
# Install torch and triton for the triton_gpu target, the kernels library and their tests.
#
# Idempotent: each package is installed only when the version wanted is not importable already.
# Versions (override with the environment):
#   TORCH_VERSION  (default 2.13.0; on the CI machines pip takes this CPU build from local disk)
#   TRITON_VERSION (default 3.6.0, what the H200 machines run; a cp311 wheel is on PyPI)
# A CPU build of torch is enough without a GPU: kernels are compiled ahead of time for a named
# architecture (sm_90) and run under Triton's interpreter on CPU tensors.
set -euo pipefail

TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
TRITON_VERSION="${TRITON_VERSION:-3.6.0}"
PYTHON="${PYTHON:-python3}"

installed() {  # installed MODULE VERSION: is MODULE importable at VERSION (ignoring +local)?
    "$PYTHON" - "$1" "$2" <<'PY' 2>/dev/null
import importlib, sys
mod, want = sys.argv[1], sys.argv[2]
try:
    have = importlib.import_module(mod).__version__.split("+")[0]
except Exception:
    sys.exit(1)
sys.exit(0 if have == want else 1)
PY
}

if installed torch "$TORCH_VERSION"; then
    echo "torch $TORCH_VERSION already installed"
else
    # An exact pin: a bare 'torch' would pull a CUDA build of several GB.
    "$PYTHON" -m pip install --quiet "torch==$TORCH_VERSION"
fi

if installed triton "$TRITON_VERSION"; then
    echo "triton $TRITON_VERSION already installed"
else
    "$PYTHON" -m pip install --quiet "triton==$TRITON_VERSION"
fi

"$PYTHON" -c "import torch, triton; print(f'torch {torch.__version__}, triton {triton.__version__}')"
