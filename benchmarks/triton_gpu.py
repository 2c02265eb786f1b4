"""Triton on a GPU: record a matmul space, and tune against triton.autotune and the libraries.

Subcommands (run on the GPU machine; write JSON under --out):

``record``
    Measure the whole space of a library kernel (--kernel, matmul by default; ``exhaustive``
    strategy, LocalExecutor with --workers build processes) for each shape, and write it as
    replay data in the Kernel Tuner cache format that ``tunex.targets.replay`` reads
    (``restrictions`` = the bound constraints), named ``KERNEL_DEVICE_SHAPE.json.gz``.
    Shapes that share a specialisation share compiled binaries.

``bench``
    matmul fp16 per shape: tunex (``model`` strategy, --budget seconds per library kernel of
    --kernels, a cold Triton cache; its pick is the kernel whose search found the fastest
    config) against ``triton.autotune`` over the Triton tutorial's 8 configs (cold cache) and
    torch.matmul (cuBLAS). Flash-attention forward fp16 per shape: tunex (--fa-budget)
    against torch's scaled_dot_product_attention. The winners are timed side by side with one
    harness (L2 flushed before each repeat, CUDA events, median), in interleaved rounds whose
    order rotates, so clock drift during the run falls on every contender. With --recorded, the time
    tunex took to reach 97% of the recorded space's optimum is reported next to what
    triton.autotune would need for the whole space as a config list (its measured cost per
    config times the space size).

``report``
    Markdown tables from the JSON files (for benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gzip
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MATMUL_SHAPES = [(4096, 4096, 4096), (1024, 1024, 1024), (64, 8192, 8192), (512, 4096, 1024)]
FA_SHAPES = [(4, 16, 1024, 64), (1, 32, 4096, 128), (8, 16, 512, 64)]
#: shapes ``record`` measures by default, per kernel (sizes in the order of its ``dims``)
RECORD_SHAPES = {"matmul": MATMUL_SHAPES, "matmul_tma": MATMUL_SHAPES,
                 "flash_attention": FA_SHAPES,
                 "softmax": [(4096, 1024), (1024, 8192), (16384, 256)],
                 "layernorm": [(4096, 1024), (1024, 8192), (16384, 256)]}

_FAILED = {"compile_error": "CompilationFailedConfig", "pruned": "CompilationFailedConfig",
           "timeout": "RuntimeFailedConfig", "runtime_error": "RuntimeFailedConfig",
           "wrong_result": "RuntimeFailedConfig", "worker_lost": "RuntimeFailedConfig",
           "invalid": "InvalidConfig"}


def log(*parts: Any) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, flush=True)


def shape_name(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape))


# -- timing harness (the target's own) ----------------------------------------------------------


class Harness:
    """Times callables with tunex's one GPU harness (:class:`tunex.targets.gpu.GpuTimer`: warm-up,
    an L2 flush and a short GPU sleep before each repeat, CUDA events, every repeat kept)."""

    def __init__(self, flush_mb: int = 256) -> None:
        from tunex.targets.gpu import GpuTimer, MeasureOptions

        self.timer = GpuTimer(MeasureOptions(flush_mb=flush_mb))

    def time(self, fn: Callable[[], Any], repeats: int = 50, warmup_ms: float = 25.0
             ) -> list[float]:
        """``repeats`` timings of ``fn`` (ms), each after an L2 flush."""
        return self.timer.time(fn, repeats=repeats, warmup_ms=warmup_ms)

    def compare(self, fns: Mapping[str, Callable[[], Any]], rounds: int = 6,
                repeats: int = 10) -> dict[str, list[float]]:
        """Times several callables side by side: ``rounds`` rounds, each timing every callable
        ``repeats`` times (after a short warm-up) in an order rotated round by round, so a
        clock that drifts over the run (boost, power or thermal limits) weighs on all alike."""
        names = list(fns)
        out: dict[str, list[float]] = {n: [] for n in names}
        for n in names:  # first warm-up: every contender reaches steady clocks once
            self.time(fns[n], repeats=1, warmup_ms=25.0)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                out[n] += self.time(fns[n], repeats=repeats, warmup_ms=5.0)
        return out


def stats(times: Sequence[float], flops: float) -> dict[str, Any]:
    med = statistics.median(times)
    q = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [med] * 3
    return {"median_ms": med, "iqr_rel": (q[2] - q[0]) / med, "tflops": flops / (med * 1e9),
            "repeats": len(times)}


# -- tunex runs --------------------------------------------------------------------------------


def fresh_cache(tag: str) -> str:
    """A new, empty Triton cache directory for this process and the workers it spawns."""
    path = tempfile.mkdtemp(prefix=f"triton-cache-{tag}-")
    os.environ["TRITON_CACHE_DIR"] = path
    return path


def tune(target: Any, kernel: str, shape: Mapping[str, Any], *, strategy: str, seconds: float,
         workers: int, seed: int = 0) -> dict[str, Any]:
    """One tunex search in a fresh in-memory database; its timeline and winner."""
    from tunex.cluster import LocalExecutor, LocalOptions
    from tunex.db import Database
    from tunex.tuner import Budget, Tuner

    space, wl = target.prepare(kernel, shape)
    timeline: list[tuple[float, float, str]] = []
    t0 = time.monotonic()

    def on_trial(m: Any, number: int) -> None:
        timeline.append((time.monotonic() - t0, m.value, m.status.value))

    with LocalExecutor(target, LocalOptions(build_workers=workers, build_timeout=300,
                                            measure_timeout=60)) as ex, \
            Database("sqlite://") as db:
        result = Tuner(target, space, workload=wl, db=db, strategy=strategy,
                       budget=Budget(seconds=seconds), executor=ex, seed=seed, transfer=False,
                       on_trial=on_trial).run()
        measurements = db.measurements(wl)
    wall = time.monotonic() - t0
    best = result.best
    return {
        "kernel": kernel, "shape": dict(shape), "strategy": strategy, "budget_s": seconds,
        "space_size": space.size, "wall_s": wall, "trials": result.trials,
        "stopped": result.stopped, "failures": result.failures,
        "best_config": None if best is None else best.config.to_dict(),
        "best_ms": None if best is None else best.value,
        "timeline": timeline, "workload": wl.to_dict(),
        "measurements": [{"config": m.config.to_dict(), "status": m.status.value,
                          "times": list(m.times_ms), "compile_ms": m.compile_ms,
                          "facts": dict(m.facts), "error": m.error} for m in measurements],
        "restrictions": space.bound_constraints(), "params": {
            p.name: list(p.values) for p in space.params},
    }


def to_kernel_tuner_cache(run: Mapping[str, Any], device: str) -> dict[str, Any]:
    """A recorded search in the Kernel Tuner cache format ReplayTarget reads."""
    keys = list(run["params"])
    cache = {}
    for m in run["measurements"]:
        c = m["config"]
        entry: dict[str, Any] = dict(c)
        if m["status"] == "ok":
            entry["time"] = statistics.median(m["times"])
            entry["times"] = m["times"]
        else:
            entry["time"] = _FAILED.get(m["status"], "RuntimeFailedConfig")
            entry["error"] = (m["error"] or "")[:300]
        entry["status"] = m["status"]
        entry["compile_time"] = m["compile_ms"]
        entry.update({k: v for k, v in m["facts"].items() if isinstance(v, (int, float))})
        key = ",".join(str(c[k]) for k in keys)
        if key in cache and cache[key].get("status") == "ok" and m["status"] == "ok":
            continue  # a re-measurement of a leader: keep the first
        cache[key] = entry
    shape = run["shape"]
    return {
        "schema": "kernel_tuner cache (tunex recording)",
        "device_name": device, "kernel_name": run["kernel"],
        "problem_size": [v for d, v in shape.items() if d != "dtype"],
        "dtype": shape.get("dtype", "float16"), "objective": "time",
        "tune_params_keys": keys, "tune_params": run["params"],
        "restrictions": run["restrictions"], "workload": run["workload"],
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "method": "tunex exhaustive, triton_gpu target: cubin built ahead of time, L2 flushed "
                  "(256 MiB) before each repeat, CUDA events; time = median of the repeats (ms)",
        "cache": cache,
    }


def environment() -> dict[str, Any]:
    import torch
    import triton

    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sm_count": p.multi_processor_count,
            "capability": f"{p.major}.{p.minor}", "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


# -- record ------------------------------------------------------------------------------------


def cmd_record(args: argparse.Namespace) -> int:
    from tunex.targets import make_target

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    log("record on", env)
    target = make_target(f"triton_gpu?repeats={args.repeats}&load={args.load}")
    deadline = time.monotonic() + args.deadline
    summary = []
    from tunex.kernel import get_kernel

    dims = get_kernel(args.kernel).dims
    if args.shapes:
        shapes = parse_shapes(args.shapes, len(dims))
    elif args.kernel in RECORD_SHAPES:
        shapes = RECORD_SHAPES[args.kernel]
    else:
        raise SystemExit(f"no default shapes for {args.kernel}: give --shapes "
                         f"{'x'.join(dims)},...")
    for shape in shapes:
        left = deadline - time.monotonic()
        if left < 30:
            log("deadline: skipping", shape)
            continue
        run = tune(target, args.kernel, dict(zip(dims, shape)), strategy="exhaustive",
                   seconds=left - 10, workers=args.workers)
        doc = to_kernel_tuner_cache(run, env["device"])
        device = env["device"].replace("NVIDIA ", "").replace(" ", "_")
        name = f"{args.kernel}_{device}_{shape_name(shape)}"
        path = out / f"{name}.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(doc, f, separators=(",", ":"))
        ok = [e["time"] for e in doc["cache"].values() if isinstance(e["time"], float)]
        s = {"shape": shape, "space": run["space_size"], "recorded": len(doc["cache"]),
             "ok": len(ok), "best_ms": min(ok) if ok else None, "wall_s": run["wall_s"],
             "stopped": run["stopped"], "failures": run["failures"], "file": path.name,
             "best_config": run["best_config"]}
        summary.append(s)
        log("recorded", s)
        if not ok:
            log("no config ran: stopping (see the errors in", path.name, ")")
            break
    (out / "record_summary.json").write_text(json.dumps({"env": env, "shapes": summary},
                                                        indent=1))
    target.close()
    return 0


# -- bench -------------------------------------------------------------------------------------


def autotune_matmul(shape: tuple[int, int, int], harness: Harness) -> dict[str, Any]:
    """triton.autotune over the tutorial's configs, on a fresh JIT function and cold cache."""
    import torch
    import triton

    from kernels.matmul import matmul_kernel, tutorial_triton_configs

    m, n, k = shape
    fn = triton.jit(matmul_kernel.fn)  # a new JITFunction: no in-memory compile cache
    configs = tutorial_triton_configs()
    tuned = triton.autotune(configs=configs, key=["M", "N", "K"])(fn)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)

    def grid(meta: Mapping[str, Any]) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    def call() -> None:
        tuned[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1))

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()  # compiles and benchmarks every config
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    best = tuned.best_config
    cfg = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    return {"wall_s": wall, "trials": len(configs), "per_config_s": wall / len(configs),
            "best_config": cfg}


