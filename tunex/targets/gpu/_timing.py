"""Timing kernels on a GPU, and what a failed launch means: one harness for every caller."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tunex.trial import Status

__all__ = ["GpuTimer", "MeasureOptions", "failure_status"]


@dataclass(frozen=True)
class MeasureOptions:
    """How a kernel is timed on a GPU (:class:`GpuTimer`).

    Attributes:
        repeats: timed runs (each one preceded by an L2 flush); all of them are returned.
        min_repeats: fewer are never taken, even for slow kernels.
        max_time_ms: cap on the total timed kernel time; slow kernels get fewer repeats.
        warmup_ms: untimed runs for at least this long first (clocks up, caches of the driver).
        flush_mb: size of the buffer written before each repeat to evict L2 (0: no flush).
        sleep_us: a GPU sleep queued after the flush and before each start event, longer than
            the host takes to launch the timed call: what is timed is the kernel, not the
            Python launch of a small one.
        graphs: launch from a captured CUDA graph (removes launch overhead from the timing).
        check: compare with the kernel's reference on the first run of each config (targets
            that have a reference).
        load: ``"binary"`` runs the cubin the build made; ``"jit"`` recompiles the same config
            with Triton's JIT in the measuring process (slower: a fallback for Triton versions
            whose CompiledKernel cannot be rebuilt from files).
    """

    repeats: int = 20
    min_repeats: int = 5
    max_time_ms: float = 200.0
    warmup_ms: float = 10.0
    flush_mb: int = 256
    sleep_us: float = 100.0
    graphs: bool = False
    check: bool = True
    load: str = "binary"


class GpuTimer:
    """Times a callable on the current CUDA device: warm-up, then repeats, each after an L2
    flush and a short GPU sleep, each timed with CUDA events. Every repeat is returned (ms);
    callers take the median and spread, and the tuner re-measures close leaders."""

    def __init__(self, options: MeasureOptions | None = None, device: Any = None) -> None:
        import torch

        self.torch = torch
        self.options = options or MeasureOptions()
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None \
            else torch.device(device)
        self.flush = (torch.empty(self.options.flush_mb << 18, dtype=torch.int32,
                                  device=self.device) if self.options.flush_mb else None)
        khz = getattr(torch.cuda.get_device_properties(self.device), "clock_rate", 0) or 2_000_000
        self.sleep_cycles = int(self.options.sleep_us * 1e-6 * khz * 1e3)

    def time(self, fn: Callable[[], Any], repeats: int | None = None,
             warmup_ms: float | None = None) -> list[float]:
        """Runtimes of ``fn`` in ms: ``repeats`` of them (default: as many as
        :class:`MeasureOptions` allows within ``max_time_ms``)."""
        torch, opts = self.torch, self.options
        with torch.cuda.device(self.device):
            run = fn
            if opts.graphs:
                fn()  # the launcher and module must exist before capture
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    fn()
                run = graph.replay
            # one timed run sizes the warm-up and the repeats
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            run()
            e1.record()
            torch.cuda.synchronize()
            one = max(e0.elapsed_time(e1), 1e-3)
            warm = opts.warmup_ms if warmup_ms is None else warmup_ms
            for _ in range(max(1, min(1000, int(warm / one)))):  # queued, not synchronised
                run()
            n = repeats or max(opts.min_repeats, min(opts.repeats, int(opts.max_time_ms / one)))
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            for s, e in zip(starts, ends):
                if self.flush is not None:
                    self.flush.zero_()  # evict L2: every repeat starts from memory
                if self.sleep_cycles:
                    torch.cuda._sleep(self.sleep_cycles)
                s.record()
                run()
                e.record()
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def failure_status(exc: BaseException) -> Status:
    """The status of a trial that raised ``exc``, by exception class: Triton's
    ``OutOfResources`` (a block that needs more shared memory or registers than the device
    has) is ``pruned``; its compilation errors (``CompilationError`` and subclasses such as a
    failed ``tl.static_assert``, ``PTXASError``) are ``compile_error``; anything else is a
    ``runtime_error``."""
    try:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources, PTXASError
    except ImportError:  # pragma: no cover - no Triton, no Triton errors
        return Status.RUNTIME_ERROR
    if isinstance(exc, OutOfResources):
        return Status.PRUNED
    if isinstance(exc, (CompilationError, PTXASError)):
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR
