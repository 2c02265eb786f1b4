"""The Ray executor behaves like the local one: same failures, same statuses."""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.cluster._fake_targets import GateTarget, WhereTarget, until
from tests.cluster.test_local import SlowTarget, W
from tunex import ClusterError, Config, ConfigError, Status
from tunex.cluster import Activity, Device, load_devices, simulator_devices
from tunex.cluster._ray import RayExecutor, RayOptions

try:
    import ray
except ImportError:
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="ray is not installed (pip install tunex[ray])")
REPO = Path(__file__).resolve().parents[2]
REPLAY = REPO / "benchmarks" / "data" / "matmul_H200_1024x1024x1024.json.gz"


# -- devices files (no Ray needed) ---------------------------------------------------------

def test_a_devices_file_gives_one_device_per_board_and_simulator_slot(tmp_path):
    f = tmp_path / "devices.toml"
    f.write_text('[[board]]\nname = "bpi1"\nhost = "user@10.0.0.5"\nport = 2222\n\n'
                 '[[simulator]]\nslots = 2\n\n'
                 '[[device]]\nname = "a100"\nresources = {"a100" = 1}\ngpus = 1\n')
    assert load_devices(f) == (
        Device("bpi1", {"board:bpi1": 1.0}, {"host": "user@10.0.0.5", "port": 2222}),
        Device("riscv-sim0", {"riscv-sim": 1.0}), Device("riscv-sim1", {"riscv-sim": 1.0}),
        Device("a100", {"a100": 1.0}, gpus=1.0))
    assert simulator_devices(3, "qemu")[2] == Device("qemu2", {"qemu": 1.0})


@pytest.mark.parametrize("text, says", [
    ("[[board]]\nhost = 'x'\n", "'name' must be"),
    ("[[simulator]]\nslots = 0\n", "positive integer"),
    ("[[simulator]]\nslots = 100000000\n", "at most 4096"),  # not 10^8 actors (and memory)
    ("[[simulator]]\nslotz = 2\n", "unknown key"),
    ("[[gpu]]\nname = 'a'\n", "unknown section"),
    ("[board]\nname = 'a'\n", "[[board]] table"),
    ("[[board]]\nname = 'a'\n[[board]]\nname = 'a'\n", "unique name"),
    ("[[device]]\nname = 'a'\nresources = {GPU = 1}\n", "gpus = N"),
    ("[[board]]\nname = 'a'\nresource = 'CPU'\n", "not Ray's own 'CPU'"),
    ("[[simulator]]\nresource = 'GPU'\n", "not Ray's own 'GPU'"),
    ("[[device]]\nname = 'a'\ngpus = nan\n", "'gpus' must be a number >= 0, not nan"),
    ("[[device]]\nname = 'a'\nresources = {x = inf}\n", "table of positive amounts"),
    ("", "declares no device"),
    ("[[board]\n", "not valid TOML"),
    # one board listed twice: each measurement there ended the kernel the other one ran
    ("[[board]]\nname = 'a'\nhost = 'u@bpi'\n[[board]]\nname = 'b'\nhost = 'v@BPI'\n",
     "boards 'a' and 'b' are one board"),
    ("[[board]]\nname = 'a'\nhost = 'bpi'\nport = 2222\n"
     "[[board]]\nname = 'b'\nhost = 'bpi'\nport = 2222\n", "port 2222"),
])
def test_a_malformed_devices_file_says_what_a_valid_one_looks_like(tmp_path, text, says):
    f = tmp_path / "devices.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_devices(f)
    assert says in str(e.value)
    assert "a valid devices file looks like" in str(e.value)


def test_boards_of_one_host_on_other_ports_or_workdirs_are_other_boards(tmp_path):
    f = tmp_path / "devices.toml"
    f.write_text("[[board]]\nname = 'a'\nhost = 'gw'\nport = 2201\n"
                 "[[board]]\nname = 'b'\nhost = 'gw'\nport = 2202\n"
                 "[[board]]\nname = 'c'\nhost = 'gw'\nport = 2202\nworkdir = '/tmp/c'\n"
                 "[[board]]\nname = 'd'\n[[board]]\nname = 'e'\n")
    assert [d.name for d in load_devices(f)] == ["a", "b", "c", "d", "e"]


def test_a_missing_devices_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read devices file"):
        load_devices(tmp_path / "absent.toml")


def test_a_devices_file_that_is_not_text_is_a_config_error(tmp_path):
    f = tmp_path / "devices.toml"
    f.write_bytes(b"\xff\xfe[[board]]\x00")  # a binary file passed by mistake
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_devices(f)


# -- the executor ------------------------------------------------------------------------------

