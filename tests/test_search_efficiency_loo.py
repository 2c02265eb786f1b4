"""The leave-one-out mode of benchmarks/search_efficiency.py: a held-out space's variant is
chosen on the other kernel families only, and spaces are grouped into families."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

from tests._data import recorded

ROOT = Path(__file__).resolve().parents[1]


def bench():
    spec = importlib.util.spec_from_file_location(
        "search_efficiency", ROOT / "benchmarks" / "search_efficiency.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("search_efficiency", mod)
    spec.loader.exec_module(mod)
    return mod


def test_the_held_out_family_never_chooses_its_variant():
    se = bench()
    facts = {s: {"family": s.split("/")[0], "random": {"0.95": {"median": 100.0}}}
             for s in ("a/1", "a/2", "b/1", "c/1")}

    def runs(t95: int) -> dict[str, dict]:
        return {str(seed): {"cold": {"t95": t95}, "budget": 200} for seed in range(3)}

    # "tuned_on_a" is excellent on family a and poor elsewhere; "general" the reverse
    doc = {"runs": {
        "tuned_on_a": {"a/1": runs(2), "a/2": runs(2), "b/1": runs(90), "c/1": runs(90)},
        "general": {"a/1": runs(50), "a/2": runs(50), "b/1": runs(20), "c/1": runs(20)}}}
    variants = ["tuned_on_a", "general"]
    assert se.loo_choice(doc, facts, variants, "a/1", 3, 200) == "general"
    assert se.loo_choice(doc, facts, variants, "b/1", 3, 200) == "tuned_on_a"
    assert se.loo_runs(doc, "general", "b/1", 3, 10) == [11, 11, 11]  # missed within 10


def test_a_missed_run_is_never_within_the_budget():
    """Misses count as budget + 1: with a budget under 100 (or 20, warm) they once counted as
    within 95% by 100 (by 20), so a budget-20 run that missed scored 100%."""
    se = bench()
    facts = {"a/1": {"family": "a", "size": 10,
                     "random": {"0.95": {"median": 30.0, "mean": 40.0}}}}
    doc = {"runs": {"model": {"a/1": {
        "0": {"budget": 10, "cold": {"t95": 4}, "warm": {"t95": 2}},
        "1": {"budget": 10, "cold": {"t95": None}, "warm": {"t95": None}}}}}}
    table = "\n".join(se.loo_table(doc, facts, lambda _s: "model", 2, 10))
    assert "within 95% by 10 |" in table and "| 50% |" in table
    assert "cold runs within 95% by trial 10: **50%**" in table
    assert "warm runs within 95% by trial 10: **50%**" in table


def test_spaces_are_grouped_by_kernel_family(tmp_path):
    se = bench()
    (tmp_path / "pnpoly").mkdir()
    shutil.copy(recorded("pnpoly/RTX_2080_Ti.json.gz"), tmp_path / "pnpoly" / "A.json.gz")
    shutil.copy(recorded("pnpoly/RTX_2080_Ti.json.gz"), tmp_path / "loose.json.gz")
    found = se.loo_spaces([tmp_path])
    assert found["pnpoly/A"][0] == "pnpoly"
    assert found["cn_pnpoly/loose"][0] == "cn_pnpoly"  # a file in the root: its kernel name


def test_plain_json_spaces_are_found_and_space_definitions_are_not(tmp_path):
    """A recorded space may be plain JSON (an unzipped cache, T4 results); the T1 definitions
    in space_definitions/ beside the data are not spaces."""
    import gzip

    se = bench()
    (tmp_path / "pnpoly").mkdir()
    (tmp_path / "space_definitions").mkdir()
    data = gzip.decompress(recorded("pnpoly/RTX_2080_Ti.json.gz").read_bytes())
    (tmp_path / "pnpoly" / "B.json").write_bytes(data)
    shutil.copy(recorded("pnpoly/RTX_2080_Ti.json.gz"), tmp_path / "pnpoly" / "A.json.gz")
    shutil.copy(recorded("space_definitions/pnpoly.json"), tmp_path / "space_definitions")
    assert sorted(se.loo_spaces([tmp_path])) == ["pnpoly/A", "pnpoly/B"]
    assert sorted(se.find_spaces(tmp_path, ["*"])) == ["pnpoly/A", "pnpoly/B"]


def test_siblings_by_kernel_join_the_versions_of_one_kernels_space(tmp_path):
    """convolution/ and convolution_kt/ record one kernel under two spaces: by folder they are
    two groups, by kernel name (as the database sees them) one."""
    se = bench()
    for folder, gpu in (("convolution", "A4000"), ("convolution_kt", "RTX_3090"),
                        ("pnpoly", "RTX_2080_Ti")):
        (tmp_path / folder).mkdir()
        shutil.copy(recorded(f"{folder}/{gpu}.json.gz"), tmp_path / folder / f"{gpu}.json.gz")
    found = se.loo_spaces([tmp_path])
    assert sorted(se.loo_families(found)) == ["convolution", "convolution_kt", "pnpoly"]
    by_kernel = se.loo_families(found, "kernel")
    assert sorted(by_kernel) == ["cn_pnpoly", "convolution_kernel"]
    assert [s for s, _ in by_kernel["convolution_kernel"]] == [
        "convolution/A4000", "convolution_kt/RTX_3090"]


def test_the_comparison_reads_each_strategy_at_its_own_budget():
    se = bench()
    facts = {s: {"family": s.split("/")[0], "random": {"0.95": {"median": 100.0}}}
             for s in ("a/1", "b/1")}

    def runs(t95: int | None, budget: int) -> dict[str, dict]:
        return {str(seed): {"t95": t95, "budget": budget} for seed in range(3)}

    doc = {
        "loo": {"runs": {"model": {
            s: {str(seed): {"cold": {"t95": t}, "warm": {"t95": 2}, "budget": 200}
                for seed in range(3)} for s, t in (("a/1", 10), ("b/1", 40))}}},
        "runs": {
            "a/1": {"random": runs(150, 200), "kt:pso": runs(20, 100)},
            # a Kernel Tuner run of another budget is another run: not read at budget 100
            "b/1": {"random": runs(30, 200), "kt:pso": runs(5, 200)},
        }}
    # a tunex strategy's longer run is read up to the budget (a miss counts as budget + 1)
    assert se.compare_runs(doc, "a/1", "random", 3, 100) == [101, 101, 101]
    assert se.compare_runs(doc, "b/1", "kt:pso", 3, 100) == []
    table = "\n".join(se.loo_compare_table(doc, facts, "model", ["random", "kt:pso"], 3, 100))
    assert "| a/1 | 100 | 3 | **10** | 2 | >100 | 20 | model | yes |" in table
    assert "| b/1 | 100 | 3 | **40** | 2 | 30 | - | random | no |" in table
    assert "on **1 of 2 spaces (50%)**" in table
    # each space's best median picked after the fact: a/1 model's 10, b/1 random's 30
    assert "would be **6.7x** (`model` alone: 6.2x)" in table


def test_the_comparison_tests_run_by_run_which_strategies_are_significantly_faster():
    se = bench()
    facts = {s: {"family": s.split("/")[0], "random": {"0.95": {"median": 100.0}}}
             for s in ("a/1", "b/1")}

    def runs(t95s: list[int]) -> dict[str, dict]:
        return {str(seed): {"t95": t, "budget": 100} for seed, t in enumerate(t95s)}

    slow, fast = [40, 41, 42, 43, 44], [10, 11, 12, 13, 14]
    doc = {
        "loo": {"runs": {"model": {
            "a/1": {str(s): {"cold": {"t95": t}, "budget": 100} for s, t in enumerate(slow)},
            "b/1": {str(s): {"cold": {"t95": t}, "budget": 100} for s, t in enumerate(fast)}}}},
        "runs": {
            # a/1: random always faster than model, kt:pso the same runs as model
            "a/1": {"random": runs(fast), "kt:pso": runs(slow)},
            # b/1: one lucky run of random, the rest slow: neither is significantly faster
            "b/1": {"random": runs([5, 60, 61, 62, 63]), "kt:pso": runs([12, 12, 12, 12, 12])},
            # c/1: kt:pso faster at p = 0.028, which two tests on one space do not hold up
            "c/1": {"random": runs(slow), "kt:pso": runs([39, 39, 41, 41, 10])},
        }}
    doc["loo"]["runs"]["model"]["c/1"] = doc["loo"]["runs"]["model"]["a/1"]
    facts["c/1"] = {"family": "c", "random": {"0.95": {"median": 100.0}}}
    table = "\n".join(se.loo_compare_table(doc, facts, "model", ["random", "kt:pso"], 5, 100))
    assert "| a/1 |" in table and table.split("| a/1 |")[1].split("\n")[0].endswith(
        "| no | random |")
    assert table.split("| b/1 |")[1].split("\n")[0].endswith("| - |")
    assert table.split("| c/1 |")[1].split("\n")[0].endswith("| - (kt:pso) |")
    assert ("significantly faster than cold `model` on **2 of 3 spaces (67%)**; without the "
            "correction on 1 (33%)") in table
    assert "random 0 / 1, kt:pso 0 / 1" in table  # model significantly faster / slower


def test_holm_rejects_step_down_and_stops_at_the_first_that_holds():
    se = bench()
    assert se.holm({"a": 0.01, "b": 0.02, "c": 0.06}) == {"a", "b"}  # 0.01 < .05 / 3, .02 < .05 / 2
    assert se.holm({"a": 0.01, "b": 0.02, "c": 0.04}) == {"a", "b", "c"}
    assert se.holm({"a": 0.02, "b": 0.001}) == {"a", "b"}
    assert se.holm({"a": 0.03, "b": 0.03}) == set()  # 0.03 >= 0.025: nothing after it either
    assert se.holm({"a": 0.04}) == {"a"} and se.holm({}) == set()


def test_the_cold_cache_keys_sources_by_the_default_models_options(tmp_path, monkeypatch):
    """Warm-only screens read their siblings' cold searches from a cache; a changed default of
    the model strategy (it changes those searches) must not read the old default's."""
    se = bench()
    from tunex.search._model import ModelSearch

    members = [("pnpoly/A", str(recorded("pnpoly/RTX_2080_Ti.json.gz"))),
               ("pnpoly/B", str(recorded("pnpoly/RTX_3060_laptop.json.gz")))]
    before = se.cold_cache_path(tmp_path, members, 3, 100)
    assert before == se.cold_cache_path(tmp_path, members, 3, 100)  # stable
    assert before.parent == tmp_path and before.name.startswith("pnpoly-seed3-budget100-")
    assert before != se.cold_cache_path(tmp_path, members, 4, 100)
    import inspect

    sig = inspect.signature(ModelSearch.__init__)

    def with_default(name: str, value: object):  # the same signature but one default
        def init(self, *a, **kw):
            raise AssertionError("not called")

        init.__signature__ = sig.replace(parameters=[  # type: ignore[attr-defined]
            p.replace(default=value) if p.name == name else p for p in sig.parameters.values()])
        return init

    monkeypatch.setattr(ModelSearch, "__init__", with_default("local_moves", "region"))
    assert se.cold_cache_path(tmp_path, members, 3, 100) == before  # the actual default
    monkeypatch.setattr(ModelSearch, "__init__", with_default("local_moves", "any"))
    assert se.cold_cache_path(tmp_path, members, 3, 100) != before


