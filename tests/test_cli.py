"""The commands the issue names, run as a user would (in-process through main())."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests._data import recorded
from tunex.cli import main
from tunex.db import Database


def test_search_export_best_and_resume(tmp_path, capsys):
    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    db = tmp_path / "run.db"
    args = ["search", "--target", f"replay:{data}", "--strategy", "model", "--budget",
            "30trials", "--seed", "1", "--db", str(db)]
    assert main(args) == 0
    out = tmp_path / "trials.csv"
    assert main(["db", "export", "--db", str(db), "--format", "csv", "-o", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 30
    assert list(rows[0])[:7] == ["trial", "status", "time_ms", "between_method", "block_size_x",
                                 "tile_size", "use_method"]
    assert [int(r["trial"]) for r in rows] == list(range(1, 31))
    capsys.readouterr()
    assert main(["db", "best", "--db", str(db), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    oks = [float(r["time_ms"]) for r in rows if r["status"] == "ok"]
    assert best[0]["time_ms"] == pytest.approx(min(oks))
    # same command again with a larger budget: continues, never repeats a config
    args[args.index("30trials")] = "45trials"
    assert main(args) == 0
    with sqlite3.connect(db) as con:
        configs = con.execute("select config from trials").fetchall()
    assert len(configs) == 45 == len(set(configs))


def test_every_entry_point_defaults_to_one_database(tmp_path, monkeypatch, capsys):
    from tunex.db import Database, default_path
    from tunex.decorator._runtime import default_db_path

    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    monkeypatch.setenv("TUNEX_DB", str(tmp_path / "shared.db"))
    monkeypatch.chdir(tmp_path)
    assert main(["search", "--target", f"replay:{data}", "--budget", "3trials", "-q"]) == 0
    assert not (tmp_path / "tunex.db").exists()  # not ./tunex.db, as it once was
    with Database(default_path()) as db:
        assert default_path() == default_db_path() == str(tmp_path / "shared.db")
        assert len(db.workloads()) == 1
    capsys.readouterr()
    assert main(["db", "workloads"]) == 0 and "shared.db" in capsys.readouterr().out
    monkeypatch.delenv("TUNEX_DB")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == str(tmp_path / "home" / ".cache" / "tunex" / "tunex.db")


def test_quiet_output_is_json(tmp_path, capsys):
    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    assert main(["search", "--target", f"replay:{data}", "--budget", "5trials", "--db",
                 str(tmp_path / "q.db"), "-q", "--strategy", "random", "--seed", "0",
                 "--no-prior"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["trials"] == 5 and set(line["config"]) >= {"block_size_x", "tile_size"}
    assert "transfer" not in line  # no other workload of the kernel in the database


def test_a_kernel_tuner_kernel_on_a_new_gpu_starts_from_the_shipped_recordings(tmp_path,
                                                                              capsys):
    """pnpoly recorded on a GPU tunex ships nothing of, with an empty database: its first
    search starts from the shipped searches of pnpoly on the two GPUs of the FAIR hub and says
    so; --no-prior starts it cold."""
    import gzip

    doc = json.loads(gzip.decompress(recorded("pnpoly/RTX_2080_Ti.json.gz").read_bytes()))
    doc["device_name"] = "NVIDIA RTX A6000"
    data = tmp_path / "pnpoly_A6000.json"
    data.write_text(json.dumps(doc))
    db = str(tmp_path / "n.db")
    assert main(["search", "--target", f"replay:{data}", "--budget", "6trials", "--db", db,
                 "-q", "--seed", "0"]) == 0
    tr = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["transfer"]
    assert tr["prior"] == {"label": "the recordings tunex ships", "workloads": 2,
                           "kernels": ["cn_pnpoly"]}
    from tunex.db.prior import Prior

    shipped = Prior.shipped(kernel="cn_pnpoly")
    assert tr["used"] == 2 and tr["first"] and tr["trials"] == sum(
        len(ms) for w, ms in shipped.workloads if w.kernel == "cn_pnpoly")
    from tunex.cli import _transfer_text

    assert "2 of them from the recordings tunex ships (--no-prior leaves them out)" in \
        _transfer_text(tr, None)
    assert main(["search", "--target", f"replay:{data}", "--budget", "7trials", "--db",
                 str(tmp_path / "c.db"), "-q", "--seed", "0", "--no-prior"]) == 0
    assert "transfer" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_warm_start_is_shown_with_what_it_took(tmp_path, capsys):
    db = str(tmp_path / "w.db")
    for gpu in ("RTX_2080_Ti", "RTX_3060_laptop"):
        assert main(["search", "--target", f"replay:{recorded(f'pnpoly/{gpu}.json.gz')}",
                     "--budget", "12trials", "--db", db, "-q", "--seed", "0",
                     "--no-prior"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["transfer"]["used"] == 1 and line["transfer"]["trials"] == 12
    assert len(line["transfer"]["first"]) == 2
    data = recorded("pnpoly/RTX_3060_laptop.json.gz")
    assert main(["search", "--target", f"replay:{data}", "--budget", "14trials", "--db", db,
                 "--seed", "0", "--no-prior"]) == 0
    # the table, on stderr, its cells' lines joined
    table = " ".join("".join(capsys.readouterr()).replace("│", " ").split())
    assert "warm start from 1 of 1 other workload (12 trials)" in table
    # the first proposals: their model's best raced against their 2 best configs
    assert "the first proposals raced their model's best configs (" in table
    assert "against their own best (" in table and " of 2)" in table
    assert "--no-transfer: search cold" in table
    assert main(["search", "--target", f"replay:{data}", "--budget", "16trials", "--db", db,
                 "-q", "--no-transfer", "--no-prior"]) == 0
    assert "transfer" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_warm_start_takes_trials_of_an_older_space_of_the_kernel(tmp_path, capsys):
    """Kernel Tuner's convolution was recorded under two spaces: convolution_kt/'s older one,
    without ``use_shmem``, and convolution/'s. A search of the newer learns from the older's
    trials in the database and says so."""
    db = str(tmp_path / "v.db")
    assert main(["search", "--target",
                 f"replay:{recorded('convolution_kt/RTX_3090.json.gz')}", "--budget",
                 "12trials", "--db", db, "-q", "--seed", "0", "--no-prior"]) == 0
    capsys.readouterr()
    assert main(["search", "--target", f"replay:{recorded('convolution/A4000.json.gz')}",
                 "--budget", "4trials", "--db", db, "-q", "--seed", "0", "--no-prior"]) == 0
    tr = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["transfer"]
    assert tr["used"] == 1 and tr["other_space"] == 1 and tr["trials"] == 12
    assert tr["first"] == []  # none of its configs is a point of the newer space
    from tunex.cli import _transfer_text

    assert "1 of them recorded under another version of this space" in _transfer_text(tr, None)


def test_like_names_a_kernel_a_first_search_learns_from(tmp_path, capsys):
    S = ["search", "--no-prior"]  # what the database holds, not the kernels tunex ships
    data = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
    db = str(tmp_path / "l.db")
    assert main([*S, "--target", f"replay:{data / 'matmul_H200_1024x1024x1024.json.gz'}",
                 "--budget", "10trials", "--db", db, "-q", "--seed", "0"]) == 0
    tma = f"replay:{data / 'matmul_tma_H200_1024x1024x1024.json.gz'}"
    capsys.readouterr()
    # an empty database: nothing to start from
    assert main([*S, "--target", tma, "--budget", "2trials", "--db", db + "x", "-q"]) == 0
    assert "transfer" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # --no-related: the summary names the kernel it could start from, and uses nothing
    assert main([*S, "--target", tma, "--budget", "2trials", "--db", db + "y", "-q",
                 "--no-related"]) == 0
    assert main([*S, "--target", tma, "--budget", "2trials", "--db", db, "-q",
                 "--no-related"]) == 0
    tr = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["transfer"]
    assert tr == {"workloads": 0, "used": 0, "like_candidates": ["matmul"]}
    from tunex.cli import _transfer_text

    assert _transfer_text(tr, None).endswith("--like matmul")
    # by default the matmul measured on the same device starts it, trusted less than named
    assert main([*S, "--target", tma, "--budget", "4trials", "--db", db, "--seed", "0",
                 "-q"]) == 0
    tr = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["transfer"]
    assert tr["related"] == ["matmul"] and tr["used"] == 1 and tr["keep"] == "above"
    assert "of related kernels among them" in _transfer_text(tr, None)
    checked = {**tr, "rank_correlation": 0.0, "model_kept": False}
    assert ("(rank correlation; kernels related by their parameter names alone stay only while "
            "above chance), so their trials were dropped from it") in _transfer_text(checked, None)
    assert main([*S, "--target", tma, "--budget", "6trials", "--db", db, "--seed", "0",
                 "--like", "matmul", "-q"]) == 0
    tr = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["transfer"]
    assert tr["kernels"] == ["matmul"] and tr["used"] == 1
    assert "(10 trials; of kernels named by --like among them: matmul)" in _transfer_text(
        tr, None)
    # a second shape of matmul_tma: its own first shape, and matmul as a related kernel
    tma2 = f"replay:{data / 'matmul_tma_H200_4096x4096x4096.json.gz'}"
    plain = f"replay:{data / 'matmul_H200_1024x1024x1024.json.gz'}"
    for extra in ([], ["--no-related"]):
        db2 = str(tmp_path / f"r{len(extra)}.db")
        for target in (plain, tma):
            assert main([*S, "--target", target, "--budget", "20trials", "--db", db2,
                         "--strategy", "random", "--seed", "0", "-q"]) == 0
        capsys.readouterr()
        assert main([*S, "--target", tma2, "--budget", "3trials", "--db", db2, "--seed",
                     "0", "-q", *extra]) == 0
        tr = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["transfer"]
        if extra:
            assert tr["related"] == [] and tr["kernels"] == [] and tr["used"] == 1
        else:
            assert tr["related"] == ["matmul"] and tr["used"] == 2
            assert ("; of related kernels among them (their spaces name most of its "
                    "parameters; --no-related leaves them out): matmul)") in _transfer_text(
                tr, None)
            assert ("recorded under another space (an earlier version of this one, or another "
                    "kernel's)") in _transfer_text(tr, None)
    unusable = {"workloads": 1, "used": 0, "kernels": ["cn_pnpoly"],
                "left_out": {"no config in this space": 1}}
    assert _transfer_text(unusable, None) == (
        "1 other workload of this kernel or of cn_pnpoly (--like) in the database, none used: "
        "left out: no config in this space 1")


@pytest.mark.parametrize("argv,message", [
    (["search", "--target", "replay:/nonexistent.json.gz", "--db", "{db}"], "does not exist"),
    (["search", "--target", "replay:{data}", "--budget", "2 hours", "--db", "{db}"], "budget"),
    (["search", "--target", "replay:{data}", "--strategy", "magic", "--db", "{db}"],
     "unknown search strategy"),
    (["db", "best", "--db", "{missing}"], "--db"),
    (["db", "export", "--db", "{junk}"], "move it aside"),
    # --db "$DB" with DB unset blamed the current folder ("not a regular file ... move it aside")
    (["db", "best", "--db", ""], "--db is empty"),
    (["search", "sgemm", "--target", "cpu", "--shape", "M=64,N=64,K=99999999999999999999",
      "--db", "{db}"], "K=99999999999999999999 is too large"),
    (["search", "sgemm", "--target", "cpu", "--shape", "M=1000000,N=10000000,K=1000",
      "--db", "{db}"], "choose smaller sizes"),
])
def test_bad_input_gives_a_clear_error(tmp_path, capsys, argv, message):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 600)
    fill = {"db": str(tmp_path / "x.db"), "missing": str(tmp_path / "none.db"),
            "junk": str(junk), "data": str(recorded("pnpoly/RTX_2080_Ti.json.gz"))}
    assert main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tunex: error:") and message in err
    assert junk.read_bytes() == b"\x00garbage" * 600  # nothing lost or changed


@pytest.mark.parametrize("argv", [
    ["db", "export"], ["db", "export", "--format", "json"],
    ["db", "export", "--format", "kernel_tuner"], ["pack", "export"], ["report"],
])
@pytest.mark.parametrize("suffix", ["", "-wal", "hard link"])
def test_writing_an_export_over_the_database_itself_is_refused(tmp_path, capsys, argv, suffix):
    """`-o run.db` where `-o run.csv` was meant must not replace the database with its export,
    nor may a hard link to it (the same file under another name)."""
    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    db = tmp_path / "run.db"
    assert main(["search", "--target", f"replay:{data}", "--budget", "6trials", "--db",
                 str(db), "-q"]) == 0
    before = db.read_bytes()
    out = f"{db}{suffix}"
    if suffix == "hard link":
        out = str(tmp_path / "backup.db")
        os.link(db, out)
    assert main([*argv, "--db", str(db), "-o", out]) == 2
    err = capsys.readouterr().err
    assert "is the tuning database being read" in err and "Traceback" not in err
    assert db.read_bytes() == before
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from trials").fetchone() == (6,)


def test_names_and_values_with_brackets_print_as_written(tmp_path, capsys, monkeypatch):
    """A "[/]" in a kernel name, problem or config value (db import and recorded spaces take
    any text) was read as rich markup: db best, db workloads and pack show crashed with a
    MarkupError traceback, and "[red]" would have styled the rest instead of showing."""
    from tunex.db import Database, export_pack
    from tunex.trial import Config, Measurement, Status, Workload

    db = tmp_path / "odd.db"
    with Database(db) as d:
        d.record(Workload("k[/]x[red]", "h", {"M[/]": "v[/x]"}, {"device": "d[/]"}),
                 Measurement(Config(B=1, mode="[/]"), Status.OK, (1.0,)))
        export_pack(d, tmp_path / "odd.json", name="odd", version="1")
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "300")  # rich folds table cells to the width
    for argv in (["db", "best", "--db", str(db)], ["db", "workloads", "--db", str(db)],
                 ["pack", "show", str(tmp_path / "odd.json")]):
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        assert "k[/]x[red]" in out and "M[/]=v[/x]" in out and "d[/]" in out, out


@pytest.mark.parametrize("command", [["export"], ["export", "--format", "json"], ["best"],
                                     ["workloads"]])
def test_a_kernel_the_database_does_not_hold_is_an_error(tmp_path, capsys, command):
    """`db export --kernel matmull` wrote an empty file (a header) and exited 0, and db best
    said no successful trial was recorded yet: a misspelt kernel read as an empty result."""
    from tunex.db import Database
    from tunex.trial import Config, Measurement, Status, Workload

    db = tmp_path / "k.db"
    with Database(db) as d:
        d.record(Workload("matmul", "h", {"M": 1}, {"device": "x"}),
                 Measurement(Config(B=1), Status.OK, (1.0,)))
    out = tmp_path / "out.txt"
    argv = ["db", *command, "--db", str(db), "--kernel", "matmull"]
    assert main(argv + (["-o", str(out)] if command[0] == "export" else [])) == 2
    err = capsys.readouterr().err
    assert "no workload of kernel 'matmull'" in err and "its kernels: 'matmul'" in err
    assert not out.exists()
    assert main(["db", *command, "--db", str(db), "--kernel", "matmul"]) == 0


@pytest.mark.parametrize("fmt", ["csv", "kernel_tuner"])
def test_an_empty_workload_id_is_not_every_workload(tmp_path, capsys, fmt):
    """`db export --workload "$ID"` with an empty $ID exported every workload (csv), or asked
    for --workload ID (kernel_tuner), as if none had been given."""
    from tunex.db import Database
    from tunex.trial import Config, Measurement, Status, Workload

    db = tmp_path / "k.db"
    with Database(db) as d:
        d.record(Workload("matmul", "h", {"M": 1}, {"device": "x"}),
                 Measurement(Config(B=1), Status.OK, (1.0,)))
    out = tmp_path / "out"
    assert main(["db", "export", "--db", str(db), "--workload", "", "--format", fmt,
                 "-o", str(out)]) == 2
    assert "no workload ''" in capsys.readouterr().err and not out.exists()


def test_kernels_lists_what_search_can_tune_and_what_does_not_load(capsys, monkeypatch):
    import tunex.kernel as K

    K.available_kernels()  # the registry loaded, then a user's kernel and a broken one
    monkeypatch.setitem(K._REGISTRY, "toy_axpy", "tests.targets._toy_c:ToyAxpy")
    monkeypatch.setitem(K._REGISTRY, "broken_k", "tests.no_such_module:Nothing")
    # one whose space() forgot its return (as another test registers one)
    monkeypatch.setitem(K._REGISTRY, "no_space", "tests.targets._toy_c:ToyNoSpace")
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    assert "tunex search sgemm --shape M=...,N=...,K=..." in out
    assert "broken_k: does not load:" in out and "no_such_module" in out
    assert main(["kernels", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["sgemm"]["language"] == "c" and "LMUL" in rows["sgemm"]["parameters"]
    assert rows["matmul"]["targets"] == "triton_gpu" and rows["toy_axpy"]["dims"] == ["N"]
    assert "error" in rows["broken_k"] and "NoneType" in rows["no_space"]["error"]


def test_a_shape_given_one_size_per_flag_is_the_whole_shape(tmp_path, capsys):
    """`tunex kernels` lists `--shape M=...,N=...`; a user who gives --shape once per size got
    "missing ['M']" for an M they had given (only the last flag was kept)."""
    db = str(tmp_path / "s.db")
    args = ["search", "sgemm", "--target", "cpu", "--budget", "1trials", "--no-baseline",
            "--db", db, "-q"]
    assert main([*args, "--shape", "M=16", "--shape", "N=16", "--shape", "K=16"]) == 0
    assert main([*args, "--shape", "M=16,N=16,K=16"]) == 0  # the same workload: resumed
    with Database(db) as d:
        (w,) = d.workloads()
    assert {k: w.problem[k] for k in "MNK"} == {"M": 16, "N": 16, "K": 16}
    assert main([*args, "--shape", "M=16", "--shape", "M=32,N=16,K=16"]) == 2
    assert "gives M twice" in capsys.readouterr().err
    assert main(["kernels"]) == 0
    assert "--shape M=...,N=...,K=..." in capsys.readouterr().out
