"""Row softmax ``y[i, :] = exp(x[i, :] - max) / sum(exp(x[i, :] - max))`` of ``x[M, N]`` as a
C reduction kernel for RVV cores and the host.

Each row takes a max pass, an exp-and-sum pass and a scaling pass, each strip-mined in
vectors of VLMAX(LMUL) elements, ``U`` strips per iteration; ``ROWS`` rows go through every
pass together, so their reductions are independent chains the core can overlap. The exp is
a vectorised ``expf`` (Cephes: range reduction by ln 2, degree-6 polynomial, 2^n built in
the exponent bits; ~1-2 ulp) in the same algorithm in both styles (``kernels.rvv._common``).

Space (see :meth:`SoftmaxC.space`):

- ``style``: ``rvv`` (intrinsics; needs an RVV core) or ``vec`` (portable C with clang loop
  pragmas; the host's form). ``LMUL`` 1, 2, 4, 8; ``U`` 1, 2, 4 strips per iteration;
  ``ROWS`` 1, 2, 4 rows per block.
- ``acc``: ``vector`` keeps vector partial maxima and sums (tail-undisturbed on the last
  strip) and reduces them once per row; ``strip`` reduces every strip into a scalar
  (``vfredmax``/``vfredusum``: a serial chain through the reduction unit). In the ``vec``
  form ``vector`` is an explicit array of partial sums and ``strip`` a plain reduction loop
  left to the vectorizer; the max pass always uses partial maxima there, because clang does
  not vectorise an ``fmaxf`` reduction without fast-math flags.
- ``exp``: ``store`` writes exp(x - max) to y in the second pass and rescales y in the third
  (y read twice, written twice); ``recompute`` computes exp again in the third pass (x read
  three times, y written once, twice the exps).

Constraints: about four vector groups are live per strip in the exp pass (x, its exp and
the polynomial's temporaries), so ``ROWS * U * LMUL * 4 <= vregs``; ``ROWS <= M`` and
``(U - 1) * LMUL * lanes < N`` keep the block no larger than the problem; ``rvv`` needs an
RVV core. On x280 (VLEN 512) at M = N = 256: 144 points (72 on the host).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kernels.rvv._common import (
    LMULS,
    Lines,
    expf_rvv,
    expf_scalar,
    rv,
    vec_pragma,
    vsetvl,
    vsetvlmax,
    vt,
)
from tunex.kernel import CKernel, Isa
from tunex.space import Choice, Space

__all__ = ["SoftmaxC"]

#: body(row, unroll index, element offset expression, vl expression, tail strip) -> C lines.
_Body = Callable[[int, int, str, str, bool], list[str]]


class SoftmaxC(CKernel):
    """Softmax over the rows of ``x[M, N]`` in float32; see the module docstring."""

    name = "softmax_c"
    dims = ("M", "N")
    inputs = ("x",)
    outputs = ("y",)
    #: the polynomial exp is ~1-2 ulp; sums of N terms in another order.
    tolerance = (1e-4, 1e-6)

    def space(self) -> Space:
        return Space(
            [Choice("style", ["vec", "rvv"], default="vec"),
             Choice("LMUL", list(LMULS), default=1),
             Choice("U", [1, 2, 4], default=2),
             Choice("ROWS", [1, 2, 4], default=1),
             Choice("acc", ["vector", "strip"], default="vector"),
             Choice("exp", ["store", "recompute"], default="store")],
            ["style == 'vec' or rvv == 1",
             "ROWS * U * LMUL * 4 <= vregs",
             "ROWS <= M",
             "(U - 1) * LMUL * lanes < N"],
            problem=["M", "N", "rvv", "vregs", "lanes"], name="softmax_c")

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        shape = (int(problem["M"]), int(problem["N"]))
        return {"x": shape, "y": shape}

    def make_inputs(self, problem: Mapping[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
        """x uniform in [-8, 8): exp sees arguments down to -16, not only [-2, 0]."""
        rng = np.random.default_rng(seed)
        shape = self.shapes(problem)["x"]
        return {"x": rng.uniform(-8.0, 8.0, size=shape).astype(np.float32)}

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        x = inputs["x"].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True),)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 5.0 * problem["M"] * problem["N"]  # max, sub, exp, sum, scale

    def bytes(self, problem: Mapping[str, Any]) -> float:
        return 8.0 * problem["M"] * problem["N"]

    # -- rendering ------------------------------------------------------------------------------

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        m, n = int(problem["M"]), int(problem["N"])
        style, rows = config["style"], int(config["ROWS"])
        if style == "rvv" and not isa.rvv:
            raise ValueError(f"style rvv needs an RVV core; {isa.name} has none")
        o = Lines()
        o(f"/* tunex softmax_c {m}x{n}: {dict(config)} */",
          "#include <math.h>", "#include <stddef.h>", "#include <stdint.h>",
          "#include <string.h>")
        if style == "rvv":
            o("#include <riscv_vector.h>")
        o(f"#define M {m}L", f"#define N {n}L", "")
        sizes = [rows] + ([1] if m % rows else [])
        if style == "rvv":
            o.out.append(expf_rvv(int(config["LMUL"])))
            for r in sizes:
                self._rows_rvv(o, r, config)
        else:
            o.out.append(expf_scalar())
            for r in sizes:
                self._rows_vec(o, r, config, isa)
        o.open("void tx_kernel(float *const *buf, const long *dim)")
        o("const float *x = buf[0];", "float *y = buf[1];", "(void)dim;", "long i = 0;")
        o(f"for (; i + {rows} <= M; i += {rows}) tx_rows_{rows}(x + i * N, y + i * N);")
        if m % rows:
            o("for (; i < M; i++) tx_rows_1(x + i * N, y + i * N);")
        o.close()
        return o.text()

    @staticmethod
    def _rows_rvv(o: Lines, rows: int, config: Mapping[str, Any]) -> None:
        L, u_n = int(config["LMUL"]), int(config["U"])
        vector, store = config["acc"] == "vector", config["exp"] == "store"
        v = vt(L)
        rrange = range(rows)
        o.open(f"static void tx_rows_{rows}(const float *restrict x, float *restrict y)")
        o(f"const size_t vlmax = {vsetvlmax(L)}();")

        def strips(body: _Body) -> None:
            o("long j = 0;")
            o.open(f"for (; j + {u_n} * (long)vlmax <= N; j += {u_n} * (long)vlmax)")
            for u in range(u_n):
                for r in rrange:
                    o(*body(r, u, f"j + {u} * (long)vlmax" if u else "j", "vlmax", False))
            o.close()
            o.open("for (size_t vl; j < N; j += (long)vl)")
            o(f"vl = {vsetvl(L)}((size_t)(N - j));")
            for r in rrange:
                o(*body(r, 0, "j", "vl", True))
            o.close()

        def reduce(kind: str, acc: str, scalar: str, r: int, u: int, vl: str, tail: bool
                   ) -> list[str]:
            """Fold the strip ``acc_src`` into row r's accumulator."""
            red = {"max": ("vfmax_vv", "vfredmax_vs"), "sum": ("vfadd_vv", "vfredusum_vs")}[kind]
            if vector:
                pol = "_tu" if tail else ""
                name = f"{scalar}v{r}_{u}"
                args = f"{name}, {name}, {acc}" if tail else f"{name}, {acc}"
                return [f"{name} = {rv(red[0], L, pol)}({args}, {vl});"]
            return [f"{scalar}{r} = __riscv_vfmv_f_s_f32m1_f32(__riscv_{red[1]}_f32m{L}_f32m1("
                    f"{acc}, __riscv_vfmv_s_f_f32m1({scalar}{r}, 1), {vl}));"]

        def finish(kind: str, scalar: str, init: str) -> None:
            if not vector:
                return
            red = {"max": ("vfmax_vv", "vfredmax_vs"), "sum": ("vfadd_vv", "vfredusum_vs")}[kind]
            for r in rrange:
                for u in range(1, u_n):
                    o(f"{scalar}v{r}_0 = {rv(red[0], L)}({scalar}v{r}_0, {scalar}v{r}_{u}, "
                      "vlmax);")
                o(f"{scalar}{r} = __riscv_vfmv_f_s_f32m1_f32(__riscv_{red[1]}_f32m{L}_f32m1("
                  f"{scalar}v{r}_0, __riscv_vfmv_s_f_f32m1({init}, 1), vlmax));")

        def declare(scalar: str, init: str) -> None:
            for r in rrange:
                o(f"float {scalar}{r} = {init};")
                if vector:
                    for u in range(u_n):
                        o(f"{v} {scalar}v{r}_{u} = {rv('vfmv_v_f', L)}({init}, vlmax);")

        # pass 1: max
        declare("m", "-INFINITY")
        o.open("")
        strips(lambda r, u, off, vl, tail: [
            f"{v} x{r}_{u} = {rv('vle32_v', L)}(x + {r} * N + {off}, {vl});",
            *reduce("max", f"x{r}_{u}", "m", r, u, vl, tail)])
        o.close()
        finish("max", "m", "-INFINITY")
        # pass 2: exp (stored or not) and sum
        declare("s", "0.0f")
        o.open("")
        strips(lambda r, u, off, vl, tail: [
            f"{v} e{r}_{u} = tx_vexp_m{L}({rv('vfsub_vf', L)}("
            f"{rv('vle32_v', L)}(x + {r} * N + {off}, {vl}), m{r}, {vl}), {vl});",
            *([f"{rv('vse32_v', L)}(y + {r} * N + {off}, e{r}_{u}, {vl});"] if store else []),
            *reduce("sum", f"e{r}_{u}", "s", r, u, vl, tail)])
        o.close()
        finish("sum", "s", "0.0f")
        # pass 3: scale
        for r in rrange:
            o(f"const float inv{r} = 1.0f / s{r};")
        o.open("")

        def scale(r: int, u: int, off: str, vl: str, tail: bool) -> list[str]:
            src = (f"{rv('vle32_v', L)}(y + {r} * N + {off}, {vl})" if store else
                   f"tx_vexp_m{L}({rv('vfsub_vf', L)}({rv('vle32_v', L)}(x + {r} * N + {off}, "
                   f"{vl}), m{r}, {vl}), {vl})")
            return [f"{rv('vse32_v', L)}(y + {r} * N + {off}, "
                    f"{rv('vfmul_vf', L)}({src}, inv{r}, {vl}), {vl});"]

        strips(scale)
        o.close()
        o.close()
        o("")

    @staticmethod
    def _rows_vec(o: Lines, rows: int, config: Mapping[str, Any], isa: Isa) -> None:
        L, u_n = int(config["LMUL"]), int(config["U"])
        vector, store = config["acc"] == "vector", config["exp"] == "store"
        p = u_n * L * isa.lanes(32)
        pragma = vec_pragma(isa, L, u_n)
        inner = vec_pragma(isa, L)
        rrange = range(rows)
        o.open(f"static void tx_rows_{rows}(const float *restrict x, float *restrict y)")
        o("long j;")
        # pass 1: max, in partial maxima (an fmaxf reduction loop is not vectorised)
        for r in rrange:
            o(f"float mp{r}[{p}];", f"for (int l = 0; l < {p}; l++) mp{r}[l] = -INFINITY;")
        o.open(f"for (j = 0; j + {p} <= N; j += {p})")
        o(inner)
        o.open(f"for (int l = 0; l < {p}; l++)")
        for r in rrange:
            o(f"const float v{r} = x[{r} * N + j + l];",
              f"mp{r}[l] = v{r} > mp{r}[l] ? v{r} : mp{r}[l];")
        o.close().close()
        for r in rrange:
            o(f"float m{r} = -INFINITY;",
              f"for (int l = 0; l < {p}; l++) m{r} = mp{r}[l] > m{r} ? mp{r}[l] : m{r};",
              f"for (long t = j; t < N; t++) m{r} = x[{r} * N + t] > m{r} ? x[{r} * N + t]"
              f" : m{r};")

        def exp_body(r: int, idx: str) -> list[str]:
            out = [f"const float e{r} = tx_expf(x[{r} * N + {idx}] - m{r});"]
            if store:
                out.append(f"y[{r} * N + {idx}] = e{r};")
            return out

        # pass 2: exp and sum
        if vector:
            for r in rrange:
                o(f"float sp{r}[{p}];", f"for (int l = 0; l < {p}; l++) sp{r}[l] = 0.0f;")
            o.open(f"for (j = 0; j + {p} <= N; j += {p})")
            o(inner)
            o.open(f"for (int l = 0; l < {p}; l++)")
            for r in rrange:
                o(*exp_body(r, "j + l"), f"sp{r}[l] += e{r};")
            o.close().close()
            for r in rrange:
                o(f"float s{r} = 0.0f;", f"for (int l = 0; l < {p}; l++) s{r} += sp{r}[l];")
            o.open("for (; j < N; j++)")
            for r in rrange:
                o(*exp_body(r, "j"), f"s{r} += e{r};")
            o.close()
        else:
            for r in rrange:
                o(f"float s{r} = 0.0f;")
            o(pragma)
            o.open("for (j = 0; j < N; j++)")
            for r in rrange:
                o(*exp_body(r, "j"), f"s{r} += e{r};")
            o.close()
        # pass 3: scale
        for r in rrange:
            o(f"const float inv{r} = 1.0f / s{r};")
        o(pragma)
        o.open("for (j = 0; j < N; j++)")
        for r in rrange:
            src = f"y[{r} * N + j]" if store else f"tx_expf(x[{r} * N + j] - m{r})"
            o(f"y[{r} * N + j] = {src} * inv{r};")
        o.close()
        o.close()
        o("")

    def baseline(self, problem: Mapping[str, Any], isa: Isa) -> str:
        return """/* tunex softmax_c baseline: three plain loops per row, libm expf */
#include <math.h>
void tx_kernel(float *const *buf, const long *dim) {
    const float *x = buf[0];
    float *y = buf[1];
    const long M = dim[0], N = dim[1];
    for (long i = 0; i < M; i++) {
        const float *xr = x + i * N;
        float *yr = y + i * N;
        float m = xr[0];
        for (long j = 1; j < N; j++)
            m = fmaxf(m, xr[j]);
        float s = 0.0f;
        for (long j = 0; j < N; j++) {
            yr[j] = expf(xr[j] - m);
            s += yr[j];
        }
        for (long j = 0; j < N; j++)
            yr[j] /= s;
    }
}
"""
