"""The C kernels of kernels/rvv (sgemm, softmax_c, conv2d): spaces, rendering, correctness.

Three tiers, by what the machine has:

- always: the spaces bind for every RVV core's facts and the host's, defaults are valid,
  rendering is deterministic and names the config's LMUL types, constraints hold;
- a C compiler (clang-19 or cc): the portable ``vec`` form and the baselines, built and
  checked by the ``cpu`` target at odd and ordinary sizes, and a broken render is caught;
- ``riscv`` (clang-19 and qemu-riscv64): both styles cross-compiled for x280 (VLEN 512) and
  p670 (VLEN 128) and checked under QEMU at odd sizes. The helper here compiles and runs
  directly; the ``riscv-sim`` target does the same with a cycle model.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tunex.kernel import CKernel, Isa, get_kernel
from tunex.space import Space
from tunex.targets._c import HARNESS, read_outputs, write_inputs
from tunex.targets.cpu import host_isa
from tunex.trial import Config, Status

KERNELS = ("sgemm", "softmax_c", "conv2d")
#: An odd problem (every tail taken) and an ordinary one per kernel.
ODD = {"sgemm": {"M": 37, "N": 53, "K": 29}, "softmax_c": {"M": 7, "N": 203},
       "conv2d": {"C": 5, "F": 7, "H": 9, "W": 37}}
NORMAL = {"sgemm": {"M": 64, "N": 128, "K": 96}, "softmax_c": {"M": 16, "N": 512},
          "conv2d": {"C": 16, "F": 16, "H": 18, "W": 34}}
#: The size each space is sized for in the docstrings.
TYPICAL = {"sgemm": {"M": 256, "N": 256, "K": 256}, "softmax_c": {"M": 256, "N": 256},
           "conv2d": {"C": 32, "F": 32, "H": 66, "W": 66}}
CORES = {"x60": (Isa("x60", "riscv64", True, 256, 32), "spacemit-x60"),
         "x280": (Isa("x280", "riscv64", True, 512, 32), "sifive-x280"),
         "p670": (Isa("p670", "riscv64", True, 128, 32), "sifive-p670")}


def registers(name: str, c: Mapping[str, Any]) -> int:
    """Vector registers a config's tile needs (what the register constraint bounds)."""
    lmul = c["LMUL"]
    if name == "sgemm":
        return (c["TM"] * c["TN"] + c["TN"]) * lmul
    if name == "conv2d":
        return (c["FT"] * c["WT"] + c["WT"]) * lmul
    return c["ROWS"] * c["U"] * lmul * 4


def bound(name: str, problem: Mapping[str, Any], isa: Isa) -> tuple[CKernel, Space]:
    k = get_kernel(name)
    assert isinstance(k, CKernel)
    return k, k.bind(k.space(), problem, isa.facts())


def every_isa() -> list[Isa]:
    return [isa for isa, _ in CORES.values()] + [host_isa()]


# -- no toolchain needed ------------------------------------------------------------------------


@pytest.mark.parametrize("name", KERNELS)
def test_spaces_bind_on_every_core_and_the_host_with_valid_defaults(name):
    for isa in every_isa():
        for problem in (ODD[name], NORMAL[name], TYPICAL[name]):
            _, space = bound(name, problem, isa)
            declared = Config({p.name: p.default for p in space.params})
            default = space.default()
            assert default in space
            changed = {n for n in declared if declared[n] != default[n]}
            # where the declared tile fits (the problem and the ISA's registers: a host with
            # 16 vector registers, AVX2's, has room for fewer accumulators), only the style
            # may move
            fits = declared.replace(style=default["style"]) in space
            if problem is not ODD[name] and fits:
                assert changed <= ({"style"} if not isa.rvv else set()), (isa, changed)
            elif problem is not ODD[name]:
                assert not isa.rvv and isa.vregs < 32, (isa, changed)  # only a small host
            styles = {c["style"] for c in space}
            assert styles == ({"rvv", "vec"} if isa.rvv else {"vec"})
    # the recorded spaces stay exhaustively measurable (~1 s a point)
    _, space = bound(name, TYPICAL[name], CORES["x280"][0])
    assert 100 <= space.size <= 2000, space.size


