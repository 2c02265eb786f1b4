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

def test_the_kernel_tuner_prior_is_a_search_of_each_hub_recording():
    """The second shipped prior holds, for each of the 13 Kernel Tuner recordings of the FAIR
    hub, a 100-trial search under the workload the replay measures (its kernel name, problem
    size and device) and the recording's 20 best configs, every trial a recorded point with
    its recorded time."""
    prior = Prior.shipped(kernel="convolution_kernel")
    assert prior.kernels == ["Xgemm", "cn_pnpoly", "convolution_kernel", "dedispersion_kernel"]
    assert len(prior.workloads) == 13
    paths = sorted(Path(recorded("convolution/A100.json.gz")).parent.parent.glob("*/*.json.gz"))
    assert len(paths) == 13
    for path in paths:
        recording = ReplayTarget(path)
        (w, ms), = [(w, ms) for w, ms in prior.workloads if w == recording.workload()]
        assert prior.names[w] == set(recording.space.names) and 100 <= len(ms) <= 120
        assert len({m.config for m in ms}) == len(ms)
        for m in ms[:20] + ms[-20:]:
            if m.ok:
                assert m.value == pytest.approx(recording.true_time(m.config))
        best = sorted((c for c in recording.space if recording.true_time(c) < float("inf")),
                      key=recording.true_time)[:20]
        assert {m.config for m in ms} >= set(best)


def test_the_rvv_prior_starts_a_search_of_its_kernels_at_a_new_size_from_the_others():
    """The third shipped prior holds, for each of the 12 RVV recordings (three kernels, two
    sizes, X60 and X280), a 100-trial search under the workload it measured; a first search
    of one of them replayed takes the kernel's three other workloads, never itself, and
    proposes their best configs first."""
    rvv = DATA / "riscv"
    prior = Prior.shipped(kernel="conv2d")
    ours = [(w, ms) for w, ms in prior.workloads if w.kernel in ("conv2d", "sgemm", "softmax_c")]
    assert len(ours) == 12 and all(len(ms) == 100 for _, ms in ours)
    assert {w.device for w, _ in ours} == {"riscv-sim:x60", "riscv-sim:x280"}
    target = ReplayTarget(rvv / "conv2d" / "x60-8x32x18x18.json.gz")
    res = Tuner(target, target.space, strategy="model", seed=0, budget="3trials",
                remeasure=0).run()
    tr = res.transfer
    assert tr is not None and tr["prior"]["workloads"] == 3 == tr["used"]  # not its own
    assert tr["prior"]["kernels"] == ["conv2d"] and tr["first"]


def test_a_search_reads_only_the_shipped_files_that_name_its_device_or_kernel(monkeypatch):
    """A search of another kernel on another device pays nothing: no shipped file names
    either, so nothing is parsed (the parse is made to fail to show it is not reached); one on
    the H200 reads the H200 file alone, one of Kernel Tuner's convolution on any GPU the
    hub's."""
    import tunex.db.prior as mod

    read: list[tuple[str, ...]] = []

    def spy(paths: tuple[Path, ...]) -> Prior:
        read.append(tuple(p.name for p in paths))
        return Prior()

    monkeypatch.setattr(mod, "_shipped", spy)
    assert Prior.shipped("AMD Instinct MI300X", "rowsum").workloads == () and read == []
    Prior.shipped(H200, "rowsum")
    Prior.shipped("NVIDIA GeForce RTX 4090", "convolution_kernel")
    Prior.shipped(H200, "convolution_kernel")
    Prior.shipped("riscv-sim:x60", "rowsum")
    assert read == [("h200_triton.jsonl.gz",), ("kernel_tuner_hub.jsonl.gz",),
                    ("h200_triton.jsonl.gz", "kernel_tuner_hub.jsonl.gz"),
                    ("riscv_rvv.jsonl.gz",)]


