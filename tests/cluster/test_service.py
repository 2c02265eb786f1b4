"""The resident worker service (`tunex serve`) and searches that run their trials in it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from tests._data import recorded
from tunex import Database, Status, TargetError, Tuner
from tunex.cluster import Activity, LocalOptions
from tunex.cluster._service import Service, ServiceExecutor, service_address
from tunex.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def service_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEX_SERVICE_DIR", str(tmp_path / "svc"))
    return tmp_path / "svc"


def _three_trials_through(address: str, spec: str, db_path: Path) -> int:
    """A 3-trial search through the service at ``address``: the trials it recorded."""
    with ServiceExecutor(address, spec=spec) as ex, Database(db_path) as db:
        t = ex.target
        return Tuner(t, t.space, db=db, executor=ex, strategy="random", seed=0,
                     budget="3trials").run().trials


def serve(spec: str) -> Service:
    svc = Service(spec, LocalOptions(build_workers=1, measure_workers=1))
    threading.Thread(target=svc.serve, daemon=True).start()
    return svc


def test_searches_run_their_trials_in_the_service(service_dir, tmp_path):
    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    svc = serve(spec)
    try:
        assert svc.address == service_address("replay")
        assert (os.stat(svc.address).st_mode & 0o777) == 0o600
        results = {}

        def search(name: str, seed: int) -> None:
            with ServiceExecutor(svc.address, spec=spec) as ex, \
                    Database(tmp_path / f"{name}.db") as db:
                t = ex.target  # the service's, sent over
                results[name] = Tuner(t, t.space, db=db, executor=ex, strategy="random",
                                      seed=seed, budget="12trials").run()
                results[name + ".activity"] = ex.activity()

        threads = [threading.Thread(target=search, args=(n, i)) for i, n in enumerate("ab")]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        for n in "ab":  # two searches at once, one service
            r = results[n]
            assert r.trials == 12 and r.new_trials == 12 and r.best is not None
            assert isinstance(results[n + ".activity"], Activity)
        with pytest.raises(ConfigError, match="runs --target replay"):
            ServiceExecutor(svc.address, spec="cpu")
        with pytest.raises(ConfigError, match="already listens"):
            Service(spec)
        with pytest.raises(ConfigError, match="too long"):
            Service(spec, address=str(tmp_path / ("x" * 120) / "s.sock"))
    finally:
        svc.close()
    time.sleep(0.2)
    assert not os.path.exists(svc.address)
    with pytest.raises(TargetError, match="tunex serve"):
        ServiceExecutor(svc.address)


def test_the_cli_search_uses_a_service_and_says_when_there_is_none(service_dir, tmp_path):
    path = recorded("pnpoly/RTX_2080_Ti.json.gz")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tunex.cli", "search", "--target", f"replay:{path}",
           "--service", "--budget", "5trials", "--db", str(tmp_path / "c.db"), "-q"]
    none = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert none.returncode == 2 and "tunex serve --target" in none.stderr
    assert "Traceback" not in none.stderr
    svc = serve(f"replay:{path}")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert '"trials": 5' in done.stdout
    finally:
        svc.close()
    both = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True, timeout=60,
                          env=env)
    assert both.returncode == 2 and "drop --ray, --workers" in both.stderr


@pytest.mark.skipif(shutil.which("clang-19") is None, reason="the cpu target needs clang-19")
def test_a_service_that_dies_mid_search_loses_no_finished_trial(service_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tunex.cli", "serve", "--target", "cpu",
                             "--workers", "1"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "tunex: serving cpu at ..." once it listens
        assert "serving cpu" in line, line
        with ServiceExecutor(service_address("cpu"), spec="cpu") as ex, \
                Database(tmp_path / "k.db") as db:
            space, wl = ex.target.prepare("sgemm", {"M": 16, "N": 16, "K": 16})

            def kill(m, number):
                if number == 2:
                    proc.kill()

            tuner = Tuner(ex.target, space, workload=wl, db=db, executor=ex, seed=0,
                          strategy="random", budget="40trials", on_trial=kill)
            with pytest.raises(TargetError, match="went away"):
                tuner.run()
            ms = db.measurements(wl)
        assert sum(m.status is Status.OK for m in ms) >= 2  # finished before the kill: kept
        lost = [m for m in ms if not m.ok]
        assert all(m.status is Status.WORKER_LOST for m in lost)  # in flight when it died
        assert len(ms) < 40
    finally:
        proc.kill()
        proc.wait(10)


def test_a_search_through_a_service_builds_ahead_while_the_device_is_busy(service_dir, tmp_path):
    """The service says when a trial's build is done, so the search starts the next builds
    while built trials wait for the device (as with its own workers)."""
    from tests.cluster._fake_targets import GateTarget, until
    from tunex.cluster import LocalExecutor
    from tunex.space import Int, Space
    from tunex.trial import Workload

    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "build").touch()
    svc = Service(f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}")
    svc.executor.close()  # a service of a test target (a spec names only registered ones)
    svc.target = GateTarget(gates)
    svc.executor = LocalExecutor(svc.target, LocalOptions(build_workers=2, measure_workers=1))
    threading.Thread(target=svc.serve, daemon=True).start()
    out = {}
    try:
        with ServiceExecutor(svc.address) as ex, Database(tmp_path / "g.db") as db:
            assert ex.slots == 3
            tuner = Tuner(ex.target, Space([Int("a", 0, 39)]), workload=Workload("gate"),
                          db=db, executor=ex, strategy="random", seed=0, budget="20trials")
            th = threading.Thread(target=lambda: out.setdefault("r", tuner.run()), daemon=True)
            th.start()
            until(lambda: svc.executor.activity() == Activity(0, 0, 5, {"device": 1}),
                  "a second batch built while the device is busy")
            (gates / "measure").touch()
            th.join(60)
    finally:
        (gates / "measure").touch()
        svc.close()
    assert out["r"].new_trials == 20


def test_the_decorators_builds_go_to_a_running_service(service_dir, tmp_path, monkeypatch):
    """With a `tunex serve --target triton_gpu` running, the decorator's build pool is the
    service's build processes (no processes of its own to start); if the service goes away,
    a build in flight comes back `worker_lost` and the pool says it is gone."""
    from tests.cluster.test_local import CallerTarget
    from tunex.cluster import CallerExecutor, _local
    from tunex.cluster._service import ServiceBuildPool
    from tunex.trial import Config, Workload

    # a service at the triton_gpu service's socket (its workers build any builder sent)
    svc = Service(f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}",
                  LocalOptions(build_workers=2, measure_workers=1),
                  address=service_address("triton_gpu"))
    threading.Thread(target=svc.serve, daemon=True).start()
    monkeypatch.setattr(_local, "_SHARED", None)
    try:
        pool = _local.shared_build_pool()
        assert isinstance(pool, ServiceBuildPool) and len(pool.workers) == 2
        assert _local.shared_build_pool() is pool  # one per process
        t = CallerTarget()
        ex = CallerExecutor(t, pool)
        assert ex.slots == 3
        futs = [ex.submit(Workload("caller"), Config(a=a)) for a in range(5)]
        pending = set(futs)
        while pending:
            pending -= ex.wait(pending, 30)
        ms = [f.result() for f in futs]
        assert ms[3].status is Status.COMPILE_ERROR and ms[3].error == "nope"
        built_by = {m.facts["built_by"] for i, m in enumerate(ms) if i != 3}
        assert built_by <= {w.proc.pid for w in svc.executor.pool.workers}
        assert os.getpid() not in built_by
        assert not pool.gone
        monkeypatch.setenv("TUNEX_BUILD_SERVICE", "0")  # never a service when told so
        monkeypatch.setattr(_local, "_SHARED", None)
        own = types.SimpleNamespace(close=lambda: None)
        monkeypatch.setattr(_local, "BuildPool", lambda *a, **k: own)
        assert _local.shared_build_pool() is own
    finally:
        svc.close()
        monkeypatch.setattr(_local, "_SHARED", None)


def test_builds_lent_by_a_service_that_dies_come_back_lost(service_dir, tmp_path):
    from tests.cluster._fake_targets import GateTarget, until
    from tunex.cluster._service import ServiceBuildPool
    from tunex.trial import Config, Workload

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tunex.cli", "serve", "--target", "cpu",
                             "--workers", "1", "--socket", service_address("triton_gpu")],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        assert "serving cpu" in proc.stderr.readline()
        pool = ServiceBuildPool.find("triton_gpu")
        assert pool is not None and not pool.gone
        held = pool.submit("k", GateTarget(tmp_path), Workload("g"), Config(a=1))  # waits
        until(lambda: pool.counts() == (0, 1), "one build out")
        proc.kill()
        art = held.result(30)
        assert art.status is Status.WORKER_LOST and "went away" in (art.error or "")
        assert pool.gone and pool.counts() == (0, 0)
        pool.close()
    finally:
        proc.kill()
        proc.wait(10)


def test_a_socket_path_that_is_not_a_socket_is_refused_not_replaced(service_dir, tmp_path):
    """--socket naming a file, a folder or a link is refused, and what is there is kept."""
    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(precious)
    for path in (precious, tmp_path / "folder", tmp_path / "link"):
        with pytest.raises(ConfigError, match="exists and is not a socket"):
            Service(spec, LocalOptions(build_workers=1, measure_workers=1), address=str(path))
    assert precious.read_text() == "keep me" and (tmp_path / "folder").is_dir()
    assert (tmp_path / "link").is_symlink()


def test_a_client_of_another_key_is_refused_and_the_service_goes_on(service_dir, tmp_path,
                                                                     monkeypatch):
    """A search (or a second service) started with another TUNEX_SERVICE_DIR holds another
    key: it gets one clear error, and the service keeps serving (it used to die of the
    client's failed handshake)."""
    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    svc = serve(spec)
    try:
        monkeypatch.setenv("TUNEX_SERVICE_DIR", str(tmp_path / "other"))
        with pytest.raises(ConfigError, match="holds another key"):
            ServiceExecutor(svc.address, spec=spec)
        with pytest.raises(ConfigError, match="already listens"):
            Service(spec, LocalOptions(build_workers=1, measure_workers=1), address=svc.address)
        monkeypatch.setenv("TUNEX_SERVICE_DIR", str(service_dir))
        assert _three_trials_through(svc.address, spec, tmp_path / "k.db") == 3
    finally:
        svc.close()


def test_a_service_folder_that_cannot_be_made_is_one_error_and_no_error_for_builds(
        tmp_path, monkeypatch):
    """TUNEX_SERVICE_DIR (or ~/.cache) that cannot be made: serving and --service say so in
    one line; the decorator's look for a running service finds none instead of raising."""
    from tunex.cluster._service import ServiceBuildPool

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TUNEX_SERVICE_DIR", str(tmp_path / "file" / "svc"))
    assert ServiceBuildPool.find("triton_gpu") is None
    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    with pytest.raises(ConfigError, match="TUNEX_SERVICE_DIR"):
        Service(spec, LocalOptions(build_workers=1, measure_workers=1),
                address=str(tmp_path / "s.sock"))
    with pytest.raises(ConfigError, match="TUNEX_SERVICE_DIR"):
        ServiceExecutor(service_address("replay"))
    assert not os.path.lexists(tmp_path / "s.sock")


def test_a_service_that_does_not_answer_is_an_error_not_a_hang(service_dir, tmp_path,
                                                               monkeypatch):
    """A stopped service (kill -STOP) accepts connections in the kernel and answers nothing:
    `--service` once waited forever. A client that says nothing once held the service's accept
    loop, so no other search got in."""
    import socket

    from tunex.cluster import _service

    monkeypatch.setattr(_service, "CONNECT_TIMEOUT", 1.0)
    mute = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(mute))
        s.listen()  # never accepts, like a stopped process
        start = time.monotonic()
        with pytest.raises(TargetError, match="does not answer in 1 s"):
            ServiceExecutor(str(mute))
        with pytest.raises(ConfigError, match="does not answer"):
            Service(f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}",
                    LocalOptions(build_workers=1, measure_workers=1), address=str(mute))
        assert time.monotonic() - start < 10
    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    svc = serve(spec)
    silent = socket.socket(socket.AF_UNIX)
    try:
        silent.connect(svc.address)  # connects and never proves the key
        assert _three_trials_through(svc.address, spec, tmp_path / "m.db") == 3
    finally:
        silent.close()
        svc.close()


