"""Fuzzing the doors (issue: hardening): random and mutated replay files, packs, database
exports, budgets, CLI arguments and constraint strings.

The property everywhere: a clear tunex error (``TunexError``, or exit code 2 with one line on
stderr) or a correct result; never a traceback, never a stored row that does not belong to its
workload's space. ``TUNEX_FUZZ_EXAMPLES`` sets the examples per door (CI: a bounded default).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tunex.cli import main  # noqa: E402
from tunex.db import Database  # noqa: E402
from tunex.errors import BudgetError, SpaceError, TunexError  # noqa: E402
from tunex.space import Choice, Int, Pow2, Space  # noqa: E402
from tunex.tuner import Budget  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "data" / "matmul_H200_1024x1024x1024.json.gz"
EXAMPLES = int(os.environ.get("TUNEX_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                derandomize="TUNEX_FUZZ_EXAMPLES" not in os.environ,  # CI: the same cases
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6,
)


def _slots(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*path, k)
            yield from _slots(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*path, i)
            yield from _slots(v, (*path, i))


def mutate(doc: Any, data: Any, max_edits: int = 3) -> Any:
    """``doc`` with 1..max_edits random edits: a value replaced by random JSON, a key or item
    deleted, a value copied over another."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, max_edits), label="edits")):
        slots = list(_slots(doc))
        if not slots:
            break
        path = data.draw(st.sampled_from(slots), label="where")
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        op = data.draw(st.sampled_from(["replace", "delete", "copy", "number"]), label="op")
        if op == "delete":
            del parent[path[-1]]
        elif op == "copy":
            other = data.draw(st.sampled_from(slots), label="from")
            value = doc
            try:
                for step in other:
                    value = value[step]
            except (KeyError, IndexError, TypeError):
                continue
            parent[path[-1]] = copy.deepcopy(value)
        elif op == "number":
            parent[path[-1]] = data.draw(st.sampled_from(
                [0, -1, 1, 2**63, -(2**70), 1e308, float("nan"), float("inf"), 0.5, "1", True]))
        else:
            parent[path[-1]] = data.draw(JSON, label="value")
    return doc


def assert_clear(rc: int, err: str) -> None:
    assert "Traceback" not in err, err[-3000:]
    assert rc in (0, 2), (rc, err[-2000:])
    if rc == 2:
        assert err.strip(), "an error exit must say why"


def assert_rows_belong(db_path: Path) -> None:
    """Every stored trial is a point of its workload's declared space."""
    if not db_path.exists():
        return
    with Database(db_path, create=False) as db:
        for w in db.workloads():
            space = db.space(w)
            for m in db.measurements(w):
                assert space is None or not space.violations(m.config), (w.kernel, m.config)


@pytest.fixture(scope="module")
def small_replay() -> dict[str, Any]:
    doc = json.loads(gzip.decompress(RECORDED.read_bytes()))
    keep = {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [32, 64],
            "GROUP_M": [1, 8], "num_warps": [4], "num_stages": [3, 4]}
    doc["tune_params"] = keep
    doc["cache"] = {k: v for k, v in doc["cache"].items()
                    if all(v[p] in vs for p, vs in keep.items())}
    assert len(doc["cache"]) >= 16
    return doc


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, small_replay: dict[str, Any]
             ) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    """A database searched on the small replay, its JSON export and its pack."""
    from tunex.db.packs import export_pack

    d = tmp_path_factory.mktemp("base")
    src = d / "small.json"
    src.write_text(json.dumps(small_replay))
    db = d / "base.db"
    assert main(["search", "--target", f"replay:{src}", "--budget", "8trials", "--db",
                 str(db), "-q", "--strategy", "random"]) == 0
    with Database(db) as handle:
        handle.export(d / "t.json")
        export_pack(handle, d / "p.json", name="p", version="1")
    return db, json.loads((d / "t.json").read_text()), json.loads((d / "p.json").read_text())


def _copy_db(src: Path, dst: Path) -> Path:
    with Database(src, create=False):
        pass  # the last connection to close checkpoints the WAL into the file
    dst.write_bytes(src.read_bytes())
    return dst


@FUZZ
@given(data=st.data())
def test_fuzz_replay_files(data, small_replay, tmp_path_factory, capsys) -> None:
    d = tmp_path_factory.mktemp("replay")
    doc = mutate(small_replay, data)
    path = d / "space.json"
    path.write_text(json.dumps(doc))
    rc = main(["search", "--target", f"replay:{path}", "--budget", "4trials", "--db",
               str(d / "x.db"), "-q", "--strategy", data.draw(st.sampled_from(
                   ["random", "model", "exhaustive"]))])
    assert_clear(rc, capsys.readouterr().err)
    assert_rows_belong(d / "x.db")


