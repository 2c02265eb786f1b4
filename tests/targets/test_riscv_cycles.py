"""The RISC-V cycle estimate: block counts from QEMU's txbb plugin x a per-block cycle model.

Tests marked ``riscv`` build a saxpy under clang-19 and run it under qemu-riscv64 with the plugin
(``scripts/install-riscv.sh``); they skip cleanly where the toolchain is missing. The others parse
text and the shared rvv-bench page, and run anywhere.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tunex.errors import TargetError
from tunex.targets.riscv._cycles import (
    estimate,
    function_ranges,
    parse_disassembly,
    read_counts,
    rvv_bench_table,
    static_facts,
    vtype_map,
)
from tunex.targets.riscv._toolchain import CORES, Toolchain, get_core

SAXPY = r"""
#include <riscv_vector.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void tx_saxpy(size_t n, float a, const float *x, float *y) {
  for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
    vl = __riscv_vsetvl_e32mL(n);
    vfloat32mL_t vx = __riscv_vle32_v_f32mL(x, vl);
    vfloat32mL_t vy = __riscv_vle32_v_f32mL(y, vl);
    __riscv_vse32_v_f32mL(y, __riscv_vfmacc_vf_f32mL(vy, a, vx, vl), vl);
  }
}
int main(int argc, char **argv) {
  size_t n = (size_t)atol(argv[1]);
  float *x = malloc(n * 4), *y = malloc(n * 4);
  for (size_t i = 0; i < n; i++) { x[i] = (float)i; y[i] = 1.0f; }
  tx_saxpy(n, 2.0f, x, y);
  printf("%.1f\n", (double)y[n - 1]);
  return 0;
}
"""
N = 100_000


# --- without the toolchain -----------------------------------------------------------------

def test_read_counts(tmp_path: Path) -> None:
    f = tmp_path / "c.txt"
    f.write_text("0x3029a 1 1\n0x3029c 1 12500\n\n0x302a0 9 12500\n")
    assert read_counts(f) == [(0x3029A, 1, 1), (0x3029C, 1, 12500), (0x302A0, 9, 12500)]
    f.write_text("0x10 garbage\n")
    with pytest.raises(TargetError, match="0xADDR NINSNS COUNT"):
        read_counts(f)
    with pytest.raises(TargetError, match="did not write"):
        read_counts(tmp_path / "missing.txt")


def test_rvv_bench_table_parses_the_shared_page() -> None:
    x60 = rvv_bench_table("spacemit_x60")
    assert len(x60) > 1000
    vadd = x60["vadd.vv v8,v16,v24"]
    assert (vadd["e32m1"], vadd["e32m2"], vadd["e32m4"], vadd["e32m8"]) == (1.0, 2.0, 4.0, 8.0)
    assert "e32mf8" not in vadd  # empty cells are left out
    x280 = rvv_bench_table("sifive_x280")
    assert x280["vfmacc.vv v8,v16,v24"]["e32m8"] > x280["vfmacc.vv v8,v16,v24"]["e32m1"]
    assert not any(row.startswith("vle") for row in x280)  # the X280 page has no memory ops
    with pytest.raises(TargetError, match="TUNEX_RISCV_DATA"):
        rvv_bench_table("no_such_core")


DISASM = """
000000000003029a <tx_f>:
   3029a: c10d         \tbeqz\ta0, 0x302bc <tx_f+0x22>
   3029c: 0d0576d7     \tvsetvli\ta3, a0, e32, m2, ta, ma
   302a0: 0205e407     \tvle32.v\tv8, (a1)
   302a4: 02066487     \tvsetivli\tzero, 4, e16, mf2, ta, ma
   302a8: 00269713     \tvadd.vv\tv8, v8, v8, v0.t
   302ac: 8d15         \tsub\ta0, a0, a3
   302ae: 8f6b0557     \tvsetvl\ta0, a1, a2
   302b2: 0205e407     \tvle32.v\tv8, (a1)
   302b6: f17d         \tbnez\ta0, 0x3029c <tx_f+0x2>
   302b8: 8082         \tret
