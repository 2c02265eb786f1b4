"""The library of tunable kernels.

Each kernel is a :class:`~kernels._base.Kernel`: a ``@triton.jit`` function with its
declarative space, problem key (with bucketing), reference implementation, correctness check and
FLOP/byte counts. Kernels are found by name; their modules (which import triton) are imported
only when asked for::

    from kernels import get_kernel
    mm = get_kernel("matmul")
    space = mm.bind(mm.space(), mm.problem_key({"M": 4096, "N": 4096, "K": 4096}),
                    {"smem": 232448})

Each kernel module also has a user-facing launcher, the kernel under ``@tunex.autotune``
(:attr:`Kernel.tuned`)::

    from kernels.matmul import matmul            # also softmax.softmax, layernorm.layernorm,
    c = matmul(a, b)                             # flash_attention.flash_attention

It runs the config of its call's workload from the tuning database (``TUNEX_DB``) or a config
pack (``TUNEX_PACKS``, :func:`tunex.autotune.load_packs`), else the space's default; that
workload is the one ``tunex search matmul --target triton_gpu --shape ...`` records on the same
device, so offline tuning and packs made from it apply.

Kernels outside this package are added with :func:`register_kernel`, or for every process at
once (tunex's build and measure workers included) with the environment variable
``TUNEX_KERNELS="name=package.module:Class,other=..."``, read when this package is imported.
"""

from __future__ import annotations

import importlib
import os

from kernels._base import Kernel
from tunex.errors import ConfigError

__all__ = ["Kernel", "available_kernels", "get_kernel", "register_kernel"]

_REGISTRY: dict[str, str] = {
    "matmul": "kernels.matmul:Matmul",
    "softmax": "kernels.softmax:Softmax",
    "layernorm": "kernels.layernorm:LayerNorm",
    "flash_attention": "kernels.flash_attention:FlashAttention",
    "matmul_tma": "kernels.matmul_tma:MatmulTMA",
}
_INSTANCES: dict[str, Kernel] = {}


def _from_environment(text: str) -> dict[str, str]:
    """``name=module:Class,...`` from TUNEX_KERNELS; a malformed entry is an error, not ignored."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, path = item.partition("=")
        if not sep or ":" not in path or not name.strip().isidentifier():
            raise ConfigError(f"TUNEX_KERNELS entry {item!r} is not NAME=package.module:Class")
        out[name.strip()] = path.strip()
    return out


_REGISTRY.update(_from_environment(os.environ.get("TUNEX_KERNELS", "")))


def register_kernel(name: str, path: str) -> None:
    """Make a kernel available to :func:`get_kernel` (``"module:Class"``, imported on use).

    The registry is per process: tunex's build and measure workers (spawned processes) do not
    see a registration made at run time in the parent. Name such kernels in the environment
    variable ``TUNEX_KERNELS`` instead (see the module docstring), which workers inherit.
    """
    _REGISTRY[name] = path
    _INSTANCES.pop(name, None)


def available_kernels() -> list[str]:
    return sorted(_REGISTRY)


def get_kernel(name: str | Kernel) -> Kernel:
    """The kernel called ``name`` (one shared instance per name).

    Raises:
        ConfigError: no kernel has that name.
        ImportError: the kernel's module needs triton (or torch) and it is not installed.
    """
    if isinstance(name, Kernel):
        return name
    kernel = _INSTANCES.get(name)
    if kernel is None:
        path = _REGISTRY.get(name)
        if path is None:
            raise ConfigError(f"unknown kernel {name!r}; choose one of {available_kernels()}")
        module, _, attr = path.partition(":")
        kernel = getattr(importlib.import_module(module), attr)()
        _INSTANCES[name] = kernel
    return kernel
