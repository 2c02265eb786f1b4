from __future__ import annotations

import gzip
import json

import pytest

from tests._data import recorded
from tunex import Config, Status, TargetError
from tunex.targets import make_target
from tunex.targets.replay import ReplayTarget


def test_kernel_tuner_file_with_found_definition():
    t = ReplayTarget(recorded("convolution/A100.json.gz"))
    assert t.space.size == 4362  # the T1 constraints reproduce exactly the recorded points
    assert t.space.bound["filter_height"] == 15
    w = t.workload()
    assert w.kernel == "convolution_kernel" and "A100" in w.target["device"]
    ok = failed = 0
    for c in t.space.sample(300, rng=0):
        m = t.measure(t.build(w, c))
        if m.ok:
            ok += 1
            assert m.value == pytest.approx(t.true_time(c))
        else:
            failed += 1
            assert m.status in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.INVALID)
    assert ok > 0 and failed > 0  # this space records failed configs (161 of 4362)
    assert t.optimum() == pytest.approx(0.5536, rel=1e-3)


def test_noisy_mode_draws_recorded_repeats():
    path = recorded("pnpoly/RTX_2080_Ti.json.gz")
    t = ReplayTarget(path, noisy=True, seed=0)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    c = next(c for c in t.space if t.true_time(c) < float("inf"))
    entry = t._entry(c)
    draws = {t.measure(t.build(t.workload(), c)).times_ms[0] for _ in range(40)}
    assert draws <= set(entry["times"]) and len(draws) > 1
    assert doc["device_name"] == t.workload().target["device"]


def test_own_format_with_restrictions_and_missing_points(tmp_path):
    doc = {
        "device_name": "toy", "kernel_name": "toy", "problem_size": [8],
        "tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2, 4], "b": [1, 2]},
        "restrictions": ["a * b <= 4"],
        "cache": {
            "1,1": {"a": 1, "b": 1, "time": 3.0, "times": [3.0, 3.1]},
            "2,1": {"a": 2, "b": 1, "time": "CompilationFailedConfig"},
            "4,1": {"a": 4, "b": 1, "time": 1.0, "times": [1.0]},
            "2,2": {"a": 2, "b": 2, "time": "RuntimeFailedConfig"},
        },
    }
    p = tmp_path / "toy.json"
    p.write_text(json.dumps({**doc, "restrictions": "a * b <= 4"}))  # one, not in a list
    assert make_target(f"replay:{p}").space.size == 5  # was: "constraint ' ' is not valid"
    p.write_text(json.dumps(doc))
    t = make_target(f"replay:{p}")
    assert t.space.size == 5  # (1,1) (1,2) (2,1) (2,2) (4,1)
    w = t.workload()
    status = {c: t.measure(t.build(w, c)).status for c in t.space}
    assert status[Config(a=1, b=1)] is Status.OK
    assert status[Config(a=2, b=1)] is Status.COMPILE_ERROR
    assert status[Config(a=2, b=2)] is Status.RUNTIME_ERROR
    assert status[Config(a=1, b=2)] is Status.INVALID  # in the space, never recorded
    assert t.optimum() == 1.0


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(TargetError, match="does not exist"):
        ReplayTarget(tmp_path / "missing.json.gz")
    bad = tmp_path / "bad.json"
    bad.write_text('{"cache": {}}')
    with pytest.raises(TargetError, match="not a recorded tuning space"):
        ReplayTarget(bad)
    with pytest.raises(TargetError, match="unknown target"):
        make_target("quantum:x")


def test_a_gzip_bomb_is_refused_before_it_is_unpacked_whole(tmp_path, monkeypatch, capsys):
    """A few MB of gzip can unpack to many GB: replay: and db import read it whole into memory
    (an out-of-memory kill of the machine, not an error)."""
    import tunex.targets.replay as replay
    from tunex.cli import main

    monkeypatch.setattr(replay, "MAX_RECORDED_BYTES", 1 << 20)
    bomb = tmp_path / "space.json.gz"
    bomb.write_bytes(gzip.compress(b'{"cache": {' + b" " * (8 << 20) + b"}}"))
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(TargetError, match=r"unpacks to over 1 MiB \(a gzip bomb\?\)"):
        ReplayTarget(bomb)
    assert main(["db", "import", str(bomb), "--db", str(tmp_path / "x.db")]) == 2
    assert "unpacks to over 1 MiB" in capsys.readouterr().err


