"""The riscv-ssh target against a real OpenSSH server on loopback whose "board" runs binaries
under qemu-riscv64 (Debian's openssh-server and qemu-user; skipped where absent)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tunex.kernel import register_kernel
from tunex.trial import Config, Status

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
pytestmark = [
    pytest.mark.riscv,
    pytest.mark.skipif(SSHD is None or shutil.which("ssh") is None
                       or shutil.which("qemu-riscv64") is None
                       or shutil.which("clang-19") is None,
                       reason="needs openssh-server, qemu-user and clang-19 "
                              "(scripts/install-riscv.sh)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """A throwaway sshd on 127.0.0.1 that accepts one key, for the current user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", root / "host"],
                       check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", root / "user"],
                       check=True)
        shutil.copy(root / "user.pub", root / "authorized_keys")
        os.chmod(root / "authorized_keys", 0o600)
        self.port = _free_port()
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root / 'host'}\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"PidFile {root / 'sshd.pid'}\nPermitRootLogin prohibit-password\n"
            "AcceptEnv none\n")
        (root / "ssh_config").write_text(
            f"Host *\n  IdentityFile {root / 'user'}\n  UserKnownHostsFile {root / 'known'}\n"
            "  StrictHostKeyChecking accept-new\n")
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
                                     stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the throwaway sshd needs root here (privilege separation)")
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def _target(sshd, **extra):
    from tunex.targets import make_target

    register_kernel("toy_axpy", "tests.targets._toy_c:ToyAxpy")
    user = os.environ.get("USER") or "root"
    return make_target(f"riscv-ssh:{user}@127.0.0.1", core="x60", port=sshd.port,
                       ssh_config=str(sshd.root / "ssh_config"), repeats=3, warmup=1,
                       flush_kb=0, connect_timeout=5,
                       runner="qemu-riscv64 -cpu rv64,v=true,vlen=256", **{"timeout": 60, **extra})


def test_a_board_over_ssh_runs_checks_and_times(sshd, tmp_path):
    t = _target(sshd, workdir=str(tmp_path))  # the board's own folder: this test's runs only
    _, wl = t.prepare("toy_axpy", {"N": 999})
    assert wl.target["device"] == "board:x60"
    m = t.measure(t.build(wl, Config(UNROLL=2, mode="ok")))
    assert m.status is Status.OK, m.error
    assert len(m.times_ms) == 3 and all(x > 0 for x in m.times_ms)
    assert m.facts["board_host"].endswith("@127.0.0.1")
    wrong = t.measure(t.build(wl, Config(UNROLL=1, mode="wrong")))
    assert wrong.status is Status.WRONG_RESULT
    crash = t.measure(t.build(wl, Config(UNROLL=1, mode="crash")))
    assert crash.status is Status.RUNTIME_ERROR
    assert not list(tmp_path.glob("tunex-board-*"))  # every run cleaned its directory
    # a run cancelled before its shell could remove its directory: the next run removes it
    (tmp_path / "tunex-board-0123456789ab").mkdir()
    (tmp_path / "tunex-board-0123456789ab" / "kernel.bin").write_bytes(b"\0" * 64)
    assert t.measure(t.build(wl, Config(UNROLL=2, mode="ok"))).ok
    assert not list(tmp_path.glob("tunex-board-*"))
    assert (tmp_path / "tunex-board.pid").exists() is False


def test_an_unreachable_or_rebooting_board_is_a_recorded_failure(sshd):
    t = _target(sshd)
    _, wl = t.prepare("toy_axpy", {"N": 64})
    art = t.build(wl, Config(UNROLL=1, mode="ok"))
    sshd.stop()  # the board goes down
    try:
        down = t.measure(art)
    finally:
        sshd.start()  # and comes back
    assert down.status is Status.WORKER_LOST and "unreachable" in down.error
    assert t.measure(art).status is Status.OK
    nowhere = t.for_device({"host": "root@127.0.0.1", "port": 1})
    assert nowhere.measure(art).status is Status.WORKER_LOST


def _on_board(marker: str) -> list[int]:
    """Processes running from a board directory of tunex (the loopback board is this host)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in os.readlink(d / "cwd"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _own_session(pid_file: Path) -> bool:
    """Whether the process a board's pid file names leads a session of its own."""
    try:
        pid = int(pid_file.read_text().split()[0])
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except (OSError, ValueError, IndexError):
        return False
    return int(stat.rsplit(")", 1)[1].split()[3]) == pid  # field 6: the session id


