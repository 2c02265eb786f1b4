"""Direct 3x3 convolution, stride 1, no padding, as a register-tiled C kernel for RVV cores
and the host: ``y[f, h, j] = sum_{c, dy, dx} w[f, c, dy, dx] * x[c, h + dy, j + dx]`` for
``x[C, H, W]``, ``w[F, C, 3, 3]``, ``y[F, H - 2, W - 2]``.

The micro-kernel holds an ``FT x WT`` tile of accumulators: FT output channels of one output
row, WT vectors of VLMAX(LMUL) columns. For each input channel and each of the 9 taps (always
unrolled) it loads WT vectors of the input row shifted by the tap, and each of the FT filters
broadcasts its weight into a ``vfmacc.vf``; the channel loop is unrolled by ``CU``. Around it,
block loops over output-channel tiles (f), output rows (h) and input-channel blocks of ``CB``
(c) run in the order ``order``; with C blocked a tile is loaded, accumulated and stored once
per channel block, so y is zeroed first (the kernel is idempotent). Tails are exact: the last
filters use a micro-kernel of ``F % FT`` channels, the end of a row strip-mines with
``vsetvl`` (a shorter vector loop in the portable form), the last channel block is shorter.

Space (see :meth:`Conv2d.space`):

- ``style``: ``rvv`` (intrinsics; needs an RVV core) or ``vec`` (portable C with clang loop
  pragmas; the host's form).
- ``LMUL`` 1, 2, 4, 8; ``FT`` 1, 2, 4, 8 output channels; ``WT`` 1, 2, 4 vectors along the
  row. The tile needs ``(FT * WT + WT) * LMUL`` registers (accumulators and one shifted input
  row): at most ``vregs``. ``FT <= F`` and ``(WT - 1) * LMUL * lanes < W - 2`` keep it no
  larger than the problem (only its last vector may be partial).
- ``CU`` 1, 2, 4: unroll of the input-channel loop (``CU <= C``).
- ``CB`` 8, 32 or 0 (all channels): the channel block, so an input block stays in cache
  while y is revisited; a block must be smaller than C.
- ``order``: the nesting of the f, h, c block loops. With all channels in one block the c
  loop runs once and its place changes nothing, so it is fixed innermost.

On x280 (VLEN 512) at C = F = 32, H = W = 66 the space holds 1104 points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernels.rvv._common import LMULS, Lines, rv, vec_pragma, vsetvl, vsetvlmax, vt
from tunex.kernel import CKernel, Isa
from tunex.space import Choice, Permutation, Space

__all__ = ["Conv2d"]

_TAPS = [(dy, dx) for dy in range(3) for dx in range(3)]


class Conv2d(CKernel):
    """3x3 convolution of ``x[C, H, W]`` by ``w[F, C, 3, 3]``; see the module docstring."""

    name = "conv2d"
    dims = ("C", "F", "H", "W")
    inputs = ("x", "w")
    outputs = ("y",)
    tolerance = (1e-4, 1e-5)

    def space(self) -> Space:
        return Space(
            [Choice("style", ["vec", "rvv"], default="vec"),
             Choice("LMUL", list(LMULS), default=1),
             Choice("FT", [1, 2, 4, 8], default=4),
             Choice("WT", [1, 2, 4], default=1),
             Choice("CU", [1, 2, 4], default=1),
             Choice("CB", [8, 32, 0], default=0),
             Permutation("order", ("f", "h", "c"), default=("f", "h", "c"))],
            ["style == 'vec' or rvv == 1",
             "(FT * WT + WT) * LMUL <= vregs",
             "FT <= F",
             "(WT - 1) * LMUL * lanes < W - 2",
             "CU <= C",
             "CB < C",
             "CB > 0 or order[2] == 'c'"],
            problem=["C", "F", "W", "rvv", "vregs", "lanes"], name="conv2d")

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        c, f, h, w = (int(problem[d]) for d in self.dims)
        if h < 3 or w < 3:
            raise ValueError(f"conv2d needs H >= 3 and W >= 3 (a 3x3 window), got {h}x{w}")
        return {"x": (c, h, w), "w": (f, c, 3, 3), "y": (f, h - 2, w - 2)}

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        x, w = inputs["x"].astype(np.float64), inputs["w"].astype(np.float64)
        _, h, wd = x.shape
        y = np.zeros((w.shape[0], h - 2, wd - 2))
        for dy in range(3):
            for dx in range(3):
                y += np.einsum("fc,chw->fhw", w[:, :, dy, dx], x[:, dy:dy + h - 2, dx:dx + wd - 2])
        return (y,)

    def magnitude(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        # a sum of products: its rounding error grows with the sum of the terms' sizes
        return self.reference({k: np.abs(v) for k, v in inputs.items()}, problem)

    def flops(self, problem: Mapping[str, Any]) -> float:
        c, f, h, w = (problem[d] for d in self.dims)
        return 2.0 * 9 * c * f * (h - 2) * (w - 2)

    def bytes(self, problem: Mapping[str, Any]) -> float:
        c, f, h, w = (problem[d] for d in self.dims)
        return 4.0 * (c * h * w + 9 * f * c + f * (h - 2) * (w - 2))

    # -- rendering ------------------------------------------------------------------------------

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        c, f, h, w = (int(problem[d]) for d in self.dims)
        style, lmul = config["style"], int(config["LMUL"])
        ft, wt, cu, cb = (int(config[p]) for p in ("FT", "WT", "CU", "CB"))
        order = tuple(config["order"])
        if style == "rvv" and not isa.rvv:
            raise ValueError(f"style rvv needs an RVV core; {isa.name} has none")
        blocked = 0 < cb < c
        cbb = cb if blocked else c
        o = Lines()
        o(f"/* tunex conv2d C{c} F{f} {h}x{w}: {dict(config)} */",
          "#include <stddef.h>", "#include <string.h>")
        if style == "rvv":
            o("#include <riscv_vector.h>")
        o(f"#define C {c}L", f"#define F {f}L", f"#define H {h}L", f"#define W {w}L",
          "#define OH (H - 2)", "#define OW (W - 2)", "")
        fts = [ft] + ([f % ft] if f % ft else [])
        nt_vec = wt * lmul * isa.lanes(32)
        for r in fts:
            if style == "rvv":
                for t in sorted({wt, 1}):
                    self._mk_rvv(o, r, t, lmul, cu, blocked)
            else:
                self._mk_vec(o, r, nt_vec, lmul, cu, blocked, isa)
            # one output row of r filters over a channel block
            o.open(f"static inline void tx_row_{r}(const float *restrict x, "
                   "const float *restrict w, float *restrict y, long f0, long h, long c0, "
                   "long cc)")
            if style == "rvv":
                o(f"const size_t vlmax = {vsetvlmax(lmul)}();",
                  f"const long NT = {wt} * (long)vlmax;", "long j = 0;",
                  f"for (; j + NT <= OW; j += NT) tx_mk_{r}x{wt}(x, w, y, f0, h, j, c0, cc, "
                  "vlmax);")
                o.open("for (size_t vl; j < OW; j += (long)vl)")
                o(f"vl = {vsetvl(lmul)}((size_t)(OW - j));",
                  f"tx_mk_{r}x1(x, w, y, f0, h, j, c0, cc, vl);")
                o.close()
            else:
                o(f"const long NT = {nt_vec};", "long j = 0;",
                  f"for (; j + NT <= OW; j += NT) tx_mk_{r}(x, w, y, f0, h, j, c0, cc, NT);",
                  f"if (j < OW) tx_mk_{r}(x, w, y, f0, h, j, c0, cc, OW - j);")
            o.close()
            o("")
        o.open("void tx_kernel(float *const *buf, const long *dim)")
        o("const float *restrict x = buf[0];", "const float *restrict w = buf[1];",
          "float *restrict y = buf[2];", "(void)dim;")
        if blocked:
            o("memset(y, 0, sizeof(float) * F * OH * OW);")
        loops = {"f": f"for (long f0 = 0; f0 < F; f0 += {ft})",
                 "h": "for (long h = 0; h < OH; h++)",
                 "c": f"for (long c0 = 0; c0 < C; c0 += {cbb})"}
        for level in order:
            o.open(loops[level])
        o(f"const long cc = C - c0 < {cbb} ? C - c0 : {cbb};")
        if len(fts) > 1:
            o(f"if (f0 + {ft} <= F) tx_row_{ft}(x, w, y, f0, h, c0, cc);",
              f"else tx_row_{fts[1]}(x, w, y, f0, h, c0, cc);")
        else:
            o(f"tx_row_{ft}(x, w, y, f0, h, c0, cc);")
        for _ in order:
            o.close()
        o.close()
        return o.text()

    @staticmethod
    def _mk_rvv(o: Lines, ft: int, wt: int, lmul: int, cu: int, blocked: bool) -> None:
        """Micro-kernel ``tx_mk_{ft}x{wt}``: ft filters x wt vl-wide vectors of one row."""
        v, L = vt(lmul), lmul
        o.open(f"static inline void tx_mk_{ft}x{wt}(const float *restrict x, "
               "const float *restrict w, float *restrict y, long f0, long h, long j0, "
               "long c0, long cc, size_t vl)")
        o("float *yp = y + (f0 * OH + h) * OW + j0;",
          "const float *xp = x + (c0 * H + h) * W + j0;",
          "const float *wp = w + (f0 * C + c0) * 9;")
        for f in range(ft):
            for t in range(wt):
                init = (f"{rv('vle32_v', L)}(yp + {f} * OH * OW + {t} * vl, vl)" if blocked
                        else f"{rv('vfmv_v_f', L)}(0.0f, vl)")
                o(f"{v} a{f}_{t} = {init};")

        def channel(ce: str) -> None:
            for dy, dx in _TAPS:
                o.open("")
                for t in range(wt):
                    o(f"{v} x{t} = {rv('vle32_v', L)}(xp + ({ce}) * H * W + {dy} * W"
                      f" + {dx} + {t} * vl, vl);")
                for f in range(ft):
                    for t in range(wt):
                        o(f"a{f}_{t} = {rv('vfmacc_vf', L)}(a{f}_{t}, "
                          f"wp[{f} * C * 9 + ({ce}) * 9 + {dy * 3 + dx}], x{t}, vl);")
                o.close()

        o("long c = 0;")
        if cu > 1:
            o.open(f"for (; c + {cu} <= cc; c += {cu})")
            for u in range(cu):
                o.open("")
                channel(f"c + {u}" if u else "c")
                o.close()
            o.close()
        o.open("for (; c < cc; c++)")
        channel("c")
        o.close()
        for f in range(ft):
            for t in range(wt):
                o(f"{rv('vse32_v', L)}(yp + {f} * OH * OW + {t} * vl, a{f}_{t}, vl);")
        o.close()
        o("")

    @staticmethod
    def _mk_vec(o: Lines, ft: int, nt: int, lmul: int, cu: int, blocked: bool,
                isa: Isa) -> None:
        """Micro-kernel ``tx_mk_{ft}``: ft filters x at most ``nt`` columns of one row, in a
        local accumulator array."""
        pragma = vec_pragma(isa, lmul)
        o.open(f"static inline void tx_mk_{ft}(const float *restrict x, "
               "const float *restrict w, float *restrict y, long f0, long h, long j0, "
               "long c0, long cc, long jw)")
        o("float *yp = y + (f0 * OH + h) * OW + j0;",
          "const float *xp = x + (c0 * H + h) * W + j0;",
          "const float *wp = w + (f0 * C + c0) * 9;", f"float acc[{ft}][{nt}];")
        for f in range(ft):
            src = f"yp[{f} * OH * OW + jj]" if blocked else "0.0f"
            o(pragma, f"for (long jj = 0; jj < jw; jj++) acc[{f}][jj] = {src};")

        def channel(ce: str) -> None:
            for dy, dx in _TAPS:
                o.open("")
                o(f"const float *xr = xp + ({ce}) * H * W + {dy} * W + {dx};")
                for f in range(ft):
                    o(f"const float w{f} = wp[{f} * C * 9 + ({ce}) * 9 + {dy * 3 + dx}];",
                      pragma, f"for (long jj = 0; jj < jw; jj++) acc[{f}][jj] += w{f} * xr[jj];")
                o.close()

        o("long c = 0;")
        if cu > 1:
            o.open(f"for (; c + {cu} <= cc; c += {cu})")
            for u in range(cu):
                channel(f"c + {u}" if u else "c")
            o.close()
        o.open("for (; c < cc; c++)")
        channel("c")
        o.close()
        for f in range(ft):
            o(pragma, f"for (long jj = 0; jj < jw; jj++) yp[{f} * OH * OW + jj] = acc[{f}][jj];")
        o.close()
        o("")

    def baseline(self, problem: Mapping[str, Any], isa: Isa) -> str:
        # The nest a user who knows autovectorisation writes: the output row innermost, so
        # clang vectorises it (the textbook nest, with the channel and tap reduction
        # innermost, stays scalar: a float reduction is not reordered without -ffast-math).
        return """/* tunex conv2d baseline: a loop nest with the output row innermost */
void tx_kernel(float *const *buf, const long *dim) {
    const float *x = buf[0], *w = buf[1];
    float *y = buf[2];
    const long C = dim[0], F = dim[1], H = dim[2], W = dim[3];
    const long OH = H - 2, OW = W - 2;
    for (long i = 0; i < F * OH * OW; i++) y[i] = 0.0f;
    for (long f = 0; f < F; f++)
        for (long c = 0; c < C; c++)
            for (long dy = 0; dy < 3; dy++)
                for (long dx = 0; dx < 3; dx++) {
                    const float wv = w[((f * C + c) * 3 + dy) * 3 + dx];
                    for (long h = 0; h < OH; h++)
                        for (long j = 0; j < OW; j++)
                            y[(f * OH + h) * OW + j] += wv * x[(c * H + h + dy) * W + j + dx];
                }
}
"""