@pytest.mark.parametrize("values, says", [
    ({"a": [1], "b": [8]}, r"every parameter has one value \(a=1, b=8\)"),
    ({}, r"no parameters"),
])
def test_a_recorded_space_with_nothing_to_tune_says_so(tmp_path, values, says):
    """A recording whose parameters each take one value (or that has none) is refused with
    what is wrong, not with an error about building a space."""
    doc = {"kernel_name": "k", "tune_params_keys": list(values), "tune_params": values,
           "cache": {"x": {**{k: v[0] for k, v in values.items()}, "time": 1.0}}}
    p = tmp_path / "one.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match=says + ".*nothing to tune"):
        ReplayTarget(p)


def test_entries_that_are_one_config_over_the_keys_are_refused(tmp_path):
    """A tuned parameter left out of tune_params_keys made its entries one config each: the
    replay answered with whichever came last (a=1 at 1.3 ms, the recorded best 1.1 ms)."""
    cache = {f"{a},{b}": {"a": a, "b": b, "time": 1.0 + a * 0.1 + b * 0.1}
             for a in (1, 2) for b in (0, 1, 2)}
    doc = {"kernel_name": "k", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2],
                                                                          "b": [0, 1, 2]},
           "cache": cache}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match=r"'1,0' and '1,1' record different results for one "
                                          r"config \(a=1\).*they differ in b, which "
                                          r"tune_params_keys leaves out"):
        ReplayTarget(p)
    doc["tune_params_keys"] = ["a", "b"]  # listed: a space of 6 points
    doc["cache"]["again"] = dict(cache["1,0"])  # the same entry twice answers alike: kept
    p.write_text(json.dumps(doc))
    t = ReplayTarget(p)
    assert t.space.size == 6 and t.optimum() == pytest.approx(1.1)


@pytest.mark.timeout(60)
def test_the_optimum_of_a_sparse_recording_of_a_huge_space_is_not_enumerated(tmp_path):
    """40 parameters of two values and three recorded points: the optimum (tunex report
    --space) was the minimum over all 2^40 points of the space, which never ended."""
    keys = [f"p{i}" for i in range(40)]
    cache = {}
    for bits, time in ((0, 3.0), (5, 2.0), (2**40 - 1, "RuntimeFailedConfig")):
        point = {k: (bits >> i) & 1 for i, k in enumerate(keys)}
        cache[",".join(str(v) for v in point.values())] = {**point, "time": time}
    doc = {"kernel_name": "k", "tune_params_keys": keys,
           "tune_params": {k: [0, 1] for k in keys}, "cache": cache}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    assert ReplayTarget(p).optimum() == 2.0


def test_a_definition_tuning_a_parameter_the_recording_lacks_is_refused(tmp_path):
    """A T1 definition found beside the data that gives an unrecorded parameter several values
    made a search try each of them, every one answered with the same recorded time."""
    (tmp_path / "space_definitions").mkdir()
    (tmp_path / "data").mkdir()
    t1 = {"ConfigurationSpace": {"TuningParameters": [
        {"Name": "a", "Values": "[1, 2]"}, {"Name": "z", "Values": "[1, 2, 3]"},
        {"Name": "fixed", "Values": "[7]"}], "Conditions": []}}
    (tmp_path / "space_definitions" / "k.json").write_text(json.dumps(t1))
    doc = {"kernel_name": "k", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2]},
           "cache": {"1": {"a": 1, "time": 1.0}, "2": {"a": 2, "time": 2.0}}}
    p = tmp_path / "data" / "k.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match=r"gives z several values, but the recording holds "
                                          r"no such parameter.*move the recording away"):
        ReplayTarget(p)
    t1["ConfigurationSpace"]["TuningParameters"][1]["Values"] = "[3]"  # a constant: fine
    (tmp_path / "space_definitions" / "k.json").write_text(json.dumps(t1))
    t = ReplayTarget(p)
    assert t.space.names == ("a",) and t.space.bound == {"z": 3, "fixed": 7}
    assert t.optimum() == 1.0


