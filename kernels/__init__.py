"""The library of tunable kernels.

Two families, one contract (:class:`tunex.kernel.Kernel`) and one registry
(:func:`tunex.kernel.get_kernel`, re-exported here):

- Triton kernels (this package's modules, :class:`TritonKernel`): a ``@triton.jit`` function
  with its declarative space, problem key (with bucketing), reference implementation,
  correctness check and FLOP/byte counts; built and measured by the ``triton_gpu`` target.
- C kernels for RISC-V vector CPUs and the host (``kernels/rvv/``, :class:`tunex.kernel.CKernel`):
  C sources rendered per config (RVV intrinsics at a chosen LMUL, register tiles, unroll,
  loop order) with NumPy references; built and measured by ``riscv-sim``, ``riscv-ssh``, ``cpu``.

Kernels are found by name; their modules (which import triton) are imported only when asked
for::

    from kernels import get_kernel
    mm = get_kernel("matmul")
    space = mm.bind(mm.space(), mm.problem_key({"M": 4096, "N": 4096, "K": 4096}),
                    {"smem": 232448})

Each Triton kernel module also has a user-facing launcher, the kernel under
``@tunex.autotune`` (:attr:`TritonKernel.tuned`)::

    from kernels.matmul import matmul            # also softmax.softmax, layernorm.layernorm,
    c = matmul(a, b)                             # flash_attention.flash_attention

It runs the config of its call's workload from the tuning database (``TUNEX_DB``) or a config
pack (``TUNEX_PACKS``, :func:`tunex.autotune.load_packs`), else the space's default; that
workload is the one ``tunex search matmul --target triton_gpu --shape ...`` records on the same
device, so offline tuning and packs made from it apply.

The library is listed by name in :data:`tunex.kernel.LIBRARY`. Kernels outside this package
are added with :func:`register_kernel`, through a distribution's ``tunex.kernels`` entry points,
or for every process at once (tunex's build and measure workers included) with the environment
variable ``TUNEX_KERNELS="name=package.module:Class,other=..."``.
"""

from __future__ import annotations

from tunex.kernel import CKernel, Kernel, available_kernels, get_kernel, register_kernel

__all__ = ["CKernel", "Kernel", "TritonKernel", "available_kernels", "get_kernel",
           "register_kernel"]


def __getattr__(name: str) -> object:
    if name == "TritonKernel":  # kernels._base reads Triton's helpers: import it on use
        from kernels._base import TritonKernel

        return TritonKernel
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
