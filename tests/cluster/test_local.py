"""The local executor: parallel builds, timeouts for hung builds and kernels, lost workers."""

from __future__ import annotations

import os
import time

import pytest

from tests._data import recorded
from tests.cluster._fake_targets import GateTarget, until
from tunex import Config, Measurement, Status, TargetError, Workload
from tunex.cluster import Activity, HangDeadline, InlineExecutor, LocalExecutor, LocalOptions
from tunex.targets._base import Target
from tunex.targets.replay import ReplayTarget
from tunex.trial import Artifact


class SlowTarget(Target):
    """build: a=1 hangs, a=2 kills its process, a=3 fails; measure: b=1 hangs, b=2 crashes."""

    name = "slow"

    def fingerprint(self):
        return {"device": "cpu"}

    def build(self, workload, config):
        if config["a"] == 1:
            time.sleep(60)
        if config["a"] == 2:
            os._exit(3)
        if config["a"] == 3:
            return Artifact(workload, config, Status.COMPILE_ERROR, error="nope")
        time.sleep(0.2)
        return Artifact(workload, config, payload=os.getpid())

    def measure(self, artifact):
        from tunex.targets._base import DEVICE_LOST

        c = artifact.config
        if c["b"] == 1:
            time.sleep(60)
        if c["b"] == 2:
            os._exit(4)
        if c["b"] == 3:  # what a dead CUDA context looks like to the executor
            return Measurement.failed(c, Status.WORKER_LOST, "context died",
                                      facts={DEVICE_LOST: True, "pid": os.getpid()})
        return Measurement(c, Status.OK, (1.0 + c["a"],),
                           facts={"built_by": artifact.payload, "pid": os.getpid()})


W = Workload("slow")


@pytest.fixture(scope="module")
def executor():
    t = SlowTarget()
    ex = LocalExecutor(t, LocalOptions(build_workers=2, build_timeout=10, measure_timeout=10))
    yield t, ex
    ex.close()


def test_failures_of_every_kind_become_measurements(executor):
    _t, ex = executor
    cases = {Config(a=0, b=0): Status.OK, Config(a=1, b=0): Status.TIMEOUT,
             Config(a=2, b=0): Status.WORKER_LOST, Config(a=3, b=0): Status.COMPILE_ERROR,
             Config(a=4, b=1): Status.TIMEOUT, Config(a=5, b=2): Status.WORKER_LOST,
             Config(a=6, b=0): Status.OK}
    futs = {c: ex.submit(W, c) for c in cases}
    got = {c: f.result(timeout=60) for c, f in futs.items()}
    assert {c: m.status for c, m in got.items()} == cases
    # the executor survives all of it: later trials still run
    assert ex.submit(W, Config(a=7, b=0)).result(timeout=30).ok


def test_a_lost_device_is_reported_as_a_status_and_its_process_replaced(executor):
    _t, ex = executor
    before = ex.submit(W, Config(a=40, b=0)).result(timeout=30)
    lost = ex.submit(W, Config(a=41, b=3)).result(timeout=30)
    after = ex.submit(W, Config(a=42, b=0)).result(timeout=30)
    assert lost.status is Status.WORKER_LOST and lost.error == "context died"
    assert before.facts["pid"] == lost.facts["pid"] != after.facts["pid"]


def test_the_hang_deadline_follows_the_slowest_successful_measurement():
    d = HangDeadline(60, factor=10, floor=5, warmup=3)
    for seconds in (0.2, 1.5):
        d.record(seconds, "w")
        assert d.seconds("w") == 60  # too few measurements to judge by
    d.record(0.1, "w")
    assert d.seconds("w") == 15  # 10x the slowest of three
    d.record(0.3, "w")
    assert d.seconds("w") == 15
    d.record(9.0, "w")
    assert d.seconds("w") == 60  # never above the limit
    fast = HangDeadline(60)
    for _ in range(3):
        fast.record(0.01)
    assert fast.seconds() == 5  # the floor
    assert "taken for hung" in fast.describe(5) and "--measure-timeout" in fast.describe(5)
    assert fast.seconds("another workload") == 60  # each workload has its own yardstick
    fixed = HangDeadline(60, factor=None)
    for _ in range(5):
        fixed.record(0.01)
    assert fixed.seconds() == 60 and fixed.describe(60) == "measurement exceeded 60 s"
    with pytest.raises(ValueError, match="at least 1"):
        HangDeadline(60, factor=0.5)
    with pytest.raises(ValueError, match="above 0"):
        HangDeadline(0)


