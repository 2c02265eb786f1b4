"""What the C-kernel targets share: render, compile with the harness, run, check, time.

``cpu`` (native), ``riscv-sim`` (QEMU + cycle model) and ``riscv-ssh`` (boards) differ only in
how a binary is compiled and how it is run and timed; everything else is here, once:

- :meth:`CTarget.prepare` binds a :class:`~tunex.kernel.CKernel`'s space to the problem and to
  the target's :class:`~tunex.kernel.Isa` facts (``vlen``, ``rvv``, ``vregs``, ``lanes``);
- :meth:`CTarget.build` renders the config's C source, compiles it with ``harness.c`` into one
  static binary (a failure is a ``compile_error`` artifact with the compiler's message), and
  gathers the subclass's build facts; the payload is the binary's bytes, so it crosses process
  and Ray boundaries;
- :meth:`CTarget.measure` writes the binary and the problem's inputs to a scratch directory,
  runs it (subclass), reads the outputs back and checks them against the kernel's NumPy
  reference (``wrong_result`` on a mismatch: never a winner), then returns the subclass's
  timing. A crash is ``runtime_error``, a run past the timeout ``timeout``.
"""

from __future__ import annotations

import abc
import contextlib
import math
import os
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tunex.errors import TargetError
from tunex.kernel import CKernel, Isa, get_kernel, kernel_code
from tunex.space import Space
from tunex.targets._base import Target
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["HARNESS", "CBinary", "CTarget", "RunResult", "read_outputs", "write_inputs"]

#: The harness every C kernel is linked with.
HARNESS = Path(__file__).with_name("harness.c")


@dataclass(frozen=True)
class CBinary:
    """A built C kernel: the static binary's bytes, and the facts of its build."""

    elf: bytes
    kernel: str


@dataclass(frozen=True)
class RunResult:
    """What running a binary gave: exit status, output, and facts of the run (e.g. cycles)."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    facts: Mapping[str, Any] = field(default_factory=dict)
    timed_out: bool = False
    lost: str | None = None  # the device could not be reached (a board rebooting...)
    #: What :meth:`CTarget.run` hands to :meth:`CTarget.timing` (not stored).
    extra: Any = None


def write_inputs(path: Path, kernel: CKernel, problem: Mapping[str, Any],
                 inputs: Mapping[str, np.ndarray]) -> None:
    """The harness's input file (format in harness.c) for ``problem`` and ``inputs``."""
    shapes = kernel.shapes(problem)
    dims = [int(problem[d]) for d in kernel.dims]
    with open(path, "wb") as f:
        f.write(b"TXIN0001")
        f.write(struct.pack(f"<q{len(dims)}q", len(dims), *dims))
        f.write(struct.pack("<q", len(kernel.buffers)))
        for name in kernel.buffers:
            f.write(struct.pack("<qq", int(np.prod(shapes[name])), int(name in kernel.outputs)))
        for name in kernel.inputs:
            a = np.ascontiguousarray(inputs[name], dtype="<f4")
            if a.shape != tuple(shapes[name]):
                raise TargetError(f"{kernel.name}: input {name} has shape {a.shape}, "
                                  f"shapes() says {tuple(shapes[name])}")
            f.write(a.tobytes())


def read_outputs(path: Path, kernel: CKernel, problem: Mapping[str, Any]
                 ) -> tuple[np.ndarray, ...]:
    """The outputs the harness wrote, in :attr:`CKernel.outputs` order.

    Raises:
        ValueError: the file is shorter or longer than the outputs.
    """
    shapes = kernel.shapes(problem)
    raw = Path(path).read_bytes()
    out, offset = [], 0
    for name in kernel.outputs:
        n = int(np.prod(shapes[name]))
        chunk = raw[offset:offset + 4 * n]
        if len(chunk) != 4 * n:
            raise ValueError(f"output file holds {len(raw)} bytes, {name} needs more")
        out.append(np.frombuffer(chunk, dtype="<f4").reshape(shapes[name]).copy())
        offset += 4 * n
    if offset != len(raw):
        raise ValueError(f"output file holds {len(raw) - offset} bytes more than the outputs")
    return tuple(out)


