"""The C-kernel path on the host CPU: render, compile with the harness, run, check, time."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tunex.errors import ConfigError, SpaceError, TargetError
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
    crash = trial(cpu, wl, UNROLL=1, mode="crash")
    assert crash.status is Status.RUNTIME_ERROR
    assert crash.error.startswith("killed by SIGSEGV (signal 11)")  # not "exit status -11"
    bad = trial(cpu, wl, UNROLL=1, mode="syntax")
    assert bad.status is Status.COMPILE_ERROR and "error" in bad.error


def test_the_winner_is_measured_beside_the_baseline(cpu, monkeypatch):
    _, wl = cpu.prepare("toy_axpy", {"N": 1001})
    calls = []
    measure = type(cpu).measure
    monkeypatch.setattr(type(cpu), "measure",
                        lambda self, a: calls.append(dict(a.config)) or measure(self, a))
    vs = cpu.versus_baseline(wl, Config(UNROLL=4, mode="ok"), rounds=3)
    assert vs["speedup"] == pytest.approx(vs["baseline_ms"] / vs["tuned_ms"])
    # alternately, so drift hits both alike
    assert calls == [{"baseline": "O3"}, {"UNROLL": 4, "mode": "ok"}] * 3
    bad = cpu.versus_baseline(wl, Config(UNROLL=1, mode="crash"))
    assert bad["speedup"] is None and bad["error"].startswith("tuned: runtime_error")


def test_a_baseline_that_raises_goes_unmeasured_and_a_render_without_source_fails(cpu):
    # tunex search measures the baseline once the trials are recorded: a baseline() not
    # written yet stopped it there with a traceback; render() returning None was a build
    # failing as "TypeError: data must be str, not NoneType"
    register_kernel("toy_broken_baseline", "tests.targets._toy_c:ToyBrokenBaseline")
    _, wl = cpu.prepare("toy_broken_baseline", {"N": 64})
    vs = cpu.versus_baseline(wl, Config(UNROLL=1, mode="ok"))
    assert vs["speedup"] is None
    assert re.search(r"baseline\(\) raised NotImplementedError \(_toy_c\.py, line \d+\)",
                     vs["error"]), vs
    art = cpu.build(wl, Config(UNROLL=8, mode="ok"))
    assert art.status is Status.COMPILE_ERROR
    assert art.error == "render: returned a NoneType, not the C source (a str)"
    # a lone surrogate in the source was a runtime_error whose error was a traceback
    kernel = cpu.kernel_of(wl.kernel)
    kernel.render = lambda *a: "// \udcff\n"  # type: ignore[method-assign]
    try:
        art = cpu.build(wl, Config(UNROLL=8, mode="ok"))
    finally:
        del kernel.render
    assert art.status is Status.COMPILE_ERROR
    assert art.error.startswith("render: returned text that cannot be written as UTF-8 ("), art


def test_a_compiler_failing_without_a_word_says_how_it_ended():
    # the trial's error was empty: a compile_error that said nothing
    register_kernel("toy_axpy", "tests.targets._toy_c:ToyAxpy")
    t = make_target(f"cpu?cc={shutil.which('false')}")
    _, wl = t.prepare("toy_axpy", {"N": 8})
    art = t.build(wl, Config(UNROLL=1, mode="ok"))
    assert art.status is Status.COMPILE_ERROR
    assert art.error == "the compiler ended with exit status 1"


def test_a_kernel_that_exits_says_so(cpu):
    # "runtime_error: exit status 0" said nothing of what went wrong
    register_kernel("toy_exits", "tests.targets._toy_c:ToyExits")
    _, wl = cpu.prepare("toy_exits", {"N": 8})
    m = trial(cpu, wl, UNROLL=1, mode="ok")
    assert m.status is Status.RUNTIME_ERROR
    assert m.error.startswith("exit status 0 before the harness finished (does the kernel "
                              "call exit()?)"), m.error


def test_a_hung_kernel_is_a_timeout():
    register_kernel("toy_axpy", "tests.targets._toy_c:ToyAxpy")
    t = make_target("cpu?repeats=1&warmup=0&flush_kb=0&timeout=1.5")
    _, wl = t.prepare("toy_axpy", {"N": 8})
    m = trial(t, wl, UNROLL=1, mode="hang")
    assert m.status is Status.TIMEOUT and "1.5 s" in m.error


def _kernel_processes() -> set[int]:
    out = set()
    for pid in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if pid.isdigit() and b"kernel.bin" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.add(int(pid))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("workers", [0, 1])
def test_what_a_kernel_forks_ends_with_it(tmp_path, workers):
    """A forked child that outlives the kernel neither runs on after the trial (a CPU spent
    until someone kills it) nor holds the run open into a timeout; where the measuring worker
    is killed for running past its deadline (a hung kernel), its binary's forks die too."""
    from tunex import Database, Tuner
    from tunex.cluster import InlineExecutor, LocalExecutor, LocalOptions

    before = _kernel_processes()
    # in-process, a hang ends at the target's timeout; in a worker, at the executor's deadline
    t = make_target(f"cpu?repeats=1&warmup=0&flush_kb=0&timeout={20 if workers else 4}")
    # named by module, so the worker processes find it too
    space, wl = t.prepare("tests.targets._toy_c:ToyForks", {"N": 64})
    executor = (LocalExecutor(t, LocalOptions(build_workers=1, measure_timeout=4.0,
                                              hang_factor=None))
                if workers else InlineExecutor(t))
    t0 = time.monotonic()
    with Database(str(tmp_path / "f.db")) as db, executor:
        Tuner(t, space, workload=wl, db=db, strategy="random", executor=executor, seed=0,
              budget="2trials", remeasure=0,
              first=[Config(UNROLL=1, mode="ok"), Config(UNROLL=1, mode="hang")]).run()
        statuses = {m.config["mode"]: m.status for m in db.measurements(wl)}
    assert statuses == {"ok": Status.OK, "hang": Status.TIMEOUT}
    assert time.monotonic() - t0 < 18  # the hang ended at 4 s, not at 20
    time.sleep(0.5)
    assert _kernel_processes() - before == set()


