"""The Ray executor behaves like the local one: same failures, same statuses."""

from __future__ import annotations

import time

import pytest

from tests.cluster.test_local import SlowTarget, W
from tunex import ClusterError, Config, Status

ray = pytest.importorskip("ray")

from tunex.cluster import RayExecutor  # noqa: E402
from tunex.cluster._ray import RayOptions  # noqa: E402


def test_unreachable_cluster_is_a_clear_error():
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    start = time.monotonic()
    with pytest.raises(ClusterError, match="ray start"):
        RayExecutor(SlowTarget(), RayOptions(address="127.0.0.1:1", connect_timeout=15))
    assert time.monotonic() - start < 60


@pytest.fixture(scope="module")
def ray_executor():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    t = SlowTarget()
    ex = RayExecutor(t, RayOptions(build_timeout=20, measure_timeout=20, gpus_per_device=0))
    yield t, ex
    ex.close()
    ray.shutdown()


def test_failures_of_every_kind_become_measurements(ray_executor):
    t, ex = ray_executor
    cases = {Config(a=0, b=0): Status.OK, Config(a=1, b=0): Status.TIMEOUT,
             Config(a=2, b=0): Status.WORKER_LOST, Config(a=3, b=0): Status.COMPILE_ERROR,
             Config(a=4, b=1): Status.TIMEOUT, Config(a=5, b=2): Status.WORKER_LOST}
    futs = {c: ex.submit(t, W, c) for c in cases}
    got = {c: f.result(timeout=180).status for c, f in futs.items()}
    assert got == cases
    assert ex.submit(t, W, Config(a=6, b=0)).result(timeout=60).ok  # replaced actor works


def test_a_build_waiting_behind_hung_ones_is_not_timed_out(ray_executor):
    # every build slot held by a hung build: the healthy one waits for a slot, and its
    # timeout starts when it is handed to Ray, not when it was submitted
    t, _ = ray_executor
    ex = RayExecutor(t, RayOptions(build_timeout=8, measure_timeout=20, gpus_per_device=0))
    try:
        hung = [ex.submit(t, W, Config(a=1, b=k)) for k in range(ex.slots)]
        time.sleep(0.5)  # the hung builds hold every slot: queued in Ray, this one would time out
        healthy = ex.submit(t, W, Config(a=0, b=0))
        assert [f.result(timeout=120).status for f in hung] == [Status.TIMEOUT] * ex.slots
        assert healthy.result(timeout=120).status is Status.OK
    finally:
        ex.close()
