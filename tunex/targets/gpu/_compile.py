"""Compiling Triton kernels ahead of time, in any process, and loading the result elsewhere."""

from __future__ import annotations

import builtins
import importlib
import inspect
import linecache
import os
import pickle
import re
import shutil
import subprocess
import tempfile
import textwrap
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KernelSource", "TritonBinary", "compile_binary", "load_binary", "prune_reason",
           "specialize"]


@dataclass(frozen=True)
class TritonBinary:
    """A compiled kernel that crosses process boundaries: cubin, Triton metadata, launch spec.

    ``signature``/``constexprs``/``attrs`` are what ``triton.compiler.ASTSource`` was given;
    the measuring process rebuilds the same source object (no compilation) so Triton's
    launcher matches the binary.
    """

    name: str
    cubin: bytes
    metadata_json: str
    hash: str
    signature: dict[str, str]
    constexprs: dict[tuple[int, ...], Any]
    attrs: dict[tuple[int, ...], list[list[Any]]]
    arch: int
    extra: dict[str, str] = field(default_factory=dict)


_TORCH_TO_TRITON = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
                    "float64": "fp64", "int8": "i8", "int16": "i16", "int32": "i32",
                    "int64": "i64", "uint8": "u8", "bool": "u1",
                    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}


def specialize(fn: Any, args: list[Any]) -> tuple[dict[str, str], dict[Any, Any],
                                                 dict[Any, Any]]:
    """Signature, constexprs and attributes of a call (``args`` in the function's parameter
    order), the way Triton's JIT derives them.

    Tensors become ``*dtype`` pointers, with the 16-byte alignment attribute when their
    address is 16-byte aligned (``meta`` tensors, which have none, count as aligned: torch
    allocations are); ints equal to 1 become constants, ints divisible by 16 get the
    divisibility attribute, floats are ``fp32`` and bools ``u1``; constexpr parameters keep
    their value; parameters the function does not specialise keep no attribute.
    """
    names = list(fn.arg_names)
    if len(args) != len(names):
        raise TypeError(f"{len(args)} arguments for {fn.__name__}{tuple(names)}")
    constexpr_idx = set(fn.constexprs)
    plain = {p.num for p in getattr(fn, "params", ()) if getattr(p, "do_not_specialize", False)}
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    div16 = [["tt.divisibility", 16]]
    for i, (name, value) in enumerate(zip(names, args)):
        if i in constexpr_idx:
            signature[name] = "constexpr"
            constexprs[(i,)] = value
        elif hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            dtype = str(value.dtype).replace("torch.", "")
            signature[name] = "*" + _TORCH_TO_TRITON[dtype]
            if value.device.type == "meta" or value.data_ptr() % 16 == 0:
                attrs[(i,)] = div16
        elif isinstance(value, bool):
            signature[name] = "u1"
        elif isinstance(value, int):
            if value == 1 and i not in plain:
                signature[name] = "constexpr"
                constexprs[(i,)] = 1
                continue
            signature[name] = "i32" if -2**31 <= value < 2**31 else "i64"
            if value % 16 == 0 and i not in plain:
                attrs[(i,)] = div16
        elif isinstance(value, float):
            signature[name] = "fp32"
        elif value is None:
            signature[name] = "constexpr"
            constexprs[(i,)] = None
        else:
            raise TypeError(f"cannot pass {name}={value!r} to a Triton kernel")
    return signature, constexprs, attrs


# -- a kernel that travels to a build process ---------------------------------------------------


def _jit_function(fn: Any) -> Any:
    """The ``JITFunction`` under ``fn`` (through ``triton.heuristics`` and the like)."""
    while not hasattr(fn, "arg_names") or not hasattr(fn, "src"):
        inner = getattr(fn, "fn", None)
        if inner is None:
            raise TypeError(f"{fn!r} is not a @triton.jit kernel")
        fn = inner
    return fn