@pytest.mark.parametrize("cache, says", [
    ({}, "the cache holds no entry"),
    ({"1,1": {"a": 1, "bb": 1, "time": 1.0}, "2,1": {"a": 2, "bb": 1, "time": 2.0}},
     r"none of the 2 cache entries .* \(a, b\): entry '1,1' lacks b"),
    ({"1,1": [1, 1, 1.0]}, "entry '1,1' is not an object"),
    ({"1,1": {"a": {"x": 1}, "b": 1, "time": 1.0}}, "entry '1,1' holds an object where"),
    ({"1,1": {"a": [1], "b": 1, "time": 1.0}}, r"the first, a=\(1,\), b=1: a=\(1,\) is not one of"),
])
def test_a_recording_that_can_answer_no_config_is_refused(tmp_path, cache, says):
    """Entries naming other parameters than tune_params_keys (or none at all) made every trial
    of a search fail as 'not in the recorded space', the budget spent on nothing."""
    doc = {"kernel_name": "k", "tune_params_keys": ["a", "b"],
           "tune_params": {"a": [1, 2], "b": [1, 2]}, "cache": cache}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match=says):
        ReplayTarget(p)


@pytest.mark.parametrize("change, says", [
    ({"tune_params": {"a": [16, 32], "b": [1, 2]}},
     r"none of the 4 recorded configs is a point of the space searched \(the first, a=1, "
     r"b=1: a=1 is not one of \[16, 32\]\)"),
    ({"tune_params": {"a": ["1", "2"], "b": [1, 2]}}, r"a=1 is not one of \['1', '2'\]"),
    ({"tune_params": {"a": [1, 2], "b": [7]}}, r"records \{'b': 1\} where tune_params has "
                                               r"\{'b': 7\}"),
    ({"tune_params": {"a": [1, 2, 4], "b": [1, 2]}, "restrictions": ["a > 2"]},
     r"violates a > 2"),
    ({"tune_params": {"a": [], "b": [1, 2]}}, r"tune_params gives a \[\], not a list"),
    ({"tune_params": {"a": "12", "b": [1, 2]}}, r"tune_params gives a '12', not a list"),
])
def test_a_recording_whose_space_holds_none_of_its_entries_is_refused(tmp_path, change, says):
    """tune_params or restrictions that admit none of the recorded configs made every trial
    of a search fail as not recorded (an empty domain dropped the parameter altogether)."""
    doc = {"kernel_name": "k", "tune_params_keys": ["a", "b"],
           "tune_params": {"a": [1, 2], "b": [1, 2]},
           "cache": {f"{a},{b}": {"a": a, "b": b, "time": 1.0 + a + b}
                     for a in (1, 2) for b in (1, 2)}}
    p = tmp_path / "k.json"
    p.write_text(json.dumps({**doc, **change}))
    with pytest.raises(TargetError, match=says):
        ReplayTarget(p)
    p.write_text(json.dumps(doc))
    assert ReplayTarget(p).optimum() == 3.0


def test_a_cache_kernel_tuner_left_open_is_read_as_kernel_tuner_reads_it(tmp_path):
    """Kernel Tuner appends '"key": {...},' per measured config and closes the file when
    tuning ends; the cache of a run that stopped early was refused as not JSON."""
    header = {"kernel_name": "k", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2, 4]}}
    head = json.dumps(header)[:-1] + ', "cache": {'
    entries = "".join(f'\n"{a}": {json.dumps({"a": a, "time": 5.0 - a})},' for a in (1, 2))
    p = tmp_path / "open.json"
    for text in (head + entries, head + entries[:-1] + "\n"):  # with or without its comma
        p.write_text(text)
        t = ReplayTarget(p)
        assert len(t.entries) == 2 and t.optimum() == 3.0
    p.write_text(head)  # opened, nothing measured yet
    with pytest.raises(TargetError, match="the cache holds no entry"):
        ReplayTarget(p)
    p.write_text(head + entries[:-5])  # cut inside an entry: still not a recording
    with pytest.raises(TargetError, match="not a recorded tuning space"):
        ReplayTarget(p)


def test_json_nested_too_deep_is_refused_in_one_line(tmp_path):
    """A recorded space, a T1 definition or an export nested deeper than Python's JSON reader
    goes raised a bare RecursionError, a traceback."""
    from tunex.db import Database
    from tunex.errors import DatabaseError, SpaceError
    from tunex.space import Space

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TargetError, match="is not a recorded tuning space"):
        ReplayTarget(deep)
    with pytest.raises(SpaceError, match="not a readable T1 space definition"):
        Space.from_t1(deep)
    with Database(tmp_path / "t.db") as db, pytest.raises(DatabaseError, match="not a tunex"):
        db.import_trials(deep)


