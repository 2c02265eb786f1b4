"""Config packs: export, verify, import, runtime resolution order, refusal of bad packs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunex.cli import main
from tunex.db import Database
from tunex.db.packs import (
    PACK_FORMAT,
    PACK_SCHEMA,
    Pack,
    PackEntry,
    _checksum,
    export_pack,
    import_pack,
    load_pack,
    rank_workloads,
    resolve,
    target_arch,
)
from tunex.errors import PackError, TunexError
from tunex.trial import Config, Measurement, Status, Workload

H200 = {"device": "NVIDIA H200", "arch": "sm_90", "triton": "3.6.0"}
H100 = {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "triton": "3.6.0"}
A100 = {"device": "NVIDIA A100-SXM4-80GB", "arch": "sm_80", "triton": "3.6.0"}


def wl(M: int = 1024, target: dict | None = None, kernel: str = "matmul", h: str = "abc",
       dtype: str = "float16") -> Workload:
    return Workload(kernel, h, {"M": M, "N": 1024, "a.dtype": dtype}, target or H200)


def ok(block: int, *times: float) -> Measurement:
    return Measurement(Config(BLOCK=block, num_warps=4), Status.OK, times,
                       facts={"cuda": "13.0"}, started_at=100.0 + block, ended_at=101.0 + block)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    d = Database(tmp_path / "src.db")
    d.record(wl(1024), ok(64, 2.0, 2.1, 1.9))
    d.record(wl(1024), ok(128, 1.0, 1.2, 1.1, 0.9, 1.0))  # the best of M=1024
    d.record(wl(1024), Measurement.failed(Config(BLOCK=256, num_warps=4), Status.PRUNED, "smem"))
    d.record(wl(4096), ok(256, 3.0))
    d.record(wl(1024, kernel="softmax"), ok(32, 0.5, 0.6))
    yield d
    d.close()


@pytest.fixture
def pack_path(db: Database, tmp_path: Path) -> Path:
    path = tmp_path / "mylib.json"
    export_pack(db, path, name="mylib", version="1.2")
    return path


def rewrite(path: Path, change, *, fix_checksum: bool) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    if fix_checksum:
        doc["checksum"] = _checksum({k: v for k, v in doc.items()
                                     if k not in ("checksum", "signature")})
    path.write_text(json.dumps(doc))


# -- round trip --------------------------------------------------------------------------------


def test_export_holds_best_config_per_workload_with_stats(db: Database, tmp_path: Path) -> None:
    pack = export_pack(db, tmp_path / "p.json", name="mylib", version="1.2")
    assert pack.label == "mylib-1.2"
    assert len(pack.entries) == 3
    best = next(e for e in pack.entries if e.workload == wl(1024))
    assert best.config == Config(BLOCK=128, num_warps=4)
    assert best.median_ms == pytest.approx(1.0)
    assert best.repeats == 5 and best.trials == 3
    assert best.min_ms == pytest.approx(0.9) and best.max_ms == pytest.approx(1.2)
    assert best.spread == pytest.approx(db.best(wl(1024)).spread)
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["format"] == PACK_FORMAT and doc["schema"] == PACK_SCHEMA
    assert doc["checksum"].startswith("sha256:")
    prov = doc["provenance"]
    assert prov["triton"] == ["3.6.0"] and prov["cuda"] == ["13.0"] and prov["tunex"]
    assert {"device": "NVIDIA H200", "arch": "sm_90"} in prov["devices"]


def test_export_one_kernel(db: Database, tmp_path: Path) -> None:
    pack = export_pack(db, tmp_path / "p.json", kernel="softmax", name="x", version="1")
    assert [e.workload.kernel for e in pack.entries] == ["softmax"]


@pytest.mark.parametrize("name, version", [(" ", "1"), ("x", "\n"), ("x", 1.2), (None, "1")])
def test_a_pack_needs_a_name_and_version_as_text(db: Database, tmp_path: Path, name,
                                                 version) -> None:
    with pytest.raises(PackError, match="a pack needs a name and a version"):
        export_pack(db, tmp_path / "p.json", name=name, version=version)
    assert not (tmp_path / "p.json").exists()


def test_a_pack_loaded_again_replaces_itself(pack_path: Path) -> None:
    from tunex.decorator._runtime import clear_packs, load_packs, loaded_packs

    clear_packs()
    try:
        load_packs(pack_path)
        load_packs(pack_path)  # once listed twice, consulted twice
        assert len([p for p in loaded_packs() if p.name == "mylib"]) == 1
    finally:
        clear_packs()


def test_export_nothing_is_an_error(tmp_path: Path) -> None:
    with Database(tmp_path / "empty.db") as d, pytest.raises(PackError, match="nothing to export"):
        export_pack(d, tmp_path / "p.json", name="x", version="1")
    assert not (tmp_path / "p.json").exists()


def test_export_leaves_out_a_workload_its_loader_would_refuse(db: Database, tmp_path: Path,
                                                              caplog) -> None:
    # a call keyed n=nan (recorded as the decorator met it) made tunex pack export write a
    # pack that load_pack refuses whole ("NaN is not allowed in a pack")
    nan = Workload("matmul", "abc", {"M": float("nan"), "N": 1024, "a.dtype": "float16"}, H200)
    db.record(nan, ok(64, 1.0))
    order = Workload("loops", "def", {"M": 64}, H200)  # a tuple (a Permutation) is a list there
    db.record(order, Measurement(Config(order=(2, 0, 1)), Status.OK, (1.0,)))
    pack = export_pack(db, tmp_path / "p.json", name="mylib", version="1.2")
    assert len(pack.entries) == 4 and nan not in [e.workload for e in pack.entries]
    assert load_pack(tmp_path / "p.json").entries == pack.entries
    assert "left out" in caplog.text and nan.digest in caplog.text
    with Database(tmp_path / "nan.db") as only:
        only.record(nan, ok(64, 1.0))
        with pytest.raises(PackError, match="no workload a pack can hold"):
            export_pack(only, tmp_path / "q.json", name="x", version="1")
    assert not (tmp_path / "q.json").exists()


def test_a_pack_that_cannot_be_written_leaves_no_temporary_file(db: Database,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()  # -o naming a directory: the final rename fails
    with pytest.raises(PackError, match="cannot write pack"):
        export_pack(db, tmp_path / "out", name="x", version="1")
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_load_round_trip(pack_path: Path) -> None:
    pack = load_pack(pack_path)
    again = load_pack(pack_path)
    assert pack.entries == again.entries
    assert pack.to_dict()["checksum"] == pack.checksum
    assert pack.kernels() == {"matmul": {"abc"}, "softmax": {"abc"}}


def test_import_round_trip_and_idempotent(pack_path: Path, tmp_path: Path) -> None:
    with Database(tmp_path / "dst.db") as dst:
        assert import_pack(dst, pack_path) == 3
        best = dst.best(wl(1024))
        assert best is not None and best.config == Config(BLOCK=128, num_warps=4)
        assert best.value == pytest.approx(1.0)
        assert best.facts["pack"] == "mylib-1.2" and best.facts["repeats"] == 5
        assert dst.trials(wl(1024))[0].strategy == "pack:mylib-1.2"
        assert import_pack(dst, pack_path) == 0  # nothing new the second time
        assert dst.count(wl(1024)) == 1


def test_a_pack_imported_where_it_came_from_adds_nothing(db: Database, pack_path: Path) -> None:
    """Each workload gained a second trial of its best config (21 trials of 20 configs), and a
    trial budget resumed there ran one trial fewer."""
    before = {w: db.count(w) for w in db.workloads()}
    assert import_pack(db, pack_path) == 0
    assert {w: db.count(w) for w in db.workloads()} == before


def test_a_refused_pack_import_names_the_pack(pack_path: Path, tmp_path: Path) -> None:
    # it named "<file>: record 1", the in-memory document the pack's entries went through
    from tunex.errors import DatabaseError
    from tunex.space import Choice, Space

    with Database(tmp_path / "dst.db") as dst:
        dst.declare_space(wl(1024), Space([Choice("BLOCK", [32, 64]), Choice("num_warps", [4])]))
        with pytest.raises(DatabaseError, match=rf"^config pack {pack_path}: record \d+ does "
                                                r"not belong .*BLOCK=128 is not one of"):
            import_pack(dst, pack_path)
        assert dst.count(wl(1024)) == 0


def test_entry_measurement_keeps_median_and_spread(db: Database) -> None:
    m = db.best(wl(1024))
    e = PackEntry.from_measurement(wl(1024), m, 3)
    back = e.measurement()
    assert back.value == pytest.approx(m.value)
    assert back.spread == pytest.approx(m.spread)


# -- refusals ----------------------------------------------------------------------------------


def test_tampered_pack_is_refused(pack_path: Path) -> None:
    def faster(doc: dict) -> None:
        doc["entries"][0]["config"]["BLOCK"] = 16

    rewrite(pack_path, faster, fix_checksum=False)
    with pytest.raises(PackError, match=r"checksum.*re-export"):
        load_pack(pack_path)


@pytest.mark.parametrize("change, match", [
    (lambda d: d["entries"][0].pop("config"), "lacks"),
    (lambda d: d["entries"][0]["stats"].__setitem__("median_ms", "fast"), "not a number"),
    (lambda d: d["entries"][0]["config"].__setitem__("BLOCK", {"__reduce__": "os.system"}),
     "not a plain value"),
    (lambda d: d["entries"][0].__setitem__("problem", [1, 2]), "not an object"),
    (lambda d: d["entries"].append(dict(d["entries"][0])), "appears twice"),
    # a JSON integer of 400 digits: an OverflowError traceback, not a malformed pack
    (lambda d: d["entries"][0].__setitem__("trials", 10**400), "not a finite"),
    (lambda d: d["entries"][0]["stats"].__setitem__("median_ms", 10**400), "not a finite"),
    (lambda d: d.__setitem__("extra", 1), "unknown top-level"),
    (lambda d: d.__setitem__("name", ""), "name"),
])
def test_malformed_pack_is_refused(pack_path: Path, change, match: str) -> None:
    rewrite(pack_path, change, fix_checksum=True)
    with pytest.raises(PackError, match=f"malformed.*{match}|{match}"):
        load_pack(pack_path)


def test_newer_schema_is_refused(pack_path: Path) -> None:
    rewrite(pack_path, lambda d: d.__setitem__("schema", PACK_SCHEMA + 1), fix_checksum=True)
    with pytest.raises(PackError, match=r"newer tunex.*upgrade"):
        load_pack(pack_path)


@pytest.mark.parametrize("text, match", [
    ("{not json", "not valid JSON"),
    ('{"format": "something else"}', "not a tunex config pack"),
    ('[1, 2]', "not a tunex config pack"),
    ('{"format": "tunex.pack", "schema": 1, "x": NaN}', "not valid JSON"),
])
def test_not_a_pack_is_refused(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(PackError, match=match):
        load_pack(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="cannot read"):
        load_pack(tmp_path / "nope.json")


def test_other_kernel_source_is_refused(pack_path: Path, tmp_path: Path) -> None:
    with pytest.raises(PackError, match=r"source hash.*re-tune"):
        load_pack(pack_path, kernel_hashes={"matmul": "def"})
    load_pack(pack_path, kernel_hashes={"matmul": "abc", "other": "zzz"})  # fine
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(PackError):
            import_pack(dst, pack_path, kernel_hashes={"matmul": "def"})
        assert dst.workloads() == []


@pytest.mark.parametrize("change", [
    lambda d: d["entries"][-1]["stats"].__setitem__("repeats", 0),
    lambda d: d["entries"][-1].__setitem__("trials", -1),
])
def test_bad_pack_imports_nothing(pack_path: Path, tmp_path: Path, change) -> None:
    rewrite(pack_path, change, fix_checksum=True)  # only the last entry is bad
    with Database(tmp_path / "dst.db") as dst:
        with pytest.raises(PackError):
            import_pack(dst, pack_path)
        assert dst.workloads() == []


def test_import_is_one_transaction(pack_path: Path, tmp_path: Path, monkeypatch) -> None:
    with Database(tmp_path / "dst.db") as dst:
        import tunex.db._database as D

        real = D._trial_values
        calls = []

        def fail_on_third(*a, **k):
            calls.append(1)
            if len(calls) == 3:
                raise ValueError("disk on fire")
            return real(*a, **k)

        monkeypatch.setattr(D, "_trial_values", fail_on_third)
        with pytest.raises(ValueError):
            import_pack(dst, pack_path)
        monkeypatch.undo()
        assert dst.workloads() == [] or all(dst.count(w) == 0 for w in dst.workloads())


# -- resolution --------------------------------------------------------------------------------


def make_pack(*entries: tuple[Workload, int], name: str = "p") -> Pack:
    return Pack(name, "1", tuple(
        PackEntry(w, Config(BLOCK=b), 1.0, 0.0, 1, 1.0, 1.0, 1.0, 1.0, 1, 0.0)
        for w, b in entries))


def test_resolution_order_exact_device_then_arch_then_nearest() -> None:
    pack = make_pack((wl(2048, H200), 1), (wl(1024, H100), 2), (wl(1024, H200), 3),
                     (wl(1024, A100), 4))
    m = pack.resolve(wl(1024, H200))
    assert m is not None and m.config["BLOCK"] == 3 and m.tier == "exact"
    assert m.reason == "pack p-1 exact device"
    # without the exact-device entry: same arch beats the nearest bucket on the exact device
    pack = make_pack((wl(2048, H200), 1), (wl(1024, H100), 2), (wl(1024, A100), 4))
    m = pack.resolve(wl(1024, H200))
    assert m is not None and m.config["BLOCK"] == 2 and m.tier == "arch"
    assert "same arch sm_90" in m.reason and "H100" in m.reason
    # only other buckets: the nearest one, exact device first at equal distance
    pack = make_pack((wl(8192, H200), 1), (wl(2048, H100), 2), (wl(512, H200), 3))
    m = pack.resolve(wl(1024, H200))
    assert m is not None and m.config["BLOCK"] == 3 and m.tier == "nearest"
    assert m.distance == pytest.approx(1.0) and "M=512" in m.reason
    pack = make_pack((wl(8192, H200), 1), (wl(2048, H100), 2))
    m = pack.resolve(wl(1024, H200))
    assert m is not None and m.config["BLOCK"] == 2  # distance 1 on the same arch beats 3


def test_resolution_refuses_other_arch_kernel_hash_and_dtype() -> None:
    pack = make_pack((wl(1024, A100), 1), (wl(1024, H200, h="old"), 2),
                     (wl(1024, H200, dtype="bfloat16"), 3), (wl(1024, H200, kernel="x"), 4))
    assert pack.resolve(wl(1024, H200)) is None


def test_resolution_across_packs_first_loaded_wins_ties() -> None:
    a = make_pack((wl(1024, H200), 1), name="a")
    b = make_pack((wl(1024, H200), 2), name="b")
    m = resolve([a, b], wl(1024, H200))
    assert m is not None and m.pack.name == "a"
    c = make_pack((wl(1024, H100), 3), name="c")
    m = resolve([c, b], wl(1024, H200))
    assert m is not None and m.pack.name == "b"  # exact device beats load order


def test_resolution_prefers_same_triton() -> None:
    old = dict(H200, triton="3.5.0")
    pack = make_pack((wl(1024, old), 1), (wl(1024, H200), 2))
    m = pack.resolve(wl(1024, H200))
    assert m is not None and m.config["BLOCK"] == 2
    m = make_pack((wl(1024, old), 1)).resolve(wl(1024, H200))
    assert m is not None and "Triton 3.5.0" in m.reason


def test_a_recorded_problem_size_list_is_compared_element_by_element() -> None:
    def rec(*size: int) -> Workload:
        return Workload("matmul", "", {"problem_size": list(size)}, H200)

    pack = make_pack((rec(4096, 4096, 4096), 1), (rec(1024, 1024, 512), 2),
                     (rec(1024, 1024), 3))  # a list of another length: not comparable
    m = pack.resolve(rec(1024, 1024, 1024))
    assert m is not None and m.config["BLOCK"] == 2 and m.tier == "nearest"
    assert m.distance == pytest.approx(1.0) and "problem_size=[1024, 1024, 512]" in m.reason
    assert make_pack((rec(1024, 1024), 3)).resolve(rec(1024, 1024, 1024)) is None


def test_rank_workloads_orders_as_resolution_does() -> None:
    tuned = [wl(8192, H200), wl(1024, A100), wl(2048, H100), wl(512, H200), wl(1024, H100)]
    ranked = rank_workloads(tuned, wl(1024, H200))
    assert [(w.problem["M"], w.target["device"]) for w, _ in ranked] == [
        (1024, H100["device"]), (512, H200["device"]), (2048, H100["device"]),
        (8192, H200["device"])]  # A100: another architecture, never used
    assert [n.tier for _, n in ranked] == ["arch", "nearest", "nearest", "nearest"]
    first = make_pack(*((w, i) for i, w in enumerate(tuned))).resolve(wl(1024, H200))
    assert first is not None and first.entry.workload == ranked[0][0]
    assert first.reason == f"pack p-1 {ranked[0][1].reason}"


@pytest.mark.parametrize("target, arch", [
    ({"arch": "sm_90"}, "sm_90"), ({"capability": "9.0"}, "sm_90"),
    ({"capability": [8, 0]}, "sm_80"), ({"cc": 90}, "sm_90"), ({}, None),
])
def test_target_arch(target: dict, arch: str | None) -> None:
    assert target_arch(target) == arch


# -- command line ------------------------------------------------------------------------------


def test_cli_round_trip(db: Database, tmp_path: Path, capsys) -> None:
    src = str(db.path)
    out = tmp_path / "lib.json"
    assert main(["pack", "export", "--db", src, "-o", str(out), "--kernel", "matmul",
                 "--name", "lib", "--version", "2.0"]) == 0
    assert main(["pack", "verify", str(out)]) == 0
    assert "checksum ok" in capsys.readouterr().out
    assert main(["pack", "show", str(out)]) == 0
    assert "lib-2.0" in capsys.readouterr().out
    assert main(["pack", "show", "--json", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "lib"
    dst = tmp_path / "dst.db"
    assert main(["pack", "import", str(out), "--db", str(dst)]) == 0
    with Database(dst) as d:
        assert len(d.workloads()) == 2


def test_cli_refuses_tampered_pack(pack_path: Path, tmp_path: Path, capsys) -> None:
    rewrite(pack_path, lambda d: d.__setitem__("version", "9"), fix_checksum=False)
    assert main(["pack", "verify", str(pack_path)]) == 2
    assert "checksum" in capsys.readouterr().err
    dst = tmp_path / "dst.db"
    assert main(["pack", "import", str(pack_path), "--db", str(dst)]) == 2
    assert not dst.exists() or Database(dst).workloads() == []


# -- signatures --------------------------------------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    from tunex.db.packs import generate_key

    publisher, forger = tmp_path / "keys" / "publisher", tmp_path / "forger"
    generate_key(publisher)
    generate_key(forger)
    return publisher, forger


def test_a_signed_pack_loads_under_its_trusted_key(db, tmp_path, keys, capsys) -> None:
    from tunex.db.packs import load_pack

    publisher, _ = keys
    path = tmp_path / "signed.json"
    pack = export_pack(db, path, name="lib", version="1", sign_with=publisher)
    assert oct(publisher.stat().st_mode & 0o777) == "0o600"
    loaded = load_pack(path, trusted=[f"{publisher}.pub"])
    assert loaded.signer == pack.signer and loaded.trusted is True
    assert load_pack(path, trusted=[publisher.parent]).trusted is True  # a folder of keys
    assert main(["pack", "verify", str(path), "--trust", f"{publisher}.pub"]) == 0
    assert f"signed by trusted key {pack.signer}" in capsys.readouterr().out
    assert main(["pack", "verify", str(path)]) == 0
    assert "signature valid" in capsys.readouterr().out


def test_forged_packs_are_refused(db, tmp_path, keys, monkeypatch) -> None:
    """Edited after signing (checksum recomputed), re-signed by another key, or unsigned: a
    loader that trusts the publisher's key refuses all three, in the API, the CLI and the
    decorator's pack loading (TUNEX_TRUSTED_KEYS)."""
    from tunex.db.packs import load_pack, sign_pack

    publisher, forger = keys
    signed = tmp_path / "signed.json"
    export_pack(db, signed, name="lib", version="1", sign_with=publisher)
    edited = tmp_path / "edited.json"
    edited.write_text(signed.read_text())

    def faster(doc: dict) -> None:
        doc["entries"][0]["stats"]["median_ms"] = 0.0001

    rewrite(edited, faster, fix_checksum=True)
    resigned = tmp_path / "resigned.json"
    pack = load_pack(signed)
    sign_pack(pack.__class__(**{**pack.__dict__, "name": "evil"}), forger).write(resigned)
    unsigned = tmp_path / "unsigned.json"
    export_pack(db, unsigned, name="lib", version="1")
    trust = [f"{publisher}.pub"]
    with pytest.raises(PackError, match="fails its signature"):
        load_pack(edited)  # a bad signature is refused even with no trusted key configured
    with pytest.raises(PackError, match="not among the trusted keys"):
        load_pack(resigned, trusted=trust)
    with pytest.raises(PackError, match="is not signed"):
        load_pack(unsigned, trusted=trust)
    assert load_pack(unsigned).signer is None  # no keys configured: unsigned packs still load
    monkeypatch.setenv("TUNEX_TRUSTED_KEYS", f"{publisher}.pub")
    for bad in (edited, resigned, unsigned):
        assert main(["pack", "import", str(bad), "--db", str(tmp_path / "dst.db")]) != 0
        with pytest.raises(PackError):
            load_pack(bad)
    assert load_pack(signed).trusted is True


