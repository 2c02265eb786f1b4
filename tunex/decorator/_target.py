"""The target of the decorator's tuning on a miss: configs measured on the call's own arguments.

Builds are compiled ahead of time in the process-wide build pool (:func:`tunex.cluster.
shared_build_pool`) when the kernel can travel there (:class:`~tunex.targets.gpu.KernelSource`)
and runs on a GPU; the binaries are then measured in the calling thread on the call's own
tensors, with ``reset_to_zero``/``restore_value`` and the hooks around every launch, while the
pool builds the next ones (:class:`~tunex.cluster.CallerExecutor`). Under Triton's interpreter,
or for a kernel that cannot travel (wrapped in ``triton.heuristics``, reading a global that does
not pickle), each config is compiled by Triton's JIT where it is measured.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunex.targets._base import Target
from tunex.trial import Artifact, Config, Measurement, Status, Workload

if TYPE_CHECKING:
    from tunex.decorator._kernel import Autotuned
    from tunex.targets.gpu import KernelSource

__all__ = ["CallBuilder", "CallTarget"]

log = logging.getLogger("tunex.autotune")

#: Launch options a config may set beside the kernel's constexpr meta-parameters.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class CallBuilder:
    """What a build process needs to compile one call's configs: the kernel, the call's
    specialisation of every argument the config does not set, and the device's limits.
    Picklable; made by :meth:`CallTarget.builder`."""

    kernel: KernelSource
    signature: dict[str, str]
    constexprs: dict[tuple[int, ...], Any]
    attrs: dict[tuple[int, ...], Any]
    tuned: tuple[tuple[str, int], ...]  # (parameter, position) of the config's constexprs
    arch: int
    limits: dict[str, float]
    max_spill_bytes: int = 256

    def build(self, workload: Workload, config: Config) -> Artifact:
        from tunex.targets.gpu import compile_binary, prune_reason

        t0 = time.perf_counter()
        signature, constexprs = dict(self.signature), dict(self.constexprs)
        for name, i in self.tuned:
            signature[name] = "constexpr"
            constexprs[(i,)] = config[name]
        options = {k: config[k] for k in LAUNCH_OPTIONS if k in config}
        try:
            binary, facts = compile_binary(self.kernel.load(), signature, constexprs,
                                           dict(self.attrs), self.arch, options)
        except Exception as e:  # a config that does not compile is data
            return Artifact(workload, config, Status.COMPILE_ERROR,
                            error=f"{type(e).__name__}: {e}"[:4000],
                            compile_ms=(time.perf_counter() - t0) * 1e3)
        why = prune_reason(facts, self.limits, self.arch, self.max_spill_bytes)
        return Artifact(workload, config, Status.PRUNED if why else Status.OK,
                        payload=None if why else binary, facts=facts,
                        compile_ms=(time.perf_counter() - t0) * 1e3, error=why)


class CallTarget(Target):
    """Measures configs of a decorated kernel on one call's arguments (in this process).

    Args:
        kernel: the decorated kernel.
        workload: the call's workload.
        grid, args, kwargs: the call as the user made it.
    """

    name = "autotune"
    noisy = True

    def __init__(self, kernel: Autotuned, workload: Workload, grid: Any,
                 args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        self.kernel = kernel
        self.workload = workload
        self.grid = grid
        self.args = args
        self.kwargs = dict(kwargs)
        self.named = kernel._bind(args, kwargs)
        self._tmp: str | None = None
        self._timer: Any = None
        self._restore: dict[str, Any] = {}

    def fingerprint(self) -> Mapping[str, Any]:
        return dict(self.workload.target)

    def builder(self) -> CallBuilder | None:
        """What the build pool compiles this call's configs with; ``None`` when they are
        compiled by Triton's JIT where they are measured instead (the interpreter, a custom
        ``bench``, a kernel that cannot travel to a build process)."""
        k = self.kernel
        if k.interpreted or not _cuda() or k._bench is not None or k._do_bench is not None:
            return None
        from tunex.identity import visible_gpu
        from tunex.targets.gpu import KernelSource, specialize

        jit = k.fn
        if not (hasattr(jit, "arg_names") and hasattr(jit, "src")):  # triton.heuristics & co.
            return None
        source = KernelSource.of(jit)
        gpu = visible_gpu()
        if source is None or gpu is None or getattr(self._device(), "type", "cuda") != "cuda":
            return None
        tuned = [n for n in k.space.names if n not in LAUNCH_OPTIONS]
        positions = {n: i for i, n in enumerate(jit.arg_names)}
        if any(n not in positions or positions[n] not in set(jit.constexprs) for n in tuned):
            return None
        full = {**self.named, **{n: 0 for n in tuned}}
        try:
            signature, constexprs, attrs = specialize(jit, [full[n] for n in jit.arg_names])
        except (TypeError, KeyError):
            return None
        for n in tuned:
            constexprs.pop((positions[n],), None)
        from tunex.identity import arch_facts

        limits = arch_facts(int(gpu["capability"]), gpu)
        return CallBuilder(source, signature, constexprs, attrs,
                           tuple((n, positions[n]) for n in tuned), int(gpu["capability"]),
                           {"smem": float(limits["smem"]),
                            "regs_per_sm": float(limits["regs_per_sm"])})

    def build(self, workload: Workload, config: Config) -> Artifact:
        """Nothing to build here: without the pool, Triton's JIT compiles at measurement."""
        return Artifact(workload, config, Status.OK)

    def measure(self, artifact: Artifact) -> Measurement:
        """Time a config on the call's own arguments; a config that fails is a failed
        measurement, never an exception."""
        from tunex.identity import toolchain_facts
        from tunex.targets.gpu import failure_status

        config = artifact.config
        k = self.kernel
        facts = {**toolchain_facts(), **artifact.facts}
        start = time.time()
        kw, hook = k._entry(config)
        full = {**self.named, **{n: v for n, v in kw.items() if n != "warmup"}}
        try:
            launch = self._launcher(artifact, kw, full)
            call = self._call(launch, hook, full)
            t0 = time.perf_counter()
            call()  # compiles the config under the JIT; its errors surface here
            _sync()
            first_ms = (time.perf_counter() - t0) * 1e3
            times = self._time(call, config)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}".strip()
            log.debug("%s: config %s failed (%s)", k.name, dict(config), text)
            return Measurement.failed(config, failure_status(exc), text[:4000], facts=facts,
                                      compile_ms=artifact.compile_ms, started_at=start,
                                      ended_at=time.time())
        if not times or not all(math.isfinite(t) for t in times):
            return Measurement.failed(config, Status.RUNTIME_ERROR,
                                      "the benchmark returned no finite time", facts=facts,
                                      started_at=start, ended_at=time.time())
        compile_ms = artifact.compile_ms if artifact.payload is not None else first_ms
        return Measurement(config, Status.OK, tuple(times), compile_ms=compile_ms, facts=facts,
                           started_at=start, ended_at=time.time())

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # -- launching -------------------------------------------------------------------------------

    def _launcher(self, artifact: Artifact, kw: Mapping[str, Any], full: Mapping[str, Any]
                  ) -> Callable[[], Any]:
        k, args, kwargs, grid = self.kernel, self.args, self.kwargs, self.grid
        if artifact.payload is None:
            run = k._run
            return lambda: run(*args, grid=grid, **kwargs, **kw)
        from tunex.targets.gpu import load_binary

        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="tunex-autotune-")
        g = tuple(grid(full) if callable(grid) else grid)
        g += (1,) * (3 - len(g))
        runner = load_binary(artifact.payload, k.fn, self._tmp)[g]
        ordered = [full[n] for n in k.fn.arg_names]
        return lambda: runner(*ordered)

    def _call(self, launch: Callable[[], Any], hook: Any, full: dict[str, Any]
              ) -> Callable[[], None]:
        args, kwargs = self.args, self.kwargs

        def call() -> None:
            if hook is not None:
                hook(args, kwargs)
            self.pre(full)
            try:
                launch()
            except BaseException as e:
                try:
                    self.post(full, e)
                finally:
                    raise
            self.post(full, None)

        return call

    def pre(self, full: dict[str, Any], reset_only: bool = False) -> None:
        """What runs before every benchmarked launch: the user's ``pre_hook``, else
        ``reset_to_zero`` and a copy of the ``restore_value`` arguments."""
        k = self.kernel
        if k._user_pre_hook is not None:
            if reset_only:
                k._user_pre_hook(full, reset_only=True)
            else:
                k._user_pre_hook(full)
            return
        for n in k.reset_to_zero:
            full[n].zero_()
        if not reset_only and k.restore_value:
            self._restore = {n: full[n].clone() for n in k.restore_value}

    def post(self, full: dict[str, Any], exception: BaseException | None) -> None:
        """What runs after: the user's ``post_hook``, else ``restore_value``."""
        k = self.kernel
        if k._user_post_hook is not None:
            k._user_post_hook(full, exception=exception)
            return
        for n in k.restore_value:
            if n in self._restore:
                full[n].copy_(self._restore[n])
        self._restore = {}

    def _time(self, call: Callable[[], None], config: Config) -> list[float]:
        k = self.kernel
        if k._bench is not None:
            return [float(t) for t in k._bench(call, config)]
        if k._do_bench is not None:  # triton.autotune's do_bench(kernel_call, quantiles)
            got = k._do_bench(call, quantiles=(0.5, 0.2, 0.8))
            return [float(t) for t in (got if isinstance(got, (list, tuple)) else [got])]
        if not k.interpreted and _cuda():
            if self._timer is None:
                from tunex.targets.gpu import GpuTimer

                self._timer = GpuTimer(k.measure_options, self._device())
            return [float(t) for t in self._timer.time(call)]
        out = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    def _device(self) -> Any:
        for v in (*self.args, *self.kwargs.values()):
            if hasattr(v, "device") and hasattr(v, "data_ptr"):
                return v.device
        import torch

        return torch.device("cuda", torch.cuda.current_device())


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


def _sync() -> None:
    if _cuda():
        import torch

        torch.cuda.synchronize()


def best_of_siblings(history: Sequence[tuple[Workload, Sequence[Measurement]]],
                     workload: Workload, space: Any, limit: int = 3) -> list[Config]:
    """The best configs of other workloads of the same kernel code and architecture that belong
    to ``space``, nearest problems first: what a new shape measures first."""
    def distance(w: Workload) -> float:
        d = 0.0
        for n, v in workload.problem.items():
            o = w.problem.get(n)
            if isinstance(v, (int, float)) and isinstance(o, (int, float)) and v > 0 and o > 0:
                d += abs(math.log2(v) - math.log2(o))
            elif o != v:
                d += 8.0
        return d

    same = [(w, ms) for w, ms in history if w.kernel_hash == workload.kernel_hash
            and w.target.get("arch") == workload.target.get("arch")]
    out: list[Config] = []
    for _w, ms in sorted(same, key=lambda x: distance(x[0])):
        ok = [m for m in ms if m.ok and m.config in space]
        if ok:
            best = min(ok, key=lambda m: m.value).config
            if best not in out:
                out.append(best)
        if len(out) >= limit:
            break
    return out