def test_a_hung_kernel_is_cut_short_once_measurements_show_what_one_takes():
    ex = LocalExecutor(SlowTarget(), LocalOptions(build_workers=1, build_timeout=30,
                                                  measure_timeout=50))
    try:
        assert all(ex.submit(W, Config(a=50 + i, b=0)).result(timeout=60).ok for i in range(3))
        t0 = time.perf_counter()
        hung = ex.submit(W, Config(a=60, b=1)).result(timeout=60)
        assert hung.status is Status.TIMEOUT and "taken for hung" in (hung.error or "")
        assert time.perf_counter() - t0 < 20  # the 5 s floor and a build, not 50 s
        assert ex.submit(W, Config(a=61, b=0)).result(timeout=60).ok  # the device came back
    finally:
        ex.close()


class SpawningTarget(SlowTarget):
    """measure: starts a child process that never ends (a hung kernel's simulator) and waits."""

    def __init__(self, pidfile):
        self.pidfile = str(pidfile)

    def measure(self, artifact):
        import subprocess

        child = subprocess.Popen(["sleep", "300"])
        with open(self.pidfile, "w") as f:
            f.write(str(child.pid))
        child.wait()
        return Measurement(artifact.config, Status.OK, (1.0,))


def test_a_hung_measurement_is_killed_with_the_processes_it_started(tmp_path):
    pidfile = tmp_path / "child.pid"
    ex = LocalExecutor(SpawningTarget(pidfile), LocalOptions(build_workers=1, build_timeout=30,
                                                             measure_timeout=2))
    try:
        m = ex.submit(W, Config(a=0, b=0)).result(timeout=60)
        assert m.status is Status.TIMEOUT
        pid = int(pidfile.read_text())

        def gone() -> bool:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().split()[2] == "Z"  # killed, not yet reaped
            except FileNotFoundError:
                return True

        until(gone, "the hung measurement's child is killed too", timeout=10)
    finally:
        ex.close()


def test_a_hang_that_began_before_the_yardstick_ends_once_there_is_one():
    ex = LocalExecutor(SlowTarget(), LocalOptions(build_workers=1, measure_workers=2,
                                                  build_timeout=30, measure_timeout=50))
    try:
        t0 = time.perf_counter()
        hung = ex.submit(W, Config(a=70, b=1))  # hangs from the start, under the 50 s limit
        assert all(ex.submit(W, Config(a=71 + i, b=0)).result(timeout=60).ok for i in range(3))
        assert hung.result(timeout=60).status is Status.TIMEOUT
        assert time.perf_counter() - t0 < 25  # the 5 s floor after three successes, not 50 s
    finally:
        ex.close()


def test_builds_run_in_parallel_processes(executor):
    _t, ex = executor
    futs = [ex.submit(W, Config(a=10 + i, b=0)) for i in range(6)]
    ms = [f.result(timeout=60) for f in futs]
    assert all(m.ok for m in ms)
    assert len({m.facts["built_by"] for m in ms}) == 2  # both build processes were used


def test_inline_executor_propagates_only_target_errors():
    class Broken(SlowTarget):
        def build(self, workload, config):
            raise TargetError("no toolchain: install it")

    fut = InlineExecutor(Broken()).submit(W, Config(a=0, b=0))
    with pytest.raises(TargetError, match="install"):
        fut.result()

    class Raises(SlowTarget):
        def measure(self, artifact):
            raise ValueError("bad launch")

    m = InlineExecutor(Raises()).submit(W, Config(a=0, b=0)).result()
    assert m.status is Status.RUNTIME_ERROR and "bad launch" in (m.error or "")


