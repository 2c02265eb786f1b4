"""Persistent matrix multiplication with TMA loads and stores, for Hopper and later.

``C = A @ B`` like :mod:`kernels.matmul`, written the way Hopper wants a GEMM: one program per
SM loops over output tiles (a persistent kernel: no tail of half-empty waves, and the next
tile's loads overlap this tile's epilogue); A, B and C move through tensor descriptors (TMA:
the copy engine computes the addresses and handles the edges, so no thread does pointer
arithmetic or masking); and the loop over tiles may be flattened into one software pipeline
with the K loop, the epilogue split in two stores. The space lets the tuner choose, with the
tile sizes.

A warp-specialised tile loop (``tl.range(..., warp_specialize=True)``) is left out: on the
H200 with Triton 3.6 every such config tried either failed to compile or computed wrong
results (caught by the target's correctness check; benchmarks/RESULTS.md).

Descriptors are made on the device (``tl.make_tensor_descriptor``), which needs a scratch
allocator: importing this module installs one (:func:`kernels._base.install_allocator`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import triton
import triton.language as tl

from kernels._base import install_allocator
from kernels._matmul import Matmul
from tunex.space import Bool, Choice, Int, Pow2, Space

__all__ = ["MatmulTMA", "matmul_tma", "matmul_tma_kernel"]


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def matmul_tma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, SUBTILE: tl.constexpr, FLATTEN: tl.constexpr):
    dtype = c_ptr.dtype.element_ty
    start_pid = tl.program_id(axis=0)
    programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    if SUBTILE:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                           block_shape=[BLOCK_M, BLOCK_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                           block_shape=[BLOCK_M, BLOCK_N])
    # the epilogue's tile counter is kept apart from the loop's, so a flattened loop can run
    # the next tile's loads ahead of this tile's store
    tile_id_c = start_pid - programs
    for tile_id in tl.range(start_pid, num_tiles, programs, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        tile_id_c += programs
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if SUBTILE:  # two half-width stores: less shared memory for the epilogue
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(halves)
            c_desc.store([offs_cm, offs_cn], acc0.to(dtype))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(dtype))
        else:
            c_desc.store([offs_cm, offs_cn], acc.to(dtype))


@functools.lru_cache(maxsize=1)
def _programs() -> int:
    """Programs of a persistent launch: one per SM of the GPU (the current one at the first
    launch; 4 without a GPU, as under Triton's interpreter on a CPU)."""
    import torch

    if not torch.cuda.is_available():
        return 4
    return int(torch.cuda.get_device_properties(torch.cuda.current_device())
               .multi_processor_count)


install_allocator()


class MatmulTMA(Matmul):
    """``C[M, N] = A[M, K] @ B[K, N]``, fp16 or bf16, row-major with the last dimension
    contiguous; a persistent TMA kernel for sm_90 and later.

    Space (3*3*3*2*2*4*2*2 = 1,728 points before constraints): ``BLOCK_M``/``BLOCK_N`` in
    64..256, ``BLOCK_K`` 32..128, ``GROUP_M`` 1 or 8, ``num_warps`` 4/8, ``num_stages`` 2..5,
    and two switches: ``SUBTILE`` (store C in two halves) and ``FLATTEN`` (one pipeline
    across tiles). Constraints: the pipelined tiles plus the epilogue's C tile fit shared
    memory; 32..128 fp32 accumulators per thread; no tile more than twice the problem along
    M or N; subtiling goes with flattening (as Triton's persistent-matmul tutorial prunes
    for Hopper); TMA needs rows of 16 bytes (``N`` and ``K`` multiples of 8).
    """

    name = "matmul_tma"
    needs_allocator = True

    CONSTRAINTS = (
        "(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * ELT * num_stages + BLOCK_M * BLOCK_N * ELT"
        " <= smem",
        "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
        "BLOCK_M * BLOCK_N >= 32 * 32 * num_warps",
        "BLOCK_M <= max(64, 2 * M_POW2)",
        "BLOCK_N <= max(64, 2 * N_POW2)",
        "FLATTEN or not SUBTILE",
        "N % 8 == 0 and K % 8 == 0",
    )

    @property
    def fn(self) -> Any:
        return matmul_tma_kernel

    def accepts(self, inputs: Mapping[str, Any]) -> bool:
        """A and B in place: rows of 16-byte multiples with the last dimension contiguous, on
        a GPU of sm_90 or later (or CPU tensors, under Triton's interpreter)."""
        import torch

        a, b = inputs["a"], inputs["b"]
        if a.shape[1] % 8 or b.shape[1] % 8 or a.stride(1) != 1 or b.stride(1) != 1:
            return False
        return a.device.type != "cuda" or torch.cuda.get_device_capability(a.device)[0] >= 9

    def problem_key(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        key = super().problem_key(problem)
        if key["N"] % 8 or key["K"] % 8:
            from tunex.errors import ConfigError

            raise ConfigError(f"matmul_tma: N={key['N']} and K={key['K']} must be multiples of "
                              "8 (TMA moves rows of 16-byte multiples); use matmul for this "
                              "shape")
        return key

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_M", 64, 256, default=128), Pow2("BLOCK_N", 64, 256, default=128),
             Pow2("BLOCK_K", 32, 128, default=64), Choice("GROUP_M", (1, 8), default=8),
             Choice("num_warps", (4, 8), default=8), Int("num_stages", 2, 5, default=3),
             Bool("SUBTILE", default=False), Bool("FLATTEN", default=True)],
            self.CONSTRAINTS, problem=["smem", "ELT", "M_POW2", "N_POW2", "N", "K"],
            name="matmul_tma")

    def args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
             config: Mapping[str, Any]) -> dict[str, Any]:
        a, b, c = inputs["a"], inputs["b"], inputs["c"]
        return {"a_ptr": a, "b_ptr": b, "c_ptr": c,
                "M": problem["M"], "N": problem["N"], "K": problem["K"],
                "stride_am": a.stride(0), "stride_bk": b.stride(0), "stride_cm": c.stride(0),
                **self.constexprs(config)}

    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        tiles = (triton.cdiv(problem["M"], config["BLOCK_M"])
                 * triton.cdiv(problem["N"], config["BLOCK_N"]))
        return (min(tiles, _programs()),)


_KERNEL = MatmulTMA()


def matmul_tma(a: Any, b: Any) -> Any:
    """``a @ b`` through the persistent TMA kernel (sm_90 or later), with the config tunex
    resolved for this shape's workload, like :func:`kernels.matmul.matmul`. Inputs whose
    last dimension is not contiguous are copied first.

    Raises:
        ValueError: the shapes or dtypes do not match.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(f"matmul_tma needs a[M, K] and b[K, N] of one dtype, got "
                         f"{tuple(a.shape)} {a.dtype} and {tuple(b.shape)} {b.dtype}")
    a = a if a.stride(1) == 1 else a.contiguous()
    b = b if b.stride(1) == 1 else b.contiguous()
    m, k = a.shape
    n = b.shape[1]
    c = a.new_empty((m, n))
    return _KERNEL.launch({"a": a, "b": b, "c": c}, {"M": m, "N": n, "K": k})[0]
