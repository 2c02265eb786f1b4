"""The C-kernel path on the host CPU: render, compile with the harness, run, check, time."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tunex.errors import TargetError
from tunex.kernel import register_kernel
from tunex.targets import make_target
from tunex.targets._c import read_outputs, write_inputs
from tunex.trial import Config, Status

pytestmark = pytest.mark.skipif(shutil.which("clang-19") is None and shutil.which("cc") is None,
                                reason="no C compiler")


@pytest.fixture(scope="module")
def cpu():
    register_kernel("toy_axpy", "tests.targets._toy_c:ToyAxpy")
    return make_target("cpu?repeats=3&warmup=1&flush_kb=64&timeout=10")


def trial(target, workload, **config):
    art = target.build(workload, Config(config))
    return target.measure(art)


def test_every_kind_of_trial_outcome_is_a_status(cpu):
    space, wl = cpu.prepare("toy_axpy", {"N": 1001})
    assert space.size == 20 and wl.kernel == "toy_axpy" and wl.target["vlen"] >= 128
    ok = trial(cpu, wl, UNROLL=4, mode="ok")
    assert ok.status is Status.OK and len(ok.times_ms) == 3 and ok.value > 0
    assert ok.facts["binary_bytes"] > 0 and ok.compile_ms > 0
    wrong = trial(cpu, wl, UNROLL=1, mode="wrong")
    assert wrong.status is Status.WRONG_RESULT and "1 of 1001" in wrong.error
    assert "first at (3,)" in wrong.error
    assert trial(cpu, wl, UNROLL=1, mode="crash").status is Status.RUNTIME_ERROR
    bad = trial(cpu, wl, UNROLL=1, mode="syntax")
    assert bad.status is Status.COMPILE_ERROR and "error" in bad.error


def test_a_hung_kernel_is_a_timeout():
    register_kernel("toy_axpy", "tests.targets._toy_c:ToyAxpy")
    t = make_target("cpu?repeats=1&warmup=0&flush_kb=0&timeout=1.5")
    _, wl = t.prepare("toy_axpy", {"N": 8})
    m = trial(t, wl, UNROLL=1, mode="hang")
    assert m.status is Status.TIMEOUT and "1.5 s" in m.error


def test_a_triton_kernel_is_refused_with_what_to_do(cpu):
    with pytest.raises(TargetError, match="--target triton_gpu"):
        cpu.prepare("softmax", {"M": 4, "N": 4})


def test_input_and_output_files_round_trip(tmp_path):
    from tests.targets._toy_c import ToyAxpy

    k = ToyAxpy()
    x = np.arange(5, dtype=np.float32)
    write_inputs(tmp_path / "in.bin", k, {"N": 5}, {"x": x})
    raw = (tmp_path / "in.bin").read_bytes()
    assert raw[:8] == b"TXIN0001" and raw[-20:] == x.tobytes()
    (tmp_path / "out.bin").write_bytes(x.tobytes())
    (got,) = read_outputs(tmp_path / "out.bin", k, {"N": 5})
    np.testing.assert_array_equal(got, x)
    (tmp_path / "out.bin").write_bytes(x.tobytes()[:-4])
    with pytest.raises(ValueError):
        read_outputs(tmp_path / "out.bin", k, {"N": 5})