def test_cancelled_trials_do_not_break_the_executor(executor):
    _t, ex = executor
    futs = [ex.submit(W, Config(a=20 + i, b=0)) for i in range(6)]
    cancelled = [f for f in futs[2:] if f.cancel()]
    assert cancelled  # queued behind the two builders: cancellable
    later = [ex.submit(W, Config(a=30 + i, b=0)) for i in range(3)]
    assert all(f.result(timeout=60).ok for f in later + futs[:2])


def test_activity_counts_builds_and_measurements_in_flight(tmp_path):
    ex = LocalExecutor(GateTarget(tmp_path), LocalOptions(build_workers=2, measure_workers=2,
                                                          build_timeout=60, measure_timeout=60))
    idle = {"device0": 0, "device1": 0}
    try:
        assert ex.activity() == Activity(0, 0, 0, idle)
        futs = [ex.submit(W, Config(a=i)) for i in range(5)]
        until(lambda: ex.activity() == Activity(3, 2, 0, idle), "2 builds running, 3 queued")
        assert futs[4].cancel()  # queued: it will never build
        assert ex.activity() == Activity(2, 2, 0, idle)
        (tmp_path / "build").touch()
        busy = Activity(0, 0, 2, {"device0": 1, "device1": 1})
        until(lambda: ex.activity() == busy, "both devices measuring, 2 built waiting")
        assert str(busy) == "builds: 0 queued, 0 running; measuring: device0 1, device1 1, " \
                            "2 built waiting"
        (tmp_path / "measure").touch()
        assert all(f.result(timeout=60).ok for f in futs[:4])
        until(lambda: ex.activity() == Activity(0, 0, 0, idle), "all idle again")
    finally:
        ex.close()


def test_builders_keep_building_while_built_trials_wait_for_the_device(tmp_path):
    """A trial built and waiting for a device holds no build worker: the tuner starts the
    next builds (up to a second batch waiting), so builders never idle behind the device."""
    import threading

    from tunex import Database, Tuner
    from tunex.space import Int, Space

    (tmp_path / "build").touch()  # builds are instant; measurements wait for the gate
    target = GateTarget(tmp_path)
    ex = LocalExecutor(target, LocalOptions(build_workers=2, measure_workers=1,
                                            build_timeout=60, measure_timeout=60))
    assert ex.slots == 3
    space = Space([Int("a", 0, 39)])
    out = {}
    with Database("sqlite://") as db:
        tuner = Tuner(target, space, workload=W, db=db, executor=ex, strategy="random",
                      seed=0, budget="20trials")
        th = threading.Thread(target=lambda: out.setdefault("r", tuner.run()), daemon=True)
        th.start()
        try:
            # 3 slots, and 3 more for the built ones waiting: 1 measuring + 5 queued
            until(lambda: ex.activity() == Activity(0, 0, 5, {"device": 1}),
                  "a second batch built while the device is busy")
            time.sleep(0.3)
            assert ex.activity() == Activity(0, 0, 5, {"device": 1})  # and no more than that
            (tmp_path / "measure").touch()
            th.join(60)
        finally:
            (tmp_path / "measure").touch()
            ex.close()
    assert out["r"].new_trials == 20 and out["r"].best is not None
    assert ex.wait([], None) == set()  # nothing to wait for: at once (a tuner waiting on
    # what concurrent searches measure has no trial of its own in flight)


