"""The values that flow through a trial: Config, Workload, Artifact, Measurement.

::

    Space --ask--> Config --build--> Artifact --measure--> Measurement --record/tell--> ...

All of them are immutable and JSON-serialisable, so they can cross process boundaries and be
stored in the database as they are.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Artifact", "Config", "Measurement", "Status", "Workload", "canonical_json", "flatten",
           "settled"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(_jsonable(value), sort_keys=True, separators=(",", ":"))


def flatten(m: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping with its list and tuple values spread out as ``key[i]`` (a problem size
    recorded as ``[M, N, K]`` becomes three numbers that shapes can be compared by)."""
    out: dict[str, Any] = {}
    for k, v in m.items():
        if isinstance(v, (list, tuple)):
            out.update({f"{k}[{i}]": x for i, x in enumerate(v)})
        else:
            out[k] = v
    return out


def _float(value: Any) -> float:
    """``float(value)``, an integer too large for a float being infinite (as the time it
    stands for: no winner)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def config_value(value: Any) -> Any:
    """``value`` as a config holds it: a list (JSON's form of a tuple, such as a permutation)
    becomes a tuple, a numpy scalar a Python one."""
    if isinstance(value, list):
        return tuple(config_value(v) for v in value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


class Config(Mapping[str, Any]):
    """One point of a search space: an immutable, hashable mapping of parameter name to value.

    Values are ints, floats, strings, bools or tuples (permutations). Lists given on creation
    (e.g. from JSON) become tuples, numpy scalars become Python scalars, so two configs with the
    same values are equal and hash equal wherever they came from.
    """

    __slots__ = ("_data", "_hash", "_key")

    def __init__(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        data = dict(values or {}, **kwargs)
        self._data = {k: config_value(data[k]) for k in sorted(data)}
        if all(type(k) is str for k in self._data):
            # the canonical form already: sorted text keys, Python values (tuples write as
            # lists); skips canonical_json's conversion walk, which most of a config's cost was
            self._key = json.dumps(self._data, separators=(",", ":"))
        else:
            self._key = canonical_json(self._data)
        self._hash = hash(self._key)

    @property
    def key(self) -> str:
        """Canonical JSON text of the config: the identity used by the database."""
        return self._key

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def to_json(self) -> str:
        return self._key

    @classmethod
    def from_json(cls, text: str) -> Config:
        return cls(json.loads(text))

    def replace(self, **changes: Any) -> Config:
        return Config(self._data, **changes)

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._key == other._key
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._data.items())
        return f"Config({inner})"

    def __reduce__(self):
        return (Config, (self._data,))


@dataclass(frozen=True)
class Workload:
    """What is being tuned. Everything that changes the answer is in it; nothing else is.

    Attributes:
        kernel: kernel name (e.g. ``"matmul"`` or ``"convolution_kernel"``).
        kernel_hash: hash of the kernel's source (empty when unknown, e.g. replayed data).
        problem: the problem key after bucketing: shapes, dtypes, flags.
        target: the target fingerprint: device name and architecture, toolchain versions.
    """

    kernel: str
    kernel_hash: str = ""
    problem: Mapping[str, Any] = field(default_factory=dict)
    target: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, ok, want in (
                ("kernel", isinstance(self.kernel, str) and self.kernel
                 and self.kernel.isprintable(),  # no escape codes to a terminal it is shown on
                 "a kernel name (printable characters)"),
                ("kernel_hash", isinstance(self.kernel_hash, str),
                 "a string (the kernel source's hash, or '')"),
                ("problem", isinstance(self.problem, Mapping), "a mapping"),
                ("target", isinstance(self.target, Mapping), "a mapping")):
            if not ok:
                raise TypeError(f"Workload {name}={getattr(self, name)!r}: give {want} "
                                "(Workload(kernel, kernel_hash='', problem={...}, target={...}))")
        # Normalise so that equal workloads compare and hash equal.
        object.__setattr__(self, "problem", json.loads(canonical_json(self.problem)))
        object.__setattr__(self, "target", json.loads(canonical_json(self.target)))
        # the key, computed once: workloads are dict keys everywhere (a warm start's, a prior's)
        object.__setattr__(self, "_key", canonical_json(
            {"kernel": self.kernel, "kernel_hash": self.kernel_hash,
             "problem": self.problem, "target": self.target}))

    @property
    def key(self) -> str:
        return self._key  # type: ignore[attr-defined]

    @property
    def device(self) -> Any:
        """The device it was measured on: the target's ``device`` fact where it names one,
        else the whole fingerprint."""
        return self.target.get("device", self.target)

    @property
    def digest(self) -> str:
        """Short stable hash of :attr:`key`."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:16]

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Workload):
            return self.key == other.key
        return NotImplemented

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "kernel_hash": self.kernel_hash,
                "problem": dict(self.problem), "target": dict(self.target)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Workload:
        return cls(d["kernel"], d.get("kernel_hash", ""), d.get("problem", {}), d.get("target", {}))