def test_related_takes_the_kernel_anywhere_others_on_the_device_and_never_itself():
    space_names = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"]

    def w(kernel: str, device: str, m: int = 64) -> Workload:
        return Workload(kernel, "h", {"M": m}, {"device": device})

    ok = [Measurement(Config({"BLOCK_M": 16}), Status.OK, (1.0,))]
    here, near, far, other = (w("mm", "gpu0"), w("mm2", "gpu0"), w("mm2", "gpu1"),
                              w("sm", "gpu0"))
    sibling, abroad, unnamed = w("mm", "gpu0", 128), w("mm", "gpu1"), w("mm2", "")
    prior = Prior(tuple((x, tuple(ok)) for x in (near, far, other, here, sibling, abroad,
                                                  unnamed)),
                  {near: frozenset(["BLOCK_M", "BLOCK_N", "BLOCK_K"]),
                   far: frozenset(space_names), other: frozenset(["BLOCK_N", "num_warps"]),
                   here: frozenset(space_names), sibling: frozenset(space_names),
                   abroad: frozenset(space_names), unnamed: frozenset(space_names)})
    # the same kernel's first, from any device; another kernel's only from this device (an
    # unnamed device is nobody's); half the names or fewer, itself: left out
    assert [x for x, _ in prior.related(here, space_names)] == [sibling, abroad, near]
    assert [x for x, _ in prior.related(w("mm", ""), space_names)] == [here, sibling, abroad]
    assert [x for x, _ in prior.without({"mm"}).related(here, space_names)] == [near]
    # less the held-out workload's kernel, problem and device, whatever its source hash
    twin = Workload("mm", "other-hash", {"M": 64}, {"device": "gpu0"})
    assert [x for x, _ in prior.without(like=twin).related(twin, space_names)] == [
        sibling, abroad, near]


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
        assert tr is not None and tr["prior"]["label"] == "the recordings tunex ships"
        assert tr["prior"]["kernels"] == ["flash_attention", "matmul", "matmul_tma"]
        # 3 other matmuls, 4 matmul_tma, 3 flash attention: not the recording replayed,
        # whose own search the prior holds under the source hash it measured
        assert tr["workloads"] == tr["prior"]["workloads"] == 10
        assert tr["related"] == ["flash_attention", "matmul_tma"]
        assert tr["first"]  # their best configs came first
        from tunex.cli import _transfer_text

        assert ("10 of them from the recordings tunex ships (--no-prior leaves them out)"
                in _transfer_text(tr, None))
        cold = Tuner(target, target.space, db=db, strategy="model", seed=0,
                     budget="3trials", remeasure=0, prior=False)
        assert cold.run().transfer is None  # the database holds only this workload
    kt = ReplayTarget(recorded("convolution/A100.json.gz"))  # no H200 kernel in its space
    assert "h200_triton" not in str(Tuner(kt, kt.space, strategy="model", seed=0,
                                          budget="1trials", remeasure=0)._prior().label)
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


@pytest.mark.parametrize("name", ["matmul/matmul_H100_512x4096x1024",
                                  "matmul_tma/matmul_tma_H100_4096x4096x4096",
                                  "matmul_tma/matmul_tma_H100_512x4096x1024",
                                  "flash_attention/flash_attention_H100_1x32x4096x128"])
def test_a_first_search_on_an_h100_takes_the_h200_searches_and_its_first_trial_is_good(
        tmp_path, name):
    """The library kernels recorded on an H100 (a device the prior does not hold): a first
    search takes the same kernel's H200 searches, and its first trial, the H200's best
    config at the same shape, is within 95% of the H100's optimum; without the prior it is
    a point of the space-filling start, below 95% here (cold, these spaces take 15-38
    trials; benchmarks/RESULTS.md, "the five library Triton kernels on an H100")."""
    target = ReplayTarget(DATA / "h100" / f"{name}.json.gz")
    assert "H100" in target.workload().device
    share = {}
    for prior in (True, False):
        with Database(tmp_path / f"{prior}.db") as db:
            res = Tuner(target, target.space, db=db, strategy="model", seed=0,
                        budget="1trials", remeasure=0, prior=prior).run()
            tr = res.transfer
            if prior:
                assert tr is not None and tr["prior"]["workloads"] >= 3
                assert name.split("/")[0] in tr["prior"]["kernels"]
            else:
                assert tr is None
            (first,) = db.measurements(res.workload)
        share[prior] = target.optimum() / target.true_time(first.config)
    assert share[True] >= 0.95 > share[False]
