"""RISC-V benchmarks: recorded spaces, tuned vs default builds, rankings, throughput.

Every figure goes to benchmarks/RESULTS.md with the command that made it; raw records go to
benchmarks/results/riscv_*.json.

    # exhaustive riscv-sim run of a kernel's space, in the replay format (resumable: trials are
    # kept in a SQLite database beside the output until the recording is written)
    python benchmarks/riscv.py record --kernel sgemm --core x280 --shape M=128,N=128,K=128 \
        --out benchmarks/data/riscv/sgemm/x280-128x128x128.json.gz

    # tuned (a `model` search within a budget, or a recording's optimum) against the default
    # build: the kernel's plain C form, clang-19 -O3 autovectorised at its own LMUL
    python benchmarks/riscv.py versus --target riscv-sim:x280 --kernel sgemm \
        --shape M=256,N=256,K=256 --budget 60trials

    # how the cycle model ranks configs against instruction counts, llvm-mca on the hot loop
    # alone, and QEMU wall time (Kendall tau and the rank each proxy gives the best config)
    python benchmarks/riscv.py ranking benchmarks/data/riscv/sgemm/*.json.gz

    # simulated trials per second against workers (local processes, or Ray with one CPU and
    # one simulator slot per worker; one process per count), pinned to as many CPUs
    taskset -c 0 python benchmarks/riscv.py throughput --core x280 --trials 60 --slots 1
    taskset -c 0,1 python benchmarks/riscv.py throughput --core x280 --trials 60 --slots 2
    taskset -c 0 python benchmarks/riscv.py throughput --core x280 --trials 60 --slots 1 --ray
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tunex.cluster import LocalExecutor, LocalOptions  # noqa: E402
from tunex.db import Database  # noqa: E402
from tunex.kernel import get_kernel  # noqa: E402
from tunex.targets import make_target  # noqa: E402
from tunex.tuner import Budget, Tuner  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
_FAILED = {"compile_error": "CompilationFailedConfig", "invalid": "InvalidConfig"}


def parse_shape(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (p.split("=") for p in text.split(","))}


def shape_label(shape: Mapping[str, int]) -> str:
    return "x".join(str(v) for v in shape.values())


def machine() -> str:
    return f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()})"


def _value(v: Any) -> Any:
    """Permutations are recorded as strings ("ijk"): the replay format keys on str(value)."""
    return "".join(map(str, v)) if isinstance(v, (tuple, list)) else v


# -- record -------------------------------------------------------------------------------------


def record(args: argparse.Namespace) -> int:
    shape = parse_shape(args.shape)
    target = make_target(f"riscv-sim:{args.core}")
    space, wl = target.prepare(args.kernel, shape)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    db_path = out.with_suffix("").with_suffix(".record.db")
    t0 = time.monotonic()
    with Database(str(db_path)) as db, LocalExecutor(
            target, LocalOptions(build_workers=args.workers,
                                 measure_workers=args.workers)) as ex:
        result = Tuner(target, space, workload=wl, db=db, strategy="exhaustive",
                       budget=Budget(trials=space.size), executor=ex, transfer=False,
                       remeasure=0, progress=sys.stderr.isatty()).run()
        ms = db.measurements(wl)
    wall = time.monotonic() - t0
    keys = list(space.names)
    cache: dict[str, Any] = {}
    for m in ms:
        c = {k: _value(m.config[k]) for k in keys}
        entry: dict[str, Any] = dict(c)
        if m.ok:
            entry["time"] = m.value
            entry["times"] = list(m.times_ms)
        else:
            entry["time"] = _FAILED.get(m.status.value, "RuntimeFailedConfig")
            entry["error"] = (m.error or "")[:300]
        entry["status"] = m.status.value
        entry["compile_time"] = m.compile_ms
        entry.update({k: v for k, v in m.facts.items() if isinstance(v, (int, float))})
        cache[",".join(str(c[k]) for k in keys)] = entry
    params = {p.name: [_value(v) for v in p.values] for p in space.params}
    k = get_kernel(args.kernel)
    doc = {
        "schema": "kernel_tuner cache (tunex recording)",
        "device_name": f"riscv-sim:{args.core}", "kernel_name": args.kernel,
        "problem_size": [shape[d] for d in k.dims], "dtype": "float32", "objective": "time",
        "tune_params_keys": keys, "tune_params": params,
        "restrictions": space.bound_constraints(), "workload": wl.to_dict(),
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "method": "tunex exhaustive, riscv-sim target: one run under qemu-riscv64 checked "
                  "against NumPy; time = cycle-model cycles (executed blocks x "
                  f"{target.model} cycles per block) at {target.core.clock_ghz} GHz, in ms",
        "cache": cache,
    }
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    ok = [m for m in ms if m.ok]
    best = min(ok, key=lambda m: m.value) if ok else None
    print(json.dumps({"out": str(out), "points": space.size, "trials": len(ms),
                      "ok": len(ok), "wall_s": round(wall, 1),
                      "s_per_trial": round(wall * args.workers / max(1, result.new_trials), 3)
                      if result.new_trials else None,
                      "best_ms": best.value if best else None,
                      "best": best.config.to_dict() if best else None}))
    return 0


# -- versus -------------------------------------------------------------------------------------


def versus(args: argparse.Namespace) -> int:
    shape = parse_shape(args.shape)
    target = make_target(args.target)
    space, wl = target.prepare(args.kernel, shape)
    t0 = time.monotonic()
    with Database("sqlite://") as db, LocalExecutor(target) as ex:
        result = Tuner(target, space, workload=wl, db=db, strategy=args.strategy,
                       budget=args.budget, executor=ex, seed=args.seed, transfer=False,
                       first=[space.default()]).run()  # as `tunex search`: default first
        default = target.measure(target.build(wl, space.default()))
    tune_s = time.monotonic() - t0
    best = result.best
    if best is None:
        raise SystemExit("no successful trial")
    # side by side: the baseline and the winner again, interleaved, on real hardware
    rounds = 1 if not target.noisy else args.rounds
    vs = target.versus_baseline(wl, best.config, rounds=rounds)
    if vs["speedup"] is None:
        raise SystemExit(f"versus the baseline: {vs['error']}")
    row = {
        "kernel": args.kernel, "target": args.target, "shape": shape,
        "space": space.size, "strategy": args.strategy, "budget": str(args.budget),
        "trials": result.trials, "tune_s": round(tune_s, 1), "failures": result.failures,
        "baseline_ms": vs["baseline_ms"], "tuned_ms": vs["tuned_ms"],
        "default_config_ms": default.value, "speedup": vs["speedup"],
        "best": best.config.to_dict(), "rounds": rounds, "machine": machine(),
        "date": dt.date.today().isoformat(),
        "cycles": vs.get("cycles", {"baseline": None, "tuned": None}),
    }
    print(json.dumps(row, default=str))
    path = RESULTS / "riscv_versus.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    return 0


# -- ranking ------------------------------------------------------------------------------------


def kendall(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def ranking(args: argparse.Namespace) -> int:
    rows = []
    for path in args.files:
        doc = json.loads(gzip.decompress(Path(path).read_bytes()))
        ok = [e for e in doc["cache"].values() if e.get("status") == "ok"]
        cyc = [e["cycles"] for e in ok]
        best = min(range(len(ok)), key=lambda i: cyc[i])
        row: dict[str, Any] = {"space": str(path), "configs": len(ok)}
        for proxy in ("insns", "hot_loop_cycles", "qemu_seconds"):
            vals = [e.get(proxy) for e in ok]
            if any(v is None for v in vals):
                continue
            order = sorted(range(len(ok)), key=lambda i: vals[i])
            top = min(order[:1], default=0)
            row[proxy] = {
                "kendall_tau": round(kendall(cyc, vals), 3),
                # how good, by the cycle model, is the config the proxy would pick?
                "proxy_pick_vs_best": round(cyc[top] / cyc[best], 3),
                "rank_of_model_best": order.index(best) + 1,
            }
        rows.append(row)
        print(json.dumps(row))
    with open(RESULTS / "riscv_ranking.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 0


# -- throughput ---------------------------------------------------------------------------------


def throughput(args: argparse.Namespace) -> int:
    shape = parse_shape(args.shape)
    out = []
    for slots in (int(s) for s in args.slots.split(",")):
        target = make_target(f"riscv-sim:{args.core}")
        space, wl = target.prepare(args.kernel, shape)
        if args.ray:  # Ray: builds as tasks, one simulator actor per slot
            import ray

            from tunex.cluster import RayExecutor, RayOptions, simulator_devices

            ray.init(num_cpus=slots, resources={"riscv-sim": slots}, include_dashboard=False,
                     log_to_driver=False)
            ex_: Any = RayExecutor(target, RayOptions(device_specs=simulator_devices(slots),
                                                      in_flight=2 * slots))
        else:
            ex_ = LocalExecutor(target, LocalOptions(build_workers=slots,
                                                     measure_workers=slots))
        with Database("sqlite://") as db, ex_ as ex:
            time.sleep(1.0)  # workers started: time the trials, not the pool's start
            t0 = time.monotonic()
            r = Tuner(target, space, workload=wl, db=db, strategy="random", seed=0,
                      budget=Budget(trials=args.trials), executor=ex, transfer=False,
                      remeasure=0).run()
            wall = time.monotonic() - t0
            ms = db.measurements(wl)
        build = statistics.median(m.compile_ms or 0 for m in ms) / 1e3
        run = statistics.median(m.facts.get("run_seconds", 0) for m in ms)
        row = {"executor": "ray" if args.ray else "local", "core": args.core, "shape": shape,
               "slots": slots, "trials": r.new_trials,
               "wall_s": round(wall, 2), "trials_per_s": round(r.new_trials / wall, 3),
               "median_build_s": round(build, 3), "median_measure_s": round(run, 3),
               "machine": machine()}
        out.append(row)
        print(json.dumps(row))
    with open(RESULTS / "riscv_throughput.jsonl", "a") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")
    return 0


# -- report -------------------------------------------------------------------------------------


def report(args: argparse.Namespace) -> int:
    """The markdown tables of RESULTS.md "RISC-V" from the records in benchmarks/results."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    path = RESULTS / "riscv_versus.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        r = json.loads(line)
        rows[(r["target"], r["kernel"], shape_label(r["shape"]))] = r  # the latest row wins
    print("| target | kernel | shape | space | trials | tuning (s) | default build (ms) | "
          "tuned (ms) | tuned vs default | best config |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for (target, kernel, shape), r in rows.items():
        best = " ".join(f"{k}={_value(v)}" for k, v in r["best"].items())
        print(f"| {target} | {kernel} | {shape} | {r['space']:,} | {r['trials']} | "
              f"{r['tune_s']:.0f} | {r['baseline_ms']:.4g} | {r['tuned_ms']:.4g} | "
              f"**{r['speedup']:.2f}x** | {best} |")
    path = RESULTS / "riscv_ranking.json"
    if path.exists():
        print("\n| space | configs | proxy | Kendall tau vs cycle model | proxy's pick, by the "
              "model, vs the best | model's best ranked by the proxy |")
        print("|---|---:|---|---:|---:|---:|")
        for r in json.loads(path.read_text()):
            for proxy in ("insns", "hot_loop_cycles", "qemu_seconds"):
                if proxy in r:
                    x = r[proxy]
                    print(f"| {Path(r['space']).name.split('.')[0]} | {r['configs']:,} | "
                          f"{proxy} | {x['kendall_tau']:.2f} | {x['proxy_pick_vs_best']:.2f}x "
                          f"| {x['rank_of_model_best']} |")
    path = RESULTS / "riscv_throughput.jsonl"
    if path.exists():
        print("\n| executor | slots | trials | wall (s) | trials/s | vs 1 slot | median build (s) "
              "| median QEMU run (s) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        runs = [json.loads(line) for line in path.read_text().splitlines()]
        one = {r["executor"]: r["trials_per_s"] for r in runs if r["slots"] == 1}
        for r in runs:
            base = one.get(r["executor"])
            ratio = f"{r['trials_per_s'] / (base * r['slots']):.2f} x N" if base else "-"
            print(f"| {r['executor']} | {r['slots']} | {r['trials']} | {r['wall_s']} | "
                  f"{r['trials_per_s']} | {ratio} | {r['median_build_s']} | "
                  f"{r['median_measure_s']} |")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--kernel", default="sgemm")
    r.add_argument("--core", default="x280")
    r.add_argument("--shape", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    r.set_defaults(fn=record)
    v = sub.add_parser("versus")
    v.add_argument("--target", required=True)
    v.add_argument("--kernel", required=True)
    v.add_argument("--shape", required=True)
    v.add_argument("--strategy", default="model")
    v.add_argument("--budget", type=Budget.parse, default=Budget(trials=60))
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--rounds", type=int, default=5, help="interleaved rounds on noisy targets")
    v.set_defaults(fn=versus)
    k = sub.add_parser("ranking")
    k.add_argument("files", nargs="+")
    k.set_defaults(fn=ranking)
    t = sub.add_parser("throughput")
    t.add_argument("--core", default="x280")
    t.add_argument("--kernel", default="sgemm")
    t.add_argument("--shape", default="M=128,N=128,K=128")
    t.add_argument("--trials", type=int, default=40)
    t.add_argument("--slots", default="1,2")
    t.add_argument("--ray", action="store_true",
                   help="a local Ray instance (one --slots value per process: Ray is started "
                   "once per process)")
    t.set_defaults(fn=throughput)
    rp = sub.add_parser("report")
    rp.set_defaults(fn=report)
    args = p.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
