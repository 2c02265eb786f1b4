"""Kernel Tuner's files: import a cache file (or T4 results, read as one: see
:func:`tunex.targets.replay.cache_of_t4`) into the database, export a workload's trials as a
cache file or as FAIR T4 results.

- **Cache file** (``.json`` or ``.json.gz``): ``device_name``, ``kernel_name``, ``problem_size``,
  ``tune_params_keys``, ``tune_params`` and ``cache``, keyed by the comma-joined parameter
  values; each entry holds the parameters, ``time`` (mean ms, or ``InvalidConfig``,
  ``CompilationFailedConfig``, ``RuntimeFailedConfig``) and ``times`` (the repeats). The same
  reader as the ``replay`` target reads it, so an imported cache is the workload that
  ``tunex search --target replay:FILE`` tunes: its trials resume that search, and seed the cost
  model of other workloads of the kernel.
- **T4 results** (the FAIR auto-tuning community's results schema 1.0.0): ``schema_version``
  and ``results``, one per trial in order: ``timestamp``, ``configuration``, ``objectives``,
  ``times`` (``compilation_time``, ``runtimes``, ...), ``invalidity``, ``correctness`` and
  ``measurements``.

tunex ranks configs by the median of their repeats, Kernel Tuner by the mean: an imported trial
keeps every repeat, and an exported entry's ``time`` is their mean again.
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import io
import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunex.db import Database, Trial
from tunex.db._database import MOMENTS
from tunex.errors import SpaceError, TunexError
from tunex.trial import Config, Measurement, Status, Workload

__all__ = ["export_cache", "export_t4", "import_cache", "is_cache"]

#: tunex's failure statuses as Kernel Tuner's error strings (it has three).
_KT_ERRORS = {
    Status.COMPILE_ERROR: "CompilationFailedConfig", Status.INVALID: "InvalidConfig",
    Status.PRUNED: "InvalidConfig",
}
#: ... and as T4's invalidity values.
_T4_INVALIDITY = {
    Status.OK: "correct", Status.COMPILE_ERROR: "compile", Status.RUNTIME_ERROR: "runtime",
    Status.WORKER_LOST: "runtime", Status.TIMEOUT: "timeout",
    Status.WRONG_RESULT: "correctness", Status.PRUNED: "constraints",
    Status.INVALID: "constraints",
}
# Entry fields that are not parameters, kept in the trial's facts under "kernel_tuner".
_OWN = ("time", "times", "compile_time", "timestamp")
_SOURCE = "kernel_tuner"


def is_cache(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` looks like a Kernel Tuner cache file or T4 results (gzip'd and not a
    gzip'd tunex export, or a JSON object naming ``tune_params_keys``, or ``schema_version``
    and ``results``), not a tunex json/jsonl export."""
    head = b""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as z:
                inner = z.read(1 << 16).lstrip()
            return not (inner[:1] == b"[" or b'"workload_spec"' in inner.split(b"\n", 1)[0])
    except (OSError, EOFError):  # a damaged gzip file: the cache reader says what is wrong
        return head[:2] == b"\x1f\x8b"
    first = head.lstrip()[:1]
    line = head.lstrip().split(b"\n", 1)[0]
    return first == b"{" and (b'"tune_params_keys"' in head or (
        b'"schema_version"' in head and b'"results"' in head)) and b'"workload_spec"' not in line


def _stamp(entry: Mapping[str, Any], fallback: float) -> float:
    text = entry.get("timestamp")
    if isinstance(text, str):
        try:
            when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.timezone.utc)
            stamp = when.timestamp()
            if MOMENTS[0] <= stamp < MOMENTS[1]:  # else a date no export could write back
                return stamp
        except ValueError:
            pass
    return fallback


