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