def test_warm_only_sources_run_to_the_source_budget_past_the_budget():
    """--no-cold with --source-budget above --budget: the siblings' cold searches run to the
    source budget (they were cut at --budget, so a larger source budget changed nothing)."""
    se = bench()
    from tunex.targets.replay import ReplayTarget

    members = [("pnpoly/A", str(recorded("pnpoly/RTX_2080_Ti.json.gz"))),
               ("pnpoly/B", str(recorded("pnpoly/RTX_3060_laptop.json.gz")))]
    optima = {s: ReplayTarget(Path(p)).optimum() for s, p in members}
    out = se.run_loo_warm(members, 0, 4, 9, {"base": "{}"}, optima, warm_budget=3)
    for space in ("pnpoly/A", "pnpoly/B"):
        assert out["base"][space]["cold_default"]["trials"] == 9  # the sources' length
        assert out["base"][space]["warm"]["trials"] == 3


def test_warm_sources_are_the_siblings_other_kernels_or_both():
    """--sources: a warm search starts from its siblings (default), from the spaces of other
    kernels whose parameters include more than half of its own (other-kernels), or from both;
    a kernel whose parameters the other one does not share is no source."""
    se = bench()
    from tunex.targets.replay import ReplayTarget

    data = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
    members = [("matmul/a", str(data / "matmul_H200_1024x1024x1024.json.gz")),
               ("matmul/b", str(data / "matmul_H200_4096x4096x4096.json.gz"))]
    related = [[("matmul_tma/a", str(data / "matmul_tma_H200_1024x1024x1024.json.gz"))],
               [("pnpoly/a", str(recorded("pnpoly/RTX_2080_Ti.json.gz")))]]
    optima = {s: ReplayTarget(Path(p)).optimum() for s, p in members + [m for g in related
                                                                         for m in g]}
    runs = {mode: se.run_loo_warm(members, 0, 3, 3, {"base": "{}"}, optima, warm_budget=2,
                                  related=None if mode == "siblings" else related,
                                  with_siblings=mode == "both")["base"]
            for mode in ("siblings", "other-kernels", "both")}
    assert runs["siblings"]["matmul/a"]["warm"]["sources"] == ["matmul/b"]
    assert runs["other-kernels"]["matmul/a"]["warm"]["sources"] == ["matmul_tma/a"]
    assert runs["both"]["matmul/a"]["warm"]["sources"] == ["matmul/b", "matmul_tma/a"]
    assert runs["both"]["matmul/b"]["warm"]["trials"] == 2


