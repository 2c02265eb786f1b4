"""Ray executor: builds as tasks on CPU workers, one measuring actor per device.

Behaves like :class:`~tunex.cluster.LocalExecutor`: a hung build or kernel is cancelled after
its timeout and recorded as ``timeout``; a worker or actor that dies is recorded as
``worker_lost`` (and a dead measuring actor is replaced). Ray is an optional dependency
(``pip install 'tunex[ray]'``), imported only when this executor is created.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tunex.cluster._base import Executor, failed_build, failure_status
from tunex.errors import ClusterError, TargetError
from tunex.targets._base import Target
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["RayExecutor", "RayOptions"]


@dataclass(frozen=True)
class RayOptions:
    """Options of :class:`RayExecutor`.

    Attributes:
        address: a running cluster (``"host:6379"``, ``"auto"``); ``None`` starts a local one.
        devices: measuring actors (default: the cluster's GPUs, at least 1).
        gpus_per_device: GPUs each measuring actor reserves (0 for CPU or replay targets).
        in_flight: trials kept in flight (default: the cluster's CPUs).
        build_timeout, measure_timeout: seconds before a build or measurement is cancelled.
        connect_timeout: seconds to wait for the cluster before giving up.
    """

    address: str | None = None
    devices: int | None = None
    gpus_per_device: float = 1.0
    in_flight: int | None = None
    build_timeout: float = 300.0
    measure_timeout: float = 60.0
    connect_timeout: float = 20.0


def _build(target: Target, workload: Workload, config: Config) -> Artifact:
    t0 = time.perf_counter()
    art = target.build(workload, config)
    if art.compile_ms is None:
        art = Artifact(art.workload, art.config, art.status, art.payload, art.facts,
                       (time.perf_counter() - t0) * 1e3, art.error)
    return art


class _Device:
    """Measuring actor: owns one device and measures one artifact at a time."""

    def __init__(self, target: Target, name: str) -> None:
        self.target, self.name = target, name

    def measure(self, artifact: Artifact) -> Measurement:
        m = self.target.measure(artifact)
        return m.replace(worker=m.worker or self.name)


class RayExecutor(Executor):
    """Runs trials on a Ray cluster (or a local Ray instance)."""

    def __init__(self, target: Target, options: RayOptions | None = None) -> None:
        try:
            import ray
        except ImportError as e:
            raise ClusterError("the Ray executor needs ray: pip install 'tunex[ray]'") from e
        self.ray = ray
        self.options = opt = options or RayOptions()
        self.target = target
        if not ray.is_initialized():
            self._connect()
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        n_dev = opt.devices or max(1, gpus if opt.gpus_per_device else 1)
        self._gpus = opt.gpus_per_device if gpus else 0.0
        self._target_ref = ray.put(target)
        self._build_task = ray.remote(num_cpus=1, max_retries=0)(_build)
        self._actor_cls = ray.remote(num_gpus=self._gpus, num_cpus=0)(_Device)
        self._devices = [self._new_device(i) for i in range(n_dev)]
        self._locks = [threading.Lock() for _ in self._devices]
        self._next = itertools.cycle(range(n_dev))
        self.slots = opt.in_flight or max(2, int(resources.get("CPU", 2)))
        self._pool = ThreadPoolExecutor(max_workers=self.slots + n_dev,
                                        thread_name_prefix="tunex-ray")
        # builds handed to Ray at once: no more than it has slots for, so a build's timeout
        # runs while it builds, not while it waits in Ray's queue behind a hung one
        self._building = threading.BoundedSemaphore(self.slots)

    def _connect(self) -> None:
        opt = self.options
        result: dict[str, Any] = {}

        def init() -> None:
            try:
                self.ray.init(address=opt.address, ignore_reinit_error=True,
                              include_dashboard=False, log_to_driver=False,
                              configure_logging=False)
            except Exception as e:  # ray raises ConnectionError, RuntimeError, ...
                result["error"] = e

        t = threading.Thread(target=init, daemon=True)
        t.start()
        t.join(opt.connect_timeout)
        if t.is_alive() or "error" in result:
            why = result.get("error", f"no answer within {opt.connect_timeout:g} s")
            raise ClusterError(
                f"cannot reach the Ray cluster at {opt.address or 'a new local instance'}: "
                f"{why}; start it with `ray start --head` (or check the address), or run "
                "without Ray (local execution is the default)"
            )

    def _new_device(self, i: int) -> Any:
        return self._actor_cls.remote(self._target_ref, f"ray-device{i}")

    def submit(self, target: Target, workload: Workload, config: Config) -> Future[Measurement]:
        if target is not self.target:
            raise ValueError("a RayExecutor runs the target it was created with")
        return self._pool.submit(self._trial, workload, config)

    def _wait(self, ref: Any, timeout: float, actor: bool = False) -> tuple[str, Any]:
        ray = self.ray
        done, _ = ray.wait([ref], timeout=timeout)
        if not done:
            if not actor:  # a hung actor call is ended by killing the actor (the caller does)
                ray.cancel(ref, force=True)
            return "timeout", None
        try:
            return "ok", ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(getattr(e, "cause", None), Exception) else e
            if isinstance(cause, TargetError):
                raise cause from None
            return "error", f"{type(cause).__name__}: {cause}"
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayActorError,
                ray.exceptions.TaskCancelledError) as e:
            return "lost", f"{type(e).__name__}: {str(e).splitlines()[0]}"

    def _trial(self, workload: Workload, config: Config) -> Measurement:
        start = time.time()
        opt = self.options
        with self._building:
            kind, art = self._wait(self._build_task.remote(self._target_ref, workload, config),
                                   opt.build_timeout)
        if kind != "ok":
            status = failure_status(kind, Status.COMPILE_ERROR)
            return Measurement.failed(config, status,
                                      art or f"build exceeded {opt.build_timeout:g} s",
                                      worker="ray-build", started_at=start)
        if not art.ok:
            return failed_build(art, "ray-build").replace(started_at=start)
        i = next(self._next)
        with self._locks[i]:  # one measurement at a time per device
            kind, m = self._wait(self._devices[i].measure.remote(art), opt.measure_timeout,
                                 actor=True)
            if kind in ("timeout", "lost"):
                self.ray.kill(self._devices[i], no_restart=True)
                self._devices[i] = self._new_device(i)
        if kind == "ok":
            return m.replace(started_at=start, compile_ms=m.compile_ms if m.compile_ms is not None
                             else art.compile_ms)
        status = failure_status(kind, Status.RUNTIME_ERROR)
        return Measurement.failed(config, status,
                                  m or f"measurement exceeded {opt.measure_timeout:g} s",
                                  worker=f"ray-device{i}", compile_ms=art.compile_ms,
                                  started_at=start)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for d in self._devices:
            self.ray.kill(d, no_restart=True)
