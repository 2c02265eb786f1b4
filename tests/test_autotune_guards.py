"""Decorator behaviour the rest of the suite could not see break (issue: hardening, mutation
gaps): a search where every trial fails must not read as tuned, the built-in timer must give
times, and a pack's config outside the kernel's space is never launched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_autotune import CONFIGS, call_add, clean_env, db_path, make_add  # noqa: F401
from tunex.db import Database
from tunex.db.packs import _checksum, export_pack
from tunex.trial import Config

triton = pytest.importorskip("triton")


def trials(path: Path) -> list:
    with Database(path, create=False) as d:
        return [t for w in d.workloads() for t in d.trials(w)]


def test_an_index_space_search_measures_its_configs(db_path: Path) -> None:  # noqa: F811
    configs = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64}, maxnreg=128)]
    timed = []

    def bench(call, config):  # an index space hands the bench the config's index
        call()
        timed.append(config["config"])
        return [2.0 if config["config"] == 0 else 1.0]

    k, _ = make_add(db_path, configs=configs, mode="on_miss", bench=bench)
    assert k.space.names == ("config",)
    assert k.launch_kwargs(Config(config=1))["maxnreg"] == 128
    call_add(k, 100)
    got = trials(db_path)
    assert got and all(t.measurement.ok for t in got), [t.measurement.error for t in got]
    assert sorted(set(timed)) == [0, 1]
    assert k.last.source == "tuned" and k.last.config["config"] == 1  # BLOCK=64 is faster





def test_the_built_in_timer_gives_times(db_path: Path) -> None:  # noqa: F811
    k, _ = make_add(db_path, mode="on_miss", bench=None, warmup=1, rep=1)
    call_add(k, 256)
    got = trials(db_path)
    assert got and all(t.measurement.ok and len(t.measurement.times_ms) >= 1 for t in got), \
        [(t.measurement.status, t.measurement.error) for t in got]
    assert k.last.source == "tuned"


def test_a_pack_config_outside_the_space_is_never_launched(db_path: Path, tmp_path: Path,  # noqa: F811
                                                           caplog) -> None:
    from tunex.decorator import load_packs

    tuner, _ = make_add(db_path, mode="on_miss")
    call_add(tuner, 1000)
    with Database(db_path) as d:
        export_pack(d, tmp_path / "p.json", name="p", version="1")
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["entries"][0]["config"]["BLOCK"] = 8192  # not one of CONFIGS
    doc["checksum"] = _checksum({k: v for k, v in doc.items() if k != "checksum"})
    (tmp_path / "p.json").write_text(json.dumps(doc))
    k, _ = make_add(tmp_path / "fresh.db")
    load_packs(tmp_path / "p.json")
    with caplog.at_level("WARNING", logger="tunex.autotune"):
        call_add(k, 1000)
    assert k.last.source != "pack" and k.last.config["BLOCK"] != 8192
    assert "not in the kernel's space" in caplog.text
