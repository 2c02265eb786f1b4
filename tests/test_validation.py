"""Careless or hostile input at the doors a user walks through gets one clear error, never a
traceback and never a silent no-op (issue: hardening, items 7 and 8)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunex.cli import main
from tunex.db import Database
from tunex.errors import BudgetError, ConfigError, TargetError, TunexError
from tunex.targets import make_target
from tunex.trial import Config, Measurement, Status
from tunex.tuner import Budget

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "data" / "matmul_H200_1024x1024x1024.json.gz"


@pytest.mark.parametrize("text", ["0m", "0trials", "0s,10trials", "2h,500trials,3h",
                                  "10trials,20trials", "", "abc", "-5m"])
def test_budgets_that_allow_nothing_or_say_two_things_are_refused(text):
    with pytest.raises(BudgetError):
        Budget.parse(text)


def test_budgets_that_mean_something_still_parse():
    assert Budget.parse("1h30m") == Budget(5400.0, None)
    assert Budget.parse("2h, 500trials") == Budget(7200.0, 500)


@pytest.mark.parametrize("times", [(float("nan"),), (1.0, -0.5), (math.inf,), (10**400,)])
def test_a_measurement_with_invalid_times_is_a_failure_not_a_winner(times):
    m = Measurement(Config(a=1), Status.OK, times)
    assert m.status is Status.RUNTIME_ERROR and m.value == math.inf and "invalid" in m.error


def test_a_recorded_time_too_large_for_a_float_imports_as_a_failure(tmp_path, capsys):
    """A 400-digit integer in a Kernel Tuner cache was an OverflowError traceback."""
    import json

    cache = {"device_name": "X", "kernel_name": "k", "problem_size": [1],
             "tune_params_keys": ["a"], "tune_params": {"a": [1, 2, 3]},
             "cache": {str(a): {"a": a, "time": 1.0 + a, "compile_time": 5.0} for a in (1, 2, 3)}}
    cache["cache"]["2"]["time"] = 10**400
    cache["cache"]["3"]["compile_time"] = 10**400
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(cache))
    db = str(tmp_path / "i.db")
    assert main(["db", "import", str(path), "--db", db]) == 0
    with Database(db) as d:
        (w,) = d.workloads()
        got = {m.config["a"]: m for m in d.measurements(w)}
    assert got[1].ok and got[3].ok and not got[2].ok


def test_memory_database_is_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Database(":memory:") as db:
        assert db.path is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spec,says", [
    ("replay:", "needs its path"),
    (f"replay:{RECORDED}?bogus=1", "no option 'bogus'"),
    (f"replay:{RECORDED}?seed=abc", "options are"),
    (f"replay:{RECORDED.parent}", "is a directory"),
    ("cpu?repeats=0", "repeats 1-100,000"),
    # a signature error ("takes 1 positional argument"), and the default core taken silently
    ("cpu:x", r"takes nothing after ':' \(got 'x'\); options go after '\?'"),
    ("cpu:", "takes nothing after ':'"),
    ("riscv-sim:", "needs its core after ':': riscv-sim:CORE"),
    # NaN passed `timeout <= 0`: every trial then failed, and a later search skipped them all
    ("cpu?timeout=nan", "timeout 1-86,400"),
    ("cpu?timeout=1e-6", "timeout 1-86,400"),
    ("cpu?timeout=inf", "timeout 1-86,400"),
    ("cpu?flush_kb=99999999999", "flush_kb 0-4,194,304"),
    ("riscv-sim:x60?timeout=nan", "timeout 1-86,400"),
    ("cpu?repeats=1e9", "repeats 1-100,000"),
    (f"replay:{RECORDED}?noisy=maybe", "neither on nor off"),
    (f"replay:{RECORDED}?noisy=2", "neither on nor off"),
    (f"replay:{RECORDED}?noisy=", "neither on nor off"),
])
def test_target_specs_that_cannot_work_name_what_to_write(spec, says):
    with pytest.raises(TargetError, match=says):
        make_target(spec)


@pytest.mark.parametrize("value,noisy", [("off", False), ("0", False), ("false", False),
                                         ("no", False), ("on", True), ("1", True),
                                         ("true", True)])
def test_a_replay_is_noisy_only_when_told_so(value, noisy):
    """`noisy=off` once read as the non-empty string "off", that is as noisy: the search
    then drew single repeats and spent trials re-measuring."""
    assert make_target(f"replay:{RECORDED}?noisy={value}").noisy is noisy


def test_target_options_are_read_as_their_parameter_takes_them():
    """`cpu?cc=false` once read as the flag False, that is the default compiler, quietly: a
    compiler's name stays text; a flag must be one."""
    assert make_target("cpu?cc=false").cc.endswith("false")  # the program named false
    assert make_target("cpu?check=off").check is False and make_target("cpu?repeats=3").repeats == 3
    with pytest.raises(TargetError, match="check=true or check=false"):
        make_target("cpu?check=maybe")


