"""Build the priors tunex ships: what a search of each recorded space would leave in a database.

A search learns from other workloads measured elsewhere (``tunex.db.prior``): the same kernel on
other devices or problems, and on its own device the related kernels. For each recording
given, this runs the search a user's database would hold had they tuned that workload: the
default strategy, ``--budget`` trials (100), seed 0, on the recording replayed (its recorded
median times), recorded under the workload the recording measured (a tunex recording names
it: kernel name and source hash, problem sizes, the device and toolchain; a Kernel Tuner cache
gives its kernel name, problem size and device). All of it is written as one ``tunex db
export`` (jsonl, gzip'd): data only, read as any trials export is. Whole recordings are not
shipped: a warm start on thousands of other trials costs each proposal 150 ms instead of 15
(benchmarks/RESULTS.md, "the prior").

    python benchmarks/make_prior.py     # tunex's H200 recordings -> prior_data/h200_triton
    python benchmarks/make_prior.py --data benchmarks/data/riscv \
        --out tunex/db/prior_data/riscv_rvv.jsonl.gz          # its RVV kernels, X60 and X280
    python benchmarks/make_prior.py --data ../shared/data/spaces/kernel_tuner --top 20 \
        --out tunex/db/prior_data/kernel_tuner_hub.jsonl.gz   # the FAIR hub's caches

The Kernel Tuner prior also holds each recording's 20 best configs (``--top``), as the database
of the exhaustive tuning that recorded it would: leave-one-out, a first search from it reaches
95% within 20 trials in 227 of 260 runs against 197 from the searches alone (RESULTS.md).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunex.db import Database  # noqa: E402
from tunex.targets.replay import ReplayTarget  # noqa: E402
from tunex.trial import Workload  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
OUT = ROOT / "tunex" / "db" / "prior_data" / "h200_triton.jsonl.gz"


def recordings(folder: Path) -> list[Path]:
    """The recorded spaces in ``folder``: tunex's own recordings there (those that name the
    workload they measured), else every cache in it and its sub-folders (one folder per
    kernel, as Kernel Tuner's are kept)."""
    own = [p for p in sorted(folder.glob("*.json.gz"))
           if isinstance(ReplayTarget(p).doc_meta.get("workload"), dict)]
    return own or sorted(folder.glob("*/*.json.gz"))


def workload_of(target: ReplayTarget) -> Workload:
    """The workload a recording measured: a tunex recording's own, else the replay's."""
    spec = target.doc_meta.get("workload")
    return Workload.from_dict(spec) if isinstance(spec, dict) else target.workload()


def build(paths: list[Path], budget: int = 100, top: int = 0) -> bytes:
    """The export's bytes (gzip'd jsonl; trial times are the search's, as a database keeps);
    with ``top``, each recording's ``top`` best configs join its search's trials (those it
    did not measure), as an exhaustive tuning's database would hold them."""
    from tunex.trial import Measurement, Status
    from tunex.tuner import Tuner

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(str(Path(tmp) / "prior.db"))
        try:
            for p in paths:
                target = ReplayTarget(p)
                workload = workload_of(target)
                Tuner(target, target.space, workload=workload, db=db, strategy="model",
                      seed=0, budget=f"{budget}trials", remeasure=0, transfer=False).run()
                if top:
                    have = {m.config for m in db.measurements(workload)}
                    best = sorted((c for c in target.space if target.true_time(c) < float("inf")),
                                  key=target.true_time)[:top]
                    for c in best:
                        if c not in have:
                            db.record(workload, Measurement(c, Status.OK,
                                                            (target.true_time(c),)))
            text = io.StringIO()
            db.export(text, format="jsonl")
        finally:
            db.close()
    lines = []
    for i, line in enumerate(text.getvalue().splitlines()):
        rec = json.loads(line)
        rec["facts"] = {}
        for key in ("started_at", "ended_at", "recorded_at"):  # the order, not the clock:
            rec[key] = float(i)  # the same recordings build the same bytes
        lines.append(json.dumps(rec, sort_keys=True))
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="folder of recordings")
    p.add_argument("--budget", type=int, default=100, help="trials of each kernel's search")
    p.add_argument("--top", type=int, default=0,
                   help="also each recording's TOP best configs (default: the search alone)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    paths = recordings(args.data)
    if not paths:
        raise SystemExit(f"no recorded spaces in {args.data}: give a folder of tunex recordings "
                         "(*.json.gz naming their workload) or of Kernel Tuner caches in "
                         "sub-folders (KERNEL/DEVICE.json.gz)")
    raw = build(paths, args.budget, args.top)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(raw)
    print(f"wrote {args.out} ({len(raw):,} bytes, {len(paths)} recordings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