@pytest.mark.parametrize("name", KERNELS)
def test_render_is_deterministic_and_uses_the_configs_lmul(name):
    for isa in (CORES["x280"][0], CORES["p670"][0], host_isa()):
        k, space = bound(name, ODD[name], isa)
        for c in space.sample(20, rng=0):
            text = k.render(c, ODD[name], isa)
            assert text == k.render(Config(c.to_dict()), dict(ODD[name]), isa)
            assert "void tx_kernel(float *const *buf, const long *dim)" in text
            if c["style"] == "rvv":
                assert "#include <riscv_vector.h>" in text
                assert f"vfloat32m{c['LMUL']}_t" in text
                assert f"__riscv_vsetvl_e32m{c['LMUL']}" in text
            else:
                assert "riscv_vector.h" not in text
                width = (f"vectorize_width({2 * c['LMUL']}, scalable)" if isa.rvv
                         else f"vectorize_width({c['LMUL'] * isa.lanes()})")
                assert width in text


@pytest.mark.parametrize("name", KERNELS)
def test_constraints_hold_for_every_point(name):
    for isa in every_isa():
        _, space = bound(name, TYPICAL[name], isa)
        for c in space:
            assert registers(name, c) <= isa.vregs
            assert c["style"] == "vec" or isa.rvv


def test_rvv_style_is_refused_where_there_is_no_rvv():
    k, space = bound("sgemm", ODD["sgemm"], CORES["x280"][0])
    rvv = next(c for c in space if c["style"] == "rvv")
    with pytest.raises(ValueError, match="RVV"):
        k.render(rvv, ODD["sgemm"], host_isa())


def test_references_and_counts():
    k = get_kernel("conv2d")
    assert isinstance(k, CKernel)
    p = {"C": 2, "F": 3, "H": 5, "W": 6}
    inputs = k.make_inputs(p)
    x, w = inputs["x"].astype(np.float64), inputs["w"].astype(np.float64)
    (y,) = k.reference(inputs, p)
    want = np.zeros((3, 3, 4))
    for f in range(3):
        for h in range(3):
            for j in range(4):
                want[f, h, j] = (w[f] * x[:, h:h + 3, j:j + 3]).sum()
    np.testing.assert_allclose(y, want)
    s = get_kernel("softmax_c")
    assert isinstance(s, CKernel)
    (ys,) = s.reference(s.make_inputs({"M": 3, "N": 9}), {"M": 3, "N": 9})
    np.testing.assert_allclose(ys.sum(axis=1), 1.0)
    assert get_kernel("sgemm").flops({"M": 2, "N": 3, "K": 4}) == 48
    assert get_kernel("sgemm").bytes({"M": 2, "N": 3, "K": 4}) == 4 * (8 + 12 + 6)


# -- the host's C compiler: the vec form through the cpu target ----------------------------------

needs_cc = pytest.mark.skipif(shutil.which("clang-19") is None and shutil.which("cc") is None,
                              reason="no C compiler (clang-19 or cc)")


@pytest.fixture(scope="module")
def cpu():
    from tunex.targets import make_target

    return make_target("cpu?repeats=2&warmup=0&flush_kb=0")


def measure_all(target, workload, configs, sources=None):
    """Build (two at a time) and measure ``configs``; ``sources`` overrides the rendering."""
    def build(i):
        if sources is not None:
            return target.build_source(workload, configs[i], sources[i])
        return target.build(workload, configs[i])

    with ThreadPoolExecutor(2) as pool:
        artifacts = list(pool.map(build, range(len(configs))))
    return [target.measure(a) for a in artifacts]


@needs_cc
@pytest.mark.parametrize("name", KERNELS)
def test_vec_configs_and_the_baseline_are_right_on_the_host(cpu, name):
    for problem, n in ((ODD[name], 15), (NORMAL[name], 5)):
        space, wl = cpu.prepare(name, problem)
        k = cpu.kernel_of(name)
        configs = [*space.sample(n, rng=1), Config(baseline=1)]
        sources = [k.render(c, problem, cpu.isa) for c in configs[:-1]]
        sources.append(k.baseline(problem, cpu.isa))
        for c, m in zip(configs, measure_all(cpu, wl, configs, sources)):
            assert m.status is Status.OK, (name, problem, dict(c), m.error)