def test_a_replay_named_by_another_path_is_the_same_target(service_dir, tmp_path,
                                                           monkeypatch):
    """`--service --target replay:./x.json` against a service of `replay:/abs/x.json` was
    refused as another target (the specs were compared as text)."""
    path = Path(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    svc = serve(f"replay:{path}")
    try:
        monkeypatch.chdir(path.parent)
        assert _three_trials_through(svc.address, f"replay:./{path.name}",
                                     tmp_path / "r.db") == 3
        with pytest.raises(ConfigError, match="runs --target"):
            ServiceExecutor(svc.address, spec=f"replay:./{path.name}?noisy=1")
    finally:
        svc.close()


def test_a_message_the_other_side_cannot_read_is_an_error_not_a_hang(service_dir, tmp_path):
    """A search and a service of different tunex code: a message one side cannot unpickle
    killed the reading thread and left the other waiting forever. The service now turns such a
    search away with the reason and serves the others; a search stops with an error."""
    from multiprocessing.connection import Listener, answer_challenge, deliver_challenge

    from tunex import Config
    from tunex.cluster._service import _connect, _key, code_version
    from tunex.targets import make_target

    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    svc = serve(spec)
    try:
        conn, _hello = _connect(svc.address)
        conn.send_bytes(b"not a pickle")
        assert conn.poll(60)
        kind, why = conn.recv()
        assert kind == "refused" and "restart it" in why
        conn.close()
        assert _three_trials_through(svc.address, spec, tmp_path / "s.db") == 3
    finally:
        svc.close()

    target = make_target(spec)
    space, workload = target.prepare(None, {})
    listener = Listener(str(tmp_path / "odd.sock"), family="AF_UNIX")

    def odd_service() -> None:  # answers a trial with bytes this tunex cannot read
        c = listener.accept()
        deliver_challenge(c, _key())
        answer_challenge(c, _key())
        c.send(("hello", {"spec": spec, "code": code_version(), "target": target, "slots": 1}))
        c.recv()
        c.send_bytes(b"not a pickle")
        with contextlib.suppress(EOFError, OSError):
            c.recv()

    threading.Thread(target=odd_service, daemon=True).start()
    try:
        with ServiceExecutor(str(tmp_path / "odd.sock")) as ex:
            fut = ex.submit(workload, Config(space.default()))
            with pytest.raises(TargetError, match="cannot read what the tunex service"):
                fut.result(60)
            assert ex.gone
    finally:
        listener.close()


def test_a_service_of_other_tunex_code_is_refused_and_the_decorator_builds_here(
        service_dir, tmp_path):
    """A `tunex serve` left running across an upgrade (or a `git pull`) builds and measures
    with its old code what a search records as the new one's: a search is refused with what
    to do, and the decorator's builds do not go there."""
    from tunex.cluster._service import ServiceBuildPool, code_version

    spec = f"replay:{recorded('pnpoly/RTX_2080_Ti.json.gz')}"
    svc = Service(spec, LocalOptions(build_workers=1, measure_workers=1))
    svc.code = "0.0.1 (000000000000)"
    threading.Thread(target=svc.serve, daemon=True).start()
    try:
        with pytest.raises(ConfigError, match=r"runs other tunex code \(0\.0\.1") as e:
            ServiceExecutor(svc.address, spec=spec)
        assert code_version() in str(e.value) and "start it again" in str(e.value)
        assert ServiceBuildPool.find("replay") is None
        svc.code = code_version()
        assert _three_trials_through(svc.address, spec, tmp_path / "v.db") == 3
    finally:
        svc.close()


def test_the_restart_hint_names_the_socket_a_search_used(service_dir, tmp_path):
    """A service that went away at a --socket of the user's is restarted there (the hint once
    said plain `tunex serve --target X`, which listens on the default socket instead)."""
    from tunex.cluster._service import _serve_command

    assert _serve_command("cpu", service_address("cpu")) == "tunex serve --target cpu"
    mine = str(tmp_path / "my.sock")
    assert _serve_command("cpu", mine) == f"tunex serve --target cpu --socket {mine}"
