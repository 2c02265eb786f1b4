"""Search efficiency on recorded kernel-tuning spaces: the benchmark for tunex's default strategy.

What is measured
----------------
On every recorded space ``<data>/*/*.json.gz`` (default:
``<repo>/../shared/data/spaces/kernel_tuner``, brute-forced Kernel Tuner caches, see the README
there), for each strategy and seed:

* **trials to 95% / 99%**: the number of measured configs until the best one so far is within
  95% (99%) of the space's optimum, i.e. ``optimum / best >= 0.95``. The optimum is the lowest
  recorded mean ``time`` of a valid config (``ReplayTarget.optimum()``), and every config is
  scored by its recorded mean (``ReplayTarget.true_time``), even though the strategy itself only
  sees noisy measurements (``ReplayTarget(path, noisy=True, seed=seed)``: one recorded repeat
  drawn at random). A run that does not get there within the budget counts as ``budget + 1``
  ("not reached"), so medians and quartiles stay defined; the tables also give the share of runs
  that got there.
* **proposals per trial**: configs the strategy proposed (``strategy.proposals``: repeats and
  excluded points it resolved on its own included) per measured config.

A trial is one measured config. The tunex loop is tunex's own (``tunex.tuner.Tuner``, the loop of
``tunex search`` and of the decorator, one trial in flight, or with ``--loo --batch N`` N of them
asked before any is measured, as N build workers take them): ``strategy.ask(1)``; a config this run
already measured is answered from the run's own record (``strategy.tell([earlier])``) and costs no
trial; otherwise ``m = target.measure(target.build(workload, config))`` costs one trial and is told.
A config the recorded space lacks or records as failed costs a trial too (the target answers with a
failure). ``ask`` returning ``None`` ends the run. Strategies are made by
``tunex.search.get_strategy(name, target.space, seed=seed)``.

Kernel Tuner's own strategies (``kt:NAME``) run side by side, in its simulation mode, on the same
files and the same space (the file's tune_params plus the matched T1 definition's restrictions);
how Kernel Tuner counts evaluations, and how its trials are read back, is in ``_kt_runner.py``.
In short: its budget counts unique configs served from the recorded cache, failed ones included,
which is the same accounting as tunex's loop.

Also measured (tunex ``model`` only):

* **overhead**: milliseconds of ``ask(1)`` + ``tell`` per trial with 1,000 trials of history:
  a ``model`` search on the largest selected space, timed over trials 1,001-1,100 (median, mean);
  targets: < 50 ms.
* **memory**: peak RSS (``resource.getrusage`` high-water mark) of that same search run to 2,000
  trials in a fresh subprocess; target: < 1 GiB.
* **transfer**: trials to 95% of a ``model`` search warm-started with
  ``strategy.warm_start([(source_workload, source_trials)], current=workload)``, where the source
  trials are those of a finished 200-trial ``model`` search (same seed) on another GPU's file of
  the same kernel, against the same search without warm start (same seeds).

Random search's expected trials to 95% is also given analytically: drawing without replacement
from ``N`` valid points of which ``K`` are within 95%, the first hit comes on average at draw
``(N + 1) / (K + 1)`` (about ``N / K``); its median is computed exactly. The per-strategy
"x random" column is that analytic median over the strategy's median (a strategy that does not
reach 95% within the budget is taken at ``budget + 1``, so its factor is then an upper bound).

Results and reuse
-----------------
Every finished run is written at once to ``--out`` (JSON), keyed by space, strategy and seed,
with the budget, the data file's hash and the code that produced it (a hash of the tunex
sources, or the kernel_tuner version). With ``--reuse``, a stored run with the same key is not
run again, so an interrupted run resumes and Kernel Tuner's results (which do not depend on
tunex) are kept while tunex changes. ``--report-only`` prints the tables from the file.

Usage::

    python benchmarks/search_efficiency.py                       # everything, 20 seeds, budget 200
    python benchmarks/search_efficiency.py --strategies kt --parts search --reuse
    python benchmarks/search_efficiency.py --strategies model,random --seeds 3 --spaces 'conv*'
    python benchmarks/search_efficiency.py --report-only --markdown benchmarks/RESULTS.md
    python benchmarks/search_efficiency.py --loo --seeds 10 --jobs 2 --loo-overhead \
        --out benchmarks/results/search_efficiency_loo.json    # leave-one-out, cold and warm

    python benchmarks/search_efficiency.py --loo --compare-only --compare tunex,kt \
        --seeds 10 --budget 100 --reuse --out benchmarks/results/search_efficiency_loo.json

``--loo`` is the leave-one-out mode (issue 8): see the comment above ``loo_spaces`` below. With
``--compare``, the other strategies run cold on the same held-out spaces (plain searches of the
first mode, stored under the file's ``runs``) and are reported beside ``model``'s cold and warm
runs; ``--compare-only`` runs just those, reading ``model``'s from ``--out``.

``--strategies`` takes tunex specs (``model``, ``optuna:tpe``, ...), ``kt:NAME`` for Kernel Tuner
strategies, and the groups ``tunex`` and ``kt`` (the defaults below). Each process uses one
thread for BLAS/OpenMP/torch unless those variables are set (the machine is shared).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import fnmatch  # noqa: E402
import functools  # noqa: E402
import gzip  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Iterable, Sequence  # noqa: E402
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]  # this checkout's tunex, and _kt_runner beside this file

from tunex.db.prior import names_most  # noqa: E402
from tunex.search import get_strategy  # noqa: E402
from tunex.targets.replay import ReplayTarget  # noqa: E402
from tunex.trial import Measurement  # noqa: E402
from tunex.tuner import Budget, Tuner  # noqa: E402

warnings.filterwarnings("ignore", message=".*is experimental")  # Optuna's QMC/GP notices

TUNEX_STRATEGIES = ["model", "optuna:tpe", "optuna:cmaes", "optuna:gp", "optuna:qmc", "random"]
KT_STRATEGIES = ["kt:genetic_algorithm", "kt:dual_annealing", "kt:bayes_opt", "kt:pso",
                 "kt:simulated_annealing", "kt:random_sample"]
TRANSFER_PAIRS = [  # (source, destination): same kernel, another GPU
    ("convolution/A100", "convolution/A4000"),
    ("convolution/A4000", "convolution/MI250X"),
    ("dedispersion/A100", "dedispersion/MI250X"),
    ("gemm_clblast/RTX_2080_Ti", "gemm_clblast/RTX_Titan"),
]
KT_NOTES = {  # how these Kernel Tuner strategies spend their budget (from its 1.5.0 source)
    "kt:dual_annealing": "passes `max_fevals` to SciPy's `dual_annealing` as `maxfun`, which "
    "counts every call (repeats and points the restrictions exclude included), so its runs end "
    "well before the budget of measured configs",
    "kt:simulated_annealing": "its cooling schedule reaches `T_min` after 75% of `max_fevals` "
    "unique configs, so runs end at 150 of 200",
    "kt:genetic_algorithm": "re-evaluates surviving population members (served from the cache, "
    "free), hence several proposals per trial; a run ends early when its generations run out",
}
LEVELS = (0.95, 0.99)
EARLY = 100  # "share of runs within 95% by trial 100"
OVERHEAD = {"history": 1000, "timed": 100, "total": 2000}
SECTION = "## Search efficiency (replay)"
TITLE = "# tunex benchmark results"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "spaces" / "kernel_tuner"
DEFAULT_OUT = HERE / "results" / "search_efficiency.json"
#: trials in flight in each tunex search (``--batch``): set in this process and in each worker
IN_FLIGHT = 1


def set_in_flight(n: int) -> None:
    global IN_FLIGHT
    IN_FLIGHT = n


# -- spaces ------------------------------------------------------------------------------------


def recorded_files(root: Path, pattern: str) -> list[Path]:
    """The recorded spaces under ``root`` that ``pattern`` (``*/*`` or ``**/*``) finds:
    ``.json.gz`` and plain ``.json`` files (Kernel Tuner caches, T4 results), not the T1
    definitions in ``space_definitions/``."""
    out = {p for ext in (".json.gz", ".json") for p in root.glob(pattern + ext)}
    return sorted(p for p in out if "space_definitions" not in p.relative_to(root).parts)


def find_spaces(data: Path, patterns: Sequence[str]) -> dict[str, Path]:
    """Recorded spaces under ``data`` as ``{"kernel/GPU": path}``, filtered by glob patterns."""
    found = {f"{p.parent.name}/{p.name.split('.')[0]}": p for p in recorded_files(data, "*/*")}
    if not found:
        raise SystemExit(f"no recorded spaces (*/*.json.gz or *.json) under {data}; pass "
                         "--data DIR")
    keep = {k: v for k, v in found.items()
            if any(fnmatch.fnmatch(k, pat) or fnmatch.fnmatch(v.name, pat) for pat in patterns)}
    if not keep:
        raise SystemExit(f"--spaces {','.join(patterns)} matches none of {sorted(found)}")
    return keep


def random_first_hit(size: int, good: int, early: int = EARLY) -> dict[str, float]:
    """Draw at which uniform sampling without replacement first hits one of ``good`` points.

    P(T > t) = prod_{i<t} (size - good - i) / (size - i); E[T] = (size + 1) / (good + 1).
    """
    survive, t, median, by_early = 1.0, 0, None, None
    while survive > 0 and (median is None or by_early is None):
        survive *= max(size - good - t, 0) / (size - t)
        t += 1
        if median is None and survive <= 0.5:
            median = t
        if t == early:
            by_early = 1.0 - survive
    return {"mean": (size + 1) / (good + 1), "median": float(median or t),
            "share_by_early": 1.0 if by_early is None else by_early}


def random_mean_tail(size: int, good: int, runs: int, mean: float, cap: int) -> float:
    """Chance that ``runs`` uniform searches' mean trials to a first hit is ``mean`` or more.

    Each run draws without replacement from ``size`` valid points of which ``good`` are hits
    (the law of :func:`random_first_hit`), and a run that has not hit by draw ``cap`` counts as
    ``cap``, as a missed search counts as its budget + 1. Exact: the law of one run's capped
    trials convolved ``runs`` times. It is the one-sided p-value of "this strategy's mean is no
    worse than uniform sampling's", and, at ``mean`` = 1.2x random's expectation, how often
    uniform sampling itself breaks the issue's easy-space rule at that many seeds.
    """
    if runs < 1 or not 0 < good <= size:
        raise ValueError(f"need runs >= 1 and 0 < good <= size, not {runs}, {good}, {size}")
    law, survive = [], 1.0
    for t in range(1, min(cap, size - good + 1) + 1):
        nxt = survive * (size - good - (t - 1)) / (size - (t - 1)) if t < cap else 0.0
        law.append(survive - nxt)
        survive = nxt
    total = np.array([1.0])
    one = np.array(law)
    for _ in range(runs):
        total = np.convolve(total, one)
    sums = np.arange(total.size) + runs  # total[k]: chance that the trials sum to k + runs
    return float(min(1.0, total[sums >= mean * runs - 1e-9].sum()))


def easy_odds(size: int, good: int, trials: Sequence[int], cap: int) -> tuple[float, float]:
    """A strategy's runs on a space against uniform sampling: (p, the chance that uniform
    sampling's mean over as many runs is as high as theirs; the chance that it is over 1.2x
    its own expectation, that is breaks the easy-space rule itself)."""
    expectation = (size + 1) / (good + 1)
    return (random_mean_tail(size, good, len(trials), float(np.mean(trials)), cap),
            random_mean_tail(size, good, len(trials), 1.2 * expectation, cap))


def space_facts(path: Path) -> dict[str, Any]:
    """Size, optimum, how many points lie within each level, and random search's odds."""
    target = ReplayTarget(path)
    times = np.array([target.true_time(c) for c in target.space])
    optimum = float(times.min())
    facts: dict[str, Any] = {
        "file": path.name, "kernel": target.doc_meta.get("kernel_name"),
        "device": target.fingerprint()["device"], "data": target.digest,
        "size": int(times.size), "failed": int(np.isinf(times).sum()), "optimum": optimum,
        "definition_constraints": [c.description for c in target.space.constraints],
        "within": {}, "random": {},
    }
    for level in LEVELS:
        good = int((optimum / times >= level).sum())
        facts["within"][f"{level:.2f}"] = good
        facts["random"][f"{level:.2f}"] = random_first_hit(times.size, good)
    return facts