@pytest.mark.parametrize("kernel, says", [
    ("ToyBareReference", r"reference\(\) must return a tuple of 1 array \(y\)"),
    # a dict was a runtime_error per config: "float() argument must be ... not 'dict'"
    ("ToyDictReference", r"reference\(\) must return a tuple of 1 array \(y\).*not a dict"),
    ("ToyIntShapes", r"shapes\(\) must give x a tuple of sizes"),
    # these were a runtime_error per config (the budget spent on them), or a traceback
    ("ToyRaisingReference", r"reference\(\) raised KeyError: 'M' \(_toy_c\.py, line \d+\)"),
    ("ToyShortInputs", r"make_inputs\(\) gave x an array shaped \(3,\); .* here \(8,\)"),
    ("ToyNoSpace", r"space\(\) must return a tunex Space, not NoneType \(is its `return`"),
    # every trial failed on "output file holds 256 bytes more than the outputs"
    ("ToyOneBufferTwice", r"buffer 'x' is named twice in inputs and outputs"),
    # every config was recorded ok: nothing of a zero-length output is compared
    ("ToyEmptyOutput", r"shapes\(\) gives output 'y' no elements \(\(0,\)\)"),
    # "needs the sizes  (and optionally dtype); unknown ['N'], e.g. --shape "
    ("ToyNoDims", r"toy_no_dims takes no sizes \(only optionally dtype\); unknown \['N'\]"),
])
def test_a_kernel_with_a_malformed_reference_or_shapes_stops_with_what_to_fix(kernel, says):
    # a slip in the kernel's Python, not in a config: every trial would fail alike (as a
    # wrong_result blaming the C, or a TypeError), so it is an error, not a failed trial
    from tests.targets import _toy_c
    from tunex import Database, Tuner

    name = getattr(_toy_c, kernel).name
    register_kernel(name, f"tests.targets._toy_c:{kernel}")
    t = make_target("cpu?repeats=1&warmup=0&flush_kb=0&timeout=10")
    with pytest.raises((TargetError, SpaceError, ConfigError), match=says):
        space, wl = t.prepare(name, {"N": 8})
        trial(t, wl, UNROLL=1, mode="ok")
    if kernel == "ToyBareReference":
        with Database(":memory:") as db, pytest.raises(TargetError, match=says):
            Tuner(t, space, workload=wl, db=db, budget="3trials").run()


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


