"""Executors on this machine: in the calling process, or in worker processes with timeouts."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from tunex.cluster._base import Executor, failed_build, failure_status, run_trial
from tunex.errors import TargetError
from tunex.targets._base import Target
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["InlineExecutor", "LocalExecutor", "LocalOptions"]


class InlineExecutor(Executor):
    """Runs each trial at once in the calling process (no timeouts: for replay and tests)."""

    slots = 1

    def submit(self, target: Target, workload: Workload, config: Config) -> Future[Measurement]:
        fut: Future[Measurement] = Future()
        try:
            fut.set_result(run_trial(target, workload, config, worker="inline"))
        except TargetError as e:
            fut.set_exception(e)
        return fut


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
        start_method: multiprocessing start method; ``spawn`` is safe with threads and CUDA.
    """

    build_workers: int = max(1, (os.cpu_count() or 2) - 1)
    measure_workers: int | None = None
    build_timeout: float = 300.0
    measure_timeout: float = 60.0
    start_method: str = "spawn"


def _serve(conn: Connection, target: Target) -> None:
    """Worker process loop: receive (kind, payload), send back the result."""
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        try:
            if kind == "build":
                workload, config = payload
                t0 = time.perf_counter()
                art = target.build(workload, config)
                if art.compile_ms is None:
                    art = Artifact(art.workload, art.config, art.status, art.payload, art.facts,
                                   (time.perf_counter() - t0) * 1e3, art.error)
                conn.send(("ok", art))
            else:
                conn.send(("ok", target.measure(payload)))
        except TargetError as e:
            conn.send(("fatal", e))
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


class _Worker:
    """One worker process that can be killed and replaced when it hangs or dies."""

    def __init__(self, ctx: Any, target: Target, name: str) -> None:
        self.ctx, self.target, self.name = ctx, target, name
        self._start()

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_serve, args=(child, self.target), daemon=True,
                                     name=f"tunex-{self.name}")
        self.proc.start()
        child.close()

    def call(self, kind: str, payload: Any, timeout: float) -> tuple[str, Any]:
        """("ok", value) | ("error", text) | ("fatal", exc) | ("timeout", None) | ("lost", ...)"""
        try:
            self.conn.send((kind, payload))
            if not self.conn.poll(timeout):
                self.restart()
                return ("timeout", None)
            return self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self.proc.exitcode
            self.restart()
            return ("lost", f"worker process died (exit code {code})")

    def restart(self) -> None:
        self.kill()
        self._start()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


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
        ctx = mp.get_context(self.options.start_method)
        n_measure = self.options.measure_workers or target.measure_slots or (os.cpu_count() or 1)
        if self.options.build_workers < 1 or n_measure < 1:
            raise ValueError("LocalExecutor needs at least one build and one measure worker")
        self.slots = self.options.build_workers + n_measure
        self._builders = [_Worker(ctx, target, f"build{i}")
                          for i in range(self.options.build_workers)]
        self._devices = [_Worker(ctx, target, "device" if n_measure == 1 else f"device{i}")
                         for i in range(n_measure)]
        self._builds: queue.Queue[Any] = queue.Queue()
        self._measures: queue.Queue[Any] = queue.Queue()
        self._threads = [threading.Thread(target=self._build_loop, args=(w,), daemon=True)
                         for w in self._builders]
        self._threads += [threading.Thread(target=self._measure_loop, args=(w,), daemon=True)
                          for w in self._devices]
        for t in self._threads:
            t.start()

    def submit(self, target: Target, workload: Workload, config: Config) -> Future[Measurement]:
        if target is not self.target:
            raise ValueError("a LocalExecutor runs the target it was created with")
        fut: Future[Measurement] = Future()
        self._builds.put((workload, config, fut, time.time()))
        return fut

    def _build_loop(self, worker: _Worker) -> None:
        while True:
            item = self._builds.get()
            if item is None:
                return
            workload, config, fut, start = item
            if not fut.set_running_or_notify_cancel():  # cancelled while queued
                continue
            kind, value = worker.call("build", (workload, config), self.options.build_timeout)
            if kind == "ok" and not value.ok:
                fut.set_result(failed_build(value, worker.name).replace(started_at=start))
            elif kind == "ok":
                self._measures.put((value, fut, start))
            elif kind == "fatal":
                fut.set_exception(value)
            else:
                status = failure_status(kind, Status.COMPILE_ERROR)
                error = value or f"build exceeded {self.options.build_timeout:g} s"
                fut.set_result(Measurement.failed(config, status, error, worker=worker.name,
                                                  started_at=start))

    def _measure_loop(self, device: _Worker) -> None:
        while True:
            item = self._measures.get()
            if item is None:
                return
            art, fut, start = item
            kind, value = device.call("measure", art, self.options.measure_timeout)
            if kind == "ok":
                m = value.replace(worker=value.worker or device.name, started_at=start,
                                  compile_ms=value.compile_ms if value.compile_ms is not None
                                  else art.compile_ms)
                fut.set_result(m)
            elif kind == "fatal":
                fut.set_exception(value)
            else:
                status = failure_status(kind, Status.RUNTIME_ERROR)
                error = value or f"measurement exceeded {self.options.measure_timeout:g} s"
                fut.set_result(Measurement.failed(art.config, status, error, worker=device.name,
                                                  compile_ms=art.compile_ms, started_at=start))

    def close(self) -> None:
        for _ in self._builders:
            self._builds.put(None)
        for _ in self._devices:
            self._measures.put(None)
        for w in [*self._builders, *self._devices]:
            w.kill()