# -- scoring -----------------------------------------------------------------------------------


def make_record(times: Sequence[float], optimum: float, **extra: Any) -> dict[str, Any]:
    """A run's record from the recorded mean time of each trial, in order."""
    improvements, best = [], math.inf
    for i, t in enumerate(times, 1):
        if t < best:
            best = t
            improvements.append([i, t])
    rec: dict[str, Any] = {"trials": len(times), "best": best if improvements else None,
                           "improvements": improvements}
    for level in LEVELS:
        rec[f"t{round(level * 100)}"] = next(
            (i for i, b in improvements if optimum / b >= level), None)
    rec.update(extra)
    return rec


def trials_to(rec: dict[str, Any], level: float, budget: int) -> int:
    """Trials to ``level`` of the optimum; ``budget + 1`` when not reached."""
    t = rec[f"t{round(level * 100)}"]
    return budget + 1 if t is None else t


# -- one search run ------------------------------------------------------------------------------


def run_tunex(path: Path, strategy: str, seed: int, budget: int, optimum: float, *,
              warm: list[tuple[Any, list[Measurement]]] | None = None,
              keep_measurements: bool = False, guessed: Iterable[str] = (),
              prior: Any = None) -> dict[str, Any]:
    """One tunex search on a noisy replay, run by tunex's own loop (``tunex.tuner.Tuner``,
    ``IN_FLIGHT`` trials in flight, no re-measurement, no transfer but ``warm``); the
    strategy's ``ask`` and ``tell`` are timed where the loop calls them. ``guessed``: the
    kernels among ``warm`` related to it by parameter names only (``warm_start``'s
    ``guessed``). ``prior`` (a ``tunex.db.prior.Prior``): a first search with transfer on,
    its database empty, that takes the prior's related workloads as the Tuner does
    (``Tuner(prior=...)``)."""
    t_start = time.perf_counter()
    target = ReplayTarget(path, noisy=True, seed=seed)
    search = get_strategy(strategy, target.space, seed=seed)
    workload = target.workload()
    if warm:
        search.warm_start(warm, current=workload, **({"guessed": set(guessed)} if guessed
                                                     else {}))
    spent = [0.0]
    told: set[Any] = set()
    repeats = [0]

    def timed(method: Callable[..., Any], tell: bool) -> Callable[..., Any]:
        def call(arg: Any) -> Any:
            if tell:
                for m in arg:
                    repeats[0] += m.config in told
                    told.add(m.config)
            t0 = time.perf_counter()
            try:
                return method(arg)
            finally:
                spent[0] += time.perf_counter() - t0
        return call

    search.ask = timed(search.ask, False)  # type: ignore[method-assign]
    search.tell = timed(search.tell, True)  # type: ignore[method-assign]
    measured: dict[Any, Measurement] = {}
    times: list[float] = []
    step_ms: list[float] = []  # ask+tell time attributed to each trial

    def on_trial(m: Measurement, number: int) -> None:
        measured[m.config] = m
        times.append(target.true_time(m.config))
        step_ms.append(spent[0] * 1000)
        spent[0] = 0.0

    result = Tuner(target, target.space, workload=workload, strategy=search,
                   budget=Budget(trials=budget), batch=IN_FLIGHT, remeasure=0,
                   transfer=prior is not None,
                   prior=prior if prior is not None else False, on_trial=on_trial).run()
    end = {"trial budget": "budget", "strategy exhausted": "exhausted",
           "strategy repeats measured configs only": "stalled: repeats only"}.get(
        result.stopped, result.stopped)
    if step_ms:  # the tell of the last trial comes after its record
        step_ms[-1] += spent[0] * 1000
    rec = make_record(times, optimum, proposals=search.proposals, repeats=repeats[0], end=end,
                      wall_s=round(time.perf_counter() - t_start, 3),
                      strategy_s=round(sum(step_ms) / 1000, 3))
    if prior is not None:
        rec["transfer"] = result.transfer
    if keep_measurements:
        rec["_measurements"] = list(measured.values())
        rec["_workload"] = workload
        rec["_step_ms"] = step_ms
    return rec


def run_kernel_tuner(path: Path, strategy: str, seed: int, budget: int,
                     optimum: float) -> dict[str, Any]:
    from _kt_runner import run_kt

    t_start = time.perf_counter()
    out = run_kt(ReplayTarget(path), strategy.removeprefix("kt:"), seed, budget)
    times = out.pop("times")
    return make_record(times, optimum, **out, wall_s=round(time.perf_counter() - t_start, 3))


def run_transfer(src: Path, dst: Path, seed: int, budget: int, source_budget: int,
                 src_optimum: float, dst_optimum: float) -> dict[str, Any]:
    """A ``model`` search on ``dst`` warm-started with a finished ``model`` search on ``src``."""
    source = run_tunex(src, "model", seed, source_budget, src_optimum, keep_measurements=True)
    warm = [(source["_workload"], source["_measurements"])]
    rec = run_tunex(dst, "model", seed, budget, dst_optimum, warm=warm)
    rec["source_trials"] = source["trials"]
    return rec


# -- overhead and memory (in a fresh subprocess) ---------------------------------------------------


def overhead_child(path: Path, seed: int) -> dict[str, Any]:
    """Run in a fresh process: a ``model`` search to OVERHEAD["total"] trials."""
    import resource

    facts_opt = ReplayTarget(path).optimum()
    rec = run_tunex(path, "model", seed, OVERHEAD["total"], facts_opt, keep_measurements=True)
    lo = OVERHEAD["history"]
    timed = np.array(rec["_step_ms"][lo: lo + OVERHEAD["timed"]])
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "trials": rec["trials"], "wall_s": rec["wall_s"],
        "ms_per_trial_at_history": {
            "history": lo, "timed": int(timed.size),
            "median": float(np.median(timed)) if timed.size else None,
            "mean": float(timed.mean()) if timed.size else None,
            "p90": float(np.percentile(timed, 90)) if timed.size else None,
            "max": float(timed.max()) if timed.size else None,
        },
        "ms_per_trial_whole_run_mean": float(np.mean(rec["_step_ms"])),
        "peak_rss_mib": rss_kib / 1024,
        "load_average": [round(x, 1) for x in os.getloadavg()],  # a shared machine skews ms
        "cpus": os.cpu_count(),
    }