@dataclass(frozen=True)
class KernelSource:
    """A ``@triton.jit`` function in a form that crosses process boundaries.

    By reference (``module``/``qualname``) when the function is a module-level name of an
    importable module; otherwise by its source and the globals it reads (modules by name,
    other jit functions the same way, plain values pickled), rebuilt in the build process under
    the same file name and first line, so Triton compiles the same kernel. :meth:`of` returns
    ``None`` for a function that cannot travel (a global that does not pickle); it is then
    compiled where it is.
    """

    name: str
    module: str | None = None
    qualname: str | None = None
    source: str | None = None
    filename: str = ""
    lineno: int = 1
    scope: tuple[tuple[str, str, Any], ...] = ()
    free: tuple[tuple[str, str, Any], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, fn: Any, _seen: frozenset[int] = frozenset()) -> KernelSource | None:
        jit = _jit_function(fn)
        base = jit.fn
        if id(base) in _seen:
            return None
        options = tuple((k, getattr(jit, k)) for k in ("do_not_specialize", "debug", "noinline")
                        if getattr(jit, k, None))
        module, qualname = base.__module__, base.__qualname__
        if module not in ("__main__", "__mp_main__") and "<locals>" not in qualname:
            try:
                if _jit_function(_lookup(module, qualname)) is jit:
                    return cls(base.__name__, module=module, qualname=qualname)
            except (ImportError, AttributeError, TypeError):
                pass
        try:
            closure = inspect.getclosurevars(base)
        except (TypeError, ValueError):
            return None
        scope: list[tuple[str, str, Any]] = []
        free: list[tuple[str, str, Any]] = []
        for names, out in ((closure.globals, scope), (closure.nonlocals, free)):
            for name, value in sorted(names.items()):
                if isinstance(value, types.ModuleType):
                    out.append((name, "module", value.__name__))
                elif hasattr(value, "arg_names") and hasattr(value, "src"):
                    inner = cls.of(value, _seen | {id(base)})
                    if inner is None:
                        return None
                    out.append((name, "kernel", inner))
                else:
                    try:
                        pickle.dumps(value)
                    except Exception:
                        return None
                    out.append((name, "value", value))
        if free and jit.starting_line_number < 2:
            return None
        return cls(base.__name__, source=jit.src, filename=base.__code__.co_filename,
                   lineno=int(jit.starting_line_number), scope=tuple(scope), free=tuple(free),
                   options=options)

    def load(self) -> Any:
        """The ``JITFunction`` (imported, or rebuilt from the source)."""
        if self.module is not None and self.qualname is not None:
            return _jit_function(_lookup(self.module, self.qualname))
        import triton

        assert self.source is not None
        namespace: dict[str, Any] = {"__name__": f"tunex_kernel_{self.name}",
                                     "__builtins__": builtins}
        namespace.update(_resolve(self.scope))
        free = _resolve(self.free)
        # Triton reads the source back through inspect: keep it in linecache under a name of its
        # own, starting on the original line (line numbers are part of Triton's cache key); the
        # closure's values are rebuilt as one (Triton lets a kernel read nonlocals, not globals)
        filename = f"<tunex:{self.filename}>"
        body = textwrap.dedent(self.source)
        if free:
            head = f"def _tunex_closure({', '.join(free)}):\n"
            body = textwrap.indent(body, "    ") + f"    return {self.name}\n"
            text = "\n" * (self.lineno - 2) + head + body
        else:
            text = "\n" * (self.lineno - 1) + body
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), namespace)
        fn = namespace["_tunex_closure"](**free) if free else namespace[self.name]
        return triton.jit(fn, **dict(self.options))


