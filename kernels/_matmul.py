"""The tiled matrix multiplication of Triton's tutorial and its declarations (:class:`Matmul`).

The kernel and its class live here, below both users: :mod:`kernels.matmul` (its launcher,
which also chooses between the library's matmul kernels) and :mod:`kernels.matmul_tma` (which
subclasses :class:`Matmul`). Neither imports the other back.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import triton
import triton.language as tl

from kernels._base import TritonKernel, next_pow2, torch_dtype
from tunex.space import Choice, Int, Pow2, Space

__all__ = ["TUTORIAL_CONFIGS", "Matmul", "matmul_kernel", "tutorial_triton_configs"]


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


#: The fp16 configs of Triton's matmul tutorial (``get_cuda_autotune_config``), as tunex
#: configs: the baseline ``triton.autotune`` is compared against.
TUTORIAL_CONFIGS: tuple[dict[str, int], ...] = tuple(
    dict(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_stages=s, num_warps=w)
    for m, n, k, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                          (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 32, 32, 4, 4),
                          (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]
)


def tutorial_triton_configs() -> list[triton.Config]:
    """:data:`TUTORIAL_CONFIGS` as ``triton.Config`` objects, for ``triton.autotune``."""
    return [triton.Config({k: c[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")},
                          num_warps=c["num_warps"], num_stages=c["num_stages"])
            for c in TUTORIAL_CONFIGS]


class Matmul(TritonKernel):
    """``C[M, N] = A[M, K] @ B[K, N]``, row-major, fp16 or bf16.

    Space (before constraints 4*4*3*2*3*4 = 1,152 points): ``BLOCK_M``/``BLOCK_N`` in 32..256,
    ``BLOCK_K`` in 32..128, ``GROUP_M`` 1 or 8, ``num_warps`` 2/4/8, ``num_stages`` 2..5.
    Constraints: the pipelined A and B tiles fit the device's shared memory per block
    (``smem``); 32 to 128 fp32 accumulators per thread (more spills on every NVIDIA GPU,
    fewer leaves warps without work for the tensor cores); no tile more than twice the
    (power-of-two rounded) problem along M or N, which would only compute padding.
    """

    name = "matmul"
    dims = ("M", "N", "K")
    dtype_arg = "a_ptr"
    dtypes = ("float16", "bfloat16")
    # Activations vary in M (batch x tokens); weights fix N and K.
    buckets = {"M": "pow2"}
    tolerances = {"float16": (1e-2, 5e-2), "bfloat16": (2e-2, 1e-1)}

    CONSTRAINTS = (
        "(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * ELT * num_stages <= smem",
        "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
        "BLOCK_M * BLOCK_N >= 32 * 32 * num_warps",
        "BLOCK_M <= max(32, 2 * M_POW2)",
        "BLOCK_N <= max(32, 2 * N_POW2)",
    )

    @property
    def fn(self) -> Any:
        return matmul_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_M", 32, 256, default=128), Pow2("BLOCK_N", 32, 256, default=128),
             Pow2("BLOCK_K", 32, 128, default=64), Choice("GROUP_M", (1, 8), default=8),
             Choice("num_warps", (2, 4, 8), default=4), Int("num_stages", 2, 5, default=3)],
            self.CONSTRAINTS, problem=["smem", "ELT", "M_POW2", "N_POW2"], name="matmul")

    def derived(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"ELT": 2, "M_POW2": next_pow2(problem["M"]), "N_POW2": next_pow2(problem["N"])}

    def make_inputs(self, problem: Mapping[str, Any], device: str = "cuda",
                    seed: int = 0) -> dict[str, Any]:
        import torch

        dt = torch_dtype(problem.get("dtype", "float16"))
        m, n, k = problem["M"], problem["N"], problem["K"]
        if device == "meta":
            a = torch.empty((m, k), dtype=dt, device="meta")
            b = torch.empty((k, n), dtype=dt, device="meta")
        else:
            g = torch.Generator(device="cpu").manual_seed(seed)
            a = torch.randn((m, k), generator=g, dtype=torch.float32).to(device, dt)
            b = torch.randn((k, n), generator=g, dtype=torch.float32).to(device, dt)
        c = torch.empty((m, n), dtype=dt, device=device)
        return {"a": a, "b": b, "c": c}

    def outputs(self, inputs: Mapping[str, Any]) -> tuple[Any, ...]:
        return (inputs["c"],)

    def args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
             config: Mapping[str, Any]) -> dict[str, Any]:
        a, b, c = inputs["a"], inputs["b"], inputs["c"]
        return {"a_ptr": a, "b_ptr": b, "c_ptr": c,
                "M": problem["M"], "N": problem["N"], "K": problem["K"],
                "stride_am": a.stride(0), "stride_ak": a.stride(1),
                "stride_bk": b.stride(0), "stride_bn": b.stride(1),
                "stride_cm": c.stride(0), "stride_cn": c.stride(1),
                **self.constexprs(config)}

    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        return (triton.cdiv(problem["M"], config["BLOCK_M"])
                * triton.cdiv(problem["N"], config["BLOCK_N"]),)

    def reference(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]
                  ) -> tuple[Any, ...]:
        a, b = inputs["a"], inputs["b"]
        # fp32 (no TF32, no reduced-precision reduction): the exact answer, rounded once
        return ((a.float() @ b.float()).to(a.dtype),)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]

    def bytes(self, problem: Mapping[str, Any]) -> float:
        m, n, k = problem["M"], problem["N"], problem["K"]
        return 2.0 * (m * k + k * n + m * n)


