"""The search loop's own cost on large recorded spaces: ``tunex search --target replay:FILE``,
timed end to end, from one or more source trees side by side.

A replayed trial costs nothing to measure, so what a replayed search takes is the loop's own
work: reading the recording, counting the space, proposing (the model's fits, its candidates'
draws and scores) and recording. That work grows with the space: a recording of 100,000+
valid points exposes costs that the spaces of ``../shared`` (4,000-17,000 points) hide.

Spaces: the files given, and with ``--synthetic DIR`` two recordings made there with made-up
times (their values say nothing about any device; only their size and constraints matter
here): ``hotspot/`` on the T1 definition ``hotspot_milo.json`` of ``../shared`` (about 83,000
valid points of 4.4 million, under a constraint that reads six parameters), and ``wide/``, a
recording of 144,384 configs of a 294,912-point Cartesian product without a declared
constraint (what a recording without its definition looks like: the unrecorded configs fail as
invalid trials), which is over ``ModelSearch``'s enumeration limit, so candidates are drawn.

Each round runs every (tree, space) once, in turn, with a new database; the report gives the
median of the search's own seconds (the command's JSON line) and of the wall time, and checks
that the trees proposed the same configs (a faster loop must not change the search).

Usage: ``python benchmarks/loop_cost.py --synthetic /tmp/lc --tree old=../old --rounds 3``
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "spaces" / "kernel_tuner"


def _write(path: Path, device: str, kernel: str, params: dict[str, list[Any]],
           cache: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"device_name": device, "kernel_name": kernel, "problem_size": [4096, 4096],
           "tune_params_keys": list(params), "tune_params": params, "objective": "time",
           "cache": cache}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)


def synthetic(folder: Path) -> list[Path]:
    """The two made-up recordings (see the module docstring), made once per folder."""
    sys.path.insert(0, str(ROOT))
    from tunex.space import Space

    rng = random.Random(0)
    out = []
    hot = folder / "kernel_tuner" / "hotspot" / "synthetic.json.gz"
    if not hot.exists():
        t1 = SHARED / "space_definitions" / "hotspot_milo.json"
        (folder / "kernel_tuner" / "space_definitions").mkdir(parents=True, exist_ok=True)
        (folder / "kernel_tuner" / "space_definitions" / t1.name).write_text(t1.read_text())
        space = Space.from_t1(t1)
        names = [p["Name"] for p in
                 json.loads(t1.read_text())["ConfigurationSpace"]["TuningParameters"]]
        params = {n: list(space.param(n).values) if n in space.names else [space.bound[n]]
                  for n in names}
        cache = {}
        for c in space:
            full = {**space.bound, **c}
            t = (1 + 0.3 * abs(math.log2(c["block_size_x"] * c["block_size_y"] / 128))
                 + 0.1 * abs(c["tile_size_x"] - 3) + 0.1 * abs(c["tile_size_y"] - 4)
                 + 0.05 * abs(c["temporal_tiling_factor"] - 4) + 0.1 * c["sh_power"]) * (
                1 + 0.02 * rng.random())
            cache[",".join(str(full[k]) for k in params)] = dict(full, time=t, times=[t])
        _write(hot, "synthetic", "hotspot", params, cache)
    out.append(hot)
    wide = folder / "wide" / "synthetic.json.gz"
    if not wide.exists():
        params = {"block_size_x": [16 * i for i in range(1, 33)],
                  "block_size_y": [1, 2, 4, 8, 16, 32], "tile_size_x": list(range(1, 9)),
                  "tile_size_y": list(range(1, 9)), "unroll": [0, 1, 2, 4],
                  "use_shmem": [0, 1], "vec": [1, 2, 4]}
        cache = {}
        for combo in itertools.product(*params.values()):
            v = dict(zip(params, combo))
            if v["block_size_x"] * v["block_size_y"] > 1024:
                continue  # not recorded: the recording's own (undeclared) limit
            t = (1 + abs(math.log2(v["block_size_x"] * v["block_size_y"] / 256))
                 + 0.3 * abs(v["tile_size_x"] - 4) + 0.2 * abs(v["tile_size_y"] - 2)
                 + 0.5 * v["use_shmem"] + 0.1 * abs(v["unroll"] - 2)
                 + 0.2 * (v["vec"] == 1)) * (1 + 0.02 * rng.random())
            cache[",".join(map(str, combo))] = dict(v, time=t, times=[t])
        _write(wide, "synthetic", "wide", params, cache)
    out.append(wide)
    return out


def run(tree: Path, space: Path, budget: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "t.db"
        cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); "
               "from tunex.cli import main; sys.exit(main())", str(tree), "search",
               "--target", f"replay:{space}", "--budget", f"{budget}trials", "--seed",
               str(seed), "--db", str(db), "-q"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              env=dict(os.environ, PYTHONHASHSEED="0"))
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{tree} on {space}: rc {proc.returncode}\n{proc.stderr[-2000:]}")
        line = json.loads(proc.stdout.strip().splitlines()[-1])
        with sqlite3.connect(db) as conn:
            configs = [r[0] for r in conn.execute("select config from trials order by number")]
    return {"search_s": line["seconds"], "wall_s": wall, "best_ms": line["best_ms"],
            "configs": configs}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("spaces", nargs="*", type=Path,
                   help="recorded spaces (Kernel Tuner cache files)")
    p.add_argument("--synthetic", type=Path, help="make and add the two made-up recordings here")
    p.add_argument("--tree", action="append", default=[],
                   help="NAME=PATH of another source tree to time side by side (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    spaces = list(args.spaces) + (synthetic(args.synthetic) if args.synthetic else [])
    if not spaces:
        p.error("name a recorded space or pass --synthetic DIR")
    trees = {"this": ROOT} | {t.split("=", 1)[0]: Path(t.split("=", 1)[1]).resolve()
                              for t in args.tree}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in range(args.rounds):
        for space in spaces:
            for name, tree in trees.items():
                rec = run(tree, space, args.budget, args.seed)
                runs.setdefault(str(space), {}).setdefault(name, []).append(rec)
                print(f"round {r + 1} {space.parent.name}/{space.name} {name}: search "
                      f"{rec['search_s']:.2f} s, wall {rec['wall_s']:.2f} s", flush=True)
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "budget": args.budget, "seed": args.seed, "rounds": args.rounds, "spaces": {}}
    for space, by_tree in runs.items():
        row = {}
        first = next(iter(by_tree.values()))[0]["configs"]
        for name, recs in by_tree.items():
            row[name] = {"search_s": statistics.median(x["search_s"] for x in recs),
                         "wall_s": statistics.median(x["wall_s"] for x in recs),
                         "same_trials": all(x["configs"] == first for x in recs)}
        report["spaces"][space] = row
        cells = ", ".join(f"{n} {v['search_s']:.2f} s search / {v['wall_s']:.2f} s wall"
                          + ("" if v["same_trials"] else " (other trials!)")
                          for n, v in row.items())
        print(f"{Path(space).parent.name}/{Path(space).name}: median of {args.rounds}: {cells}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
