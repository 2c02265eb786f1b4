"""The Executor contract: where builds and measurements run."""

from __future__ import annotations

import abc
import concurrent.futures as cf
import threading
import time
import traceback
from collections.abc import Callable, Collection, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from tunex.errors import TargetError
from tunex.targets._base import Target, built, measured
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["Activity", "BuildEvents", "Executor", "HangDeadline", "failed_build", "failure_status",
           "run_trial"]


class HangDeadline:
    """How long one measurement may run before it is taken for hung and cancelled.

    ``limit`` seconds until ``warmup`` measurements of the same workload have succeeded; from
    then on ``factor`` times the slowest of them, at least ``floor`` seconds and at most
    ``limit``. A config whose kernel never returns then costs seconds, not the whole limit,
    while every measurement that could win runs to its end: what is cut short has run
    ``factor`` times longer than a success of the same workload took. Kept per workload (a
    service measures many kernels and shapes, each with its own yardstick). ``factor``
    ``None``: always ``limit``. Thread-safe: an executor's measuring threads share one.
    """

    def __init__(self, limit: float, factor: float | None = 10.0, floor: float = 5.0,
                 warmup: int = 3) -> None:
        if not limit > 0:
            raise ValueError(f"the measurement limit must be above 0 s, not {limit!r}")
        if factor is not None and not factor >= 1:
            raise ValueError(f"the hang factor must be at least 1, not {factor!r}")
        self.limit = float(limit)
        self.factor = factor
        self.floor = min(float(floor), self.limit)
        self.warmup = warmup
        self._ok: dict[Hashable, tuple[int, float]] = {}  # successes, slowest
        self._lock = threading.Lock()

    def seconds(self, key: Hashable = None) -> float:
        """The deadline of a measurement of workload ``key`` starting now."""
        with self._lock:
            n, slowest = self._ok.get(key, (0, 0.0))
        if self.factor is None or n < self.warmup:
            return self.limit
        return min(self.limit, max(self.floor, self.factor * slowest))

    def record(self, seconds: float, key: Hashable = None) -> None:
        """A measurement of workload ``key`` succeeded in ``seconds`` (wall clock, as the
        executor saw it)."""
        with self._lock:
            n, slowest = self._ok.get(key, (0, 0.0))
            self._ok[key] = (n + 1, max(slowest, float(seconds)))

    def describe(self, seconds: float) -> str:
        """The error of a measurement cancelled at ``seconds``."""
        if seconds >= self.limit:
            return f"measurement exceeded {seconds:g} s"
        return (f"measurement exceeded {seconds:.3g} s ({self.factor:g}x the slowest of this "
                f"workload's successful measurements: taken for hung; a fixed limit: "
                f"--measure-timeout S)")


def failure_status(kind: str, otherwise: Status) -> Status:
    """Status of a trial whose worker answered ``kind``: "timeout", "lost", or an error."""
    return {"timeout": Status.TIMEOUT, "lost": Status.WORKER_LOST}.get(kind, otherwise)


def failed_build(artifact: Artifact, worker: str | None = None) -> Measurement:
    """The measurement of an artifact that could not be built or was pruned: never measured."""
    return Measurement.failed(artifact.config, artifact.status, artifact.error,
                              compile_ms=artifact.compile_ms, facts=artifact.facts,
                              worker=worker)