@pytest.mark.parametrize("extra,says", [
    (["--batch", "-3"], "--batch -3"),
    (["--workers", "-1"], "--workers -1"),
    (["--batch", "1000000000"], "give a number <= 4096"),  # the strategy proposes them at once
    (["--workers", "100000"], "(processes, on this machine)"),
    (["--seed", "-1"], "--seed -1"),
    (["--budget", "0trials"], "allows no trial"),
    (["--shape", "M=4"], "drop the kernel and --shape"),
    (["--measure-timeout", "0"], "--measure-timeout"),
    (["--optuna-storage", ""], "--optuna-storage needs a storage URL"),  # once ignored
    (["--ray", "--workers", "4"], "with --ray, builds are Ray tasks"),  # once ignored
])
def test_search_arguments_that_would_run_nothing_are_errors(extra, says, tmp_path, capsys):
    rc = main(["search", "--target", f"replay:{RECORDED}", "--db", str(tmp_path / "x.db"),
               "-q", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and "Traceback" not in err
    assert not (tmp_path / "x.db").exists() or "--budget" in extra


def test_a_replay_given_a_kernel_is_refused_before_its_recording_is_read(tmp_path, capsys,
                                                                        monkeypatch):
    """The refusal came after the recording was read: 10 s for one of 83,000 points."""
    import tunex.targets

    def read(spec):
        raise AssertionError("the recording was read")

    monkeypatch.setattr(tunex.targets, "make_target", read)
    rc = main(["search", "matmul", "--target", f"replay:{RECORDED}", "--db",
               str(tmp_path / "x.db"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "drop the kernel and --shape" in err and "Traceback" not in err


def test_a_shape_naming_a_size_twice_is_refused():
    """`--shape M=4096,N=64,M=64` once tuned M=64 without a word about the first M."""
    from tunex.cli import _shape

    assert _shape("M=4,N=8,dtype=fp16") == {"M": 4, "N": 8, "dtype": "fp16"}
    with pytest.raises(TunexError, match="gives M twice"):
        _shape("M=4096,N=64, M=64")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_exits_130_and_keeps_every_finished_trial(tmp_path, sig):
    """Ctrl-C, or SIGTERM (kill, a batch system's time limit: it ended the search at once,
    its workers and claims left behind)."""
    db = tmp_path / "int.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunex.cli", "search", "--target", f"replay:{RECORDED}",
         "--budget", "100000trials", "--db", str(db), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # interrupt once trials are being recorded
        time.sleep(0.5)
        try:  # the search may be creating the database right now
            with Database(str(db), create=False) as d:
                if any(d.count(w) >= 5 for w in d.workloads()):
                    break
        except TunexError:
            pass
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "run again to resume" in err


@pytest.mark.parametrize("values", [
    [[1, 2], [3, 4]], [b"x", b"y"], [1j, 2j], [frozenset(), frozenset({1})], [object()],
    [1, 10**400], [1.0, math.inf], [(1, b"x")],
])
def test_a_choice_of_values_no_config_can_hold_is_a_space_error(values):
    """Unhashable values, and values that fail only once a trial is stored (bytes, objects:
    "not JSON serializable" mid-search) or encoded for the model (10**400: OverflowError)."""
    from tunex.errors import SpaceError
    from tunex.space import Choice

    with pytest.raises(SpaceError, match="a value a config cannot hold"):
        Choice("tile", values)


def test_numpy_values_of_a_space_are_held_as_python_values():
    import numpy as np

    from tunex.space import Choice, Space

    s = Space([Choice("tile", [*np.arange(1, 4), np.float32(0.5)])])
    assert [type(v) for v in s.param("tile").values] == [int, int, int, float]
    assert Config(tile=2) in s


def test_packs_are_readable_by_others_and_duplicate_keys_are_refused(tmp_path):
    import json as _json
    import stat

    from tunex.db.packs import export_pack, load_pack
    from tunex.errors import PackError
    from tunex.targets import make_target
    from tunex.tuner import Tuner

    target = make_target(f"replay:{RECORDED}")
    space, wl = target.prepare(None, {})
    with Database(str(tmp_path / "p.db")) as db:
        Tuner(target, space, workload=wl, db=db, strategy="random", budget="5trials",
              seed=0).run()
        export_pack(db, tmp_path / "p.json", name="p", version="1")
    mode = stat.S_IMODE((tmp_path / "p.json").stat().st_mode)
    assert mode & 0o044 == 0o044, oct(mode)  # group and others may read it
    text = (tmp_path / "p.json").read_text()
    doc = _json.loads(text)
    assert load_pack(tmp_path / "p.json").name == "p"
    dup = text.replace('"name": "p"', '"name": "p", "name": "p"', 1)
    assert dup != text
    (tmp_path / "dup.json").write_text(dup)
    with pytest.raises(PackError, match="appears twice"):
        load_pack(tmp_path / "dup.json")
    assert doc["name"] == "p"


def test_db_import_into_a_new_database_creates_it(tmp_path, capsys):
    src, new = tmp_path / "src.db", tmp_path / "new.db"
    assert main(["search", "--target", f"replay:{RECORDED}", "--budget", "4trials",
                 "--db", str(src), "-q"]) == 0
    assert main(["db", "export", "--db", str(src), "--format", "jsonl", "-o",
                 str(tmp_path / "t.jsonl")]) == 0
    assert main(["db", "import", str(tmp_path / "t.jsonl"), "--db", str(new)]) == 0
    assert "imported 4 trials" in capsys.readouterr().err
    assert main(["db", "best", "--db", str(tmp_path / "missing.db")]) == 2
    assert not (tmp_path / "missing.db").exists()


def test_a_pack_of_a_replayed_space_whose_problem_holds_a_list_verifies(tmp_path):
    """Replayed Kernel Tuner spaces key their problem by a list (problem_size): export must
    write a pack that verify and import accept (hardening, item 2)."""
    from tests._data import recorded
    from tunex.db.packs import export_pack, import_pack, load_pack
    from tunex.targets import make_target
    from tunex.tuner import Tuner

    target = make_target(f"replay:{recorded('convolution/A100.json.gz')}")
    space, wl = target.prepare(None, {})
    assert any(isinstance(v, list) for v in wl.problem.values())
    with Database(str(tmp_path / "a.db")) as db:
        Tuner(target, space, workload=wl, db=db, strategy="random", budget="5trials",
              seed=0).run()
        export_pack(db, tmp_path / "a.json", name="a", version="1")
    assert len(load_pack(tmp_path / "a.json").entries) == 1
    with Database(str(tmp_path / "b.db")) as db:
        assert import_pack(db, tmp_path / "a.json") == 1


def test_rerunning_a_finished_noisy_search_adds_no_trial(tmp_path):
    """The re-measurements of close leaders are part of the trial budget: a rerun of a
    finished search must not add them again (300 -> 304 -> 308 before; hardening, item 4)."""
    from tunex.targets import make_target
    from tunex.tuner import Tuner

    target = make_target(f"replay:{RECORDED}?noisy=1&seed=3")
    space, wl = target.prepare(None, {})
    with Database(str(tmp_path / "n.db")) as db:
        counts = []
        for _ in range(3):
            r = Tuner(target, space, workload=wl, db=db, strategy="random", budget="40trials",
                      seed=0).run()
            counts.append((r.trials, db.count(wl)))
    assert counts == [(40, 40)] * 3


@pytest.mark.parametrize("rule,says", [
    ("a < 9**9**9", "power"),
    ("len([0] * 10**9) > a", "sequence"),
    ("a < 1 << 10**6", "shifts"),
    # each power within the exponent's limit, the integer 128-fold longer at every step
    ("((((a + 1) ** 128) ** 128) ** 128) ** 128 > 0", "power"),
    ("(2 ** 100) ** 30 * (2 ** 100) ** 30 * (2 ** 100) ** 30 > a", "multiplies"),
    ("(2 ** 100) ** 40 << 100 > a", "shifts"),
])
def test_constraint_strings_cannot_exhaust_the_machine(rule, says):
    """Issue 11 item 5: these hung or reached 7.8 GB within 30 s; now a clear SpaceError."""
    from tunex.errors import SpaceError
    from tunex.space import Int, Space

    t0 = time.monotonic()
    with pytest.raises(SpaceError, match=says):
        _ = Space([Int("a", 1, 4)], [rule]).size
    assert time.monotonic() - t0 < 5


def test_guarded_operators_still_compute_what_kernels_write():
    from tunex.space import Int, Space

    s = Space([Int("a", 1, 8)], ["a ** 2 * 2 <= 2 ** 6", "(1 << a) <= 64", "a * 1.5 < 12"])
    assert s.size == 5


def test_a_space_of_10_to_the_24_points_samples():
    """numpy's int64 ended at 9.2e18 ("high is out of bounds for int64"; issue 11, item 6)."""
    from tunex.space import Int, Space

    s = Space([Int(f"p{i}", 0, 999) for i in range(8)])
    assert s.size == 1000**8
    picks = s.sample(50, rng=0)
    assert len(set(picks)) == 50 and all(c in s for c in picks)
    assert len(s.sample(5, rng=1, unique=False)) == 5
    # the high digits are drawn too, not only the low ones
    assert len({c["p7"] for c in picks}) > 20 and len({c["p0"] for c in picks}) > 20


# -- validation at every door: nothing that does not belong to a workload's space gets in -------


def _searched(tmp_path: Path, trials: int = 6):
    from tunex.tuner import Tuner

    target = make_target(f"replay:{RECORDED}")
    space, wl = target.prepare(None, {})
    db = Database(str(tmp_path / "v.db"))
    Tuner(target, space, workload=wl, db=db, strategy="random", budget=f"{trials}trials",
          seed=0).run()
    return target, space, wl, db


def _forged(space, good: dict, how: str) -> dict:
    first = next(p for p in space.params if all(isinstance(v, int) for v in p.values))
    bad = dict(good)
    if how == "string":
        bad[first.name] = str(bad[first.name])
    elif how == "missing":
        del bad[first.name]
    elif how == "extra":
        bad["EVIL"] = 1
    else:  # a value outside the parameter's domain
        bad[first.name] = max(v for v in first.values if isinstance(v, int)) * 1000 + 1
    return bad


@pytest.mark.parametrize("how", ["string", "missing", "extra", "range"])
def test_db_import_refuses_configs_outside_the_workloads_space(tmp_path, how, capsys):
    import json as _json

    _, space, wl, db = _searched(tmp_path)
    path = tmp_path / "t.json"
    db.export(path)
    records = _json.loads(path.read_text())
    forged = {**records[0], "config": _forged(space, records[0]["config"], how),
              "started_at": 1.0, "time_ms": 0.0001, "times_ms": [0.0001]}
    path.write_text(_json.dumps([*records, forged]))
    before = db.count(wl)
    rc = main(["db", "import", str(path), "--db", str(db.path)])
    err = capsys.readouterr().err
    assert rc != 0 and "record 7 does not belong" in err and "Traceback" not in err
    assert db.count(wl) == before  # all or nothing
    assert db.best(wl).value > 0.0001
    db.close()


@pytest.mark.parametrize("how", ["string", "missing", "extra"])
def test_import_into_a_database_that_does_not_know_the_space_checks_consistency(tmp_path, how):
    import json as _json

    from tunex.errors import DatabaseError

    _, space, _, db = _searched(tmp_path)
    path = tmp_path / "t.json"
    db.export(path)
    db.close()
    records = _json.loads(path.read_text())
    records.append({**records[0], "config": _forged(space, records[0]["config"], how),
                    "started_at": 1.0})
    path.write_text(_json.dumps(records))
    with Database(str(tmp_path / "fresh.db")) as fresh, pytest.raises(
            DatabaseError, match="record 7 does not belong"):
        fresh.import_trials(path)


def test_recording_a_config_outside_the_declared_space_is_refused(tmp_path):
    from tunex.errors import DatabaseError

    _, space, wl, db = _searched(tmp_path)
    good = space.sample(1, 0)[0]
    bad = Config(_forged(space, dict(good), "range"))
    with pytest.raises(DatabaseError, match="not in the workload's space"):
        db.record(wl, Measurement(bad, Status.OK, (0.0001,)))
    assert db.space(wl).size == space.size
    db.close()


def test_the_registry_checks_imports_of_library_kernels(tmp_path):
    """A fresh database importing trials of a library kernel checks them against the space the
    kernel registry binds for the workload (here sgemm on a RISC-V core, no toolchain needed)."""
    import json as _json

    from tunex.errors import DatabaseError
    from tunex.kernel import get_kernel, known_space
    from tunex.trial import Workload

    k = get_kernel("sgemm")
    key = k.problem_key({"M": 64, "N": 64, "K": 64})
    wl = Workload("sgemm", k.source_hash, key,
                  {"device": "riscv-sim:x280", "arch": "sifive-x280", "vlen": 512})
    space = known_space(wl)
    assert space is not None and space.is_bound
    good = space.sample(1, 0)[0]
    row = {"workload_spec": wl.to_dict(), "config": good.to_dict(), "status": "ok",
           "times_ms": [1.0], "started_at": 1.0, "ended_at": 2.0}
    bad_config = _forged(space, good.to_dict(), "range")
    path = tmp_path / "t.json"
    path.write_text(_json.dumps([row, {**row, "config": bad_config, "started_at": 3.0}]))
    with Database(str(tmp_path / "fresh.db")) as db:
        with pytest.raises(DatabaseError, match="record 2 does not belong"):
            db.import_trials(path)
        path.write_text(_json.dumps([row]))
        assert db.import_trials(path) == 1
        assert db.space(wl) is not None  # declared from the registry on the way in
    assert known_space(Workload("sgemm", "other-code", key, wl.target)) is None


def test_a_forged_pack_entry_outside_the_space_is_refused_on_import(tmp_path):
    import json as _json

    from tunex.db.packs import _checksum, export_pack, import_pack
    from tunex.errors import DatabaseError

    _, space, wl, db = _searched(tmp_path)
    export_pack(db, tmp_path / "p.json", name="p", version="1")
    doc = _json.loads((tmp_path / "p.json").read_text())
    entry = doc["entries"][0]
    entry["config"] = _forged(space, entry["config"], "extra")
    doc["checksum"] = _checksum({k: v for k, v in doc.items() if k != "checksum"})
    (tmp_path / "p.json").write_text(_json.dumps(doc))
    with pytest.raises((DatabaseError,), match="does not belong"):
        import_pack(db, tmp_path / "p.json")
    assert db.best(wl).value > 0.0001
    db.close()


def test_a_search_ignores_poisoned_rows_recorded_before_spaces_were_kept(tmp_path, caplog):
    """A database poisoned before this check existed (rows written straight into SQLite): the
    model search neither crashes in its feature encoding nor resumes from a foreign config."""
    import json as _json
    import sqlite3

    from tunex.tuner import Tuner

    target, space, wl, db = _searched(tmp_path)
    good = dict(space.sample(1, 0)[0])
    conn = sqlite3.connect(db.path)
    for n, config in enumerate([_forged(space, good, h) for h in ("string", "missing", "extra")]):
        conn.execute(
            "INSERT INTO trials (workload_id, number, config_key, config, status, value_ms, "
            "times_ms, facts, started_at, ended_at, recorded_at) VALUES "
            "(1, ?, ?, ?, 'ok', 0.0001, '[0.0001]', '{}', 0, 0, 0)",
            (100 + n, _json.dumps(config, sort_keys=True), _json.dumps(config)))
    conn.commit()
    conn.close()
    res = Tuner(target, space, workload=wl, db=db, strategy="model", budget="20trials",
                seed=1).run()
    assert "3 recorded trials of" in caplog.text and "not resumed" in caplog.text
    assert res.new_trials > 0
    db.close()


def _tied(n: int):
    from tunex.space import Choice, Space

    return lambda: Space([Choice(f"p{i}", list(range(10))) for i in range(n)],
                         [" + ".join(f"p{i}" for i in range(n)) + " < 40"])


def test_a_space_that_cannot_be_counted_in_reasonable_time_is_refused_at_once():
    from tunex.errors import SpaceError

    start = time.monotonic()
    with pytest.raises(SpaceError, match="Split such a constraint"):
        _tied(8)()  # 10^8 points behind one constraint over all eight parameters
    assert time.monotonic() - start < 5


def test_slow_space_building_shows_progress_and_stops_at_its_limit(monkeypatch, caplog):
    from tunex.errors import SpaceError
    from tunex.space import _space

    monkeypatch.setattr(_space, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setenv("TUNEX_SPACE_BUILD_S", "0.5")
    start = time.monotonic()
    with caplog.at_level("WARNING", logger="tunex"), pytest.raises(
            SpaceError, match=r"took over 0 s and was stopped.*TUNEX_SPACE_BUILD_S"):
        _tied(7)()
    assert time.monotonic() - start < 10
    assert "still counting the valid points" in caplog.text


@pytest.mark.parametrize("path, says", [
    ("os:getcwd", "is not a tunex Kernel class"),  # a function: it used to be called
    ("os:path", "is not a tunex Kernel class"),  # a module: "'module' object is not callable"
    ("tunex.kernel:CKernel", "the kernel class must define"),  # abstract: a TypeError
])
def test_a_registered_name_for_something_not_a_kernel_is_a_config_error(monkeypatch, path,
                                                                        says) -> None:
    """TUNEX_KERNELS (or an entry point) naming what is not a kernel class: one clear error,
    as for a spec given directly."""
    import tunex.kernel as registry

    registry._load()
    monkeypatch.setitem(registry._REGISTRY, "notakernel", path)
    with pytest.raises(ConfigError, match=says):
        registry.get_kernel("notakernel")
    assert "notakernel" not in registry._INSTANCES


def test_two_kernel_classes_of_one_module_and_one_name_are_refused(tmp_path) -> None:
    """Both hash to their module's source: the second one searched was answered with the
    first one's trials, its best config reported as a winner it never measured."""
    from tests.targets.test_cpu import USER_KERNEL
    from tunex.kernel import get_kernel

    (tmp_path / "twins.py").write_text(
        USER_KERNEL + "\n\nclass Faster(Triple):\n    pass\n")
    for cls, twin in (("Triple", "Faster"), ("Faster", "Triple")):
        with pytest.raises(ConfigError, match=f"{twin} of the same module is also named "
                                              "'user_triple'"):
            get_kernel(f"{tmp_path}/twins.py:{cls}")


def test_a_kernel_bucketing_a_size_by_an_unknown_rule_is_a_config_error() -> None:
    """It was a KeyError traceback on every search of the kernel."""
    from tests.targets._toy_c import ToyAxpy

    class Logged(ToyAxpy):
        buckets = {"N": "log2"}

    with pytest.raises(ConfigError, match="buckets give N the rule 'log2'; use one of exact"):
        Logged().problem_key({"N": 100})


def test_a_kernel_module_that_fails_to_import_is_one_line(tmp_path, monkeypatch) -> None:
    """Named as package.module:Class (TUNEX_KERNELS, an entry point, the command line), a
    module with a syntax error, or one raising or missing a package as it loads, was a
    traceback; named by its file it was already one line."""
    from tunex.kernel import get_kernel

    (tmp_path / "tx_syntax_mod.py").write_text("def f(:\n    pass\n")
    (tmp_path / "tx_raising_mod.py").write_text("import os\nraise RuntimeError('boom')\n")
    (tmp_path / "tx_needing_mod.py").write_text("import os\nimport tx_no_such_package\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="kernel module 'tx_syntax_mod' does not compile: "
                                          r"invalid syntax \(tx_syntax_mod.py, line 1\)"):
        get_kernel("tx_syntax_mod:K")
    with pytest.raises(ConfigError, match="kernel module 'tx_raising_mod' failed to load "
                                          r"\(line 2\): RuntimeError: boom"):
        get_kernel("tx_raising_mod:K")
    from tunex.cli import _load_kernel  # what tunex search names its kernel with
    from tunex.errors import TunexError

    with pytest.raises(TunexError, match="No module named 'tx_no_such_package'"):
        _load_kernel("tx_needing_mod:K")


@pytest.mark.parametrize("rule,says", [
    ("a" + " + a" * 3000 + " > 0", "characters long"),  # 24 KB: RecursionError before
    ("-" * 100_000 + "a < 0", "characters long"),
    ("not " * 2400 + "a", "nests over 100"),
    ("a" + " + a" * 500 + " > 0", "nests over 100"),
])
def test_a_constraint_too_long_or_deep_for_the_parser_is_a_space_error(rule, says):
    """Constraints come from recorded spaces, T1 definitions, imports and databases: one past
    what the parser and compiler recurse through raised RecursionError at each of them."""
    from tunex.errors import SpaceError
    from tunex.space import Int, Space

    with pytest.raises(SpaceError, match=says):
        Space([Int("a", 1, 4)], [rule])
    assert Space([Int("a", 1, 4)], ["(" * 40 + "a" + ")" * 40 + " > 1"]).size == 3


@pytest.mark.parametrize("values,says", [
    ("[foo]", "foo"),  # NameError
    ("[[1][5]]", "index"),  # IndexError
    ("[1 << 2**40]", "bits"),  # MemoryError, or gigabytes quietly
    ("[range]", "not a number"),  # a function, stored as its text in the database
    ("[1e999, 2]", "not a number"),  # inf
    ("[0 for a in " + str(list(range(100))) + " for b in " + str(list(range(100)))
     + " for c in " + str(list(range(100))) + " if 0]", "over 1,000,000"),  # a CPU hog
])
def test_a_t1_domain_that_names_nothing_or_would_exhaust_the_machine_is_refused(
        tmp_path, values, says):
    """A T1 definition beside a recording is read without asking: its domains' errors and
    bombs are one SpaceError, found in well under a second."""
    import json

    from tunex.errors import SpaceError
    from tunex.space import Space

    path = tmp_path / "def.json"
    path.write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [
        {"Name": "a", "Type": "int", "Values": values},
        {"Name": "b", "Type": "int", "Values": "[1, 2]"}], "Conditions": []}}))
    t0 = time.monotonic()
    with pytest.raises(SpaceError, match=f"not a readable T1 space definition.*{says}"):
        Space.from_t1(path)
    assert time.monotonic() - t0 < 5
    path.write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [
        {"Name": "a", "Type": "int", "Values": "[2**i for i in range(3) for j in [0] if 1]"},
        {"Name": "b", "Type": "int", "Values": "[1 << 3, 2 * 8]"}]}}))
    assert Space.from_t1(path).size == 6