def test_the_configs_given_first_and_the_strategys_fill_one_batch(tmp_path):
    """The kernel's default (given first) does not go out alone: the strategy's proposals
    fill the rest of the batch at once, before any build is done."""
    import threading

    from tunex import Database, Tuner
    from tunex.space import Int, Space

    target = GateTarget(tmp_path)  # builds wait for the gate
    ex = LocalExecutor(target, LocalOptions(build_workers=2, measure_workers=1,
                                            build_timeout=60, measure_timeout=60))
    with Database("sqlite://") as db:
        tuner = Tuner(target, Space([Int("a", 0, 39)]), workload=W, db=db, executor=ex,
                      strategy="random", seed=0, budget="6trials", first=[Config(a=7)])
        th = threading.Thread(target=tuner.run, daemon=True)
        th.start()
        try:
            until(lambda: ex.activity() == Activity(1, 2, 0, {"device": 0}),
                  "a whole batch in flight (2 building, 1 queued)")
        finally:
            (tmp_path / "build").touch()
            (tmp_path / "measure").touch()
            th.join(60)
            ex.close()
        assert Config(a=7) in {m.config for m in db.measurements(W)}


class CallerTarget(Target):
    """Builds anywhere (reports the process); measures, reporting the measuring thread."""

    name = "caller"

    def fingerprint(self):
        return {"device": "cpu"}

    def build(self, workload, config):
        if config["a"] == 3:
            return Artifact(workload, config, Status.COMPILE_ERROR, error="nope")
        return Artifact(workload, config, payload=os.getpid())

    def measure(self, artifact):
        import threading

        return Measurement(artifact.config, Status.OK, (1.0,),
                           facts={"built_by": artifact.payload,
                                  "thread": threading.get_ident()})


def test_caller_executor_builds_in_the_pool_and_measures_in_the_waiting_thread():
    import threading

    from tunex.cluster import BuildPool, CallerExecutor

    t = CallerTarget()
    pool = BuildPool(2, timeout=30)
    try:
        for _ in range(2):  # the pool outlives an executor: a second one reuses its processes
            ex = CallerExecutor(t, pool)
            assert ex.slots == 3
            futs = [ex.submit(W, Config(a=a, b=0)) for a in range(5)]
            # built in the pool, nothing measured before the caller waits (a=3 fails to build)
            until(lambda ex=ex: ex.activity() == Activity(0, 0, 4, {"caller": 0}), "4 built")
            pending = set(futs)
            while pending:
                pending -= ex.wait(pending, 30)
            ms = [f.result() for f in futs]
            assert ms[3].status is Status.COMPILE_ERROR and ms[3].error == "nope"
            ok = [m for i, m in enumerate(ms) if i != 3]
            assert {m.facts["thread"] for m in ok} == {threading.get_ident()}
            assert {m.facts["built_by"] for m in ok} <= {w.proc.pid for w in pool.workers}
            assert os.getpid() not in {m.facts["built_by"] for m in ok}
    finally:
        pool.close()


def test_inline_and_caller_executors_say_what_the_calling_thread_does():
    from tunex.cluster import CallerExecutor

    seen: list[tuple[str, Activity | None]] = []

    class Watched(CallerTarget):
        def build(self, workload, config):
            seen.append(("build", ex.activity()))
            return super().build(workload, config)

        def measure(self, artifact):
            seen.append(("measure", ex.activity()))
            return super().measure(artifact)

    for make, name in ((InlineExecutor, "inline"), (CallerExecutor, "caller")):
        seen.clear()
        ex = make(Watched())
        fut = ex.submit(W, Config(a=0, b=0))
        ex.wait([fut])
        assert fut.result().ok
        assert seen == [("build", Activity(0, 1, 0, {name: 0})),
                        ("measure", Activity(0, 0, 0, {name: 1}))]
        assert ex.activity() == Activity(0, 0, 0, {name: 0})


def test_caller_executor_builds_inline_without_a_pool():
    from tunex.cluster import CallerExecutor

    t = CallerTarget()
    ex = CallerExecutor(t)
    fut = ex.submit(W, Config(a=0, b=0))
    assert not fut.done()  # measured only when waited for, in the waiting thread
    assert ex.wait([fut]) == {fut} and fut.result().facts["built_by"] == os.getpid()


SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
with open({marks!r}, "a") as f:  # runs again in every spawned process that imports this script
    f.write(str(os.getpid()) + "\\n")