def _resolve(entries: tuple[tuple[str, str, Any], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind, value in entries:
        if kind == "module":
            out[name] = importlib.import_module(value)
        elif kind == "kernel":
            out[name] = value.load()
        else:
            out[name] = value
    return out


def _lookup(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# -- compiling ----------------------------------------------------------------------------------


def compile_binary(fn: Any, signature: dict[str, str], constexprs: dict[Any, Any],
                   attrs: dict[Any, Any], arch: int, options: Mapping[str, Any]
                   ) -> tuple[TritonBinary, dict[str, Any]]:
    """Compile ``fn`` with this specialisation for ``sm_<arch>`` (no GPU needed) and return the
    binary and its compile-time facts (shared memory, warps, stages, code size; registers,
    stack and spills where Triton's ``cuobjdump`` is found).

    Raises:
        Exception: whatever Triton raises for a config that does not compile.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(_jit_function(fn), signature, constexprs=constexprs, attrs=attrs)
    ck = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=dict(options))
    md = ck.metadata
    binary = TritonBinary(name=ck.name, cubin=bytes(ck.kernel), metadata_json=_read_metadata(ck),
                          hash=ck.hash, signature=signature, constexprs=constexprs, attrs=attrs,
                          arch=arch)
    facts: dict[str, Any] = {"shared_bytes": int(md.shared), "num_warps": int(md.num_warps),
                             "num_stages": int(md.num_stages), "code_bytes": len(binary.cubin)}
    facts.update(_resource_usage(binary.cubin))
    return binary, facts


def prune_reason(facts: Mapping[str, Any], limits: Mapping[str, float], arch: int,
                 max_spill_bytes: int) -> str | None:
    """Why a build with these compile-time ``facts`` cannot run well on a device with these
    ``limits`` (``smem`` per block, ``regs_per_sm``), or ``None`` when it can."""
    smem = int(limits["smem"])
    if facts["shared_bytes"] > smem:
        return (f"needs {facts['shared_bytes']} bytes of shared memory, sm_{arch} allows "
                f"{smem} per block; smaller blocks or fewer num_stages fit")
    regs = facts.get("n_regs")
    threads = facts["num_warps"] * 32
    if regs is not None and regs * threads > limits["regs_per_sm"]:
        return (f"{regs} registers x {threads} threads exceed the {int(limits['regs_per_sm'])} "
                "registers of a multiprocessor; use fewer warps or smaller blocks")
    spills = facts.get("n_spills")
    if spills is not None and spills > max_spill_bytes:
        return (f"spills {spills} bytes per thread to local memory (limit {max_spill_bytes}); "
                "smaller blocks or more warps avoid it")
    return None


def load_binary(binary: TritonBinary, fn: Any, folder: str) -> Any:
    """Triton's ``CompiledKernel`` for ``binary``, rebuilt from its files under ``folder`` (no
    compilation). Launch it with ``kernel[grid](*every_argument_in_order)``."""
    from triton.compiler import ASTSource, CompiledKernel

    where = os.path.join(folder, binary.hash)
    os.makedirs(where, exist_ok=True)
    paths = {f"{binary.name}.cubin": os.path.join(where, f"{binary.name}.cubin"),
             f"{binary.name}.json": os.path.join(where, f"{binary.name}.json")}
    with open(paths[f"{binary.name}.cubin"], "wb") as f:
        f.write(binary.cubin)
    with open(paths[f"{binary.name}.json"], "w") as f:
        f.write(binary.metadata_json)
    src = ASTSource(_jit_function(fn), binary.signature, constexprs=binary.constexprs,
                    attrs=binary.attrs)
    return CompiledKernel(src, paths, binary.hash)


def _read_metadata(ck: Any) -> str:
    path = next(p for name, p in ck.metadata_group.items() if name.endswith(".json"))
    with open(path) as f:
        return f.read()


_RES_USAGE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def _resource_usage(cubin: bytes) -> dict[str, int]:
    """Registers, stack and local memory of a cubin, read with the cuobjdump Triton ships."""
    try:
        from triton import knobs

        tool = knobs.nvidia.cuobjdump.path
    except Exception:  # older Triton layout
        tool = shutil.which("cuobjdump") or ""
    if not tool or not os.path.exists(tool):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return {}
    m = _RES_USAGE.search(out)
    if not m:
        return {}
    regs, stack, _shared_static, local = map(int, m.groups())
    # Triton reports spills as the function's local memory (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
    return {"n_regs": regs, "stack_bytes": stack, "n_spills": local}