class Status(str, enum.Enum):
    """Outcome of a trial. Only ``OK`` carries runtimes; every other status is a failure."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"
    PRUNED = "pruned"  # rejected after build (e.g. too much shared memory) before measuring
    INVALID = "invalid"  # the target cannot run it at all (e.g. absent from a recorded space)
    WORKER_LOST = "worker_lost"

    def __str__(self) -> str:
        return self.value


def settled(trials: Iterable[tuple[Any, str]]) -> set[Any]:
    """Of ``(config or its key, status)`` pairs, the configs that count as measured: those with
    a trial of any status but ``worker_lost``, or two lost ones. A worker (a service, a board)
    lost while it measured says nothing of the config, so a search run again measures it once
    more; the Tuner's resume and the database's claims both go by this."""
    lost: dict[Any, int] = {}
    out: set[Any] = set()
    for key, status in trials:
        if status == Status.WORKER_LOST:
            lost[key] = lost.get(key, 0) + 1
        else:
            out.add(key)
    return out | {k for k, n in lost.items() if n >= 2}


@dataclass(frozen=True)
class Artifact:
    """A config built for a target. A build failure is an Artifact with a failure status.

    ``payload`` is target-specific (a compiled kernel, a path to a binary, a cache key); it may be
    unpicklable for in-process targets. ``facts`` are compile-time facts (shared memory, registers,
    spills, code size) that the cost model learns from.
    """

    workload: Workload
    config: Config
    status: Status = Status.OK
    payload: Any = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    compile_ms: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class Measurement:
    """Result of one trial. Failures are data: they are stored and taught to the cost model.

    Attributes:
        config: the measured configuration.
        status: outcome; only :attr:`Status.OK` has runtimes.
        times_ms: runtime of each repeat, in milliseconds.
        compile_ms: build time, when known.
        facts: facts gathered on the way (compile-time facts, device clocks, ...).
        error: the error text of a failed trial.
        worker: which worker/device measured it.
        started_at, ended_at: wall-clock timestamps (seconds since the epoch).
    """

    config: Config
    status: Status
    times_ms: tuple[float, ...] = ()
    compile_ms: float | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    worker: str | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "times_ms", tuple(_float(t) for t in self.times_ms))
        bad = [t for t in self.times_ms if not (math.isfinite(t) and t >= 0)]
        if self.status is Status.OK and bad:
            # a timer that returned NaN or a negative time measured nothing: never a winner
            object.__setattr__(self, "status", Status.RUNTIME_ERROR)
            object.__setattr__(self, "error", f"the measurement gave invalid times {bad[:3]} "
                                              "(NaN, infinite or negative)")
        elif self.status is Status.OK and not self.times_ms:  # stored as ok, counted as failed
            object.__setattr__(self, "status", Status.RUNTIME_ERROR)
            object.__setattr__(self, "error", "the measurement is ok but gave no times")

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and len(self.times_ms) > 0

    @property
    def value(self) -> float:
        """Median runtime in ms; ``inf`` for a failed trial (so a failure never wins)."""
        return statistics.median(self.times_ms) if self.ok else math.inf

    @property
    def spread(self) -> float:
        """Relative interquartile range of the repeats (0 for a single repeat or a failure)."""
        if not self.ok or len(self.times_ms) < 2:
            return 0.0
        q = statistics.quantiles(self.times_ms, n=4, method="inclusive")
        med = self.value
        return (q[2] - q[0]) / med if med > 0 else 0.0

    def replace(self, **changes: Any) -> Measurement:
        return replace(self, **changes)

    @classmethod
    def failed(cls, config: Config, status: Status, error: str | None = None,
               **kwargs: Any) -> Measurement:
        return cls(config=config, status=status, error=error, **kwargs)
