"""Reliability figures (benchmarks/RESULTS.md, "Reliability"): tuners killed with SIGKILL,
concurrent searches of one workload, forged packs, fuzzing, on SQLite and PostgreSQL.

    python benchmarks/reliability.py [--kills 10] [--writers 4] [--fuzz 300]

Every search is a real ``tunex search`` subprocess replaying a recorded space of the repository
with noise (so it re-measures its leaders), budget in trials. PostgreSQL runs on a throwaway
server from Debian's package (scripts/install-postgres.sh), skipped where absent.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tunex.db import Database  # noqa: E402
from tunex.errors import PackError, TunexError  # noqa: E402

RECORDED = ROOT / "benchmarks" / "data" / "matmul_H200_1024x1024x1024.json.gz"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def search(db: str, budget: int, seed: int, strategy: str = "model") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tunex.cli", "search", "--target",
         f"replay:{RECORDED}?noisy=1&seed={seed}", "--strategy", strategy, "--seed", str(seed),
         "--budget", f"{budget}trials", "--db", db, "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)


def count(db: str) -> int:
    try:
        with Database(db, create=False) as d:
            ws = d.workloads()
            return d.count(ws[0]) if ws else 0
    except TunexError:
        return 0


def audit(db: str, budget: int) -> dict[str, int]:
    """Trials, gaps and repeats (a config measured twice other than by re-measurement)."""
    with Database(db, create=False) as d:
        trials = d.trials(d.workloads()[0])
    numbers = [t.number for t in trials]
    searched = Counter(t.measurement.config for t in trials if t.strategy != "remeasure")
    return {"trials": len(trials), "budget": budget,
            "gaps": len(set(range(1, max(numbers) + 1)) - set(numbers)),
            "repeats": sum(n - 1 for n in searched.values()),
            "remeasured": sum(1 for t in trials if t.strategy == "remeasure")}


def kills(db: str, n: int, budget: int = 400, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    killed = 0
    for i, threshold in enumerate(sorted(rng.sample(range(10, budget - 20), n))):
        proc = search(db, budget, i)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and count(db) < threshold:
            time.sleep(rng.uniform(0.0, 0.03))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.communicate(timeout=60)
    final = search(db, budget, 999)
    _, err = final.communicate(timeout=600)
    if final.returncode != 0:
        raise SystemExit(err)
    return {"kills": killed, **audit(db, budget)}


def concurrent(db: str, writers: int, budget: int = 100) -> dict[str, int]:
    procs = [search(db, budget, seed, "random") for seed in range(writers)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(err)
    return {"writers": writers, **audit(db, budget)}


def forged_packs(tmp: Path) -> dict[str, object]:
    """Forgeries of a signed pack, each loaded with and without the publisher's key trusted."""
    import dataclasses

    from tunex.db.packs import _checksum, export_pack, generate_key, load_pack, sign_pack

    db = str(tmp / "src.db")
    proc = search(db, 20, 1, "random")
    proc.communicate(timeout=300)
    generate_key(tmp / "publisher")
    generate_key(tmp / "attacker")
    with Database(db) as d:
        export_pack(d, tmp / "signed.json", name="lib", version="1", sign_with=tmp / "publisher")
    doc = json.loads((tmp / "signed.json").read_text())

    def variant(name: str, edit) -> Path:
        d = json.loads(json.dumps(doc))
        edit(d)
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(d))
        return path

    def rechecksum(d: dict) -> None:
        d["checksum"] = _checksum({k: v for k, v in d.items()
                                   if k not in ("checksum", "signature")})

    def faster(d: dict) -> None:
        d["entries"][0]["stats"]["median_ms"] /= 10
        rechecksum(d)

    def other_config(d: dict) -> None:
        d["entries"][0]["config"]["num_warps"] = 2 if d["entries"][0]["config"][
            "num_warps"] != 2 else 4
        rechecksum(d)

    def unsigned(d: dict) -> None:
        del d["signature"]

    def swapped_key(d: dict) -> None:
        att = (tmp / "attacker.pub").read_text().split()[1]
        d["signature"]["public_key"] = att

    def truncated(d: dict) -> None:
        d["signature"]["value"] = d["signature"]["value"][:-8]

    forgeries = {
        "median edited, checksum recomputed": variant("faster", faster),
        "config edited, checksum recomputed": variant("config", other_config),
        "signature stripped": variant("unsigned", unsigned),
        "public key swapped": variant("swapped", swapped_key),
        "signature truncated": variant("truncated", truncated),
    }
    pack = load_pack(tmp / "signed.json")
    evil = sign_pack(dataclasses.replace(pack, name="evil"), tmp / "attacker")
    evil.write(tmp / "resigned.json")
    forgeries["re-signed by another key"] = tmp / "resigned.json"
    trusted = [tmp / "publisher.pub"]
    rows = []
    for what, path in forgeries.items():
        out = []
        for keys in (trusted, None):
            try:
                load_pack(path, trusted=keys)
                out.append("loaded")
            except PackError:
                out.append("refused")
        rows.append({"forgery": what, "trusted key set": out[0], "no keys": out[1]})
    genuine = load_pack(tmp / "signed.json", trusted=trusted).trusted
    return {"rows": rows, "genuine_trusted": genuine,
            "refused_with_key": sum(r["trusted key set"] == "refused" for r in rows),
            "forgeries": len(rows)}


def fuzz(examples: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_fuzz.py", "--hypothesis-show-statistics"],
        capture_output=True, text=True, cwd=ROOT,
        env={**ENV, "TUNEX_FUZZ_EXAMPLES": str(examples)})
    cases: dict[str, list[int]] = {}  # test -> [passing, failing] over hypothesis' phases
    for block in re.split(r"\n(?=tests/test_fuzz\.py::)", done.stdout):
        head = re.match(r"tests/test_fuzz\.py::(\w+):", block)
        if head:
            runs = re.findall(r"- (\d+) passing, (\d+) failing", block)
            cases[head.group(1)] = [sum(int(p) for p, _ in runs), sum(int(f) for _, f in runs)]
    return {"examples_per_door": examples, "passed": done.returncode == 0,
            "summary": done.stdout.strip().splitlines()[-1] if done.stdout else done.stderr,
            "cases": cases}


@contextlib.contextmanager
def backends(tmp: Path) -> Iterator[dict[str, object]]:
    from tests._postgres import Unavailable, fresh_database, postgres_server

    out: dict[str, object] = {"sqlite": lambda name: str(tmp / f"{name}.db")}
    try:
        with postgres_server() as url:
            stack = contextlib.ExitStack()

            def pg(name: str) -> str:
                return stack.enter_context(fresh_database(url))

            out["postgresql"] = pg
            with stack:
                yield out
            return
    except Unavailable as exc:
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
    yield out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--fuzz", type=int, default=300, help="examples per fuzzed door")
    ap.add_argument("--no-packs", dest="packs", action="store_false",
                    help="skip the forged-pack check")
    args = ap.parse_args()
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with backends(tmp) as dbs:
            for name, make in dbs.items():
                if args.kills:
                    report[f"{name}: SIGKILL"] = kills(make("kills"), args.kills)  # type: ignore[operator]
                    print(name, report[f"{name}: SIGKILL"], flush=True)
                if args.writers:
                    report[f"{name}: concurrent"] = concurrent(make("conc"), args.writers)  # type: ignore[operator]
                    print(name, report[f"{name}: concurrent"], flush=True)
        if args.packs:
            report["forged packs"] = forged_packs(tmp)
            print(report["forged packs"], flush=True)
    if args.fuzz:
        report["fuzz"] = fuzz(args.fuzz)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