def measure_overhead(path: Path, seed: int = 0) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child-overhead", str(path),
           "--child-seed", str(seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"overhead subprocess failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- results file ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def tunex_code() -> str:
    """A hash of this checkout's tunex sources (taken once, at start): a changed strategy means
    new results."""
    h = hashlib.sha256()
    for f in sorted((REPO / "tunex").rglob("*.py")):
        h.update(str(f.relative_to(REPO)).encode())
        h.update(f.read_bytes())
    return "tunex-src:" + h.hexdigest()[:12]


def prior_code() -> str:
    """A hash of the prior tunex ships (``--sources prior``: a rebuilt prior means new
    results; the sources' hash does not cover it), or of the trials exports named by
    ``$TUNEX_BENCH_PRIOR`` (paths joined by the OS's path separator), which stand for it."""
    from tunex.db.prior import SHIPPED

    h = hashlib.sha256()
    given = os.environ.get("TUNEX_BENCH_PRIOR")
    for f in [Path(x) for x in given.split(os.pathsep)] if given else SHIPPED:
        h.update(gzip.decompress(f.read_bytes()))
    return "prior:" + h.hexdigest()[:12]


def code_of(strategy: str) -> str:
    if strategy.startswith("kt:"):
        from _kt_runner import kt_version

        return kt_version()
    return tunex_code()


def read_json(path: Path) -> Any:
    """A JSON file, gzip'd or not (told by its first bytes, not its name)."""
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


class Results:
    """The JSON results file, written after every finished run (atomically); gzip'd where
    its name ends in ``.gz`` (either is read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.doc: dict[str, Any] = {"format": 1, "spaces": {}, "runs": {}, "transfer": {},
                                    "overhead": None, "sessions": []}
        if path.exists():
            self.doc.update(read_json(path))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        data = (json.dumps(self.doc, indent=1, sort_keys=True) + "\n").encode()
        tmp.write_bytes(gzip.compress(data, mtime=0) if self.path.suffix == ".gz" else data)
        tmp.replace(self.path)

    def run(self, space: str, strategy: str, seed: int) -> dict[str, Any] | None:
        return self.doc["runs"].get(space, {}).get(strategy, {}).get(str(seed))

    def put_run(self, space: str, strategy: str, seed: int, rec: dict[str, Any]) -> None:
        self.doc["runs"].setdefault(space, {}).setdefault(strategy, {})[str(seed)] = rec

    def transfer(self, pair: str, seed: int) -> dict[str, Any] | None:
        return self.doc["transfer"].get(pair, {}).get(str(seed))

    def put_transfer(self, pair: str, seed: int, rec: dict[str, Any]) -> None:
        self.doc["transfer"].setdefault(pair, {})[str(seed)] = rec


def matches(rec: dict[str, Any] | None, key: dict[str, Any]) -> bool:
    return rec is not None and all(rec.get(k) == v for k, v in key.items())


# -- tasks ---------------------------------------------------------------------------------------


def execute(task: dict[str, Any]) -> dict[str, Any]:
    """Run one task (in a worker process or in-process); returns its record."""
    kind = task["kind"]
    if kind == "search" and task["strategy"].startswith("kt:"):
        rec = run_kernel_tuner(Path(task["path"]), task["strategy"], task["seed"],
                               task["budget"], task["optimum"])
    elif kind == "search":
        rec = run_tunex(Path(task["path"]), task["strategy"], task["seed"], task["budget"],
                        task["optimum"])
    elif kind == "transfer":
        rec = run_transfer(Path(task["src"]), Path(task["path"]), task["seed"], task["budget"],
                           task["source_budget"], task["src_optimum"], task["optimum"])
    else:
        raise ValueError(kind)
    rec.update(task["key"])
    rec["seed"] = task["seed"]
    return rec


def plan(args: argparse.Namespace, spaces: dict[str, Path], facts: dict[str, dict[str, Any]],
         results: Results) -> list[dict[str, Any]]:
    """The tasks still to run, grouped by (space, strategy), seeds in order."""
    tasks = []
    seeds = range(args.seeds)
    searches = [(s, st) for s in spaces for st in args.strategies] if "search" in args.parts else []
    pairs = transfer_pairs(spaces, args.data) if "transfer" in args.parts else []
    for _src, dst in pairs:  # the cold side of a transfer is the plain model search
        if (dst, "model") not in searches:
            searches.append((dst, "model"))
    for space, strategy in searches:
        for seed in seeds:
            key = {"budget": args.budget, "code": code_of(strategy),
                   "data": facts[space]["data"]}
            if args.reuse and matches(results.run(space, strategy, seed), key):
                continue
            tasks.append({"kind": "search", "space": space, "strategy": strategy,
                          "seed": seed, "budget": args.budget, "key": key,
                          "path": str(spaces[space]), "optimum": facts[space]["optimum"]})
    for src, dst in pairs:
        src_path = args.data / src.split("/")[0] / f"{src.split('/')[1]}.json.gz"
        for seed in seeds:
            key = {"budget": args.budget, "code": tunex_code(), "data": facts[dst]["data"],
                   "source_data": facts[src]["data"], "source_budget": args.source_budget}
            if args.reuse and matches(results.transfer(f"{src}->{dst}", seed), key):
                continue
            tasks.append({"kind": "transfer", "space": f"{src}->{dst}", "strategy": "model",
                          "seed": seed, "budget": args.budget, "key": key,
                          "source_budget": args.source_budget, "src": str(src_path),
                          "path": str(spaces[dst]), "src_optimum": facts[src]["optimum"],
                          "optimum": facts[dst]["optimum"]})
    return tasks


def transfer_pairs(spaces: dict[str, Path], data: Path) -> list[tuple[str, str]]:
    """The pairs whose destination is selected and whose source file exists."""
    out = []
    for src, dst in TRANSFER_PAIRS:
        kernel, gpu = src.split("/")
        if dst in spaces and (data / kernel / f"{gpu}.json.gz").exists():
            out.append((src, dst))
    return out


def run_tasks(tasks: list[dict[str, Any]], jobs: int, results: Results,
              on_done: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
    """Run tasks (in a process pool when jobs > 1), storing and saving each result at once."""
    def store(task: dict[str, Any], rec: dict[str, Any]) -> None:
        if task["kind"] == "transfer":
            results.put_transfer(task["space"], task["seed"], rec)
        else:
            results.put_run(task["space"], task["strategy"], task["seed"], rec)
        results.save()
        on_done(task, rec)

    if jobs <= 1:
        for task in tasks:
            store(task, execute(task))
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        todo = iter(tasks)
        running = {}
        for task in todo:  # keep at most 2 * jobs queued, so an interrupt loses little
            running[pool.submit(execute, task)] = task
            if len(running) >= 2 * jobs:
                break
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                store(running.pop(fut), fut.result())
                nxt = next(todo, None)
                if nxt is not None:
                    running[pool.submit(execute, nxt)] = nxt


class Progress:
    """One line per finished (space, strategy) group."""

    def __init__(self, tasks: list[dict[str, Any]]) -> None:
        self.left: dict[tuple[str, str], int] = {}
        self.recs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for t in tasks:
            g = (t["space"], t["strategy"] if t["kind"] == "search" else "model+warm")
            self.left[g] = self.left.get(g, 0) + 1
        self.total, self.done, self.t0 = len(tasks), 0, time.time()

    def __call__(self, task: dict[str, Any], rec: dict[str, Any]) -> None:
        g = (task["space"], task["strategy"] if task["kind"] == "search" else "model+warm")
        self.recs.setdefault(g, []).append(rec)
        self.left[g] -= 1
        self.done += 1
        if self.left[g] == 0:
            recs = self.recs.pop(g)
            t95 = np.median([trials_to(r, 0.95, r["budget"]) for r in recs])
            wall = np.median([r["wall_s"] for r in recs])
            print(f"[{self.done}/{self.total} {time.time() - self.t0:7.0f}s] {g[0]:28s} "
                  f"{g[1]:24s} {len(recs):3d} runs  median trials to 95%: {t95:g}  "
                  f"{wall:.1f} s/run", flush=True)


# -- summary ---------------------------------------------------------------------------------------


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(q2), float(q3)


def fmt_trials(x: float, budget: int) -> str:
    if x > budget:
        return f">{budget}"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def fmt_median_iqr(values: Sequence[float], budget: int) -> str:
    q1, q2, q3 = quartiles(values)
    med = "n.r." if q2 > budget else fmt_trials(q2, budget)
    return f"{med} [{fmt_trials(q1, budget)}, {fmt_trials(q3, budget)}]"


def strategy_order(names: Iterable[str]) -> list[str]:
    known = TUNEX_STRATEGIES + KT_STRATEGIES
    return sorted(set(names), key=lambda s: (known.index(s) if s in known else len(known)
                                             + s.startswith("kt:"), s))


def collect(results: Results, spaces: Iterable[str], seeds: int, budget: int
            ) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{space: {strategy: [records of seeds 0..seeds-1 run with this budget]}}."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for space in spaces:
        for strategy, by_seed in results.doc["runs"].get(space, {}).items():
            recs = [by_seed[str(s)] for s in range(seeds)
                    if str(s) in by_seed and by_seed[str(s)]["budget"] == budget]
            if recs:
                out.setdefault(space, {})[strategy] = recs
    return out


def row_stats(recs: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    t95 = [trials_to(r, 0.95, budget) for r in recs]
    t99 = [trials_to(r, 0.99, budget) for r in recs]
    trials = sum(r["trials"] for r in recs)
    props = sum(r.get("proposals", 0) for r in recs)
    return {
        "n": len(recs), "t95": t95, "t99": t99, "median95": float(np.median(t95)),
        "early95": float(np.mean([t <= EARLY for t in t95])),
        "reached95": float(np.mean([t <= budget for t in t95])),
        "reached99": float(np.mean([t <= budget for t in t99])),
        "trials": float(np.median([r["trials"] for r in recs])),
        "proposals_per_trial": props / trials if trials else math.nan,
        "wall_s": float(np.median([r["wall_s"] for r in recs])),
    }


def pct(x: float | np.floating[Any]) -> str:
    return f"{100 * x:.0f}%"


def spaces_table(facts: dict[str, dict[str, Any]], spaces: Iterable[str], budget: int) -> list[str]:
    lines = ["| space | valid points | failed | within 95% | within 99% | random: mean / median "
             f"trials to 95% | random: share within 95% by trial {EARLY} |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for s in spaces:
        f = facts[s]
        r = f["random"]["0.95"]
        lines.append(f"| {s} | {f['size']:,} | {f['failed']:,} | {f['within']['0.95']:,} | "
                     f"{f['within']['0.99']:,} | {r['mean']:,.0f} / {r['median']:,.0f} | "
                     f"{pct(r['share_by_early'])} |")
    return lines


def runs_table(stats: dict[str, dict[str, dict[str, Any]]], budget: int) -> list[str]:
    lines = ["| space | strategy | runs | trials to 95%: median [IQR] | within 95% by "
             f"{EARLY} | reached 95% | trials to 99%: median [IQR] | reached 99% | trials used | "
             "proposals / trial | s / run |",
             "|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    for space, by_strat in stats.items():
        for strategy in strategy_order(by_strat):
            st = by_strat[strategy]
            lines.append(
                f"| {space} | {strategy} | {st['n']} | {fmt_median_iqr(st['t95'], budget)} | "
                f"{pct(st['early95'])} | {pct(st['reached95'])} | "
                f"{fmt_median_iqr(st['t99'], budget)} | {pct(st['reached99'])} | "
                f"{st['trials']:.0f} | {st['proposals_per_trial']:.2f} | {st['wall_s']:.1f} |")
    return lines


def strategy_table(stats: dict[str, dict[str, dict[str, Any]]],
                   facts: dict[str, dict[str, Any]], budget: int) -> list[str]:
    """Per strategy: median over spaces of (random's analytic median / strategy's median)."""
    names = strategy_order(n for by in stats.values() for n in by)
    lines = ["| strategy | spaces | x random (median over spaces) | spaces not reaching 95% "
             "(median) | spaces where it needs fewer trials to 95% than every other strategy |",
             "|---|---:|---:|---:|---:|"]
    for name in names:
        ratios, unreached, wins = [], 0, 0
        for space, by in stats.items():
            if name not in by:
                continue
            med = by[name]["median95"]
            ratios.append(facts[space]["random"]["0.95"]["median"] / med)
            unreached += med > budget
            others = [v["median95"] for k, v in by.items() if k != name]
            wins += bool(others) and all(med < o for o in others)
        lines.append(f"| {name} | {len(ratios)} | {np.median(ratios):.1f} | {unreached} | "
                     f"{wins} |")
    return lines


def transfer_table(results: Results, seeds: int, budget: int) -> list[str]:
    lines = ["| source -> destination | runs | cold: trials to 95% median [IQR] | warm: "
             "median [IQR] | warm faster / same / slower (per seed) | cold / warm: trials to 99% "
             "median |", "|---|---:|---|---|---|---|"]
    for pair, by_seed in results.doc["transfer"].items():
        dst = pair.split("->")[1]
        cold_runs = results.doc["runs"].get(dst, {}).get("model", {})
        warm, cold = [], []
        for s in range(seeds):
            w, c = by_seed.get(str(s)), cold_runs.get(str(s))
            if w and c and w["budget"] == budget and c["budget"] == budget:
                warm.append(w)
                cold.append(c)
        if not warm:
            continue
        w95 = [trials_to(r, 0.95, budget) for r in warm]
        c95 = [trials_to(r, 0.95, budget) for r in cold]
        w99 = [trials_to(r, 0.99, budget) for r in warm]
        c99 = [trials_to(r, 0.99, budget) for r in cold]
        better = sum(w < c for w, c in zip(w95, c95))
        same = sum(w == c for w, c in zip(w95, c95))
        lines.append(
            f"| {pair} | {len(warm)} | {fmt_median_iqr(c95, budget)} | "
            f"{fmt_median_iqr(w95, budget)} | {better} / {same} / {len(warm) - better - same} | "
            f"{fmt_trials(float(np.median(c99)), budget)} / "
            f"{fmt_trials(float(np.median(w99)), budget)} |")
    return lines if len(lines) > 2 else []


def overhead_lines(results: Results) -> list[str]:
    o = results.doc.get("overhead")
    if not o:
        return []
    m = o["ms_per_trial_at_history"]
    ok_ms = "meets" if m["median"] is not None and m["median"] < 50 else "misses"
    ok_mem = "meets" if o["peak_rss_mib"] < 1024 else "misses"
    return [
        f"`model` overhead on {o['space']} ({o['code']}): ask(1)+tell with {m['history']:,} "
        f"trials of history, over {m['timed']} trials: median {m['median']:.1f} ms, mean "
        f"{m['mean']:.1f} ms, p90 {m['p90']:.1f} ms, max {m['max']:.1f} ms per trial "
        f"({ok_ms} the < 50 ms target; mean over the whole run "
        f"{o['ms_per_trial_whole_run_mean']:.1f} ms; machine load average at the end "
        f"{', '.join(map(str, o.get('load_average', [])))} on {o.get('cpus')} cores).",
        f"Peak RSS of a {o['trials']:,}-trial `model` search in a fresh process: "
        f"{o['peak_rss_mib']:.0f} MiB ({ok_mem} the < 1 GiB target; {o['wall_s']:.0f} s).",
    ]


def stale_notes(data: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Strategies whose runs were made by other code than this checkout's."""
    notes = []
    for strategy in strategy_order(s for by in data.values() for s in by):
        codes = {r["code"] for by in data.values() for r in by.get(strategy, [])}
        if codes != {code_of(strategy)}:
            notes.append(f"{strategy} (runs by {', '.join(sorted(codes))}; this checkout is "
                         f"{code_of(strategy)})")
    return notes


def report(results: Results, facts: dict[str, dict[str, Any]], spaces: list[str],
           seeds: int, budget: int) -> str:
    """The summary as markdown (the RESULTS.md section without its heading)."""
    data = collect(results, spaces, seeds, budget)
    stats = {sp: {st: row_stats(recs, budget) for st, recs in by.items()}
             for sp, by in data.items()}
    present = {st for by in data.values() for st in by}
    missing = [s for s in TUNEX_STRATEGIES
               if any(len(data.get(sp, {}).get(s, [])) < seeds for sp in spaces)]
    out = [
        "Measured by `benchmarks/search_efficiency.py` (its docstring says what and how): "
        "recorded Kernel Tuner spaces replayed with noise (one recorded repeat per measurement), "
        f"scored by recorded mean times; budget {budget} measured configs, seeds 0-{seeds - 1}. "
        "A run that never gets within 95% (99%) counts as budget + 1; `n.r.`: median not "
        "reached. Kernel Tuner strategies (`kt:`) run in its simulation mode on the same files "
        "and space; a trial is a unique config served from the recorded cache (failed configs "
        "count, repeats and points its restrictions exclude do not), which is also how "
        "Kernel Tuner counts its own `max_fevals`.",
        "",
        "Runs:",
    ]
    for sess in results.doc["sessions"]:
        out.append(f"- {sess['date']}, {sess['machine']}: `{sess['command']}` "
                   f"({sess['seconds'] / 60:.0f} min)")
    if missing:
        out += ["", f"**tunex rows pending**: {', '.join(missing)} not yet run with "
                    f"{seeds} seeds on every space (the full tunex run is still to be done)."]
    stale = stale_notes(data)
    if stale:
        out += ["", "Runs from other code than this checkout: " + "; ".join(stale) + "."]
    out += ["", "### Spaces", "", *spaces_table(facts, spaces, budget)]
    if stats:
        out += ["", "### Trials to 95% / 99% of the optimum", "", *runs_table(stats, budget)]
        out += ["", "### Per strategy", "",
                "`x random`: random search's analytic median trials to 95% over the strategy's "
                "median, median over spaces.", "", *strategy_table(stats, facts, budget)]
    kt_short = [st for st in present if st.startswith("kt:") and any(
        r["end"] != "budget" for by in data.values() for r in by.get(st, []))]
    if kt_short:
        out += ["", "Kernel Tuner strategies that stop before the budget on their own in some "
                    "runs (`trials used` < budget): " + ", ".join(strategy_order(kt_short))
                + "."]
        out += [f"- {st}: {KT_NOTES[st]}." for st in strategy_order(kt_short) if st in KT_NOTES]
    tt = transfer_table(results, seeds, budget)
    if tt:
        out += ["", "### Transfer (`model`, warm start from another GPU's 200-trial search)",
                "", *tt]
    ol = overhead_lines(results)
    if ol:
        out += ["", "### `model` overhead and memory", "", *ol]
    return "\n".join(out) + "\n"


def write_section(path: Path, body: str, heading: str = SECTION) -> None:
    """Replace (or add) the section in a markdown file, keeping the other sections."""
    text = path.read_text() if path.exists() else TITLE + "\n"
    section = f"{heading}\n\n{body}"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


# -- leave-one-out: every decision scored on spaces it was not made on ----------------------------
#
# ``--loo``: every recorded space under every ``--loo-data`` folder (default: ../shared's Kernel
# Tuner spaces and benchmarks/data, tunex's own H200 and RISC-V recordings) is one held-out
# space in turn. Its kernel family is its folder (for files directly in a data folder: the
# kernel name the file records). A task is one (family, seed, variant): a cold ``model`` search
# on every space of the family (``run_tunex``, noisy replay, ``--budget`` trials), then, for each
# space, a warm search given the first ``--source-budget`` trials of the family's *other*
# spaces' cold searches (``strategy.warm_start``, the way the Tuner hands it a database's
# other workloads of the kernel). ``--variants`` names option sets of the ``model`` strategy;
# the variant scored on a held-out space is the one with the best score (mean log2 of random's
# median over the variant's median trials to 95%) on the spaces of the *other* families, so a
# choice among variants is never credited with its own space or its siblings.

LOO_DATA = [DEFAULT_DATA, HERE / "data"]
LOO_SECTION = "## Search efficiency, leave-one-out (issue 8)"
EASY = 50  # "easy space": random search expects at most this many trials to 95%


def loo_spaces(roots: Sequence[Path], patterns: Sequence[str] = ("*",)
               ) -> dict[str, tuple[str, Path]]:
    """``{"family/name": (family, path)}`` for every recorded space under ``roots``."""
    out: dict[str, tuple[str, Path]] = {}
    for root in roots:
        for p in recorded_files(root, "**/*"):
            if p.parent == root:
                family = str(ReplayTarget(p).doc_meta.get("kernel_name") or p.parent.name)
            else:
                family = p.parent.name
            key = f"{family}/{p.name.split('.')[0]}"
            if any(fnmatch.fnmatch(key, pat) for pat in patterns):
                out[key] = (family, p)
    if not out:
        raise SystemExit(f"no recorded spaces matching {list(patterns)} under "
                         f"{[str(r) for r in roots]}")
    return out


def loo_families(spaces: dict[str, tuple[str, Path]], by: str = "folder"
                 ) -> dict[str, list[tuple[str, str]]]:
    """The leave-one-out groups of siblings: ``{group: [(space, path), ...]}``, a group being
    a folder (``by="folder"``, one space definition) or a kernel name (``by="kernel"``, as a
    tuning database groups workloads, versions of one kernel's space together)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for space, (family, path) in spaces.items():
        group = ReplayTarget(path).workload().kernel if by == "kernel" else family
        out.setdefault(group, []).append((space, str(path)))
    return out


@functools.cache
def variant_class(options_json: str) -> type:
    """The ``model`` strategy with some options changed (its defaults for the rest)."""
    from tunex.search._model import ModelSearch

    options = json.loads(options_json)
    if not options:
        return ModelSearch

    class Variant(ModelSearch):
        def __init__(self, space: Any, **kw: Any) -> None:
            super().__init__(space, **{**options, **kw})

    return Variant


def run_loo_family(members: list[tuple[str, str]], seed: int, budget: int,
                   source_budget: int, options_json: str, optima: dict[str, float],
                   warm: bool = True) -> dict[str, dict[str, Any]]:
    """One (family, seed, variant) task: cold searches of every member, then warm ones."""
    from tunex.search import register_strategy

    register_strategy("model", variant_class(options_json))  # this worker's "model"
    cold: dict[str, dict[str, Any]] = {}
    for space, path in members:
        cold[space] = run_tunex(Path(path), "model", seed, budget, optima[space],
                                keep_measurements=True)
    out: dict[str, dict[str, Any]] = {}
    for space, path in members:
        rec = {"cold": {k: v for k, v in cold[space].items() if not k.startswith("_")}}
        sources = [(cold[s]["_workload"], cold[s]["_measurements"][:source_budget])
                   for s, _ in members if s != space]
        if warm and sources:
            rec["warm"] = run_tunex(Path(path), "model", seed, budget, optima[space],
                                    warm=sources)
            rec["warm"]["sources"] = [s for s, _ in members if s != space]
        out[space] = rec
    return out


def cold_cache_path(folder: Path, members: list[tuple[str, str]], seed: int,
                    budget: int) -> Path:
    """Where ``--cold-cache`` keeps a family's cold sources: keyed by the recorded files'
    contents, the seed, the budget and the default ``model``'s options (a changed default
    makes new sources; a change inside the code does not show here, see ``--cold-cache``)."""
    import inspect

    from tunex.search._model import ModelSearch

    defaults = {k: repr(v.default) for k, v in
                inspect.signature(ModelSearch.__init__).parameters.items()
                if v.default is not inspect.Parameter.empty}
    digest = hashlib.sha256(json.dumps(
        [[[s, ReplayTarget(Path(p)).digest] for s, p in members], defaults]
        + ([IN_FLIGHT] if IN_FLIGHT != 1 else []), sort_keys=True).encode()).hexdigest()[:12]
    family = members[0][0].split("/")[0]
    return folder / f"{family}-seed{seed}-budget{budget}-{digest}.pkl"


def loo_cold_sources(members: list[tuple[str, str]], seed: int, budget: int,
                     optima: dict[str, float], cold_cache: str | None = None
                     ) -> dict[str, dict[str, Any]]:
    """Cold searches of ``budget`` trials of every member by the default ``model`` (with their
    measurements and workload), run once, or read from ``cold_cache``."""
    import pickle

    from tunex.search import register_strategy
    from tunex.search._model import ModelSearch

    cache = None
    if cold_cache:
        cache = cold_cache_path(Path(cold_cache), members, seed, budget)
        if cache.exists():
            cold: dict[str, dict[str, Any]] = pickle.loads(cache.read_bytes())
            return cold
    register_strategy("model", ModelSearch)
    cold = {space: run_tunex(Path(path), "model", seed, budget, optima[space],
                             keep_measurements=True) for space, path in members}
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(cold))
        tmp.replace(cache)
    return cold


def loo_chained(members: list[tuple[str, str]], seed: int, budget: int,
                optima: dict[str, float]) -> dict[str, dict[str, Any]]:
    """``members`` tuned one after another by the default ``model`` as a user's database
    holds them after the decorator met each shape in turn: the first cold, each next one
    warm-started from those before it, ``budget`` trials each (``IN_FLIGHT`` in flight).
    Siblings recorded so stay near their own siblings' choices, where cold sources spread
    over their spaces."""
    from tunex.search import register_strategy
    from tunex.search._model import ModelSearch

    register_strategy("model", ModelSearch)
    done: dict[str, dict[str, Any]] = {}
    for space, path in members:
        warm = [(r["_workload"], r["_measurements"]) for r in done.values()]
        done[space] = run_tunex(Path(path), "model", seed, budget, optima[space],
                                warm=warm or None, keep_measurements=True)
    return done


@functools.cache
def _kernel_and_names(path: str) -> tuple[str, frozenset[str], str]:
    target = ReplayTarget(Path(path))
    return (target.workload().kernel, frozenset(target.space.names),
            str(target.fingerprint()["device"]))


def related_spaces(space: str, path: str, others: list[tuple[str, str]],
                   same_device: bool = False) -> list[str]:
    """The spaces among ``others`` of another kernel whose parameters include more than half
    of ``space``'s: the kernels a user would name with ``--like`` (``Tuner(like=...)``) for
    a kernel's first search, by the rule its model keeps their trials by (``same_device``:
    only those recorded on the same device, a database of one machine's kernels)."""
    kernel, names, device = _kernel_and_names(path)
    out = []
    for s, p in others:
        k, n, dev = _kernel_and_names(p)
        if k != kernel and names_most(names, n) and (
                not same_device or dev == device):
            out.append(s)
    return out