def test_prior_sources_are_the_shipped_prior_less_the_spaces_own_kernel():
    """--sources prior: a first search through the Tuner with tunex's prior less the held-out
    space's kernel (a matmul sees matmul_tma and flash attention, never a matmul); a space
    on a device the prior does not hold has no run."""
    se = bench()
    from tunex.targets.replay import ReplayTarget

    data = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
    members = [("matmul/a", str(data / "matmul_H200_1024x1024x1024.json.gz")),
               ("pnpoly/a", str(recorded("pnpoly/RTX_2080_Ti.json.gz")))]
    optima = {s: ReplayTarget(Path(p)).optimum() for s, p in members}
    out = se.run_loo_warm(members, 0, 3, 3, {"base": "{}"}, optima, warm_budget=2,
                          prior=True)["base"]
    assert set(out) == {"matmul/a"}
    rec = out["matmul/a"]["warm"]
    assert rec["trials"] == 2 and rec["sources"] and not any(
        s.startswith("matmul ") for s in rec["sources"])
    assert {s.split()[0] for s in rec["sources"]} == {"flash_attention", "matmul_tma"}
    assert rec["transfer"]["prior"]["kernels"] == ["flash_attention", "matmul_tma"]
    assert se.prior_code().startswith("prior:")
    # --sources prior-space: less the held-out recording only; pnpoly on the RTX 2080 Ti
    # starts from the shipped search of pnpoly on the RTX 3060 laptop, never from its own
    out = se.run_loo_warm(members[1:], 0, 3, 3, {"base": "{}"}, optima, warm_budget=2,
                          prior=True, prior_space=True)["base"]
    assert out["pnpoly/a"]["warm"]["sources"] == ["cn_pnpoly {'problem_size': 20000000}"]
    assert out["pnpoly/a"]["warm"]["transfer"]["prior"]["workloads"] == 1


