"""The decorated kernel: a dispatch cache in front of a Triton kernel, and what fills it."""

from __future__ import annotations

import functools
import inspect
import math
import os
import textwrap
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tunex.autotune import _runtime as R
from tunex.autotune import bucket as B
from tunex.autotune._tune import TuningMixin, best_in
from tunex.errors import ConfigError, DatabaseError, TunexError
from tunex.space import Choice, Constraint, Space
from tunex.targets._triton_common import base_function as _base_function
from tunex.targets._triton_common import source_hash
from tunex.trial import Config, Workload

__all__ = ["Autotuned"]

log = R.log

#: Launch options a config may set beside the kernel's constexpr meta-parameters.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_RAW_CACHE_LIMIT = 65_536
_CONFIG_LIST_PRODUCT_LIMIT = 100_000

Bench = Callable[[Callable[[], Any], Config], Sequence[float]]
Entry = tuple[dict[str, Any], Any]  # (launch kwargs, per-call hook or None)


def _plain(value: Any) -> Any:
    """A key value as the database stores it (dtypes become their short name)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    text = str(value)
    return text[6:] if text.startswith("torch.") else text


def _tconfig_dict(tc: Any) -> dict[str, Any]:
    d = dict(tc.kwargs)
    d["num_warps"] = tc.num_warps
    d["num_stages"] = tc.num_stages
    if getattr(tc, "num_ctas", 1) not in (None, 1):
        d["num_ctas"] = tc.num_ctas
    if getattr(tc, "maxnreg", None) is not None:
        d["maxnreg"] = tc.maxnreg
    return d


def space_from_configs(configs: Sequence[Any], name: str) -> tuple[Space, dict[Config, Any]]:
    """A space whose valid points are exactly the given ``triton.Config`` list.

    Parameters are the union of the configs' meta-parameters and launch options, each over the
    values the list uses, and one constraint keeps the points of the list, so the search
    strategies and the cost model see real parameters. When the configs set different names
    or their product is huge, the space is one ``config`` index parameter instead.
    """
    mapping: dict[Config, Any] = {}
    for tc in configs:
        mapping.setdefault(Config(_tconfig_dict(tc)), tc)
    names = [tuple(c) for c in mapping]
    values: dict[str, list[Any]] = {}
    for c in mapping:
        for k, v in c.items():
            values.setdefault(k, [])
            if v not in values[k]:
                values[k].append(v)
    same = len(set(names)) == 1
    product = math.prod(len(v) for v in values.values())
    if same and product <= _CONFIG_LIST_PRODUCT_LIMIT:
        members = frozenset(mapping)
        params = []
        for k in names[0]:
            vals = values[k]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                vals = sorted(vals)
            params.append(Choice(k, vals))
        rule = Constraint(lambda **kw: Config(kw) in members, names=names[0],
                          description="is one of the given triton.Config list")
        return Space(params, [rule] if product > len(members) else [], name=name), mapping
    indexed = {Config(config=i): tc for i, tc in enumerate(mapping.values())}
    return Space([Choice("config", list(range(len(indexed))))], name=name), indexed


class Autotuned(TuningMixin):
    """A ``@triton.jit`` kernel behind a dispatch cache; made by :func:`tunex.autotune`.

    Launch it like the kernel: ``kernel[grid](*args)``. The first call of a new key resolves a
    config (see :func:`tunex.autotune.autotune` for the order) and caches it; later calls of
    that key cost a tuple build, a dict lookup and the kernel's own launch.

    Attributes:
        fn: the wrapped kernel.
        name, kernel_hash: the kernel's identity in workloads.
        space: the space of configs (from ``space=`` or from the ``configs=`` list).
        tunings: how many workloads this kernel tuned in this process.
        last: the last :class:`~tunex.autotune.Selection` made.
    """

    def __init__(self, fn: Any, *, configs: Sequence[Any] | None, space: Space | None,
                 key: Sequence[str] | Mapping[str, Any], bucket: Mapping[str, Any] | None,
                 mode: str, budget: Any, strategy: str, db: Any, name: str | None,
                 default: Any, reset_to_zero: Sequence[str] | None,
                 restore_value: Sequence[str] | None, pre_hook: Callable[..., Any] | None,
                 post_hook: Callable[..., Any] | None, prune_configs_by: Mapping[str, Any] | None,
                 do_bench: Callable[..., Any] | None, bench: Bench | None, warmup: int,
                 rep: int, listener: Callable[[R.Selection], None] | None, dtypes: bool,
                 model: str | os.PathLike[str] | None, seed: int | None,
                 remeasure: int = 1,
                 problem: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                 bind: Callable[[Space, Workload], Space] | None = None) -> None:
        from tunex.tuner import Budget

        if (configs is None) == (space is None):
            raise ConfigError("@tunex.autotune takes either configs=[triton.Config(...)] or "
                              "space=Space(...), not both and not neither")
        if mode not in R.MODES:
            raise ConfigError(f"unknown autotune mode {mode!r}: use one of {', '.join(R.MODES)}")
        self.fn = fn
        self.base_fn = _base_function(fn)
        self.arg_names: list[str] = list(getattr(fn, "arg_names", None)
                                         or inspect.signature(self.base_fn).parameters)
        self.name = name or self.base_fn.__name__
        self.__name__ = self.name
        self.__doc__ = self.base_fn.__doc__
        self.kernel_hash = source_hash(fn)
        self.interpreted = type(_innermost(fn)).__name__ == "InterpretedFunction"
        self.mode = mode
        self.budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
        self.strategy = strategy
        self.db_spec = db
        self.listener = listener
        self.dtypes = dtypes
        self.model_path = model
        self.seed = seed
        self.remeasure = remeasure
        self.warmup_ms, self.rep_ms = warmup, rep
        self._do_bench, self._bench = do_bench, bench
        self.prune_configs_by = dict(prune_configs_by or {})
        self._problem_fn = problem
        self._bind_fn = bind

        # configs and space
        self._tconfigs: dict[Config, Any] = {}
        self._default: Config | None
        if configs is not None:
            if not configs:
                raise ConfigError(f"{self.name}: configs=[] is empty: give at least one "
                                  "triton.Config")
            self.space, self._tconfigs = space_from_configs(list(configs), self.name)
            first = Config(_tconfig_dict(configs[0]))
            self._default = next(c for c, tc in self._tconfigs.items() if tc is configs[0]) \
                if "config" in self.space.names else first
        else:
            assert space is not None
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
            self._default = Config(_tconfig_dict(default) if hasattr(default, "kwargs")
                                   else dict(default))

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
        sig = inspect.signature(self.base_fn)
        self._defaults = {p.name: p.default for p in sig.parameters.values()
                          if p.default is not inspect.Parameter.empty}
        self._dtype_names: list[str] | None = None if dtypes else []

        # benchmarking hooks, as triton.autotune has them
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        for n in self.reset_to_zero + self.restore_value:
            if n not in self.arg_names:
                raise ConfigError(f"{self.name}: {n!r} (reset_to_zero/restore_value) is not an "
                                  f"argument of the kernel {self.arg_names}")
        self._user_pre_hook, self._user_post_hook = pre_hook, post_hook
        self._restore_copies: dict[str, Any] = {}

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
            self._bench_pre({**self._bind(args, kwargs), **kw}, reset_only=True)
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

    # -- configs -------------------------------------------------------------------------------

    def launch_kwargs(self, config: Config) -> dict[str, Any]:
        """The keyword arguments a launch with ``config`` passes to the kernel."""
        tc = self._tconfigs.get(config)
        if tc is not None:
            kw = dict(tc.all_kwargs())
        else:
            kw = config.to_dict()
        return kw

    def _entry(self, config: Config) -> Entry:
        kw = self.launch_kwargs(config)
        all_kw = dict(kw)
        for k, v in _default_options().items():
            if kw.get(k) == v and type(kw.get(k)) is int:
                del kw[k]  # Triton's own default: the same kernel, and a cheaper launch
        tc = self._tconfigs.get(config)
        hook = None
        if tc is not None and tc.pre_hook is not None:
            names, pre = self.arg_names, tc.pre_hook

            def hook(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
                pre({**dict(zip(names, args)), **kwargs, **all_kw})

        kw["warmup"] = False
        return kw, hook

    def default_config(self, space: Space) -> Config:
        if self._default is not None:
            return self._default
        return space.default()

    def triton_config(self, config: Config) -> Any:
        """The ``triton.Config`` of ``config`` (the list's own object for ``configs=``)."""
        tc = self._tconfigs.get(config)
        if tc is not None:
            return tc
        import triton

        d = config.to_dict()
        opts = {k: d.pop(k) for k in LAUNCH_OPTIONS if k in d}
        return triton.Config(d, **opts)

    # -- resolving -----------------------------------------------------------------------------

    def workload(self, named: Mapping[str, Any]) -> tuple[Workload, dict[str, Any]]:
        """The workload of a call's named arguments, and its key before bucketing.

        The problem is the bucketed key plus the tensor arguments' dtypes, or what
        ``problem=`` makes of the named arguments.
        """
        problem: dict[str, Any] = {}
        raw: dict[str, Any] = {}
        v: Any
        for n in self.key_names:
            v = named.get(n)
            if hasattr(v, "dtype"):
                v = v.dtype
            raw[n] = _plain(v)
            problem[n] = _plain(self._buckets[n](v))
        if self._problem_fn is not None:
            problem = dict(self._problem_fn(named))
        else:
            for n in self._dtype_names or ():
                v = named.get(n)
                problem[f"{n}.dtype"] = _plain(v.dtype) if hasattr(v, "dtype") else None
        return Workload(self.name, self.kernel_hash, problem, self.fingerprint()), raw

    def fingerprint(self) -> dict[str, Any]:
        """The device fingerprint of this kernel's workloads in this process."""
        return dict(R.fingerprint(self.interpreted))

    def known(self, problem: Mapping[str, Any]) -> tuple[Config, str, float | None]:
        """What the database or a pack holds for this workload problem (as :meth:`workload`
        makes it), found without launching, tuning or asking the cost model: the config,
        where it comes from (``"db"``, ``"pack"``, or ``"default"`` when neither has one) and
        its measured median time in ms when the database or an exact-device pack has one."""
        workload = Workload(self.name, self.kernel_hash, dict(problem), self.fingerprint())
        config, source, _reason, extra = self._lookup(workload, self._space_for(workload),
                                                      "never", model=False)
        assert config is not None  # mode "never" always names a config
        t = extra.get("time_ms")
        return config, source, None if t is None else float(t)

    def _space_for(self, workload: Workload) -> Space:
        space = self.space
        if not space.problem or space.is_bound:
            return space
        k = canonical_problem(workload)
        hit = self._bound_spaces.get(k)
        if hit is None and self._bind_fn is not None:
            hit = self._bind_fn(space, workload)
            self._bound_spaces[k] = hit
        if hit is None:
            values = {n: workload.problem[n] for n in space.problem
                      if n in workload.problem and n not in space.bound}
            missing = [n for n in space.problem if n not in values and n not in space.bound]
            if missing:
                raise ConfigError(
                    f"{self.name}: the space's problem sizes {missing} are not keys of the "
                    f"kernel ({self.key_names}); add them to key=... or bind them first "
                    "(space.bind(...))")
            hit = space.bind(**values)
            self._bound_spaces[k] = hit
        return hit

    def _resolve(self, grid: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
                 ) -> tuple[Entry, bool]:
        started = time.perf_counter()
        named = self._bind(args, kwargs)
        workload, raw = self.workload(named)
        wkey = workload.key
        mode = R.resolve_mode(self.mode)
        known = self._by_workload.get(wkey)
        if known is not None:
            self._select(workload, raw, known[1], "cache", "same bucket as an earlier call",
                         mode, started)
            return known[0], False
        space = self._space_for(workload)
        config, source, reason, extra = self._lookup(workload, space, mode)
        tuned = False
        if config is None:
            assert mode == "on_miss"
            config, reason, extra = self._tune(workload, space, grid, args, kwargs, named,
                                               extra)
            source, tuned = extra.pop("source", "tuned"), True
        entry = self._entry(config)
        self._by_workload[wkey] = (entry, config)
        self.best_config = self.triton_config(config) if self._tconfigs else config
        self._select(workload, raw, config, source, reason, mode, started, **extra)
        return entry, tuned

    def _select(self, workload: Workload, raw: Mapping[str, Any], config: Config, source: str,
                reason: str, mode: str, started: float, **extra: Any) -> None:
        sel = R.Selection(self.name, workload, config, source, reason, mode, dict(raw),
                          seconds=time.perf_counter() - started, **extra)
        self.last = sel
        R.notify(sel, self.listener)

    def _valid(self, config: Config, space: Space) -> bool:
        return config in space

    def _lookup(self, workload: Workload, space: Space, mode: str, model: bool = True
                ) -> tuple[Config | None, str, str, dict[str, Any]]:
        """Database, packs, model (unless ``model=False``), default; None for on_miss when
        tuning is due (with the approximate candidates worth measuring first in
        ``extra["seeds"]``)."""
        seeds: list[Config] = []
        db = None
        try:
            db = R.open_db(self.db_spec, create=False)
            best = best_in(db, workload, space) if db is not None else None
        except DatabaseError as exc:
            if mode == "on_miss":
                raise
            R.db_error(exc)
            best = None
        if best is not None:
            return best.config, "db", f"best in {db!r}, median {best.value:.4g} ms", {
                "time_ms": best.value}
        match = self._pack_match(workload, space)
        if match is not None:
            if mode != "on_miss" or match.tier == "exact":
                return match.config, "pack", match.reason, {"time_ms": match.entry.median_ms
                                                            if match.tier == "exact" else None}
            seeds.append(match.config)
        if mode != "pinned" and model:
            picked = self._model_pick(workload, space, db)
            if picked is not None:
                if mode == "never":
                    return picked[0], "model", picked[1], {}
                seeds.append(picked[0])
        default = self.default_config(space)
        if mode == "on_miss":
            return None, "", "", {"seeds": [default, *seeds]}
        why = "no database row, pack or cost model for this workload"
        if mode == "pinned":
            why = "pinned: no database row or pack for this workload"
            log.warning("%s: %s; using the default config %s", self.name, why, dict(default))
        return default, "default", why, {}

    def _pack_match(self, workload: Workload, space: Space) -> Any:
        from tunex.db.packs import resolve

        packs = R.loaded_packs()
        if not packs:
            return None
        match = resolve(packs, workload)
        if match is not None and not self._valid(match.config, space):
            log.warning("%s: %s gives %s, which is not in the kernel's space; ignoring it",
                        self.name, match.reason, dict(match.config))
            return None
        if match is None:
            for p in packs:
                hashes = p.kernels().get(self.name)
                if hashes and self.kernel_hash not in hashes and p.label not in self._stale_warned:
                    self._stale_warned.add(p.label)
                    log.warning(
                        "%s: pack %s holds configs for another version of this kernel (source "
                        "hash %s, this one is %s); they are not used: re-tune and export a new "
                        "pack", self.name, p.label, ",".join(sorted(hashes)), self.kernel_hash)
        return match

    # -- cost model ----------------------------------------------------------------------------

    def model_file(self, db: Any = None) -> Path | None:
        """Where this kernel's cost model lives: ``model=`` or, beside a file database,
        ``tunex-models/<kernel>.json``."""
        if self.model_path is not None:
            return Path(os.fspath(self.model_path))
        path = getattr(db, "path", None)
        if path is None:
            return None
        return Path(path).parent / "tunex-models" / f"{self.name}.json"

    def _model_pick(self, workload: Workload, space: Space,
                    db: Any) -> tuple[Config, str] | None:
        path = self.model_file(db)
        if path is None or not path.exists():
            return None
        from tunex.autotune._model import predict_best

        try:
            return predict_best(path, space, workload, self.seed)
        except TunexError as exc:
            log.warning("%s: cost model %s unusable (%s); not using it", self.name, path, exc)
            return None

    def train_model(self, db: Any = None, path: str | os.PathLike[str] | None = None) -> Path:
        """Fit a cost model on every trial of this kernel in the database and save it where
        the runtime looks for it (:meth:`model_file`, or ``path``); return the file."""
        from tunex.autotune._model import train

        database = R.open_db(db if db is not None else self.db_spec, create=False)
        if database is None:
            raise ConfigError(f"{self.name}: no tuning database to train a cost model from")
        target = Path(os.fspath(path)) if path is not None else self.model_file(database)
        if target is None:
            raise ConfigError(f"{self.name}: pass path=... to save the cost model (the "
                              "database is not a file)")
        return train(database, self.name, self.space, target)


def canonical_problem(workload: Workload) -> str:
    """What a bound space depends on: the problem key and the device."""
    from tunex.trial import canonical_json

    return canonical_json([workload.problem, workload.target])


def _innermost(fn: Any) -> Any:
    inner = fn
    while hasattr(inner, "fn") and not inspect.isfunction(inner):
        nxt = inner.fn
        if inspect.isfunction(nxt):
            return inner
        inner = nxt
    return inner



@functools.lru_cache(maxsize=1)
def _default_options() -> dict[str, int]:
    """Launch options at Triton's defaults, which need not be passed."""
    out = {"num_warps": 4, "num_ctas": 1}
    try:
        import torch

        if getattr(torch.version, "hip", None) is None:
            out["num_stages"] = 3  # CUDA's default (AMD's differs)
    except ImportError:  # pragma: no cover
        pass
    return out
