"""Replay target: answers measurements from a recorded, brute-forced tuning space.

Reads Kernel Tuner cache files (gzip'd or plain JSON: ``tune_params_keys``, ``tune_params`` and
``cache`` keyed by the comma-joined parameter values, each entry with ``time`` (mean ms, or an
error string for a failed config) and ``times`` (the repeats); a cache Kernel Tuner left open,
its run stopped early, included). tunex records its own spaces in the same format, with an
optional top-level ``restrictions`` list of constraint expressions. T4 results (the FAIR
auto-tuning schema, which Kernel Tuner writes as its output file and ``tunex db export
--format t4`` too) are read as such a cache (:func:`cache_of_t4`).

The space searched is the recorded parameters with their constraints, taken from (in order)
the file's ``restrictions``, an explicit T1 space definition, or a T1 definition found beside
the data (``../space_definitions/*.json`` whose parameters cover the file's); a point of it
missing from the cache fails as ``invalid``, which costs a trial, as an unmeasurable config does
on hardware. Without any of them, the space is the recorded points (``space="recorded"``): a
brute-forced cache holds every point its author's constraints admit, failures included, and
none other (Kernel Tuner leaves the excluded ones out), so its keys are the declared space; a
search of the Cartesian product instead (``space="product"``) spends most of its trials on
points nobody could measure (gemm_clblast: 82,944 points for 17,956 recorded).

Each parameter is a :class:`~tunex.space.Choice` over its recorded values, under Choice's own
rule: numbers are ordered (one step: the next value listed), names (a loop order, a code style)
are not (one step: any other name), whatever order the file lists them in.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tunex._io import read_bounded
from tunex.errors import SpaceError, TargetError
from tunex.space import Choice, Constraint, Space
from tunex.targets._base import Target
from tunex.trial import Artifact, Config, Measurement, Status, Workload, config_value

__all__ = ["ReplayTarget", "load_recorded"]

_FAILURES = {
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.RUNTIME_ERROR,
    "InvalidConfig": Status.INVALID,
    # kinds Kernel Tuner's strings lack, as T4 results give them (read by cache_of_t4)
    Status.TIMEOUT.value: Status.TIMEOUT,
    Status.WRONG_RESULT.value: Status.WRONG_RESULT,
}


def _number(value: Any) -> float | None:
    """A recorded figure in ms (a compile time), or None where the file holds something else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits: no figure a run could take
        return None


def recorded_times(entry: Mapping[str, Any]) -> list[float] | None:
    """An entry's recorded repeats (``times``), or None where it holds none or something other
    than a list of runtimes (numbers, finite and not negative): the entry's ``time`` stands
    then."""
    times = entry.get("times")
    if not isinstance(times, list) or not times:
        return None
    out = [_number(t) for t in times]
    ok = [t for t in out if t is not None and math.isfinite(t) and t >= 0]
    return ok if len(ok) == len(out) else None


def _json(raw: bytes) -> Any:
    """The document in ``raw``. Kernel Tuner appends each entry to its cache file as it is
    measured (``"key": {...},``) and closes the file only when tuning ends: a cache left open by
    a run that stopped early is read as Kernel Tuner reads it, closed."""
    try:
        return json.loads(raw)
    except ValueError as exc:
        text = raw.rstrip()
        text = text[:-1] if text.endswith(b",") else text
        try:
            return json.loads(text + b"}\n}")
        except ValueError:
            raise exc from None


#: The most a gzip'd recorded space may unpack to (the largest shared one is 16 MB).
MAX_RECORDED_BYTES = 1 << 30


#: T4's invalidity values as the cache's error strings (what the replay fails them with).
_T4_FAILURES = {"compile": "CompilationFailedConfig", "constraints": "InvalidConfig",
                "runtime": "RuntimeFailedConfig", "timeout": Status.TIMEOUT.value,
                "correctness": Status.WRONG_RESULT.value}
#: ... and T4's time units, in ms (Kernel Tuner writes "milliseconds"; the schema leaves the
#: unit a free string, so the usual spellings of each are read).
_T4_UNITS = {"ms": 1.0, "s": 1e3, "us": 1e-3, "ns": 1e-6, "": 1.0}
_T4_UNIT_NAMES = {"msec": "ms", "millisecond": "ms", "milliseconds": "ms",
                  "sec": "s", "secs": "s", "second": "s", "seconds": "s",
                  "µs": "us", "μs": "us", "usec": "us", "microsecond": "us",
                  "microseconds": "us", "nsec": "ns", "nanosecond": "ns", "nanoseconds": "ns"}