def jit_call(kernel: Any, problem: Mapping[str, Any], config: Mapping[str, Any],
             inputs: Mapping[str, Any]) -> Callable[[], Any]:
    args = kernel.ordered_args(inputs, problem, config)
    grid = kernel.grid(problem, config)
    opts = kernel.launch_options(config)
    return lambda: kernel.fn[grid](*args, **opts)


def recorded_optimum(folder: Path | None, shape: Sequence[int]) -> dict[str, Any] | None:
    if folder is None:
        return None
    for path in sorted(folder.glob(f"matmul_*_{shape_name(shape)}.json.gz")):
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        ok = [(e["time"], e) for e in doc["cache"].values() if isinstance(e["time"], float)]
        if ok:
            t, e = min(ok, key=lambda x: x[0])
            return {"file": path.name, "optimum_ms": t, "space": len(doc["cache"]),
                    "config": {k: e[k] for k in doc["tune_params_keys"]}}
    return None


def time_to_fraction(timeline: Sequence[Sequence[Any]], optimum_ms: float, frac: float
                     ) -> float | None:
    best = math.inf
    for t, value, _status in timeline:
        best = min(best, value)
        if best <= optimum_ms / frac:
            return float(t)
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    import torch

    from kernels import get_kernel
    from tunex.targets import make_target

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    log("bench on", env)
    harness = Harness()
    recorded = Path(args.recorded) if args.recorded else None
    deadline = time.monotonic() + args.deadline
    results: dict[str, Any] = {"env": env, "budget_s": args.budget,
                               "fa_budget_s": args.fa_budget, "matmul": [], "attention": []}

    def save() -> None:
        (out / f"bench_triton_gpu_{args.only}.json").write_text(json.dumps(results, indent=1))

    mm = get_kernel("matmul")
    mm_shapes = parse_shapes(args.shapes, 3) if args.shapes else MATMUL_SHAPES
    fa_shapes = parse_shapes(args.fa_shapes, 4) if args.fa_shapes else FA_SHAPES
    if args.only == "attention":
        mm_shapes = []
    if args.only == "matmul":
        fa_shapes = []
    mm_kernels = [x for x in args.kernels.split(",") if x]
    for shape in mm_shapes:
        if deadline - time.monotonic() < args.budget * len(mm_kernels) + 60:
            log("deadline: skipping matmul", shape)
            continue
        m, n, k = shape
        problem = mm.representative(mm.problem_key({"M": m, "N": n, "K": k}))
        row: dict[str, Any] = {"shape": shape, "flops": mm.flops(problem), "tunex_runs": {}}
        runs = {}
        for kname in mm_kernels:  # each library kernel tuned on its own, then the best is picked
            fresh_cache(f"tunex-{kname}-{shape_name(shape)}")
            target = make_target(f"triton_gpu?repeats=10&load={args.load}")
            runs[kname] = tune(target, kname, problem, strategy=args.strategy,
                               seconds=args.budget, workers=args.workers, seed=args.seed)
            target.close()
            row["tunex_runs"][kname] = {
                k2: runs[kname][k2] for k2 in ("wall_s", "trials", "space_size", "stopped",
                                               "failures", "best_config", "best_ms", "timeline")}
            row["tunex_runs"][kname]["failed"] = [  # which configs failed, and how
                {"config": x["config"], "status": x["status"], "error": (x["error"] or "")[:300]}
                for x in runs[kname]["measurements"] if x["status"] != "ok"]
            log("tuned", kname, shape, runs[kname]["best_ms"], runs[kname]["best_config"])
        # tunex's pick: the kernel whose search found the fastest config (in-search medians)
        pick = min(runs, key=lambda x: runs[x]["best_ms"] or math.inf)
        row["tunex"] = {**row["tunex_runs"][pick], "kernel": pick,
                        "trials": sum(r["trials"] for r in runs.values()),
                        "wall_s": sum(r["wall_s"] for r in runs.values())}
        fresh_cache(f"autotune-{shape_name(shape)}")
        row["autotune"] = autotune_matmul(shape, harness)
        # side by side, one harness, same inputs, interleaved rounds
        inputs = mm.make_inputs(problem, device="cuda", seed=0)
        a, b, c = inputs["a"], inputs["b"], inputs["c"]
        want = mm.reference(inputs, problem)
        calls: dict[str, Callable[[], Any]] = {}
        for who, kname, cfg in ([(f"tunex:{x}", x, row["tunex_runs"][x]["best_config"])
                                 for x in runs]
                                + [("autotune", "matmul", row["autotune"]["best_config"])]):
            if cfg is None:
                continue
            kern = get_kernel(kname)
            call = jit_call(kern, problem, cfg, inputs)
            c.fill_(math.nan)
            call()
            torch.cuda.synchronize()
            err = kern.check(kern.outputs(inputs), want, "float16")
            (row["tunex_runs"][kname] if who.startswith("tunex") else row["autotune"])[
                "check"] = err
            calls[who] = call
        calls["cublas"] = functools.partial(torch.matmul, a, b, out=c)
        times = harness.compare(calls)
        for who, ts in times.items():
            if who.startswith("tunex:"):
                row["tunex_runs"][who[6:]].update(stats(ts, row["flops"]))
            else:
                row.setdefault(who, {}).update(stats(ts, row["flops"]))
        row["tunex"].update({k2: row["tunex_runs"][pick][k2] for k2 in
                             ("median_ms", "iqr_rel", "tflops", "repeats", "check")
                             if k2 in row["tunex_runs"][pick]})
        opt = recorded_optimum(recorded, shape)
        if opt is not None and "matmul" in runs:
            row["recorded"] = opt
            t97 = time_to_fraction(runs["matmul"]["timeline"], opt["optimum_ms"], 0.97)
            row["tunex_runs"]["matmul"]["t97_s"] = t97
            row["autotune_whole_space_s"] = (row["autotune"]["per_config_s"]
                                             * runs["matmul"]["space_size"])
        inputs, a, b, c, want = {}, None, None, None, ()  # free before the next shape
        torch.cuda.empty_cache()
        results["matmul"].append(row)
        save()
        log("matmul", shape, {w: row[w].get("tflops") for w in ("tunex", "autotune", "cublas")},
            {x: r.get("tflops") for x, r in row["tunex_runs"].items()})

    fa = get_kernel("flash_attention")
    for shape in fa_shapes:
        if deadline - time.monotonic() < args.fa_budget + 30:
            log("deadline: skipping attention", shape)
            continue
        z, h, nctx, d = shape
        problem = fa.representative(fa.problem_key({"Z": z, "H": h, "N_CTX": nctx, "D": d}))
        row = {"shape": shape, "flops": fa.flops(problem)}
        fresh_cache(f"fa-{shape_name(shape)}")
        target = make_target(f"triton_gpu?repeats=10&load={args.load}")
        run = tune(target, "flash_attention", problem, strategy=args.strategy,
                   seconds=args.fa_budget, workers=args.workers, seed=args.seed)
        target.close()
        row["tunex"] = {k2: run[k2] for k2 in ("wall_s", "trials", "space_size", "stopped",
                                               "failures", "best_config", "best_ms")}
        row["tunex"]["failed"] = [
            {"config": x["config"], "status": x["status"], "error": (x["error"] or "")[:300]}
            for x in run["measurements"] if x["status"] != "ok"]
        inputs = fa.make_inputs(problem, device="cuda", seed=0)
        q, kk, v = inputs["q"], inputs["k"], inputs["v"]
        if row["tunex"]["best_config"] is not None:
            call = jit_call(fa, problem, row["tunex"]["best_config"], inputs)
            call()
            torch.cuda.synchronize()
            row["tunex"]["check"] = fa.check(fa.outputs(inputs), fa.reference(inputs, problem),
                                             "float16")
        sdpa = functools.partial(torch.nn.functional.scaled_dot_product_attention, q, kk, v)
        calls = {"sdpa": sdpa}
        if row["tunex"]["best_config"] is not None:
            calls["tunex"] = call
        for who, ts in harness.compare(calls).items():
            row.setdefault(who, {}).update(stats(ts, row["flops"]))
        inputs, q, kk, v = {}, None, None, None  # free before the next shape
        torch.cuda.empty_cache()
        results["attention"].append(row)
        save()
        log("attention", shape, {w: row[w].get("tflops") for w in ("tunex", "sdpa")})
    save()
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    """Build and measure one config per kernel; exit 1 unless every one runs correctly."""
    from tunex.targets import make_target

    target = make_target(f"triton_gpu?repeats=5&load={args.load}")
    shapes = {"matmul": {"M": 512, "N": 512, "K": 512}, "softmax": {"M": 256, "N": 1000},
              "layernorm": {"M": 256, "N": 1000},
              "flash_attention": {"Z": 1, "H": 2, "N_CTX": 256, "D": 64},
              "matmul_tma": {"M": 512, "N": 512, "K": 512}}
    bad = 0
    for name, shape in shapes.items():
        space, wl = target.prepare(name, shape)
        m = target.measure(target.build(wl, space.default()))
        log("smoke", args.load, name, m.status.value, m.error or f"{m.value:.4f} ms")
        bad += not m.ok
    target.close()
    return 1 if bad else 0