"""


def test_vtype_tracking_on_a_handwritten_disassembly() -> None:
    insns = parse_disassembly(DISASM)
    assert insns[0x3029A].size == 2 and insns[0x3029C].size == 4
    assert insns[0x302B6].target == 0x3029C and insns[0x302B6].operands == "a0, @T"
    assert insns[0x302A8].is_vector and not insns[0x3029C].is_vector
    vt = vtype_map(insns, [(0x3029A, 0x302BA, "tx_f")])
    assert vt[0x3029C] is None  # before the first vsetvli
    assert vt[0x302A0] == (32, "m2")
    assert vt[0x302A8] == (16, "mf2")
    assert vt[0x302AC] == (16, "mf2")
    assert vt[0x302B2] is None  # vsetvl: vtype from a register, unknown


def test_cores_and_unknown_core() -> None:
    assert set(CORES) == {"x60", "x280", "p670"}
    assert get_core("x280").vlen == 512 and get_core("x60").mca_model is False
    with pytest.raises(TargetError, match="p670, x280, x60"):
        get_core("c910")


def test_missing_tools_name_what_installs_them(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("TUNEX_CLANG", raising=False)
    monkeypatch.delenv("TUNEX_QEMU", raising=False)
    with pytest.raises(TargetError) as e:
        Toolchain.find(need=("mca",))
    assert str(e.value) == ("llvm-mca-19 not found: run scripts/install-riscv.sh "
                            "(or apt-get install llvm-19)")
    with pytest.raises(TargetError, match=r"clang-19 not found.*apt-get install clang-19"):
        Toolchain.find(need=("clang",))
    with pytest.raises(TargetError, match=r"qemu-riscv64 not found.*apt-get install qemu-user"):
        Toolchain.find(need=("qemu",))
    monkeypatch.setenv("TUNEX_CACHE", str(tmp_path))
    monkeypatch.delenv("TUNEX_QEMU_PLUGIN", raising=False)
    with pytest.raises(TargetError, match=r"install-riscv\.sh to build the QEMU plugin"):
        Toolchain.find(need=("plugin",))
    tc = Toolchain.find(need=())
    assert tc.clang is None
    with pytest.raises(TargetError, match="clang-19 not found"):
        tc.cross_compile([tmp_path / "a.c"], tmp_path / "a", get_core("x280"))


# --- with the toolchain --------------------------------------------------------------------

@pytest.fixture(scope="module")
def tc() -> Toolchain:
    try:
        return Toolchain.find(need=("clang", "qemu", "mca", "objdump", "plugin"))
    except TargetError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def runs(tc: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """(core, lmul) -> (binary, ranges, counts) for saxpy over N floats."""
    d = tmp_path_factory.mktemp("saxpy")
    out = {}
    for core_name in ("x280", "x60"):
        core = get_core(core_name)
        for lmul in (1, 8):
            src = d / f"saxpy_m{lmul}.c"
            src.write_text(SAXPY.replace("mL", f"m{lmul}"))
            exe = d / f"saxpy_{core_name}_m{lmul}"
            proc = tc.cross_compile([src], exe, core, timeout=120)
            assert proc.returncode == 0, proc.stderr
            ranges = function_ranges(exe, tc)
            assert [r[2] for r in ranges] == ["tx_saxpy"]
            counts_path = d / f"counts_{core_name}_m{lmul}.txt"
            argv = tc.qemu_argv(core, counts_path, ranges[0][0], ranges[-1][1])
            run = subprocess.run([*argv, str(exe), str(N)], capture_output=True, text=True,
                                 timeout=120, check=False)
            assert run.returncode == 0, run.stderr
            assert run.stdout.strip() == f"{2.0 * (N - 1) + 1:.1f}"
            out[core_name, lmul] = (exe, ranges, read_counts(counts_path))
    return out


@pytest.mark.riscv
@pytest.mark.parametrize("core_name", ["x280", "x60"])
@pytest.mark.parametrize("lmul", [1, 8])
def test_executed_kernel_instructions_match_the_trip_count(runs: dict, tc: Toolchain,
                                                           core_name: str, lmul: int) -> None:
    core = get_core(core_name)
    exe, ranges, counts = runs[core_name, lmul]
    assert all(ranges[0][0] <= vaddr < ranges[0][1] for vaddr, _, _ in counts)
    trips = -(-N // (core.vlen * lmul // 32))  # elements per iteration: VLMAX at e32
    est = estimate(exe, counts, core, tc, ranges)
    # the loop body (vsetvli .. bnez) is 10 instructions; entry and exit add a handful
    assert 10 * trips <= est.insns <= 10 * trips + 10
    assert est.vector_insns == 4 * trips  # 2 loads, fmacc, store (vsetvli is not counted)
    assert est.blocks >= 2


@pytest.mark.riscv
@pytest.mark.parametrize("core_name", ["x280", "x60"])
def test_estimate_is_deterministic_and_falls_with_lmul(runs: dict, tc: Toolchain,
                                                       core_name: str) -> None:
    core = get_core(core_name)

    def cycles(lmul: int):
        exe, ranges, counts = runs[core_name, lmul]
        return estimate(exe, counts, core, tc, ranges)

    m1, again, m8 = cycles(1), cycles(1), cycles(8)
    assert m1 == again
    assert 0 < m8.cycles < m1.cycles
    assert m1.model == ("llvm-mca-19:sifive-x280" if core_name == "x280"
                        else "rvv-bench:spacemit_x60")


@pytest.mark.riscv
def test_static_facts_find_the_saxpy_loop(runs: dict, tc: Toolchain) -> None:
    exe, ranges, _ = runs["x280", 1]
    facts = static_facts(exe, get_core("x280"), tc, ranges)
    assert facts["code_bytes"] == ranges[0][1] - ranges[0][0]
    assert facts["vector_spills"] == 0 and facts["scalar_spills"] == 0
    assert facts["hot_loop_insns"] == 10
    assert facts["hot_loop_cycles"] > 0


PRESSURE = r"""
#include <riscv_vector.h>
#include <stddef.h>
__attribute__((noinline)) void tx_many(size_t n, const float *x, float *y) {
  for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    vfloat32m8_t a = __riscv_vle32_v_f32m8(x, vl), b = __riscv_vle32_v_f32m8(x + 1, vl);
    vfloat32m8_t c = __riscv_vle32_v_f32m8(x + 2, vl), d = __riscv_vle32_v_f32m8(x + 3, vl);
    vfloat32m8_t e = __riscv_vle32_v_f32m8(x + 4, vl);
    vfloat32m8_t r = __riscv_vfmul_vv_f32m8(__riscv_vfadd_vv_f32m8(a, e, vl),
                                            __riscv_vfsub_vv_f32m8(b, d, vl), vl);
    r = __riscv_vfmacc_vv_f32m8(r, c, a, vl);
    r = __riscv_vfmacc_vv_f32m8(r, d, b, vl);
    r = __riscv_vfmacc_vv_f32m8(r, e, c, vl);
    __riscv_vse32_v_f32m8(y, r, vl);
  }
}
int main(void) { return 0; }
"""


@pytest.mark.riscv
def test_static_facts_count_vector_spills(tc: Toolchain, tmp_path: Path) -> None:
    src = tmp_path / "pressure.c"
    src.write_text(PRESSURE)
    core = get_core("x280")
    proc = tc.cross_compile([src], tmp_path / "pressure", core, timeout=120)
    assert proc.returncode == 0, proc.stderr
    exe = tmp_path / "pressure"
    facts = static_facts(exe, core, tc, function_ranges(exe, tc))
    assert facts["vector_spills"] >= 2  # five m8 values live in 32 registers: spill and reload
