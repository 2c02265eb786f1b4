"""Layer normalisation forward ``y = (x - mean) / sqrt(var + eps) * w + b`` over rows.

The kernel of Triton's layer-norm tutorial: one program per row, three passes over the row in
chunks of ``BLOCK_N`` (mean, variance, normalise), so rows of any length fit. It also writes
each row's mean and reciprocal standard deviation (what a backward pass needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import triton
import triton.language as tl

from kernels._base import TritonKernel, next_pow2, torch_dtype
from tunex.space import Choice, Pow2, Space

__all__ = ["LayerNorm", "layernorm", "layernorm_kernel"]

EPS = 1e-5


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, M, N, eps,
                     BLOCK_N: tl.constexpr):
    # one program per row: M (the grid) is an argument so the autotune key holds it
    row = tl.program_id(0)
    y_ptr += row.to(tl.int64) * stride
    x_ptr += row.to(tl.int64) * stride
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class LayerNorm(TritonKernel):
    """Layer norm over the rows of ``x[M, N]`` with weight and bias ``[N]``.

    Space: ``BLOCK_N`` 128..16384 (no wider than the row rounded up to a power of two),
    ``num_warps`` 1..16 with at least one element per thread, ``num_stages`` 1..3.
    """

    name = "layernorm"
    dims = ("M", "N")
    dtype_arg = "x_ptr"
    dtypes = ("float16", "bfloat16", "float32")
    buckets = {"M": "pow2"}
    tolerances = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2), "float32": (1e-4, 1e-4)}

    @property
    def fn(self) -> Any:
        return layernorm_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_N", 128, 16384, default=1024), Pow2("num_warps", 1, 16, default=4),
             Choice("num_stages", (1, 2, 3), default=2)],
            ["BLOCK_N <= max(128, N_POW2)", "num_warps * 32 <= BLOCK_N",
             "BLOCK_N <= 64 * 32 * num_warps"],
            problem=["N_POW2"], name="layernorm")

    def derived(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"N_POW2": next_pow2(problem["N"])}

    def make_inputs(self, problem: Mapping[str, Any], device: str = "cuda",
                    seed: int = 0) -> dict[str, Any]:
        import torch

        dt = torch_dtype(problem.get("dtype", "float16"))
        m, n = problem["M"], problem["N"]
        if device == "meta":
            x = torch.empty((m, n), dtype=dt, device="meta")
            w = torch.empty((n,), dtype=dt, device="meta")
            b = torch.empty((n,), dtype=dt, device="meta")
        else:
            g = torch.Generator(device="cpu").manual_seed(seed)
            x = (torch.randn((m, n), generator=g) * 2 + 0.5).to(device, dt)
            w = torch.rand((n,), generator=g).to(device, dt)
            b = torch.rand((n,), generator=g).to(device, dt)
        return {"x": x, "w": w, "b": b, "y": torch.empty((m, n), dtype=dt, device=device),
                "mean": torch.empty((m,), dtype=torch.float32, device=device),
                "rstd": torch.empty((m,), dtype=torch.float32, device=device)}

    def outputs(self, inputs: Mapping[str, Any]) -> tuple[Any, ...]:
        return (inputs["y"], inputs["mean"], inputs["rstd"])

    def args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
             config: Mapping[str, Any]) -> dict[str, Any]:
        x = inputs["x"]
        return {"x_ptr": x, "y_ptr": inputs["y"], "w_ptr": inputs["w"], "b_ptr": inputs["b"],
                "mean_ptr": inputs["mean"], "rstd_ptr": inputs["rstd"], "stride": x.stride(0),
                "M": problem["M"], "N": problem["N"], "eps": float(problem.get("eps", EPS)),
                **self.constexprs(config)}

    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        return (problem["M"],)

    def reference(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]
                  ) -> tuple[Any, ...]:
        import torch

        x = inputs["x"].float()
        mean = x.mean(dim=1)
        var = x.var(dim=1, unbiased=False)
        rstd = torch.rsqrt(var + EPS)
        y = torch.nn.functional.layer_norm(x, (x.shape[1],), inputs["w"].float(),
                                           inputs["b"].float(), EPS)
        return (y.to(inputs["x"].dtype), mean, rstd)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 8.0 * problem["M"] * problem["N"]

    def bytes(self, problem: Mapping[str, Any]) -> float:
        esize = 4 if problem.get("dtype") == "float32" else 2
        return esize * (2.0 * problem["M"] * problem["N"] + 2 * problem["N"]) + 8 * problem["M"]


_KERNEL = LayerNorm()


def layernorm(x: Any, weight: Any, bias: Any, eps: float = EPS) -> Any:
    """Layer norm over the rows of a 2-D fp16, bf16 or fp32 tensor with ``weight`` and
    ``bias`` of its row length (a new tensor), with the config tunex resolved for this shape's
    workload (the database's, a pack's, or the default; see :func:`kernels.matmul.matmul`)."""
    if x.ndim != 2 or tuple(weight.shape) != (x.shape[1],) or tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"layernorm needs x[M, N], weight[N] and bias[N], got "
                         f"{tuple(x.shape)}, {tuple(weight.shape)}, {tuple(bias.shape)}")
    import torch

    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    m, n = x.shape
    inputs = {"x": x, "w": weight, "b": bias, "y": x.new_empty((m, n)),
              "mean": x.new_empty((m,), dtype=torch.float32),
              "rstd": x.new_empty((m,), dtype=torch.float32)}
    return _KERNEL.launch(inputs, {"M": m, "N": n, "eps": eps})[0]