def run_loo_warm(members: list[tuple[str, str]], seed: int, budget: int, source_budget: int,
                 variants: dict[str, str], optima: dict[str, float],
                 cold_cache: str | None = None, warm_budget: int | None = None,
                 related: list[list[tuple[str, str]]] | None = None,
                 with_siblings: bool = False, same_device: bool = False,
                 prior: bool = False, chained: bool = False, prior_space: bool = False
                 ) -> dict[str, dict[str, dict[str, Any]]]:
    """One (family, seed) task of ``--no-cold``: cold searches of every member by the default
    ``model`` (the siblings' sources, of ``max(budget, source_budget)`` trials, run once, or
    read from ``cold_cache``), then every variant's warm searches on the first
    ``source_budget`` trials of each, of ``warm_budget`` trials (default ``budget``).
    ``related`` (``--sources other-kernels``): the other families; a member's sources are
    then their cold searches of the spaces :func:`related_spaces` names, not its siblings'
    (``with_siblings``, ``--sources both``: as well as its siblings'). ``prior``
    (``--sources prior``): no sources but the prior tunex ships less the member's own kernel,
    taken by the Tuner as a first search takes it (``Tuner(prior=...)``, empty database);
    with ``prior_space`` (``--sources prior-space``) less the member's own recording only
    (its kernel, problem and device), so the same kernel's other recordings stay.
    ``chained`` (``--sources chained``): a member's sources are the other members tuned in turn
    by the default ``model``, each warm-started from those before it (:func:`loo_chained`).
    ``{variant: {space: record}}``."""
    from tunex.db.prior import Prior
    from tunex.search import register_strategy

    src_budget = max(budget, source_budget)  # the first source_budget trials are the sources
    cold = loo_cold_sources(members, seed, src_budget, optima, cold_cache)
    pool = dict(cold)
    names: dict[str, list[str]] = {}
    for space, path in members:
        names[space] = [s for s, _ in members if s != space]
        if related is not None:
            names[space] = (names[space] if with_siblings else []) + related_spaces(
                space, path, [m for g in related for m in g], same_device)
            for group in related:
                if any(s in names[space] for s, _ in group) and group[0][0] not in pool:
                    pool.update(loo_cold_sources(group, seed, src_budget, optima, cold_cache))
    chain = {space: loo_chained([m for m in members if m[0] != space], seed, source_budget,
                                optima) for space, _ in members} if chained else {}
    whole = (Prior.load(*os.environ["TUNEX_BENCH_PRIOR"].split(os.pathsep))
             if os.environ.get("TUNEX_BENCH_PRIOR") else Prior.shipped()) if prior else None
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, options_json in variants.items():
        register_strategy("model", variant_class(options_json))
        for space, path in members:
            kernel = pool[space]["_workload"].kernel  # other kernels here: related by names
            if whole is not None:
                held_out = (whole.without(like=pool[space]["_workload"])
                            if prior_space else whole.without({kernel}))
                rec = run_tunex(Path(path), "model", seed, warm_budget or budget,
                                optima[space], prior=held_out)
                taken = held_out.related(pool[space]["_workload"], _kernel_and_names(path)[1])
                if not taken:
                    continue
                rec["sources"] = sorted({f"{w.kernel} {w.problem}" for w, _ in taken})
            else:
                took = chain[space] if chained else pool
                sources = [(took[s]["_workload"], took[s]["_measurements"][:source_budget])
                           for s in names[space]]
                if not sources:
                    continue
                rec = run_tunex(Path(path), "model", seed, warm_budget or budget,
                                optima[space], warm=sources,
                                guessed={w.kernel for w, _ in sources} - {kernel})
                rec["sources"] = names[space]
            out.setdefault(name, {})[space] = {
                "warm": rec,
                "cold_default": {k: v for k, v in cold[space].items() if not k.startswith("_")}}
    return out