@pytest.mark.parametrize("text", [None, "not json", '{"ConfigurationSpace": {}}'])
def test_an_unusable_space_definition_is_named_not_the_recording(tmp_path, text):
    """A missing or broken ?definition=FILE was reported as 'PATH is not a usable recorded
    space ... re-record it or fix the file', sending the user to a recording that is fine."""
    doc = {"kernel_name": "k", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2]},
           "cache": {"1": {"a": 1, "time": 1.0}, "2": {"a": 2, "time": 2.0}}}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    t1 = tmp_path / "t1.json"
    if text is not None:
        t1.write_text(text)
    with pytest.raises(TargetError, match=r"k\.json: its space definition .*t1\.json cannot be "
                                          r"used") as info:
        ReplayTarget(p, definition=t1)
    assert "not a usable recorded space" not in str(info.value)


def test_a_definition_beside_restrictions_is_refused_not_ignored(tmp_path):
    """A recording that states its restrictions never read ?definition=FILE, even a missing
    one, and said nothing."""
    doc = {"kernel_name": "k", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2]},
           "restrictions": ["a > 0"],
           "cache": {"1": {"a": 1, "time": 1.0}, "2": {"a": 2, "time": 2.0}}}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match=r"states its own restrictions, so definition=.*"
                                          r"nothere\.json would not be read"):
        ReplayTarget(p, definition=tmp_path / "nothere.json")
    assert ReplayTarget(p).space.size == 2


def _unconstrained(tmp_path, name="k.json"):
    """A brute-forced cache of 3 x 3 x 2 values whose author's constraint (a * b <= 4, unknown
    to the file) left 10 of the 18 combinations out, one of the recorded ones a failure."""
    cache = {}
    for a in (1, 2, 4):
        for b in (1, 2, 4):
            for c in (0, 1):
                if a * b <= 4:
                    t = "RuntimeFailedConfig" if (a, b, c) == (2, 2, 1) else 1.0 + a + b + c
                    cache[f"{a},{b},{c}"] = {"a": a, "b": b, "c": c, "time": t}
    doc = {"kernel_name": "k", "tune_params_keys": ["a", "b", "c"],
           "tune_params": {"a": [1, 2, 4], "b": [1, 2, 4], "c": [0, 1]}, "cache": cache}
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p, cache


def test_a_cache_without_constraints_is_searched_over_its_recorded_points(tmp_path):
    """With no restrictions and no definition beside it, the space is the recorded points:
    every point is one the replay can answer (the failure among them still fails), while the
    Cartesian product, kept as space=product, holds combinations nobody measured."""
    p, cache = _unconstrained(tmp_path)
    t = make_target(f"replay:{p}")
    assert t.space.size == len(cache) == 12
    w = t.workload()
    status = {c: t.measure(t.build(w, c)).status for c in t.space}
    assert sorted(status.values()).count(Status.RUNTIME_ERROR) == 1
    assert all(s is Status.OK for c, s in status.items() if c != Config(a=2, b=2, c=1))
    assert set(t.space.sample(50, rng=0)) <= set(status)
    assert Config(a=4, b=2, c=0) not in t.space
    assert any("recorded" in v for v in t.space.violations({"a": 4, "b": 2, "c": 0}))
    assert t.optimum() == 3.0

    product = make_target(f"replay:{p}?space=product")
    assert product.space.size == 18
    assert product.measure(product.build(w, Config(a=4, b=2, c=0))).status is Status.INVALID
    with pytest.raises(TargetError, match="space=product"):
        make_target(f"replay:{p}?space=cartesian")


def test_stated_restrictions_still_decide_the_space(tmp_path):
    """A file's own restrictions (even an empty list: "no constraints") are the space, as
    before; a point they admit that was never recorded fails as invalid."""
    p, _ = _unconstrained(tmp_path)
    doc = json.loads(p.read_text())
    p.write_text(json.dumps({**doc, "restrictions": []}))
    assert make_target(f"replay:{p}").space.size == 18
    p.write_text(json.dumps({**doc, "restrictions": ["a * b <= 8"]}))
    t = make_target(f"replay:{p}")
    assert t.space.size == 16  # (2, 4) and (4, 2) are admitted, not recorded
    assert t.measure(t.build(t.workload(), Config(a=4, b=2, c=1))).status is Status.INVALID