def test_the_patience_report_stops_each_run_where_the_tuner_would():
    """A run's recorded bests at trials 1, 5 (a 0.5% gain: not a gain to patience), 12 and 40:
    patience 10 stops at 11 (ten trials after the first), 12 at 24 (twelve after the gain at
    12), 30 and none at the budget; the report scores each against the optimum."""
    se = bench()
    run = [[1, 2.0], [5, 1.99], [12, 1.5], [40, 1.0]]
    assert se.stopped_at(run, 10, 50) == (11, 1.99)
    assert se.stopped_at(run, 12, 50) == (24, 1.5)
    assert se.stopped_at(run, 30, 50) == se.stopped_at(run, None, 50) == (50, 1.0)
    assert se.stopped_at(run, 30, 20) == (20, 1.5)  # the budget first
    doc = {"facts": {"a/1": {"optimum": 1.0}},
           "runs": {"model": {"a/1": {"0": {"cold": {"improvements": run, "trials": 100}}}}}}
    table = se.loo_patience_report(doc, "model", 50, (10, 12, None))
    assert "| cold | 10 | 1 | 0.5025 | 1 | 11.0 |" in table
    assert "| cold | 12 | 1 | 0.6667 | 1 | 24.0 |" in table
    assert "| cold | none | 1 | 1.0000 | 0 | 50.0 |" in table