def test_signing_keys_are_never_overwritten_and_bad_keys_are_named(tmp_path, keys) -> None:
    from tunex.db.packs import generate_key, trusted_keys

    publisher, _ = keys
    with pytest.raises(PackError, match="never overwrites"):
        generate_key(publisher)
    # nor a trusted public key beside the path given, nor a file a link there points to
    vendor = tmp_path / "vendor.key.pub"
    vendor.write_text("ed25519 theirs\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "mine.key.pub").symlink_to(victim)
    for path in (tmp_path / "vendor.key", tmp_path / "mine.key"):
        with pytest.raises(PackError, match=r"\.pub exists: tunex never overwrites a key"):
            generate_key(path)
        assert not path.exists()
    assert vendor.read_text() == "ed25519 theirs\n" and victim.read_text() == "keep me\n"
    bad = tmp_path / "bad.pub"
    bad.write_text("ssh-rsa AAAA\n")
    with pytest.raises(PackError, match="malformed"):
        trusted_keys([bad])
    with pytest.raises(PackError, match="cannot read trusted key"):
        trusted_keys([tmp_path / "missing.pub"])


def test_a_pack_config_of_another_value_type_is_refused(pack_path: Path, tmp_path: Path) -> None:
    """BLOCK=128.0 passes for 128 in Python: imported, it became a second trial of the same
    point (another database key), and a decorated kernel would launch a float block size."""
    from tunex.space import Choice, Space

    rewrite(pack_path, lambda doc: doc["entries"][0]["config"].update(BLOCK=128.0),
            fix_checksum=True)
    space = Space([Choice("BLOCK", [64, 128, 256]), Choice("num_warps", [4])])
    entry = load_pack(pack_path).entries[0]
    assert entry.config["BLOCK"] == 128.0 and entry.config not in space
    with Database(tmp_path / "dst.db") as dst:
        dst.declare_space(entry.workload, space)
        with pytest.raises(TunexError, match="is a float; the space's value is 128"):
            import_pack(dst, pack_path)
        assert dst.count(entry.workload) == 0


def test_one_trusted_key_may_be_given_as_a_path(db, tmp_path, keys) -> None:
    """trusted="pub.pub" was read letter by letter ("cannot read trusted key p"), a Path
    crashed with a TypeError, and trusted="." trusted every *.pub of the current folder."""
    from tunex.db.packs import load_pack, trusted_keys

    publisher, forger = keys
    path = tmp_path / "signed.json"
    pack = export_pack(db, path, name="lib", version="1", sign_with=publisher)
    for one in (f"{publisher}.pub", Path(f"{publisher}.pub"), str(publisher.parent)):
        assert load_pack(path, trusted=one).signer == pack.signer
        assert set(trusted_keys(one)) == {pack.signer}
    with pytest.raises(PackError, match="not among the trusted keys"):
        load_pack(path, trusted=f"{forger}.pub")
    with Database(tmp_path / "dst.db") as dst:
        assert import_pack(dst, path, trusted=Path(f"{publisher}.pub")) == 3


# -- hostile packs -----------------------------------------------------------------------------


def test_a_pack_nested_past_any_real_one_is_refused_and_skipped_from_the_environment(
        tmp_path: Path, monkeypatch) -> None:
    """700 levels of lists parse as JSON, but the checksum recursed over them and raised
    RecursionError, from ``TUNEX_PACKS`` on a kernel launch too."""
    from tunex.decorator._runtime import clear_packs, loaded_packs

    deep: list = []
    for _ in range(700):
        deep = [deep]
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"format": PACK_FORMAT, "schema": PACK_SCHEMA,
                                "provenance": deep}))
    with pytest.raises(PackError, match="nested over 32 deep"):
        load_pack(path)
    monkeypatch.setenv("TUNEX_PACKS", str(path))
    clear_packs()
    try:
        assert loaded_packs() == []  # skipped with a warning; the launch goes on
    finally:
        monkeypatch.delenv("TUNEX_PACKS")
        clear_packs()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_named_as_a_pack_or_key_is_refused_unread(tmp_path: Path) -> None:
    """``/dev/zero`` reports a size of 0 and never ends: read whole, it filled the memory."""
    from tunex.db.packs import sign_pack, trusted_keys

    with pytest.raises(PackError, match="not a regular file"):
        load_pack("/dev/zero")
    with pytest.raises(PackError, match="not a regular file"):
        trusted_keys(["/dev/zero"])
    with pytest.raises(PackError, match="not a regular file"):
        sign_pack(Pack("p", "1", ()), "/dev/zero")


def test_a_signature_by_a_key_of_small_order_is_refused(pack_path: Path) -> None:
    """With the identity point as public key and the identity as R (S = 0), Ed25519's check
    holds for every message: such a "signature" proves nothing and is refused, as is such a
    key among the trusted ones."""
    import base64

    from tunex.db.packs import _key_id, trusted_keys

    identity = b"\x01" + bytes(31)
    doc = json.loads(pack_path.read_text())
    doc["signature"] = {"algorithm": "ed25519", "key": _key_id(identity),
                        "public_key": base64.b64encode(identity).decode(),
                        "value": base64.b64encode(identity + bytes(32)).decode()}
    pack_path.write_text(json.dumps(doc))
    with pytest.raises(PackError, match="fails its signature"):
        load_pack(pack_path)
    for weak in (identity, bytes(32), b"\xec" + b"\xff" * 30 + b"\x7f"):
        with pytest.raises(PackError, match="small order"):
            trusted_keys([f"ed25519 {base64.b64encode(weak).decode()}"])
