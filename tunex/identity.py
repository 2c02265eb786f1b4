"""Workload identity: the kernel's source hash and the device fingerprint, for every entry point.

Public, and re-exported by :mod:`tunex.kernel` beside the kernel contract and registry: targets,
the decorator and the library kernels take a workload's identity from here and nowhere else.

``tunex search KERNEL --target triton_gpu`` records trials under the workload that
:meth:`tunex.targets.triton_gpu.TritonGPUTarget.prepare` builds; a ``@tunex.autotune`` kernel
(and the launchers of ``kernels/``, which are such kernels) looks up the workload of its call.
Both take the kernel's identity and the device fingerprint from here, so a row or pack entry made
offline is found at runtime on the same device:

- :func:`source_hash`: sha256 (16 hex digits) of the ``@triton.jit`` function's source from its
  ``def`` on (decorators left out), the same under Triton's JIT and its interpreter.
- :func:`make_fingerprint`: the target fingerprint of a workload: device name (as
  ``torch.cuda.get_device_properties(i).name`` gives it), architecture (``"sm_90"``) and Triton
  version. Nothing else: the torch and CUDA versions do not change which config is fastest (Triton
  compiles with its own bundled toolchain), so they are trial facts (:func:`toolchain_facts`),
  which pack provenance reads, not part of the key.
- :func:`device_fingerprint`: that fingerprint for the current device (or Triton's interpreter),
  computed once per device.
- :func:`gpu_properties`, :func:`arch_facts`, :func:`device_facts`: device limits that kernels'
  space constraints read (``smem``, ``sm_count``, ``arch``).

Nothing here imports torch or triton at module import.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import textwrap
from collections.abc import Mapping
from typing import Any

from tunex.errors import ConfigError

__all__ = [
    "ARCH_FACTS",
    "INTERPRETER_ARCH",
    "arch_facts",
    "base_function",
    "clear_device_cache",
    "device_facts",
    "device_fingerprint",
    "gpu_properties",
    "make_fingerprint",
    "source_hash",
    "toolchain_facts",
    "triton_version",
    "visible_gpu",
]

#: The ``arch`` of workloads run under Triton's interpreter (``TRITON_INTERPRET=1``).
INTERPRETER_ARCH = "interpreter"

#: Per-architecture limits used when no GPU of that architecture is visible: opt-in shared
#: memory per block (bytes), SMs of the flagship part, registers per SM, L2 bytes.
ARCH_FACTS: dict[int, dict[str, float]] = {
    70: {"smem": 98304, "sm_count": 80, "regs_per_sm": 65536, "l2_bytes": 6 << 20},
    75: {"smem": 65536, "sm_count": 72, "regs_per_sm": 65536, "l2_bytes": 6 << 20},
    80: {"smem": 166912, "sm_count": 108, "regs_per_sm": 65536, "l2_bytes": 40 << 20},
    86: {"smem": 101376, "sm_count": 84, "regs_per_sm": 65536, "l2_bytes": 6 << 20},
    89: {"smem": 101376, "sm_count": 128, "regs_per_sm": 65536, "l2_bytes": 72 << 20},
    90: {"smem": 232448, "sm_count": 132, "regs_per_sm": 65536, "l2_bytes": 50 << 20},
    100: {"smem": 232448, "sm_count": 148, "regs_per_sm": 65536, "l2_bytes": 126 << 20},
}

#: Device facts under the interpreter: it has no shared-memory limit, so none prunes a config.
_INTERPRETER_FACTS = {"smem": 1 << 31, "sm_count": 1, "arch": 0}


# -- kernel identity ---------------------------------------------------------------------------


def base_function(fn: Any) -> Any:
    """The Python function under a ``@triton.jit`` kernel (through ``triton.heuristics`` and
    other wrappers that keep it as ``.fn``).

    Raises:
        ConfigError: ``fn`` is not a Triton kernel.
    """
    base = fn
    while not inspect.isfunction(base):
        inner = getattr(base, "fn", None)
        if inner is None:
            raise ConfigError(f"@tunex.autotune must decorate a @triton.jit kernel, got {fn!r}")
        base = inner
    return base


def source_hash(fn: Any) -> str:
    """sha256 (16 hex digits) of a ``@triton.jit`` kernel's source from its ``def`` on.

    Decorators are left out and the text is dedented, so the hash is the same under Triton's
    JIT and its interpreter, under ``triton.heuristics``, and wherever the kernel is defined.
    The workload's ``kernel_hash`` for offline tuning and for ``@tunex.autotune`` alike.
    """
    base = base_function(fn)
    try:
        src = textwrap.dedent(inspect.getsource(base))
    except (OSError, TypeError):
        src = getattr(fn, "src", "") or base.__code__.co_code.hex()
    lines = src.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("def "):
            src = "\n".join(lines[i:])
            break
    return hashlib.sha256(src.encode("utf-8")).hexdigest()[:16]


# -- device fingerprint ------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def triton_version() -> str:
    try:
        import triton
    except ImportError:  # pragma: no cover - both users need triton anyway
        return "none"
    return str(triton.__version__)


def make_fingerprint(device: str, arch: str) -> dict[str, str]:
    """The target fingerprint of a Triton workload: ``{"device", "arch", "triton"}``.

    The one place that decides what the key holds; :func:`device_fingerprint` and
    :class:`~tunex.targets.triton_gpu.TritonGPUTarget` both build theirs here.
    """
    return {"device": str(device), "arch": str(arch), "triton": triton_version()}


@functools.cache
def gpu_properties(index: int) -> dict[str, Any]:
    """Name, architecture and limits of CUDA (or ROCm) device ``index``, read once.

    ``name`` is ``torch.cuda.get_device_properties(index).name``; ``arch`` is ``"sm_90"`` (or
    ``"gfx942"`` on ROCm); ``capability`` is the compute capability as an int (90).
    """
    import torch

    p = torch.cuda.get_device_properties(index)
    capability = int(p.major) * 10 + int(p.minor)
    if getattr(torch.version, "hip", None):
        arch = str(getattr(p, "gcnArchName", "gfx")).split(":")[0]
    else:
        arch = f"sm_{capability}"
    return {"name": str(p.name), "arch": arch, "capability": capability,
            "sm_count": int(getattr(p, "multi_processor_count", 0) or 0),
            "smem": int(getattr(p, "shared_memory_per_block_optin", 0) or 0),
            "l2_bytes": int(getattr(p, "L2_cache_size", 0) or 0),
            "regs_per_sm": int(getattr(p, "regs_per_multiprocessor", 0) or 0)}


def visible_gpu() -> dict[str, Any] | None:
    """:func:`gpu_properties` of torch's current CUDA device; None when there is none (a
    broken driver counts as none)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return gpu_properties(torch.cuda.current_device())
    except Exception:
        return None