def test_a_search_of_a_cache_without_constraints_measures_only_recorded_points(tmp_path):
    """End to end through the Tuner: no trial of a search over such a cache is spent on a
    combination the cache does not hold."""
    from tunex.tuner import Budget, Tuner

    p, _ = _unconstrained(tmp_path)
    t = make_target(f"replay:{p}")
    result = Tuner(t, t.space, workload=t.workload(), strategy="model",
                   budget=Budget(trials=12), remeasure=0, transfer=False).run()
    assert result.new_trials == 12  # every point, each once
    assert result.failures == {Status.RUNTIME_ERROR.value: 1}


def test_t4_results_replay_as_their_configurations(tmp_path):
    """T4 results as Kernel Tuner writes them (times in ms, "compilation" and "runtimes" in
    `times`, failures by `invalidity`, a configuration measured twice) replay over the
    configurations they hold, each failure as its kind, each repeat kept."""
    def result(a, b, time, invalidity="correct", runtimes=()):
        return {"timestamp": "2026-01-01 00:00:00", "configuration": {"a": a, "b": b},
                "times": {"compilation": 12.5, "benchmark": 3.0, "runtimes": list(runtimes)},
                "invalidity": invalidity, "correctness": 1, "objectives": ["time"],
                "measurements": [{"name": "time", "value": time, "unit": "ms"},
                                 {"name": "GFLOP/s", "value": 1.0, "unit": ""}]}
    doc = {"schema_version": "1.0.0", "results": [
        result(16, 1, 2.0, runtimes=[2.0, 2.1]),
        result(32, 1, 1.0, runtimes=[1.0, 0.9]),
        result(64, 1, "CompilationFailedConfig", "compile"),
        result(16, 2, "RuntimeFailedConfig", "runtime"),
        result(32, 1, 1.2, runtimes=[1.2]),  # measured again
        result(64, 2, "timeout", "timeout"),
        result(16, 4, 9.0, "correctness"),
    ]}
    p = tmp_path / "kt_output.json"
    p.write_text(json.dumps(doc))
    t = make_target(f"replay:{p}")
    assert t.space.names == ("a", "b") and t.space.size == 6  # (32, 2), (32, 4), (64, 4) never ran
    w = t.workload()
    assert w.kernel == "kt_output"
    got = {tuple(c.values()): t.measure(t.build(w, c)) for c in t.space}
    assert got[(16, 1)].times_ms == (2.0,) and got[(16, 1)].compile_ms == 12.5
    assert got[(64, 1)].status is Status.COMPILE_ERROR
    assert got[(16, 2)].status is Status.RUNTIME_ERROR
    assert got[(64, 2)].status is Status.TIMEOUT
    assert got[(16, 4)].status is Status.WRONG_RESULT
    assert t.true_time(Config(a=32, b=1)) == pytest.approx((1.0 + 0.9 + 1.2) / 3)
    noisy = ReplayTarget(p, noisy=True, seed=0)
    draws = {noisy.measure(noisy.build(w, Config(a=32, b=1))).times_ms[0] for _ in range(30)}
    assert draws == {1.0, 0.9, 1.2}
    saved = json.dumps(doc)
    # the FAIR hub's T4 files spell the unit out, or leave it to the file's metadata
    doc["results"][1]["measurements"][0]["unit"] = "Milliseconds"
    p.write_text(json.dumps(doc))
    assert ReplayTarget(p).true_time(Config(a=32, b=1)) == pytest.approx((1.0 + 0.9 + 1.2) / 3)
    for r in doc["results"]:
        r["measurements"][0].pop("unit")
    p.write_text(json.dumps({**doc, "metadata": {"timeunit": "seconds"}}))
    assert ReplayTarget(p).true_time(Config(a=16, b=1)) == pytest.approx(2000.0)
    # an objective other than time (Kernel Tuner's GFLOP/s, higher is better): its time
    for r in doc["results"]:
        r["objectives"] = ["GFLOP/s"]
        r["measurements"][0]["unit"] = "ms"
    p.write_text(json.dumps(doc))
    assert ReplayTarget(p).true_time(Config(a=16, b=1)) == pytest.approx(2.0)
    for r in doc["results"]:
        r["measurements"] = [m for m in r["measurements"] if m["name"] != "time"]
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match="objective 'GFLOP/s' with no unit and no time"):
        ReplayTarget(p)
    doc = json.loads(saved)
    doc["results"][1]["measurements"][0]["unit"] = "parsec"
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match=r"T4 result 1 gives time in 'parsec'.*ms, s, us, ns"):
        ReplayTarget(p)
    doc["results"][0] = {"configuration": None}
    p.write_text(json.dumps(doc))
    with pytest.raises(TargetError, match="T4 result 0 has no configuration"):
        ReplayTarget(p)
    p.write_text(json.dumps({"schema_version": "1.0.0", "results": "x"}))
    with pytest.raises(TargetError, match="T4 results are str, not a list"):
        ReplayTarget(p)