USER_KERNEL = '''
import numpy as np

from tunex.kernel import CKernel
from tunex.space import Pow2, Space


class Triple(CKernel):
    """y = 3 x, a user's kernel outside kernels/."""

    name = "user_triple"
    dims = ("N",)
    inputs = ("x",)
    outputs = ("y",)

    def space(self):
        return Space([Pow2("UNROLL", 1, 8, default=2)], ["UNROLL <= N"], problem=["N"],
                     name="user_triple")

    def shapes(self, problem):
        return {"x": (problem["N"],), "y": (problem["N"],)}

    def reference(self, inputs, problem):
        return (3.0 * inputs["x"].astype(np.float64),)

    def render(self, config, problem, isa):
        return f"""
void tx_kernel(float *const *buf, const long *dim) {{
    const float *x = buf[0]; float *y = buf[1]; long n = dim[0];
    #pragma clang loop unroll_count({config["UNROLL"]})
    for (long i = 0; i < n; i++) y[i] = 3.0f * x[i];
}}
"""

    def baseline(self, problem, isa):
        return self.render({"UNROLL": 1}, problem, isa)

    def flops(self, problem):
        return problem["N"]

    def bytes(self, problem):
        return 8.0 * problem["N"]
'''


def test_a_users_kernel_file_is_searched_by_its_path(tmp_path):
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "triple.py").write_text(USER_KERNEL)
    db = tmp_path / "t.db"
    env = {k: v for k, v in os.environ.items() if k != "TUNEX_KERNELS"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root  # tunex itself; the kernel's folder is on no path
    cmd = [sys.executable, "-m", "tunex.cli", "search", "mine/triple.py:Triple", "--target",
           "cpu?repeats=3&warmup=1&flush_kb=64", "--shape", "N=4096", "--budget", "4trials",
           "--workers", "2", "--db", str(db), "-q"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["kernel"] == "user_triple" and out["trials"] == 4 and out["failures"] == {}
    # measured in worker processes, which found the kernel by its name
    export = subprocess.run([sys.executable, "-m", "tunex.cli", "db", "export", "--db", str(db),
                             "--format", "jsonl"], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env=env)
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), rows
    assert {r["config"]["UNROLL"] for r in rows} == {1, 2, 4, 8}
    bad = subprocess.run([sys.executable, "-m", "tunex.cli", "search", "mine/nope.py:Triple",
                          "--target", "cpu", "--shape", "N=64", "--db", str(db)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "does not exist" in bad.stderr
    assert "Traceback" not in bad.stderr
    (tmp_path / "mine" / "half.py").write_text(USER_KERNEL.split("    def flops")[0])
    half = subprocess.run([sys.executable, "-m", "tunex.cli", "search", "mine/half.py:Triple",
                           "--target", "cpu", "--shape", "N=64", "--db", str(db)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert half.returncode == 2 and "must define bytes, flops" in half.stderr
    nomod = subprocess.run([sys.executable, "-m", "tunex.cli", "search", "nopkg.mod:Triple",
                            "--target", "cpu", "--shape", "N=64", "--db", str(db)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert nomod.returncode == 2 and "PYTHONPATH" in nomod.stderr
    (tmp_path / "mine" / "needs.py").write_text("import numpy\nimport no_such_package_here\n")
    needs = subprocess.run([sys.executable, "-m", "tunex.cli", "search", "mine/needs.py:Triple",
                            "--target", "cpu", "--shape", "N=64", "--db", str(db)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert needs.returncode == 2 and "Traceback" not in needs.stderr
    assert "(line 2): ModuleNotFoundError" in needs.stderr
    assert "no_such_package_here" in needs.stderr
    # a kernel named like a library one would share its trials, best configs and packs
    (tmp_path / "mine" / "clash.py").write_text(
        USER_KERNEL.replace('name = "user_triple"', 'name = "sgemm"'))
    clash = subprocess.run([sys.executable, "-m", "tunex.cli", "search", "mine/clash.py:Triple",
                            "--target", "cpu", "--shape", "N=64", "--db", str(db)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert clash.returncode == 2 and "Traceback" not in clash.stderr
    assert "'sgemm' is taken by kernels.rvv.sgemm:Sgemm" in clash.stderr


TEMPLATE_KERNEL = '''
from pathlib import Path

from mine_base import Base


class Scale(Base):
    """y = 2 x, its C in scale.c beside this file, its space in a base class elsewhere."""

    name = "user_scale"
    sources = ("scale.c",)

    def render(self, config, problem, isa):
        return Path(__file__).with_name("scale.c").read_text()
'''

TEMPLATE_BASE = '''
import numpy as np

from tunex.kernel import CKernel
from tunex.space import Pow2, Space


class Base(CKernel):
    dims = ("N",)
    inputs = ("x",)
    outputs = ("y",)

    def space(self):
        return Space([Pow2("UNROLL", 1, 8)], problem=["N"])

    def shapes(self, problem):
        return {"x": (problem["N"],), "y": (problem["N"],)}

    def reference(self, inputs, problem):
        return (2.0 * inputs["x"].astype(np.float64),)

    def baseline(self, problem, isa):
        return self.render({}, problem, isa)

    def flops(self, problem):
        return problem["N"]

    def bytes(self, problem):
        return 8.0 * problem["N"]
'''


def test_a_kernels_template_file_and_base_class_module_are_in_its_hash(tmp_path, monkeypatch):
    # the workload's kernel hash is what makes tunex forget configs measured with other code:
    # editing the C template a kernel reads, or the base class it inherits, must change it
    import hashlib
    import inspect
    import sys

    from tunex.kernel import get_kernel

    (tmp_path / "scale.c").write_text("void tx_kernel(float *const *b, const long *d) {}\n")
    (tmp_path / "mine_base.py").write_text(TEMPLATE_BASE)
    (tmp_path / "scale.py").write_text(TEMPLATE_KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TUNEX_KERNELS", raising=False)
    cls = type(get_kernel(f"{tmp_path}/scale.py:Scale"))
    first = cls().source_hash
    (tmp_path / "scale.c").write_text("void tx_kernel(float *const *b, const long *d) {;}\n")
    edited = cls().source_hash
    assert edited != first
    (tmp_path / "mine_base.py").write_text(TEMPLATE_BASE + "\n# tiles changed\n")
    assert cls().source_hash not in (first, edited)
    (tmp_path / "scale.c").unlink()
    with pytest.raises(ConfigError, match=r"scale\.c"):
        _ = cls().source_hash
    # a kernel of one module keeps the hash it always had: its module's source
    sgemm = get_kernel("sgemm")
    module = sys.modules[type(sgemm).__module__]
    assert sgemm.source_hash == hashlib.sha256(
        inspect.getsource(module).encode()).hexdigest()[:16]


def test_a_kernel_registered_under_another_name_is_found_by_the_workers(tmp_path):
    # TUNEX_KERNELS="triple=...:Triple" (the README's example) for a class named user_triple:
    # its workloads carry user_triple, which the build workers did not know, so every trial
    # was a compile_error "unknown kernel 'user_triple'"
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "triple.py").write_text(USER_KERNEL)
    db = tmp_path / "t.db"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root, "TUNEX_KERNELS": f"triple={tmp_path}/triple.py:Triple"}
    cmd = [sys.executable, "-m", "tunex.cli", "search", "triple", "--target",
           "cpu?repeats=1&warmup=0&flush_kb=0", "--shape", "N=64", "--budget", "2trials",
           "--workers", "1", "--db", str(db), "-q", "--no-baseline"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["kernel"] == "user_triple" and out["failures"] == {}, out