def test_loo_paired_sums_and_pairs_stored_runs(tmp_path, capsys):
    """benchmarks/loo_paired.py: a miss counts as budget + 1, runs are paired by space and
    seed, a later --base file adds only what the earlier lack, and the summary reads random's
    expectation from the files' facts."""
    import gzip
    import json

    spec = importlib.util.spec_from_file_location(
        "loo_paired", Path(__file__).resolve().parents[1] / "benchmarks" / "loo_paired.py")
    assert spec and spec.loader
    lp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lp)
    facts = {"f/a": {"random": {"0.95": {"mean": 20.0, "median": 16.0}}},
             "f/b": {"random": {"0.95": {"mean": 10.0, "median": 8.0}}}}

    def write(name, variant, runs, gz=False):
        doc = {"loo": {"facts": facts, "runs": {variant: {
            sp: {str(s): {"cold": {"t95": t}} for s, t in seeds.items()}
            for sp, seeds in runs.items()}}}}
        path = tmp_path / name
        raw = json.dumps(doc).encode()
        path.write_bytes(gzip.compress(raw) if gz else raw)
        return f"{path}:{variant}"

    base = write("b.json.gz", "m", {"f/a": {0: 8, 1: None}}, gz=True)
    more = write("c.json", "m", {"f/a": {0: 99}, "f/b": {0: 20, 1: 20}})
    var = write("v.json", "x", {"f/a": {0: 4, 1: 101}, "f/b": {0: 40}})
    assert lp.main(["--base", base, "--base", more, "--variant", var]) == 0
    out = capsys.readouterr().out
    # pairs: a 8 -> 4 (+1), a miss -> 101 (0), b 20 -> 40 (-1): mean 0, one faster, one slower
    assert "3 paired runs: mean log2 +0.000" in out and "faster 1 / slower 1" in out
    assert "base 2, variant 2" in out  # within 95% by 100
    assert lp.main(["--base", base, "--base", more]) == 0
    out = capsys.readouterr().out
    # a: median of (8, 101) 54.5, mean 54.5 > 1.2 x 20; b: 20 (mean 20 > 1.2 x 10)
    assert "2 spaces" in out and "within 95% by 100: 3 of 4 runs" in out
    assert "f/a (2.73, 2 runs)" in out and "f/b (2.00, 2 runs)" in out
    assert lp.main(["--base", base, "--seeds", "1"]) == 0
    assert "1 of 1 runs" in capsys.readouterr().out
    # a --no-cold file: NAME/warm reads its warm runs, NAME its cold ones, paired seed by seed
    doc = {"loo": {"facts": facts, "runs": {"m": {"f/a": {
        "0": {"cold_default": {"t95": 40}, "warm": {"t95": 10}},
        "1": {"cold_default": {"t95": 10}, "warm": {"t95": None}}}}}}}
    (tmp_path / "w.json").write_text(json.dumps(doc))
    w = f"{tmp_path / 'w.json'}"
    assert lp.main(["--base", f"{w}:m", "--variant", f"{w}:m/warm"]) == 0
    out = capsys.readouterr().out  # 40 -> 10 (+2), 10 -> a miss, 101 (-3.34)
    assert "2 paired runs: mean log2 -0.668" in out and "faster 1 / slower 1" in out
    assert "by 20: base 1, variant 1" in out


