"""Matrix multiplication ``C = A @ B`` (fp16/bf16 in, fp32 accumulate), grouped tile order.

The kernel is the one of Triton's matmul tutorial: each program computes a ``BLOCK_M x
BLOCK_N`` tile of C; programs are ordered in groups of ``GROUP_M`` tile rows so tiles that run
together share rows of A and columns of B in L2.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kernels._base import TritonKernel
from kernels._matmul import TUTORIAL_CONFIGS, Matmul, matmul_kernel, tutorial_triton_configs

__all__ = ["ALTERNATIVES", "TUTORIAL_CONFIGS", "Matmul", "clear_choices", "implementation",
           "matmul", "matmul_kernel", "tutorial_triton_configs"]

_KERNEL = Matmul()

#: Library kernels computing the same product as :func:`matmul`, in the order preferred when
#: none of them has a measured config for a workload.
ALTERNATIVES = ("matmul", "matmul_tma")
_CHOICE_LIMIT = 4096
log = logging.getLogger("tunex.kernels")


class _Choices:
    """Kernel picked per (shape, dtype, device, layout); forgotten, like the decorated
    kernels' own caches, whenever packs are loaded or cleared."""

    def __init__(self) -> None:
        self.picked: dict[tuple[Any, ...], TritonKernel] = {}

    def clear_cache(self) -> None:
        self.picked.clear()


_CHOICE = _Choices()


def implementation(a: Any, b: Any) -> TritonKernel:
    """The library kernel :func:`matmul` runs for ``a @ b``: of :data:`ALTERNATIVES` that can
    run the operands, the one whose config for this workload measured fastest in the tuning
    database or a loaded pack; ``matmul`` when none has a measured config. Decided once per
    shape, dtype, device and strides in a process (then a dict lookup); the choice is logged
    on ``tunex.kernels``. :func:`clear_choices` forgets the decisions (after new tuning)."""
    raw = (a.shape, b.shape, a.dtype, a.device, a.stride(), b.stride())  # ~1 us to build
    kern = _CHOICE.picked.get(raw)
    if kern is None:
        m, k = a.shape
        kern = _choose({"a": a, "b": b}, {"M": m, "N": b.shape[1], "K": k, "dtype": a.dtype})
        if len(_CHOICE.picked) >= _CHOICE_LIMIT:
            _CHOICE.clear_cache()
        _CHOICE.picked[raw] = kern
    return kern


def clear_choices() -> None:
    """Forget which kernel :func:`matmul` picked per shape (the next call decides again);
    loading or clearing packs does this too."""
    _CHOICE.clear_cache()


def _launchers() -> dict[str, TritonKernel]:
    """The kernels of :data:`ALTERNATIVES` whose launchers this process uses (each module's
    own instance, so its decorator's caches are the ones :func:`matmul` fills)."""
    from kernels import matmul_tma

    return {"matmul": _KERNEL, "matmul_tma": matmul_tma._KERNEL}


def _choose(inputs: Mapping[str, Any], problem: dict[str, Any]) -> TritonKernel:
    from tunex.decorator import _runtime

    _runtime.register(_CHOICE)  # forgotten with the decorators' caches (a weak set: idempotent)
    kernels = _launchers()
    times = {name: kernels[name].tuned_time(problem) for name in ALTERNATIVES
             if kernels[name].accepts(inputs)}
    measured = {n: t for n, t in times.items() if t is not None}
    pick = min(measured, key=lambda x: measured[x]) if measured else ALTERNATIVES[0]
    log.info("matmul M=%s N=%s K=%s %s: %s (%s)", problem["M"], problem["N"], problem["K"],
             str(problem["dtype"]).replace("torch.", ""), pick,
             ", ".join(f"{x} {'untuned' if t is None else f'{t:.4g} ms'}"
                       for x, t in times.items()))
    return kernels[pick]


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for row-major (any strides) 2-D fp16 or bf16 tensors, with the library kernel
    and config tunex resolved for this shape's workload.

    The kernel: ``matmul`` or ``matmul_tma``, whichever was measured faster for the workload
    (:func:`implementation`). Its config: the database's best, else a loaded pack's, else
    the space's default (see :func:`tunex.autotune`; ``TUNEX_MODE=on_miss`` tunes a
    new workload). A new shape in a known bucket (``M`` by powers of two) costs a dict lookup.

    The workload is the one ``tunex search matmul --target triton_gpu --shape M=..,N=..,K=..``
    (or ``tunex search matmul_tma ...``) records on the same device, so its results are used
    here.

    Raises:
        ValueError: the shapes or dtypes do not match.
        ConfigError: a dtype the kernel does not support.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(f"matmul needs a[M, K] and b[K, N] of one dtype, got "
                         f"{tuple(a.shape)} {a.dtype} and {tuple(b.shape)} {b.dtype}")
    m, k = a.shape
    n = b.shape[1]
    c = a.new_empty((m, n))
    return implementation(a, b).launch({"a": a, "b": b, "c": c}, {"M": m, "N": n, "K": k})[0]
