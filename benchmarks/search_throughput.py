"""Throughput of the tuning loop itself: one ``tunex search`` command, timed end to end, at
several build-worker counts (the issue-9 benchmark; run it on the GPU machine).

Each run is a fresh ``python -m tunex.cli search KERNEL --target triton_gpu --shape ...
--strategy random --budget 64trials --workers W`` with a cold Triton cache (a new
``TRITON_CACHE_DIR``) and a new database. From the database the run's timeline is read: when
the first trial was submitted (start-up of the command), when the first result came back (worker
processes started and the first compile done), the rate after that, the compile time summed
over trials, and the GPU time the measurements needed (timed repeats plus the warm-up each
takes), which bounds what any loop could do.

``--tree NAME=PATH`` (repeatable) runs the same command from other source trees (e.g. an older
checkout) in the same session, interleaved round by round, so before/after compare side by side.

``--service`` measures the same search sent to a resident worker service instead: for each
worker count a ``tunex serve --workers W`` is started, warmed by one short search of another
shape (``--warm-shape``), its Triton cache emptied, and then the measured command runs with
``--service`` (a cold Triton cache, as above, but warm processes).

Usage: ``python benchmarks/search_throughput.py --workers 1,15 --rounds 2 --out results.json``
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_once(tree: Path, workers: int, args: argparse.Namespace,
             service: tuple[str, dict[str, str]] | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tunex-tp-") as tmp:
        db = os.path.join(tmp, "run.db")
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, "triton-cache"),
                   TUNEX_DB=db, PYTHONPATH=os.pathsep.join(
                       p for p in (args.site, str(tree)) if p))
        where = ["--workers", str(workers)]
        if service is not None:  # the service's workers, with its environment
            where = ["--service", service[0]]
            env = dict(service[1], TUNEX_DB=db)
        cmd = [sys.executable, "-m", "tunex.cli", "search", args.kernel, "--target",
               args.target, "--shape", args.shape, "--strategy", args.strategy, "--budget",
               args.budget, "--seed", str(args.seed), *where, "--db", db, "--json"]
        if args.batch:
            cmd += ["--batch", str(args.batch)]
        t0 = time.time()
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True,
                              timeout=args.timeout)
        wall = time.time() - t0
        if proc.returncode != 0:
            return {"workers": workers, "rc": proc.returncode, "wall_s": wall,
                    "stderr": proc.stderr[-3000:]}
        summary = json.loads(proc.stdout)
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT started_at, ended_at, compile_ms, status, value_ms, "
                                "times_ms FROM trials ORDER BY ended_at").fetchall()
    ended = [r[1] - t0 for r in rows]
    compile_s = sum((r[2] or 0.0) for r in rows) / 1e3
    ok = [r for r in rows if r[3] == "ok"]
    # GPU time the measurements needed: the timed repeats, plus the untimed warm-up
    # (``warmup_ms``, 10 ms by default) and the one sizing run each measurement takes
    gpu_s = sum(len(json.loads(r[5])) * r[4] for r in ok) / 1e3 + len(ok) * (10.0 + 0.0) / 1e3
    steady = ((ended[-1] - ended[0]) / (len(ended) - 1)) if len(ended) > 1 else None
    return {"workers": workers, "rc": 0, "wall_s": round(wall, 2), "trials": len(rows),
            "ok": len(ok), "first_submit_s": round(min(r[0] for r in rows) - t0, 2),
            "first_result_s": round(ended[0], 2), "last_result_s": round(ended[-1], 2),
            "s_per_trial_after_first": None if steady is None else round(steady, 4),
            "compile_s_total": round(compile_s, 2), "gpu_s": round(gpu_s, 3),
            "trials_per_s": round(len(rows) / wall, 2), "best_ms": summary.get("best_ms"),
            "batch": args.batch,
            # per trial, in the order they ended: submitted, ended (s from the start), compile s
            "timeline": [(round(r[0] - t0, 3), round(r[1] - t0, 3), round((r[2] or 0) / 1e3, 3))
                         for r in rows]}


def run_service(tree: Path, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """The measured search sent to a warm ``tunex serve`` of ``workers`` build workers."""
    import shutil
    import signal

    with tempfile.TemporaryDirectory(prefix="tunex-tps-") as tmp:
        cache = os.path.join(tmp, "triton-cache")
        sock = os.path.join(tmp, "service.sock")
        env = dict(os.environ, TRITON_CACHE_DIR=cache, TUNEX_SERVICE_DIR=tmp,
                   PYTHONPATH=os.pathsep.join(p for p in (args.site, str(tree)) if p))
        t_start = time.time()
        server = subprocess.Popen([sys.executable, "-m", "tunex.cli", "serve", "--target",
                                   args.target, "--workers", str(workers), "--socket", sock],
                                  env=env, cwd=tmp, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stderr is not None
            line = server.stderr.readline()
            if "serving" not in line:
                return {"workers": workers, "rc": 1, "wall_s": 0.0, "stderr": line}
            started = time.time() - t_start
            warm = subprocess.run(
                [sys.executable, "-m", "tunex.cli", "search", args.kernel, "--target",
                 args.target, "--shape", args.warm_shape, "--strategy", "random", "--budget",
                 "8trials", "--service", sock, "--db", os.path.join(tmp, "warm.db"), "--json"],
                env=env, cwd=tmp, capture_output=True, text=True, timeout=args.timeout)
            if warm.returncode != 0:
                return {"workers": workers, "rc": warm.returncode, "wall_s": 0.0,
                        "stderr": warm.stderr[-3000:]}
            shutil.rmtree(cache, ignore_errors=True)  # the measured search compiles cold
            r = run_once(tree, workers, args, service=(sock, env))
            r["service_start_s"] = round(started, 2)
            return r
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()


PROBE = r"""
import json, sys, time
t = {"start": time.time()}
import tunex.cli
t["import_tunex_cli"] = time.time()
import torch
t["import_torch"] = time.time()
import triton
t["import_triton"] = time.time()
torch.cuda.is_available()
t["cuda_is_available"] = time.time()
torch.cuda.get_device_properties(0)
t["device_properties"] = time.time()
from tunex.targets import make_target
target = make_target(sys.argv[1])
t["make_target"] = time.time()
from tunex.cli import _shape
space, workload = target.prepare(sys.argv[2], _shape(sys.argv[3]))
t["prepare"] = time.time()
target.open()
t["open"] = time.time()
configs = space.sample(int(sys.argv[4]), rng=1)
builds, measures = [], []
for c in configs:
    a = time.time(); art = target.build(workload, c); b = time.time()
    m = target.measure(art); e = time.time()
    builds.append(b - a); measures.append(e - b)