def loo_main(args: argparse.Namespace) -> int:
    set_in_flight(args.batch)
    roots = args.loo_data or LOO_DATA
    spaces = loo_spaces(roots, [x.strip() for x in args.spaces.split(",")])
    variants: dict[str, dict[str, Any]] = json.loads(args.variants)
    results = Results(args.out)
    doc = results.doc.setdefault("loo", {"facts": {}, "runs": {}})
    facts = {}
    for space, (family, path) in spaces.items():
        f = doc["facts"].get(space)
        if not f or f.get("data") != ReplayTarget(path).digest:
            f = {**space_facts(path), "family": family}
            doc["facts"][space] = f
        facts[space] = f
    families = loo_families(spaces, args.siblings_by)
    t0 = time.time()
    tasks: list[tuple[Any, ...]] = []
    for name, options in variants.items():
        opts = json.dumps(options, sort_keys=True)
        for family, members in families.items():
            for seed in range(args.seed_start, args.seed_start + args.seeds):
                key = {"budget": args.budget, "code": tunex_code(), "options": opts,
                       "source_budget": args.source_budget,
                       **({"batch": args.batch} if args.batch != 1 else {})}
                have = [doc["runs"].get(name, {}).get(s, {}).get(str(seed)) for s, _ in members]
                if args.reuse and all(matches(h, key) for h in have):
                    continue
                tasks.append((name, family, members, seed, opts, key))
    if args.no_cold:  # one task per (family, seed): shared cold sources, every variant warm
        tasks = []
        opts_all = {n: json.dumps(o, sort_keys=True) for n, o in variants.items()}
        for family, members in families.items():
            if len(members) < 2 and args.sources not in ("prior", "prior-space"):
                continue
            for seed in range(args.seed_start, args.seed_start + args.seeds):
                key = {"budget": args.budget, "code": tunex_code(),
                       "source_budget": args.source_budget, "sources": "default model, cold"
                       + {"siblings": "", "chained": ", chained (each warm from those before)",
                          "other-kernels": ", other kernels",
                          "both": ", siblings and other kernels",
                          "prior": ", the shipped prior less its kernel " + prior_code(),
                          "prior-space": ", the shipped prior less the space itself "
                          + prior_code()}[
                              args.sources]
                       + (", same device" if args.related_device == "same" else ""),
                       **({"warm_budget": args.warm_budget} if args.warm_budget else {}),
                       **({"batch": args.batch} if args.batch != 1 else {})}
                todo = {n: o for n, o in opts_all.items() if not (args.reuse and all(
                    matches(doc["runs"].get(n, {}).get(s, {}).get(str(seed)),
                            {**key, "options": o}) for s, _ in members))}
                if todo:
                    tasks.append((todo, family, members, seed, None, key))
    if args.compare_only:
        tasks = []
    # the other strategies, cold, on the same held-out spaces: plain searches of the first mode
    # (stored under the file's "runs"); model's own cold runs are the variant's above
    compare = [st for st in args.compare if st not in variants]
    plain = argparse.Namespace(**{**vars(args), "strategies": compare, "parts": {"search"}})
    compare_tasks = [] if args.report_only else plan(
        plain, {s: p for s, (_f, p) in spaces.items()}, facts, results)
    print(f"leave-one-out: {len(tasks)} tasks ({len(spaces)} spaces in {len(families)} "
          f"families, variants {', '.join(variants)}, seeds {args.seed_start}-"
          f"{args.seed_start + args.seeds - 1})"
          + (f"; {len(compare_tasks)} runs of {', '.join(compare)}" if compare else ""),
          flush=True)

    def store(task: tuple[Any, ...], out: dict[str, Any]) -> None:
        name, family, _members, seed, _opts, key = task
        if args.no_cold:
            for v, by_space in out.items():
                for space, rec in by_space.items():
                    doc["runs"].setdefault(v, {}).setdefault(space, {})[str(seed)] = {
                        **rec, **key, "options": name[v]}
            results.save()
            if not out:  # no member had a source (--sources other-kernels: none related)
                print(f"[{time.time() - t0:6.0f}s] {family:20s} seed {seed:3d}  no sources",
                      flush=True)
                return
            first = next(iter(out.values()))  # cold (the default's) / warm per variant
            print(f"[{time.time() - t0:6.0f}s] {family:20s} seed {seed:3d}  " + "  ".join(
                f"{s.split('/')[1]}: {trials_to(first[s]['cold_default'], 0.95, args.budget)}/"
                + ",".join(str(trials_to(out[v][s]["warm"], 0.95, args.budget)) for v in out)
                for s in first), flush=True)
            return
        for space, rec in out.items():
            doc["runs"].setdefault(name, {}).setdefault(space, {})[str(seed)] = {**rec, **key}
        results.save()
        print(f"[{time.time() - t0:6.0f}s] {name:16s} {family:20s} seed {seed:3d}  " + "  ".join(
            f"{s.split('/')[1]}: {trials_to(r['cold'], 0.95, args.budget)}"
            + (f"/{trials_to(r['warm'], 0.95, args.budget)}" if "warm" in r else "")
            for s, r in out.items()), flush=True)

    def call(task: tuple[Any, ...]) -> Any:
        _name, _family, members, seed, opts, _key = task
        if args.no_cold:
            return (run_loo_warm, members, seed, args.budget, args.source_budget, _name,
                    {s: facts[s]["optimum"] for s in spaces},
                    str(args.cold_cache) if args.cold_cache else None, args.warm_budget,
                    [g for g in families.values() if g is not members]
                    if args.sources in ("other-kernels", "both") else None,
                    args.sources == "both", args.related_device == "same",
                    args.sources in ("prior", "prior-space"), args.sources == "chained",
                    args.sources == "prior-space")
        return (run_loo_family, members, seed, args.budget, args.source_budget, opts,
                {s: facts[s]["optimum"] for s, _ in members}, not args.no_warm)

    if args.report_only:
        tasks = []
    if args.loo_overhead and not args.report_only:
        # each variant in the order given, in this process (name one twice to alternate them)
        from tunex.search import register_strategy
        from tunex.search._model import ModelSearch

        print("overhead: a warm model search to 1,100 trials on the largest space", flush=True)
        timed = {}
        for name, options in variants.items():
            register_strategy("model", variant_class(json.dumps(options, sort_keys=True)))
            timed[name] = loo_overhead(spaces)
            o = timed[name]
            print(f"  {name}: {o['space']}, ms per ask + tell at {o['history']} trials: median "
                  f"{o['median']:.1f}, mean {o['mean']:.1f}, p90 {o['p90']:.1f}, max "
                  f"{o['max']:.0f}", flush=True)
        register_strategy("model", ModelSearch)
        doc["overhead"] = next(iter(timed.values()))
        if len(timed) > 1:
            doc["overhead_variants"] = timed
        results.save()
    if tasks:
        if args.jobs <= 1:
            for task in tasks:
                fn, *a = call(task)
                store(task, fn(*a))
        else:
            with ProcessPoolExecutor(max_workers=args.jobs, initializer=set_in_flight,
                                     initargs=(args.batch,)) as pool:
                futs = {pool.submit(*call(t)): t for t in tasks}
                while futs:
                    done, _ = wait(futs, return_when=FIRST_COMPLETED)
                    for fut in done:
                        store(futs.pop(fut), fut.result())
    if compare_tasks:
        run_tasks(compare_tasks, args.jobs, results, Progress(compare_tasks))
    if tasks or compare_tasks:
        doc.setdefault("sessions", []).append({
            "command": "python " + " ".join(shlex.quote(a) for a in
                                            [os.path.relpath(__file__, REPO), *sys.argv[1:]]),
            "date": dt.date.today().isoformat(),
            "machine": f"{os.cpu_count()}-core {platform.machine()} VM, Python "
                       f"{platform.python_version()}",
            "seconds": round(time.time() - t0)})
        results.save()
    if args.stop_rules:
        print(loo_patience_report(doc, next(iter(variants)), args.stop_rules))
        return 0
    if args.no_cold:
        body = loo_warm_report(doc, list(facts), list(variants),
                               range(args.seed_start, args.seed_start + args.seeds), args.budget)
    else:
        body = loo_report(doc, facts, list(variants), args.seed_start + args.seeds, args.budget)
    if compare:
        body += "\n" + loo_compare_report(results.doc, facts, next(iter(variants), "model"),
                                          compare, args.seeds, args.budget)
    print(body)
    if args.markdown:
        write_section(args.markdown, body, LOO_SECTION)
        print(f"wrote section '{LOO_SECTION}' of {args.markdown}")
    return 0


