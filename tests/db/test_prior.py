"""The prior tunex ships (tunex.db.prior): what it holds, what a search takes from it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests._data import recorded
from tunex import ConfigError, Database, Tuner
from tunex.db.prior import Prior
from tunex.errors import DatabaseError
from tunex.space import Choice, Space
from tunex.targets.replay import ReplayTarget
from tunex.trial import Config, Measurement, Status, Workload

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
H200 = "NVIDIA H200"


def test_the_shipped_prior_is_a_search_of_each_h200_recording():
    """It holds, for each of the library's 17 H200 recordings, a search of up to 100 trials
    under the workload the recording measured (named problem sizes, the device), every trial
    a recorded point with its recorded time, the recording's optimum found in most."""
    prior = Prior.shipped(H200)
    assert len(prior.workloads) == 17
    assert prior.kernels == ["flash_attention", "layernorm", "matmul", "matmul_tma", "softmax"]
    assert {w.device for w, _ in prior.workloads} == {H200}
    found = 0
    for path in sorted(DATA.glob("*_H200_*.json.gz")):
        recording = ReplayTarget(path)
        spec = recording.doc_meta["workload"]
        (w, ms), = [(w, ms) for w, ms in prior.workloads if w == Workload.from_dict(spec)]
        assert w.problem == spec["problem"] and prior.names[w] == set(recording.space.names)
        assert len({m.config for m in ms}) == len(ms) == min(100, len(recording.entries))
        for m in ms:
            assert m.ok == (recording.true_time(m.config) < float("inf"))
            if m.ok:
                assert m.value == pytest.approx(recording.true_time(m.config))
        found += min(m.value for m in ms if m.ok) == pytest.approx(recording.optimum())
    assert found >= 12

def test_on_another_device_the_prior_is_empty_without_being_read(monkeypatch):
    """A search on any other device pays nothing: no shipped file names it, so nothing is
    parsed (the parse is made to fail to show it is not reached)."""
    import tunex.db.prior as mod

    def boom() -> Prior:
        raise AssertionError("the shipped prior was read")

    monkeypatch.setattr(mod, "_shipped", boom)
    assert Prior.shipped("NVIDIA A100-PCIE-40GB").workloads == ()
    with pytest.raises(AssertionError, match="was read"):
        Prior.shipped(H200)


def test_related_takes_the_same_device_most_names_and_never_the_workload_itself():
    space_names = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"]

    def w(kernel: str, device: str, m: int = 64) -> Workload:
        return Workload(kernel, "h", {"M": m}, {"device": device})

    ok = [Measurement(Config({"BLOCK_M": 16}), Status.OK, (1.0,))]
    here, near, far, other = (w("mm", "gpu0"), w("mm2", "gpu0"), w("mm2", "gpu1"),
                              w("sm", "gpu0"))
    sibling = w("mm", "gpu0", 128)
    prior = Prior(((near, tuple(ok)), (far, tuple(ok)), (other, tuple(ok)), (here, tuple(ok)),
                   (sibling, tuple(ok))),
                  {near: frozenset(["BLOCK_M", "BLOCK_N", "BLOCK_K"]),
                   far: frozenset(space_names), other: frozenset(["BLOCK_N", "num_warps"]),
                   here: frozenset(space_names), sibling: frozenset(space_names)})
    taken = [x for x, _ in prior.related(here, space_names)]
    # the same kernel's first; another device, half the names or fewer, itself: left out
    assert taken == [sibling, near]
    assert [x for x, _ in prior.without({"mm"}).related(here, space_names)] == [near]


def test_a_db_export_is_a_prior_and_a_broken_one_says_which_file(tmp_path):
    space = Space([Choice("BLOCK", [16, 32, 64]), Choice("num_warps", [2, 4])])
    wl = Workload("k", "h", {"N": 4096}, {"device": "gpu0"})
    with Database(tmp_path / "a.db") as db:
        db.declare_space(wl, space)
        for i, c in enumerate(space):
            db.record(wl, Measurement(c, Status.OK, (1.0 + i,)))
        db.export(tmp_path / "t.jsonl.gz")
    prior = Prior.load(tmp_path / "t.jsonl.gz")
    assert prior.label == "t.jsonl.gz" and len(prior.workloads) == 1
    (got, ms), = prior.workloads
    assert got == wl and prior.names[wl] == {"BLOCK", "num_warps"}
    assert sorted(m.value for m in ms) == [1.0 + i for i in range(6)]
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"trial": 1}\n'))
    with pytest.raises(DatabaseError, match=r"prior .*bad\.jsonl\.gz.*the prior is not read"):
        Prior.load(bad)
    with pytest.raises(DatabaseError, match="cannot read"):
        Prior.load(tmp_path / "missing.jsonl")


def test_a_first_search_on_the_h200_starts_from_the_shipped_related_kernels(tmp_path):
    """A matmul replayed from an H200 recording, with an empty database, takes the shipped
    recordings of the other kernels that name most of its parameters (trusted less: guessed)
    and the matmul's own other workloads; the result says so. ``prior=False`` starts cold; a
    recording of another device is not touched; a bad value is refused."""
    target = ReplayTarget(DATA / "matmul_H200_512x4096x1024.json.gz")
    with Database(tmp_path / "p.db") as db:
        res = Tuner(target, target.space, db=db, strategy="model", seed=0,
                    budget="3trials", remeasure=0).run()
        tr = res.transfer
        assert tr is not None and tr["prior"]["label"] == "tunex's recordings"
        assert tr["prior"]["kernels"] == ["flash_attention", "matmul", "matmul_tma"]
        assert tr["workloads"] == tr["prior"]["workloads"] == 11  # 4 + 4 + 3, not itself
        assert tr["related"] == ["flash_attention", "matmul_tma"]
        assert tr["first"]  # their best configs came first
        from tunex.cli import _transfer_text

        assert ("11 of them from tunex's recordings of this device (--no-prior leaves them "
                "out)") in _transfer_text(tr, None)
        cold = Tuner(target, target.space, db=db, strategy="model", seed=0,
                     budget="3trials", remeasure=0, prior=False)
        assert cold.run().transfer is None  # the database holds only this workload
    kt = ReplayTarget(recorded("convolution/A100.json.gz"))
    assert Tuner(kt, kt.space, strategy="model", seed=0, budget="2trials",
                 remeasure=0).run().transfer is None
    with pytest.raises(ConfigError, match=r"Prior\.load"):
        Tuner(target, target.space, prior="tunex.jsonl")  # type: ignore[arg-type]


def test_a_replayed_tunex_recording_names_its_problem_as_the_search_did(tmp_path):
    """A tunex recording's replay has the problem its workload recorded ({"M": ...}); a
    Kernel Tuner cache, or a recording whose workload problem is not plain, keeps
    problem_size."""
    named = ReplayTarget(DATA / "softmax_H200_4096x1024.json.gz").workload()
    assert named.problem == {"M": 4096, "N": 1024, "dtype": "float16"}
    kt = ReplayTarget(recorded("convolution/A100.json.gz")).workload()
    assert set(kt.problem) == {"problem_size"}
    doc = json.loads(gzip.decompress((DATA / "softmax_H200_4096x1024.json.gz").read_bytes()))
    for odd in ({"M": {"nested": 1}}, {"M": float("nan")}, [], {}):
        doc["workload"]["problem"] = odd
        p = tmp_path / "odd.json"
        p.write_text(json.dumps(doc))
        assert ReplayTarget(p).workload().problem == {"problem_size": [4096, 1024]}