t["done"] = time.time()
print(json.dumps({"phases_s": {k: round(v - t["start"], 3) for k, v in t.items()},
                  "build_s": [round(x, 3) for x in builds],
                  "measure_s": [round(x, 3) for x in measures]}))
"""


def probe(args: argparse.Namespace, tree: Path) -> dict[str, Any]:
    """Where one process's time goes: imports, target, space, then builds and measurements of a
    few configs one after the other (cold Triton cache)."""
    with tempfile.TemporaryDirectory(prefix="tunex-probe-") as tmp:
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, "triton-cache"),
                   PYTHONPATH=os.pathsep.join(p for p in (args.site, str(tree)) if p))
        proc = subprocess.run([sys.executable, "-c", PROBE, args.target, args.kernel,
                               args.shape, str(args.probe)], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return {"rc": proc.returncode, "stderr": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="matmul")
    ap.add_argument("--target", default="triton_gpu")
    ap.add_argument("--shape", default="M=2048,N=2048,K=2048")
    ap.add_argument("--strategy", default="random")
    ap.add_argument("--budget", default="64trials")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", default="1,15", help="build-worker counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tree", action="append", default=[],
                    help="NAME=PATH of a source tree to run (default: this one as 'current')")
    ap.add_argument("--site", default=os.environ.get("TUNEX_SITE", ""),
                    help="extra PYTHONPATH entry first (installed wheels)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--probe", type=int, default=0,
                    help="also time N builds and measurements one by one in one process")
    ap.add_argument("--service", action="store_true",
                    help="send the measured search to a warm `tunex serve` (see above)")
    ap.add_argument("--warm-shape", default="M=1024,N=1024,K=1024",
                    help="(--service) the shape of the search that warms the service")
    ap.add_argument("--batch", type=int, default=0,
                    help="trials in flight (--batch of the command; default: its own)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"current": str(ROOT)}
    # bytecode as an installed package has it (pip compiles at install): a command's start
    # must not be Python compiling sources (wheels unpacked with --no-compile, a fresh tree)
    for where in [args.site, *(os.path.join(p, d) for p in trees.values()
                                for d in ("tunex", "kernels"))]:
        if where and os.path.isdir(where):
            compileall.compile_dir(where, quiet=1, workers=0)
    probes = {}
    if args.probe:
        for name, path in trees.items():
            probes[name] = probe(args, Path(path).resolve())
            print(json.dumps({"probe": name, **probes[name]}), flush=True)
    counts = [int(w) for w in args.workers.split(",")]
    runs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        order = list(trees.items())
        if rnd % 2:
            order.reverse()
        for name, path in order:
            for w in counts:
                run = run_service if args.service else run_once
                r = run(Path(path).resolve(), w, args)
                r.update(tree=name, round=rnd)
                runs.append(r)
                print(json.dumps(r), flush=True)
    table = []
    for name in trees:
        for w in counts:
            rs = [r for r in runs if r["tree"] == name and r["workers"] == w and r["rc"] == 0]
            if not rs:
                continue
            med = {k: statistics.median(r[k] for r in rs)
                   for k in ("wall_s", "first_submit_s", "first_result_s", "compile_s_total",
                             "gpu_s", "s_per_trial_after_first")}
            table.append({"tree": name, "workers": w, "runs": len(rs), **med})
    for name in trees:
        base = next((t for t in table if t["tree"] == name and t["workers"] == min(counts)), None)
        for t in table:
            if t["tree"] == name and base:
                t["speedup_vs_fewest"] = round(base["wall_s"] / t["wall_s"], 2)
    print("| tree | workers | wall s | first submit s | first result s | s/trial after | "
          "compile s (sum) | GPU s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in table:
        print(f"| {t['tree']} | {t['workers']} | {t['wall_s']:.1f} | {t['first_submit_s']:.1f} | "
              f"{t['first_result_s']:.1f} | {t['s_per_trial_after_first']:.3f} | "
              f"{t['compile_s_total']:.1f} | {t['gpu_s']:.2f} | {t.get('speedup_vs_fewest', 0)} |")
    if args.out:
        meta = {"command": " ".join(sys.argv), "python": platform.python_version(),
                "host_cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                     time.gmtime())}
        Path(args.out).write_text(json.dumps({"meta": meta, "runs": runs, "table": table,
                                              "probes": probes},
                                             indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