from tests.cluster.test_local import CallerTarget
from tunex.cluster import BuildPool
from tunex.trial import Config, Workload
if __name__ == "__main__":
    pool = BuildPool(1, timeout=60, import_main={import_main})
    art = pool.submit("k", CallerTarget(), Workload("w"), Config(a=0, b=0)).result(60)
    pool.close()
    print(art.payload != os.getpid())
"""


def _run_script(tmp_path, template: str, **fields):
    """Write ``template`` (given ``root``, ``marks`` and ``fields``) as a user's script, run
    it in a fresh interpreter; its result and the file where each run of it left its pid."""
    import subprocess
    import sys
    from pathlib import Path

    marks = tmp_path / "marks"
    script = tmp_path / "user_script.py"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(template.format(root=root, marks=str(marks), **fields))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    return done, marks


@pytest.mark.parametrize("import_main", [True, False])
def test_the_decorators_build_pool_does_not_run_the_users_script_again(tmp_path, import_main):
    done, marks = _run_script(tmp_path, SCRIPT, import_main=import_main)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert len(marks.read_text().split()) == (2 if import_main else 1)


UNGUARDED = """
import os, sys
sys.path.insert(0, {root!r})
with open({marks!r}, "a") as f:
    f.write(str(os.getpid()) + "\\n")
from tests._data import recorded
from tunex import Tuner
from tunex.cluster import LocalExecutor, LocalOptions
from tunex.targets.replay import ReplayTarget

class MyReplay(ReplayTarget):  # defined in the script: workers must import it to unpickle it
    pass

def run(t):
    ex = LocalExecutor(t, LocalOptions(build_workers=1, measure_workers=1))
    res = Tuner(t, t.space, executor=ex, budget="4trials", strategy="random", seed=0,
                remeasure=0).run()
    ex.close()
    print(res.trials)

{body}
"""


@pytest.mark.parametrize("body, runs", [
    # no `if __name__ == "__main__":` guard, as in a quick script
    ('run(ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz")))', 1),
    # a target of the script's own: its workers import the script, so the guard is needed
    ('if __name__ == "__main__":\n    run(MyReplay(recorded("pnpoly/RTX_2080_Ti.json.gz")))',
     3),
])
def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path, body, runs):
    """Such a script hung: each worker process imported it, ran it to the executor, died of
    multiprocessing's bootstrapping error and was started again, forever. Now the workers
    import the script only where the target is defined in it."""
    done, marks = _run_script(tmp_path, UNGUARDED, body=body)
    assert done.returncode == 0 and done.stdout.strip() == "4", done.stderr[-2000:]
    assert len(marks.read_text().split()) == runs  # the user's run (+ one per worker)


def test_a_script_that_starts_its_own_targets_search_unguarded_stops_and_says_why(tmp_path):
    """The one case the workers must import the script (its target is defined there) and it
    has no main guard: each worker runs the script again and dies of multiprocessing's
    bootstrapping error. That hung (the parent blocked writing a large target to a process
    that died before reading it); now the target travels over the worker's connection, a
    process that dies before it is up is started again, and the third such death stops the
    search with what to change."""
    done, _marks = _run_script(tmp_path, UNGUARDED,
                              body='run(MyReplay(recorded("pnpoly/RTX_2080_Ti.json.gz")))')
    assert done.returncode != 0 and done.stdout.strip() == ""
    assert "died 3 times as it started" in done.stderr, done.stderr[-2000:]
    assert 'if __name__ == \"__main__\":' in done.stderr


def test_a_target_a_worker_cannot_load_stops_the_search_with_why():
    """A target that pickles here but cannot be unpickled in a worker (what it refers to is
    not importable there) stops the search with the reason, not a worker restarted forever."""
    from tunex import Tuner
    from tunex.cluster import LocalExecutor, LocalOptions
    from tunex.errors import TargetError

    t = Unloadable(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    ex = LocalExecutor(t, LocalOptions(build_workers=1, measure_workers=1))
    try:
        with pytest.raises(TargetError, match="could not be loaded in a worker process"):
            Tuner(t, t.space, executor=ex, budget="3trials", strategy="random", seed=0,
                  remeasure=0).run()
    finally:
        ex.close()


def _refuse(*_a):
    raise ModuleNotFoundError("No module named 'only_in_the_parent'")


class Unloadable(ReplayTarget):
    """Pickles here; unpickling it anywhere fails, as a target naming a module that only the
    parent process can import would."""

    def __reduce__(self):
        return (_refuse, ())


class EnvBuilder:
    """Builds nothing: reports the worker's environment and what it had imported."""

    def build(self, workload: Workload, config: Config) -> Artifact:
        import sys

        return Artifact(workload, config, Status.OK,
                        payload=(os.environ.get("TUNEX_TEST_WORKER_ENV"),
                                 "tunex.cluster._local" in sys.modules))


