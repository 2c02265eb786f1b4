"""Executors on this machine: in the calling process, or in worker processes with timeouts."""

from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import contextlib
import dataclasses
import functools
import itertools
import logging
import multiprocessing as mp
import os
import pickle
import queue
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

from tunex.cluster._base import (
    Activity,
    BuildEvents,
    Executor,
    HangDeadline,
    failed_build,
    failure_status,
    run_trial,
)
from tunex.errors import ClusterError, TargetError
from tunex.targets._base import DEVICE_LOST, Target, built, measured
from tunex.trial import Artifact, Config, Measurement, Status, Workload

log = logging.getLogger(__name__)

__all__ = ["BuildPool", "CallerExecutor", "InlineExecutor", "LocalExecutor", "LocalOptions",
           "prestart", "shared_build_pool", "worker_context"]


def _default_method() -> str:
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def worker_context(start_method: str | None = None, imports: Collection[str] = ()) -> Any:
    """The multiprocessing context tunex starts worker processes from.

    By default a fork server where the platform has one (Linux, macOS; else ``spawn``): one
    clean process, started once, imports ``imports`` (a target's
    :attr:`~tunex.targets.Target.worker_imports`, e.g. torch and Triton) and every worker is a
    fork of it, so sixteen workers cost one import of torch instead of sixteen at once. The
    server never touches a GPU, so its forks may use CUDA as spawned processes do. The imports
    count only when the server starts (the first executor of the process, or :func:`prestart`);
    later ones import what they need when they need it.
    """
    method = start_method or ("spawn" if _SERVER_FAILED else _default_method())
    ctx = mp.get_context(method)
    if method == "forkserver":
        with _SERVER_LOCK:
            if not _SERVER_STARTED:
                _start_server(ctx, imports)
    return ctx


_SERVER_LOCK = threading.Lock()
_SERVER_STARTED = False
_SERVER_FAILED = False  # it could not start a worker: spawn them from then on


def _start_server(ctx: Any, imports: Collection[str]) -> None:
    global _SERVER_STARTED
    # not '__main__' (the default): the server must not run the user's script; workers that
    # need the script's names import it themselves, as spawned processes do
    ctx.set_forkserver_preload(["tunex.cluster._local", *imports])
    from multiprocessing import forkserver

    forkserver.ensure_running()  # returns at once; the server imports in the background
    _SERVER_STARTED = True


def prestart(imports: Collection[str] = (), start_method: str | None = None) -> None:
    """Start the fork server that worker processes come from now, importing ``imports`` in the
    background while the caller does other work (the CLI calls it before it builds the space)."""
    worker_context(start_method, imports)


class InlineExecutor(Executor):
    """Runs each trial at once in the calling process (no timeouts: for replay and tests)."""

    slots = 1

    def __init__(self, target: Target) -> None:
        self.target = target
        self._phase: str | None = None  # what the trial being submitted does now

    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        fut: Future[Measurement] = Future()
        try:
            fut.set_result(run_trial(self.target, workload, config, worker="inline",
                                     phase=self._set_phase))
        except TargetError as e:
            fut.set_exception(e)
        finally:
            self._phase = None
        return fut

    def _set_phase(self, phase: str) -> None:
        self._phase = phase

    def activity(self) -> Activity:
        """The trial running inside :meth:`submit` (seen from another thread), if any."""
        phase = self._phase
        return Activity(builds_running=int(phase == "build"),
                        measuring={"inline": int(phase == "measure")})


@dataclass(frozen=True)
class LocalOptions:
    """Options of :class:`LocalExecutor`.

    Attributes:
        build_workers: processes compiling configs in parallel (default: CPU count - 1).
        measure_workers: processes measuring at once (default: the target's
            :attr:`~tunex.targets.Target.measure_slots`: 1 for a device, every CPU for a
            simulator).
        build_timeout: seconds before a build is killed and recorded as ``timeout``.
        measure_timeout: seconds before a measurement (a hung kernel) is killed likewise.
        hang_factor: once three measurements have succeeded, a measurement is killed after
            this many times the slowest of them (at least 5 s, at most ``measure_timeout``;
            see :class:`~tunex.cluster.HangDeadline`); ``None``: always ``measure_timeout``.
        start_method: multiprocessing start method (default: :func:`worker_context`'s, a fork
            server where there is one, else ``spawn``; both are safe with threads and CUDA).
    """

    build_workers: int = max(1, (os.cpu_count() or 2) - 1)
    measure_workers: int | None = None
    build_timeout: float = 300.0
    measure_timeout: float = 60.0
    hang_factor: float | None = 10.0
    start_method: str | None = None


