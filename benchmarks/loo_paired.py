"""Stored leave-one-out runs compared run for run, and summed over spaces.

The cold runs of ``search_efficiency.py --loo`` are kept in JSON files (``--out``) keyed by
variant, space and seed. This reads them back:

    # R=benchmarks/results/loo_compare. The default's cold runs (gathered from several
    # files) against a variant's, paired by space and seed: mean log2(default's trials /
    # variant's) to 95% (> 0: the variant is faster; a miss counts as budget + 1), runs
    # faster / slower, Wilcoxon's signed-rank p, runs within 95% by the budget, and the mean
    # log2 per family
    python benchmarks/loo_paired.py \
        --base R/cold_t40_seeds0-9.json.gz:t40 \
        --base R/heldout_softmax_c_riscv_seeds0-39.json.gz:model \
        --variant R/cold_alternate_design_47spaces_seeds0-9.json.gz:alt \
        --seeds 10

    # without --variant: the base's median over spaces of random's median trials to 95% over
    # its own, its runs within 95% by the budget, and its easy spaces (random expects at most
    # 50 trials) whose mean trials exceed 1.2x random's expectation (the facts of each space
    # are read from the first file that holds them), each with p, the chance that uniform
    # sampling's mean over as many runs is as high, and how many easy spaces uniform sampling
    # itself would put over 1.2x at these run counts (expected count)

    # --variant-up-to 2000: the variant's runs on spaces of at most 2,000 valid points, the
    # base's elsewhere (a change applied by space size, composed from the stored runs)

    # a --no-cold file's warm runs against its own cold ones (each space's prior, siblings,
    # ... against the same seed's cold search): NAME/warm
    python benchmarks/loo_paired.py --base R/kt_prior_top20_seeds0-19.json.gz:model \
        --variant R/kt_prior_top20_seeds0-19.json.gz:model/warm

``FILE:NAME`` names a file and the variant stored in it (``NAME/warm``: its warm runs, not its
cold ones); a later ``--base`` file adds spaces (or seeds) the earlier ones lack and does not
replace runs they have.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any


def read(spec: str) -> tuple[dict[str, Any], dict[tuple[str, int], int | None]]:
    """``FILE:NAME`` -> (the file's facts per space, ``{(space, seed): trials to 95%}``)."""
    path, _, name = spec.rpartition(":")
    name, _, part = name.partition("/")
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise SystemExit(f"{spec}: cannot read {path!r} ({e.strerror}); give FILE:NAME, the "
                         "--out file of a search_efficiency.py --loo run and a variant in it"
                         ) from None
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["loo"]
    if name not in doc["runs"]:
        raise SystemExit(f"{path}: no variant {name!r} (it holds {sorted(doc['runs'])})")
    runs = {}
    for space, seeds in doc["runs"][name].items():
        for seed, rec in seeds.items():
            cold = rec.get("warm") if part == "warm" else (rec.get("cold")
                                                           or rec.get("cold_default"))
            if cold is not None:
                t = cold.get("t95")
                runs[(space, int(seed))] = None if t in (None, "None") else int(t)
    return doc.get("facts", {}), runs


def gather(specs: list[str], seeds: int | None) -> tuple[dict[str, Any], dict[tuple[str, int],
                                                                          int | None]]:
    facts: dict[str, Any] = {}
    runs: dict[tuple[str, int], int | None] = {}
    for spec in specs:
        f, r = read(spec)
        for k, v in f.items():
            facts.setdefault(k, v)
        for k, v in r.items():
            if seeds is None or k[1] < seeds:
                runs.setdefault(k, v)
    return facts, runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", action="append", required=True, metavar="FILE:NAME")
    p.add_argument("--variant", action="append", metavar="FILE:NAME",
                   help="repeatable, as --base: the runs of several files taken together")
    p.add_argument("--seeds", type=int, default=None, help="only seeds below this")
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--variant-up-to", type=int, default=None, metavar="POINTS",
                   help="take the variant's runs only on spaces of at most this many valid "
                        "points, the base's elsewhere (a rule by space size, composed from "
                        "stored runs)")
    args = p.parse_args(argv)
    facts, base = gather(args.base, args.seeds)
    miss = args.budget + 1

    def t(x: int | None) -> int:
        return miss if x is None else x

    if args.variant:
        _, var = gather(args.variant, args.seeds)
        keys = sorted(k for k in var if k in base)
        if args.variant_up_to is not None:
            sizes = {s: facts.get(s, {}).get("size") for s, _ in keys}
            if None in sizes.values():
                raise SystemExit("--variant-up-to: the base files give no space size for "
                                 f"{sorted(s for s, n in sizes.items() if n is None)[:3]}")
            var = {k: var[k] if sizes[k[0]] <= args.variant_up_to else base[k] for k in keys}
        if not keys:
            raise SystemExit("no (space, seed) in both the base and the variant")
        d = [math.log2(t(base[k]) / t(var[k])) for k in keys]
        nz = [x for x in d if x]
        from scipy.stats import wilcoxon

        pval = float(wilcoxon(nz).pvalue) if nz else 1.0
        print(f"{len(keys)} paired runs: mean log2 {statistics.fmean(d):+.3f} (> 0: the "
              f"variant faster), faster {sum(x > 0 for x in d)} / slower "
              f"{sum(x < 0 for x in d)}, Wilcoxon p {pval:.2g}; within 95% by "
              f"{args.budget}: base {sum(t(base[k]) <= args.budget for k in keys)}, variant "
              f"{sum(t(var[k]) <= args.budget for k in keys)}; by 20: base "
              f"{sum(t(base[k]) <= 20 for k in keys)}, variant "
              f"{sum(t(var[k]) <= 20 for k in keys)}")
        fams: dict[str, list[float]] = {}
        for k, x in zip(keys, d):
            fams.setdefault(k[0].split("/")[0], []).append(x)
        for fam, xs in sorted(fams.items()):
            print(f"  {fam:20s} {len(xs):4d} runs  mean log2 {statistics.fmean(xs):+.3f}")
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from search_efficiency import easy_odds  # here, not at the top: it brings tunex in

    spaces = sorted({s for s, _ in base})
    ratios, easy, within, n = [], [], 0, 0
    n_easy, floor = 0, 0.0  # uniform sampling's own expected breaches of the easy-space rule
    for s in spaces:
        ts = [t(v) for (sp, _), v in base.items() if sp == s]
        rnd = facts.get(s, {}).get("random", {}).get("0.95")
        within += sum(x <= args.budget for x in ts)
        n += len(ts)
        if not rnd:
            print(f"  {s}: no facts (random's expectation) in the base files")
            continue
        ratios.append(rnd["median"] / statistics.median(ts))
        size, good = facts[s].get("size"), facts[s].get("within", {}).get("0.95")
        p = None
        if rnd["mean"] <= 50 and size and good:
            n_easy += 1
            p, breach = easy_odds(size, good, ts, miss)
            floor += breach
        if rnd["mean"] <= 50 and statistics.fmean(ts) / rnd["mean"] > 1.2:
            easy.append(f"{s} ({statistics.fmean(ts) / rnd['mean']:.2f}, {len(ts)} runs"
                        + (f", p {p:.2g})" if p is not None else ")"))
    print(f"{len(spaces)} spaces: median x random {statistics.median(ratios):.2f}x; within 95% "
          f"by {args.budget}: {within} of {n} runs; easy spaces over 1.2x random's "
          f"expectation: {', '.join(easy) or 'none'}"
          + (f" (p: the chance that uniform sampling's mean over as many runs is as high; "
             f"uniform sampling itself would be over 1.2x on {floor:.1f} of these {n_easy} "
             "easy spaces, expected count)" if n_easy else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
