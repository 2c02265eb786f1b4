"""A real multi-node Ray cluster on this machine: devices run where their resources are, and a
worker node killed mid-search loses no trial.

The head (``ray start --head``) offers ``riscv-sim``, a second node (``ray start --address``)
offers ``board:fake``; both are separate process sessions so the worker node can be killed on
its own, the way a board's host drops off the network.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from tests.cluster._fake_targets import WhereTarget
from tunex import Config, Measurement, Status, Workload
from tunex.cluster import Device, Executor, simulator_devices
from tunex.db import Database
from tunex.space import Int, Space
from tunex.targets._base import Target
from tunex.tuner import Tuner

ray = pytest.importorskip("ray")

from tunex.cluster._ray import RayExecutor, RayOptions  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")
W = Workload("where")


def _session(sid: int) -> list[int]:
    """Processes of session ``sid`` (a ``ray start`` and every process it started)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(d.name))
    return pids


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    for pid in _session(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Cluster:
    def __init__(self, head: subprocess.Popen[bytes], worker: subprocess.Popen[bytes],
                 head_node: str, worker_node: str) -> None:
        self.head, self.worker = head, worker
        self.head_node, self.worker_node = head_node, worker_node


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Cluster]:
    if not Path(RAY).is_file():
        pytest.skip(f"no `ray` command beside {sys.executable}")
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    tmp = tempfile.mkdtemp(prefix="txr-", dir="/tmp")  # short: Ray's unix sockets live there
    port = _free_port()
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               # notice a dead node in ~2 s rather than ~15 s
               RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="4")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    common = ["--num-cpus=1", "--num-gpus=0", "--object-store-memory=100000000", "--block",
              f"--temp-dir={tmp}", "--disable-usage-stats"]
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(os.path.join(tmp, log), "wb") as out:
            p = subprocess.Popen([RAY, "start", *args, *common], env=env, cwd=REPO,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    def logs() -> str:
        return "".join(Path(tmp, f).read_text(errors="replace")[-2000:]
                       for f in ("head.log", "worker.log") if Path(tmp, f).exists())

    try:
        head = start(["--head", f"--port={port}", "--include-dashboard=false",
                      '--resources={"riscv-sim": 1}'], "head.log")
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or head.poll() is not None:
                    pytest.fail(f"the head node did not start:\n{logs()}")
                time.sleep(0.2)
        worker = start([f"--address=127.0.0.1:{port}", '--resources={"board:fake": 1}'],
                       "worker.log")
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False, configure_logging=False)
        while not ray.cluster_resources().get("board:fake"):
            if time.monotonic() > deadline or worker.poll() is not None:
                pytest.fail(f"the worker node did not join:\n{logs()}")
            time.sleep(0.2)
        nodes = {next(k for k in n["Resources"] if k in ("riscv-sim", "board:fake")): n["NodeID"]
                 for n in ray.nodes() if n["Alive"]}
        yield _Cluster(head, worker, nodes["riscv-sim"], nodes["board:fake"])
    finally:
        ray.shutdown()
        for p in reversed(procs):
            _kill_session(p)
        shutil.rmtree(tmp, ignore_errors=True)


class _Watching(Executor):
    """Hands trials to ``inner`` and keeps every future, to check that all of them resolve."""

    def __init__(self, inner: RayExecutor) -> None:
        self.inner, self.slots = inner, inner.slots
        self.futures: list[Future[Measurement]] = []

    def submit(self, target: Target, workload: Workload, config: Config) -> Future[Measurement]:
        f = self.inner.submit(target, workload, config)
        self.futures.append(f)
        return f


def test_devices_run_where_their_resources_are_and_a_lost_node_loses_no_trial(
        cluster: _Cluster, tmp_path: Path) -> None:
    t = WhereTarget(seconds=0.3)
    board = Device("fake", {"board:fake": 1}, {"host": "fake-board", "seconds": 1.5})
    inner = RayExecutor(t, RayOptions(device_specs=(board, *simulator_devices(1)),
                                      build_timeout=30, measure_timeout=20, in_flight=4))
    ex = _Watching(inner)
    space = Space([Int("a", 0, 100_000)])
    db = Database(tmp_path / "x.db")
    try:
        # 1. each device measures only on the node that offers its resource
        first = Tuner(t, space, workload=W, db=db, strategy="random", budget="8trials",
                      executor=ex, seed=1, transfer=False).run()
        assert first.new_trials == 8
        ms = db.measurements(W)
        nodes: dict[str, set[str]] = collections.defaultdict(set)
        for m in ms:
            nodes[m.facts["device"]].add(m.facts["node_id"])
        assert nodes == {"fake": {cluster.worker_node}, "riscv-sim0": {cluster.head_node}}
        assert {m.facts["host"] for m in ms if m.facts["device"] == "fake"} == {"fake-board"}

        # 2. kill the worker node while the board measures: the search goes on on the head
        killed = threading.Event()

        def kill_when_the_board_measures() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if any(s.device.name == "fake" and s.state == "busy" for s in inner._slots):
                    time.sleep(0.3)
                    _kill_session(cluster.worker)
                    killed.set()
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_when_the_board_measures, daemon=True)
        killer.start()
        start = time.monotonic()
        second = Tuner(t, space, workload=W, db=db, strategy="random", budget="30trials",
                       executor=ex, seed=2, transfer=False).run()
        killer.join(5)
        assert killed.is_set(), "the board never measured: nothing was killed"
        assert time.monotonic() - start < 60
        assert second.trials == 30
    finally:
        inner.close()

    # every submitted trial resolved, none twice in the database, the lost ones as worker_lost
    assert all(f.done() for f in ex.futures)
    results = [f.result() for f in ex.futures]
    recorded = db.measurements(W)
    assert len(recorded) == len(results) == 30
    assert len({m.config for m in recorded}) == 30
    by: dict[Any, int] = collections.Counter(m.status for m in recorded)
    assert set(by) <= {Status.OK, Status.WORKER_LOST}, by
    lost = [m for m in recorded if m.status is Status.WORKER_LOST]
    assert any(m.facts.get("device") == "fake" for m in lost), lost
    after = [m for m in recorded if m.started_at > max(m.ended_at for m in lost)]
    assert after and all(m.facts["node_id"] == cluster.head_node for m in after if m.ok)
    db.close()
