"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _postgres_bindir() -> str | None:
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    found.sort(key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a database on a throwaway PostgreSQL server started for this test session.

    The cluster lives in a temporary directory (its unix socket too) and listens on a free port
    of 127.0.0.1; it is stopped and removed at the end of the session. Skips when Debian's
    postgresql package is not installed (scripts/install-postgres.sh installs it).
    """
    bindir = _postgres_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
            "(install them with scripts/install-postgres.sh)"
        )
    as_user: list[str] = []
    tmp = tempfile.mkdtemp(prefix="tunex-pg-")
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            pg = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(tmp)
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        os.chown(tmp, pg.pw_uid, pg.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log = os.path.join(tmp, "data"), os.path.join(tmp, "server.log")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def run(*args: str) -> None:
        done = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            server_log = Path(log).read_text() if os.path.exists(log) else ""
            pytest.fail(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}{server_log}")

    pg_ctl = os.path.join(bindir, "pg_ctl")
    try:
        run(
            os.path.join(bindir, "initdb"),
            "-D",
            data,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        run(
            pg_ctl,
            "-D",
            data,
            "-l",
            log,
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )
        run(
            os.path.join(bindir, "createdb"),
            "-h",
            tmp,
            "-p",
            str(port),
            "-U",
            "postgres",
            "tunex_test",
        )
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/tunex_test"
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(tmp, ignore_errors=True)