def test_workers_come_from_a_fork_server_and_see_the_environment_of_their_start(monkeypatch):
    import multiprocessing as mp

    from tunex.cluster import BuildPool, worker_context

    if "forkserver" not in mp.get_all_start_methods():
        pytest.skip("no fork server on this platform")
    assert worker_context().get_start_method() == "forkserver"
    first = BuildPool(1, timeout=60)  # the server starts (if no earlier test started it)
    try:
        assert first.submit("e", EnvBuilder(), W, Config(a=0)).result(60).payload[0] is None
    finally:
        first.close()
    # a fork of a server started earlier would carry the server's environment, not this one
    monkeypatch.setenv("TUNEX_TEST_WORKER_ENV", "set after the server started")
    pool = BuildPool(1, timeout=60)
    try:
        env, preloaded = pool.submit("e", EnvBuilder(), W, Config(a=0)).result(60).payload
        assert env == "set after the server started" and preloaded
    finally:
        pool.close()


def test_a_pool_hands_back_a_config_it_built_without_building_it_again():
    from tunex.cluster import BuildPool

    t = CallerTarget()
    pool = BuildPool(1, timeout=60, keep=2)
    try:
        first = pool.submit("k", t, W, Config(a=0, b=0)).result(60)
        again = pool.submit("k", t, W, Config(a=0, b=0))
        assert again.done()  # no worker involved: re-measuring a leader costs no build
        assert again.result().payload == first.payload and again.result().compile_ms == 0.0
        # another builder key, a failed build, or one pushed out of the last `keep`: built
        assert not pool.submit("other", t, W, Config(a=0, b=0)).done()
        pool.submit("k", t, W, Config(a=3, b=0)).result(60)
        assert not pool.submit("k", t, W, Config(a=3, b=0)).done()
        for a in (1, 2):
            pool.submit("k", t, W, Config(a=a, b=0)).result(60)
        assert not pool.submit("k", t, W, Config(a=0, b=0)).done()
    finally:
        pool.close()


CRASHING_SERVER = """
import logging, os, sys
sys.path.insert(0, {root!r})
logging.basicConfig(level=logging.WARNING)
from tests.cluster.test_local import CallerTarget
from tunex.cluster import BuildPool
from tunex.trial import Config, Workload
if __name__ == "__main__":
    # a toolchain whose import kills the process that imports it: the fork server
    pool = BuildPool(2, timeout=60, imports=("crash_on_import",))
    arts = [pool.submit("k", CallerTarget(), Workload("w"), Config(a=a, b=0)) for a in (0, 1)]
    print(all(a.result(60).ok and a.result(60).payload != os.getpid() for a in arts))
    pool.close()
"""


def test_workers_are_spawned_when_the_fork_server_dies(tmp_path):
    import multiprocessing as mp
    import subprocess
    import sys
    from pathlib import Path

    if "forkserver" not in mp.get_all_start_methods():
        pytest.skip("no fork server on this platform")
    (tmp_path / "crash_on_import.py").write_text("import os\nos._exit(3)\n")
    script = tmp_path / "main.py"
    script.write_text(CRASHING_SERVER.format(root=str(Path(__file__).resolve().parents[2])))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert done.stderr.count("fork server failed") == 1, done.stderr