# -- report ------------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    bench: dict[str, Any] = {"matmul": [], "attention": []}
    for path in args.bench:
        doc = json.loads(Path(path).read_text())
        bench["matmul"] += doc.get("matmul", [])
        bench["attention"] += doc.get("attention", [])
    lines = []
    lines.append("| matmul fp16 (M x N x K) | tunex TFLOP/s (kernel picked) | per kernel TFLOP/s "
                 "| triton.autotune TFLOP/s | cuBLAS TFLOP/s | tunex / cuBLAS | tunex / autotune "
                 "| tunex trials, wall s | autotune trials, wall s |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for r in bench["matmul"]:
        t, a, c = r["tunex"], r["autotune"], r["cublas"]
        ratios.append(t["tflops"] / c["tflops"])
        per = ", ".join(f"{x} {v['tflops']:.1f}" for x, v in r.get("tunex_runs", {}).items()
                        if "tflops" in v) or "-"
        lines.append(f"| {shape_name(r['shape'])} | {t['tflops']:.1f} ({t.get('kernel', 'matmul')})"
                     f" | {per} | {a['tflops']:.1f} | "
                     f"{c['tflops']:.1f} | {t['tflops'] / c['tflops']:.2f} | "
                     f"{t['tflops'] / a['tflops']:.2f} | {t['trials']}, {t['wall_s']:.0f} | "
                     f"{a['trials']}, {a['wall_s']:.1f} |")
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        lines.append(f"\nGeometric mean tunex / cuBLAS: **{geo:.2f}**")
    lines.append("\n| matmul shape | space | recorded optimum (ms) | tunex best in search (ms) | "
                 "tunex time to 97% of optimum (s) [trials] | first result (s) | "
                 "triton.autotune per config (s) | triton.autotune, whole space as a list (s) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in bench["matmul"]:
        if "recorded" not in r:
            continue
        run = r.get("tunex_runs", {}).get("matmul", r["tunex"])  # the recorded kernel's search
        tl = run["timeline"]
        t97 = run.get("t97_s")
        n97 = trials_to_fraction(tl, r["recorded"]["optimum_ms"], 0.97)
        lines.append(f"| {shape_name(r['shape'])} | {run['space_size']} | "
                     f"{r['recorded']['optimum_ms']:.4f} | {run['best_ms']:.4f} | "
                     f"{'not reached' if t97 is None else f'{t97:.1f} [{n97}]'} | "
                     f"{tl[0][0]:.1f} | {r['autotune']['per_config_s']:.2f} | "
                     f"{r['autotune_whole_space_s']:.0f} |")
    if args.recorded:
        lines.append("\n| recorded matmul space (H200) | points | optimum ms (TFLOP/s) | "
                     "best tutorial config ms | tutorial best / optimum | optimum config |")
        lines.append("|---|---|---|---|---|---|")
        for path in sorted(Path(args.recorded).glob("matmul_*.json.gz")):
            lines.append(recorded_row(path))
    lines.append("\n| attention fp16 (Z, H, N, D) | tunex TFLOP/s | SDPA TFLOP/s | tunex / SDPA | "
                 "tunex trials, wall s | best config |")
    lines.append("|---|---|---|---|---|---|")
    for r in bench["attention"]:
        t, s = r["tunex"], r["sdpa"]
        cfg = " ".join(f"{k}={v}" for k, v in (t["best_config"] or {}).items())
        lines.append(f"| {tuple(r['shape'])} | {t.get('tflops', 0):.1f} | {s['tflops']:.1f} | "
                     f"{t.get('tflops', 0) / s['tflops']:.2f} | {t['trials']}, "
                     f"{t['wall_s']:.0f} | {cfg} |")
    print("\n".join(lines))
    return 0


def trials_to_fraction(timeline: Sequence[Sequence[Any]], optimum_ms: float, frac: float
                       ) -> int | None:
    best = math.inf
    for i, (_t, value, _status) in enumerate(timeline):
        best = min(best, value)
        if best <= optimum_ms / frac:
            return i + 1
    return None


def recorded_row(path: Path) -> str:
    """How the tutorial's configs fare inside a recorded space (throughput relative to its best)."""
    from kernels.matmul import TUTORIAL_CONFIGS

    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    keys = doc["tune_params_keys"]
    ok = {k: e for k, e in doc["cache"].items() if isinstance(e["time"], float)}
    best_key = min(ok, key=lambda k: ok[k]["time"])
    best = ok[best_key]
    tut = [ok[",".join(str(c[k]) for k in keys)]["time"] for c in TUTORIAL_CONFIGS
           if ",".join(str(c[k]) for k in keys) in ok]
    m, n, k = doc["problem_size"]
    tflops = 2 * m * n * k / (best["time"] * 1e9)
    cfg = " ".join(f"{k}={best[k]}" for k in keys)
    return (f"| {m}x{n}x{k} | {len(doc['cache'])} | {best['time']:.4f} ({tflops:.0f}) | "
            f"{min(tut):.4f} | {best['time'] / min(tut):.2f} | {cfg} |")


def parse_shapes(text: str, n: int) -> list[tuple[int, ...]]:
    shapes = [tuple(int(x) for x in s.split("x")) for s in text.split(",") if s]
    for s in shapes:
        if len(s) != n:
            raise SystemExit(f"shape {s} needs {n} sizes joined by x")
    return shapes


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="measure a kernel's whole space per shape")
    r.add_argument("--out", required=True)
    r.add_argument("--kernel", default="matmul", help="a library kernel (default: matmul)")
    r.add_argument("--shapes", default="",
                   help="sizes in the kernel's dims order joined by x, comma-separated "
                        "(default: RECORD_SHAPES of the kernel)")
    r.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    r.add_argument("--repeats", type=int, default=10)
    r.add_argument("--deadline", type=float, default=480, help="seconds for all shapes")
    r.set_defaults(fn=cmd_record)
    b = sub.add_parser("bench", help="tunex vs triton.autotune vs cuBLAS/SDPA")
    b.add_argument("--out", required=True)
    b.add_argument("--shapes", default="")
    b.add_argument("--fa-shapes", default="")
    b.add_argument("--budget", type=float, default=180, help="tunex seconds per matmul shape")
    b.add_argument("--fa-budget", type=float, default=60, help="tunex seconds per FA shape")
    b.add_argument("--strategy", default="model")
    b.add_argument("--kernels", default="matmul,matmul_tma",
                   help="library matmul kernels tunex tunes per shape (each with --budget); "
                        "its pick is the one whose search found the fastest config")
    b.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--recorded", default=None, help="folder of recorded spaces (record's out)")
    b.add_argument("--deadline", type=float, default=560)
    b.add_argument("--only", choices=["all", "matmul", "attention"], default="all")
    b.set_defaults(fn=cmd_bench)
    sm = sub.add_parser("smoke", help="one config per kernel; exit 1 unless all run")
    sm.set_defaults(fn=cmd_smoke)
    for x in (r, b, sm):
        x.add_argument("--load", choices=["binary", "jit"], default="binary",
                       help="run the built cubin, or recompile it with the JIT (fallback)")
    rep = sub.add_parser("report", help="markdown tables from bench JSON")
    rep.add_argument("bench", nargs="+", help="bench_triton_gpu_*.json files")
    rep.add_argument("--recorded", default=None, help="folder of recorded spaces")
    rep.set_defaults(fn=cmd_report)
    args = p.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
