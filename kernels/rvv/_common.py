"""Rendering helpers the RVV kernels share: intrinsic and type names per LMUL, the pragmas of
the portable form, a vectorised ``expf`` in both forms, and a small line-builder.

Two ways to vectorise one algorithm, chosen by the ``style`` parameter of every space:

- ``rvv``: RVV 1.0 intrinsics (``riscv_vector.h``) with ``vsetvl`` strip-mining at the
  config's LMUL; the tile's registers are separate C variables (vector types cannot live in
  arrays), so the templates unroll them in Python.
- ``vec``: portable C loops with ``#pragma clang loop vectorize_width(...)``. On RISC-V the
  width is scalable, ``2 * LMUL`` (``<vscale x 2*LMUL x float>`` is LMUL registers of float32
  at any VLEN, since vscale = VLEN / 64); on the host it is fixed, ``LMUL * lanes``, i.e. LMUL
  of its widest registers. This is the form the ``cpu`` target builds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tunex.kernel import Isa

__all__ = [
    "LMULS",
    "Lines",
    "c_order",
    "expf_rvv",
    "expf_scalar",
    "rv",
    "vec_pragma",
    "vsetvl",
    "vsetvlmax",
    "vt",
]

#: The register-group sizes every space offers.
LMULS = (1, 2, 4, 8)


def vt(lmul: int) -> str:
    """The float32 vector type at ``lmul`` (``vfloat32m4_t``)."""
    return f"vfloat32m{lmul}_t"


def rv(op: str, lmul: int, suffix: str = "") -> str:
    """An intrinsic name at ``lmul``: ``rv("vle32_v", 2)`` -> ``__riscv_vle32_v_f32m2``;
    ``suffix`` adds a policy (``"_tu"``)."""
    return f"__riscv_{op}_f32m{lmul}{suffix}"


def vsetvl(lmul: int) -> str:
    return f"__riscv_vsetvl_e32m{lmul}"


def vsetvlmax(lmul: int) -> str:
    return f"__riscv_vsetvlmax_e32m{lmul}"


def vec_pragma(isa: Isa, lmul: int, interleave: int = 1, unroll: int | None = None) -> str:
    """The loop pragma of the ``vec`` style: LMUL registers per vector iteration (scalable on
    RISC-V, fixed ``LMUL * lanes`` elsewhere), ``interleave`` independent vector iterations."""
    width = f"{2 * lmul}, scalable" if isa.arch == "riscv64" else str(lmul * isa.lanes(32))
    text = (f"#pragma clang loop vectorize(enable) vectorize_width({width}) "
            f"interleave_count({interleave})")
    if unroll is not None:
        text += f" unroll_count({unroll})" if unroll > 1 else " unroll(disable)"
    return text


def c_order(order: Iterable[Any]) -> str:
    """A permutation as a C-comment-safe label (``i,j,k``)."""
    return ",".join(str(x) for x in order)


class Lines:
    """An indented list of C lines (templates build bodies in Python loops)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.depth = 0

    def __call__(self, *lines: str) -> Lines:
        for line in lines:
            self.out.append("    " * self.depth + line if line else "")
        return self

    def open(self, line: str) -> Lines:
        self(line + " {")
        self.depth += 1
        return self

    def close(self, tail: str = "") -> Lines:
        self.depth -= 1
        return self("}" + tail)

    def text(self) -> str:
        return "\n".join(self.out) + "\n"


# -- expf ---------------------------------------------------------------------------------------
# Cephes' expf: n = round(x / ln 2) by the 1.5 * 2^23 trick (the float's low bits are n),
# r = x - n ln 2 in two parts, exp(r) by a degree-6 polynomial, times 2^n built in the
# exponent bits. Inputs are clamped to [-87.3, 88.3] so 2^n stays a normal float. Both forms
# run the same operations, so the rvv and vec forms agree to the last bit up to FMA use
# (~1-2 ulp against libm).
_EXP_C = ("1.9875691500e-4f", "1.3981999507e-3f", "8.3334519073e-3f", "4.1665795894e-2f",
          "1.6666665459e-1f", "5.0000001201e-1f")
_EXP_LO, _EXP_HI = "-87.3f", "88.3f"
_MAGIC = "12582912.0f"  # 1.5 * 2^23
_MAGIC_BITS = "0x4B400000"


def expf_scalar() -> str:
    """``static inline float tx_expf(float)``: written so clang's loop vectorizer vectorises
    a loop calling it (no libm call, no branches)."""
    steps = "\n".join(f"    p = p * r + {c};" for c in _EXP_C[1:])
    return f"""static inline float tx_expf(float x) {{
    x = x < {_EXP_LO} ? {_EXP_LO} : x;
    x = x > {_EXP_HI} ? {_EXP_HI} : x;
    float t = x * 1.44269504088896341f + {_MAGIC};
    float n = t - {_MAGIC};
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float z = r * r;
    float p = {_EXP_C[0]};
{steps}
    float e = p * z + r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &t, 4);
    bits = (bits - {_MAGIC_BITS}u + 127u) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return e * s;
}}
"""


def expf_rvv(lmul: int) -> str:
    """``static inline vfloat32m{L}_t tx_vexp_m{L}(vfloat32m{L}_t x, size_t vl)``: the same
    algorithm as :func:`expf_scalar` in RVV intrinsics."""
    v, L = vt(lmul), lmul
    vu = f"vuint32m{L}_t"
    steps = "\n".join(
        f"    p = {rv('vfmadd_vv', L)}(p, r, {rv('vfmv_v_f', L)}({c}, vl), vl);"
        for c in _EXP_C[1:])
    return f"""static inline {v} tx_vexp_m{L}({v} x, size_t vl) {{
    x = {rv('vfmax_vf', L)}(x, {_EXP_LO}, vl);
    x = {rv('vfmin_vf', L)}(x, {_EXP_HI}, vl);
    {v} t = {rv('vfmadd_vf', L)}(x, 1.44269504088896341f, {rv('vfmv_v_f', L)}({_MAGIC}, vl), vl);
    {v} n = {rv('vfsub_vf', L)}(t, {_MAGIC}, vl);
    {v} r = {rv('vfnmsac_vf', L)}(x, 0.693359375f, n, vl);
    r = {rv('vfnmsac_vf', L)}(r, -2.12194440e-4f, n, vl);
    {v} z = {rv('vfmul_vv', L)}(r, r, vl);
    {v} p = {rv('vfmv_v_f', L)}({_EXP_C[0]}, vl);
{steps}
    {v} e = {rv('vfadd_vf', L)}({rv('vfmadd_vv', L)}(p, z, r, vl), 1.0f, vl);
    {vu} bits = __riscv_vreinterpret_v_f32m{L}_u32m{L}(t);
    bits = __riscv_vsll_vx_u32m{L}(__riscv_vadd_vx_u32m{L}(bits, 127u - {_MAGIC_BITS}u, vl),
                                   23, vl);
    {v} s = __riscv_vreinterpret_v_u32m{L}_f32m{L}(bits);
    return {rv('vfmul_vv', L)}(e, s, vl);
}}
"""