@pytest.mark.parametrize("column,value,says", [
    ("config", "{bad json", "damaged trial"),
    ("config", '{"BLOCK": {"nested": 1}}', "damaged trial"),
    ("times_ms", '["1.0", "x"]', "damaged trial"),
    ("facts", "[1, 2]", "damaged trial"),
])
def test_a_row_damaged_outside_tunex_is_a_database_error(tmp_path, column, value, says,
                                                         capsys):
    """A database edited by other means: every reader says which trial is damaged and what
    to do, instead of a JSONDecodeError or TypeError from deep inside."""
    import sqlalchemy as sa

    from tunex.db import _schema as S
    from tunex.errors import DatabaseError
    from tunex.trial import Workload

    path = tmp_path / "t.db"
    w = Workload("k", "h", {"n": 1})
    with Database(path) as db:
        for b in (1, 2):
            db.record(w, Measurement(Config(BLOCK=b), Status.OK, (float(b),)))
        db._engine.dispose()
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(sa.update(S.trials).where(S.trials.c.number == 2).values(
            {column: value}))
    engine.dispose()
    with Database(path) as db, pytest.raises(DatabaseError, match=f"{says} \\(number 2"):
        db.trials(w)
    assert main(["db", "best", "--db", str(path)]) == 2
    assert "damaged trial" in capsys.readouterr().err