def test_random_mean_tail_is_the_exact_law_of_uniform_sampling():
    """The chance that uniform sampling's mean over n runs reaches a level: one run's is the
    product rule of drawing without replacement; n runs' agrees with a simulation; a miss
    counts as the cap; more runs make 1.2x its own expectation rarer."""
    import numpy as np

    se = bench()
    # one run, 48 points, 10 hits: P(T >= 2) = P(first draw misses) = 38 / 48
    assert abs(se.random_mean_tail(48, 10, 1, 2, 101) - 38 / 48) < 1e-12
    assert abs(se.random_mean_tail(48, 10, 1, 1, 101) - 1.0) < 1e-12
    # the cap: every run that has not hit by draw 6 counts 6, so a mean above 6 is impossible
    assert se.random_mean_tail(640, 96, 5, 6.2, 6) == 0.0
    rng = np.random.default_rng(0)
    draws = np.argsort(rng.random((40_000 * 5, 60)), axis=1)[:, :6] < 3
    t = np.where(draws.any(1), draws.argmax(1) + 1, 6).reshape(-1, 5).mean(1)
    assert abs(se.random_mean_tail(60, 3, 5, 4.4, 6) - float((t >= 4.4 - 1e-9).mean())) < 0.01
    e = 49 / 11  # random's expectation on 48 points with 10 hits
    p20, p80 = (se.random_mean_tail(48, 10, n, 1.2 * e, 101) for n in (20, 80))
    assert 0.1 < p20 < 0.2 and p80 < p20 / 3


def test_loo_paired_gives_each_easy_breach_its_chance_under_uniform_sampling(tmp_path, capsys):
    import json

    spec = importlib.util.spec_from_file_location(
        "loo_paired", Path(__file__).resolve().parents[1] / "benchmarks" / "loo_paired.py")
    assert spec and spec.loader
    lp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lp)
    e = 49 / 11
    facts = {"f/a": {"size": 48, "within": {"0.95": 10},
                     "random": {"0.95": {"mean": e, "median": 4.0}}}}
    doc = {"loo": {"facts": facts, "runs": {"m": {"f/a": {
        str(s): {"cold": {"t95": 9}} for s in range(20)}}}}}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert lp.main(["--base", f"{tmp_path / 'r.json'}:m"]) == 0
    out = capsys.readouterr().out
    got = re.search(r"f/a \(2\.02, 20 runs, p ([0-9.e+-]+)\)", out)
    assert got and float(got.group(1)) < 1e-4  # 9 trials every run: far above uniform sampling
    assert "over 1.2x on 0.1 of these 1 easy spaces" in out