def test_a_t4_export_replays_and_imports_as_the_search_that_wrote_it(tmp_path, capsys):
    """`tunex db export --format t4` of a replayed search, replayed and imported: the same
    configs and times (the T4 file holds the configs measured, so they are its space)."""
    from tunex.cli import main
    from tunex.db import Database

    src = recorded("pnpoly/RTX_2080_Ti.json.gz")
    db, out = tmp_path / "a.db", tmp_path / "a.t4.json"
    assert main(["search", "--target", f"replay:{src}", "--db", str(db), "--budget", "25trials",
                 "--seed", "3", "-q"]) == 0
    assert main(["db", "export", "--db", str(db), "--format", "t4", "-o", str(out)]) == 0
    capsys.readouterr()
    t = make_target(f"replay:{out}")
    with Database(db) as d:
        (wl,) = d.workloads()
        measured = {m.config: m for m in d.measurements(wl)}
    assert t.space.size == len(measured) == 25
    original = ReplayTarget(src)
    for c in t.space:
        assert t.true_time(c) == pytest.approx(original.true_time(c)) or (
            not measured[c].ok and t.true_time(c) == float("inf"))
    copy = tmp_path / "b.db"
    assert main(["db", "import", str(out), "--db", str(copy)]) == 0
    assert "imported 25 trials" in capsys.readouterr().err


def test_a_replay_target_pickles_with_its_constraints(tmp_path):
    """`tunex serve --target replay:PATH` sends the target to its worker processes; a space with
    an expression constraint or the recorded-points rule failed there with a PicklingError."""
    import pickle
    from multiprocessing.reduction import ForkingPickler

    p, _ = _unconstrained(tmp_path)  # the recorded-points constraints
    for target in (ReplayTarget(p), ReplayTarget(recorded("convolution/A100.json.gz"))):
        back = pickle.loads(bytes(ForkingPickler.dumps(target)))
        assert back.space.size == target.space.size
        assert set(back.space) == set(target.space)


def test_named_values_replay_unordered_and_numbers_ordered(tmp_path):
    """A recording lists a parameter's values in whatever order it was written in; names (a
    loop order, a code style) have no order, so a replay gives them the geometry a kernel
    declaring them as a ``Choice`` gets: every other name is one step away."""
    doc = {
        "device_name": "toy", "kernel_name": "toy", "problem_size": [8],
        "tune_params_keys": ["order", "U"],
        "tune_params": {"order": ["kij", "ijk", "jik"], "U": [4, 1, 2]},
        "cache": {f"{o},{u}": {"order": o, "U": u, "time": 1.0 + u + len(o), "times": [1.0]}
                  for o in ("kij", "ijk", "jik") for u in (4, 1, 2)},
    }
    p = tmp_path / "toy.json"
    p.write_text(json.dumps(doc))
    space = ReplayTarget(p).space
    order, unroll = space.param("order"), space.param("U")
    assert not order.ordered and unroll.ordered
    assert sorted(order.neighbours("kij")) == ["ijk", "jik"]  # not only "ijk", the next listed
    assert unroll.neighbours(1) == [4, 2]  # numbers keep their recorded order
    definition = tmp_path / "toy_def.json"
    definition.write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [
        {"Name": "order", "Type": "string", "Values": ["kij", "ijk", "jik"]},
        {"Name": "U", "Type": "int", "Values": [4, 1, 2]}], "Conditions": []}}))
    t1 = ReplayTarget(p, definition=definition).space
    assert not t1.param("order").ordered and t1.param("U").ordered
