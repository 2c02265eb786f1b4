"""Build the prior tunex ships: its own kernels' recorded spaces as one trials export.

A kernel's first search on a device learns from the related kernels measured on the same device
(``tunex.db.prior``); the library's recordings (``benchmarks/data``, every point of each space
measured on the device, ``benchmarks/record_h200.py``) are such measurements. This writes them
as a ``tunex db export`` file (jsonl, gzip'd), one trial per recorded point: the recording's own
workload (kernel name and source hash, problem sizes, the device and toolchain it ran on), the
config, its status and its recorded time (the median of its repeats; the repeats are left out),
and the declared space. The file is data only, read as any trials export is.

    python benchmarks/make_prior.py              # writes tunex/db/prior_data/h200_triton.jsonl.gz
    python benchmarks/make_prior.py --check      # rebuild and compare with the shipped file
"""

from __future__ import annotations

import argparse
import gzip
import io
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


def build(paths: list[Path]) -> bytes:
    """The export's bytes (gzip'd jsonl, stable: no timestamps of this run in it)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(str(Path(tmp) / "prior.db"))
        try:
            for p in paths:
                target = ReplayTarget(p)
                workload = Workload.from_dict(target.doc_meta["workload"])
                db.declare_space(workload, target.space)
                stamp = 0.0
                for config, _entry in target._recorded_points():
                    m = target.measure(target.build(workload, config))
                    stamp += 1.0  # the order of the recording, not a date
                    db.record(workload, m.replace(started_at=stamp, ended_at=stamp,
                                                  facts={}, worker="recording"),
                              strategy="exhaustive")
            text = io.StringIO()
            db.export(text, format="jsonl")
        finally:
            db.close()
    lines = []
    import json

    for line in text.getvalue().splitlines():
        rec = json.loads(line)
        rec["recorded_at"] = rec["started_at"]  # stable bytes from one build to the next
        lines.append(json.dumps(rec, sort_keys=True))
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="folder of recordings")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = p.parse_args(argv)
    paths = recordings(args.data)
    if not paths:
        raise SystemExit(f"no tunex recordings in {args.data}")
    raw = build(paths)
    if args.check:
        same = args.out.exists() and gzip.decompress(args.out.read_bytes()) == \
            gzip.decompress(raw)
        print(f"{args.out}: {'up to date' if same else 'differs from a rebuild'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(raw)
    print(f"wrote {args.out} ({len(raw):,} bytes, {len(paths)} recordings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
