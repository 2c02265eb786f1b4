"""The ``triton.Config`` adapter of the decorator: config lists as spaces, configs as launches."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tunex.decorator._target import LAUNCH_OPTIONS
from tunex.space import Choice, Constraint, Space
from tunex.trial import Config

__all__ = ["ConfigsMixin", "space_from_configs"]

_CONFIG_LIST_PRODUCT_LIMIT = 100_000

Entry = tuple[dict[str, Any], Any]  # (launch kwargs, per-call hook or None)


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

class ConfigsMixin:
    """How :class:`~tunex.decorator.Autotuned` launches a config (its attributes, declared here)."""

    arg_names: list[str]
    _tconfigs: dict[Config, Any]
    _default: Config | None

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

