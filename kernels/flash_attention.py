"""Flash-attention forward ``O = softmax(Q K^T / sqrt(D)) V`` (fp16/bf16, not causal).

FlashAttention-2's forward pass: each program owns ``BLOCK_M`` query rows of one (batch, head)
and streams the keys and values in blocks of ``BLOCK_N``, keeping a running maximum and sum
(online softmax) so the ``N x N`` score matrix never reaches memory. Exponentials are base 2
with the scale folded into the subtraction of the running maximum (one FMA per score).
A switch of the space, tuned like the block sizes: ``TMA`` moves Q, K and V through tensor
descriptors (sm_90 and later) instead of pointer loads. Descriptors are made on the device,
which needs Triton's scratch allocator (:func:`kernels._base.install_allocator`, called on
import). A warp-specialised key loop (``tl.range(..., warp_specialize=True)``) is left out: on
the H200 with Triton 3.6 it never ran faster, and with 4 warps and 3-4 stages it computed
wrong results (caught by the target's correctness check; benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import triton
import triton.language as tl

from kernels._base import TritonKernel, install_allocator, next_pow2, torch_dtype
from tunex.space import Bool, Choice, Int, Pow2, Space

__all__ = ["FlashAttention", "attn_fwd_kernel", "even_blocks", "flash_attention"]

@triton.jit
def attn_fwd_kernel(Q, K, V, Out, sm_scale,
                    stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
                    stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
                    Z, H, N_CTX,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    TMA: tl.constexpr, EVEN: tl.constexpr):
    # The head dim is contiguous in every tensor. With TMA, Q, K and V (contiguous) are read
    # as [Z * H * N_CTX, HEAD_DIM] matrices through tensor descriptors; a block that runs
    # past its head reads the next head's rows, which the key mask and the masked store keep
    # out of the result. Z (batch) sizes the grid.
    dtype = Out.dtype.element_ty
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if TMA:
        rows = Z * H * N_CTX
        desc_q = tl.make_tensor_descriptor(Q, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
        desc_k = tl.make_tensor_descriptor(K, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_N, HEAD_DIM])
        desc_v = tl.make_tensor_descriptor(V, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_N, HEAD_DIM])
        offset_y = off_hz * N_CTX
        q = desc_q.load([offset_y + start_m * BLOCK_M, 0])
    else:
        q_ptrs = (Q + off_z * stride_qz + off_h * stride_qh
                  + offs_m[:, None] * stride_qm + offs_d[None, :])
        k_ptrs = (K + off_z * stride_kz + off_h * stride_kh
                  + offs_n[None, :] * stride_kn + offs_d[:, None])
        v_ptrs = (V + off_z * stride_vz + off_h * stride_vh
                  + offs_n[:, None] * stride_vn + offs_d[None, :])
        if EVEN:
            q = tl.load(q_ptrs)
        else:
            q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))
    for start_n in range(0, N_CTX, BLOCK_N):
        if TMA:
            k = desc_k.load([offset_y + start_n, 0]).T
        elif EVEN:
            k = tl.load(k_ptrs)
        else:
            k = tl.load(k_ptrs, mask=(start_n + offs_n)[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        if not EVEN:
            qk = tl.where((start_n + offs_n)[None, :] < N_CTX, qk, -1.0e6)
        # the scale folded into the subtraction of the running maximum: one FMA per score
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if TMA:
            v = desc_v.load([offset_y + start_n, 0])
        elif EVEN:
            v = tl.load(v_ptrs)
        else:
            v = tl.load(v_ptrs, mask=(start_n + offs_n)[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(dtype), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
        if not TMA:
            k_ptrs += BLOCK_N * stride_kn
            v_ptrs += BLOCK_N * stride_vn
    acc = acc / l_i[:, None]
    if TMA and EVEN:
        desc_o = tl.make_tensor_descriptor(Out, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
        desc_o.store([offset_y + start_m * BLOCK_M, 0], acc.to(dtype))
    else:
        o_ptrs = (Out + off_z * stride_oz + off_h * stride_oh
                  + offs_m[:, None] * stride_om + offs_d[None, :])
        if EVEN:
            tl.store(o_ptrs, acc.to(dtype))
        else:
            tl.store(o_ptrs, acc.to(dtype), mask=offs_m[:, None] < N_CTX)


def even_blocks(args: Mapping[str, Any]) -> bool:
    """``EVEN``: both blocks divide the sequence, so no key needs masking and the output is
    stored whole through its descriptor."""
    n = args["N_CTX"]
    return bool(n % args["BLOCK_M"] == 0 and n % args["BLOCK_N"] == 0)


class FlashAttention(TritonKernel):
    """Attention forward on ``q, k, v`` of shape ``[Z, H, N_CTX, D]`` (batch, heads,
    sequence, head dim; contiguous), fp16 or bf16.

    Space (4*4*2*4*2 = 256 points before constraints): ``BLOCK_M`` 32..256, ``BLOCK_N``
    16..128, ``num_warps`` 4/8, ``num_stages`` 1..4, ``TMA`` (descriptor loads, sm_90 and
    later). Constraints: Q and the pipelined K/V blocks fit shared memory; at most 192 fp32
    values (output accumulator and scores) per thread; no block longer than the sequence.
    """

    name = "flash_attention"
    needs_allocator = True
    dims = ("Z", "H", "N_CTX", "D")
    dim_args = {"D": "HEAD_DIM"}
    dtype_arg = "Q"
    heuristics = {"EVEN": even_blocks}
    dtypes = ("float16", "bfloat16")
    buckets = {"N_CTX": "pow2"}
    tolerances = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}

    @property
    def fn(self) -> Any:
        return attn_fwd_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_M", 32, 256, default=128), Pow2("BLOCK_N", 16, 128, default=64),
             Choice("num_warps", (4, 8), default=8), Int("num_stages", 1, 4, default=3),
             Bool("TMA", default=False)],
            ["(BLOCK_M * D + 2 * BLOCK_N * D * num_stages) * ELT <= smem",
             "arch >= 90 or not TMA",
             "BLOCK_M * (D + BLOCK_N) <= 192 * 32 * num_warps",
             "BLOCK_M <= max(32, N_POW2)", "BLOCK_N <= max(16, N_POW2)"],
            problem=["D", "smem", "ELT", "N_POW2", "arch"], name="flash_attention")

    def problem_key(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        key = super().problem_key(problem)
        if key["D"] not in (16, 32, 64, 128, 256):
            from tunex.errors import ConfigError

            raise ConfigError(f"flash_attention: head dim D={key['D']} must be a power of two "
                              "from 16 to 256")
        return key

    def derived(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"ELT": 2, "N_POW2": next_pow2(problem["N_CTX"])}

    def make_inputs(self, problem: Mapping[str, Any], device: str = "cuda",
                    seed: int = 0) -> dict[str, Any]:
        import torch

        dt = torch_dtype(problem.get("dtype", "float16"))
        shape = (problem["Z"], problem["H"], problem["N_CTX"], problem["D"])
        if device == "meta":
            q, k, v = (torch.empty(shape, dtype=dt, device="meta") for _ in range(3))
        else:
            g = torch.Generator(device="cpu").manual_seed(seed)
            q, k, v = (torch.randn(shape, generator=g).to(device, dt) for _ in range(3))
        return {"q": q, "k": k, "v": v, "o": torch.empty(shape, dtype=dt, device=device)}

    def outputs(self, inputs: Mapping[str, Any]) -> tuple[Any, ...]:
        return (inputs["o"],)

    def args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
             config: Mapping[str, Any]) -> dict[str, Any]:
        q, k, v, o = inputs["q"], inputs["k"], inputs["v"], inputs["o"]
        out: dict[str, Any] = {"Q": q, "K": k, "V": v, "Out": o,
                               "sm_scale": 1.0 / math.sqrt(problem["D"])}
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
            dims = ("z", "h", "n" if name in "kv" else "m")
            out.update({f"stride_{name}{d}": s for d, s in zip(dims, t.stride())})
        out.update(Z=problem["Z"], H=problem["H"], N_CTX=problem["N_CTX"],
                   HEAD_DIM=problem["D"], **self.constexprs(config))
        return out

    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        return (triton.cdiv(problem["N_CTX"], config["BLOCK_M"]), problem["Z"] * problem["H"])

    def reference(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]
                  ) -> tuple[Any, ...]:
        import torch

        q, k, v = (inputs[n].float() for n in "qkv")
        s = (q @ k.transpose(-1, -2)) / math.sqrt(problem["D"])
        return ((torch.softmax(s, dim=-1) @ v).to(inputs["q"].dtype),)

    def flops(self, problem: Mapping[str, Any]) -> float:
        z, h, n, d = (problem[x] for x in ("Z", "H", "N_CTX", "D"))
        return 4.0 * z * h * n * n * d

    def bytes(self, problem: Mapping[str, Any]) -> float:
        z, h, n, d = (problem[x] for x in ("Z", "H", "N_CTX", "D"))
        return 2.0 * 4 * z * h * n * d


install_allocator()
_KERNEL = FlashAttention()


def flash_attention(q: Any, k: Any, v: Any) -> Any:
    """``softmax(q k^T / sqrt(D)) v`` (not causal) for fp16 or bf16 ``q, k, v`` of shape
    ``[Z, H, N_CTX, D]`` (a new tensor), with the config tunex resolved for this shape's
    workload (the database's, a pack's, or the default; see :func:`kernels.matmul.matmul`).
    Non-contiguous inputs are copied first."""
    if q.ndim != 4 or tuple(k.shape) != tuple(q.shape) or tuple(v.shape) != tuple(q.shape) \
            or not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"flash_attention needs q, k, v of one shape [Z, H, N_CTX, D] and one "
                         f"dtype, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    z, h, n, d = q.shape
    out = q.new_empty(q.shape)
    return _KERNEL.launch({"q": q, "k": k, "v": v, "o": out},
                          {"Z": z, "H": h, "N_CTX": n, "D": d})[0]