def test_a_timestamp_no_calendar_holds_exports_and_reports(tmp_path):
    """A damaged row's started_at of 1e300 or -1e18 is kept (the trial is not lost over it)
    and every export and the report still write."""
    import sqlalchemy as sa

    from tunex.trial import Workload

    path = tmp_path / "t.db"
    w = Workload("k", "h", {"n": 1})
    with Database(path) as db:
        for b in (1, 2, 3):
            db.record(w, Measurement(Config(BLOCK=b), Status.OK, (float(b),),
                                     started_at=10.0, ended_at=11.0))
        db._engine.dispose()
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        for n, when in ((1, 1e300), (2, -1e18), (3, "yesterday")):  # as raw SQL writes it
            conn.exec_driver_sql("UPDATE trials SET started_at = ? WHERE number = ?",
                                 (when, n))
    engine.dispose()
    for out in ("x.csv", "x.json"):
        assert main(["db", "export", "--db", str(path), "-o", str(tmp_path / out)]) == 0
    assert main(["report", "--db", str(path), "-o", str(tmp_path / "r.html")]) == 0
    with Database(path) as db:
        assert len(db.trials(w)) == 3


@pytest.mark.parametrize("spec,says", [("random:bogus", "has no variants"),
                                       ("model:x", "ranking objective")])
def test_a_strategy_variant_that_does_not_exist_is_refused(spec, says):
    from tunex.errors import StrategyError
    from tunex.search import get_strategy
    from tunex.space import Int, Space

    with pytest.raises(StrategyError, match=says):
        get_strategy(spec, Space([Int("a", 1, 4)]))


def test_a_kernel_name_with_terminal_escape_codes_is_refused(tmp_path, capsys):
    """An imported file's kernel name is printed by every listing: escape codes in it would
    drive the terminal, so such a name is refused where a workload is made, an import too."""
    import json

    from tunex.trial import Workload

    with pytest.raises(TypeError, match="printable"):
        Workload("mat\x1b[31mmul")
    src = tmp_path / "src.db"
    with Database(src) as db:
        db.record(Workload("matmul", "h", {"n": 1}), Measurement(Config(B=1), Status.OK, (1.0,)))
    out = tmp_path / "x.jsonl"
    assert main(["db", "export", "--db", str(src), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        row["workload_spec"]["kernel"] = "mat\x1b[31mmul"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["db", "import", str(out), "--db", str(tmp_path / "dst.db")]) == 2
    err = capsys.readouterr().err
    assert "printable" in err and "Traceback" not in err