def _shapes(kernel: CKernel, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """``kernel.shapes(problem)``, or a :class:`TargetError` saying what is wrong with it (a
    slip in the kernel's Python fails every config alike: not a failed trial)."""
    twice = sorted({b for b in kernel.buffers if kernel.buffers.count(b) > 1})
    if twice:  # one file region per name: every run would fail on the output file's size
        raise TargetError(f"{kernel.name}: buffer {twice[0]!r} is named twice in inputs and "
                          "outputs: give each buffer one name (inputs the kernel reads, "
                          "outputs it writes)")
    with kernel_code(kernel, "shapes()"):
        shapes = kernel.shapes(problem)
    for name in kernel.buffers:
        shape = shapes.get(name) if isinstance(shapes, Mapping) else None
        if not (isinstance(shape, (tuple, list))
                and all(isinstance(n, (int, np.integer)) and n >= 0 for n in shape)):
            raise TargetError(f"{kernel.name}: shapes() must give {name} a tuple of sizes "
                              f"(e.g. {{{name!r}: (N,)}}), not {shape!r}")
    out = {n: tuple(int(d) for d in shapes[n]) for n in kernel.buffers}
    empty = [n for n in kernel.outputs if math.prod(out[n]) == 0]
    if empty:  # every config would pass the check, whatever it wrote
        raise TargetError(f"{kernel.name}: shapes() gives output {empty[0]!r} no elements "
                          f"({out[empty[0]]}) for problem {dict(problem)}: there would be "
                          "nothing to check a run against")
    need = sum(4 * math.prod(shape) for shape in out.values())  # float32 buffers
    have = _memory()
    if have and need > have // 2:  # the inputs, the outputs, the reference's own copies
        raise TargetError(f"{kernel.name}: the buffers of problem {dict(problem)} take "
                          f"{need / 2**30:,.1f} GiB, more than half of this machine's "
                          f"{have / 2**30:,.1f} GiB: choose smaller sizes")
    return out


def _memory() -> int:
    """This machine's physical memory in bytes (0 where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 0


def exit_text(code: int) -> str:
    """``exit status 3``, or for a process ended by a signal (a negative status, as
    :mod:`subprocess` gives it) ``killed by SIGSEGV (signal 11)``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} (signal {-code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _tail(text: str, lines: int = 12, chars: int = 2000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


_MAX_CALLS = 100_000  # timed or untimed calls of a kernel per measurement
_MAX_FLUSH_KB = 4 << 20  # 4 GiB written between timed calls
_MAX_TIMEOUT = 86_400.0  # a day


class CTarget(Target):
    """Base of the targets that build C kernels (:class:`~tunex.kernel.CKernel`).

    Subclasses set :attr:`isa` and implement :meth:`compile`, :meth:`run`,
    :meth:`fingerprint`, and :meth:`timing` where the binary's own timing is not the answer.

    Args:
        timeout: seconds a compile or a run may take before it is a ``timeout``.
        repeats, warmup: timed and untimed calls of the kernel per measurement.
        flush_kb: bytes written between timed calls to evict the caches (KiB; 0: none).
        check: compare the outputs with the kernel's reference (on every measurement).
    """

    isa: Isa
    noisy = True

    def __init__(self, *, timeout: float = 120.0, repeats: int = 15, warmup: int = 2,
                 flush_kb: int = 0, check: bool = True) -> None:
        # written so that NaN fails every test: an option no run can work with is refused
        # here, not recorded as a failure of every config (which a later search would skip)
        if not (1 <= repeats <= _MAX_CALLS and 0 <= warmup <= _MAX_CALLS
                and 0 <= flush_kb <= _MAX_FLUSH_KB and 1.0 <= timeout <= _MAX_TIMEOUT):
            raise TargetError(
                f"{self.name}: give repeats 1-{_MAX_CALLS:,}, warmup 0-{_MAX_CALLS:,}, flush_kb "
                f"0-{_MAX_FLUSH_KB:,} (KiB) and timeout 1-{_MAX_TIMEOUT:,.0f} (seconds, for a "
                f"compile and for a run); got repeats={repeats}, warmup={warmup}, "
                f"flush_kb={flush_kb}, timeout={timeout}")
        self.timeout = float(timeout)
        self.repeats = int(repeats)
        self.warmup = int(warmup)
        self.flush_kb = int(flush_kb)
        self.check = bool(check)
        self._refs: dict[str, tuple[dict[str, np.ndarray], tuple[np.ndarray, ...],
                                    tuple[np.ndarray, ...] | None]] = {}

    # -- subclass hooks -------------------------------------------------------------------------

    @abc.abstractmethod
    def compile(self, sources: Sequence[Path], out: Path) -> subprocess.CompletedProcess[str]:
        """Compile and link ``sources`` into the binary ``out``; the caller reads the result."""

    @abc.abstractmethod
    def run(self, binary: Path, argv: Sequence[str], cwd: Path) -> RunResult:
        """Run ``binary`` with the harness's ``argv`` in ``cwd`` (which holds the input file and
        receives the output file)."""

    def build_facts(self, binary: Path) -> dict[str, Any]:
        """Facts of a built binary for the cost model (code size, spills, static cycles)."""
        return {"binary_bytes": binary.stat().st_size}

    def harness_args(self) -> tuple[int, int, int]:
        """``(repeats, warmup, flush_kb)`` the harness runs with."""
        return self.repeats, self.warmup, self.flush_kb

    def timing(self, result: RunResult, binary: Path) -> tuple[tuple[float, ...], dict[str, Any]]:
        """Runtimes (ms) of the repeats and facts, from a successful run: by default the
        harness's own ``tx_ns`` lines."""
        times = tuple(int(line.split()[1]) / 1e6 for line in result.stdout.splitlines()
                      if line.startswith("tx_ns "))
        return times, {}

    # -- the contract ---------------------------------------------------------------------------

    def facts(self) -> Mapping[str, float]:
        return {k: float(v) for k, v in self.isa.facts().items()}

    def kernel_of(self, name: str | Any) -> CKernel:
        """The C kernel called ``name``, or a clear error for a kernel of another language."""
        if name is None:
            raise TargetError(f"name the kernel to tune, e.g. tunex search sgemm --target "
                              f"{self.name} --shape M=256,N=256,K=256")
        k = get_kernel(name)
        if not isinstance(k, CKernel):
            raise TargetError(f"kernel {k.name!r} is a {k.language} kernel; the {self.name} "
                              "target builds C kernels (e.g. sgemm, softmax_c, conv2d); tune "
                              f"{k.name!r} with --target triton_gpu")
        return k

    def prepare(self, kernel: Any, problem: Mapping[str, Any]) -> tuple[Space, Workload]:
        k = self.kernel_of(kernel)
        key = k.problem_key(problem)
        with kernel_code(k, "space()"):
            declared = k.space()
        space = k.bind(declared, k.representative(key), self.isa.facts())
        _shapes(k, k.representative(key))  # a shape no run could hold: said before searching
        return space, Workload(k.name, k.source_hash, key, self.fingerprint())

    def build(self, workload: Workload, config: Config) -> Artifact:
        k = self.kernel_of(workload.kernel)
        problem = k.representative(workload.problem)
        try:
            source = k.render(config, problem, self.isa)
        except Exception as e:  # a config the template cannot express is a failed build
            return Artifact(workload, config, Status.COMPILE_ERROR,
                            error=f"render: {type(e).__name__}: {e}")
        if not isinstance(source, str):
            return Artifact(workload, config, Status.COMPILE_ERROR,
                            error=f"render: returned a {type(source).__name__}, not the C "
                                  "source (a str)")
        try:
            source.encode()
        except UnicodeEncodeError as e:  # a lone surrogate: no file can hold it
            return Artifact(workload, config, Status.COMPILE_ERROR,
                            error=f"render: returned text that cannot be written as UTF-8 "
                                  f"({e.reason} at position {e.start})")
        return self.build_source(workload, config, source)

    def versus_baseline(self, workload: Workload, config: Config, rounds: int = 3
                        ) -> dict[str, Any]:
        """``config`` against the kernel's :meth:`~tunex.kernel.CKernel.baseline` (its plain C
        form left to the compiler's own vectorisation): both built, then measured alternately
        ``rounds`` times (once on a target that is not noisy), so drift hits both alike.

        Returns ``baseline_ms``, ``tuned_ms`` (medians) and ``speedup`` (their ratio; ``None``
        with ``error`` when either failed), and ``cycles`` where the target counts them.
        """
        k = self.kernel_of(workload.kernel)
        problem = k.representative(workload.problem)
        try:  # the search is over and recorded: a broken baseline() only goes unmeasured
            with kernel_code(k, "baseline()"):
                source = k.baseline(problem, self.isa)
            if not isinstance(source, str):
                raise TargetError(f"{k.name}: its baseline() returned a "
                                  f"{type(source).__name__}, not the C source (a str)")
        except TargetError as e:
            return {"baseline_ms": None, "tuned_ms": None, "speedup": None, "error": str(e)}
        base = self.build_source(workload, Config(baseline="O3"), source)
        tuned = self.build(workload, config)
        base_t: list[float] = []
        tuned_t: list[float] = []
        cycles: dict[str, Any] = {}
        for _ in range(rounds if self.noisy else 1):
            b, t = self.measure(base), self.measure(tuned)
            if not (b.ok and t.ok):
                bad = [f"{n}: {m.status} {m.error or ''}".strip()
                       for n, m in (("baseline", b), ("tuned", t)) if not m.ok]
                return {"baseline_ms": None, "tuned_ms": None, "speedup": None,
                        "error": "; ".join(bad)}
            base_t.append(b.value)
            tuned_t.append(t.value)
            cycles = {"baseline": b.facts.get("cycles"), "tuned": t.facts.get("cycles")}
        b_ms, t_ms = float(np.median(base_t)), float(np.median(tuned_t))
        out: dict[str, Any] = {"baseline_ms": b_ms, "tuned_ms": t_ms, "speedup": b_ms / t_ms}
        if cycles.get("baseline") is not None:
            out["cycles"] = cycles
        return out

    def build_source(self, workload: Workload, config: Config, source: str) -> Artifact:
        """Compile a given kernel source with the harness (also: the baseline's source)."""
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="tunex-c-") as tmp:
            src = Path(tmp) / "kernel.c"
            src.write_text(source)
            binary = Path(tmp) / "kernel.bin"
            try:
                done = self.compile([src, HARNESS], binary)
            except subprocess.TimeoutExpired:
                return Artifact(workload, config, Status.TIMEOUT,
                                error=f"compile exceeded {self.timeout:g} s",
                                compile_ms=(time.perf_counter() - t0) * 1e3)
            ms = (time.perf_counter() - t0) * 1e3
            if done.returncode != 0 or not binary.exists():
                said = _tail(done.stderr or done.stdout)
                if done.returncode < 0 or not said:  # killed (out of memory?), or silent
                    said = (f"the compiler ended with {exit_text(done.returncode)}"
                            + ("" if done.returncode else " and no binary")
                            + (f": {said}" if said else ""))
                return Artifact(workload, config, Status.COMPILE_ERROR, error=said,
                                compile_ms=ms)
            facts = self.build_facts(binary)
            payload = CBinary(binary.read_bytes(), workload.kernel)
        return Artifact(workload, config, Status.OK, payload=payload, facts=facts,
                        compile_ms=ms)

    def _reference(self, workload: Workload, k: CKernel, problem: Mapping[str, Any]
                   ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, ...],
                              tuple[np.ndarray, ...] | None]:
        ref = self._refs.get(workload.key)
        if ref is None:
            shapes = _shapes(k, problem)
            with kernel_code(k, "make_inputs()"):
                inputs = k.make_inputs(problem, seed=0)
            bad = [n for n in k.inputs if not (isinstance(inputs, Mapping) and n in inputs
                                               and np.shape(inputs[n]) == shapes[n])]
            if bad:
                gave = (f"an array shaped {np.shape(inputs[bad[0]])}"
                        if isinstance(inputs, Mapping) and bad[0] in inputs else "nothing")
                raise TargetError(f"{k.name}: make_inputs() gave {bad[0]} {gave}; it must give "
                                  f"each input an array shaped as shapes() says, here "
                                  f"{shapes[bad[0]]}")
            with kernel_code(k, "reference()"):
                got = k.reference(inputs, problem)
            try:  # a dict, or arrays of something other than numbers, is no reference
                want = (tuple(np.asarray(w, dtype=np.float64) for w in got)
                        if isinstance(got, (tuple, list)) else None)
            except (TypeError, ValueError):
                want = None
            if want is None or [w.shape for w in want] != [shapes[n] for n in k.outputs]:
                raise TargetError(
                    f"{k.name}: reference() must return a tuple of {len(k.outputs)} "
                    f"array{'s' * (len(k.outputs) > 1)} ({', '.join(k.outputs)}) shaped as "
                    f"shapes() says {[shapes[n] for n in k.outputs]}, not "
                    + (f"arrays shaped {[w.shape for w in want]}" if want is not None
                       else f"a {type(got).__name__}"
                       + (" of non-numbers" if isinstance(got, (tuple, list)) else "")))
            with kernel_code(k, "magnitude()"):
                magnitude = k.magnitude(inputs, problem)
            ref = self._refs[workload.key] = (inputs, want, magnitude)
        return ref

    def measure(self, artifact: Artifact) -> Measurement:
        config = artifact.config
        if not artifact.ok:
            return Measurement.failed(config, artifact.status, artifact.error,
                                      compile_ms=artifact.compile_ms, facts=artifact.facts)
        workload = artifact.workload
        k = self.kernel_of(workload.kernel)
        problem = k.representative(workload.problem)
        inputs, want, magnitude = self._reference(workload, k, problem)
        facts = dict(artifact.facts)
        start = time.time()
        common: dict[str, Any] = {"compile_ms": artifact.compile_ms, "started_at": start}
        with tempfile.TemporaryDirectory(prefix="tunex-run-") as tmp:
            cwd = Path(tmp)
            binary = cwd / "kernel.bin"
            binary.write_bytes(artifact.payload.elf)
            binary.chmod(0o755)
            write_inputs(cwd / "in.bin", k, problem, inputs)
            repeats, warmup, flush_kb = self.harness_args()
            argv = ["in.bin", "out.bin", str(repeats), str(warmup), str(flush_kb)]
            result = self.run(binary, argv, cwd)
            facts.update(result.facts)
            facts["run_seconds"] = round(result.seconds, 4)
            if result.lost is not None:
                return Measurement.failed(config, Status.WORKER_LOST, result.lost, facts=facts,
                                          **common)
            if result.timed_out:
                return Measurement.failed(config, Status.TIMEOUT,
                                          f"run exceeded {self.timeout:g} s", facts=facts,
                                          **common)
            if result.returncode != 0 or "tx_done" not in result.stdout:
                why = _tail(result.stderr + "\n" + result.stdout)
                how = exit_text(result.returncode) + (
                    "" if result.returncode else " before the harness finished (does the "
                    "kernel call exit()?)")
                return Measurement.failed(config, Status.RUNTIME_ERROR,
                                          f"{how}: {why}" if why else how, facts=facts,
                                          **common)
            try:
                got = read_outputs(cwd / "out.bin", k, problem)
            except (OSError, ValueError) as e:
                return Measurement.failed(config, Status.RUNTIME_ERROR, f"outputs: {e}",
                                          facts=facts, **common)
            if self.check:
                wrong = k.check(got, want, magnitude)
                if wrong:
                    return Measurement.failed(config, Status.WRONG_RESULT, wrong, facts=facts,
                                              **common)
            times, more = self.timing(result, binary)
        facts.update(more)
        if not times:
            return Measurement.failed(config, Status.RUNTIME_ERROR,
                                      "the run printed no timing", facts=facts, **common)
        return Measurement(config, Status.OK, times, facts=facts, ended_at=time.time(), **common)

    # -- helpers for subclasses -----------------------------------------------------------------

    def _run_process(self, argv: Sequence[str], cwd: Path) -> RunResult:
        """Run ``argv`` in a process group of its own, ended with all it started.

        What the binary forks dies with it: on a timeout and when it returns, the group is
        killed (a fork left running would spin on a CPU, and, holding the output pipe, turn
        the next wait into a timeout). Output goes to files, so a fork that outlives the
        binary cannot hold the run open. A worker that is killed kills its children's
        groups (:meth:`tunex.cluster.LocalExecutor`'s worker ``kill``).
        """
        t0 = time.perf_counter()
        with tempfile.TemporaryFile("w+", errors="replace") as out, \
                tempfile.TemporaryFile("w+", errors="replace") as err:
            proc = subprocess.Popen(list(argv), cwd=cwd, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                with contextlib.suppress(OSError):  # the group is gone already
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            seconds = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if timed_out:
            return RunResult(-9, stdout, "", seconds, timed_out=True)
        return RunResult(proc.returncode, stdout, stderr, seconds)

