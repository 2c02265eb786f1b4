"""Fake targets for the Ray tests, in a module Ray workers on other nodes can import."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping
from typing import Any

from tunex.targets._base import Target
from tunex.trial import Artifact, Config, Measurement, Status, Workload


class WhereTarget(Target):
    """Measures in ``seconds`` (sleeping, or spinning the CPU when ``spin``), reports where.

    ``for_device(options)`` copies it with ``options["host"]`` as its ``host`` (the way the
    riscv-ssh target takes a board's address) and ``options["seconds"]`` if given.
    """

    name = "where"
    noisy = False
    measure_slots = None

    def __init__(self, seconds: float = 0.2, spin: bool = False, host: str = "") -> None:
        self.seconds, self.spin, self.host = seconds, spin, host

    def fingerprint(self) -> Mapping[str, Any]:
        return {"device": "where"}

    def for_device(self, options: Mapping[str, Any]) -> WhereTarget:
        other = copy.copy(self)
        other.host = str(options.get("host", ""))
        other.seconds = float(options.get("seconds", self.seconds))
        return other

    def build(self, workload: Workload, config: Config) -> Artifact:
        return Artifact(workload, config, payload=os.getpid())

    def measure(self, artifact: Artifact) -> Measurement:
        t0 = time.time()
        if self.spin:
            end = time.thread_time() + self.seconds
            while time.thread_time() < end:
                pass
        else:
            time.sleep(self.seconds)
        c = artifact.config
        return Measurement(c, Status.OK, (1.0 + sum(map(float, c.values())) % 7,),
                           facts={"t0": t0, "t1": time.time(), "host": self.host,
                                  "built_by": artifact.payload})


class GateTarget(Target):
    """Builds and measurements that wait until their gate file (``build``, ``measure`` in
    ``gates``) exists: trials held in flight for as long as a test looks at them."""

    name = "gate"
    noisy = False
    measure_slots = None

    def __init__(self, gates: str | os.PathLike[str]) -> None:
        self.gates = os.fspath(gates)

    def fingerprint(self) -> Mapping[str, Any]:
        return {"device": "gate"}

    def _wait(self, gate: str) -> None:
        while not os.path.exists(os.path.join(self.gates, gate)):
            time.sleep(0.02)

    def build(self, workload: Workload, config: Config) -> Artifact:
        self._wait("build")
        return Artifact(workload, config)

    def measure(self, artifact: Artifact) -> Measurement:
        self._wait("measure")
        return Measurement(artifact.config, Status.OK, (1.0,))


def until(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Wait until ``condition()`` is true (polling), or fail saying ``what`` never happened."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)
