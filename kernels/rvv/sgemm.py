"""Single-precision GEMM ``C[M, N] = A[M, K] @ B[K, N]`` (row-major) as a register-tiled C
kernel for RVV cores and the host.

The micro-kernel keeps a ``TM x TN`` tile of accumulators in vector registers: TM rows of C,
TN vectors of VLMAX(LMUL) columns each. For every k it loads TN vectors of row k of B and,
for each of the TM rows, broadcasts ``A[i, k]`` into a ``vfmacc.vf``. Around it, three block
loops (i tiles, j tiles, k blocks of ``KC``) run in the order ``order``; with K blocked, a C
tile is loaded, accumulated and stored once per k block, so C is zeroed first (the kernel is
idempotent, as the harness calls it repeatedly). Tails are exact: the last rows use a
micro-kernel of ``M % TM`` rows, the last columns strip-mine with ``vsetvl`` (or a shorter
vector loop in the portable form), the last k block is shorter.

Space (see :meth:`Sgemm.space`):

- ``style``: ``rvv`` (intrinsics; needs an RVV core) or ``vec`` (portable C with clang loop
  pragmas; the host's form).
- ``LMUL`` 1, 2, 4, 8: registers per vector; ``TM`` 1, 2, 4, 8 rows; ``TN`` 1, 2, 4
  vectors. The tile needs ``(TM * TN + TN) * LMUL`` registers (accumulators and one row of
  B): at most ``vregs``, or it spills. ``TM <= M`` and ``(TN - 1) * LMUL * lanes < N`` keep
  the tile no larger than the problem (only its last vector may be partial).
- ``KU`` 1, 2, 4, 8: unroll of the k loop (independent B loads in flight); ``KU <= K``.
- ``KC`` 64, 256 or 0 (whole K): the k block that keeps a panel of B in cache; a block
  must be smaller than K (``KC == K`` is the same code as whole K).
- ``order``: the nesting of the i, j, k block loops. With whole K the k loop runs once and
  its place changes nothing, so it is fixed innermost (no duplicate points).

On x280 (VLEN 512) at M = N = K = 256 the space holds 1856 points (half of them ``vec``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernels.rvv._common import LMULS, Lines, rv, vec_pragma, vsetvl, vsetvlmax, vt
from tunex.kernel import CKernel, Isa
from tunex.space import Choice, Permutation, Space

__all__ = ["Sgemm"]


class Sgemm(CKernel):
    """``C = A @ B`` in float32; see the module docstring for the space."""

    name = "sgemm"
    dims = ("M", "N", "K")
    inputs = ("A", "B")
    outputs = ("C",)
    tolerance = (1e-4, 1e-5)

    def space(self) -> Space:
        return Space(
            # defaults: within 10% of the best on both recorded cores (x280, x60) at 128^3;
            # on a host without RVV, Space.default keeps the tile in the portable style
            [Choice("style", ["vec", "rvv"], default="rvv"),
             Choice("LMUL", list(LMULS), default=4),
             Choice("TM", [1, 2, 4, 8], default=4),
             Choice("TN", [1, 2, 4], default=1),
             Choice("KU", [1, 2, 4, 8], default=4),
             Choice("KC", [64, 256, 0], default=0),
             Permutation("order", ("i", "j", "k"), default=("i", "j", "k"))],
            ["style == 'vec' or rvv == 1",
             "(TM * TN + TN) * LMUL <= vregs",
             "TM <= M",
             "(TN - 1) * LMUL * lanes < N",
             "KU <= K",
             "KC < K",
             "KC > 0 or order[2] == 'k'"],
            problem=["M", "N", "K", "rvv", "vregs", "lanes"], name="sgemm")

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        m, n, k = (int(problem[d]) for d in self.dims)
        return {"A": (m, k), "B": (k, n), "C": (m, n)}

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        return (inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64),)

    def magnitude(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        # a sum of products: its rounding error grows with the sum of the terms' sizes
        return self.reference({k: np.abs(v) for k, v in inputs.items()}, problem)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]

    def bytes(self, problem: Mapping[str, Any]) -> float:
        m, n, k = (problem[d] for d in self.dims)
        return 4.0 * (m * k + k * n + m * n)

    # -- rendering ------------------------------------------------------------------------------

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        m, n, k = (int(problem[d]) for d in self.dims)
        style, lmul = config["style"], int(config["LMUL"])
        tm, tn, ku, kc = (int(config[p]) for p in ("TM", "TN", "KU", "KC"))
        order = tuple(config["order"])
        if style == "rvv" and not isa.rvv:
            raise ValueError(f"style rvv needs an RVV core; {isa.name} has none")
        blocked = 0 < kc < k
        kcb = kc if blocked else k
        o = Lines()
        o(f"/* tunex sgemm {m}x{n}x{k}: {dict(config)} */",
          "#include <stddef.h>", "#include <string.h>")
        if style == "rvv":
            o("#include <riscv_vector.h>")
        o(f"#define M {m}L", f"#define N {n}L", f"#define K {k}L", "")
        rows = [tm] + ([m % tm] if m % tm else [])
        for r in rows:
            if style == "rvv":
                for t in sorted({tn, 1}):
                    self._mk_rvv(o, r, t, lmul, ku, blocked)
            else:
                self._mk_vec(o, r, tn * lmul * isa.lanes(32), lmul, ku, blocked, isa)
        o.open("void tx_kernel(float *const *buf, const long *dim)")
        o("const float *restrict A = buf[0];", "const float *restrict B = buf[1];",
          "float *restrict C = buf[2];", "(void)dim;")
        if blocked:
            o("memset(C, 0, sizeof(float) * M * N);")
        if style == "rvv":
            o(f"const size_t vlmax = {vsetvlmax(lmul)}();", f"const long NT = {tn} * (long)vlmax;")
        else:
            o(f"const long NT = {tn * lmul * isa.lanes(32)};")
        loops = {"i": f"for (long i0 = 0; i0 < M; i0 += {tm})",
                 "j": "for (long j0 = 0; j0 < N; j0 += NT)",
                 "k": f"for (long k0 = 0; k0 < K; k0 += {kcb})"}
        for level in order:
            o.open(loops[level])
        o(f"const long kc = K - k0 < {kcb} ? K - k0 : {kcb};")
        for idx, r in enumerate(rows):
            if len(rows) > 1:
                o.open(f"if (i0 + {tm} <= M)" if idx == 0 else "else")
            if style == "rvv":
                o(f"if (j0 + NT <= N) tx_mk_{r}x{tn}(A, B, C, i0, j0, k0, kc, vlmax);")
                o.open("else")
                o.open("for (long j = j0; j < N; )")
                o(f"size_t vl = {vsetvl(lmul)}((size_t)(N - j));",
                  f"tx_mk_{r}x1(A, B, C, i0, j, k0, kc, vl);", "j += (long)vl;")
                o.close().close()
            else:
                o(f"if (j0 + NT <= N) tx_mk_{r}(A, B, C, i0, j0, k0, kc, NT);",
                  f"else tx_mk_{r}(A, B, C, i0, j0, k0, kc, N - j0);")
            if len(rows) > 1:
                o.close()
        for _ in order:
            o.close()
        o.close()
        return o.text()

    @staticmethod
    def _mk_rvv(o: Lines, tm: int, tn: int, lmul: int, ku: int, blocked: bool) -> None:
        """Micro-kernel ``tx_mk_{tm}x{tn}``: a tm x tn tile of vl-wide vectors over kc."""
        v, L = vt(lmul), lmul
        o.open(f"static inline void tx_mk_{tm}x{tn}(const float *restrict A, "
               "const float *restrict B, float *restrict C, long i0, long j0, long k0, "
               "long kc, size_t vl)")
        o("const float *a = A + i0 * K + k0;", "const float *b = B + k0 * N + j0;",
          "float *c = C + i0 * N + j0;")
        for r in range(tm):
            for t in range(tn):
                init = (f"{rv('vle32_v', L)}(c + {r} * N + {t} * vl, vl)" if blocked
                        else f"{rv('vfmv_v_f', L)}(0.0f, vl)")
                o(f"{v} c{r}_{t} = {init};")

        def step(unroll: int) -> None:
            for u in range(unroll):
                kk = f"k + {u}" if u else "k"
                for t in range(tn):
                    o(f"{v} b{u}_{t} = {rv('vle32_v', L)}(b + ({kk}) * N + {t} * vl, vl);")
                for r in range(tm):
                    for t in range(tn):
                        o(f"c{r}_{t} = {rv('vfmacc_vf', L)}(c{r}_{t}, a[{r} * K + {kk}], "
                          f"b{u}_{t}, vl);")

        o("long k = 0;")
        if ku > 1:
            o.open(f"for (; k + {ku} <= kc; k += {ku})")
            step(ku)
            o.close()
        o.open("for (; k < kc; k++)")
        step(1)
        o.close()
        for r in range(tm):
            for t in range(tn):
                o(f"{rv('vse32_v', L)}(c + {r} * N + {t} * vl, c{r}_{t}, vl);")
        o.close()
        o("")

    @staticmethod
    def _mk_vec(o: Lines, tm: int, nt: int, lmul: int, ku: int, blocked: bool,
                isa: Isa) -> None:
        """Micro-kernel ``tx_mk_{tm}``: tm rows of at most ``nt`` columns, accumulated in a
        local array the vectorizer keeps in registers once the calls are inlined."""
        pragma = vec_pragma(isa, lmul)
        o.open(f"static inline void tx_mk_{tm}(const float *restrict A, "
               "const float *restrict B, float *restrict C, long i0, long j0, long k0, "
               "long kc, long jw)")
        o("const float *a = A + i0 * K + k0;", "const float *b = B + k0 * N + j0;",
          "float *c = C + i0 * N + j0;", f"float acc[{tm}][{nt}];")
        for r in range(tm):
            o(pragma, "for (long jj = 0; jj < jw; jj++) "
              + (f"acc[{r}][jj] = c[{r} * N + jj];" if blocked else f"acc[{r}][jj] = 0.0f;"))
        o(f"#pragma clang loop unroll_count({ku})" if ku > 1 else "#pragma nounroll")
        o.open("for (long k = 0; k < kc; k++)")
        o("const float *brow = b + k * N;")
        for r in range(tm):
            o(f"const float a{r} = a[{r} * K + k];", pragma,
              f"for (long jj = 0; jj < jw; jj++) acc[{r}][jj] += a{r} * brow[jj];")
        o.close()
        for r in range(tm):
            o(pragma, f"for (long jj = 0; jj < jw; jj++) c[{r} * N + jj] = acc[{r}][jj];")
        o.close()
        o("")

    def baseline(self, problem: Mapping[str, Any], isa: Isa) -> str:
        return """/* tunex sgemm baseline: the i-k-j loop nest, left to the compiler */
void tx_kernel(float *const *buf, const long *dim) {
    const float *A = buf[0], *B = buf[1];
    float *C = buf[2];
    const long M = dim[0], N = dim[1], K = dim[2];
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++)
            C[i * N + j] = 0.0f;
    for (long i = 0; i < M; i++)
        for (long k = 0; k < K; k++) {
            const float a = A[i * K + k];
            for (long j = 0; j < N; j++)
                C[i * N + j] += a * B[k * N + j];
        }
}
"""
