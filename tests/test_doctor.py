"""tunex doctor: what it finds here, and what it says when pieces are missing."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tunex.cli import main
from tunex.db import Database
from tunex.doctor import diagnose
from tunex.trial import Config, Measurement, Status, Workload


def by_name(checks, area: str) -> dict:
    return {c.name: c for c in checks if c.area == area}


def test_database_states(tmp_path: Path) -> None:
    missing = by_name(diagnose(db=str(tmp_path / "none.db")), "database")
    (c,) = missing.values()
    assert c.state == "none" and "tunex search" in (c.fix or "")
    with Database(tmp_path / "run.db") as db:
        db.record(Workload("mm", problem={"M": 8}), Measurement(Config(b=1), Status.OK, (1.0,)))
    (c,) = by_name(diagnose(db=str(tmp_path / "run.db")), "database").values()
    assert c.state == "ok" and "1 workload, 1 trial (mm)" in c.detail
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    (c,) = by_name(diagnose(db=str(junk)), "database").values()
    assert c.state == "missing" and "not an SQLite file" in c.detail


def test_missing_toolchain_names_what_installs_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no clang, qemu, llvm tools, nvidia-smi
    monkeypatch.setenv("TUNEX_QEMU_PLUGIN", str(tmp_path / "absent.so"))
    monkeypatch.delenv("TUNEX_CLANG", raising=False)
    monkeypatch.delenv("TUNEX_QEMU", raising=False)
    checks = diagnose(db=str(tmp_path / "x.db"))
    riscv = by_name(checks, "riscv")
    for tool in ("clang", "lld", "mca", "objdump", "nm", "qemu", "plugin"):
        assert riscv[tool].state == "missing", tool
        assert "install-riscv.sh" in (riscv[tool].fix or ""), riscv[tool]
    assert "apt-get install clang-19" in (riscv["clang"].fix or "")
    (cpu,) = by_name(checks, "cpu").values()
    assert cpu.state == "missing" and "apt-get install clang-19" in (cpu.fix or "")


def test_unreachable_cluster(monkeypatch) -> None:
    pytest.importorskip("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    cluster = by_name(diagnose(), "cluster")["cluster"]
    assert cluster.state == "missing" and f"127.0.0.1:{port}" in cluster.detail
    assert cluster.fix and "ray start --head" in cluster.fix


def test_cli_json(tmp_path: Path, capsys) -> None:
    assert main(["doctor", "--json", "--db", str(tmp_path / "none.db")]) == 0
    doc = json.loads(capsys.readouterr().out)
    areas = [c["area"] for c in doc["checks"]]
    assert areas[0] == "python" and areas[-1] == "database"
    assert {"gpu", "riscv", "cpu", "cluster"} <= set(areas)
    assert all(c["state"] in ("ok", "missing", "none") for c in doc["checks"])
    assert all(c["fix"] for c in doc["checks"] if c["state"] == "missing")
    assert main(["doctor", "--db", str(tmp_path / "none.db")]) == 0
    out = capsys.readouterr().out
    assert "riscv" in out and "database" in out