def import_cache(db: Database, path: str | os.PathLike[str]) -> tuple[Workload, int]:
    """Import every entry of a Kernel Tuner cache file as a trial; return the workload and how
    many trials were new (importing the same file again adds none).

    Each entry becomes the trial a replay of the file would record for its config, with every
    repeat kept and strategy ``kernel_tuner``; the entry's other fields (verification and
    benchmark times, ...), the constant parameters and the parameter order go to the trial's
    ``facts["kernel_tuner"]``, so :func:`export_cache` writes the same file back.
    """
    from tunex.targets.replay import ReplayTarget, recorded_times

    target = ReplayTarget(Path(os.fspath(path)))
    workload = target.workload()
    bound = dict(target.space.bound)
    constants = {k: v for k, v in bound.items() if k in target.keys}
    base = Path(os.fspath(path)).stat().st_mtime
    # an entry carries no time of its own (its stamp comes from the file's mtime, which a copy
    # or a checkout changes): one imported before is known by its config
    known = {m.config for m in db.measurements(workload) if m.worker == _SOURCE}
    lines: list[str] = []
    for i, entry in enumerate(target.entries.values()):
        config = Config({k: entry[k] for k in target.keys if k not in bound})
        if config in known:
            continue
        m = target.measure(target.build(workload, config))
        if m.ok:
            m = m.replace(times_ms=tuple(recorded_times(entry) or (entry["time"],)))
        started = _stamp(entry, base + i * 1e-3)
        bench = entry.get("benchmark_time")
        ended = started + (bench / 1000.0 if isinstance(bench, (int, float))
                           and not isinstance(bench, bool) and 0 <= bench < 1e9 else 0.0)
        extra = {k: v for k, v in entry.items() if k not in _OWN and k not in target.keys}
        facts = {_SOURCE: {"fields": extra, "constants": constants, "keys": target.keys,
                           "timestamp": entry.get("timestamp")}}
        m = m.replace(facts=facts, worker=_SOURCE, started_at=started, ended_at=ended)
        record = _record(workload, m)
        if not lines:  # the recorded space: what the trials are checked against
            with contextlib.suppress(SpaceError):
                record["workload_space"] = target.declared.to_dict()
        lines.append(json.dumps(record))
    if not lines:  # every entry imported before
        return workload, 0
    source = io.StringIO("\n".join(lines) + "\n")
    source.name = os.fspath(path)  # named in import_trials' errors
    n = db.import_trials(source)
    return workload, n


def _record(workload: Workload, m: Measurement) -> dict[str, Any]:
    """One trial in the json export format that Database.import_trials reads."""
    return {"workload_spec": workload.to_dict(), "config": m.config.to_dict(),
            "status": m.status.value, "times_ms": list(m.times_ms), "compile_ms": m.compile_ms,
            "facts": dict(m.facts), "error": m.error, "worker": m.worker,
            "started_at": m.started_at, "ended_at": m.ended_at, "strategy": _SOURCE}


def _kt(trials: Sequence[Trial]) -> dict[str, Any]:
    """What an imported cache recorded beside its trials (empty for tunex's own trials)."""
    for t in trials:
        kt = t.measurement.facts.get(_SOURCE)
        if isinstance(kt, Mapping):
            return dict(kt)
    return {}


def _trials(db: Database, workload: Workload) -> list[Trial]:
    trials = db.trials(workload)
    if not trials:
        raise TunexError(f"workload {workload.digest} ({workload.kernel}) has no trial in "
                         f"{db!r}: nothing to export")
    return trials


