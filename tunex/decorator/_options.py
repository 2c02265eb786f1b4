"""The decorator's options, as one frozen value."""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunex.errors import ConfigError
from tunex.space import Space
from tunex.targets.gpu import MeasureOptions
from tunex.trial import Workload

__all__ = ["AutotuneOptions"]

log = logging.getLogger("tunex.autotune")

#: The default budget of tuning on a miss (per workload): trials and seconds, whichever ends
#: first. On the H200 a cold first call of a GEMM with a 3,600-point space reaches 95% of its
#: final best in 3-4 s (benchmarks/RESULTS.md, "A user's kernels on a miss").
DEFAULT_BUDGET = "50trials,8s"


@dataclass(frozen=True)
class AutotuneOptions:
    """Everything ``@tunex.autotune(...)`` takes, checked once (see :func:`tunex.autotune`).

    Attributes:
        configs: a list of ``triton.Config`` (drop-in for ``triton.autotune``).
        key: argument names whose values select the config; a mapping gives each its bucket
            (a callable or a name from :mod:`tunex.bucket`: ``"pow2"``...).
        space: instead of ``configs``, a :class:`~tunex.space.Space` whose parameters are the
            kernel's constexpr meta-parameters and optionally ``num_warps``/``num_stages``;
            its problem names (for constraints) are read from the bucketed key.
        bucket: buckets for a list ``key``: ``{"M": bucket.pow2}``.
        mode: ``"never"``, ``"on_miss"`` or ``"pinned"``; the environment variable
            ``TUNEX_MODE`` overrides it.
        budget: tuning budget per workload for ``on_miss``, a :class:`~tunex.tuner.Budget` or
            its text (``"50trials,8s"``, ``"20s"``, ``"100trials"``): the same meaning as
            ``tunex search --budget``; the trials include the re-measurements of the leaders,
            and the time counts from the call that missed (set-up included), so the first
            call takes about the time budget plus the leaders' re-measurement.
        strategy: search strategy for ``on_miss`` (``"model"``, ``"random"``,
            ``"optuna:tpe"``), whatever form the budget takes.
        patience: stop tuning a workload after this many trials without a 1% gain, counting
            those proposed once the last gain was measured (``None``: only the budget stops
            it; :class:`~tunex.tuner.Tuner`'s ``patience``). Replayed on the 34 recorded
            spaces' stored cold runs (40 seeds, one trial in flight) cut at the default 50
            trials: 30 ends 185 of 1,360 runs below 95% of the optimum after 44.8 trials on
            average, 20 ends 240 after 37.2, none 180 after 49.0 (RESULTS.md).
        like: names of other kernels this one is a variant of (``["matmul"]`` for a matmul
            with TMA): their trials in the database also warm-start its tuning, as
            ``tunex search --like`` (:class:`~tunex.tuner.Tuner`'s ``like``).
        related: also warm-start from the other kernels whose spaces name most of its
            parameters: beside this kernel's other workloads, and on its first workload those
            measured on this device, trusted less (``False``: as ``tunex search
            --no-related``; :class:`~tunex.tuner.Tuner`'s ``related``).
        prior: with ``related``, the recordings tunex ships (:mod:`tunex.db.prior`: searches of its
            own Triton kernels on an NVIDIA H200 and RVV kernels on two RISC-V cores, of Kernel
            Tuner's public kernels on several GPUs) also start a kernel's first tuning, as they do
            ``tunex search``'s: the same kernel's from any device, other kernels' measured on this
            device (where no shipped file names the device or the kernel, nothing is read). On the
            H200, two kernels of a user's own at four shapes each, two runs: 1.094-1.098x
            ``triton.autotune`` against 1.058-1.095x without it, and the shape where tuning matters
            most reached 95% of its best at trial 8 instead of 36-39; the first trial of the first
            shape comes 1.3-2.5 s later (benchmarks/RESULTS.md, "the prior in the decorator").
            ``False``: none.
        db: the tuning database (path, URL or :class:`~tunex.db.Database`); default
            ``TUNEX_DB``, else ``~/.cache/tunex/tunex.db``.
        name: the kernel's name in workloads (default: the function's name).
        default: the default config (``triton.Config`` or mapping).
        reset_to_zero, restore_value, pre_hook, post_hook: as ``triton.autotune``'s, applied
            around every benchmarked launch.
        prune_configs_by: as ``triton.autotune``'s (``early_config_prune``, ``perf_model``,
            ``top_k``); with it, tuning measures the pruned list in order.
        do_bench: as ``triton.autotune``'s (``do_bench(kernel_call, quantiles)``).
        bench: ``bench(kernel_call, config) -> runtimes in ms`` (takes precedence).
        warmup: milliseconds of warm-up before each config's timed runs (default 10).
        rep: milliseconds of timed runs per config at most (default 200; 5 to 20 runs).
        use_cuda_graph: as ``triton.autotune``'s: time each config replayed from a CUDA graph.
        cache_results: accepted for ``triton.autotune`` code: tunex always keeps what it
            measured, in its database (``db``), which later processes read.
        listener: called with each :class:`~tunex.decorator.Selection` of this kernel.
        dtypes: key on the dtypes of the tensor arguments too (like ``triton.autotune``).
        model: a cost-model file to use (default: ``tunex-models/<name>.json`` beside the db).
        seed: seed of the search strategy and model sampling.
        remeasure: trials kept aside within the budget to measure the leaders within 3% of the
            best again (their runs are pooled), so one noisy timing does not pick the winner.
        problem: ``problem(named_args) -> dict``: the workload's problem key from the call's
            arguments by name, instead of the bucketed key and dtypes. It must read only the
            ``key`` arguments and the dtypes of tensor arguments: the dispatch cache is keyed
            on those. The library kernels use it so their key is
            :meth:`kernels.Kernel.problem_key`, the key offline tuning records.
        bind: ``bind(space, workload) -> Space``: the space bound to a workload's problem and
            device, for spaces whose constraints read values other than the key's.
    """

    configs: Sequence[Any] | None = None
    key: Sequence[str] | Mapping[str, Any] = ()
    space: Space | None = None
    bucket: Mapping[str, Any] | None = None
    mode: str = "never"
    budget: Any = DEFAULT_BUDGET
    strategy: str = "model"
    patience: int | None = 30
    like: Sequence[str] = ()
    related: bool = True
    prior: bool = True
    db: Any = None
    name: str | None = None
    default: Any = None
    reset_to_zero: Sequence[str] | None = None
    restore_value: Sequence[str] | None = None
    pre_hook: Callable[..., Any] | None = None
    post_hook: Callable[..., Any] | None = None
    prune_configs_by: Mapping[str, Any] | None = None
    do_bench: Callable[..., Any] | None = None
    bench: Callable[[Callable[[], Any], Any], Sequence[float]] | None = None
    warmup: float | None = None
    rep: float | None = None
    use_cuda_graph: bool = False
    cache_results: bool = False
    listener: Callable[[Any], None] | None = None
    dtypes: bool = True
    model: str | os.PathLike[str] | None = None
    seed: int | None = 0
    remeasure: int = 2
    problem: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    bind: Callable[[Space, Workload], Space] | None = None
    measure: MeasureOptions = field(init=False, repr=False, compare=False)

    @classmethod
    def make(cls, **options: Any) -> AutotuneOptions:
        """The options from the decorator's keywords; an unknown keyword is a one-line
        :class:`~tunex.errors.ConfigError`."""
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise ConfigError(f"@tunex.autotune has no option {', '.join(unknown)}; it takes "
                              f"{', '.join(names)}")
        return cls(**options)

    def __post_init__(self) -> None:
        for n, v in (("warmup", self.warmup), ("rep", self.rep)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real)
                                  or not 0 < v < math.inf):
                raise ConfigError(f"@tunex.autotune {n}={v!r}: give milliseconds > 0")
        for n, v in (("use_cuda_graph", self.use_cuda_graph), ("dtypes", self.dtypes),
                     ("cache_results", self.cache_results)):
            if not isinstance(v, bool):  # "false" would read as true
                raise ConfigError(f"@tunex.autotune {n}={v!r}: give True or False")
        if self.name is not None and not (isinstance(self.name, str) and self.name.strip()
                                          and self.name.isprintable()):
            raise ConfigError(f"@tunex.autotune name={self.name!r}: give the kernel's name "
                              "in workloads as text (default: the function's name)")
        f: Any
        for n, f in (("listener", self.listener), ("pre_hook", self.pre_hook),
                     ("post_hook", self.post_hook), ("do_bench", self.do_bench),
                     ("bench", self.bench), ("problem", self.problem), ("bind", self.bind)):
            if f is not None and not callable(f):  # else it fails (or is ignored) at a launch
                raise ConfigError(f"@tunex.autotune {n}={f!r}: give a function, or None")
        if self.db is not None and not isinstance(self.db, (str, os.PathLike)):
            from tunex.db import Database

            if not isinstance(self.db, Database):
                raise ConfigError(f"@tunex.autotune db={self.db!r}: give the tuning database "
                                  "as a path, a URL or a tunex.db.Database (default: TUNEX_DB)")
        for n in ("reset_to_zero", "restore_value"):
            f = getattr(self, n)
            if isinstance(f, str):  # one argument's name, not its letters
                object.__setattr__(self, n, [f])
            elif f is not None and not (isinstance(f, (list, tuple))
                                        and all(isinstance(a, str) for a in f)):
                raise ConfigError(f"@tunex.autotune {n}={f!r}: give a list of the kernel's "
                                  "argument names")
        key = self.key
        names = [key] if isinstance(key, str) else (
            list(key) if isinstance(key, (Mapping, list, tuple)) else None)
        if names is None or not all(isinstance(k, str) for k in names):
            raise ConfigError(f"@tunex.autotune key={key!r}: give the names of the arguments "
                              "that select the config, a list (key=['M', 'N']) or a mapping "
                              "to buckets (key={'M': 'pow2'}); key=[] for one config for all")
        twice = sorted({k for k in names if names.count(k) > 1})
        if twice:
            raise ConfigError(f"@tunex.autotune key={key!r} names {', '.join(twice)} twice")
        if isinstance(self.remeasure, bool) or not isinstance(self.remeasure, int) \
                or self.remeasure < 0:
            raise ConfigError(f"@tunex.autotune remeasure={self.remeasure!r}: give a number of "
                              "trials >= 0")
        if self.patience is not None and (isinstance(self.patience, bool)
                                          or not isinstance(self.patience, int)
                                          or self.patience < 1):
            raise ConfigError(f"@tunex.autotune patience={self.patience!r}: give a number of "
                              "trials >= 1, or None")
        if isinstance(self.like, str) or not all(isinstance(k, str) and k for k in self.like):
            raise ConfigError(f"@tunex.autotune like={self.like!r}: give a list of kernel names, "
                              "e.g. like=['matmul']")
        for what in ("related", "prior"):
            if not isinstance(getattr(self, what), bool):
                raise ConfigError(f"@tunex.autotune {what}={getattr(self, what)!r}: give True "
                                  "or False")
        from tunex.search._base import check_seed

        check_seed(self.seed, "@tunex.autotune")
        if self.cache_results:
            log.info("@tunex.autotune cache_results=True: tunex always keeps its results, in "
                     "the tuning database (db= or TUNEX_DB)")
        base = MeasureOptions()
        measure = MeasureOptions(
            warmup_ms=base.warmup_ms if self.warmup is None else float(self.warmup),
            max_time_ms=base.max_time_ms if self.rep is None else float(self.rep),
            graphs=bool(self.use_cuda_graph), check=False)
        object.__setattr__(self, "measure", measure)
