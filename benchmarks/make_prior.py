"""Build the prior tunex ships: what a search of each of its own kernels recorded on the H200.

A kernel's first search on a device learns from the related kernels measured on the same device
(``tunex.db.prior``). For each of the library's recordings (``benchmarks/data``: every point of
a kernel's space measured on the device, ``benchmarks/record_h200.py``) this runs the search a
user's database would hold had they tuned that kernel there: the default strategy, ``--budget``
trials (100), seed 0, on the recording replayed (its recorded median times), recorded under
the workload the recording measured (kernel name and source hash, problem sizes, the device
and toolchain). All of it is written as one ``tunex db export`` (jsonl, gzip'd): data only,
read as any trials export is. Whole recordings are not shipped: a warm start on thousands of
other trials costs each proposal 150 ms instead of 15 (benchmarks/RESULTS.md, "the prior").

    python benchmarks/make_prior.py     # writes tunex/db/prior_data/h200_triton.jsonl.gz
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
    """tunex's own recordings in ``folder`` (those that name the workload they measured)."""
    out = []
    for p in sorted(folder.glob("*.json.gz")):
        if isinstance(ReplayTarget(p).doc_meta.get("workload"), dict):
            out.append(p)
    return out


def build(paths: list[Path], budget: int = 100) -> bytes:
    """The export's bytes (gzip'd jsonl; trial times are the search's, as a database keeps)."""
    from tunex.tuner import Tuner

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(str(Path(tmp) / "prior.db"))
        try:
            for p in paths:
                target = ReplayTarget(p)
                workload = Workload.from_dict(target.doc_meta["workload"])
                Tuner(target, target.space, workload=workload, db=db, strategy="model",
                      seed=0, budget=f"{budget}trials", remeasure=0, transfer=False).run()
            text = io.StringIO()
            db.export(text, format="jsonl")
        finally:
            db.close()
    lines = []
    for line in text.getvalue().splitlines():
        rec = json.loads(line)
        rec["facts"] = {}
        lines.append(json.dumps(rec, sort_keys=True))
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="folder of recordings")
    p.add_argument("--budget", type=int, default=100, help="trials of each kernel's search")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    paths = recordings(args.data)
    if not paths:
        raise SystemExit(f"no tunex recordings in {args.data}")
    raw = build(paths, args.budget)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(raw)
    print(f"wrote {args.out} ({len(raw):,} bytes, {len(paths)} recordings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
