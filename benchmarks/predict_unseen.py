"""Configs for workloads nothing was tuned for: the decorator's cost model, leave-one-out.

``Autotuned.train_model()`` fits a ranker on every trial of a kernel in the database and, in
``mode="never"``, gives a workload with no row and no pack the config it ranks first. This
scores that choice on recorded spaces: every space that has siblings (the same kernel at other
shapes or on other devices, as ``search_efficiency.py --loo`` groups them) is held out in turn,
the model is trained on its siblings' trials by the decorator's own ``train`` and asked by its
own ``predict_best``, and the predicted config's recorded time is scored against the held-out
space's optimum (1.0: the best config; a failing config scores 0).

The siblings' trials are either every recorded config (``--trials all``: a database where every
sibling was tuned exhaustively) or a uniform sample of N configs per sibling, one sample per
seed. Beside the model, two choices that need no model: the best config of the nearest tuned
shape (what the decorator falls back to without a model: the siblings' best configs resolved as
a pack's nearest bucket, on the same device only, nearest problem in log2; "-" where the family
has no other shape on that device) and a uniformly random valid config (the mean over all).
Variants of the model: as trained by default (each parameter also relative to each problem size
that differs), with the sums of two of those too (the blocks of a 2-D grid, which a warm search
uses), and without the relative sizes (the model before 2026-12-03).

    python benchmarks/predict_unseen.py --trials 100 --seeds 10
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from search_efficiency import LOO_DATA, loo_spaces  # noqa: E402

from tunex.db.packs import rank_workloads  # noqa: E402
from tunex.decorator._model import predict_best, train  # noqa: E402
from tunex.targets.replay import ReplayTarget  # noqa: E402
from tunex.trial import Measurement, Status, Workload  # noqa: E402


class _History:
    """What ``train`` reads of a database: ``history(kernel=...)``."""

    def __init__(self, rows: list[tuple[Workload, list[Measurement]]]) -> None:
        self.rows = rows

    def history(self, kernel: str) -> list[tuple[Workload, list[Measurement]]]:
        return self.rows


def trials_of(target: ReplayTarget, n: int | None, rng: np.random.Generator
              ) -> list[Measurement]:
    """Recorded means of ``n`` uniformly drawn configs of ``target`` (every one: ``None``)."""
    configs = list(target.space)
    if n is not None and n < len(configs):
        configs = [configs[i] for i in rng.choice(len(configs), size=n, replace=False)]
    out = []
    for c in configs:
        t = target.true_time(c)
        out.append(Measurement(c, Status.OK, (t,)) if math.isfinite(t) else
                   Measurement.failed(c, Status.RUNTIME_ERROR, "failed when recorded"))
    return out


def score(target: ReplayTarget, config: Any, optimum: float) -> float:
    t = target.true_time(config)
    return optimum / t if math.isfinite(t) else 0.0


def held_out(space: str, family: list[tuple[str, Path]], n: int | None, seed: int,
             tmp: Path) -> dict[str, float | None]:
    rng = np.random.default_rng(seed)
    targets = {s: ReplayTarget(p) for s, p in family}
    here = targets[space]
    rows = [(targets[s].workload(), trials_of(targets[s], n, rng)) for s, _ in family
            if s != space]
    kernel = here.workload().kernel
    best = here.optimum()
    out: dict[str, float | None] = {}
    for name, relative, pairs in (("model", True, False),
                                  ("model, pair columns", True, True),
                                  ("model, absolute sizes", False, False)):
        path = train(_History(rows), kernel, here.space, tmp / f"{seed}-{name}.json",
                     relative=relative, relative_pairs=pairs)
        config, _why = predict_best(path, here.space, here.workload(), seed)
        out[name] = score(here, config, best)
    # the decorator's fallback (``_nearest_tuned``): the siblings ranked as a pack's entries
    # are (``rank_workloads``), the first with a valid config gives its best; as the
    # decorator's workloads would be: one kernel source (the recordings' own hashes set
    # aside) and an architecture (the device name: a recorded device's is not known), so
    # only the same device's count
    def decorated(w: Workload) -> Workload:
        return replace(w, kernel_hash="", target={**w.target, "arch": str(w.target.get("device"))})

    best_of = {}
    for w, ms in rows:
        ok = sorted((m for m in ms if m.ok and m.config in here.space), key=lambda m: m.value)
        if ok:
            best_of[decorated(w)] = ok[0].config
    ranked = rank_workloads(best_of, decorated(here.workload()))
    out["nearest tuned shape's best"] = score(here, best_of[ranked[0][0]], best) if ranked else None
    out["random config (mean)"] = float(np.mean([score(here, c, best) for c in here.space]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", default="100",
                    help="trials per sibling: a number (uniform sample) or 'all'")
    ap.add_argument("--seeds", type=int, default=10, help="samples of the siblings' trials")
    ap.add_argument("--spaces", default="*", help="comma list of globs on 'family/name'")
    ap.add_argument("--out", type=Path, help="write every score as JSON")
    args = ap.parse_args(argv)
    n = None if args.trials == "all" else int(args.trials)
    seeds = 1 if n is None else args.seeds
    spaces = loo_spaces(LOO_DATA, [p.strip() for p in args.spaces.split(",")])
    families: dict[str, list[tuple[str, Path]]] = {}
    for s, (family, path) in spaces.items():
        families.setdefault(family, []).append((s, path))
    t0 = time.perf_counter()
    scores: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _family, members in sorted(families.items()):
            if len(members) < 2:
                continue
            for space, _ in members:
                for seed in range(seeds):
                    got = held_out(space, members, n, seed, Path(tmp))
                    for k, v in got.items():
                        if v is not None:
                            scores.setdefault(space, {}).setdefault(k, []).append(v)
                print(f"[{time.perf_counter() - t0:6.0f}s] {space}: " + ", ".join(
                    f"{k} {np.median(v):.2f}" for k, v in scores[space].items()), flush=True)
    names = ["model", "model, pair columns", "model, absolute sizes",
             "nearest tuned shape's best", "random config (mean)"]

    def cell(row: dict[str, list[float]], k: str) -> str:
        return f"{np.median(row[k]):.2f}" if k in row else "-"

    print(f"\nSiblings' trials: {args.trials} per sibling, {seeds} seed(s); "
          "median over seeds of (held-out optimum / chosen config's time)\n")
    print("| space | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for space, row in scores.items():
        print(f"| {space} | " + " | ".join(cell(row, k) for k in names) + " |")
    med = {k: [float(np.median(r[k])) for r in scores.values() if k in r] for k in names}
    print(f"| **median over the {len(scores)} spaces** | " + " | ".join(
        f"**{np.median(med[k]):.2f}**" for k in names) + " |")
    shaped = [r for r in scores.values() if "nearest tuned shape's best" in r]
    print(f"| median over the {len(shaped)} spaces with a tuned shape on their device | "
          + " | ".join(f"{np.median([np.median(r[k]) for r in shaped]):.2f}" for k in names)
          + " |")
    print("| spaces at >= 0.95 | " + " | ".join(
        f"{sum(x >= 0.95 for x in med[k])}" for k in names) + " |")
    if args.out:
        args.out.write_text(json.dumps({"trials": args.trials, "seeds": seeds,
                                        "scores": scores}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
