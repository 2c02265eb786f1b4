"""The riscv-sim target end to end: QEMU checks the result, the cycle model times it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tunex.errors import TargetError
from tunex.kernel import register_kernel
from tunex.targets import make_target
from tunex.trial import Config, Status


def _sim(core: str = "x280"):
    try:
        return make_target(f"riscv-sim:{core}?timeout=60")
    except TargetError as e:
        pytest.skip(f"RISC-V toolchain absent ({e})")


pytestmark = pytest.mark.riscv


def test_outcomes_facts_and_determinism():
    register_kernel("toy_axpy", "tests.targets._toy_c:ToyAxpy")
    t = _sim("x280")
    assert t.noisy is False and t.measure_slots is None
    _, wl = t.prepare("toy_axpy", {"N": 1000})
    assert wl.target["device"] == "riscv-sim:x280" and wl.target["vlen"] == 512
    art = t.build(wl, Config(UNROLL=2, mode="ok"))
    assert art.ok and art.facts["code_bytes"] > 0 and "hot_loop_cycles" in art.facts
    a, b = t.measure(art), t.measure(art)
    # -O3 vectorises the loop: at VLEN 512 one iteration does 16 elements
    assert a.status is Status.OK and a.facts["cycles"] > 0 and 1000 // 16 <= a.facts["insns"] < 1000
    assert a.times_ms == b.times_ms and a.facts["cycles"] == b.facts["cycles"]
    assert a.facts["model"] == "llvm-mca-19:sifive-x280"
    assert t.measure(t.build(wl, Config(UNROLL=1, mode="wrong"))).status is Status.WRONG_RESULT
    assert t.measure(t.build(wl, Config(UNROLL=1, mode="crash"))).status is Status.RUNTIME_ERROR
    assert t.build(wl, Config(UNROLL=1, mode="syntax")).status is Status.COMPILE_ERROR


@pytest.mark.parametrize("core", ["x280", "x60"])
def test_wider_lmul_takes_fewer_cycles_for_sgemm(core):
    t = _sim(core)
    space, wl = t.prepare("sgemm", {"M": 32, "N": 64, "K": 32})
    base = space.default().replace(style="rvv", TM=2, TN=1, KU=1, KC=0,
                                   order=("i", "j", "k"))
    cycles = {}
    for lmul in (1, 4):
        c = base.replace(LMUL=lmul)
        assert c in space
        m = t.measure(t.build(wl, c))
        assert m.status is Status.OK, m.error
        cycles[lmul] = m.facts["cycles"]
    assert cycles[4] < cycles[1], cycles


def test_cli_search_on_the_simulator(tmp_path):
    _sim("x280")
    db = tmp_path / "sim.db"
    cmd = [sys.executable, "-m", "tunex.cli", "search", "sgemm", "--target", "riscv-sim:p670",
           "--shape", "M=16,N=24,K=8", "--budget", "6trials", "--db", str(db), "-q",
           "--seed", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["trials"] == 6 and out["best_ms"] > 0
    # the winner against the kernel's plain C at -O3, side by side: on the (deterministic)
    # cycle model the tuned time is the best's own, and the baseline is a separate build
    vs = out["baseline"]
    assert vs["tuned_ms"] == pytest.approx(out["best_ms"], rel=1e-9)
    assert vs["baseline_ms"] > 0 and vs["speedup"] == pytest.approx(
        vs["baseline_ms"] / vs["tuned_ms"])
    assert vs["cycles"]["baseline"] != vs["cycles"]["tuned"]
    export = subprocess.run([sys.executable, "-m", "tunex.cli", "db", "export", "--db", str(db),
                             "--format", "jsonl"], capture_output=True, text=True, timeout=60)
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    space, _ = make_target("riscv-sim:p670").prepare("sgemm", {"M": 16, "N": 24, "K": 8})
    default = json.loads(json.dumps(space.default().to_dict()))  # always measured
    assert any(r["config"] == default for r in rows), (default, [r["config"] for r in rows])
    wrong = subprocess.run([sys.executable, "-m", "tunex.cli", "search", "softmax", "--target",
                            "riscv-sim:x280", "--shape", "M=4,N=4", "--db", str(db)],
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "--target triton_gpu" in wrong.stderr


def test_a_missing_tool_is_one_line_naming_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("TUNEX_QEMU", str(tmp_path / "no-qemu"))
    with pytest.raises(TargetError, match=r"install-riscv\.sh") as e:
        make_target("riscv-sim:x280")
    assert "\n" not in str(e.value)
    with pytest.raises(TargetError, match="choose one of"):
        make_target("riscv-sim:c910")


def test_a_helper_that_is_not_inlined_is_counted():
    # the work of a helper the compiler did not inline is the kernel's work too, not a config
    # that looks 10000x faster; one that is not `static` (extern) was counted as 3 cycles
    register_kernel("toy_helper", "tests.targets._toy_c:ToyHelper")
    t = _sim("x280")
    _, wl = t.prepare("toy_helper", {"N": 10_000})
    inlined, *called = (t.measure(t.build(wl, Config(inline=i)))
                        for i in ("always", "never", "extern"))
    for c in called:
        assert inlined.status is Status.OK and c.status is Status.OK, c.error
        assert 0.8 < c.facts["cycles"] / inlined.facts["cycles"] < 1.25, (
            inlined.facts, c.facts)
        assert c.facts["vector_insns"] == inlined.facts["vector_insns"] > 0
