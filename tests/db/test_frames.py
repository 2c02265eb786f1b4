"""Trials as data: to_dataframe, parquet export, export filters and readable timestamps."""

from __future__ import annotations

import csv
import datetime
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.db.test_database import CONV, MM, MM2, fill, ok
from tunex.cli import main
from tunex.db import Database, find_workloads, to_dataframe
from tunex.errors import DatabaseError
from tunex.trial import Config


@pytest.fixture
def db(tmp_path: Path):
    with Database(tmp_path / "frames.db") as d:
        yield d


def test_dataframe_has_one_typed_row_per_trial(db: Database) -> None:
    ms = fill(db)
    db.record(MM2, ok(Config(block=8, order=(0, 1, 2), vec=True, scale=0.1), 4.0))
    df = to_dataframe(db)
    assert len(df) == 8 and list(df["trial"]) == [1, 2, 3, 4, 5, 6, 1, 1]
    assert list(df.columns[:3]) == ["trial", "status", "time_ms"]
    assert str(df["block"].dtype) == "Int64" and str(df["vec"].dtype) == "boolean"
    assert str(df["scale"].dtype) == "Float64" and df["scale"].isna().sum() == 7
    assert df["order"][0] == (2, 0, 1)  # a permutation stays a tuple
    assert str(df["started_at"].dtype) == "datetime64[ns, UTC]"
    assert df["started_at"][0] == pd.Timestamp(ms[0].started_at, unit="s", tz="UTC")
    assert df["time_ms"][0] == ms[0].value and pd.isna(df["time_ms"][1])
    assert df["times_ms"][0] == ms[0].times_ms and df["repeats"][0] == 3
    assert json.loads(df["facts"][0]) == {"regs": 96, "smem": 49152, "spills": [0, 1]}
    assert df["problem"][0] == "M=1024 N=512 dtype=fp16" and df["kernel"][6] == "conv"
    assert df["config.status"][6] == "clash"  # a parameter named like a column
    assert list(df["status"]) == [m.status.value for m in ms] + ["ok", "ok"]


def test_dataframe_of_one_workload_by_digest_prefix(db: Database) -> None:
    fill(db)
    db.record(MM2, ok(Config(block=8, order=(0, 1, 2), vec=True), 4.0))
    assert len(to_dataframe(db, MM.digest[:6])) == 6
    assert len(to_dataframe(db, CONV)) == 1
    assert len(to_dataframe(db, kernel="matmul")) == 7
    assert set(to_dataframe(db, kernel="matmul")["workload"]) == {MM.digest, MM2.digest}
    with pytest.raises(DatabaseError, match="no workload 'ffff'"):
        find_workloads(db, "ffff")
    assert to_dataframe(Database(":memory:")).empty


def test_parquet_keeps_every_trial(db: Database, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    fill(db)
    db.record(MM2, ok(Config(block=8, order=(0, 1, 2), vec=True, scale=0.1), 4.0))
    path = tmp_path / "trials.parquet"
    assert db.export(path) == 8  # format from the suffix
    back = pd.read_parquet(path)
    df = to_dataframe(db)
    assert list(back.columns) == list(df.columns)
    for col in ("trial", "status", "time_ms", "block", "vec", "scale", "workload", "started_at",
                "ended_at", "recorded_at", "error", "strategy"):
        pd.testing.assert_series_equal(back[col], df[col], check_dtype=False)
    assert [tuple(v) for v in back["times_ms"]] == list(df["times_ms"])
    assert [tuple(v) for v in back["order"][:6]] == list(df["order"][:6])


def test_parquet_writes_a_column_of_mixed_types_as_json(db: Database, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    db.record(MM, ok(Config(tile=4), 1.0))
    db.record(CONV, ok(Config(tile="wide"), 2.0))
    db.export(tmp_path / "mixed.parquet")
    assert list(pd.read_parquet(tmp_path / "mixed.parquet")["tile"]) == ["4", '"wide"']


def test_cli_export_filters_and_readable_times(db: Database, tmp_path: Path, capsys) -> None:
    ms = fill(db)
    db.record(MM2, ok(Config(block=8, order=(0, 1, 2), vec=True), 4.0))
    url = str(db.path)
    out = tmp_path / "mm.csv"
    assert main(["db", "export", "--db", url, "--workload", MM.digest[:8], "-o", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 6 and {r["workload"] for r in rows} == {MM.digest}
    stamp = datetime.datetime.fromisoformat(rows[0]["started_at"])
    assert stamp.tzinfo is not None and stamp.timestamp() == pytest.approx(ms[0].started_at)
    capsys.readouterr()
    assert main(["db", "export", "--db", url, "--kernel", "matmul", "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7 and {json.loads(x)["kernel"] for x in lines} == {"matmul"}
    assert main(["db", "export", "--db", url, "--workload", "zzz"]) == 2
    assert "no workload 'zzz'" in capsys.readouterr().err