def test_a_pool_closes_while_builds_run():
    from tunex.cluster import BuildPool

    for _ in range(3):  # closing races the threads that wait on the workers: no error either way
        pool = BuildPool(2, timeout=60)
        futs = [pool.submit("k", SlowTarget(), W, Config(a=1, b=i)) for i in range(3)]
        until(lambda p=pool: p.counts()[1] == 2, "two builds running")
        pool.close()
        for f in futs[:2]:  # the two running come back lost; the queued one never starts
            assert f.result(30).status is Status.WORKER_LOST
        assert futs[2].cancelled()


def test_a_worker_whose_search_is_gone_exits_quietly(tmp_path):
    """A search killed (SIGTERM, kill -9) while its workers build: each worker's answer finds
    the pipe closed, and the worker ends without a traceback (exit code 0, not 1)."""
    from tunex.cluster._local import _Worker, worker_context

    worker = _Worker(worker_context(), None, "build-gone")
    worker.conn.send(("build", ("k", GateTarget(tmp_path), W, Config(a=0, b=0))))
    worker.conn.close()  # what the kernel does to the pipe of a search that died
    (tmp_path / "build").touch()
    worker.proc.join(60)
    assert worker.proc.exitcode == 0


def test_a_worker_that_died_while_idle_is_started_again_before_the_next_job():
    """The OOM killer (or a stray kill) ends an idle build or measuring process: the next
    config, which never ran, came back worker_lost and was recorded as a failure for good."""
    import signal

    from tests.cluster._fake_targets import WhereTarget

    ex = LocalExecutor(WhereTarget(seconds=0.01), LocalOptions(build_workers=1,
                                                               measure_workers=1))
    try:
        assert ex.submit(W, Config(a=0)).result(60).ok
        workers = [ex._devices[0], ex._pool.workers[0]]
        for w in workers:
            os.kill(w.proc.pid, signal.SIGKILL)
        until(lambda: not any(w.proc.is_alive() for w in workers), "both workers dead")
        m = ex.submit(W, Config(a=1)).result(60)
        assert m.ok, (m.status, m.error)
    finally:
        ex.close()


class Forgetful(SlowTarget):
    """A target that forgot its `return`: measure() gives None when b == 5, build() when a == 5."""

    def build(self, workload, config):
        return None if config["a"] == 5 else super().build(workload, config)

    def measure(self, artifact):
        return None if artifact.config["b"] == 5 else super().measure(artifact)


@pytest.mark.parametrize("where", ["inline", "workers"])
@pytest.mark.parametrize("config, says", [
    (Config(a=0, b=5), r"Forgetful\.measure\(\) returned NoneType, not a tunex Measurement"),
    (Config(a=5, b=0), r"Forgetful\.build\(\) returned NoneType, not a tunex Artifact"),
])
def test_a_target_returning_the_wrong_type_stops_the_search_with_why(where, config, says):
    """measure() returning None killed the measuring thread and the search waited forever
    (with workers), or ended in an AttributeError from tunex's internals (inline)."""
    t = Forgetful()
    ex = (InlineExecutor(t) if where == "inline" else
          LocalExecutor(t, LocalOptions(build_workers=1, build_timeout=10, measure_timeout=10)))
    with ex:
        with pytest.raises(TargetError, match=says):
            ex.submit(W, config).result(timeout=60)
        assert ex.submit(W, Config(a=0, b=0)).result(timeout=60).ok  # and it goes on


def test_an_ok_measurement_without_times_is_a_failure():
    """It was stored as `ok`, yet counted as a failure by the search's summary."""
    m = Measurement(Config(a=0), Status.OK, ())
    assert m.status is Status.RUNTIME_ERROR and m.error == "the measurement is ok but gave no times"