def test_a_hung_kernel_does_not_keep_running_on_the_board(sshd, tmp_path):
    t = _target(sshd, timeout=3, workdir=str(tmp_path))
    _, wl = t.prepare("toy_axpy", {"N": 64})
    try:
        hung = t.measure(t.build(wl, Config(UNROLL=1, mode="hang")))
        assert hung.status is Status.TIMEOUT
        end = time.monotonic() + 30  # the board's own limit: 3 s + 5 s
        while _on_board("tunex-board-") and time.monotonic() < end:
            time.sleep(0.2)
        assert not _on_board("tunex-board-")
    finally:
        for pid in _on_board("tunex-board-"):
            os.kill(pid, 9)


def _measure_in_own_group(t, art):
    os.setpgid(0, 0)
    t.measure(art)


def test_a_kernel_left_hung_by_a_cancelled_measurement_is_ended_by_the_next(sshd, tmp_path):
    """The executor gives up on a hung kernel long before the board's own limit and kills the
    local ssh; the next measurement on the board must not run beside the hung kernel."""
    import multiprocessing as mp

    t = _target(sshd, timeout=120, workdir=str(tmp_path))
    _, wl = t.prepare("toy_axpy", {"N": 64})
    hung_art = t.build(wl, Config(UNROLL=1, mode="hang"))
    ok_art = t.build(wl, Config(UNROLL=1, mode="ok"))
    pid_file = Path(t.workdir) / "tunex-board.pid"
    try:
        # a kernel that dies with its ssh leaves nothing hung (fine, but not the case under
        # test): seen now and then in CI on a loaded machine, so up to three tries
        for _ in range(3):
            proc = mp.get_context("fork").Process(target=_measure_in_own_group,
                                                  args=(t, hung_art))
            proc.start()
            # started: the board's shell names the kernel's group once it has started it
            # (the shell itself runs in the run's directory a moment before, and dies with
            # the ssh) and the group named in its pid file leads a session of its own
            # (`setsid` done: a fork of the shell not yet there dies with the ssh)
            end = time.monotonic() + 30
            while not (_own_session(pid_file) and _on_board("tunex-board-")) and (
                    time.monotonic() < end):
                time.sleep(0.2)
            assert _on_board("tunex-board-"), "the hung kernel never started on the board"
            os.killpg(proc.pid, 9)  # as the executor kills a worker: with the ssh it started
            proc.join(10)
            time.sleep(0.5)
            if _on_board("tunex-board-"):
                break
        assert _on_board("tunex-board-"), "still spinning on the board before the next"
        assert t.measure(ok_art).ok
        assert not _on_board("tunex-board-")
        assert not list(tmp_path.glob("tunex-board-*"))  # the hung run's directory went too
    finally:
        for pid in _on_board("tunex-board-"):
            os.kill(pid, 9)


@pytest.mark.slow
def test_boards_of_a_devices_file_under_ray_from_the_command_line(sshd, tmp_path):
    """The path a user with boards takes: `tunex search --ray --devices boards.toml`, each
    board a Ray actor that needs its own resource; every trial records the board it ran on."""
    pytest.importorskip("ray")
    import json
    import sys

    user = os.environ.get("USER") or "root"
    board = (f'host = "{user}@127.0.0.1"\nport = {sshd.port}\n'
             f'ssh_config = "{sshd.root / "ssh_config"}"\n'
             'runner = "qemu-riscv64 -cpu rv64,v=true,vlen=256"\n')
    # one sshd plays both boards: each its own workdir, as two boards would have (one
    # workdir twice is one board listed twice, which the devices file refuses)
    for b in ("bpi1", "bpi2"):
        (tmp_path / b).mkdir()
    (tmp_path / "boards.toml").write_text(
        f'[[board]]\nname = "bpi1"\nworkdir = "{tmp_path / "bpi1"}"\n{board}\n'
        f'[[board]]\nname = "bpi2"\nworkdir = "{tmp_path / "bpi2"}"\n{board}')
    db = tmp_path / "boards.db"
    cmd = [sys.executable, "-m", "tunex.cli", "search", "sgemm", "--target",
           "riscv-ssh?core=x60&repeats=3&warmup=0&flush_kb=0", "--shape", "M=16,N=16,K=8",
           "--budget", "8trials", "--ray", "--devices", str(tmp_path / "boards.toml"),
           "--db", str(db), "-q", "--seed", "2"]
    env = {**os.environ, "RAY_ADDRESS": "local"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in subprocess.run(
        [sys.executable, "-m", "tunex.cli", "db", "export", "--db", str(db), "--format",
         "jsonl"], capture_output=True, text=True, timeout=60).stdout.splitlines()]
    assert len(rows) >= 8 and all(r["status"] == "ok" for r in rows)
    boards = {r["facts"]["device"] for r in rows}
    assert boards <= {"bpi1", "bpi2"} and boards
    assert all(r["worker"].endswith(("/bpi1", "/bpi2")) for r in rows)