def test_loo_paired_composes_a_variant_by_space_size(tmp_path, capsys):
    """--variant-up-to N: the variant's runs on spaces of at most N points, the base's on
    larger ones, so a change applied by size is scored from runs made without the rule."""
    import json

    spec = importlib.util.spec_from_file_location(
        "loo_paired", Path(__file__).resolve().parents[1] / "benchmarks" / "loo_paired.py")
    assert spec and spec.loader
    lp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lp)
    facts = {"f/small": {"size": 48, "random": {"0.95": {"mean": 5.0, "median": 4.0}}},
             "f/large": {"size": 9000, "random": {"0.95": {"mean": 500.0, "median": 400.0}}}}

    def write(name, variant, small, large):
        doc = {"loo": {"facts": facts, "runs": {variant: {
            "f/small": {"0": {"cold": {"t95": small}}},
            "f/large": {"0": {"cold": {"t95": large}}}}}}}
        (tmp_path / name).write_text(json.dumps(doc))
        return f"{tmp_path / name}:{variant}"

    base, var = write("b.json", "m", 8, 40), write("v.json", "x", 4, 80)
    assert lp.main(["--base", base, "--variant", var]) == 0
    assert "2 paired runs: mean log2 +0.000" in capsys.readouterr().out  # +1 and -1
    assert lp.main(["--base", base, "--variant", var, "--variant-up-to", "2000"]) == 0
    out = capsys.readouterr().out  # the small space's +1, the large one's base against itself
    assert "2 paired runs: mean log2 +0.500" in out and "faster 1 / slower 0" in out
    # --variant repeats as --base does: the runs of several files together
    def other(name, variant, t95):
        doc = {"loo": {"facts": {"g/other": facts["f/small"]},
                       "runs": {variant: {"g/other": {"0": {"cold": {"t95": t95}}}}}}}
        (tmp_path / name).write_text(json.dumps(doc))
        return f"{tmp_path / name}:{variant}"

    b2, v2 = other("b2.json", "m", 8), other("v2.json", "x", 2)
    assert lp.main(["--base", base, "--base", b2, "--variant", var, "--variant", v2]) == 0
    out = capsys.readouterr().out
    assert "3 paired runs" in out and "faster 2 / slower 1" in out


def test_batch_asks_that_many_configs_before_any_is_measured(monkeypatch):
    """--batch N: the loop asks the strategy for N configs at once, ahead of their results, as
    a search with N build workers does (it asked for one at a time whatever --batch said)."""
    se = bench()
    from tunex.search._model import ModelSearch
    from tunex.targets.replay import ReplayTarget

    path = recorded("pnpoly/RTX_2080_Ti.json.gz")
    asked: list[int] = []
    real = ModelSearch.ask
    monkeypatch.setattr(ModelSearch, "ask", lambda self, n=1: asked.append(n) or real(self, n))
    try:
        se.set_in_flight(6)
        rec = se.run_tunex(path, "model", 0, 12, ReplayTarget(path).optimum())
    finally:
        se.set_in_flight(1)
    assert rec["trials"] == 12 and asked[:2] == [6, 6]


def test_chained_sources_warm_start_each_sibling_from_those_before_it():
    """--sources chained: the siblings as the decorator records them, each tuned warm from
    those before it; the second one's first two trials are its model's best config and the
    first one's best (the race of a warm start's first proposals)."""
    se = bench()
    from tunex.targets.replay import ReplayTarget

    members = [("pnpoly/A", str(recorded("pnpoly/RTX_2080_Ti.json.gz"))),
               ("pnpoly/B", str(recorded("pnpoly/RTX_3060_laptop.json.gz")))]
    optima = {s: ReplayTarget(Path(p)).optimum() for s, p in members}
    out = se.loo_chained(members, 0, 6, optima)
    first = [m for m in out["pnpoly/A"]["_measurements"] if m.ok]
    assert len(out["pnpoly/B"]["_measurements"]) == 6
    assert min(first, key=lambda m: m.value).config in [
        m.config for m in out["pnpoly/B"]["_measurements"][:2]]


def test_a_results_file_named_gz_is_gzipped_and_either_kind_reads_back(tmp_path):
    """``--out runs.json.gz`` writes gzip (a file so named that is plain JSON trips every
    reader that trusts the name); a plain or gzip'd file of either name reads back."""
    se = bench()
    for name in ("runs.json.gz", "runs.json"):
        path = tmp_path / name
        r = se.Results(path)
        r.put_run("pnpoly/A", "model", 3, {"trials": 7})
        r.save()
        raw = path.read_bytes()
        assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")
        assert se.Results(path).run("pnpoly/A", "model", 3) == {"trials": 7}
    (tmp_path / "plain.json.gz").write_bytes((tmp_path / "runs.json").read_bytes())
    assert se.Results(tmp_path / "plain.json.gz").run("pnpoly/A", "model", 3) == {"trials": 7}