def stopped_at(improvements: Sequence[Sequence[float]], patience: int | None,
               trials: int) -> tuple[int, float]:
    """Where the Tuner's patience rule (stop once ``patience`` trials pass without a 1% gain)
    stops a stored run, and the best recorded time by then: ``(trials, time)``. The rule here
    reads the recorded means of the run's trials (``improvements``), the Tuner's the noisy
    measurements, whose spurious gains reset it more often: a lower bound of its trials."""
    gains = dict((int(t), float(v)) for t, v in improvements)
    best, last = math.inf, 0
    for t in range(1, trials + 1):
        if t in gains:
            if gains[t] < best * 0.99:
                last = t
            best = min(best, gains[t])
        if patience is not None and t - last >= patience:
            return t, best
    return trials, best


def loo_patience_report(doc: dict[str, Any], variant: str, budget: int,
                        patiences: Sequence[int | None] = (10, 20, 30, 40, None)) -> str:
    """What stopping on patience would cost the stored runs of ``variant`` cut at ``budget``
    trials (the decorator's trial budget): mean share of the optimum reached, runs below 95%
    of it, mean trials spent, for the cold and the warm runs."""
    facts, runs = doc["facts"], doc["runs"].get(variant, {})
    lines = [f"stopping on patience, the stored runs of {variant!r} cut at {budget} trials",
             "", "| runs | patience | runs | mean share of the optimum | below 95% | mean trials |",
             "|---|---:|---:|---:|---:|---:|"]
    for kind in ("cold", "cold_default", "warm"):
        recs = [(facts[s]["optimum"], r[kind]) for s, seeds in runs.items() if s in facts
                for r in seeds.values() if kind in r]
        if not recs:
            continue
        for patience in patiences:
            got = [stopped_at(rec["improvements"], patience, min(budget, rec["trials"]))
                   for _opt, rec in recs]
            share = [opt / t for (opt, _rec), (_n, t) in zip(recs, got)]
            lines.append(f"| {kind.replace('_default', '')} | {patience or 'none'} | "
                         f"{len(recs)} | {sum(share) / len(share):.4f} | "
                         f"{sum(x < 0.95 for x in share)} | "
                         f"{sum(n for n, _t in got) / len(got):.1f} |")
    return "\n".join(lines)


