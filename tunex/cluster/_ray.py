"""Ray executor: builds as tasks on CPU workers, one measuring actor per device.

Behaves like :class:`~tunex.cluster.LocalExecutor`: a hung build or kernel is cancelled after
its timeout and recorded as ``timeout``; a worker, actor or node that dies is recorded as
``worker_lost`` (and a dead measuring actor is replaced, on whichever node still offers its
device's resources). Devices are Ray custom resources (:class:`~tunex.cluster.Device`): a
board's actor runs only on the node the board is attached to, a simulator slot on a node that
simulates. Ray is an optional dependency (``pip install 'tunex[ray]'``), imported only when this
executor is created.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tunex.cluster._base import (
    Activity,
    Executor,
    HangDeadline,
    failed_build,
    failure_status,
)
from tunex.cluster._devices import Device
from tunex.errors import ClusterError, TargetError
from tunex.targets._base import DEVICE_LOST, Target, built, measured
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["RayExecutor", "RayOptions"]

log = logging.getLogger("tunex")


@dataclass(frozen=True)
class RayOptions:
    """Options of :class:`RayExecutor`.

    Attributes:
        address: a running cluster (``"host:6379"``, ``"auto"``: ``RAY_ADDRESS`` or the cluster
            ``ray start`` started on this machine, ``"ray://host:10001"``); ``None``:
            ``RAY_ADDRESS``, or the ``ray start`` cluster of this machine if it answers, else
            a new local instance (declaring the custom resources of ``device_specs``, so
            ``--sim-slots`` works on one machine); ``"local"`` (or ``RAY_ADDRESS=local``):
            always a new private instance, never a running cluster.
        devices: GPU measuring actors when ``device_specs`` is empty (default: the cluster's
            GPUs, at least 1).
        gpus_per_device: GPUs each of those actors reserves (0 for CPU or replay targets).
        device_specs: the devices to measure on, one actor each, placed by their Ray resources
            (:func:`~tunex.cluster.load_devices`, :func:`~tunex.cluster.simulator_devices`);
            when given, ``devices`` and ``gpus_per_device`` are not used.
        in_flight: trials kept in flight (default: the cluster's CPUs, at least devices + 1).
        build_timeout, measure_timeout: seconds before a build or measurement is cancelled.
        hang_factor: once three measurements have succeeded, a measurement is cancelled after
            this many times the slowest of them (at least 5 s, at most ``measure_timeout``;
            :class:`~tunex.cluster.HangDeadline`); ``None``: always ``measure_timeout``.
        connect_timeout: seconds to wait for the cluster's address to answer.
        placement_timeout: seconds a trial waits for a device when no device can be placed
            (every node offering its resources left the cluster) before the search stops
            with a :class:`~tunex.errors.ClusterError` (default: ``measure_timeout``).
    """

    address: str | None = None
    devices: int | None = None
    gpus_per_device: float = 1.0
    device_specs: tuple[Device, ...] = ()
    in_flight: int | None = None
    build_timeout: float = 300.0
    measure_timeout: float = 60.0
    hang_factor: float | None = 10.0
    connect_timeout: float = 20.0
    placement_timeout: float | None = None


def _build(target: Target, workload: Workload, config: Config) -> Artifact:
    t0 = time.perf_counter()
    art = built(target, workload, config)
    if art.compile_ms is None:
        art = dataclasses.replace(art, compile_ms=(time.perf_counter() - t0) * 1e3)
    return art


class _Measurer:
    """Measuring actor: owns one device and measures one artifact at a time.

    The target is specialised for the device here, on the device's node, so that a target can
    take what it needs of the device's options (a board's host) where the device is.
    """

    def __init__(self, target: Target, device: Device) -> None:
        import ray

        self.device = device
        self.error: Exception | None = None
        self.target = target
        make = getattr(target, "for_device", None)
        if callable(make):
            try:
                self.target = make(dict(device.options))
            except Exception as e:  # raised from ready(): a setup error, not a lost actor
                self.error = e
        self.node = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        if self.error is None:
            with contextlib.suppress(Exception):  # measure reports what is wrong with the device
                self.target.open()  # the device, while the first builds compile

    def ready(self) -> tuple[str, str]:
        if self.error is not None:
            raise self.error
        return self.node, self.node_id

    def measure(self, artifact: Artifact) -> Measurement:
        m = measured(self.target, artifact)
        facts = {**m.facts, "node": self.node, "node_id": self.node_id,
                 "device": self.device.name, "pid": os.getpid()}
        return m.replace(worker=f"{self.node}/{self.device.name}", facts=facts)


class _Slot:
    """One device and where its actor stands."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.actor: Any = None
        self.ready: Any = None
        self.generation = 0
        self.state = "placing"  # placing, waiting (to place again), free, busy, broken
        self.since = time.monotonic()
        self.retry_at = 0.0
        self.node = "?"
        self.node_id = ""
        self.error: BaseException | None = None