@needs_ray
def test_unreachable_cluster_is_a_clear_error():
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    start = time.monotonic()
    with pytest.raises(ClusterError, match="ray start"):
        RayExecutor(SlowTarget(), RayOptions(address="127.0.0.1:1", connect_timeout=15))
    assert time.monotonic() - start < 60


@needs_ray
def test_a_users_kernels_are_named_to_the_clusters_workers(monkeypatch):
    """Workers of a cluster started before the search (`ray start`) do not inherit this
    process's environment: a user's kernel file was an 'unknown kernel' there, every trial a
    failure. The kernels named in TUNEX_KERNELS travel in the job's runtime environment."""
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    seen = {}

    def init(**kwargs):
        seen.update(kwargs)
        raise ConnectionError("stop here")

    monkeypatch.setenv("TUNEX_KERNELS", "mine=/home/me/k.py:Mine")
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(ClusterError, match="stop here"):
        RayExecutor(SlowTarget(), RayOptions(address="local"))
    assert seen["runtime_env"] == {"env_vars": {"TUNEX_KERNELS": "mine=/home/me/k.py:Mine"}}


@needs_ray
def test_auto_without_a_cluster_is_a_clear_error(monkeypatch, tmp_path):
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(ClusterError, match="ray start"):
        RayExecutor(SlowTarget(), RayOptions(address="auto", connect_timeout=5))


@pytest.fixture(scope="module")
def ray_cluster():
    if ray is None:
        pytest.skip("ray is not installed")
    # a private instance in its own temp dir: never whatever cluster a stale Ray temp
    # directory of this machine points to
    tmp = tempfile.mkdtemp(prefix="txray", dir="/tmp")
    ray.init(address="local", _temp_dir=tmp, num_cpus=2, include_dashboard=False,
             log_to_driver=False, resources={"riscv-sim": 2, "board:here": 1})
    yield
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_executor(ray_cluster):
    t = SlowTarget()
    ex = RayExecutor(t, RayOptions(build_timeout=20, measure_timeout=20, gpus_per_device=0))
    yield t, ex
    ex.close()


def test_failures_of_every_kind_become_measurements(ray_executor):
    _t, ex = ray_executor
    cases = {Config(a=0, b=0): Status.OK, Config(a=1, b=0): Status.TIMEOUT,
             Config(a=2, b=0): Status.WORKER_LOST, Config(a=3, b=0): Status.COMPILE_ERROR,
             Config(a=4, b=1): Status.TIMEOUT, Config(a=5, b=2): Status.WORKER_LOST}
    futs = {c: ex.submit(W, c) for c in cases}
    got = {c: f.result(timeout=180).status for c, f in futs.items()}
    assert got == cases
    assert ex.submit(W, Config(a=6, b=0)).result(timeout=60).ok  # replaced actor works


def test_a_build_waiting_behind_hung_ones_is_not_timed_out(ray_executor):
    # every build slot held by a hung build: the healthy one waits for a slot, and its
    # timeout starts when it is handed to Ray, not when it was submitted (the limit leaves Ray
    # room to start a fresh worker for it on a loaded machine: 8 s was seen to fall short)
    t, _ = ray_executor
    ex = RayExecutor(t, RayOptions(build_timeout=20, measure_timeout=20, gpus_per_device=0))
    try:
        hung = [ex.submit(W, Config(a=1, b=k)) for k in range(ex.slots)]
        time.sleep(0.5)  # the hung builds hold every slot: queued in Ray, this one would time out
        healthy = ex.submit(W, Config(a=0, b=0))
        assert [f.result(timeout=120).status for f in hung] == [Status.TIMEOUT] * ex.slots
        assert healthy.result(timeout=120).status is Status.OK
    finally:
        ex.close()


