"""Targets: how to build a config for a platform and how to measure it.

Targets by name (``make_target`` specs): ``replay:PATH`` (recorded measurements; options after
``?``: ``noisy=1``, ``seed=N``, ``definition=T1.json``), ``triton_gpu`` (Triton on an NVIDIA GPU),
``cpu`` (C kernels compiled and timed on this machine), ``riscv-sim:CORE`` (C/RVV kernels under
QEMU with a cycle model of the core: x60, x280, p670), ``riscv-ssh:HOST`` (RISC-V boards over
SSH). Hardware-specific targets are imported only when used.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any
from urllib.parse import parse_qsl

from tunex.errors import TargetError
from tunex.targets._base import Target

__all__ = ["Target", "available_targets", "make_target", "register_target", "target_class"]

_REGISTRY: dict[str, str] = {
    "replay": "tunex.targets.replay:ReplayTarget",
    "triton_gpu": "tunex.targets.triton_gpu:TritonGPUTarget",
    "cpu": "tunex.targets.cpu:CpuTarget",
    "riscv-sim": "tunex.targets.riscv.sim:RiscvSimTarget",
    "riscv-ssh": "tunex.targets.riscv.ssh:RiscvSSHTarget",
}


def register_target(name: str, path: str) -> None:
    """Make a target available to :func:`make_target` (``"module:Class"``, imported on use)."""
    _REGISTRY[name] = path


def available_targets() -> list[str]:
    return sorted(_REGISTRY)


def _coerce(v: str) -> Any:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False, "yes": True, "no": False, "on": True,
            "off": False}.get(v.lower(), v)


_FLAGS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False,
          "1": True, "0": False}


def _option(target: str, key: str, value: str, param: inspect.Parameter | None) -> Any:
    """A spec's option text as its parameter takes it: a path or a compiler's name stays text
    (``cc=false`` names a compiler, not "no compiler"), a flag must be one, and the rest is a
    number where it reads as one."""
    if param is None or param.annotation is inspect.Parameter.empty:
        return _coerce(value)
    kinds = {t.strip() for t in str(param.annotation).split("|")} - {"None"}
    if kinds and kinds <= {"str", "Path"}:
        return value
    if kinds == {"bool"}:
        if value.lower() not in _FLAGS:
            raise TargetError(f"target {target!r}: option {key}={value!r} is neither on nor "
                              f"off: give {key}=true or {key}=false")
        return _FLAGS[value.lower()]
    return _coerce(value)


def target_class(spec: str) -> type[Target]:
    """The class of the target a :func:`make_target` spec names (imported, not constructed)."""
    name = spec.partition("?")[0].partition(":")[0]
    path = _REGISTRY.get(name)
    if path is None:
        raise TargetError(f"unknown target {name!r}; choose one of {available_targets()} "
                          "(e.g. replay:PATH_TO_RECORDED_SPACE)")
    module, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as e:
        raise TargetError(f"target {name!r} needs the package {e.name!r}; install tunex with "
                          f"its extra, e.g. pip install 'tunex[{name.split('_')[0]}]'") from e
    return cls


def make_target(spec: str, **options: Any) -> Target:
    """Create a target from ``NAME[:ARG][?key=value&...]``, e.g. ``replay:data.json.gz?noisy=1``."""
    if not isinstance(spec, str):
        raise TargetError(f"target {spec!r}: give a target's spec, e.g. 'cpu', "
                          "'riscv-sim:x280', 'triton_gpu' or 'replay:PATH'")
    head, _, query = spec.partition("?")
    name, _, arg = head.partition(":")
    cls: Any = target_class(spec)
    sig = inspect.signature(cls)
    opts = {k: _option(name, k, v, sig.parameters.get(k))
            for k, v in parse_qsl(query, keep_blank_values=True)}
    opts.update(options)
    takes = [p for p in sig.parameters if p not in ("self", "args", "kwargs")]
    unknown = [k for k in opts if k not in sig.parameters]
    if unknown:
        raise TargetError(f"target {name!r} has no option {', '.join(map(repr, unknown))}; "
                          f"it takes {', '.join(takes)}")
    positional = [p for p in sig.parameters.values()
                  if p.default is inspect.Parameter.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    accepts = [p for p in sig.parameters.values()
               if p.name != "self" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if ":" in head and not arg:  # "riscv-sim:" silently meant the default core
        raise TargetError(f"target {name!r} needs its {accepts[0].name} after ':': "
                          f"{name}:{accepts[0].name.upper()}" if accepts else
                          f"target {name!r} takes nothing after ':': write {name}")
    if arg and not accepts:
        raise TargetError(f"target {name!r} takes nothing after ':' (got {arg!r}); options go "
                          f"after '?': {name}?{takes[0] if takes else 'option'}=...")
    if positional and not arg and positional[0].name not in opts:
        raise TargetError(f"target {name!r} needs its {positional[0].name}: "
                          f"{name}:{positional[0].name.upper()}")
    try:
        return cls(arg, **opts) if arg else cls(**opts)
    except (TypeError, ValueError) as e:
        raise TargetError(f"target {spec!r}: {e}; options are {', '.join(takes)}") from None
