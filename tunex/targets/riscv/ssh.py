"""``riscv-ssh``: RVV kernels measured on RISC-V boards reached over SSH.

Builds are cross-compiled here (clang-19, any host); a measurement copies the static binary and
its input file to the board in one SSH session (a tar stream into a scratch directory), runs it
there (warm-up, repeats timed by the board's ``CLOCK_MONOTONIC``, a cache flush before each),
reads the outputs back in a second session, checks them against the kernel's NumPy reference,
and removes the directory. The runtimes are the board's own median of repeats.

A board that cannot be reached, refuses the key, or reboots mid-run (ssh exits 255) gives a
``worker_lost`` measurement with ssh's message: the search goes on, and a Ray executor
replaces the device's actor. The same binary can run under an emulator on the far side
(``runner=qemu-riscv64 -cpu rv64,v=true,vlen=256``), which is how the tests use a local
OpenSSH server on loopback.

``make_target("riscv-ssh:user@host")``; options after ``?``: ``core`` (x60, x280, p670: what
the binary is compiled for), ``port``, ``identity`` (key file), ``runner``, ``workdir``
(default ``/tmp``), ``repeats``, ``warmup``, ``flush_kb``, ``timeout``, ``connect_timeout``,
``board`` (a label for the fingerprint; boards with the same label and core share results),
``ssh_config`` (an ssh_config file for keys, known hosts, jump hosts).
With Ray, each board of a devices file becomes a measuring actor that calls
:meth:`RiscvSSHTarget.for_device` with the board's ``host`` (and ``port``...).
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import shlex
import subprocess
import tarfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunex.errors import TargetError
from tunex.targets._c import RunResult
from tunex.targets.riscv._cross import CrossTarget

__all__ = ["RiscvSSHTarget"]


class RiscvSSHTarget(CrossTarget):
    """C/RVV kernels on a board over SSH (module docstring)."""

    name = "riscv-ssh"
    needs = ("clang", "objdump")

    def __init__(self, host: str | None = None, *, core: str = "x60", port: int = 22,
                 identity: str | None = None, runner: str = "", workdir: str = "/tmp",
                 repeats: int = 15, warmup: int = 2, flush_kb: int = 4096,
                 timeout: float = 120.0, connect_timeout: float = 10.0, board: str = "",
                 ssh_config: str | None = None, check: bool = True) -> None:
        super().__init__(core, timeout=timeout, repeats=repeats, warmup=warmup,
                         flush_kb=flush_kb, check=check)
        self.host = host
        self.port = int(port)
        self.identity = identity
        self.runner = str(runner)
        self.workdir = str(workdir)
        self.connect_timeout = float(connect_timeout)
        self.board = str(board) or self.core.name
        self.ssh_config = ssh_config

    def for_device(self, options: Mapping[str, Any]) -> RiscvSSHTarget:
        """A copy that measures on the board ``options`` name (host, port, identity, ...)."""
        known = {"host", "port", "identity", "runner", "workdir", "connect_timeout",
                 "ssh_config"}
        unknown = sorted(set(options) - known - {"name", "core", "board"})
        if unknown:
            raise TargetError(f"riscv-ssh: unknown board option(s) {unknown}; a board takes "
                              f"{sorted(known)}")
        other = copy.copy(self)
        other._refs = {}
        for k in known & set(options):
            value = options[k]
            setattr(other, k, int(value) if k == "port" else
                    float(value) if k == "connect_timeout" else value)
        return other

    def fingerprint(self) -> Mapping[str, Any]:
        return {"device": f"board:{self.board}", "arch": self.core.mcpu, "vlen": self.core.vlen,
                "clang": self._versions.get("clang", "?")}

    def _ssh(self, command: str, stdin: bytes | None = None
             ) -> subprocess.CompletedProcess[bytes]:
        if not self.host:
            raise TargetError("riscv-ssh needs a board: riscv-ssh:user@host (or a devices file "
                              "with --ray)")
        argv = ["ssh", *(["-F", str(self.ssh_config)] if self.ssh_config else []),
                "-p", str(self.port), "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={max(1, int(self.connect_timeout))}",
                "-o", "StrictHostKeyChecking=accept-new", "-o", "LogLevel=ERROR"]
        if self.identity:
            argv += ["-i", str(self.identity)]
        argv += [self.host, command]
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=self.timeout)

    def run(self, binary: Path, argv: Sequence[str], cwd: Path) -> RunResult:
        t0 = time.perf_counter()
        workdir = self.workdir.rstrip("/")
        remote = f"{workdir}/tunex-board-{uuid.uuid4().hex[:12]}"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(binary, arcname="kernel.bin")
            tar.add(cwd / "in.bin", arcname="in.bin")
        run = " ".join(shlex.quote(a) for a in argv)
        # a cancelled measurement kills the local ssh, not what it started on the board: the
        # kernel runs in a process group of its own, named in a file of the board's workdir,
        # and the next measurement kills a group left there (a board measures one kernel at
        # a time, so one left is a hung one) before it starts; the board's `timeout` ends it
        # in any case shortly after this side's limit; then every run directory left there
        # goes (the hung run's, and a cancelled run's whose shell died before removing it)
        limit = math.ceil(self.timeout) + 5
        pid = shlex.quote(f"{workdir}/tunex-board.pid")
        # (the group only while its leader still runs in that run's directory, where the
        # board has /proc to tell: a group ended by the board's `timeout` may lend its id)
        script = (f"[ -s {pid} ] && read tx_g tx_d < {pid} && case $tx_d in */tunex-board-*) "
                  f"{{ [ ! -e /proc/$tx_g/cwd ] || [ \"$(readlink /proc/$tx_g/cwd)\" = "
                  f"\"$tx_d\" ]; }} && kill -KILL -- -$tx_g;; esac "
                  f"2>/dev/null; "
                  f"rm -f {pid}; rm -rf {shlex.quote(workdir)}/tunex-board-*; "
                  f"mkdir -p {shlex.quote(remote)} && cd {shlex.quote(remote)} && tar xf - && "
                  f"tx_t=; timeout -s KILL 1 true 2>/dev/null && tx_t='timeout -s KILL {limit}'; "
                  f"tx_s=; command -v setsid >/dev/null && tx_s=setsid; "
                  f"$tx_s $tx_t {self.runner} ./kernel.bin {run} & tx_p=$!; "
                  f"[ -n \"$tx_s\" ] && echo \"$tx_p $(pwd -P)\" > {pid}; "
                  f"wait $tx_p; tx_r=$?; rm -f {pid}; echo tx_rc=$tx_r")
        try:
            done = self._ssh(script, buf.getvalue())
            if done.returncode == 255:
                return self._lost(done, t0)
            out = done.stdout.decode(errors="replace")
            rc = next((int(line[6:]) for line in out.splitlines()
                       if line.startswith("tx_rc=")), done.returncode)
            if rc > 128:  # the shell's 128 + n for a kernel ended by signal n
                rc = 128 - rc
            fetched = self._ssh(f"cat {shlex.quote(remote)}/out.bin 2>/dev/null; "
                                f"rm -rf {shlex.quote(remote)}")
            if fetched.returncode == 255:
                return self._lost(fetched, t0)
            (cwd / "out.bin").write_bytes(fetched.stdout)
        except subprocess.TimeoutExpired:
            self._cleanup(remote)
            return RunResult(-9, "", "", time.perf_counter() - t0, timed_out=True)
        return RunResult(rc, out, done.stderr.decode(errors="replace"),
                         time.perf_counter() - t0, {"board_host": self.host})

    def _lost(self, done: subprocess.CompletedProcess[bytes], t0: float) -> RunResult:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return RunResult(255, "", "", time.perf_counter() - t0,
                         lost=f"board {self.host} unreachable: "
                              f"{why[-1] if why else 'ssh exited with 255'}")

    def _cleanup(self, remote: str) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._ssh(f"rm -rf {shlex.quote(remote)}")
