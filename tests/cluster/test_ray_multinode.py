"""A real multi-node Ray cluster on this machine: devices run where their resources are, and a
worker node killed mid-search loses no trial.

The head (``ray start --head``) offers ``riscv-sim``, a second node (``ray start --address``)
offers ``board:fake``; both are separate process sessions so the worker node can be killed on
its own, the way a board's host drops off the network. The search runs in a fresh Python
process (``python -m tests.cluster.test_ray_multinode``), as a user's would: a process that
already ran a Ray session cannot own objects on another cluster (its second driver carries the
first one's worker id, which the new cluster's GCS sees as failed).
"""

from __future__ import annotations

import collections
import contextlib
import json
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
from tunex.tuner import Tuner

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


@pytest.fixture
def cluster() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``(address, worker node's ray start)`` of a head offering riscv-sim and a worker node
    offering board:fake; every process of both is killed afterwards, even on failure."""
    pytest.importorskip("ray")
    if not Path(RAY).is_file():
        pytest.skip(f"no `ray` command beside {sys.executable}")
    tmp = tempfile.mkdtemp(prefix="txr-", dir="/tmp")  # short: Ray's unix sockets live there
    port = _free_port()
    common = ["--num-cpus=1", "--num-gpus=0", "--object-store-memory=100000000", "--block",
              f"--temp-dir={tmp}", "--disable-usage-stats"]
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(os.path.join(tmp, log), "wb") as out:
            p = subprocess.Popen([RAY, "start", *args, *common], env=_env(), cwd=REPO,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

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
                    pytest.fail("the head node did not start:\n"
                                + Path(tmp, "head.log").read_text(errors="replace")[-3000:])
                time.sleep(0.2)
        worker = start([f"--address=127.0.0.1:{port}", '--resources={"board:fake": 1}'],
                       "worker.log")
        yield f"127.0.0.1:{port}", worker
    finally:
        for p in reversed(procs):
            _kill_session(p)
        shutil.rmtree(tmp, ignore_errors=True)


def _env() -> dict[str, str]:
    return dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
                PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                # notice a dead node in ~2 s rather than ~15 s
                RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="4")


class _Watching(Executor):
    """Hands trials to ``inner`` and keeps every future, to check that all of them resolve."""

    def __init__(self, inner: Executor) -> None:
        self.inner, self.slots, self.target = inner, inner.slots, inner.target
        self.futures: list[Future[Measurement]] = []

    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        f = self.inner.submit(workload, config)
        self.futures.append(f)
        return f


def _drive(address: str, worker_sid: int, db_path: str) -> dict[str, Any]:
    """The search, in its own process: 8 trials, then 30 with the worker node killed mid-way."""
    import ray

    from tunex.cluster._ray import RayExecutor, RayOptions

    ray.init(address=address, log_to_driver=False, configure_logging=False)
    deadline = time.monotonic() + 60
    while not ray.cluster_resources().get("board:fake"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker node did not join: {ray.cluster_resources()}")
        time.sleep(0.2)
    nodes = {k: n["NodeID"] for n in ray.nodes() if n["Alive"] for k in n["Resources"]
             if k in ("riscv-sim", "board:fake")}
    t = WhereTarget(seconds=0.3)
    board = Device("fake", {"board:fake": 1}, {"host": "fake-board", "seconds": 1.5})
    inner = RayExecutor(t, RayOptions(address=address, device_specs=(board,
                                      *simulator_devices(1)), build_timeout=30,
                                      measure_timeout=20, in_flight=4))
    ex = _Watching(inner)
    space = Space([Int("a", 0, 100_000)])
    out: dict[str, Any] = {"nodes": nodes}
    with Database(db_path) as db:
        try:
            Tuner(t, space, workload=W, db=db, strategy="random", budget="8trials",
                  executor=ex, seed=1, transfer=False).run()
            out["first"] = [dict(m.facts) for m in db.measurements(W)]
            killed: list[float] = []

            def kill_when_the_board_measures() -> None:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    if any(s.device.name == "fake" and s.state == "busy" for s in inner._slots):
                        time.sleep(0.3)
                        for pid in _session(worker_sid):
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGKILL)
                        killed.append(time.time())
                        return
                    time.sleep(0.05)

            killer = threading.Thread(target=kill_when_the_board_measures, daemon=True)
            killer.start()
            start = time.monotonic()
            second = Tuner(t, space, workload=W, db=db, strategy="random", budget="30trials",
                           executor=ex, seed=2, transfer=False).run()
            killer.join(5)
            out.update(killed_at=killed[0] if killed else None, trials=second.trials,
                       seconds=time.monotonic() - start)
        finally:
            inner.close()
        out["unresolved"] = sum(not f.done() for f in ex.futures)
        out["resolved"] = [f.result().status.value for f in ex.futures if f.done()]
    return out


def test_devices_run_where_their_resources_are_and_a_lost_node_loses_no_trial(
        cluster: tuple[str, subprocess.Popen[bytes]], tmp_path: Path) -> None:
    address, worker = cluster
    db_path = tmp_path / "x.db"
    done = subprocess.run([sys.executable, "-m", "tests.cluster.test_ray_multinode", address,
                           str(worker.pid), str(db_path), str(tmp_path / "out.json")],
                          env=_env(), cwd=REPO, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-5000:]
    out = json.loads((tmp_path / "out.json").read_text())
    head, board_node = out["nodes"]["riscv-sim"], out["nodes"]["board:fake"]
    assert head != board_node

    # 1. each device measured only on the node that offers its resource
    where: dict[str, set[str]] = collections.defaultdict(set)
    for facts in out["first"]:
        where[facts["device"]].add(facts["node_id"])
    assert where == {"fake": {board_node}, "riscv-sim0": {head}}
    assert {f["host"] for f in out["first"] if f["device"] == "fake"} == {"fake-board"}

    # 2. the worker node was killed while the board measured; every trial resolved, the lost
    # ones as worker_lost; the database has each finished trial once; the rest ran on the head
    assert out["killed_at"] is not None, "the board never measured: nothing was killed"
    assert out["trials"] == 30 and out["seconds"] < 60
    assert out["unresolved"] == 0 and len(out["resolved"]) == 30
    with Database(db_path) as db:
        recorded = db.measurements(W)
    assert len(recorded) == 30 and len({m.config for m in recorded}) == 30
    by = collections.Counter(m.status for m in recorded)
    assert set(by) <= {Status.OK, Status.WORKER_LOST}, by
    lost = [m for m in recorded if m.status is Status.WORKER_LOST]
    assert any(m.facts.get("device") == "fake" for m in lost), lost
    after = [m for m in recorded if m.started_at > out["killed_at"] + 0.5]
    assert after and all(m.facts["node_id"] == head for m in after if m.ok)


if __name__ == "__main__":  # the driver process of the test above
    result = _drive(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    Path(sys.argv[4]).write_text(json.dumps(result))
