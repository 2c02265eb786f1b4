"""Kernel Tuner files: cache -> tunex -> cache round trip, T4 results, and the command line."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from tests._data import recorded
from tunex.cli import main
from tunex.db import Database
from tunex.errors import TunexError
from tunex.interop import export_cache, export_t4, import_cache, is_cache
from tunex.targets.replay import ReplayTarget
from tunex.trial import Status
from tunex.tuner import Tuner

T4_INVALIDITY = {"timeout", "compile", "runtime", "correctness", "constraints", "correct"}


def load(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


@pytest.mark.parametrize("rel", ["convolution/A100.json.gz", "gemm_clblast/RTX_Titan.json.gz",
                                 "pnpoly/RTX_2080_Ti.json.gz"])
def test_cache_round_trip_keeps_configs_and_times(tmp_path: Path, rel: str) -> None:
    src = recorded(rel)
    original = load(src)
    with Database(tmp_path / "kt.db") as db:
        workload, n = import_cache(db, src)
        assert n == len(original["cache"]) == db.count(workload)
        assert import_cache(db, src)[1] == 0  # nothing twice
        out = tmp_path / "back.json.gz"
        assert export_cache(db, workload, out) == n
    back = load(out)
    for key in ("device_name", "kernel_name", "problem_size", "tune_params_keys",
                "tune_params"):
        assert back[key] == original[key], key
    assert set(back["cache"]) == set(original["cache"])  # same configs, same cache keys
    for key, entry in original["cache"].items():
        got = back["cache"][key]
        assert {k: got[k] for k in original["tune_params_keys"]} == {
            k: entry[k] for k in original["tune_params_keys"]}
        if isinstance(entry["time"], str):
            assert got["time"] == entry["time"]  # the same failure
        else:
            assert got["time"] == pytest.approx(entry["time"], rel=1e-12)
            assert got["times"] == entry["times"]
        assert got["compile_time"] == entry["compile_time"]
        assert got["timestamp"] == entry.get("timestamp", got["timestamp"])


def test_a_cache_copied_or_touched_is_not_imported_twice(tmp_path: Path) -> None:
    """A Kernel Tuner entry has no time of its own (an import stamps it from the file's mtime):
    the same file touched, or copied to where it was, holds the same trials."""
    import os
    import shutil

    original = load(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    src = tmp_path / "pnpoly.json"
    src.write_text(json.dumps(original))
    with Database(tmp_path / "kt.db") as db:
        workload, n = import_cache(db, src)
        st = src.stat()
        os.utime(src, (st.st_atime, st.st_mtime + 3600))
        assert import_cache(db, src)[1] == 0
        (tmp_path / "copy").mkdir()
        shutil.copy(src, tmp_path / "copy" / src.name)  # a download of the same file
        assert import_cache(db, tmp_path / "copy" / src.name)[1] == 0
        assert db.count(workload) == n


def test_imported_cache_is_the_replayed_workload(tmp_path: Path) -> None:
    src = recorded("pnpoly/RTX_2080_Ti.json.gz")
    target = ReplayTarget(src)
    with Database(tmp_path / "kt.db") as db:
        workload, n = import_cache(db, src)
        assert workload == target.workload()
        best = db.best(workload)
        medians = [statistics.median(e["times"]) for e in load(src)["cache"].values()
                   if not isinstance(e["time"], str)]
        assert best is not None and best.value == min(medians)  # tunex ranks by median
        result = Tuner(target, target.space, db=db, budget="100trials").run()
        assert result.new_trials == 0 and result.trials == n  # nothing left to measure


def test_export_of_a_search_replays_and_t4_follows_the_schema(tmp_path: Path, capsys) -> None:
    src = recorded("convolution/A100.json.gz")
    db = tmp_path / "run.db"
    assert main(["search", "--target", f"replay:{src}", "--strategy", "random", "--budget",
                 "40trials", "--seed", "2", "--db", str(db), "-q"]) == 0
    kt, t4 = tmp_path / "search.json", tmp_path / "search.t4.json"
    assert main(["db", "export", "--db", str(db), "--format", "kernel_tuner", "-o",
                 str(kt)]) == 0
    assert main(["db", "export", "--db", str(db), "--format", "t4", "-o", str(t4)]) == 0
    with Database(db, create=False) as d:
        (w,) = d.workloads()
        trials = d.trials(w)
    replay = ReplayTarget(kt)  # the exported cache is a recorded space tunex replays
    for t in trials:
        m = t.measurement
        again = replay.measure(replay.build(replay.workload(), m.config))
        assert again.status == m.status
        if m.ok:
            assert again.value == pytest.approx(m.value)
    doc = json.loads(t4.read_text())
    assert doc["schema_version"] == "1.0.0" and len(doc["results"]) == len(trials) == 40
    for r, t in zip(doc["results"], trials):
        assert {"configuration", "times", "invalidity", "correctness"} <= set(r)
        assert r["invalidity"] in T4_INVALIDITY
        assert r["configuration"] == t.measurement.config.to_dict()
        assert r["times"]["runtimes"] == list(t.measurement.times_ms)
        assert (r["invalidity"] == "correct") == t.measurement.ok


def test_an_exhaustive_searchs_export_carries_its_declared_space(tmp_path: Path) -> None:
    """A cache exported from a search of every point of its space holds that space (every
    value of each parameter, and its constraints), so Kernel Tuner can be given it and a replay
    is the same space; a partial search's export stays the points it measured."""
    # a constrained space with a permutation among its parameters (a loop order)
    src = ReplayTarget(Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "riscv"
                       / "sgemm" / "x280-64x64x64.json.gz")
    with Database(tmp_path / "s.db") as db:
        part = Tuner(src, src.space, db=db, strategy="random", seed=1, budget="25trials",
                     remeasure=0).run()
        export_cache(db, part.workload, tmp_path / "part.json")
    doc = load(tmp_path / "part.json")
    assert "restrictions" not in doc and ReplayTarget(tmp_path / "part.json").space.size == 25
    with Database(tmp_path / "s.db") as db:
        whole = Tuner(src, src.space, db=db, strategy="exhaustive",
                      budget=f"{src.space.size}trials", remeasure=0).run()
        out = tmp_path / "s.json"
        export_cache(db, whole.workload, out)
    doc = load(out)
    assert len(doc["cache"]) == src.space.size and doc["restrictions"]
    assert list(doc)[-1] == "cache"  # Kernel Tuner reads a cache file that ends with it
    assert {k: len(v) for k, v in doc["tune_params"].items()} == {
        p.name: len(p.values) for p in src.space.params}
    assert ReplayTarget(out).space.size == src.space.size


def test_cli_import_and_clear_errors(tmp_path: Path, capsys) -> None:
    src = recorded("pnpoly/RTX_3060_laptop.json.gz")
    db = tmp_path / "cli.db"
    assert is_cache(src) and not is_cache(tmp_path / "absent.json")
    assert main(["db", "import", str(src), "--db", str(db)]) == 0
    assert "imported 4092 trials of Kernel Tuner cache" in capsys.readouterr().err
    export = tmp_path / "trials.jsonl"
    assert main(["db", "export", "--db", str(db), "-o", str(export)]) == 0
    assert not is_cache(export)  # a tunex export still imports as one
    assert main(["db", "import", str(export), "--db", str(tmp_path / "other.db")]) == 0
    capsys.readouterr()
    assert main(["db", "export", "--db", str(db), "--format", "t4"]) == 2
    assert "-o FILE" in capsys.readouterr().err
    assert main(["db", "import", str(src), "--db", str(db)]) == 0
    other = recorded("pnpoly/RTX_2080_Ti.json.gz")
    assert main(["db", "import", str(other), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["db", "export", "--db", str(db), "--format", "kernel_tuner", "-o",
                 str(tmp_path / "x.json")]) == 2
    assert "2 match: pass --workload ID" in capsys.readouterr().err
    # a kernel the database does not hold: said so, not "pass --workload ID" for 0 matches
    assert main(["db", "export", "--db", str(db), "--format", "t4", "--kernel", "nope", "-o",
                 str(tmp_path / "x.json")]) == 2
    assert "no workload of kernel 'nope'" in capsys.readouterr().err
    with Database(tmp_path / "empty.db") as empty, pytest.raises(TunexError, match="no trial"):
        export_t4(empty, ReplayTarget(src).workload(), tmp_path / "none.json")


def test_entries_with_odd_fields_are_measured_imported_and_searched(tmp_path: Path,
                                                                    capsys) -> None:
    """Fields a hand-written or foreign cache fills with something other than numbers: the
    entry's own time stands where its repeats are unusable, a time that is no number is a
    failed trial, and neither `db import` nor a search stops on them."""
    cache = {
        "1,1": {"a": 1, "b": 1, "time": 1.0, "times": "abc"},
        "1,2": {"a": 1, "b": 2, "time": 2.0, "times": [None, 2.5], "compile_time": "abc"},
        "2,1": {"a": 2, "b": 1, "time": [3.0], "benchmark_time": "slow"},
        "2,2": {"a": 2, "b": 2, "time": True, "times": [], "compile_time": True},
        "4,1": {"a": 4, "b": 1, "time": 4.0, "times": [4.0, float("nan"), -1.0]},
    }
    doc = {"kernel_name": "odd", "tune_params_keys": ["a", "b"],
           "tune_params": {"a": [1, 2, 4], "b": [1, 2]}, "cache": cache}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    target = ReplayTarget(path, noisy=True, seed=0)
    w = target.workload()
    got = {tuple(c.values()): target.measure(target.build(w, c)) for c in target.space}
    assert got[(1, 1)].ok and got[(1, 1)].times_ms == (1.0,)
    assert got[(1, 2)].ok and got[(1, 2)].times_ms == (2.0,) and got[(1, 2)].compile_ms is None
    assert got[(2, 1)].status is Status.RUNTIME_ERROR and "not a number" in got[(2, 1)].error
    assert got[(2, 2)].status is Status.RUNTIME_ERROR
    # repeats that are no runtimes (NaN, negative): the mean stands, as replayed and imported
    assert got[(4, 1)].ok and got[(4, 1)].times_ms == (4.0,)
    assert target.optimum() == 1.0
    db = tmp_path / "odd.db"
    assert main(["db", "import", str(path), "--db", str(db)]) == 0
    assert "imported 5 trials" in capsys.readouterr().err
    with Database(db) as d:
        assert {m.config["a"]: m.value for m in d.measurements(w) if m.ok}[4] == 4.0
    assert main(["search", "--target", f"replay:{path}", "--db", str(tmp_path / "s.db"),
                 "--budget", "6trials", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)  # the 5 recorded points (no constraints given)
    assert out["trials"] == 5 and out["stopped"] == "strategy exhausted"


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_space_mixing_kinds_of_values_survives_import_and_export(tmp_path: Path, fmt: str,
                                                                   capsys) -> None:
    """A parameter whose values are of several kinds (None, a string, numbers), as Kernel Tuner
    spaces have: its cache imports, and a database's export of it imports into a fresh one."""
    values = {"a": [None, "auto", 2, 4.5], "b": [1, 2]}
    cache = {f"{a},{b}": {"a": a, "b": b, "time": 1.0 + i, "times": [1.0 + i]}
             for i, (a, b) in enumerate((a, b) for a in values["a"] for b in values["b"])}
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps({"kernel_name": "mixed", "tune_params_keys": ["a", "b"],
                                "tune_params": values, "cache": cache}))
    imported, searched = tmp_path / "imported.db", tmp_path / "searched.db"
    assert main(["db", "import", str(path), "--db", str(imported)]) == 0
    assert "imported 8 trials" in capsys.readouterr().err
    assert main(["search", "--target", f"replay:{path}", "--db", str(searched),
                 "--budget", "8trials", "-q"]) == 0
    for db in (imported, searched):
        out = tmp_path / f"{db.stem}.{fmt}"
        assert main(["db", "export", "--db", str(db), "-o", str(out)]) == 0
        fresh = tmp_path / f"{db.stem}-copy.db"
        assert main(["db", "import", str(out), "--db", str(fresh)]) == 0
        assert main(["db", "import", str(out), "--db", str(fresh)]) == 0
        capsys.readouterr()
        with Database(db) as a, Database(fresh) as b:
            (w,) = a.workloads()
            assert b.measurements(w) == a.measurements(w)
            assert b.space(w) is not None and b.space(w).size == 8


def test_a_workload_of_several_parameter_sets_is_refused_by_the_cache_export(
        tmp_path: Path, capsys) -> None:
    """A database takes configs of any parameters for a workload without a declared space: a
    Kernel Tuner cache (one set of keys) of such a workload is refused saying what to use."""
    from tunex.trial import Config, Measurement, Workload

    db = tmp_path / "mixed.db"
    w = Workload("mixed")
    with Database(db) as d:
        for cfg in (Config(a=1), Config(a=2, c=3)):
            d.record(w, Measurement(cfg, Status.OK, (1.0,)), strategy="random")
    out = tmp_path / "mixed.json"
    assert main(["db", "export", "--db", str(db), "--format", "kernel_tuner", "-o",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds configs of different parameters" in err and "--format t4" in err
    assert not out.exists()
    assert main(["db", "export", "--db", str(db), "--format", "t4", "-o", str(out)]) == 0
    assert [r["configuration"] for r in load(out)["results"]] == [{"a": 1}, {"a": 2, "c": 3}]


def test_t4_results_are_strict_json_when_a_timer_gave_infinite_times(tmp_path: Path) -> None:
    """A trial whose timer gave an infinite time is recorded as a runtime error keeping that
    time: its T4 result lists only the finite runtimes, so strict JSON readers take the file."""
    from tunex.trial import Config, Measurement, Workload

    db = tmp_path / "inf.db"
    w = Workload("inf")
    with Database(db) as d:
        d.record(w, Measurement(Config(a=1), Status.OK, (1.0, 2.0)), strategy="random")
        d.record(w, Measurement(Config(a=2), Status.OK, (float("inf"), 3.0)),
                 strategy="random")
    out = tmp_path / "inf.json"
    assert main(["db", "export", "--db", str(db), "--format", "t4", "-o", str(out)]) == 0

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    results = json.loads(out.read_text(), parse_constant=refuse)["results"]
    assert [r["invalidity"] for r in results] == ["correct", "runtime"]
    assert [r["times"]["runtimes"] for r in results] == [[1.0, 2.0], [3.0]]


@pytest.mark.parametrize("configs", [({"a": "1,x", "b": "y"}, {"a": 1, "b": "x,y"}),
                                     ({"a": 1, "b": "y"}, {"a": "1", "b": "y"})])
def test_configs_of_one_cache_key_are_refused_not_dropped(tmp_path: Path, capsys,
                                                         configs: tuple) -> None:
    """Kernel Tuner keys an entry by its values joined with commas: two configs that make the
    same key would leave one entry for two configs, so the export refuses them instead."""
    from tunex.trial import Config, Measurement, Workload

    db = tmp_path / "comma.db"
    w = Workload("comma")
    with Database(db) as d:
        for i, cfg in enumerate(configs):
            d.record(w, Measurement(Config(cfg), Status.OK, (1.0 + i,)), strategy="random")
    out = tmp_path / "comma.json"
    assert main(["db", "export", "--db", str(db), "--format", "kernel_tuner", "-o",
                 str(out)]) == 2
    assert "have the same Kernel Tuner cache key" in capsys.readouterr().err
    assert not out.exists()


def test_a_cache_of_permutations_imports_and_replays(tmp_path: Path, capsys) -> None:
    """A permutation (a loop order: a tuple) is a list in a cache file, as tunex's own export
    writes it: the file imports with every config, and replays."""
    from tunex.trial import Config, Measurement, Workload

    db = tmp_path / "perm.db"
    w = Workload("perm")
    orders = [("i", "j", "k"), ("j", "i", "k"), ("k", "j", "i")]
    with Database(db) as d:
        for i, order in enumerate(orders):
            for tile in (1, 2):
                d.record(w, Measurement(Config(order=order, tile=tile), Status.OK,
                                        (1.0 + i + tile,)), strategy="random")
    out = tmp_path / "perm.json"
    assert main(["db", "export", "--db", str(db), "--format", "kernel_tuner", "-o",
                 str(out)]) == 0
    fresh = tmp_path / "fresh.db"
    assert main(["db", "import", str(out), "--db", str(fresh)]) == 0
    with Database(fresh) as d:
        (imported,) = d.workloads()
        got = {t.measurement.config: t.measurement.times_ms for t in d.trials(imported)}
        assert d.best(imported).config == Config(order=("i", "j", "k"), tile=1)
    assert got == {Config(order=o, tile=t): (1.0 + i + t,)
                   for i, o in enumerate(orders) for t in (1, 2)}
    capsys.readouterr()
    assert main(["search", "--target", f"replay:{out}", "--db", str(tmp_path / "s.db"),
                 "--strategy", "exhaustive", "--budget", "6trials", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["best_ms"] == 2.0 and summary["config"]["order"] == ["i", "j", "k"]
    assert summary["failures"] == {}
