"""One workload's tuning replayed with many trials in flight, as the decorator runs it on a GPU
host: the other workloads of a recorded tunex database warm-start the search, a recorded space
answers the measurements (noisy replay), and the executor keeps ``--in-flight`` trials going,
ending the oldest first. On a 16-CPU host the decorator's batch is 16 and a built trial waiting
for the GPU frees its build worker, so up to 32 are in flight (``tunex.tuner.Tuner``'s
``batch``): the first 32 configs are chosen before any of them is measured.

Everything but the executor is tunex's own: ``Tuner`` with the decorator's first configs (the
space's default and the best configs of the kernel's other workloads,
``tunex.decorator._target.best_of_siblings``), its ``patience`` and budget, the ``model``
strategy, the database's warm start (related kernels included).

Usage (the run that stalled on an H100, its database kept by ``benchmarks/user_kernels.py
--db``)::

    python benchmarks/in_flight.py \\
        --db benchmarks/results/user_kernels_h100/2026-12-06_both_kernels_patience_before_5.db.gz \\
        --replay benchmarks/data/h100/rowsum/rowsum_H100_65536x256.json.gz \\
        --kernel rowsum --problem M=65536 --in-flight 32 --patience 30 --budget 50 --seeds 20
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tunex import Database, Tuner  # noqa: E402
from tunex.cluster import InlineExecutor  # noqa: E402
from tunex.decorator._target import best_of_siblings  # noqa: E402
from tunex.search import get_strategy  # noqa: E402
from tunex.targets.replay import ReplayTarget  # noqa: E402
from tunex.trial import Config, Measurement, Workload  # noqa: E402


class Fifo(InlineExecutor):
    """Runs each trial at submit, but hands them back one at a time, oldest first: a pipeline
    of ``slots`` trials in flight whose results come in the order they were started."""

    def __init__(self, target: ReplayTarget, in_flight: int) -> None:
        super().__init__(target)
        self.slots = in_flight
        self._order: list[Future[Measurement]] = []

    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        fut = super().submit(workload, config)
        self._order.append(fut)
        return fut

    def wait(self, futures: Any, timeout: float | None = None) -> set[Future[Measurement]]:
        wanted = set(futures)
        for fut in self._order:
            if fut in wanted:
                self._order.remove(fut)
                return {fut}
        return set()


def load(path: Path, tmp: Path) -> Database:
    if not path.is_file():
        raise SystemExit(f"--db {path}: no such file (a tunex database, .db or .db.gz)")
    if path.suffix == ".gz":
        out = tmp / path.stem
        with gzip.open(path, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        path = out
    return Database(str(path))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", type=Path, required=True, help="tunex database (.db or .db.gz)")
    p.add_argument("--replay", type=Path, required=True, help="recorded space of the workload")
    p.add_argument("--kernel", required=True)
    p.add_argument("--problem", default="", help="KEY=VALUE,... picking the workload tuned")
    p.add_argument("--in-flight", type=int, default=32)
    p.add_argument("--patience", type=int, default=30)
    p.add_argument("--budget", type=int, default=50, help="trials")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--options", default="{}",
                   help="JSON options of the model strategy (its keywords, e.g. "
                   "'{\"n_init\": 5}')")
    args = p.parse_args(argv)
    options = json.loads(args.options)
    want = dict(kv.split("=", 1) for kv in args.problem.split(",") if kv)
    with tempfile.TemporaryDirectory() as tmp:
        src = load(args.db, Path(tmp))
        picked = [w for w in src.workloads(args.kernel)
                  if all(str(w.problem.get(k)) == v for k, v in want.items())]
        if len(picked) != 1:
            raise SystemExit(f"--kernel/--problem match {len(picked)} workloads, not one: "
                             f"{[w.problem for w in src.workloads(args.kernel)]}")
        current = picked[0]
        space = src.space(current)
        if space is None:
            raise SystemExit(f"{args.db}: no declared space for {current.problem}")
        others = [(w, ms) for w, ms in src.history() if w != current]
        spaces = {w: src.space(w) for w, _ in others}
        optimum = ReplayTarget(args.replay).optimum()
        rows = []
        for seed in range(args.seeds):
            db = Database("sqlite://")
            for w, ms in others:
                if spaces[w] is not None:
                    db.declare_space(w, spaces[w])
                for m in ms:
                    db.record(w, m, strategy="recorded")
            target = ReplayTarget(args.replay, noisy=True, seed=seed)
            sibs = best_of_siblings(db.history(kernel=current.kernel), current, space)
            first = [space.default(), *(c for c in sibs if c != space.default())]
            times: list[float] = []

            def on_trial(m: Measurement, _n: int, times: list[float] = times,
                         target: ReplayTarget = target) -> None:
                times.append(target.true_time(m.config))

            result = Tuner(target, space, workload=current, db=db,
                           strategy=get_strategy("model", space, seed=seed, **options), seed=seed,
                           executor=Fifo(target, args.in_flight), batch=args.in_flight,
                           patience=args.patience, budget=f"{args.budget}trials", remeasure=0,
                           first=first, prior=False, on_trial=on_trial).run()
            best = min(times)
            t95 = next((i + 1 for i, t in enumerate(times) if optimum / t >= 0.95), None)
            rows.append((seed, len(times), result.stopped, round(optimum / best, 3), t95))
            db.close()
    for r in rows:
        print(f"seed {r[0]:3d}: {r[1]:3d} trials ({r[2]}), best {r[3]:.3f} of the optimum, "
              f"95% at trial {r[4]}")
    ratios = [r[3] for r in rows]
    print(f"{len(rows)} runs: median {statistics.median(ratios):.3f} of the optimum, "
          f"{sum(x < 0.9 for x in ratios)} end below 0.9, {sum(x < 0.95 for x in ratios)} below "
          f"0.95; stopped by patience {sum('no improvement' in r[2] for r in rows)}; trials "
          f"median {statistics.median(r[1] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
