"""The Target contract: how to build a config for a platform and how to measure it."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from tunex.errors import TargetError
from tunex.space import Space
from tunex.trial import Artifact, Config, Measurement, Workload

__all__ = ["DEVICE_LOST", "Target", "built", "measured"]

#: The fact a measurement carries (``facts[DEVICE_LOST] = True``, status ``worker_lost``) when
#: the device can measure no more in this process (a dead CUDA context): executors then replace
#: the measuring process (or actor) before the next trial.
DEVICE_LOST = "device_lost"


class Target(abc.ABC):
    """A platform that configs are built for and measured on.

    ``build`` is pure and safe to run anywhere, many at once (CPU workers, other processes): it
    must not need the device. ``measure`` needs the device and is called one at a time per device.
    Neither raises for a bad config: a config that cannot be built or run comes back as an
    :class:`Artifact` / :class:`Measurement` with a failure status. Exceptions are for a target
    that cannot work at all (missing toolchain, no device): :class:`~tunex.errors.TargetError`.
    """

    #: Registry name, e.g. ``"replay"`` or ``"triton_gpu"``.
    name: str = "target"
    #: Whether measuring the same artifact twice can disagree (real devices: yes). The tuner
    #: re-measures close leaders only on noisy targets.
    noisy: bool = True
    #: Measurements that may run at once on one machine: 1 for a device (a GPU, a board);
    #: ``None`` for a simulator, which any CPU can run (local executors use every CPU).
    measure_slots: int | None = 1
    #: Modules its worker processes need (its toolchain, e.g. torch and Triton): local executors
    #: import them once in the fork server their workers come from (see
    #: :func:`tunex.cluster.worker_context`), not once per worker.
    worker_imports: tuple[str, ...] = ()

    @abc.abstractmethod
    def fingerprint(self) -> Mapping[str, Any]:
        """Facts that change measured results: device name and architecture, toolchain versions.

        Becomes :attr:`Workload.target`, so it must be stable across runs on the same setup.
        """

    @abc.abstractmethod
    def build(self, workload: Workload, config: Config) -> Artifact:
        """Build ``config`` for ``workload``. Never raises for a bad config."""

    @abc.abstractmethod
    def measure(self, artifact: Artifact) -> Measurement:
        """Measure a built artifact on the device. Never raises for a bad config.

        An artifact whose build failed comes back as a measurement with the same status. A
        config that leaves the device unusable in this process comes back ``worker_lost`` with
        the fact :data:`DEVICE_LOST`; measuring again in this process then raises
        :class:`~tunex.errors.TargetError`.
        """

    def prepare(self, kernel: Any, problem: Mapping[str, Any]) -> tuple[Space, Workload]:
        """The bound space and the workload for tuning ``kernel`` on ``problem`` here.

        Targets that tune library kernels (``kernels/``) override this; a replay target
        ignores its arguments and returns its recorded space.
        """
        raise TargetError(f"target {self.name!r} cannot tune kernel {kernel!r}")

    def open(self) -> None:  # noqa: B027 - nothing to acquire by default
        """Acquire the device before the first measurement (a CUDA context, buffers, driver
        stubs). Measuring workers call it as they start, so this overlaps the first builds;
        ``measure`` must work without it. Must not raise for a missing device: ``measure``
        reports that."""

    def facts(self) -> Mapping[str, float]:
        """Numeric facts about the target that the cost model may use (e.g. SM count)."""
        return {}

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release devices and worker processes. Targets are context managers too."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def built(target: Target, workload: Workload, config: Config) -> Artifact:
    """``target.build(workload, config)``, the one way executors call it.

    Raises:
        TargetError: it returned something other than an :class:`~tunex.trial.Artifact` (a
            bug of the target that every trial would meet: the search stops and says so).
    """
    art = target.build(workload, config)
    if not isinstance(art, Artifact):
        raise TargetError(f"{type(target).__name__}.build() returned {type(art).__name__}, "
                          "not a tunex Artifact: fix the target (a config that cannot be "
                          "built is an Artifact with a failed status)")
    return art


def measured(target: Target, artifact: Artifact) -> Measurement:
    """``target.measure(artifact)``, the one way executors call it.

    Raises:
        TargetError: it returned something other than a :class:`~tunex.trial.Measurement`
            (without this a measuring thread died on it and the search waited forever).
    """
    m = target.measure(artifact)
    if not isinstance(m, Measurement):
        raise TargetError(f"{type(target).__name__}.measure() returned {type(m).__name__}, "
                          "not a tunex Measurement: fix the target (a failed run is "
                          "Measurement.failed(config, status, error))")
    return m
