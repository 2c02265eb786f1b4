"""Triton kernels on an NVIDIA GPU: compile ahead of time on any CPU, measure on the GPU.

``build`` compiles a config with ``triton.compile`` for a named architecture (``sm_90`` for the
H100/H200) without touching a GPU, so it runs in CPU worker processes on any machine with Triton
installed. It records compile-time facts (shared memory, registers, local memory used by spills,
code size) and prunes configs that cannot run: more shared memory than a block may have,
more registers than a block may hold, or heavy spilling. The artifact's payload is the cubin
and Triton's metadata: plain bytes and JSON, so it pickles to the measuring process.

``measure`` loads that cubin in the measuring process (no recompilation; Triton's
``CompiledKernel`` is rebuilt from the cubin and metadata, and launched through Triton's own
launcher), checks the result against the kernel's reference on the first run of every config,
then times it with tunex's one GPU harness (:class:`tunex.targets.gpu.GpuTimer`: warm-up,
repeats with the L2 cache flushed before each one (a 256 MiB write) and a short GPU sleep so
the launch is queued before the start event, each repeat timed with CUDA events, optionally
replayed from a CUDA graph). The measurement holds every repeat; tunex takes the median and
spread. Compiling, pruning and loading binaries are :mod:`tunex.targets.gpu`'s too, shared with
the decorator's tuning on a miss.

Create it with ``make_target("triton_gpu")`` (the visible GPU), ``make_target("triton_gpu:sm_90")``
(build for sm_90; measuring then needs a GPU of that architecture), and options after ``?``:
``repeats``, ``warmup_ms``, ``flush_mb``, ``graphs``, ``check``, ``max_spill_bytes``, ``smem``,
``load``, ``device`` (e.g. ``triton_gpu?repeats=50&graphs=1``).

Workloads (:meth:`TritonGPUTarget.prepare`) are named as ``@tunex.autotune`` names them at
runtime: the kernel's source hash and the device fingerprint (device name, architecture, Triton
version) come from :mod:`tunex.identity`, and the problem is the kernel's
:meth:`~kernels.Kernel.problem_key`, which the library kernels' launchers use too. So what
``tunex search`` records on a GPU, and packs exported from it, are found by
``kernels.matmul.matmul(a, b)`` on the same device. The torch and CUDA versions are facts of
each measurement (pack provenance lists CUDA), not part of the key.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import re
import shutil
import tempfile
import time
import traceback
from collections.abc import Mapping
from typing import Any

from tunex.errors import TargetError
from tunex.identity import (
    ARCH_FACTS,
    arch_facts,
    make_fingerprint,
    toolchain_facts,
    visible_gpu,
)
from tunex.space import Space
from tunex.targets._base import DEVICE_LOST, Target
from tunex.targets.gpu import (
    GpuTimer,
    MeasureOptions,
    TritonBinary,
    compile_binary,
    failure_status,
    load_binary,
    prune_reason,
    specialize,
)
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["ARCH_FACTS", "MeasureOptions", "TritonBinary", "TritonGPUTarget", "parse_arch"]

log = logging.getLogger("tunex.triton_gpu")

_INSTALL_HINT = ("install torch and triton (scripts/install-triton.sh, or "
                 "pip install 'tunex[triton]')")


def _triton_kernel(k: Any) -> Any:
    """``k`` when it is a Triton kernel, else a clear error (C kernels have their targets)."""
    if getattr(k, "language", "triton") != "triton":
        raise TargetError(f"kernel {k.name!r} is a {k.language} kernel; the triton_gpu target "
                          "builds Triton kernels: tune it with --target riscv-sim:x280 "
                          "(or cpu, riscv-ssh:HOST)")
    return k


def parse_arch(arch: str | int) -> int:
    """Compute capability as an int: ``"sm_90"``, ``"sm90a"``, ``"9.0"``, ``90`` -> ``90``."""
    text = str(arch).strip().lower()
    m = re.fullmatch(r"(?:sm_?|cuda:?)?(\d+)\.?(\d)?a?", text)
    if not m:
        raise TargetError(f"cannot read GPU architecture {arch!r}; write it like sm_90 or 90")
    major, minor = m.groups()
    return int(major) * 10 + int(minor) if minor is not None else int(major)


class TritonGPUTarget(Target):
    """Library kernels (``kernels/``) compiled with Triton and measured on an NVIDIA GPU.

    Args:
        arch: architecture to build for (``"sm_90"``, ``90``); default: the visible GPU's.
        repeats, warmup_ms, flush_mb, graphs, check, max_time_ms, load: see
            :class:`MeasureOptions`.
        max_spill_bytes: prune a build whose spills use more local memory than this per thread.
        smem: shared memory per block to prune against (default: the device's or the arch's).
        device: the device name the fingerprint states (default: the visible GPU's, as
            ``torch.cuda.get_device_properties(i).name`` gives it, when it is of ``arch``; else
            ``"sm_90 (ahead of time)"``). Name the GPU that will measure when building where it
            is not visible (e.g. ``triton_gpu:sm_90?device=NVIDIA H200`` on a CPU head node),
            so the rows match what ``@tunex.autotune`` looks up on that GPU.

    Raises:
        TargetError: triton/torch are not installed, or no arch is given and no GPU is visible.
    """

    name = "triton_gpu"
    noisy = True
    worker_imports = ("torch", "triton", "triton.compiler", "tunex.targets.triton_gpu",
                      "tunex.kernel", "tunex.targets.gpu._prewarm")

    def __init__(self, arch: str | int | None = None, *, repeats: int = 20,
                 warmup_ms: float = 10.0, flush_mb: int = 256, graphs: bool = False,
                 check: bool = True, max_time_ms: float = 200.0, max_spill_bytes: int = 256,
                 smem: int | None = None, load: str = "binary",
                 device: str | None = None) -> None:
        try:
            import torch  # noqa: F401
            import triton  # noqa: F401
        except ImportError as e:
            raise TargetError(f"the triton_gpu target needs {e.name}: {_INSTALL_HINT}") from None
        if load not in ("binary", "jit"):
            raise TargetError(f"load={load!r}: use load=binary (run the built cubin) or "
                              "load=jit (recompile in the measuring process)")
        self.options = MeasureOptions(repeats=int(repeats), warmup_ms=float(warmup_ms),
                                      flush_mb=int(flush_mb), graphs=bool(graphs),
                                      check=bool(check), max_time_ms=float(max_time_ms),
                                      load=load)
        self.max_spill_bytes = int(max_spill_bytes)
        gpu = visible_gpu()  # a broken driver counts as no GPU; measure says so
        if arch is None:
            if gpu is None:
                raise TargetError("no CUDA GPU is visible to torch; to build ahead of time name "
                                  "an architecture (triton_gpu:sm_90), and measure on a "
                                  "machine with an NVIDIA GPU")
            arch = gpu["capability"]
        self.arch = parse_arch(arch)
        base = arch_facts(self.arch, gpu)
        self.device_name: str | None = None
        if gpu is not None and gpu["capability"] == self.arch:
            self.device_name = gpu["name"]
        if device:
            self.device_name = str(device)
        if smem is not None:
            base["smem"] = int(smem)
        self._facts = base
        self._fingerprint = make_fingerprint(
            self.device_name or f"sm_{self.arch} (ahead of time)", f"sm_{self.arch}")
        self._state: _DeviceState | None = None

    # Device state (tensors, CUDA events, loaded kernels) lives only in the measuring process;
    # worker processes get the target without it.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_state": None}

    # -- Target contract ------------------------------------------------------------------------

    def fingerprint(self) -> Mapping[str, Any]:
        """Device name, architecture and Triton version: what ``@tunex.autotune`` reads on the
        same device (:func:`tunex.identity.make_fingerprint`)."""
        return dict(self._fingerprint)

    def facts(self) -> Mapping[str, float]:
        return {"sm_count": float(self._facts["sm_count"]),
                "smem_per_block": float(self._facts["smem"]),
                "regs_per_sm": float(self._facts["regs_per_sm"]),
                "l2_bytes": float(self._facts["l2_bytes"]),
                "arch": float(self.arch)}

    def device_facts(self) -> dict[str, Any]:
        """Values a kernel's space constraints may read (``smem``, ``sm_count``, ...)."""
        return {"smem": int(self._facts["smem"]), "sm_count": int(self._facts["sm_count"]),
                "arch": self.arch}

    def prepare(self, kernel: Any, problem: Mapping[str, Any]) -> tuple[Space, Workload]:
        """The kernel's space bound to ``problem`` and this device, and the workload.

        ``kernel`` is a :class:`kernels.Kernel` or its name; ``problem`` holds its dims (and
        ``dtype``). The workload is the one the kernel's autotuned launcher
        (:attr:`kernels.Kernel.tuned`) looks up for a call of that problem on this device:
        the kernel's name and source hash, its bucketed :meth:`~kernels.Kernel.problem_key`,
        and :meth:`fingerprint`.
        """
        from tunex.kernel import get_kernel

        if kernel is None:
            raise TargetError("name the kernel to tune, e.g. tunex search matmul --target "
                              "triton_gpu --shape M=4096,N=4096,K=4096")
        k = _triton_kernel(get_kernel(kernel))
        key = k.problem_key(problem)
        space = k.bind(k.space(), k.representative(key), self.device_facts())
        return space, Workload(k.name, k.source_hash, key, self.fingerprint())

    def build(self, workload: Workload, config: Config) -> Artifact:
        t0 = time.perf_counter()
        try:
            binary, facts = self._compile(workload, config)
        except Exception as e:  # a config that does not compile is data
            return Artifact(workload, config, Status.COMPILE_ERROR,
                            error=_short(f"{type(e).__name__}: {e}"),
                            compile_ms=(time.perf_counter() - t0) * 1e3)
        ms = (time.perf_counter() - t0) * 1e3
        why = self._prune_reason(facts)
        status = Status.PRUNED if why else Status.OK
        return Artifact(workload, config, status, payload=None if why else binary, facts=facts,
                        compile_ms=ms, error=why)

    def measure(self, artifact: Artifact) -> Measurement:
        if not artifact.ok:
            return Measurement.failed(artifact.config, artifact.status, artifact.error,
                                      compile_ms=artifact.compile_ms, facts=artifact.facts)
        state = self._device()
        return state.measure(artifact)

    def open(self) -> None:
        """The CUDA context, the L2-flush buffer and Triton's driver stubs, ahead of the first
        measurement."""
        if self._state is None and visible_gpu() is not None:
            self._device()
            with contextlib.suppress(Exception):  # the first load reports what fails
                from triton.runtime import driver

                driver.active.utils  # noqa: B018 - builds Triton's CUDA helper module once

    def close(self) -> None:
        if self._state is not None:
            self._state.close()
            self._state = None

    # -- building -------------------------------------------------------------------------------

    def _compile(self, workload: Workload, config: Config) -> tuple[TritonBinary, dict[str, Any]]:
        from tunex.kernel import get_kernel

        k = _triton_kernel(get_kernel(workload.kernel))
        problem = k.representative(workload.problem)
        inputs = k.make_inputs(problem, device="meta")
        signature, constexprs, attrs = specialize(k.fn, k.ordered_args(inputs, problem, config))
        return compile_binary(k.fn, signature, constexprs, attrs, self.arch,
                              k.launch_options(config))

    def _prune_reason(self, facts: Mapping[str, Any]) -> str | None:
        return prune_reason(facts, self._facts, self.arch, self.max_spill_bytes)

    # -- measuring ------------------------------------------------------------------------------

    def _device(self) -> _DeviceState:
        if self._state is None:
            self._state = _DeviceState(self)
        return self._state


