"""The decorated kernel: a dispatch cache in front of a Triton kernel (the hot path).

What fills the cache lives beside it: the resolution order in :mod:`._resolve`, tuning on a
miss in :mod:`._tune`, the ``triton.Config`` adapter in :mod:`._configs`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunex.decorator import _runtime as R
from tunex.decorator import bucket as B
from tunex.decorator._configs import ConfigsMixin, Entry, _tconfig_dict, space_from_configs
from tunex.decorator._options import AutotuneOptions
from tunex.decorator._resolve import ResolutionMixin
from tunex.decorator._target import LAUNCH_OPTIONS
from tunex.decorator._tune import TuningMixin
from tunex.errors import ConfigError, StrategyError
from tunex.identity import base_function as _base_function
from tunex.identity import source_hash
from tunex.search import available_strategies
from tunex.space import Space
from tunex.trial import Config

__all__ = ["Autotuned"]

log = R.log

_RAW_CACHE_LIMIT = 65_536
_CONFIG_LIST_PRODUCT_LIMIT = 100_000



class Autotuned(ResolutionMixin, ConfigsMixin, TuningMixin):
    """A ``@triton.jit`` kernel behind a dispatch cache; made by :func:`tunex.autotune`.

    Launch it like the kernel: ``kernel[grid](*args)``. The first call of a new key resolves a
    config (see :func:`tunex.autotune` for the order) and caches it; later calls of
    that key cost a tuple build, a dict lookup and the kernel's own launch.

    Attributes:
        fn: the wrapped kernel.
        name, kernel_hash: the kernel's identity in workloads (the hash of its source, and of
            its config list too where the space is an index into that list).
        space: the space of configs (from ``space=`` or from the ``configs=`` list).
        tunings: how many workloads this kernel tuned in this process.
        last: the last :class:`~tunex.decorator.Selection` made.
    """

    def __init__(self, fn: Any, options: AutotuneOptions | None = None) -> None:
        from tunex.tuner import Budget

        self.options = o = options or AutotuneOptions()
        configs, space, key, bucket, mode = o.configs, o.space, o.key, o.bucket, o.mode
        budget, default = o.budget, o.default
        if (configs is None) == (space is None):
            raise ConfigError("@tunex.autotune takes either configs=[triton.Config(...)] or "
                              "space=Space(...), not both and not neither")
        if mode not in R.MODES:
            raise ConfigError(f"unknown autotune mode {mode!r}: use one of {', '.join(R.MODES)}")
        if isinstance(fn, Autotuned):  # the inner one would refuse every config the outer gives
            raise ConfigError(f"{fn.name} is already under @tunex.autotune: decorate its "
                              "@triton.jit function once (to change options, decorate that "
                              "function again, e.g. tunex.autotune(...)(kernel.fn))")
        self.fn = fn
        self.base_fn = _base_function(fn)
        self.arg_names: list[str] = list(getattr(fn, "arg_names", None)
                                         or inspect.signature(self.base_fn).parameters)
        self.name = o.name or self.base_fn.__name__
        self.__name__ = self.name
        self.__doc__ = self.base_fn.__doc__
        self.kernel_hash = source_hash(fn)
        self.interpreted = type(_innermost(fn)).__name__ == "InterpretedFunction"
        self.mode = mode
        self.budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
        self.strategy = o.strategy
        if not isinstance(self.strategy, str) or \
                self.strategy.partition(":")[0] not in available_strategies():
            raise StrategyError(f"@tunex.autotune strategy={self.strategy!r}: unknown search "
                                f"strategy; choose one of {available_strategies()} (e.g. "
                                "'model', 'random', 'optuna:tpe')")
        self.db_spec = o.db
        self.listener = o.listener
        self.dtypes = o.dtypes
        self.model_path = o.model
        self.seed = o.seed
        self.remeasure = o.remeasure
        self.measure_options = o.measure
        self._do_bench, self._bench = o.do_bench, o.bench
        self.prune_configs_by = dict(o.prune_configs_by or {})
        self._problem_fn = o.problem
        self._bind_fn = o.bind

        # configs and space
        self._tconfigs: dict[Config, Any] = {}
        self._default: Config | None
        if configs is not None:
            if not isinstance(configs, (list, tuple)) or not all(
                    hasattr(c, "kwargs") and hasattr(c, "num_warps") for c in configs):
                raise ConfigError(f"{self.name}: configs= takes a list of triton.Config, got "
                                  f"{configs!r}; for a space of parameters pass space=Space(...)")
            if not configs:
                raise ConfigError(f"{self.name}: configs=[] is empty: give at least one "
                                  "triton.Config")
            self.space, self._tconfigs = space_from_configs(list(configs), self.name)
            first = Config(_tconfig_dict(configs[0]))
            self._default = next(c for c, tc in self._tconfigs.items() if tc is configs[0]) \
                if "config" in self.space.names else first
            if "config" in self.space.names:  # an index means nothing without its list
                listed = "\n".join(Config(_tconfig_dict(tc)).key for tc in self._tconfigs.values())
                self.kernel_hash = hashlib.sha256(
                    f"{self.kernel_hash}\n{listed}".encode()).hexdigest()[:16]
        else:
            if not isinstance(space, Space):
                raise ConfigError(f"{self.name}: space= takes a tunex.Space, got {space!r}; "
                                  "e.g. space=Space([Pow2('BLOCK', 64, 1024)])")
            self.space = space
            allowed = set(self.arg_names) | set(LAUNCH_OPTIONS)
            unknown = [n for n in space.names if n not in allowed]
            if unknown:
                raise ConfigError(
                    f"{self.name}: space parameters {unknown} are neither constexpr arguments of "
                    f"the kernel {self.arg_names} nor launch options {list(LAUNCH_OPTIONS)}; "
                    "rename them to match the kernel's signature")
            self._default = None
        if default is not None:
            try:
                self._default = Config(_tconfig_dict(default) if hasattr(default, "kwargs")
                                       else dict(default))
            except (TypeError, ValueError):
                raise ConfigError(f"{self.name}: default={default!r} is not a config: give a "
                                  "mapping of parameter to value or a triton.Config") from None
            if space is not None:
                self._check_default(self._default, space)

        # keys
        if isinstance(key, Mapping):
            self.key_names = list(key)
            self._buckets = {n: B.get(v) for n, v in key.items()}
        else:
            if isinstance(key, str):
                key = [key]
            self.key_names = list(key)
            self._buckets = {n: B.get((bucket or {}).get(n)) for n in self.key_names}
        for n in list(self.key_names) + list(bucket or {}):
            if n not in self.arg_names:
                raise ConfigError(f"{self.name}: key {n!r} is not an argument of the kernel "
                                  f"{self.arg_names}")
        tuned = [n for n in self.key_names if n in self.space.names]
        if tuned:  # the caller passes it, and the config would pass it again
            raise ConfigError(f"{self.name}: {tuned} both select the config (key) and are "
                              "tuned (space parameters): the call gives them, so they cannot "
                              "be tuned; drop them from one of the two")
        sig = inspect.signature(self.base_fn)
        self._defaults = {p.name: p.default for p in sig.parameters.values()
                          if p.default is not inspect.Parameter.empty}
        # what a call need not pass: the config's parameters, the signature's defaults and
        # what triton.heuristics wrappers compute at launch
        self._given = set(self.space.names) | set(self._defaults) | {
            k for tc in self._tconfigs.values() for k in tc.kwargs}
        inner: Any = fn
        while inner is not None:
            values = getattr(inner, "values", None)
            if isinstance(values, dict):
                self._given |= set(values)
            inner = getattr(inner, "fn", None)
        self._dtype_names: list[str] | None = None if o.dtypes else []

        # benchmarking hooks, as triton.autotune has them
        self.reset_to_zero = list(o.reset_to_zero or [])
        self.restore_value = list(o.restore_value or [])
        for n in self.reset_to_zero + self.restore_value:
            if n not in self.arg_names:
                raise ConfigError(f"{self.name}: {n!r} (reset_to_zero/restore_value) is not an "
                                  f"argument of the kernel {self.arg_names}")
        self._user_pre_hook, self._user_post_hook = o.pre_hook, o.post_hook

        # dispatch state
        self._lock = threading.RLock()
        self._cache: dict[Any, Entry] = {}
        self._by_workload: dict[str, tuple[Entry, Config]] = {}
        self._generated: dict[tuple[Any, ...], tuple[Callable[..., Any], Callable[..., Any]]] = {}
        self._run = fn.run
        self._launch: Callable[..., Any] = self._miss_launch
        self._bound_spaces: dict[str, Space] = {}
        self._stale_warned: set[str] = set()
        self.tunings = 0
        self.last: R.Selection | None = None
        self.best_config: Any = None
        R.register(self)

    def _check_default(self, default: Config, space: Space) -> None:
        """The default of a ``space=`` kernel names each parameter with one of its values
        (its constraints may read problem sizes, checked once they are known)."""
        domains = Space(space.params, name=space.name)  # its constraints wait for the problem
        problems = domains.violations(
            {k: v for k, v in default.items() if k not in LAUNCH_OPTIONS})
        if problems:
            raise ConfigError(f"{self.name}: default={dict(default)} is not a config of the "
                              f"space ({'; '.join(problems)}): it would be launched as is where "
                              "nothing better is known; give one of the space's points")

    # -- launching -----------------------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self._launch, grid)

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch like ``triton.JITFunction.run`` (``kernel[grid](...)`` calls this path)."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        return self._launch(grid, *args, **kwargs)

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> list[Any]:
        """Compile every config of the space for these arguments without launching (as
        ``triton.autotune``'s ``warmup``); spaces of more than 1024 points are refused."""
        if self.space.problem and not self.space.is_bound:
            space = self._space_for(self.workload(self._bind(args, kwargs))[0])
        else:
            space = self.space
        if space.size > 1024:
            raise ConfigError(f"{self.name}: warmup would compile {space.size} configs; tune "
                              "(mode='on_miss' or tunex search) instead")
        out = []
        for config in space:
            kw = self.launch_kwargs(config)
            out.append(self.fn.warmup(*args, grid=grid, **kwargs, **kw))
        return out

    def _miss_launch(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        return self._miss(grid, args, kwargs)

    def _pattern(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        """How this call passes each key argument: by position, keyword or default, and
        whether it is a tensor (its dtype is the key then)."""
        out: list[tuple[Any, ...]] = []
        assert self._dtype_names is not None
        for n in self.key_names + self._dtype_names:
            i = self.arg_names.index(n)
            if i < len(args):
                out.append(("p", i, hasattr(args[i], "dtype")))
            elif n in kwargs:
                out.append(("k", n, hasattr(kwargs[n], "dtype")))
            else:
                out.append(("d", n, i))
        return tuple(out)

    def _generate(self, pattern: tuple[Any, ...]) -> tuple[Callable[..., Any],
                                                            Callable[..., Any]]:
        """The launcher and key function for one call pattern.

        Generated as source so the hot path is one tuple display and one dict lookup; the
        source holds only integer positions and argument names (identifiers), never user data.
        """
        parts = [str(len(self._generated))]  # the pattern's id: keys of patterns never collide
        for kind, a, b in pattern:
            if kind == "p":
                parts.append(f"args[{a}]" + (".dtype" if b else ""))
            elif kind == "k":
                parts.append(f"kwargs[{a!r}]" + (".dtype" if b else ""))
            else:
                parts.append(f"(args[{b}] if len(args) > {b} else "
                             f"kwargs.get({a!r}, defaults.get({a!r})))")
        key = "(" + ", ".join(parts) + ",)"
        src = textwrap.dedent(f"""
            def keyfn(args, kwargs):
                return {key}

            def launch(grid, *args, **kwargs):
                try:
                    kw, hook = cache[{key}]
                except Exception:
                    return miss(grid, args, kwargs)
                if hook is not None:
                    hook(args, kwargs)
                if kwargs:
                    return run(*args, grid=grid, **kwargs, **kw)
                return run(*args, grid=grid, **kw)
        """)
        scope: dict[str, Any] = {"cache": self._cache, "miss": self._miss, "run": self._run,
                                 "defaults": self._defaults}
        exec(compile(src, f"<tunex.autotune {self.name}>", "exec"), scope)
        return scope["launch"], scope["keyfn"]

    def _miss(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Slow path: pick the launcher for this call pattern, resolve the key if new."""
        with self._lock:
            if self._dtype_names is None:  # tensors of the first call: their dtypes are keyed
                named = self._bind(args, kwargs)
                self._dtype_names = [n for n in self.arg_names if n not in self.key_names
                                     and hasattr(named.get(n), "dtype")]
            pattern = self._pattern(args, kwargs)
            gen = self._generated.get(pattern)
            if gen is None:
                gen = self._generate(pattern)
                self._generated[pattern] = gen
            self._launch, keyfn = gen
            try:
                key = keyfn(args, kwargs)
                entry = self._cache.get(key)
            except TypeError:  # an unhashable key value: resolve without the raw cache
                key, entry = None, None
            tuned = False
            if entry is None:
                entry, tuned = self._resolve(grid, args, kwargs)
                if key is not None:
                    if len(self._cache) >= _RAW_CACHE_LIMIT:
                        self._cache.clear()
                    self._cache[key] = entry
        kw, hook = entry
        if tuned:
            self._reset({**self._bind(args, kwargs), **kw})
        if hook is not None:
            hook(args, kwargs)
        self._check_conflicts(kwargs, kw)
        return self._run(*args, grid=grid, **kwargs, **kw)

    def _check_conflicts(self, kwargs: Mapping[str, Any], kw: Mapping[str, Any]) -> None:
        clash = sorted((kwargs.keys() & kw.keys()) - {"warmup"})
        if clash:
            raise ConfigError(f"{self.name}: {clash} are tuned by @tunex.autotune; do not pass "
                              "them to the call")

    def _bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        named = dict(self._defaults)
        named.update(zip(self.arg_names, args))
        named.update(kwargs)
        return named

    def clear_cache(self) -> None:
        """Forget every resolved key (the next call of each resolves it again)."""
        with self._lock:
            self._cache.clear()
            self._by_workload.clear()
            self._launch = self._miss_launch

def _innermost(fn: Any) -> Any:
    inner = fn
    while hasattr(inner, "fn") and not inspect.isfunction(inner):
        nxt = inner.fn
        if inspect.isfunction(nxt):
            return inner
        inner = nxt
    return inner


