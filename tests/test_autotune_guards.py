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



def test_an_index_recorded_for_one_config_list_is_not_read_for_another(db_path: Path  # noqa: F811
                                                                     ) -> None:
    # an index space's trials say config=1: with another list, config=1 is another config,
    # which was launched as the database's best though it was never measured
    def bench(call, config):
        call()
        return [2.0 if config["config"] == 0 else 1.0]

    first = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64}, maxnreg=128)]
    tuner, _ = make_add(db_path, configs=first, mode="on_miss", bench=bench)
    call_add(tuner, 100)
    assert tuner.last.source == "tuned" and tuner.best_config is first[1]
    same, _ = make_add(db_path, configs=list(first))  # the same list: its trials still count
    call_add(same, 100)
    assert same.last.source == "db" and same.best_config is first[1]
    changed = [first[0], triton.Config({"BLOCK": 128}, maxnreg=128), first[1]]
    k, _ = make_add(db_path, configs=changed)
    call_add(k, 100)
    assert k.last.source == "default" and k.best_config is changed[0]
    assert k.kernel_hash != tuner.kernel_hash == same.kernel_hash




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
