"""Kernel Tuner's own search strategies in its simulation mode, on a recorded space.

Used by ``search_efficiency.py`` to put Kernel Tuner (PyPI ``kernel_tuner``) side by side with
tunex's strategies on the same recorded files. What it does, and how it counts:

* Kernel Tuner is given the same space as tunex: the file's ``tune_params`` (in the file's
  ``tune_params_keys`` order, which is how its cache is keyed) and, as ``restrictions``, the
  constraint expressions of the T1 definition that :class:`tunex.targets.replay.ReplayTarget`
  matched to the file. Constants of the definition that the file does not record as a parameter
  (e.g. gemm's ``GEMMK``) are written into the expressions as values.
* ``tune_kernel(..., simulation_mode=True, cache=<uncompressed copy of the file>)`` with a dummy
  kernel string; ``kernel_name`` and ``problem_size`` come from the file (the cache is checked
  against them). Kernel Tuner seeds nothing itself: Python's ``random`` and NumPy's global
  generator are seeded with the run's seed before each call.
* Kernel Tuner's budget (``max_fevals``) counts *unique configurations served from the cache*:
  the simulation runner adds one evaluation the first time a cache key is seen, whether the
  recorded entry is a time or a failure (``RuntimeFailedConfig``, ``CompilationFailedConfig``).
  A configuration its restrictions exclude is answered ``InvalidConfig`` before the runner and
  costs nothing; a revisit costs nothing. That is the same accounting as tunex's loop (a failed
  config costs a trial, a repeat does not), so trials here are the unique cache keys in the
  order of the returned results list, each scored by the file's recorded mean ``time``.
* Some strategies stop before ``max_fevals`` unique configs: e.g. ``dual_annealing`` passes
  ``max_fevals`` to SciPy as ``maxfun``, which counts every call (repeats and excluded points
  included), and ``simulated_annealing``'s cooling schedule ends after about 75% of it. Such runs
  simply have fewer trials; the record says how many (``trials``) and why it ended.
* "proposals": every configuration a strategy handed to Kernel Tuner's cost function (counted by
  wrapping ``CostFunc._normalize_and_validate_config``), including excluded points and repeats;
  ``evaluations``: the results list's length (repeats served from the cache included).
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import json
import random
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["kt_restrictions", "kt_version", "run_kt"]

_COPIES: dict[Path, Path] = {}  # recorded .json.gz -> uncompressed copy for Kernel Tuner
_TMP: Path | None = None


def kt_version() -> str:
    import kernel_tuner

    return f"kernel_tuner=={getattr(kernel_tuner, '__version__', '?')}"


def _uncompressed(path: Path) -> Path:
    """A plain-JSON copy of a recorded file (Kernel Tuner reads ``.json`` only)."""
    global _TMP
    path = path.resolve()
    if path in _COPIES:
        return _COPIES[path]
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b" and path.suffix == ".json":
        _COPIES[path] = path
        return path
    if _TMP is None:
        _TMP = Path(tempfile.mkdtemp(prefix="tunex-kt-cache-"))
        atexit.register(shutil.rmtree, _TMP, True)
    out = _TMP / f"{path.parent.name}_{path.name.split('.')[0]}.json"
    out.write_bytes(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    _COPIES[path] = out
    return out


def kt_restrictions(target: Any) -> list[str]:
    """The ReplayTarget's constraint expressions, over the file's parameters only."""
    recorded = set(target.keys)
    consts = {k: v for k, v in target.space.bound.items() if k not in recorded}
    out = []
    for c in target.space.constraints:
        if not isinstance(c.rule, str):  # a replay's "recorded points" rule: no expression
            raise ValueError(f"{target.path}: its space is the recorded points (no "
                             "restrictions and no T1 definition found), which Kernel Tuner "
                             "cannot be given as restrictions; put its space definition in "
                             "space_definitions/ beside the data")
        expr = c.description
        for name, value in consts.items():
            expr = re.sub(rf"\b{re.escape(name)}\b", repr(value), expr)
        out.append(expr)
    return out


@contextlib.contextmanager
def _counting_proposals() -> Iterator[dict[str, int]]:
    """Count configs handed to Kernel Tuner's cost function (and how many were excluded)."""
    from kernel_tuner.strategies import common

    original = common.CostFunc._normalize_and_validate_config
    counts = {"proposals": 0, "excluded": 0}

    def counted(self: Any, x: Any, check_restrictions: bool = True) -> Any:
        config, legal = original(self, x, check_restrictions=check_restrictions)
        counts["proposals"] += 1
        counts["excluded"] += not legal
        return config, legal

    common.CostFunc._normalize_and_validate_config = counted
    try:
        yield counts
    finally:
        common.CostFunc._normalize_and_validate_config = original


def run_kt(target: Any, strategy: str, seed: int, budget: int,
           options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One Kernel Tuner search in simulation mode; returns the measured trials in order.

    Args:
        target: a ``ReplayTarget`` of the file (its space gives the restrictions, its
            ``true_time`` scores configs).
        strategy: a Kernel Tuner strategy name (``genetic_algorithm``, ``bayes_opt``, ...).
        seed: seeds ``random`` and ``numpy.random`` before the call.
        budget: ``max_fevals``.
        options: further ``strategy_options``.

    Returns:
        ``{"times": [recorded mean time of trial 1, 2, ...], "proposals", "excluded",
        "evaluations", "not_in_file", "end"}``.
    """
    import kernel_tuner

    doc = json.loads(_uncompressed(target.path).read_text())
    keys = list(doc["tune_params_keys"])
    tune_params = {k: doc["tune_params"][k] for k in keys}
    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings(), _counting_proposals() as counts:
        warnings.simplefilter("ignore")
        results, _env = kernel_tuner.tune_kernel(
            doc["kernel_name"], f"__global__ void {doc['kernel_name']}() {{}}",
            doc["problem_size"], [], tune_params,
            restrictions=kt_restrictions(target), simulation_mode=True,
            cache=str(_uncompressed(target.path)), strategy=strategy,
            strategy_options={"max_fevals": budget, **(options or {})},
            objective="time", objective_higher_is_better=False, quiet=True,
        )
    from tunex.trial import Config

    recorded = {tuple(e[k] for k in keys) for e in doc["cache"].values()}
    seen: set[tuple[Any, ...]] = set()
    times: list[float] = []
    not_in_file = 0
    for r in results:
        key = tuple(r[k] for k in keys)
        if key in seen:
            continue  # a revisit: served from Kernel Tuner's cache, not counted by its budget
        seen.add(key)
        if key not in recorded:
            not_in_file += 1  # answered InvalidConfig by the runner, not counted by its budget
            continue
        times.append(target.true_time(Config({n: r[n] for n in target.space.names})))
    return {
        "times": times[:budget],
        "proposals": counts["proposals"],
        "excluded": counts["excluded"],
        "evaluations": len(results),
        "not_in_file": not_in_file,
        "end": "budget" if len(times) >= budget else "strategy stopped",
    }


if __name__ == "__main__":  # quick manual check: python benchmarks/_kt_runner.py FILE STRATEGY
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tunex.targets.replay import ReplayTarget

    t0 = time.perf_counter()
    out = run_kt(ReplayTarget(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3
                 else 0, 200)
    print({k: v for k, v in out.items() if k != "times"}, len(out["times"]), "trials",
          f"{time.perf_counter() - t0:.1f}s")
