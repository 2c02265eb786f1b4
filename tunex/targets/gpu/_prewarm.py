"""Triton's one-off set-up, done at import: a module for the fork server of build workers.

The first compile in a process costs about a second more than later ones (Triton loads its
compiler libraries and libdevice and asks ptxas for its version). The fork server that build
workers come from (:func:`tunex.cluster.worker_context`) imports this module once, so every
worker starts with that done instead of paying for it on its first build. It compiles one tiny
kernel ahead of time (no GPU, no CUDA context: forks may use CUDA afterwards) and never raises:
a failure here only means the workers warm up on their own.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

#: Seconds the warm-up took (``None``: it did not run or failed).
seconds: float | None = None


def _warm() -> None:
    global seconds
    import triton
    import triton.language as tl

    from tunex.targets.gpu._compile import compile_binary

    @triton.jit
    def _tunex_warm(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, x + 1, mask=offs < n)

    t0 = time.perf_counter()
    old = os.environ.get("TRITON_CACHE_DIR")
    # an empty cache, so that the compiler runs (a cache hit would warm nothing up) and the
    # user's cache gets no entry
    with tempfile.TemporaryDirectory(prefix="tunex-warm-") as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        try:
            compile_binary(_tunex_warm, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                           {(2,): 16}, {}, 80, {})
        finally:
            if old is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = old
    seconds = time.perf_counter() - t0


with contextlib.suppress(Exception):
    _warm()