@functools.cache
def _fingerprint_of(index: Any) -> dict[str, str]:
    if index == INTERPRETER_ARCH:
        return make_fingerprint("cpu", INTERPRETER_ARCH)
    gpu = gpu_properties(index)
    return make_fingerprint(gpu["name"], gpu["arch"])


def device_fingerprint(interpreted: bool = False) -> dict[str, str]:
    """The fingerprint of the device a kernel launch runs on (computed once per device).

    ``{"device": "NVIDIA H200", "arch": "sm_90", "triton": "3.6.0"}`` on torch's current CUDA
    device; ``{"device": "cpu", "arch": "interpreter", ...}`` under Triton's interpreter (or when
    no GPU is visible). Callers must not modify the returned dict.
    """
    index: Any = INTERPRETER_ARCH
    if not interpreted:
        try:
            import torch

            if torch.cuda.is_available():
                index = torch.cuda.current_device()
        except ImportError:  # pragma: no cover
            pass
    return _fingerprint_of(index)


def clear_device_cache() -> None:
    """Forget the devices read so far (tests that fake a device)."""
    gpu_properties.cache_clear()
    _fingerprint_of.cache_clear()


# -- device facts ------------------------------------------------------------------------------


def arch_facts(capability: int, gpu: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Limits of an architecture (``smem``, ``sm_count``, ``regs_per_sm``, ``l2_bytes``): the
    GPU's own when ``gpu`` (:func:`gpu_properties`) is of that architecture, else the table's
    (:data:`ARCH_FACTS`, sm_80's for an architecture it lacks)."""
    base = dict(ARCH_FACTS.get(capability, ARCH_FACTS[80]))
    if gpu is not None and gpu.get("capability") == capability:
        base.update({k: v for k, v in gpu.items() if k in base and v})
    return base


def device_facts(target: Mapping[str, Any]) -> dict[str, Any]:
    """The values kernels' space constraints read (``smem``, ``sm_count``, ``arch``) for a
    workload's target fingerprint seen at runtime: the interpreter has no limits; otherwise the
    current GPU's (the fingerprint was read from it)."""
    gpu = None if target.get("arch") == INTERPRETER_ARCH else visible_gpu()
    if gpu is None:
        return dict(_INTERPRETER_FACTS)
    cap = int(gpu["capability"])
    facts = arch_facts(cap, gpu)
    return {"smem": int(facts["smem"]), "sm_count": int(facts["sm_count"]), "arch": cap}


def toolchain_facts() -> dict[str, str]:
    """Versions stored with each trial but kept out of the key: ``torch`` and ``cuda`` (the
    CUDA version torch was built with; pack provenance lists it)."""
    out: dict[str, str] = {}
    try:
        import torch

        out["torch"] = str(torch.__version__)
        if torch.version.cuda:
            out["cuda"] = str(torch.version.cuda)
    except ImportError:  # pragma: no cover
        pass
    return out