def loo_warm_report(doc: dict[str, Any], spaces: list[str], variants: list[str],
                    seeds: Iterable[int], budget: int, within: int = 20) -> str:
    """``--no-cold``: per variant, warm runs within 95% by trial ``within``, per-space medians
    and hits, and the mean log2 of trials against the first variant on the same seeds."""
    names = [str(s) for s in seeds]

    def t95(v: str, space: str, seed: str) -> int | None:
        r = doc["runs"].get(v, {}).get(space, {}).get(seed)
        if not r or "warm" not in r or r["budget"] < budget:
            return None
        return min(trials_to(r["warm"], 0.95, budget), budget + 1)

    base = variants[0]
    lines = [f"warm runs (seeds {names[0]}-{names[-1]}, budget {budget}): trials to 95%, "
             f"median / runs within {within}", "",
             "| space | " + " | ".join(variants) + " |", "|---|" + "---:|" * len(variants)]
    total: dict[str, list[int]] = {v: [] for v in variants}
    for space in spaces:
        cells = []
        for v in variants:
            t = [x for x in (t95(v, space, s) for s in names) if x is not None]
            total[v] += t
            cells.append(f"{fmt_trials(float(np.median(t)), budget)} / "
                         f"{sum(x <= within for x in t)}/{len(t)}" if t else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {space} | " + " | ".join(cells) + " |")
    lines += ["", f"| variant | warm runs within 95% by {within} | runs | mean log2 of trials, "
              f"{base} / variant (> 0: variant faster) | faster / same / slower |",
              "|---|---:|---:|---:|---|"]
    for v in variants:
        pairs = [(a, b) for space in spaces for s in names
                 if (a := t95(base, space, s)) is not None and (b := t95(v, space, s)) is not None]
        d = [math.log2(a / b) for a, b in pairs]
        lines.append(
            f"| {v} | {pct(np.mean([x <= within for x in total[v]])) if total[v] else '-'} | "
            f"{len(total[v])} | {np.mean(d) if d else float('nan'):+.3f} | "
            f"{sum(x > 0 for x in d)} / {sum(x == 0 for x in d)} / {sum(x < 0 for x in d)} |")
    return "\n".join(lines)


def loo_overhead(spaces: dict[str, tuple[str, Path]], seed: int = 0) -> dict[str, Any]:
    """ask + tell per trial at 1,000 trials of history with transfer data: a ``model`` search
    of the largest space, warm-started with a finished 1,000-trial search of a sibling, timed
    over its trials 1,001-1,100."""
    import resource

    by_family: dict[str, list[str]] = {}
    for s, (family, _p) in spaces.items():
        by_family.setdefault(family, []).append(s)
    sizes = {s: ReplayTarget(p).space.size for s, (_f, p) in spaces.items()}
    dst = max((s for s in spaces if len(by_family[spaces[s][0]]) > 1), key=lambda s: sizes[s])
    src = next(s for s in by_family[spaces[dst][0]] if s != dst)
    lo, timed = OVERHEAD["history"], OVERHEAD["timed"]
    source = run_tunex(spaces[src][1], "model", seed, lo, math.inf, keep_measurements=True)
    rec = run_tunex(spaces[dst][1], "model", seed, lo + timed, math.inf, keep_measurements=True,
                    warm=[(source["_workload"], source["_measurements"])])
    ms = np.array(rec["_step_ms"][lo: lo + timed])
    return {"space": dst, "source": src, "source_trials": len(source["_measurements"]),
            "history": lo, "timed": int(ms.size), "median": float(np.median(ms)),
            "mean": float(ms.mean()), "p90": float(np.percentile(ms, 90)),
            "max": float(ms.max()), "whole_run_mean": float(np.mean(rec["_step_ms"])),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "load_average": [round(x, 1) for x in os.getloadavg()], "code": tunex_code(),
            "date": dt.date.today().isoformat()}


def loo_runs(doc: dict[str, Any], variant: str, space: str, seeds: int, budget: int,
             side: str = "cold") -> list[int]:
    """Trials to 95% of a variant's runs on a space, seeds 0..seeds-1 (budget + 1: missed)."""
    by_seed = doc["runs"].get(variant, {}).get(space, {})
    return [min(trials_to(by_seed[str(s)][side], 0.95, budget), budget + 1)
            for s in range(seeds)
            if str(s) in by_seed and side in by_seed[str(s)]
            and by_seed[str(s)]["budget"] >= budget]


def loo_choice(doc: dict[str, Any], facts: dict[str, dict[str, Any]], variants: list[str],
               held_out: str, seeds: int, budget: int) -> str:
    """The variant with the best mean log2 speed-up over random on the other families."""
    family = facts[held_out]["family"]
    best, best_score = variants[0], -math.inf
    for v in variants:
        scores = []
        for s, f in facts.items():
            t = loo_runs(doc, v, s, seeds, budget)
            if f["family"] != family and t:
                scores.append(math.log2(f["random"]["0.95"]["median"] / float(np.median(t))))
        score = float(np.mean(scores)) if scores else -math.inf
        if score > best_score:
            best, best_score = v, score
    return best


def loo_table(doc: dict[str, Any], facts: dict[str, dict[str, Any]],
              pick: Callable[[str], str], seeds: int, b: int, show_variant: bool = False
              ) -> list[str]:
    """Per space: random's odds, the picked variant's cold (and warm) trials to 95%."""
    rows, ratios, within, easy_bad, warm20 = [], [], [], [], []
    n_easy, floor, slower = 0, 0.0, []  # random's own breaches of the rule; significant losses
    early, w_early = min(EARLY, b), min(20, b)  # a miss counts as b + 1: never within
    for space, f in facts.items():
        v = pick(space)
        t = loo_runs(doc, v, space, seeds, b)
        if not t:
            continue
        w = loo_runs(doc, v, space, seeds, b, "warm")
        r = f["random"]["0.95"]
        ratio = r["median"] / float(np.median(t))
        ratios.append(ratio)
        within += [x <= early for x in t]
        easy = r["mean"] <= EASY
        rel = float(np.mean(t)) / r["mean"]
        good = f.get("within", {}).get("0.95")
        if easy and good:
            n_easy += 1
            p, breach = easy_odds(f["size"], good, t, b + 1)
            floor += breach
            if p < 0.05:
                slower.append(f"{space} (p {p:.2g})")
        if easy and rel > 1.2:
            easy_bad.append(f"{space} ({rel:.2f}, p {p:.2g})" if good else space)
        warm20 += [x <= w_early for x in w]
        rows.append(
            f"| {space} | {f['size']:,} | {r['mean']:,.0f} / {r['median']:,.0f} | "
            + (f"{v} | " if show_variant else "")
            + f"{len(t)} | {fmt_median_iqr(t, b)} | {pct(np.mean([x <= early for x in t]))} "
            f"| {ratio:.1f} | {'easy: ' if easy else ''}{rel:.2f} | "
            + (f"{len(w)} | {fmt_median_iqr(w, b)} | {pct(np.mean([x <= w_early for x in w]))} |"
               if w else "- | - | - |"))
    if not rows:
        return []
    return ["| space | valid points | random: mean / median | "
            + ("variant | " if show_variant else "")
            + f"cold runs | cold: trials to 95% median [IQR] | cold: within 95% by {early} | "
            f"x random | mean / random | warm runs | warm: median [IQR] | warm: within 95% by "
            f"{w_early} |",
            "|---|---:|---:|" + ("---|" if show_variant else "")
            + "---:|---|---:|---:|---:|---:|---|---:|", *rows, "",
            f"Median x random over {len(ratios)} spaces **{float(np.median(ratios)):.1f}x**; "
            f"cold runs within 95% by trial {early}: **{pct(np.mean(within))}**; easy "
            "spaces where the mean is over 1.2x random's expectation: "
            f"**{', '.join(easy_bad) if easy_bad else 'none'}** (p: the chance that uniform "
            "sampling's mean over as many runs is as high); uniform sampling itself, scored so, "
            f"would be over 1.2x on {floor:.1f} of these {n_easy} easy spaces (expected count); "
            "easy spaces where the mean is significantly above uniform sampling's (p < 0.05): "
            f"**{', '.join(slower) if slower else 'none'}**"
            + (f"; warm runs within 95% by trial {w_early}: **{pct(np.mean(warm20))}**."
               if warm20 else ".")]


def loo_report(doc: dict[str, Any], facts: dict[str, dict[str, Any]], variants: list[str],
               seeds: int, budget: int) -> str:
    out = [
        "Measured by `python benchmarks/search_efficiency.py --loo` (the leave-one-out mode: see "
        "the comment above `loo_spaces` in that file): every recorded space is held out in turn; "
        "noisy replay (one recorded repeat per measurement), scored by recorded means; a run "
        "that misses 95% counts as budget + 1. `x random`: random search's exact median trials "
        "to 95% over `model`'s median. `easy`: random expects at most "
        f"{EASY} trials; `mean / random`: `model`'s mean trials to 95% over random's "
        "expectation. Warm: the same search given the first trials of the cold searches of the "
        "family's other spaces (same seed).", "", "Runs:"]
    for sess in doc.get("sessions", []):
        out.append(f"- {sess['date']}, {sess['machine']}: `{sess['command']}` "
                   f"({sess['seconds'] / 60:.0f} min)")
    default = variants[0]
    for b in sorted({min(100, budget), budget}):
        out += ["", f"### Budget {b}: `{default}`, cold and warm", "",
                *loo_table(doc, facts, lambda _s: default, seeds, b)]
        if len(variants) > 1:
            out += ["", f"### Budget {b}: the variant chosen on the other families", "",
                    "Per held-out space, the variant (of "
                    + ", ".join(f"`{v}`" for v in variants) + ") with the best mean log2 "
                    "speed-up over random on the spaces of the other kernel families, scored "
                    "on the held-out space.", "",
                    *loo_table(doc, facts, functools.partial(loo_choice, doc, facts, variants,
                                                             seeds=seeds, budget=b),
                               seeds, b, show_variant=True)]
    o = doc.get("overhead")
    if o:
        out += ["", f"`model` ask + tell per trial with {o['history']:,} trials of history and "
                    f"{o['source_trials']:,} transfer trials ({o['source']} -> {o['space']}, "
                    f"{o['date']}, {o['code']}), over {o['timed']} trials: median "
                    f"{o['median']:.1f} ms, mean {o['mean']:.1f} ms, p90 {o['p90']:.1f} ms, max "
                    f"{o['max']:.0f} ms (target < 50 ms); mean over the whole run "
                    f"{o['whole_run_mean']:.1f} ms; peak RSS {o['peak_rss_mib']:.0f} MiB; load "
                    f"average {', '.join(map(str, o['load_average']))} on 2 cores."]
    return "\n".join(out) + "\n"


def compare_runs(doc: dict[str, Any], space: str, strategy: str, seeds: int, budget: int
                 ) -> list[int]:
    """Trials to 95% of a compared strategy's runs on a space, seeds 0..seeds-1 (budget + 1:
    missed). A tunex strategy never sees the budget, so a longer run read up to ``budget`` is
    the same run; a Kernel Tuner strategy's schedule depends on ``max_fevals``: its budget must
    match."""
    by_seed = doc["runs"].get(space, {}).get(strategy, {})
    out = []
    for s in range(seeds):
        rec = by_seed.get(str(s))
        if rec and (rec["budget"] == budget
                    or (rec["budget"] > budget and not strategy.startswith("kt:"))):
            out.append(min(trials_to(rec, 0.95, budget), budget + 1))
    return out


def holm(p: dict[str, float], alpha: float = 0.05) -> set[str]:
    """The hypotheses Holm's step-down procedure rejects at family-wise error ``alpha``: the
    k-th smallest p-value (k from 0) against ``alpha / (m - k)``, stopping at the first that
    fails."""
    out: set[str] = set()
    for k, (name, v) in enumerate(sorted(p.items(), key=lambda kv: kv[1])):
        if v >= alpha / (len(p) - k):
            break
        out.add(name)
    return out


def loo_compare_table(doc: dict[str, Any], facts: dict[str, dict[str, Any]], model: str,
                      others: list[str], seeds: int, b: int) -> list[str]:
    """Per held-out space: median trials to 95% of model (cold and warm) and of every other
    strategy (cold), the best median, and whether cold model's is below every other one."""
    from scipy.stats import mannwhitneyu

    loo = doc.get("loo", {})
    names = strategy_order(others)
    rows, ahead, tied, n_spaces, behind_any, behind_loose = [], 0, 0, 0, 0, 0
    ceiling_ratio, ceiling_within, own_ratio, own_within = [], [], [], []
    beaten = dict.fromkeys(names, 0)  # spaces where cold model's median is below this one's
    counted = dict.fromkeys(names, 0)
    sig = {st: [0, 0] for st in names}  # spaces where model is significantly [ahead, behind]
    for space, f in facts.items():
        cold = loo_runs(loo, model, space, seeds, b)
        warm = loo_runs(loo, model, space, seeds, b, "warm")
        runs = {st: t for st in names if (t := compare_runs(doc, space, st, seeds, b))}
        med = {st: float(np.median(t)) for st, t in runs.items()}
        if not cold or not med:
            continue
        n_spaces += 1
        m = float(np.median(cold))
        best = min(med.values())
        # the ceiling of choosing among these methods per space, after the fact
        r_med = f["random"]["0.95"]["median"]
        ceiling_ratio.append(r_med / min(best, m))
        own_ratio.append(r_med / m)
        own_within.append(float(np.mean([t <= b for t in cold])))
        ceiling_within.append(max(own_within[-1],
                                  *(float(np.mean([x <= b for x in t])) for t in runs.values())))
        winners = [st for st in names if med.get(st) == min(best, m)]
        if m < best:
            ahead += 1
            verdict = "yes"
        elif m == best:
            tied += 1
            verdict = "tied" if m <= b else "tied: all miss"
        else:
            verdict = "no"
        for st, v in med.items():
            counted[st] += 1
            beaten[st] += m < v
        p_faster = {}  # one-sided p of "this strategy's runs are shorter than cold model's"
        for st, t in runs.items():
            if len(set(cold) | set(t)) > 1:
                sig[st][0] += bool(mannwhitneyu(cold, t, alternative="less").pvalue < 0.05)
                p_faster[st] = float(mannwhitneyu(cold, t, alternative="greater").pvalue)
                sig[st][1] += p_faster[st] < 0.05
        held = holm(p_faster)
        slower = [st.removeprefix("optuna:") for st in names if st in held]
        loose = [st.removeprefix("optuna:") for st in names
                 if p_faster.get(st, 1.0) < 0.05 and st not in held]
        behind_any += bool(slower)
        behind_loose += bool(slower or loose)
        n_runs = sorted({len(cold), *(len(t) for t in runs.values())})
        rows.append(
            f"| {space} | {f['random']['0.95']['median']:,.0f} | "
            f"{'/'.join(map(str, n_runs))} | **{fmt_trials(m, b)}** | "
            + (fmt_trials(float(np.median(warm)), b) if warm else "-") + " | "
            + " | ".join(fmt_trials(med[st], b) if st in med else "-" for st in names)
            + f" | {'-' if m == best > b else ', '.join(['model'] * (m <= best) + winners)}"
            f" | {verdict} | {', '.join(slower) or '-'}"
            + (f" ({', '.join(loose)})" if loose else "") + " |")
    if not rows:
        return []
    short = [st.removeprefix("optuna:") for st in names]
    lines = ["| space | random: median | runs | model cold | model warm | "
             + " | ".join(short) + " | best median (cold) | model cold ahead of all "
             "| significantly faster than model cold (Holm; in brackets: uncorrected only) |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(names) + "---|---|---|", *rows, "",
             f"Cold `{model}` has a lower median than every other strategy on **{ahead} of "
             f"{n_spaces} spaces ({pct(ahead / n_spaces)})**, ties the best on {tied}, and is "
             f"behind on {n_spaces - ahead - tied}. Spaces where its median is below each "
             "strategy's: " + ", ".join(f"{st} {beaten[st]}/{counted[st]}" for st in names)
             + ".",
             "",
             "Medians of a few seeds are noisy: the lowest of a dozen strategies' medians on a "
             "space is often a lucky one. Tested run by run instead (one-sided Mann-Whitney U on "
             "the trials to 95% of the two strategies' runs, p < 0.05, Holm's correction for the "
             f"{len(names)} tests per space): no other strategy is significantly faster than "
             f"cold `{model}` on **{n_spaces - behind_any} of {n_spaces} spaces "
             f"({pct((n_spaces - behind_any) / n_spaces)})**; without the correction on "
             f"{n_spaces - behind_loose} ({pct((n_spaces - behind_loose) / n_spaces)}). Spaces "
             f"where `{model}` is significantly faster / slower than each (uncorrected): "
             + ", ".join(f"{st} {a} / {z}" for st, (a, z) in sig.items()) + ".",
             "",
             "The ceiling of choosing among these methods: with each space's best strategy "
             f"picked after the fact (the lowest median of the {len(names) + 1}, `{model}` "
             "included), the median over spaces of random's median over that median would be "
             f"**{float(np.median(ceiling_ratio)):.1f}x** (`{model}` alone: "
             f"{float(np.median(own_ratio)):.1f}x); with the strategy that reaches 95% by trial "
             f"{b} most often picked per space, that share would average "
             f"**{pct(float(np.mean(ceiling_within)))}** (`{model}` alone: "
             f"{pct(float(np.mean(own_within)))})."]
    return lines


def loo_compare_report(doc: dict[str, Any], facts: dict[str, dict[str, Any]], model: str,
                       others: list[str], seeds: int, budget: int) -> str:
    out = [f"`{model}` against the other strategies on the same held-out spaces: medians of "
           "trials to 95% (a miss counts as budget + 1; `>B`: the median missed). Model cold: "
           "no sibling data, as the others get none; warm beside it. The others run cold "
           "through the first mode of this script (tunex's Optuna strategies and random "
           "through tunex's loop, Kernel Tuner's in its simulation mode, same noisy replay "
           "scoring). `runs`: seeds per strategy. `best median`: every strategy at the lowest "
           "median of the row, model cold included."]
    for b in sorted({min(100, budget), budget}):
        out += ["", f"Budget {b}:", "", *loo_compare_table(doc, facts, model, others, seeds, b)]
    by_code: dict[str, set[str]] = {}
    for by in doc["runs"].values():
        for st, recs in by.items():
            for r in recs.values():
                if st in others:
                    by_code.setdefault(r["code"], set()).add(st)
    for by in doc.get("loo", {}).get("runs", {}).get(model, {}).values():
        for r in by.values():
            by_code.setdefault(r["code"], set()).add(model)
    out += ["", "Runs made by: " + "; ".join(
        f"{code} ({', '.join(strategy_order(sts))})" for code, sts in sorted(by_code.items()))
            + "."]
    return "\n".join(out) + "\n"


# -- command line ---------------------------------------------------------------------------------


def strategy_names(spec: str) -> list[str]:
    """A comma list of strategies, with the groups 'tunex' and 'kt' expanded."""
    groups = {"tunex": TUNEX_STRATEGIES, "kt": KT_STRATEGIES}
    names: list[str] = []
    for s in filter(None, (x.strip() for x in spec.split(","))):
        names += [n for n in groups.get(s, [s]) if n not in names]
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="folder with <kernel>/<GPU>.json.gz (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    p.add_argument("--budget", type=int, default=200, help="measured configs per run")
    p.add_argument("--strategies", default="tunex,kt",
                   help="comma list: tunex specs, kt:NAME, or the groups 'tunex' and 'kt'")
    p.add_argument("--spaces", default="*", help="comma list of globs on 'kernel/GPU'")
    p.add_argument("--parts", default="search,transfer,overhead",
                   help="comma list of search, transfer, overhead")
    p.add_argument("--source-budget", type=int, default=200,
                   help="trials of the source search in the transfer part; with --loo, "
                   "trials of each sibling's cold search a warm search is given (at most "
                   "--budget, but for --no-cold)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON")
    p.add_argument("--reuse", action="store_true",
                   help="skip runs already in --out with the same budget, data and code")
    p.add_argument("--report-only", action="store_true", help="only print the tables of --out")
    p.add_argument("--stop-rules", type=int, metavar="BUDGET", default=0,
                   help="(--loo --report-only) what stopping on patience would cost the stored "
                        "runs of the first --variants cut at BUDGET trials")
    p.add_argument("--markdown", type=Path, help=f"write the summary as the '{SECTION}' section")
    p.add_argument("--loo", action="store_true",
                   help="leave-one-out mode: cold and warm model searches per kernel family")
    p.add_argument("--loo-data", type=Path, action="append",
                   help="(--loo) a folder of recorded spaces, repeatable (default: ../shared's "
                        "Kernel Tuner spaces and benchmarks/data)")
    p.add_argument("--siblings-by", choices=("folder", "kernel"), default="folder",
                   help="(--loo) what makes spaces siblings: their folder (a kernel family as "
                        "recorded: one space definition), or the kernel name the recordings "
                        "give, as a tuning database sees them, so that versions of one kernel "
                        "with different spaces (convolution/ and convolution_kt/) learn from "
                        "each other")
    p.add_argument("--sources", choices=("siblings", "chained", "other-kernels", "both",
                                         "prior", "prior-space"),
                   default="siblings",
                   help="(--loo --no-cold) what a warm search starts from: its siblings, "
                        "(other-kernels) the spaces of other kernels whose parameters include "
                        "more than half of its own, as a kernel's first search in a database of "
                        "other kernels does, or (both) its siblings and those, as a search "
                        "named --like other kernels in a database of its own, or (prior) "
                        "nothing but the prior tunex ships (tunex.db.prior) less the space's "
                        "own kernel, as a first search on the device it was recorded on takes "
                        "it, or (prior-space) the shipped prior less the space's own recording "
                        "(the same kernel's other devices and problems stay), or (chained) its "
                        "siblings as the decorator records them: tuned "
                        "one after another, each warm-started from those before it, with "
                        "--batch in flight and --source-budget trials")
    p.add_argument("--related-device", choices=("any", "same"), default="any",
                   help="(--sources other-kernels/both) the other kernels' spaces recorded on "
                        "any device, or (same) only on the held-out space's device")
    p.add_argument("--variants", default='{"model": {}}',
                   help='(--loo) JSON {name: options of the model strategy}')
    p.add_argument("--no-warm", action="store_true", help="(--loo) cold searches only")
    p.add_argument("--no-cold", action="store_true",
                   help="(--loo) warm searches only: the siblings' sources are cold searches of "
                        "the default model, run once per family and seed for every variant "
                        "(for variants that only change warm behaviour); stored per variant as "
                        "'warm' beside the held-out space's own default cold run")
    p.add_argument("--cold-cache", type=Path,
                   help="(--loo --no-cold) folder where those cold searches are kept and read "
                        "back (per family, seed, budget, data and the default model's options; "
                        "clear it when a code change moves the default's cold search)")
    p.add_argument("--seed-start", type=int, default=0,
                   help="(--loo --no-cold or --no-warm) first seed: seeds START..START+SEEDS-1 "
                        "(the cold report then reads seeds 0..START+SEEDS-1 of --out)")
    p.add_argument("--batch", type=int, default=1, metavar="N",
                   help="(--loo) trials in flight in each tunex search: the loop asks for N "
                   "configs before any of them is measured and tells their results together, "
                   "as a search with N build workers does (default 1)")
    p.add_argument("--warm-budget", type=int, default=None,
                   help="(--loo --no-cold) trials of each warm search (default --budget; "
                        "the sources keep --budget): enough to score 'within 20' for less")
    p.add_argument("--loo-overhead", action="store_true",
                   help="(--loo) also time ask + tell at 1,000 trials of history, warm, for "
                        "each of --variants in turn")
    p.add_argument("--child-overhead", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--compare", default="",
                   help="(--loo) also run these strategies (as --strategies) on every held-out "
                        "space, cold, and report them beside model's cold and warm runs")
    p.add_argument("--compare-only", action="store_true",
                   help="(--loo) run only the --compare searches; model's cold and warm runs "
                        "are those already in --out")
    args = p.parse_args(argv)
    args.strategies = strategy_names(args.strategies)
    args.compare = strategy_names(args.compare)
    if args.compare_only and not args.compare:
        p.error("--compare-only needs --compare")
    if args.stop_rules and not (args.loo and args.report_only):
        p.error("--stop-rules goes with --loo --report-only")
    if args.no_cold and (args.no_warm or args.compare or not args.loo):
        p.error("--no-cold goes with --loo, and not with --no-warm or --compare")
    if (args.cold_cache or args.warm_budget) and not args.no_cold:
        p.error("--cold-cache and --warm-budget go with --no-cold")
    if args.batch < 1 or (args.batch != 1 and not args.loo):
        p.error("--batch goes with --loo and is at least 1")
    if args.sources != "siblings" and not args.no_cold:
        p.error("--sources goes with --no-cold")
    if args.loo and not args.no_cold and not args.no_warm and args.source_budget > args.budget:
        print(f"note: the warm searches' sources are the cold searches of --budget "
              f"{args.budget} trials, not --source-budget {args.source_budget} (--no-cold "
              "runs longer sources)", file=sys.stderr)
    if (args.seed_start and not (args.no_cold or args.no_warm)) or args.seed_start < 0:
        p.error("--seed-start goes with --no-cold or --no-warm, and is at least 0")
    args.parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    unknown = args.parts - {"search", "transfer", "overhead"}
    if unknown:
        p.error(f"unknown --parts {sorted(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_overhead:
        print(json.dumps(overhead_child(args.child_overhead, args.child_seed)))
        return 0
    if args.loo:
        return loo_main(args)
    spaces = find_spaces(args.data, [x.strip() for x in args.spaces.split(",")])
    results = Results(args.out)
    t0 = time.time()
    facts = {}
    for space, path in spaces.items():
        f = results.doc["spaces"].get(space)
        if not f or f.get("data") != ReplayTarget(path).digest:
            f = space_facts(path)
            results.doc["spaces"][space] = f
        facts[space] = f
    for src, _dst in transfer_pairs(spaces, args.data) if "transfer" in args.parts else []:
        if src not in facts:
            facts[src] = results.doc["spaces"].get(src) or space_facts(
                args.data / src.split("/")[0] / f"{src.split('/')[1]}.json.gz")
            results.doc["spaces"][src] = facts[src]

    ran = False
    if not args.report_only:
        tasks = plan(args, spaces, facts, results)
        print(f"{len(tasks)} runs to do ({len(spaces)} spaces, strategies "
              f"{', '.join(args.strategies)}, parts {', '.join(sorted(args.parts))})", flush=True)
        run_tasks(tasks, args.jobs, results, Progress(tasks))
        ran = bool(tasks)
        if "overhead" in args.parts:
            largest = max(spaces, key=lambda s: facts[s]["size"])
            key = {"code": tunex_code(), "space": largest, **OVERHEAD}
            if not (args.reuse and matches(results.doc.get("overhead"), key)):
                print(f"overhead: model search to {OVERHEAD['total']} trials on {largest} "
                      "(fresh subprocess)", flush=True)
                results.doc["overhead"] = {**measure_overhead(spaces[largest]), **key}
                ran = True
        if ran:
            results.doc["sessions"].append({
                "command": "python " + " ".join(shlex.quote(a) for a in
                                                [os.path.relpath(__file__, REPO), *sys.argv[1:]]),
                "date": dt.date.today().isoformat(),
                "machine": f"{os.cpu_count()}-core {platform.machine()}, Python "
                           f"{platform.python_version()}",
                "seconds": round(time.time() - t0),
            })
        results.save()

    body = report(results, facts, list(spaces), args.seeds, args.budget)
    print(body)
    if args.markdown:
        write_section(args.markdown, body)
        print(f"wrote section '{SECTION}' of {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