def _value(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat()


def _problem_size(workload: Workload) -> Any:
    p = dict(workload.problem)
    if "problem_size" in p:
        return p["problem_size"]
    sizes = [v for v in p.values() if isinstance(v, int) and not isinstance(v, bool)]
    return sizes or json.dumps(p, sort_keys=True)


def cache_document(db: Database, workload: Workload) -> dict[str, Any]:
    """A workload's trials as a Kernel Tuner cache document: one entry per config (a config
    measured several times pools its repeats; a config that never succeeded keeps its last
    failure)."""
    trials = _trials(db, workload)
    kt = _kt(trials)
    constants: dict[str, Any] = dict(kt.get("constants") or {})
    names = list(trials[0].measurement.config)
    for t in trials:
        if set(t.measurement.config) != set(names):
            raise TunexError(
                f"workload {workload.digest} ({workload.kernel}) holds configs of different "
                f"parameters (trial {trials[0].number}: {', '.join(names) or 'none'}; trial "
                f"{t.number}: {', '.join(t.measurement.config) or 'none'}): a Kernel Tuner "
                "cache names one set; export it with --format t4 or json instead")
    keys = [k for k in kt.get("keys") or [*names, *constants] if k in names or k in constants]
    by_config: dict[Config, list[Measurement]] = {}
    first: dict[Config, Trial] = {}
    for t in trials:
        by_config.setdefault(t.measurement.config, []).append(t.measurement)
        first.setdefault(t.measurement.config, t)
    cache: dict[str, Any] = {}
    values: dict[str, list[Any]] = {k: [] for k in keys}
    for config, ms in by_config.items():
        full = {**constants, **config}
        params = {k: _value(full[k]) for k in keys}
        ok = [m for m in ms if m.ok]
        last = ms[-1]
        facts = first[config].measurement.facts.get(_SOURCE)
        fields = dict(facts.get("fields") or {}) if isinstance(facts, Mapping) else {}
        entry: dict[str, Any] = dict(params)
        if ok:
            times = [x for m in ok for x in m.times_ms]
            entry["time"] = statistics.fmean(times)
            entry["times"] = times
        else:
            entry["time"] = _KT_ERRORS.get(last.status, "RuntimeFailedConfig")
        entry["compile_time"] = (ok[0] if ok else last).compile_ms or 0.0
        for field in ("verification_time", "benchmark_time", "strategy_time", "framework_time"):
            entry[field] = fields.pop(field, 0)
        entry.update(fields)
        stamp = facts.get("timestamp") if isinstance(facts, Mapping) else None
        entry["timestamp"] = stamp or _iso(ms[0].started_at)
        key = ",".join(str(params[k]) for k in keys)
        if key in cache:  # Kernel Tuner's key joins the values with commas, and str()s them
            raise TunexError(
                f"workload {workload.digest} ({workload.kernel}): configs {dict(config)} and "
                f"{ {k: cache[key][k] for k in names} } have the same Kernel Tuner cache key "
                f"{key!r} (a value holding a comma, or values of different types that print "
                "alike): one would overwrite the other; export it with --format t4 or json")
        cache[key] = entry
        for k in keys:
            if params[k] not in values[k]:
                values[k].append(params[k])
    for k in keys:
        with contextlib.suppress(TypeError):  # values of mixed types keep the order seen
            values[k] = sorted(values[k])
    doc = {"schema_version": "1.0.0", "device_name": str(workload.target.get("device", "")),
           "kernel_name": workload.kernel, "problem_size": _problem_size(workload),
           "tune_params_keys": keys, "tune_params": values, "objective": "time", "cache": cache}
    space = None if constants else db.space(workload, whole=True)
    if (space is not None and set(space.names) == set(names)
            and sum(c in space for c in by_config) == space.size):
        # a recording of every point of the declared space: its domains and constraints too
        # (with the problem's sizes written in), so that Kernel Tuner can be given the space
        # and a replay tells a point the constraints exclude from a failed one; a partial
        # search's export stays the points it measured (a replay of it searches those)
        doc["tune_params"] = {p.name: [_value(v) for v in p.values] for p in space.params}
        doc["restrictions"] = space.bound_constraints()
    doc["cache"] = doc.pop("cache")  # last: Kernel Tuner reads a cache file that ends with it
    return doc


def t4_document(db: Database, workload: Workload) -> dict[str, Any]:
    """A workload's trials, in order, as T4 results (schema 1.0.0)."""
    results = []
    for t in _trials(db, workload):
        m = t.measurement
        kt = m.facts.get(_SOURCE)
        constants = dict(kt.get("constants") or {}) if isinstance(kt, Mapping) else {}
        results.append({
            "timestamp": _iso(m.started_at),
            "configuration": {**constants, **{k: _value(v) for k, v in m.config.items()}},
            "objectives": ["time"],
            # a failed trial may keep the infinite or NaN times that failed it: not JSON
            "times": {"compilation_time": m.compile_ms or 0.0,
                      "runtimes": [x for x in m.times_ms if math.isfinite(x)],
                      "framework": 0.0, "search_algorithm": 0.0, "validation": 0.0},
            "invalidity": _T4_INVALIDITY[m.status],
            "correctness": 1 if m.ok else 0,
            "measurements": [{"name": "time", "value": m.value if m.ok else str(m.status),
                              "unit": "ms"}],
            "strategy": t.strategy, "trial": t.number,
        })
    return {"schema_version": "1.0.0", "results": results}


def _write(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    data = json.dumps(doc, indent=None).encode()
    if os.fspath(path).endswith(".gz"):
        data = gzip.compress(data)
    try:
        Path(os.fspath(path)).write_bytes(data)
    except OSError as exc:
        raise TunexError(f"cannot write {os.fspath(path)} ({exc}): check the path and its "
                         "permissions") from exc


def export_cache(db: Database, workload: Workload, path: str | os.PathLike[str]) -> int:
    """Write :func:`cache_document` to ``path`` (gzip'd when it ends in ``.gz``); return the
    number of entries. ``tunex search --target replay:PATH`` replays it."""
    doc = cache_document(db, workload)
    _write(doc, path)
    return len(doc["cache"])


def export_t4(db: Database, workload: Workload, path: str | os.PathLike[str]) -> int:
    """Write :func:`t4_document` to ``path``; return the number of results."""
    doc = t4_document(db, workload)
    _write(doc, path)
    return len(doc["results"])