def _t4_scale(unit: str) -> float | None:
    """ms per ``unit`` of a T4 measurement, or None for a unit that is not a time."""
    u = unit.strip().lower()
    return _T4_UNITS.get(_T4_UNIT_NAMES.get(u, u))


def cache_of_t4(doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """T4 results (the FAIR auto-tuning schema: ``schema_version`` and ``results``, each with
    ``configuration``, ``invalidity``, ``measurements`` and ``times``; Kernel Tuner writes them
    with ``store_output_file``) as a cache document: the parameters in the order the
    configurations first name them, the values each took, one entry per configuration (its
    objective, ``time`` by default, in ms, and its ``runtimes`` in the objective's unit as the
    repeats; a configuration measured more than once keeps every repeat). T4 states no
    constraints, so the replay searches the configurations it holds."""
    keys: list[str] = []
    values: dict[str, list[Any]] = {}
    seen: dict[str, set[Any]] = {}
    entries: dict[tuple[Any, ...], dict[str, Any]] = {}
    meta = doc.get("metadata")
    # the file's own time unit (the FAIR hub's files: "timeunit": "milliseconds") stands where
    # a measurement names none
    default_unit = str(meta.get("timeunit", "ms")) if isinstance(meta, Mapping) else "ms"
    for i, r in enumerate(doc["results"]):
        conf = r.get("configuration") if isinstance(r, Mapping) else None
        if not isinstance(conf, Mapping) or not conf:
            raise TargetError(f"{path}: T4 result {i} has no configuration object; every "
                              "result needs one (\"configuration\": {\"block\": 64, ...})")
        for k, v in conf.items():
            if k not in values:
                keys.append(str(k))
                values[k] = []
                seen[k] = set()
            if config_value(v) not in seen[k]:  # unhashable: refused as not a space, below
                seen[k].add(config_value(v))
                values[k].append(v)
        objectives = r.get("objectives") or ["time"]
        objective = str(objectives if isinstance(objectives, str) else objectives[0])
        measured = {str(m.get("name")): m for m in r.get("measurements") or ()
                    if isinstance(m, Mapping)}
        if objective != "time" and "time" in measured:
            objective = "time"  # the replay's figure is a runtime; Kernel Tuner writes every
            # figure it measured, an objective such as GFLOP/s (higher is better) among them
        found = measured.get(objective)
        value = found.get("value") if found else None
        unit = str(found.get("unit") or default_unit) if found else default_unit
        scale = _t4_scale(unit)
        if objective != "time" and found and not str(found.get("unit") or "").strip():
            raise TargetError(f"{path}: T4 result {i} measures its objective {objective!r} "
                              "with no unit and no time: tunex replays runtimes; give each "
                              "result a \"time\" measurement (in ms)")
        if scale is None:
            raise TargetError(f"{path}: T4 result {i} gives {objective} in {unit!r}, a unit "
                              f"tunex does not convert; write it in one of "
                              f"{', '.join(u for u in _T4_UNITS if u)} (or spelled out: "
                              "milliseconds, seconds, ...)")
        invalidity = r.get("invalidity", "correct")
        entry: dict[str, Any] = dict(conf)
        if invalidity != "correct":
            entry["time"] = _T4_FAILURES.get(str(invalidity), "RuntimeFailedConfig")
        elif (number := _number(value)) is None:
            entry["time"] = "RuntimeFailedConfig"  # nothing measured that the replay can use
        else:
            entry["time"] = number * scale
            times = r.get("times") if isinstance(r.get("times"), Mapping) else {}
            runs = recorded_times({"times": times.get("runtimes")})
            if runs:
                entry["times"] = [t * scale for t in runs]
            # Kernel Tuner writes "compilation", tunex's own export "compilation_time": ms
            compile_ms = _number(times.get("compilation", times.get("compilation_time")))
            if compile_ms is not None:
                entry["compile_time"] = compile_ms
        point = tuple(config_value(conf.get(k)) for k in keys)
        first = entries.setdefault(point, entry)
        if first is not entry and isinstance(first.get("time"), float) and isinstance(
                entry["time"], float):  # measured again: one entry, every repeat
            reps = (first.get("times") or [first["time"]]) + (entry.get("times")
                                                               or [entry["time"]])
            first.update(time=sum(reps) / len(reps), times=reps)
    for k in keys:
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values[k]):
            values[k].sort()
    cache: dict[str, dict[str, Any]] = {}
    for e in entries.values():
        if any(k not in e for k in keys):  # a configuration that leaves a parameter out
            continue
        name = ",".join(str(e[k]) for k in keys)
        cache[name if name not in cache else f"{name}#{len(cache)}"] = e
    return {"kernel_name": doc.get("kernel_name") or path.name.split(".")[0],
            "device_name": doc.get("device_name"), "tune_params_keys": keys,
            "tune_params": values, "cache": cache}