@dataclass(frozen=True)
class Activity:
    """What an executor is doing at one moment (:meth:`Executor.activity`), for progress
    displays.

    Attributes:
        builds_queued: builds submitted and waiting for a build worker.
        builds_running: builds compiling now.
        measures_queued: configs built and waiting for a free device.
        measuring: every device (measuring worker) by name, with the measurements it runs now
            (0 when idle; one at a time on a device).
    """

    builds_queued: int = 0
    builds_running: int = 0
    measures_queued: int = 0
    measuring: Mapping[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        """e.g. ``builds: 5 queued, 2 running; measuring: gpu0 1, gpu1 0, 3 built waiting``"""
        devices = ", ".join(f"{name} {n}" for name, n in self.measuring.items()) or "-"
        waiting = f", {self.measures_queued} built waiting" if self.measures_queued else ""
        return (f"builds: {self.builds_queued} queued, {self.builds_running} running; "
                f"measuring: {devices}{waiting}")


class Executor(abc.ABC):
    """Runs trials (build, then measure) and hands back futures of their measurements.

    Local and Ray executors behave the same: a future never fails for a bad config, a hung
    build or kernel, or a lost worker; it resolves to a :class:`Measurement` with status
    ``timeout`` / ``worker_lost`` / ... instead. A future raises only when the target cannot
    work at all (:class:`~tunex.errors.TargetError`).
    """

    #: How many trials it makes sense to keep in flight (the tuner's default batch size).
    slots: int = 1
    #: The target it builds and measures, bound at construction.
    target: Target

    @abc.abstractmethod
    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        """Start one trial of :attr:`target`."""

    def wait(self, futures: Collection[Future[Measurement]], timeout: float | None = None
             ) -> set[Future[Measurement]]:
        """Block until at least one of ``futures`` is done or ``timeout`` seconds pass; return
        the done ones. The tuner waits only through this, so an executor that measures in the
        waiting thread (:class:`~tunex.cluster.CallerExecutor`) does its measuring here."""
        done, _ = cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return set(done)

    def built(self, futures: Collection[Future[Measurement]]) -> int:
        """How many of ``futures`` are built and wait for a device (or are being measured).

        They hold no build worker, so the tuner keeps that many more trials in flight (up to
        twice its batch) and the build workers do not sit idle while measurements queue.
        An executor that says so also returns from :meth:`wait` when a build finishes, so
        the tuner can start the next one. Default 0: every trial in flight holds its slot
        until it is measured."""
        return 0

    def activity(self) -> Activity | None:
        """What runs now: builds queued and running, measurements running per device (see
        :class:`Activity`); None when this executor does not say (the default: a plugin
        executor need not track it). Cheap, and safe to call from any thread at any time (a
        progress display calls it several times a second); the counts are a snapshot, each
        consistent on its own."""
        return None

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Stop workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BuildEvents:
    """What an executor that counts :meth:`Executor.built` trials needs: the set of them, and a
    :meth:`wait` that also returns (with nothing done) when a build finished since it last
    returned, so the tuner can start the next build while the last one waits for a device."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events = 0
        self._seen = 0
        self.ready: set[Future[Measurement]] = set()  # built, not yet measured

    def track(self, fut: Future[Measurement]) -> None:
        """Wake :meth:`wait` when ``fut`` ends (and forget it was built)."""
        fut.add_done_callback(self._ended)

    def built(self, fut: Future[Measurement]) -> None:
        """``fut``'s build is done: it waits for a device now."""
        with self._cond:
            if not fut.done():
                self.ready.add(fut)
            self._events += 1
            self._cond.notify_all()

    def _ended(self, fut: Future[Measurement]) -> None:
        with self._cond:
            self.ready.discard(fut)
            self._cond.notify_all()

    def count(self, futures: Collection[Future[Measurement]]) -> int:
        ready = self.ready
        return sum(1 for f in futures if f in ready)

    def wait(self, futures: Collection[Future[Measurement]], timeout: float | None
             ) -> set[Future[Measurement]]:
        if not futures:  # nothing to wait for (as concurrent.futures.wait)
            return set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                done = {f for f in futures if f.done()}
                if done or self._events != self._seen:
                    self._seen = self._events
                    return done
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return done
                self._cond.wait(left)


def run_trial(target: Target, workload: Workload, config: Config, worker: str, *,
              phase: Callable[[str], None] | None = None) -> Measurement:
    """Build and measure one config in this process; any error of the config becomes data.
    ``phase`` is told ``"build"`` and then ``"measure"`` as each begins."""
    start = time.time()
    try:
        if phase is not None:
            phase("build")
        artifact = built(target, workload, config)
        if not artifact.ok:
            m = failed_build(artifact, worker)
        else:
            if phase is not None:
                phase("measure")
            m = measured(target, artifact)
    except TargetError:
        raise
    except Exception as e:  # a target that raises on a bad config: still a failed trial
        return Measurement.failed(config, Status.RUNTIME_ERROR,
                                  f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=5)}",
                                  worker=worker, started_at=start)
    if m.worker is None or m.started_at > start:
        m = m.replace(worker=m.worker or worker, started_at=start)
    return m
