"""A throwaway PostgreSQL server from Debian's postgresql package, for the tests and the
reliability benchmark (scripts/install-postgres.sh installs the package)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path


class Unavailable(RuntimeError):
    """No server can be started here (the reason says why); tests skip on it."""


def _bindir() -> str | None:
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    found.sort(key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """URL of a database on a new server: its cluster and unix socket in a temporary
    directory, listening on a free port of 127.0.0.1; stopped and removed on exit."""
    bindir = _bindir()
    if bindir is None:
        raise Unavailable("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                          "(install them with scripts/install-postgres.sh)")
    as_user: list[str] = []
    tmp = tempfile.mkdtemp(prefix="tunex-pg-")
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            pg = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(tmp)
            raise Unavailable("running as root and there is no 'postgres' user to run the "
                              "server") from None
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
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}"
                               f"{server_log}")

    pg_ctl = os.path.join(bindir, "pg_ctl")
    try:
        run(os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E",
            "UTF8", "--no-sync")
        run(pg_ctl, "-D", data, "-l", log, "-w", "-t", "60", "-o",
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        run(os.path.join(bindir, "createdb"), "-h", tmp, "-p", str(port), "-U", "postgres",
            "tunex_test")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/tunex_test"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server of ``server_url``, dropped on exit."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        admin.dispose()
