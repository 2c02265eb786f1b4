"""How well does llvm-mca-19's SiFive X280 model match the real X280?

riscv-sim costs blocks with llvm-mca's scheduling models; this checks the X280 model against
the reciprocal throughputs rvv-bench measured on a real X280 (Tenstorrent Blackhole, VLEN 512;
``shared/data/riscv/rvv-bench/sifive_x280.html.gz``, table vl=VLMAX, ta/ma).

For each instruction form below at e32 and LMUL m1, m2, m4, m8, llvm-mca gets a block of the
instruction repeated 16 times on rotating destination register groups (sources fixed, as
rvv-bench does), with the ``LLVM-MCA-RISCV-LMUL/SEW`` instruments, over 200 iterations; its
reciprocal throughput is TotalCycles / (200 x 16). All blocks run in one llvm-mca call.
The X280 page has no loads or stores, so memory forms are not compared.

    .venv/bin/python benchmarks/riscv_mca_vs_measured.py [--out PATH]

Prints one row per (form, LMUL) and a summary: median of predicted/measured, the fraction
within 2x either way, Spearman rank correlation; writes all of it as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

from tunex.targets.riscv._cycles import rvv_bench_table
from tunex.targets.riscv._toolchain import Toolchain

FORMS = [
    "vadd.vv", "vadd.vx", "vmul.vv", "vand.vv", "vsll.vi", "vmseq.vv", "vmerge.vvm",
    "vredsum.vs", "vdiv.vv", "vmv.v.x", "vfadd.vv", "vfsub.vf", "vfmul.vv", "vfmacc.vv",
    "vfmacc.vf", "vfmin.vv", "vfdiv.vv", "vfsqrt.v", "vfcvt.f.x.v", "vfmv.v.f",
    "vfredusum.vs", "vfredosum.vs", "vslidedown.vx", "vslideup.vx", "vrgather.vv",
    "vcompress.vm",
]
LMULS = (1, 2, 4, 8)
COPIES = 16
ITERATIONS = 200
OUT = Path(__file__).resolve().parent / "results" / "riscv_mca_vs_x280.json"


def block(row: str, lmul: int) -> str:
    """The measured row's instruction repeated on independent destinations at this LMUL."""
    mnemonic, operands = row.split(" ", 1)
    reads_v0 = re.search(r"\bv0\b", operands) is not None
    dests = [g for g in range(0, 16, lmul) if g != 0 or (lmul == 8 and not reads_v0)]
    lines = [f"# LLVM-MCA-RISCV-LMUL M{lmul}", "# LLVM-MCA-RISCV-SEW E32"]
    for k in range(COPIES):
        ops = re.sub(r"^v8\b", f"v{dests[k % len(dests)]}", operands)
        lines.append(f"{mnemonic} {ops}")
    return "\n".join(lines)


def spearman(a: list[float], b: list[float]) -> float:
    """Rank correlation with average ranks for ties (no SciPy needed)."""
    def ranks(xs: list[float]) -> list[float]:
        order = sorted(range(len(xs)), key=xs.__getitem__)
        out = [0.0] * len(xs)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    tc = Toolchain.find(need=("mca",))
    table = rvv_bench_table("sifive_x280")
    rows = {}
    for row in table:
        if not row.endswith("v0.t"):
            rows.setdefault(row.split()[0], row)
    cases = [(f, lm) for f in FORMS if f in rows for lm in LMULS
             if f"e32m{lm}" in table[rows[f]]]
    missing = [f for f in FORMS if f not in rows]
    src = []
    for n, (form, lmul) in enumerate(cases):
        src += [f"# LLVM-MCA-BEGIN c{n}", block(rows[form], lmul), "# LLVM-MCA-END"]
    proc = subprocess.run([str(tc.require("mca")), "-mtriple=riscv64", "-mcpu=sifive-x280",
                           f"-iterations={ITERATIONS}", "-json"], input="\n".join(src) + "\n",
                          capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return 1
    regions = {r["Name"]: r["SummaryView"] for r in json.loads(proc.stdout)["CodeRegions"]}

    results = []
    print(f"{'form':<16}{'LMUL':>5}{'llvm-mca':>10}{'X280':>8}{'ratio':>8}")
    for n, (form, lmul) in enumerate(cases):
        s = regions[f"c{n}"]
        predicted = s["TotalCycles"] / (s["Iterations"] * COPIES)
        measured = table[rows[form]][f"e32m{lmul}"]
        ratio = predicted / measured if measured else float("inf")
        results.append({"form": form, "row": rows[form], "lmul": lmul, "sew": 32,
                        "mca_rthroughput": round(predicted, 3), "measured": measured,
                        "ratio": round(ratio, 3)})
        print(f"{form:<16}{'m' + str(lmul):>5}{predicted:>10.2f}{measured:>8.2f}{ratio:>8.2f}")

    ratios = [r["ratio"] for r in results]
    within = sum(1 for r in ratios if 0.5 <= r <= 2.0) / len(ratios)
    rho = spearman([r["mca_rthroughput"] for r in results], [r["measured"] for r in results])
    by_lmul = {f"m{lm}": round(statistics.median(r["ratio"] for r in results
                                                 if r["lmul"] == lm), 3) for lm in LMULS}
    worst = sorted(results, key=lambda r: -abs(math.log(r["ratio"])))[:5]
    summary = {"cases": len(results), "forms": len({r["form"] for r in results}),
               "median_ratio": round(statistics.median(ratios), 3),
               "within_2x": round(within, 3), "spearman": round(rho, 3),
               "median_ratio_by_lmul": by_lmul,
               "worst": [f"{r['form']} m{r['lmul']}: {r['mca_rthroughput']} vs {r['measured']}"
                         for r in worst],
               "forms_not_on_page": missing}
    print(f"\n{summary['cases']} cases ({summary['forms']} forms x LMUL m1..m8, e32): "
          f"median llvm-mca/X280 = {summary['median_ratio']}, within 2x: "
          f"{100 * within:.0f}%, Spearman rho = {summary['spearman']}")
    print(f"median ratio by LMUL: {by_lmul}")
    print("largest misses: " + "; ".join(summary["worst"]))
    versions = tc.versions()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": "llvm-mca-19 -mcpu=sifive-x280",
                                    "measured": "rvv-bench sifive_x280 tblMaa (vl=VLMAX, ta ma)",
                                    "llvm_mca": versions.get("mca", "?"),
                                    "copies": COPIES, "iterations": ITERATIONS,
                                    "summary": summary, "results": results}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