@needs_cc
def test_a_broken_render_is_a_wrong_result(cpu, monkeypatch):
    k = get_kernel("sgemm")
    render = type(k).render

    def broken(self, config, problem, isa):
        text = render(self, config, problem, isa)
        assert "+= a0 * brow[jj]" in text
        return text.replace("+= a0 * brow[jj]", "-= a0 * brow[jj]")

    monkeypatch.setattr(type(k), "render", broken)
    space, wl = cpu.prepare("sgemm", ODD["sgemm"])
    m = cpu.measure(cpu.build(wl, space.default()))
    assert m.status is Status.WRONG_RESULT and "C:" in m.error


# -- RVV under QEMU ------------------------------------------------------------------------------

needs_riscv = [
    pytest.mark.riscv,
    pytest.mark.skipif(shutil.which("clang-19") is None or shutil.which("qemu-riscv64") is None,
                       reason="needs clang-19 and qemu-riscv64 (scripts/install-riscv.sh)"),
]


def cross_run(kernel: CKernel, problem: Mapping[str, Any], source: str, core: str) -> str | None:
    """Compile ``source`` with the harness for ``core``, run it once under QEMU on the
    kernel's inputs: None when the outputs match the reference, else what went wrong."""
    isa, mcpu = CORES[core]
    with tempfile.TemporaryDirectory(prefix="tunex-rvv-") as tmp:
        d = Path(tmp)
        (d / "kernel.c").write_text(source)
        cc = subprocess.run(
            ["clang-19", "--target=riscv64-linux-gnu", "-march=rv64gcv", f"-mcpu={mcpu}", "-O3",
             "-static", "-fuse-ld=lld", str(d / "kernel.c"), str(HARNESS), "-o",
             str(d / "kernel"), "-lm"], capture_output=True, text=True, timeout=120)
        if cc.returncode:
            return f"compile error: {cc.stderr[-1500:]}"
        inputs = kernel.make_inputs(problem)
        write_inputs(d / "in.bin", kernel, problem, inputs)
        run = subprocess.run(
            ["qemu-riscv64", "-cpu", f"rv64,v=true,vlen={isa.vlen}", str(d / "kernel"),
             "in.bin", "out.bin", "1", "0", "0"], cwd=d, capture_output=True, text=True,
            timeout=120)
        if run.returncode or "tx_done" not in run.stdout:
            return f"run failed ({run.returncode}): {run.stderr[-1500:]}"
        got = read_outputs(d / "out.bin", kernel, problem)
    return kernel.check(got, kernel.reference(inputs, problem))


@pytest.fixture(scope="module")
def cross_toolchain_works():
    src = "int main(void) { return 0; }\n"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "t.c").write_text(src)
        done = subprocess.run(["clang-19", "--target=riscv64-linux-gnu", "-march=rv64gcv",
                               "-static", "-fuse-ld=lld", "t.c", "-o", "t"], cwd=tmp,
                              capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"clang-19 cannot link for riscv64 (no cross libc?): {done.stderr[-300:]}")


@pytest.mark.parametrize("core", ["x280", "p670"])
@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("_", [pytest.param(None, marks=needs_riscv)])
def test_both_styles_are_right_under_qemu(name, core, _, cross_toolchain_works):
    isa = CORES[core][0]
    problem = ODD[name]
    k, space = bound(name, problem, isa)
    picked = space.sample(80, rng=7)
    configs = ([c for c in picked if c["style"] == "rvv"][:6]
               + [c for c in picked if c["style"] == "vec"][:6])
    sources = [k.render(c, problem, isa) for c in configs] + [k.baseline(problem, isa)]
    labels = [dict(c) for c in configs] + ["baseline"]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda s: cross_run(k, problem, s, core), sources))
    wrong = [(label, r) for label, r in zip(labels, results) if r is not None]
    assert not wrong, wrong
    assert len(configs) == 12


def test_sum_of_products_is_checked_against_the_size_of_its_terms() -> None:
    """A float32 matmul summed in another order passes even where an element is near zero;
    one product left out fails."""
    from tunex.kernel import get_kernel

    k = get_kernel("sgemm")
    prob = {"M": 8, "N": 8, "K": 512}
    inputs = k.make_inputs(prob)
    a, b = inputs["A"], inputs["B"]
    (want,) = k.reference(inputs, prob)
    mag = k.magnitude(inputs, prob)
    got = np.zeros((8, 8), np.float32)
    for kk in reversed(range(512)):
        got += np.outer(a[:, kk], b[kk, :])
    assert k.check((got,), (want,), mag) is None
    dropped = got - np.outer(a[:, 5], b[5, :])
    assert "elements off" in (k.check((dropped,), (want,), mag) or "")