def load_recorded(path: str | Path) -> dict[str, Any]:
    """Read a recorded space (``.json`` or ``.json.gz``) with a clear error when it is not one."""
    p = Path(path)
    if p.is_dir():
        raise TargetError(f"{p} is a directory; pass replay:PATH to one recorded space in it "
                          f"(e.g. {p}/*.json.gz)")
    if not p.is_file():
        raise TargetError(f"recorded space {p} does not exist; pass replay:PATH to a cache file")
    try:
        raw = read_bounded(p, MAX_RECORDED_BYTES)
        if raw[:2] == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as z:
                raw = z.read(MAX_RECORDED_BYTES + 1)  # a small file may unpack to any size
            if len(raw) > MAX_RECORDED_BYTES:
                raise TargetError(
                    f"{p} unpacks to over {MAX_RECORDED_BYTES >> 20} MiB (a gzip bomb?), more "
                    "than any recorded space tunex reads; nothing was read from it")
        doc = _json(raw)
        if isinstance(doc, dict) and "cache" not in doc and "results" in doc:
            if not isinstance(doc["results"], list):
                raise TargetError(f"{p}: its T4 results are {type(doc['results']).__name__}, "
                                  "not a list of results; write \"results\": [{...}, ...]")
            doc = cache_of_t4(doc, p)
        for key in ("tune_params_keys", "tune_params", "cache"):
            doc[key]
    except (OSError, EOFError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise TargetError(
            f"{p} is not a recorded tuning space (a Kernel Tuner cache: tune_params_keys, "
            f"tune_params, cache; or T4 results: schema_version, results): {e}"
        ) from None
    return doc


class _Member:
    """A constraint's rule: the values of ``names`` are one of the tuples ``seen`` (a class,
    so that the space can be pickled to a service's worker processes)."""

    def __init__(self, seen: frozenset[tuple[Any, ...]], names: tuple[str, ...]) -> None:
        self.seen, self.names = seen, names

    def __call__(self, **values: Any) -> bool:
        return tuple(values[n] for n in self.names) in self.seen


def _find_definition(path: Path, keys: list[str]) -> Path | None:
    """A T1 definition beside the data whose parameters cover the recorded ones."""
    for folder in (path.parent.parent / "space_definitions", path.parent / "space_definitions"):
        if not folder.is_dir():
            continue
        for f in sorted(folder.glob("*.json")):
            try:
                names = {p["Name"] for p in
                         json.loads(f.read_text())["ConfigurationSpace"]["TuningParameters"]}
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                continue
            if set(keys) <= names:
                return f
    return None


class ReplayTarget(Target):
    """Measurements looked up in a recorded space.

    Args:
        path: the recorded space file.
        noisy: answer with one recorded repeat drawn at random instead of the mean, which makes
            the replay as noisy as measuring on the device.
        seed: seed for the noisy draws.
        definition: a T1 space definition to take constraints from (default: found beside the
            data, see the module docstring).
        space: where the file states no constraints and no definition is found: ``"recorded"``
            (the default: the recorded points are the space) or ``"product"`` (every
            combination of the recorded values; those not recorded fail as ``invalid``).
    """

    name = "replay"

    def __init__(self, path: str | Path, *, noisy: bool = False, seed: int | None = None,
                 definition: str | Path | None = None, space: str = "recorded") -> None:
        self.path = Path(path)
        if space not in ("recorded", "product"):
            raise TargetError(f"replay option space={space!r} is not one of recorded, product: "
                              "write space=recorded (the recorded points, where the file states "
                              "no constraints) or space=product (every combination of the "
                              "recorded values)")
        self._unconstrained = space
        #: the space as the file declares it: :attr:`space` but where that is the recorded
        #: points of a file stating no constraints (expression constraints only, so it can be
        #: written out: an import declares it)
        self.declared: Space
        if noisy not in (True, False) or not isinstance(noisy, (bool, int)):
            # replay:PATH?noisy=off must not read as a non-empty string, that is: noisy
            raise TargetError(f"replay option noisy={noisy!r} is neither on nor off: write "
                              "noisy=1 (or true) for draws of recorded repeats, noisy=0 (or "
                              "false) for the recorded mean")
        doc = load_recorded(self.path)
        self.noisy = bool(noisy)
        self.rng = np.random.default_rng(seed)
        try:
            self.doc_meta = {k: v for k, v in doc.items() if k != "cache"}
            self.keys: list[str] = [str(k) for k in doc["tune_params_keys"]]
            self.values: dict[str, list[Any]] = {
                k: [config_value(v) for v in doc["tune_params"][k]] for k in self.keys}
            for k in self.keys:
                if not isinstance(doc["tune_params"][k], list) or not self.values[k]:
                    raise TargetError(f"{self.path}: tune_params gives {k} "
                                      f"{doc['tune_params'][k]!r}, not a list of the values "
                                      f"recorded; list them (\"{k}\": [1, 2, 4], say)")
            self.entries: dict[tuple[Any, ...], Mapping[str, Any]] = {}
            named: dict[tuple[Any, ...], str] = {}
            for name, entry in doc["cache"].items():
                try:
                    point = tuple(config_value(entry[k]) for k in self.keys)
                    twin = self.entries.setdefault(point, entry)
                except (KeyError, TypeError, IndexError):  # not a full, hashable entry: skip
                    continue
                if twin is not entry and twin != entry:
                    self._twins(named[point], twin, name, entry, doc["tune_params"])
                named.setdefault(point, name)
            if not self.entries:
                self._nothing_recorded(doc["cache"])
            self.space = self._space(doc, definition)
            if next(self._recorded_points(), None) is None:
                self._none_in_space()
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise TargetError(
                f"{self.path} is not a usable recorded space ({type(exc).__name__}: {exc}): it "
                "needs tune_params_keys, tune_params with a list of values per key, and a cache "
                "of entries naming every key; re-record it or fix the file") from None
        self.digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    def _nothing_recorded(self, cache: Mapping[str, Any]) -> None:
        """Refuse a recording none of whose entries a config can be looked up in: every trial
        of a search would fail as not recorded."""
        if not cache:
            raise TargetError(f"{self.path}: the cache holds no entry, so there is nothing to "
                              "replay; record the space first (one cache entry per measured "
                              "config)")
        name, entry = next(iter(cache.items()))
        lacks = [k for k in self.keys if k not in entry] if isinstance(entry, Mapping) else []
        raise TargetError(
            f"{self.path}: none of the {len(cache)} cache entries names a value for every "
            f"parameter of tune_params_keys ({', '.join(self.keys)}): entry {name!r} "
            + (f"lacks {', '.join(lacks)}" if lacks else "holds an object where a value "
               "belongs" if isinstance(entry, Mapping) else "is not an object of values")
            + "; make tune_params_keys name the parameters the entries record, or re-record "
            "the file")

    def _none_in_space(self) -> None:
        """Refuse a recording none of whose entries is a point of the space searched: every
        trial of a search would fail as not recorded."""
        point = next(iter(self.entries))
        full = dict(zip(self.keys, point))
        why = self.space.violations({n: full[n] for n in self.space.names if n in full})
        other = {k: full[k] for k, v in self.space.bound.items() if k in full and full[k] != v}
        raise TargetError(
            f"{self.path}: none of the {len(self.entries)} recorded configs is a point of the "
            f"space searched (the first, {', '.join(f'{k}={v!r}' for k, v in full.items())}: "
            + ("; ".join(why) if why else f"records {other} where tune_params has "
               f"{ {k: self.space.bound[k] for k in other} }")
            + "); make tune_params (and restrictions, or the space definition) admit the values "
            "the entries record")

    def _recorded_points(self) -> Iterator[tuple[Config, Mapping[str, Any]]]:
        """The recorded entries that are points of the space, each with its config."""
        domains = {p.name: {v: v for v in p.values} for p in self.space.params}
        for point, entry in self.entries.items():
            full = dict(zip(self.keys, point))
            if any(n not in full or full[n] not in domains[n] for n in domains):
                continue
            config = Config({n: domains[n][full[n]] for n in domains})
            if self._entry(config) is entry and config in self.space:
                yield config, entry

    def _twins(self, first: str, one: Mapping[str, Any], second: str, other: Mapping[str, Any],
               declared: Any) -> None:
        """Refuse two entries that are one config over ``tune_params_keys`` (one would answer
        for both): usually a tuned parameter left out of ``tune_params_keys``."""
        left_out = sorted(str(k) for k in {*one, *other} if k not in self.keys
                          and k in declared and one.get(k) != other.get(k))
        config = ", ".join(f"{k}={one[k]!r}" for k in self.keys)
        raise TargetError(
            f"{self.path}: cache entries {first!r} and {second!r} record different results for "
            f"one config ({config}) over tune_params_keys {self.keys}"
            + (f"; they differ in {', '.join(left_out)}, which tune_params_keys leaves out: list "
               "every tuned parameter in tune_params_keys" if left_out else
               ": keep one of them") + ", or re-record the file")

    def _space(self, doc: Mapping[str, Any], definition: str | Path | None) -> Space:
        name = str(doc.get("kernel_name") or self.path.stem)
        restrictions = doc.get("restrictions")
        if isinstance(restrictions, str):  # one expression, not a list of its characters
            restrictions = [restrictions]
        t1 = None
        if restrictions is not None and definition:  # it would be ignored without a word
            raise TargetError(f"{self.path} states its own restrictions, so definition="
                              f"{definition} would not be read; leave ?definition= out")
        if restrictions is None:
            t1 = Path(definition) if definition else _find_definition(self.path, self.keys)
        if t1 is not None:
            # T1 constants the data does not record (e.g. a fixed GEMMK) stay bound constants
            try:
                s = Space.from_t1(t1, values=self.values)
            except SpaceError as exc:  # the definition's fault, not the recording's
                raise TargetError(
                    f"{self.path}: its space definition {t1} cannot be used ({exc}); pass "
                    "replay:PATH?definition=FILE naming a T1 definition of the recorded "
                    "parameters" + ("" if definition else ", or move the recording away from "
                                    "the one found beside it")) from None
            unrecorded = [n for n in s.names if n not in self.keys]
            if unrecorded:  # one recorded time would answer for each of their values
                raise TargetError(
                    f"{self.path}: the space definition {t1} gives {', '.join(unrecorded)} "
                    f"several values, but the recording holds no such parameter (it records "
                    f"{', '.join(self.keys)}), so its times cannot tell those values apart; "
                    "pass replay:PATH?definition=FILE naming a definition of the recorded "
                    "parameters" + ("" if definition else
                                    ", or move the recording away from the one found beside it"))
            s.name = name
            self.declared = s
            return s
        # Choice's own rule (numbers ordered, names not): see the module's docstring
        params = [Choice(k, v) for k, v in self.values.items() if len(v) > 1]
        if not params:
            fixed = ", ".join(f"{k}={v[0]!r}" for k, v in self.values.items() if v)
            raise TargetError(
                f"{self.path}: " + (f"every parameter has one value ({fixed})" if fixed else
                                    "no parameters (tune_params_keys is empty)")
                + ", so there is nothing to tune; record a space with at least one parameter "
                "that takes two or more values")
        consts = {k: v[0] for k, v in self.values.items() if len(v) == 1}
        declared = Space(params, restrictions or (), problem=list(consts), bound=consts,
                         name=name)
        self.declared = declared
        if restrictions is not None or self._unconstrained == "product":
            return declared
        return Space(params, self._recorded_prefixes([p.name for p in params], consts),
                     problem=list(consts), bound=consts, name=name)

    def _recorded_prefixes(self, names: list[str], consts: Mapping[str, Any]) -> list[Constraint]:
        """Constraints that admit exactly the recorded points: for each k, "the first k
        parameters take values some recorded point takes together". One constraint per prefix
        (rather than one over all parameters) lets the space prune a partial assignment as
        soon as no recorded point continues it, so counting and sampling visit the recorded
        points, not the Cartesian product."""
        at = {k: i for i, k in enumerate(self.keys)}
        domains = {k: set(self.values[k]) for k in names}
        points = [p for p in self.entries
                  if all(p[at[k]] == v for k, v in consts.items())
                  and all(p[at[n]] in domains[n] for n in names)]
        if not points:  # none is a point of the declared values: refused with why, later
            return []
        out = []
        combos = 1
        for k in range(1, len(names) + 1):
            head = tuple(names[:k])
            seen = frozenset(tuple(p[at[n]] for n in head) for p in points)
            combos *= len(domains[names[k - 1]])
            if len(seen) == combos:  # every combination recorded: nothing to prune here
                continue
            out.append(Constraint(_Member(seen, head), names=head, description=(
                f"({', '.join(head)}) recorded together" if k < len(names) else "recorded")))
        return out

    def workload(self) -> Workload:
        """The workload this recording measured: its problem as the recording names it (a
        tunex recording's workload names its sizes, ``{"M": 1024, ...}``, as a search on the
        device named them), else ``{"problem_size": [...]}``."""
        return Workload(
            kernel=str(self.doc_meta.get("kernel_name") or self.path.stem),
            kernel_hash=self.digest,
            problem=self._named_problem() or {"problem_size": self.doc_meta.get("problem_size")},
            target=self.fingerprint(),
        )

    def _named_problem(self) -> dict[str, Any] | None:
        """A tunex recording's ``workload.problem`` where it is a map of names to plain
        values (numbers, text, flags), else None."""
        recorded = self.doc_meta.get("workload")
        problem = recorded.get("problem") if isinstance(recorded, Mapping) else None
        if not isinstance(problem, Mapping) or not problem:
            return None
        for k, v in problem.items():
            if not isinstance(k, str) or not k or not (
                    isinstance(v, (str, bool)) or (isinstance(v, (int, float))
                                                  and math.isfinite(v))):
                return None
        return dict(problem)

    def prepare(self, kernel: Any = None, problem: Mapping[str, Any] | None = None
                ) -> tuple[Space, Workload]:
        """The recorded space and workload (a replay target tunes what it recorded)."""
        if kernel and str(kernel) != self.workload().kernel:
            raise TargetError(f"{self.path} records {self.workload().kernel!r}, not {kernel!r}; "
                              "leave KERNEL out when replaying")
        return self.space, self.workload()

    def fingerprint(self) -> Mapping[str, Any]:
        device = self.doc_meta.get("device_name") or self.path.name.split(".")[0]
        return {"device": device, "replay": self.path.name}

    def _entry(self, config: Config) -> Mapping[str, Any] | None:
        full = {**self.space.bound, **config}
        try:
            return self.entries.get(tuple(full[k] for k in self.keys))
        except KeyError:
            return None

    def build(self, workload: Workload, config: Config) -> Artifact:
        entry = self._entry(config)
        if entry is None:
            return Artifact(workload, config, Status.INVALID,
                            error="configuration is not in the recorded space")
        compile_ms = _number(entry.get("compile_time"))
        t = entry.get("time")
        if isinstance(t, str) and _FAILURES.get(t) is Status.COMPILE_ERROR:
            return Artifact(workload, config, Status.COMPILE_ERROR, error=t, compile_ms=compile_ms)
        return Artifact(workload, config, payload=entry, compile_ms=compile_ms)

    def measure(self, artifact: Artifact) -> Measurement:
        config = artifact.config
        if not artifact.ok:
            return Measurement.failed(config, artifact.status, artifact.error,
                                      compile_ms=artifact.compile_ms, worker="replay")
        entry = artifact.payload
        t = entry.get("time")
        if isinstance(t, str) or t is None:
            status = _FAILURES.get(str(t), Status.RUNTIME_ERROR)
            return Measurement.failed(config, status, str(t), compile_ms=artifact.compile_ms,
                                      worker="replay")
        if _number(t) is None:  # a list, an object, a bool: the recording measured nothing
            return Measurement.failed(config, Status.RUNTIME_ERROR,
                                      f"the recorded time {t!r} is not a number",
                                      compile_ms=artifact.compile_ms, worker="replay")
        times = recorded_times(entry) or [t]
        if self.noisy:
            times = [times[int(self.rng.integers(len(times)))]]
        else:
            times = [t]
        return Measurement(config, Status.OK, tuple(times), compile_ms=artifact.compile_ms,
                           worker="replay")

    # -- for scoring searches -----------------------------------------------------------------

    def true_time(self, config: Config) -> float:
        """Recorded mean runtime of a config (``inf`` if it failed or is not recorded)."""
        entry = self._entry(config)
        t = None if entry is None else _number(entry.get("time"))
        return t if t is not None and math.isfinite(t) and t >= 0 else float("inf")

    def optimum(self) -> float:
        """Lowest recorded mean runtime among valid points of the space."""
        # the recorded entries that are points of the space, not the space's points: a sparse
        # recording of a declared space of 2^40 points is not enumerated
        return min((self.true_time(c) for c, _ in self._recorded_points()), default=math.inf)