def test_trials_go_to_whichever_device_is_free_and_record_where(ray_cluster):
    t = WhereTarget(seconds=0.3)
    board = Device("bpi", {"board:here": 1}, {"host": "user@board"})
    ex = RayExecutor(t, RayOptions(device_specs=(board, *simulator_devices(2)),
                                   measure_timeout=30, in_flight=6))
    try:
        # every device's actor placed first: on a loaded machine one can take longer to start
        # than the others take to measure all twelve, and the claim here is about free devices
        until(lambda: all(s.state == "free" for s in ex._slots), "every device placed", 120)
        ms = [f.result(timeout=120) for f in [ex.submit(W, Config(a=k)) for k in range(12)]]
    finally:
        ex.close()
    assert all(m.ok for m in ms)
    by_device: dict[str, list] = {}
    for m in ms:
        assert m.worker == f"{m.facts['node']}/{m.facts['device']}"
        by_device.setdefault(m.facts["device"], []).append(m)
    assert set(by_device) == {"bpi", "riscv-sim0", "riscv-sim1"}
    assert {m.facts["host"] for m in by_device["bpi"]} == {"user@board"}  # for_device(options)
    assert {m.facts["host"] for m in by_device["riscv-sim0"]} == {""}
    for runs in by_device.values():  # never two measurements at once on one device
        spans = sorted((m.facts["t0"], m.facts["t1"]) for m in runs)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_activity_counts_builds_and_measurements_in_flight(ray_cluster, tmp_path):
    ex = RayExecutor(GateTarget(tmp_path), RayOptions(device_specs=simulator_devices(2),
                                                      in_flight=5, build_timeout=120,
                                                      measure_timeout=120))
    idle = {"riscv-sim0": 0, "riscv-sim1": 0}
    try:
        assert ex.activity() == Activity(0, 0, 0, idle)
        futs = [ex.submit(W, Config(a=k)) for k in range(5)]
        # two CPUs: two builds handed to Ray, three waiting for one
        until(lambda: ex.activity() == Activity(3, 2, 0, idle), "2 builds running, 3 queued")
        (tmp_path / "build").touch()
        busy = Activity(0, 0, 3, {"riscv-sim0": 1, "riscv-sim1": 1})
        until(lambda: ex.activity() == busy, "both devices measuring, 3 built waiting", 120)
        (tmp_path / "measure").touch()
        assert all(f.result(timeout=120).ok for f in futs)
        assert ex.activity() == Activity(0, 0, 0, idle)
    finally:
        ex.close()


def test_a_device_whose_resource_no_node_offers_is_a_clear_error(ray_cluster):
    board = Device("bpi9", {"board:nowhere": 1})
    with pytest.raises(ClusterError, match=r"board:nowhere.*ray start"):
        RayExecutor(WhereTarget(), RayOptions(device_specs=(board,)))


def test_a_device_asking_more_than_any_node_has_is_a_clear_error_at_once(ray_cluster):
    """gpus = 1e308 or resources = {riscv-sim = 3} in a devices file, on a cluster whose
    nodes offer less: the actor could never be placed, and the search waited for the
    measurement timeout to say "did a node leave the cluster?"."""
    for device in (Device("big", {"riscv-sim": 3}), Device("huge", {"board:here": 1e308})):
        with pytest.raises(ClusterError, match=f"device '{device.name}' needs .* on one node"):
            RayExecutor(WhereTarget(), RayOptions(device_specs=(device,)))
    with pytest.raises(ClusterError, match="device 'a100' needs"):  # GPUs, on a GPU cluster
        RayExecutor._check_resources((Device("a100", {}, gpus=1e308),), {"GPU": 16.0},
                                     [{"GPU": 8.0}, {"GPU": 8.0}])


def test_a_device_lost_for_good_stops_the_search_with_a_clear_error(ray_cluster):
    # the resource exists when the executor starts, but its actor never gets it (another
    # actor holds it), the way a node's board is gone after the node left the cluster
    hog = ray.remote(num_cpus=0, resources={"board:here": 1})(WhereTarget).remote()
    ray.get(hog.fingerprint.remote())
    try:
        t = WhereTarget(seconds=0.01)
        ex = RayExecutor(t, RayOptions(device_specs=(Device("bpi", {"board:here": 1}),),
                                       measure_timeout=3))
        try:
            with pytest.raises(ClusterError, match=r"could not be placed.*board:here"):
                ex.submit(W, Config(a=1)).result(timeout=60)
        finally:
            ex.close()
    finally:
        ray.kill(hog)


@pytest.mark.slow
@needs_ray
def test_tunex_search_ray_starts_a_local_instance(tmp_path):
    # the path a user takes: ray.init from a helper thread used to die after ~66 s
    if not REPLAY.is_file():
        pytest.skip(f"{REPLAY} is absent")
    db = tmp_path / "x.db"
    short = tempfile.mkdtemp(prefix="txray", dir="/tmp")  # Ray's unix sockets live there
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tunex.cli", "search", "--target", f"replay:{REPLAY}", "--ray",
         "--budget", "10trials", "--db", str(db), "-q"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "RAY_ADDRESS": "local", "RAY_TMPDIR": short})
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(db) as con:
        (n,), = con.execute("select count(*) from trials")
        workers = {w for (w,) in con.execute("select worker from trials")}
    shutil.rmtree(short, ignore_errors=True)
    assert n == 10
    assert all(w.endswith("/device0") for w in workers)
    assert time.monotonic() - start < 60
