"""Row-wise softmax ``y[i, :] = softmax(x[i, :])`` over the last dimension.

Each program holds whole rows in registers (``BLOCK_N`` = N rounded up to a power of two) and
walks ``ROWS`` consecutive rows; ``num_stages`` pipelines the loads of the next row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import triton
import triton.language as tl

from kernels._base import TritonKernel, next_pow2, torch_dtype
from tunex.space import Choice, Pow2, Space

__all__ = ["Softmax", "softmax", "softmax_kernel"]


@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                   BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    row0 = tl.program_id(0) * ROWS
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    for r in tl.range(0, ROWS):
        row = row0 + r
        if row < n_rows:
            x = tl.load(x_ptr + row.to(tl.int64) * x_row_stride + cols, mask=mask,
                        other=-float("inf")).to(tl.float32)
            x = x - tl.max(x, axis=0)
            num = tl.exp(x)
            y = num / tl.sum(num, axis=0)
            tl.store(y_ptr + row.to(tl.int64) * y_row_stride + cols,
                     y.to(y_ptr.dtype.element_ty), mask=mask)


class Softmax(TritonKernel):
    """Softmax over the rows of ``x[M, N]`` (fp16, bf16 or fp32; computed in fp32).

    Space: ``ROWS`` per program 1..8, ``num_warps`` 1..16, ``num_stages`` 1..3; constraints
    keep at least one element per thread and at most 128 per thread (more spills).
    """

    name = "softmax"
    dims = ("M", "N")
    dim_args = {"M": "n_rows", "N": "n_cols"}
    dtype_arg = "x_ptr"
    dtypes = ("float16", "bfloat16", "float32")
    buckets = {"M": "pow2"}

    @property
    def fn(self) -> Any:
        return softmax_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("ROWS", 1, 8, default=1), Pow2("num_warps", 1, 16, default=4),
             Choice("num_stages", (1, 2, 3), default=2)],
            ["num_warps * 32 <= max(32, N_POW2)", "N_POW2 <= 128 * 32 * num_warps",
             "ROWS <= M"],
            problem=["N_POW2", "M"], name="softmax")

    def derived(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"N_POW2": next_pow2(problem["N"])}

    def make_inputs(self, problem: Mapping[str, Any], device: str = "cuda",
                    seed: int = 0) -> dict[str, Any]:
        import torch

        dt = torch_dtype(problem.get("dtype", "float16"))
        shape = (problem["M"], problem["N"])
        if device == "meta":
            x = torch.empty(shape, dtype=dt, device="meta")
        else:
            g = torch.Generator(device="cpu").manual_seed(seed)
            x = (3 * torch.randn(shape, generator=g)).to(device, dt)
        return {"x": x, "y": torch.empty(shape, dtype=dt, device=device)}

    def outputs(self, inputs: Mapping[str, Any]) -> tuple[Any, ...]:
        return (inputs["y"],)

    def args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
             config: Mapping[str, Any]) -> dict[str, Any]:
        x, y = inputs["x"], inputs["y"]
        return {"y_ptr": y, "x_ptr": x, "x_row_stride": x.stride(0),
                "y_row_stride": y.stride(0), "n_rows": problem["M"], "n_cols": problem["N"],
                "BLOCK_N": next_pow2(problem["N"]), **self.constexprs(config)}

    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        return (triton.cdiv(problem["M"], config["ROWS"]),)

    def reference(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]
                  ) -> tuple[Any, ...]:
        x = inputs["x"]
        return (x.float().softmax(dim=-1).to(x.dtype),)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 5.0 * problem["M"] * problem["N"]  # max, sub, exp, sum, div

    def bytes(self, problem: Mapping[str, Any]) -> float:
        esize = 4 if problem.get("dtype") == "float32" else 2
        return 2.0 * esize * problem["M"] * problem["N"]


_KERNEL = Softmax()


def softmax(x: Any) -> Any:
    """Softmax over the last dimension of a 2-D fp16, bf16 or fp32 tensor (a new tensor), with
    the config tunex resolved for this shape's workload (the database's, a pack's, or the
    default; see :func:`kernels.matmul.matmul`)."""
    if x.ndim != 2:
        raise ValueError(f"softmax needs x[M, N], got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    y = x.new_empty(x.shape)
    return _KERNEL.launch({"x": x, "y": y}, {"M": x.shape[0], "N": x.shape[1]})[0]