def _short(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def _error(e: BaseException) -> str:
    """The exception and where it came from (the last frames), for the trial's record."""
    where = "".join(traceback.format_tb(e.__traceback__, limit=-2)).strip()
    return f"{type(e).__name__}: {e}" + (f"\n{where}" if where else "")



class _DeviceState:
    """What the measuring process keeps: inputs and references per workload, loaded kernels."""

    def __init__(self, target: TritonGPUTarget) -> None:
        import torch

        if not torch.cuda.is_available():
            raise TargetError("no CUDA GPU is visible to torch in the measuring process; "
                              "measure on a machine with an NVIDIA GPU (builds work anywhere)")
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        cap = p.major * 10 + p.minor
        if cap != target.arch:
            raise TargetError(f"configs are built for sm_{target.arch} but the GPU is {p.name} "
                              f"(sm_{cap}); use triton_gpu (the visible GPU) or "
                              f"triton_gpu:sm_{cap}")
        self.torch = torch
        self.target = target
        self.opts = target.options
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.name = f"{p.name}#{self.device.index}"
        self.timer = GpuTimer(self.opts, self.device)
        self.workload_key: str | None = None
        self.inputs: dict[str, Any] = {}
        self.expected: tuple[Any, ...] = ()
        self.checked: set[str] = set()
        self.tmp = tempfile.mkdtemp(prefix="tunex-cubin-")
        self.toolchain = toolchain_facts()  # torch and CUDA versions: facts, not the key
        self.lost: str | None = None  # why the CUDA context died, once it has

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _inputs_for(self, workload: Workload) -> tuple[Any, dict[str, Any]]:
        from tunex.kernel import get_kernel

        k = _triton_kernel(get_kernel(workload.kernel))
        problem = k.representative(workload.problem)
        if self.workload_key != workload.key:  # one workload's tensors at a time
            self.inputs, self.expected = {}, ()
            self.torch.cuda.empty_cache()
            self.inputs = k.make_inputs(problem, device=str(self.device))
            self.expected = k.reference(self.inputs, problem) if self.opts.check else ()
            self.torch.cuda.synchronize()
            self.workload_key = workload.key
        return k, problem

    def _load(self, binary: TritonBinary, fn: Any) -> Any:
        """Triton's CompiledKernel for ``binary``, rebuilt from its files (no compilation)."""
        return load_binary(binary, fn, self.tmp)

    def measure(self, artifact: Artifact) -> Measurement:
        if self.lost is not None:
            raise TargetError(f"the CUDA context is unusable after {self.lost.splitlines()[0]}; "
                              "restart the process (tunex's executors replace their measuring "
                              "process by themselves)")
        torch = self.torch
        config, workload = artifact.config, artifact.workload
        start = time.time()
        facts = {**self.toolchain, **artifact.facts}

        def failed(status: Status, error: str) -> Measurement:
            return Measurement.failed(config, status, _short(error), facts=facts,
                                      compile_ms=artifact.compile_ms, worker=self.name,
                                      started_at=start)

        k, problem = self._inputs_for(workload)
        k.prepare_thread()  # this thread may not be the one that imported the kernel
        try:
            args = k.ordered_args(self.inputs, problem, config)
            grid = tuple(k.grid(problem, config))
            grid += (1,) * (3 - len(grid))  # CompiledKernel indexes all three dimensions
            if self.opts.load == "jit":
                runner = functools.partial(k.fn[grid], **k.launch_options(config))
            else:
                # loads the module; refuses a block that needs too much shared memory
                runner = self._load(artifact.payload, k.fn)[grid]
        except Exception as e:
            return failed(failure_status(e), _error(e))

        def launch() -> None:
            runner(*args)

        try:
            key = f"{workload.key}|{config.key}"
            if self.opts.check and key not in self.checked:
                for out in k.outputs(self.inputs):
                    out.fill_(math.nan) if out.is_floating_point() else out.zero_()
                launch()
                torch.cuda.synchronize()
                wrong = k.check(k.outputs(self.inputs), self.expected,
                                workload.problem.get("dtype", "float16"))
                if wrong:
                    return failed(Status.WRONG_RESULT, wrong)
                self.checked.add(key)
            times = self.timer.time(launch)
        except Exception as e:
            if self._context_lost():
                self.lost = _error(e)
                log.error("CUDA context lost (%s); this process can measure no more", e)
                m = failed(Status.WORKER_LOST, f"the CUDA context died: {self.lost}")
                return m.replace(facts={**m.facts, DEVICE_LOST: True})
            return failed(Status.RUNTIME_ERROR, _error(e))
        flops, nbytes = k.flops(problem), k.bytes(problem)
        med = sorted(times)[len(times) // 2]
        facts.update(tflops=flops / (med * 1e9), gbps=nbytes / (med * 1e6))
        return Measurement(config, Status.OK, tuple(times), compile_ms=artifact.compile_ms,
                           facts=facts, worker=self.name, started_at=start)

    def _context_lost(self) -> bool:
        """Whether the CUDA context is dead for good (after an illegal memory access)."""
        try:
            self.torch.cuda.synchronize()
            self.torch.zeros(1, device=self.device).add_(1).item()
            return False
        except Exception:
            return True


def kernel_summary(target: TritonGPUTarget) -> str:
    """One line about the target for logs and benchmark reports."""
    return json.dumps({**target.fingerprint(), **target.facts()}, sort_keys=True)