def _reachable(address: str, timeout: float) -> None:
    """Fail fast (a TCP connect) where ``ray.init`` would wait a minute for an absent GCS."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        host, port = hostport, "10001" if address.startswith("ray://") else "6379"
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ClusterError(
            f"cannot reach the Ray cluster at {address} ({host}:{port}: {e.strerror or e}); "
            "start it with `ray start --head` (or check the address and the firewall), or "
            "run without Ray (local execution is the default)"
        ) from None


def _resolve(address: str) -> str:
    """``"auto"``: RAY_ADDRESS, else the cluster ``ray start`` left on this machine."""
    if address != "auto":
        return address
    env = os.environ.get("RAY_ADDRESS", "")
    if env and env != "auto":
        return env
    path = os.path.join("/tmp" if os.name == "posix" else os.path.realpath(os.sep), "ray",
                        "ray_current_cluster")
    try:
        with open(path) as f:
            found = f.read().strip()
    except OSError:
        found = ""
    if not found:
        raise ClusterError("--ray auto: no running Ray cluster found (RAY_ADDRESS is unset and "
                           f"{path} is absent); start one with `ray start --head`, or give "
                           "its address (HOST:6379)")
    return found


class RayExecutor(Executor):
    """Runs trials on a Ray cluster (or a local Ray instance).

    Each trial's build is a Ray task (``num_cpus=1``); its measurement goes to whichever
    device is free first, never to a device that is measuring. Measurements record where they
    ran: ``worker`` is ``"<node-ip>/<device>"`` and ``facts`` has ``node``, ``node_id``,
    ``device`` and ``pid``.
    """

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
        if opt.device_specs:
            devices = tuple(opt.device_specs)
            self._check_resources(devices, resources, [
                n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")])
        else:
            gpus = int(resources.get("GPU", 0))
            per = opt.gpus_per_device if gpus else 0.0
            n_dev = opt.devices or max(1, gpus if opt.gpus_per_device else 1)
            devices = tuple(Device(f"gpu{i}" if per else f"device{i}", {}, gpus=per)
                            for i in range(n_dev))
        self._target_ref = ray.put(target)
        self._build_task = ray.remote(num_cpus=1, max_retries=0)(_build)
        self._actor_cls = ray.remote(num_cpus=0, max_restarts=0)(_Measurer)
        self._cond = threading.Condition()
        self._free: collections.deque[int] = collections.deque()
        self._closed = False
        self._builds_queued = 0  # trials not building yet (waiting for a thread or a CPU)
        self._builds_running = 0
        self._measures_queued = 0  # built, waiting for a device
        self._slots = [_Slot(d) for d in devices]
        for i in range(len(self._slots)):
            self._place(i)
        cpus = int(resources.get("CPU", 2))
        self.slots = opt.in_flight or max(2, cpus, len(devices) + 1)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="tunex-ray")
        self._deadline = HangDeadline(opt.measure_timeout, opt.hang_factor)
        # builds handed to Ray at once: no more than it has CPUs for, so a build's timeout
        # runs while it builds, not while it waits in Ray's queue behind a hung one
        self._building = threading.BoundedSemaphore(max(1, min(self.slots, cpus)))
        self._placer = threading.Thread(target=self._place_loop, daemon=True,
                                         name="tunex-ray-placer")
        self._placer.start()

    # -- the cluster and its devices ------------------------------------------------------

    def _connect(self) -> None:
        # ray.init must run on the calling thread: from a helper thread a new local instance
        # never comes up (Ray gives up after ~60 s with "Failed to connect to GCS")
        opt = self.options
        address = opt.address
        env = os.environ.get("RAY_ADDRESS", "")
        if address == "local" or (address is None and env == "local"):
            address = None  # as in Ray: a new private instance, never a running cluster
        elif address is None and env not in ("", "auto"):
            address = env
        elif address is None:
            # like Ray, join the cluster `ray start` runs on this machine, but only if it
            # answers: a file left by a dead one must not cost Ray's 60 s wait
            with contextlib.suppress(ClusterError):
                found = _resolve("auto")
                _reachable(found, min(opt.connect_timeout, 2.0))
                address = found
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False, "ignore_reinit_error": True}
        named = os.environ.get("TUNEX_KERNELS")
        if named:  # a user's kernels (by file or module): the cluster's workers find them too
            kwargs["runtime_env"] = {"env_vars": {"TUNEX_KERNELS": named}}
        if address is None:
            needs: dict[str, float] = collections.defaultdict(float)
            for d in opt.device_specs:
                for k, v in d.resources.items():
                    needs[k] += v
            kwargs.update(address="local", resources=dict(needs) or None)
            where = "a new local Ray instance"
        else:
            address = _resolve(address)
            _reachable(address, opt.connect_timeout)
            kwargs["address"] = address
            where = f"the Ray cluster at {address}"
        try:
            self.ray.init(**kwargs)
        except Exception as e:  # ray raises ConnectionError, RuntimeError, ValueError ...
            raise ClusterError(
                f"cannot start or reach {where}: {type(e).__name__}: {e}; start it with "
                "`ray start --head` (or check the address), or run without Ray (local "
                "execution is the default)"
            ) from None

    @staticmethod
    def _check_resources(devices: tuple[Device, ...], have: dict[str, float],
                         nodes: list[dict[str, float]] | None = None) -> None:
        """Every device's resources are offered by the cluster (``have``), and all of one
        device's by a single node of ``nodes`` (an actor runs on one node: a device asking for
        more than any node has would wait for its placement until the search gives up)."""
        missing: dict[str, float] = collections.defaultdict(float)
        for d in devices:
            for k, v in d.resources.items():
                missing[k] += v
            if d.gpus:
                missing["GPU"] += d.gpus
        short = {k: v for k, v in missing.items() if have.get(k, 0.0) <= 0}
        if short:
            names = [d.name for d in devices if set(d.resources) & set(short)
                     or (d.gpus and "GPU" in short)]
            raise ClusterError(
                f"no node of the Ray cluster offers resource(s) {sorted(short)} that device(s) "
                f"{names} need; start the node each device is attached to with e.g. `ray start "
                f"--address=HEAD:6379 --resources='{json.dumps(short)}'`, or remove those "
                "devices (--devices, --sim-slots)"
            )
        for d in devices if nodes is not None else ():
            need = {**d.resources, **({"GPU": d.gpus} if d.gpus else {})}
            most = {k: max((float(n.get(k, 0.0)) for n in nodes or ()), default=0.0)
                    for k in need}
            if any(v > most[k] for k, v in need.items()):
                raise ClusterError(
                    f"device {d.name!r} needs {need} on one node, but no node of the Ray "
                    f"cluster offers that much (the most one node offers: {most}); ask for "
                    "less in its entry of the devices file (--devices), or start a node that "
                    "has it (ray start --address=HEAD:6379 --num-gpus N --resources='{...}')"
                )

    def _place(self, i: int) -> None:
        """Create slot ``i``'s actor; the placer thread frees it once Ray has placed it."""
        s = self._slots[i]
        d = s.device
        s.actor = self._actor_cls.options(
            num_gpus=d.gpus, resources=dict(d.resources) or None,
        ).remote(self.target, d)
        s.ready = s.actor.ready.remote()
        s.generation += 1
        s.state = "placing"

    def _replace(self, i: int) -> None:
        with self._cond:
            s = self._slots[i]
            self.ray.kill(s.actor, no_restart=True)
            if self._closed:
                return
            s.since = time.monotonic()
            self._place(i)
            self._cond.notify_all()

    def _release(self, i: int) -> None:
        with self._cond:
            self._slots[i].state = "free"
            self._free.append(i)
            self._cond.notify_all()

    def _place_loop(self) -> None:
        ray = self.ray
        while True:
            with self._cond:
                if self._closed:
                    return
                for i, s in enumerate(self._slots):
                    if s.state == "waiting" and time.monotonic() >= s.retry_at:
                        self._place(i)
                pending = {s.ready: (i, s.generation) for i, s in enumerate(self._slots)
                           if s.state == "placing"}
                if not pending:
                    self._cond.wait(0.5)
                    continue
            try:
                done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.5)
            except Exception:  # Ray shut down under an executor nobody closed: nothing to place
                if not ray.is_initialized():
                    return
                raise
            for ref in done:
                i, gen = pending[ref]
                try:
                    node, node_id = ray.get(ref)
                    outcome, error = "free", None
                except ray.exceptions.RayTaskError as e:  # for_device refused the device
                    outcome, error = "broken", e.cause if isinstance(e.cause, Exception) else e
                except ray.exceptions.RayError:  # died while being placed: place it again
                    outcome, error = "lost", None
                with self._cond:
                    s = self._slots[i]
                    if s.generation != gen or self._closed:
                        continue
                    if outcome == "free":
                        s.state, s.node, s.node_id = "free", node, node_id
                        self._free.append(i)
                    elif outcome == "broken":
                        s.state, s.error = "broken", error
                        log.warning("device %s cannot measure (left out of this search): %s",
                                    s.device.name, error)
                    else:  # try again in a while, not in a tight loop of dying actors
                        s.state, s.retry_at = "waiting", time.monotonic() + 1.0
                    self._cond.notify_all()

    def _acquire(self) -> int:
        """A free device; waits while any device is busy or still being placed."""
        limit = self.options.placement_timeout or self.options.measure_timeout
        with self._cond:
            while True:
                if self._closed:
                    raise ClusterError("the Ray executor was closed while a trial waited for "
                                       "a device")
                if self._free:
                    i = self._free.popleft()
                    self._slots[i].state = "busy"
                    return i
                now = time.monotonic()
                if not any(s.state in ("free", "busy")
                           or (s.state in ("placing", "waiting") and now - s.since < limit)
                           for s in self._slots):
                    raise self._no_device(limit)
                self._cond.wait(0.5)

    def _no_device(self, limit: float) -> BaseException:
        broken = [s for s in self._slots if s.state == "broken"]
        if len(broken) == len(self._slots) and broken[0].error is not None:
            return broken[0].error
        placing = [s.device for s in self._slots if s.state in ("placing", "waiting")]
        need = {k: v for d in placing for k, v in d.resources.items()}
        return ClusterError(
            f"no device can measure: {[d.name for d in placing]} could not be placed for "
            f"{limit:g} s (no live node offers {sorted(need) or 'their GPUs'}: did a node "
            "leave the cluster?); start a node with e.g. `ray start --address=HEAD:6379 "
            f"--resources='{json.dumps(need)}'` and run the search again (finished trials "
            "are saved)"
        )

    # -- trials -----------------------------------------------------------------------------

    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        with self._cond:
            self._builds_queued += 1
        fut = self._pool.submit(self._trial, workload, config)
        fut.add_done_callback(self._dropped)
        return fut

    def _dropped(self, fut: Future[Measurement]) -> None:
        if fut.cancelled():  # cancelled before a thread took it: it never ran
            with self._cond:
                self._builds_queued -= 1

    def activity(self) -> Activity:
        """Builds handed to Ray count as running (Ray may still queue them for a CPU)."""
        with self._cond:
            return Activity(self._builds_queued, self._builds_running, self._measures_queued,
                            {s.device.name: int(s.state == "busy") for s in self._slots})

    def _wait(self, ref: Any, timeout: float | Callable[[], float], actor: bool = False
              ) -> tuple[str, Any]:
        """Wait for a task or actor call; ``timeout``: seconds, or a function of none giving
        the seconds allowed from the start, asked again every second."""
        ray = self.ray
        limit = timeout if callable(timeout) else (lambda: timeout)
        t0 = time.monotonic()
        while True:
            left = limit() - (time.monotonic() - t0)
            done, _ = ray.wait([ref], timeout=max(0.0, min(left, 1.0)))
            if done or left <= 1.0:
                break
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
        except ray.exceptions.RayError as e:  # worker, actor, node or object lost; cancelled
            return "lost", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"

    def _trial(self, workload: Workload, config: Config) -> Measurement:
        start = time.time()
        opt = self.options
        with self._building:
            with self._cond:
                self._builds_queued -= 1
                self._builds_running += 1
            try:
                kind, art = self._wait(self._build_task.remote(self._target_ref, workload,
                                                               config), opt.build_timeout)
            finally:
                with self._cond:
                    self._builds_running -= 1
        if kind != "ok":
            status = failure_status(kind, Status.COMPILE_ERROR)
            return Measurement.failed(config, status,
                                      art or f"build exceeded {opt.build_timeout:g} s",
                                      worker="ray-build", started_at=start)
        if not art.ok:
            return failed_build(art, "ray-build").replace(started_at=start)
        with self._cond:
            self._measures_queued += 1
        try:
            i = self._acquire()  # one measurement at a time per device: ours until released
        finally:
            with self._cond:
                self._measures_queued -= 1
        s = self._slots[i]
        t0 = time.perf_counter()
        try:
            kind, m = self._wait(s.actor.measure.remote(art),
                                 lambda: self._deadline.seconds(workload), actor=True)
        except BaseException:
            self._release(i)
            raise
        if kind == "ok" and m.ok:
            self._deadline.record(time.perf_counter() - t0, workload)
        if kind in ("timeout", "lost") or (kind == "ok" and m.facts.get(DEVICE_LOST)):
            self._replace(i)
        else:
            self._release(i)
        if kind == "ok":
            return m.replace(started_at=start, compile_ms=m.compile_ms if m.compile_ms is not None
                             else art.compile_ms)
        status = failure_status(kind, Status.RUNTIME_ERROR)
        return Measurement.failed(config, status,
                                  m or self._deadline.describe(self._deadline.seconds(workload)),
                                  worker=f"{s.node}/{s.device.name}", compile_ms=art.compile_ms,
                                  facts={"node": s.node, "node_id": s.node_id,
                                         "device": s.device.name},
                                  started_at=start)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for s in self._slots:
            with contextlib.suppress(Exception):  # already gone with its node
                self.ray.kill(s.actor, no_restart=True)