@FUZZ
@given(data=st.data())
def test_fuzz_db_imports(data, exported, tmp_path_factory, capsys) -> None:
    base, records, _ = exported
    d = tmp_path_factory.mktemp("imp")
    db = _copy_db(base, d / "x.db")
    path = d / "t.json"
    path.write_text(json.dumps(mutate(records, data)))
    before = _rows(db)
    rc = main(["db", "import", str(path), "--db", str(db)])
    assert_clear(rc, capsys.readouterr().err)
    assert_rows_belong(db)
    if rc != 0:
        assert _rows(db) == before  # all or nothing


@FUZZ
@given(data=st.data(), fix=st.booleans())
def test_fuzz_packs(data, fix, exported, tmp_path_factory, capsys) -> None:
    from tunex.db.packs import _checksum

    base, _, pack = exported
    d = tmp_path_factory.mktemp("pack")
    db = _copy_db(base, d / "x.db")
    doc = mutate(pack, data)
    if fix and isinstance(doc, dict):  # past the checksum, into the field checks
        doc["checksum"] = _checksum({k: v for k, v in doc.items()
                                     if k not in ("checksum", "signature")})
    path = d / "p.json"
    path.write_text(json.dumps(doc))
    for argv in (["pack", "verify", str(path)], ["pack", "show", str(path)],
                 ["pack", "import", str(path), "--db", str(db)]):
        rc = main(argv)
        assert_clear(rc, capsys.readouterr().err)
    assert_rows_belong(db)


def _rows(db: Path) -> int:
    with Database(db, create=False) as h:
        return sum(h.count(w) for w in h.workloads())


@FUZZ
@given(text=st.text(max_size=24) | st.from_regex(
    r"\A-?\d{0,4}(\.\d{0,3})?\s?(s|sec|m|min|h|d|t|trials?)?(,\s?-?\d{0,4}\s?(m|h|trials))?\Z"))
def test_fuzz_budgets(text) -> None:
    try:
        b = Budget.parse(text)
    except BudgetError as exc:
        assert str(exc)
        return
    assert b.seconds is not None or b.trials is not None
    assert b.seconds is None or b.seconds > 0
    assert b.trials is None or b.trials > 0


FLAGS = ["--budget", "--strategy", "--seed", "--batch", "--workers", "--shape", "--target",
         "--db", "--measure-timeout", "--build-timeout", "--sim-slots", "--devices", "-q", "-v",
         "--ray", "--format", "--workload", "--kernel", "-o", "--json", "--help", "--service"]
VALUES = ["3trials", "0", "-1", "abc", "1e9", "", "replay:", "replay:/nonexistent",
          "cpu?repeats=0", "model", "optuna:nope", "M=-4", "M=4,N", "2trials,1s", "nan",
          "999999999999999999999", ":memory:", "riscv-sim:z99", "postgresql://x@127.0.0.1:1/x"]
SUBCOMMANDS = [["search"], ["db", "export"], ["db", "best"], ["db", "workloads"],
               ["db", "import"], ["pack", "export"], ["pack", "verify"], ["pack", "show"],
               ["strategies"], ["nope"], []]


@FUZZ
@given(data=st.data())
def test_fuzz_cli_arguments(data, exported, tmp_path_factory, capsys) -> None:
    base, _, _ = exported
    d = tmp_path_factory.mktemp("cli")
    db = _copy_db(base, d / "x.db")
    argv = list(data.draw(st.sampled_from(SUBCOMMANDS)))
    words = data.draw(st.lists(st.sampled_from(FLAGS) | st.sampled_from(VALUES), max_size=6))
    argv += [w.replace("DB", str(db)) for w in words]
    if argv[:1] == ["search"]:
        argv += ["--budget", "3trials", "--target", f"replay:{RECORDED}", "--db", str(db)]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        rc = int(exc.code or 0)
    assert_clear(rc, capsys.readouterr().err)
    assert_rows_belong(db)


ATOMS = ["a", "b", "c", "M", "0", "1", "9", "2**62", "10**9", "-3", "1.5", "True", "None",
         "'x'", "[0]", "(1, 2)", "len", "max", "min", "abs", "__import__", "open", "a.real",
         "lambda: 1"]
OPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "<", "<=", "==", "!=",
       " and ", " or ", " if a else ", " in ", ","]


@FUZZ
@given(parts=st.lists(st.sampled_from(ATOMS) | st.sampled_from(OPS) | st.sampled_from(
    ["(", ")", "[", "]", "not ", "*", " for a in "]), min_size=1, max_size=9))
def test_fuzz_constraint_strings(parts) -> None:
    rule = "".join(parts)
    start = time.monotonic()
    try:
        space = Space([Pow2("a", 1, 64), Int("b", 0, 6), Choice("c", ["x", "y", 3])], [rule],
                      problem=["M"]).bind(M=4096)
        for config in space.sample(5, 0):
            assert config in space
    except SpaceError as exc:
        assert str(exc)
    except TunexError as exc:  # another tunex error is still a clear one
        assert str(exc)
    assert time.monotonic() - start < 10, rule