def _unloadable(e: Exception) -> TargetError:
    return TargetError(
        f"the target could not be loaded in a worker process ({type(e).__name__}: {e}): what "
        "it refers to must be importable there (a module on the path, not a name made at run "
        "time)")


def _serve(conn: Connection, env: dict[str, str] | None = None) -> None:
    """Worker process loop: say it is up, then receive (kind, payload), send back the result.

    A measuring worker is sent its target first, ``("target", target)``, with no reply, and
    serves it. A build worker serves whatever builder each job names: ``("build", (key,
    builder_or_None, workload, config))``, the builder sent once per worker and kept under its
    key. ``env`` is the parent's environment when the worker started (a fork server's children
    inherit the server's, from when it started).
    """
    if env is not None and env != os.environ:
        os.environ.clear()
        os.environ.update(env)
    if hasattr(os, "setpgid"):  # a group of its own: killing it takes its children too
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    try:
        conn.send(("up", os.getpid()))  # started: a death from now on is a job's
    except (BrokenPipeError, ConnectionResetError):
        return
    builders: dict[str, Target] = {}
    target: Target | None = None
    unusable: TargetError | None = None  # the target could not be loaded here
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, KeyboardInterrupt, OSError):
            return
        try:
            kind, payload = ForkingPickler.loads(data)
        except Exception as e:  # a job's builder (the target's own message holds bytes)
            conn.send(("fatal", _unloadable(e)))
            continue
        if kind == "target":
            try:
                target = ForkingPickler.loads(payload)
            except Exception as e:  # no answer is awaited: the jobs that need it say so
                unusable = _unloadable(e)
                continue
            with contextlib.suppress(Exception):  # measure reports what is wrong with the device
                target.open()  # the device, while the first builds compile
            continue
        reply: tuple[str, Any]
        try:
            if unusable is not None and kind != "build":
                raise unusable
            if kind == "build":
                key, builder, workload, config = payload
                if builder is not None:
                    if len(builders) >= 8:
                        builders.pop(next(iter(builders)))
                    builders[key] = builder
                t0 = time.perf_counter()
                art = built(builders[key], workload, config)
                if art.compile_ms is None:
                    art = dataclasses.replace(art, compile_ms=(time.perf_counter() - t0) * 1e3)
                reply = ("ok", art)
            else:
                assert target is not None
                reply = ("ok", measured(target, payload))
        except TargetError as e:
            reply = ("fatal", e)
        except Exception as e:
            reply = ("error", f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except (BrokenPipeError, ConnectionResetError):
            return  # the process that asked is gone (a search killed): nobody to answer
        except Exception as e:  # a result that cannot be pickled
            conn.send(("error", f"{type(e).__name__}: {e}"))


def _children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children (Linux's ``/proc``; none elsewhere)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError), open(
                    f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    return out


class _Worker:
    """One worker process that can be killed and replaced when it hangs or dies."""

    #: starts in a row that die before the process says it is up, before a job is refused
    STARTS = 3

    def __init__(self, ctx: Any, target: Target | None, name: str,
                 import_main: bool = True) -> None:
        self.ctx, self.target, self.name = ctx, target, name
        self.import_main = import_main
        self.builders: set[str] = set()  # builder keys this process holds
        self.closed = False
        self._lock = threading.RLock()  # the serving thread restarts, the owner closes
        self._pickled: bytes | None = None
        self._start()

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.up = False  # the process has said it started (see _serve)
        # The target travels over the connection, not among the process's arguments: a
        # spawned process that dies importing the user's script (a search at module level, no
        # main guard) leaves its arguments unread, and the parent, writing them past the
        # pipe's buffer, would wait for it forever.
        self.proc = self.ctx.Process(target=_serve, args=(child, dict(os.environ)),
                                     daemon=True, name=f"tunex-{self.name}")
        main = sys.modules["__main__"]
        if not self.import_main:  # a new process imports the parent's script unless hidden
            sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            self.proc.start()
        except (OSError, EOFError) as exc:
            if self.ctx.get_start_method() != "forkserver":
                raise
            # the fork server died (a toolchain import that crashes it): spawn from here on
            global _SERVER_FAILED
            if not _SERVER_FAILED:
                log.warning("the workers' fork server failed (%s: %s); starting worker "
                            "processes by spawning them", type(exc).__name__, exc)
            _SERVER_FAILED = True
            child.close()
            self.ctx = mp.get_context("spawn")
            self._start()
            return
        finally:
            sys.modules["__main__"] = main
        child.close()
        self._sending: threading.Thread | None = None
        if self.target is not None:  # sent while the process starts, read when it is up
            if self._pickled is None:  # here, so that a target that cannot travel says so
                self._pickled = bytes(ForkingPickler.dumps(self.target))
            self._sending = threading.Thread(target=self._send_target, args=(self.conn,),
                                             daemon=True, name=f"tunex-{self.name}-target")
            self._sending.start()

    def _send_target(self, conn: Connection) -> None:
        with contextlib.suppress(OSError, EOFError):  # died first: the job's call says so
            conn.send(("target", self._pickled))

    def call(self, kind: str, payload: Any, timeout: float | Callable[[], float]
             ) -> tuple[str, Any]:
        """("ok", value) | ("error", text) | ("fatal", exc) | ("timeout", None) | ("lost", ...)

        ``timeout``: seconds, or a function of none giving the seconds allowed from the start,
        asked again every second while the job runs (a deadline that shrinks meanwhile ends
        the job then). A process that dies before it is up never saw the job: it is started
        again and given the job, and after :attr:`STARTS` such deaths in a row the job is
        refused (``fatal``) with what usually causes them."""
        limit = timeout if callable(timeout) else (lambda: timeout)
        code = None
        for _ in range(self.STARTS):
            try:
                t0 = time.monotonic()
                if self._sending is not None:
                    self._sending.join()  # the target first, then jobs, in order
                    self._sending = None
                self.conn.send((kind, payload))
                while True:
                    left = limit() - (time.monotonic() - t0)
                    if left <= 0:
                        self.restart()
                        return ("timeout", None)
                    if self.conn.poll(min(left, 1.0)):
                        reply = self.conn.recv()
                        if reply[0] == "up":
                            self.up = True
                            continue
                        return reply
            except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
                code = self.proc.exitcode
                up = self.up
                self.restart()
                if up or self.closed:  # closed while its "up" was unread: lost, not a start
                    return ("lost", f"worker process died (exit code {code})")
                log.warning("worker %s died as it started (exit code %s); starting it again",
                            self.name, code)
        return ("fatal", ClusterError(
            f"worker process {self.name} died {self.STARTS} times as it started, before taking "
            f"a job (exit code {code}). A worker imports your script when the target or kernel "
            "is defined in it: if the script starts the search at module level, put that "
            "under `if __name__ == \"__main__\":`; otherwise its error is printed above"))

    def restart(self) -> None:
        with self._lock:
            if self.closed:  # closed while a job ran: nothing to restart
                return
            self.kill()
            self.builders = set()
            self._start()

    def revive(self) -> None:
        """Start the process again if it died while idle (the OOM killer, a stray kill):
        otherwise the next job, which never ran, would come back ``lost`` and its config be
        recorded as a failure."""
        if not self.closed and not self.proc.is_alive():
            log.warning("worker %s died while idle (exit code %s); starting it again",
                        self.name, self.proc.exitcode)
            self.restart()

    def kill(self) -> None:
        """Kill the process and what it started (a hung kernel's simulator or binary would
        otherwise run on, orphaned, with a CPU to itself)."""
        with self._lock:
            if hasattr(os, "killpg") and self.proc.pid:
                # a kernel's binary runs in a group of its own, with whatever it forked
                for child in _children(self.proc.pid):
                    with contextlib.suppress(OSError):
                        os.killpg(child, signal.SIGKILL)
                with contextlib.suppress(OSError):  # not its own group yet, or gone already
                    os.killpg(self.proc.pid, signal.SIGKILL)
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
            with contextlib.suppress(OSError):
                self.conn.close()

    def close(self) -> None:
        """Stop the process for good (a job running in it comes back ``lost``)."""
        with self._lock:
            self.closed = True
            self.kill()


class BuildPool:
    """Build worker processes that any target's builds can use, one job per process at a time.

    A job names its builder (a target, or any object with ``build(workload, config) ->
    Artifact``), which is pickled to a process once and kept there, so one warm pool serves
    many targets and workloads: a :class:`LocalExecutor` owns one, and the decorator's tuning
    on a miss shares :func:`shared_build_pool` across calls. A build that outlives its timeout
    is killed (its process replaced) and comes back as a ``timeout`` artifact; a crashed
    process as ``worker_lost``; a builder that cannot work at all (:class:`TargetError`) fails
    the job's future.

    Builds are pure (:meth:`~tunex.targets.Target.build`), so the last ``keep`` successful
    artifacts are kept: submitting the same builder key, workload and config again (the tuner
    re-measuring its leaders) returns the kept artifact at once, with ``compile_ms`` 0.
    """

    def __init__(self, workers: int, *, timeout: float = 300.0, start_method: str | None = None,
                 name: str = "build", import_main: bool = True,
                 imports: Collection[str] = (), keep: int = 64) -> None:
        if workers < 1:
            raise ValueError("a build pool needs at least one worker")
        ctx = worker_context(start_method, imports)
        self.timeout = timeout
        self.keep = keep
        self._kept: collections.OrderedDict[tuple[str, str, str], Artifact] = \
            collections.OrderedDict()
        self.workers = [_Worker(ctx, None, f"{name}{i}", import_main) for i in range(workers)]
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._queued = 0
        self._running = 0
        self._threads = [threading.Thread(target=self._loop, args=(w,), daemon=True)
                         for w in self.workers]
        for t in self._threads:
            t.start()

    def submit(self, key: str, builder: Any, workload: Workload, config: Config
               ) -> Future[Artifact]:
        """Build ``config`` with ``builder`` (kept by worker processes under ``key``)."""
        fut: Future[Artifact] = Future()
        what = (key, workload.key, config.key)
        with self._lock:
            kept = self._kept.get(what)
            if kept is not None:
                self._kept.move_to_end(what)
            else:
                self._queued += 1
        if kept is not None:
            fut.set_result(kept)
            return fut
        fut.add_done_callback(self._dropped)
        self._jobs.put((key, builder, workload, config, fut))
        return fut

    def counts(self) -> tuple[int, int]:
        """(builds queued, builds running) now, of every user of the pool."""
        with self._lock:
            return self._queued, self._running

    def _dropped(self, fut: Future[Artifact]) -> None:
        if fut.cancelled():  # cancelled while queued: no worker will take it
            with self._lock:
                self._queued -= 1

    def _loop(self, worker: _Worker) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            key, builder, workload, config, fut = item
            if not fut.set_running_or_notify_cancel():  # cancelled while queued (counted)
                continue
            with self._lock:
                self._queued -= 1
                self._running += 1
            worker.revive()
            payload = (key, None if key in worker.builders else builder, workload, config)
            worker.builders.add(key)
            try:
                kind, value = worker.call("build", payload, self.timeout)
            finally:
                with self._lock:
                    self._running -= 1
            if kind == "ok":
                if value.ok and self.keep > 0:
                    self._keep((key, workload.key, config.key), value)
                fut.set_result(value)
            elif kind == "fatal":
                fut.set_exception(value)
            else:
                status = failure_status(kind, Status.COMPILE_ERROR)
                error = value or f"build exceeded {self.timeout:g} s"
                fut.set_result(Artifact(workload, config, status, error=error))

    def _keep(self, what: tuple[str, str, str], art: Artifact) -> None:
        again = dataclasses.replace(art, compile_ms=0.0)  # handed back: it costs no compile
        with self._lock:
            self._kept[what] = again
            while len(self._kept) > self.keep:
                self._kept.popitem(last=False)

    def close(self) -> None:
        """Stop the workers: builds running come back ``worker_lost``, queued ones cancelled."""
        self._kept.clear()
        while True:
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[-1].cancel()
        for _ in self.workers:
            self._jobs.put(None)
        for w in self.workers:
            w.close()


_SHARED: BuildPool | None = None
_SHARED_LOCK = threading.Lock()
#: What the decorator's build workers need: Triton and tunex's compile step, warmed up. Not
#: torch: a call's builds carry their signature, so only a kernel whose module imports torch
#: makes a worker import it.
SHARED_POOL_IMPORTS = ("triton", "tunex.targets.gpu", "tunex.targets.gpu._prewarm")


def shared_build_pool() -> BuildPool:
    """The process's build pool for the decorator's tuning on a miss: the build workers of a
    running ``tunex serve --target triton_gpu`` (warm already, shared by every process of
    this user), else its own, started on first use, kept warm for later misses, stopped at
    exit. ``TUNEX_BUILD_WORKERS`` sets the size of its own (default: CPU count - 1, at most
    16); ``TUNEX_BUILD_SERVICE=0`` never uses a service."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is not None and getattr(_SHARED, "gone", False):
            _SHARED = None  # the service went away: build here from now on
        if _SHARED is None and os.environ.get("TUNEX_BUILD_SERVICE", "1") != "0":
            from tunex.cluster._service import ServiceBuildPool

            _SHARED = ServiceBuildPool.find("triton_gpu")  # type: ignore[assignment]
            if _SHARED is not None:
                atexit.register(_SHARED.close)
        if _SHARED is None:
            env = os.environ.get("TUNEX_BUILD_WORKERS")
            n = int(env) if env else max(1, min(16, (os.cpu_count() or 2) - 1))
            # builders carry what they need (a kernel travels by its source): the workers need
            # not, and must not, run the user's script again as spawned processes do
            _SHARED = BuildPool(n, name="autotune-build", import_main=False,
                                imports=SHARED_POOL_IMPORTS)
            atexit.register(_SHARED.close)
        return _SHARED


def _refers_to_main(obj: Any) -> bool:
    """Whether pickling ``obj`` refers to the ``__main__`` module (a class or function the
    user's script defines), so a worker process must import the script to unpickle it."""
    try:
        return b"__main__" in pickle.dumps(obj)
    except Exception:  # not picklable: the worker's own error says so; import as before
        return True


class LocalExecutor(Executor):
    """Builds in a pool of worker processes, measures in one device process, overlapped.

    While the device process measures one artifact, the build processes compile the next ones,
    so the device does not wait for compiles. A build or measurement that outlives its timeout
    is killed (its process is replaced) and recorded as ``timeout``; a crashed process is
    recorded as ``worker_lost``. The target is pickled to every worker, which makes one
    instance per process (and one device context in the measuring process).
    """

    def __init__(self, target: Target, options: LocalOptions | None = None) -> None:
        self.options = options or LocalOptions()
        self.target = target
        ctx = worker_context(self.options.start_method, target.worker_imports)
        n_measure = self.options.measure_workers or target.measure_slots or (os.cpu_count() or 1)
        if self.options.build_workers < 1 or n_measure < 1:
            raise ValueError("LocalExecutor needs at least one build and one measure worker")
        self.slots = self.options.build_workers + n_measure
        self._key = f"local-{id(self)}"
        # the workers import the user's script only where the target needs its names: a
        # script that makes an executor without an `if __name__ == "__main__":` guard would
        # otherwise start itself again in every worker, which dies and is restarted forever
        main = _refers_to_main(target)
        self._pool = BuildPool(self.options.build_workers, timeout=self.options.build_timeout,
                               start_method=self.options.start_method,
                               imports=target.worker_imports, import_main=main)
        self._devices = [_Worker(ctx, target, "device" if n_measure == 1 else f"device{i}",
                                 main) for i in range(n_measure)]
        self._measures: queue.Queue[Any] = queue.Queue()
        self._count_lock = threading.Lock()
        self._waiting = 0  # built, queued for a device
        self._busy = {w.name: 0 for w in self._devices}
        self._events = BuildEvents()
        self._deadline = HangDeadline(self.options.measure_timeout, self.options.hang_factor)
        self._threads = [threading.Thread(target=self._measure_loop, args=(w,), daemon=True)
                         for w in self._devices]
        for t in self._threads:
            t.start()

    def submit(self, workload: Workload, config: Config, *,
               on_built: Callable[[], None] | None = None) -> Future[Measurement]:
        """Start one trial; ``on_built`` is called (from a pool thread) once its build is
        done and it waits for a device (not for a build that failed)."""
        fut: Future[Measurement] = Future()
        start = time.time()
        self._events.track(fut)
        build = self._pool.submit(self._key, self.target, workload, config)
        fut.add_done_callback(lambda f: build.cancel() if f.cancelled() else None)
        build.add_done_callback(lambda b: self._built(b, fut, start, on_built))
        return fut

    def _built(self, build: Future[Artifact], fut: Future[Measurement], start: float,
               on_built: Callable[[], None] | None) -> None:
        if build.cancelled() or fut.done():
            return
        art = _built_artifact(build, fut, start)
        if art is not None:
            with self._count_lock:
                self._waiting += 1
            fut.add_done_callback(self._dropped)
            self._events.built(fut)
            if on_built is not None:
                on_built()
            self._measures.put((art, fut, start))

    @property
    def pool(self) -> BuildPool:
        """Its build processes (a service lends them to the decorator's builds)."""
        return self._pool

    def built(self, futures: Collection[Future[Measurement]]) -> int:
        return self._events.count(futures)

    def wait(self, futures: Collection[Future[Measurement]], timeout: float | None = None
             ) -> set[Future[Measurement]]:
        return self._events.wait(futures, timeout)

    def _dropped(self, fut: Future[Measurement]) -> None:
        if fut.cancelled():  # cancelled while queued for a device
            with self._count_lock:
                self._waiting -= 1

    def activity(self) -> Activity:
        queued, running = self._pool.counts()
        with self._count_lock:
            return Activity(queued, running, self._waiting, dict(self._busy))

    def _measure_loop(self, device: _Worker) -> None:
        while True:
            item = self._measures.get()
            if item is None:
                return
            art, fut, start = item
            if not fut.set_running_or_notify_cancel():  # cancelled while queued (counted)
                continue
            try:
                self._measure_one(device, art, fut, start)
            except Exception as e:  # never a dead thread and a search waiting for it forever
                if not fut.done():
                    fut.set_exception(TargetError(f"measuring {art.config} failed in tunex: "
                                                  f"{type(e).__name__}: {e}"))

    def _measure_one(self, device: _Worker, art: Artifact, fut: Future[Measurement],
                     start: float) -> None:
        with self._count_lock:
            self._waiting -= 1
            self._busy[device.name] += 1
        device.revive()
        t0 = time.perf_counter()
        deadline = functools.partial(self._deadline.seconds, art.workload)
        try:
            kind, value = device.call("measure", art, deadline)
        finally:
            with self._count_lock:
                self._busy[device.name] -= 1
        if kind == "ok" and value.facts.get(DEVICE_LOST):
            device.restart()  # the device can measure no more in that process
        if kind == "ok" and value.ok:
            self._deadline.record(time.perf_counter() - t0, art.workload)
        if kind == "ok":
            m = value.replace(worker=value.worker or device.name, started_at=start,
                              compile_ms=value.compile_ms if value.compile_ms is not None
                              else art.compile_ms)
            fut.set_result(m)
        elif kind == "fatal":
            fut.set_exception(value)
        else:
            status = failure_status(kind, Status.RUNTIME_ERROR)
            error = value or self._deadline.describe(deadline())
            fut.set_result(Measurement.failed(art.config, status, error, worker=device.name,
                                              compile_ms=art.compile_ms, started_at=start))

    def close(self) -> None:
        self._pool.close()
        for _ in self._devices:
            self._measures.put(None)
        for w in self._devices:
            w.close()


def _built_artifact(build: Future[Artifact], fut: Future[Measurement], start: float
                    ) -> Artifact | None:
    """The artifact of a finished build, to measure; ``None`` when ``fut`` is settled already:
    with the build's exception (a target that cannot work), or as a failed build."""
    exc = build.exception()
    if exc is not None:
        fut.set_exception(exc)
        return None
    art = build.result()
    if not art.ok:
        fut.set_result(failed_build(art, "build").replace(started_at=start))
        return None
    return art


_KEYS = itertools.count()


class CallerExecutor(Executor):
    """Builds in a :class:`BuildPool` (or inline), measures in the thread that waits.

    For a target whose measurement needs what only the calling thread has (the decorator's
    tuning on a miss measures on the call's own tensors, with its hooks and its CUDA device):
    :meth:`wait` measures the first artifact built while the pool builds the next ones, so
    measuring overlaps building. ``builder`` is what the pool's processes build with (picklable;
    default: the target); without a pool, builds run inline at submission.
    """

    def __init__(self, target: Target, pool: BuildPool | None = None, builder: Any = None) -> None:
        self.target = target
        self.pool = pool
        self.builder = builder if builder is not None else target
        self.slots = len(pool.workers) + 1 if pool is not None else 1
        self._key = f"caller-{os.getpid()}-{next(_KEYS)}"
        self._builds: dict[Future[Measurement], tuple[Future[Artifact], float]] = {}
        self._phase: str | None = None  # what the calling thread does now: build, measure

    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        fut: Future[Measurement] = Future()
        start = time.time()
        if self.pool is not None:
            build = self.pool.submit(self._key, self.builder, workload, config)
            fut.add_done_callback(lambda f: build.cancel() if f.cancelled() else None)
        else:
            build = Future()
            self._phase = "build"
            try:
                build.set_result(built(self.target, workload, config))
            except TargetError as e:
                build.set_exception(e)
            finally:
                self._phase = None
        self._builds[fut] = (build, start)
        return fut

    def built(self, futures: Collection[Future[Measurement]]) -> int:
        """Trials built and waiting for the calling thread to measure them."""
        builds = self._builds
        return sum(1 for f in futures
                   if (b := builds.get(f)) is not None and b[0].done() and not b[0].cancelled())

    def activity(self) -> Activity:
        """Builds of the pool (every user of it: the decorator's pool is shared) or the one
        building inline; the calling thread is the device, named ``caller``."""
        phase = self._phase
        queued, running = self.pool.counts() if self.pool is not None else (
            0, int(phase == "build"))
        waiting = sum(1 for build, _ in tuple(self._builds.values())
                      if build.done() and not build.cancelled() and build.exception() is None
                      and build.result().ok)
        return Activity(queued, running, waiting, {"caller": int(phase == "measure")})

    def wait(self, futures: Collection[Future[Measurement]], timeout: float | None = None
             ) -> set[Future[Measurement]]:
        done = {f for f in futures if f.done()}
        if done:
            return done
        builds = {self._builds[f][0]: f for f in futures if f in self._builds}
        finished, _ = cf.wait(builds, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        # failed builds cost nothing to report; of the built ones, measure the oldest
        ready = sorted((builds[b] for b in finished), key=lambda f: self._builds[f][1])
        measured = False
        for fut in ready:
            build = self._builds[fut][0]
            if build.exception() is None and build.result().ok:
                if measured:
                    continue
                measured = True
            self._finish(fut)
        return {f for f in futures if f.done()}

    def _finish(self, fut: Future[Measurement]) -> None:
        build, start = self._builds.pop(fut)
        if not fut.set_running_or_notify_cancel():
            return
        art = _built_artifact(build, fut, start)
        if art is None:
            return
        self._phase = "measure"
        try:
            m = measured(self.target, art)
        except TargetError as e:
            fut.set_exception(e)
            return
        except Exception as e:  # a target that raises on a bad config: still a failed trial
            m = Measurement.failed(art.config, Status.RUNTIME_ERROR, f"{type(e).__name__}: {e}",
                                   compile_ms=art.compile_ms)
        finally:
            self._phase = None
        if m.compile_ms is None and art.compile_ms is not None:
            m = m.replace(compile_ms=art.compile_ms)
        fut.set_result(m.replace(started_at=start))

    def close(self) -> None:
        for fut, (build, _) in list(self._builds.items()):
            build.cancel()
            fut.cancel()
        self._builds.clear()
