"""The kernel contract, the kernel registry and the workload identity, shared by targets, the
decorator and the CLI.

The identity (:func:`source_hash`, :func:`device_fingerprint`, :func:`make_fingerprint`, the
device limits kernels' constraints read) lives in :mod:`tunex.identity` and is re-exported here.

A kernel is anything tunex can tune by name: it declares a :class:`~tunex.space.Space`, the
problem dimensions a user gives (with their bucketing), and a reference to check results
against. Two families implement the contract:

- Triton kernels (``kernels/*.py``, :class:`kernels.TritonKernel`): a ``@triton.jit`` function,
  built and measured by the ``triton_gpu`` target.
- C kernels (``kernels/rvv/``, :class:`CKernel` here): C source rendered per config (RVV
  intrinsics at a given LMUL, or portable loops with vectorisation pragmas), built by clang
  for RISC-V or the host and measured by the ``riscv-sim``, ``riscv-ssh`` and ``cpu`` targets.

Targets find kernels through :func:`get_kernel` and never import the library themselves:
the registry maps names to ``"module:Class"`` strings, imported on first use. It holds the
library that ships with tunex (``kernels/``), the ``tunex.kernels`` entry points of other
installed distributions (a package of kernels declares
``[project.entry-points."tunex.kernels"] mykernel = "mypkg.kernels:MyKernel"``), the
environment variable ``TUNEX_KERNELS="name=package.module:Class,..."`` (read on first use,
inherited by worker processes) and what :func:`register_kernel` adds at run time, later ones
overriding earlier ones. Where a module path is asked for, a Python file does too
(``path/to/my_kernels.py:MyKernel``), and :func:`get_kernel` takes such a spec in place of a
name: the kernel is then registered under its own ``name`` for this process and its workers
(``tunex search ./my_kernels.py:MyKernel --target cpu``).

The C kernel ABI, which every C kernel source must define::

    void tx_kernel(float *const *buf, const long *dim);

``buf`` holds the buffers named by :attr:`CKernel.inputs` then :attr:`CKernel.outputs`, each a
C-contiguous float32 array of :meth:`CKernel.shapes`; ``dim`` holds the problem's dims in
:attr:`Kernel.dims` order. ``tx_kernel`` must overwrite every output element on every call
(the harness calls it repeatedly) and must not depend on anything but its arguments. The
cycle model (``riscv-sim``) counts what runs in the functions of the kernel's source, not in
the C library's (``memcpy``, ``expf``): write such helpers in the kernel.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from tunex.errors import ConfigError, SpaceError, TargetError, TunexError
from tunex.identity import (
    ARCH_FACTS,
    INTERPRETER_ARCH,
    arch_facts,
    base_function,
    device_facts,
    device_fingerprint,
    make_fingerprint,
    source_hash,
    toolchain_facts,
    visible_gpu,
)
from tunex.space import Space
from tunex.trial import Config, Workload

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ARCH_FACTS",
    "BUCKETS",
    "INTERPRETER_ARCH",
    "LIBRARY",
    "CKernel",
    "Isa",
    "Kernel",
    "arch_facts",
    "available_kernels",
    "base_function",
    "device_facts",
    "device_fingerprint",
    "get_kernel",
    "kernel_code",
    "known_space",
    "make_fingerprint",
    "next_pow2",
    "register_kernel",
    "source_hash",
    "toolchain_facts",
    "visible_gpu",
]


def next_pow2(n: int) -> int:
    """Smallest power of two >= ``n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


#: Bucketing rules a kernel may declare per problem dimension.
BUCKETS = {
    "exact": lambda v: int(v),
    "pow2": next_pow2,
}

#: The largest problem size a dim may have (2**40: a trillion elements along one dimension).
_MAX_DIM = 1 << 40

_DTYPES = {"float16": "float16", "fp16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float32": "float32", "fp32": "float32", "float": "float32"}


class Kernel(abc.ABC):
    """A tunable kernel: its space, problem key (with bucketing) and reference.

    Subclasses set :attr:`name`, :attr:`dims`, :attr:`dtypes` (first is the default) and
    :attr:`buckets`, and implement :meth:`space`, :attr:`source_hash`, :meth:`flops` and
    :meth:`bytes`. Instances are cheap; the registry keeps one per name.
    """

    #: Registry name (``tunex search NAME``).
    name: ClassVar[str]
    #: Problem dimensions a user must give, in order (e.g. ``("M", "N", "K")``).
    dims: ClassVar[tuple[str, ...]]
    #: Element types the kernel supports (torch dtype names); the first is the default.
    dtypes: ClassVar[tuple[str, ...]] = ("float16",)
    #: Bucketing per dimension (``"exact"`` or ``"pow2"``); dimensions not named are exact.
    buckets: ClassVar[Mapping[str, str]] = {}
    #: What builds it: ``"triton"`` or ``"c"``. Targets refuse kernels of another language.
    language: ClassVar[str] = "triton"

    @property
    @abc.abstractmethod
    def source_hash(self) -> str:
        """A short hash of the kernel's code: part of the workload, so tuned configs are
        forgotten when the code they were measured with changes."""

    # -- space ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def space(self) -> Space:
        """The unbound space; its problem names are dims, device facts and :meth:`derived`."""

    def derived(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        """Extra problem values constraints may read (e.g. ``ELT`` bytes, ``N_POW2``)."""
        return {}

    def bind(self, space: Space, problem: Mapping[str, Any], device: Mapping[str, Any]) -> Space:
        """``space`` bound to a concrete problem and device facts.

        Raises:
            SpaceError: ``space`` is no Space, or a problem name of it has no value anywhere.
        """
        if not isinstance(space, Space):
            raise SpaceError(f"{self.name}: space() must return a tunex Space, not "
                             f"{type(space).__name__}" + (" (is its `return` missing?)"
                                                          if space is None else ""))
        values = {**device, **problem, **self.derived(problem)}
        missing = [n for n in space.problem if n not in values]
        if missing:
            raise SpaceError(f"{self.name}: no value for {missing}; give them in the shape "
                             f"({', '.join(self.dims)}) or the device facts")
        return space.bind(**{n: values[n] for n in space.problem})

    def target_facts(self, target: Mapping[str, Any]) -> dict[str, Any]:
        """The device facts :meth:`bind` needs, read back from a workload's target fingerprint
        (what the target that recorded it measured on). Default: none."""
        return {}

    def workload_space(self, workload: Workload) -> Space:
        """The bound space of a recorded ``workload`` of this kernel: what its trials are
        checked against when they enter a database by import."""
        return self.bind(self.space(), self.representative(workload.problem),
                         self.target_facts(workload.target))

    def default_config(self, problem: Mapping[str, Any], device: Mapping[str, Any]) -> Config:
        """The config used when nothing better is known: the bound space's default."""
        return self.bind(self.space(), self.representative(self.problem_key(problem)),
                         device).default()

    # -- problem key ----------------------------------------------------------------------------

    def problem_key(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        """The database key of a problem: every dim (bucketed) and the dtype.

        Raises:
            ConfigError: a dim is missing or not a positive integer, or the dtype is unknown.
        """
        missing = [d for d in self.dims if d not in problem]
        unknown = [k for k in problem if k not in (*self.dims, "dtype")]
        if (missing or unknown) and not self.dims:
            raise ConfigError(f"{self.name} takes no sizes (only optionally dtype); unknown "
                              f"{unknown}: leave --shape out or give only dtype=...")
        if missing or unknown:
            raise ConfigError(
                f"{self.name} needs the sizes {', '.join(self.dims)} (and optionally dtype); "
                + (f"missing {missing}" if missing else f"unknown {unknown}")
                + f", e.g. --shape {','.join(f'{d}=1024' for d in self.dims)}")
        key: dict[str, Any] = {}
        for d in self.dims:
            value = problem[d]
            if isinstance(value, bool):
                raise ConfigError(f"{self.name}: {d}={value!r} is not an integer")
            try:
                v = int(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{self.name}: {d}={value!r} is not an integer") from None
            if v != value and not (isinstance(value, str) and value.strip().isdigit()):
                raise ConfigError(f"{self.name}: {d}={value!r} is not an integer")
            if v <= 0:
                raise ConfigError(f"{self.name}: {d}={v} must be positive")
            if v > _MAX_DIM:  # a C long, a tensor's size: past it nothing can be built
                raise ConfigError(f"{self.name}: {d}={v} is too large (at most "
                                  f"{_MAX_DIM:,}); was a digit repeated?")
            rule = self.buckets.get(d, "exact")
            if rule not in BUCKETS:
                raise ConfigError(f"{self.name}: its buckets give {d} the rule {rule!r}; use "
                                  f"one of {', '.join(BUCKETS)}")
            key[d] = BUCKETS[rule](v)
        dtype = _DTYPES.get(str(problem.get("dtype", self.dtypes[0])).replace("torch.", ""))
        if dtype not in self.dtypes:
            raise ConfigError(f"{self.name}: dtype {problem.get('dtype')!r} is not supported; "
                              f"choose one of {list(self.dtypes)}")
        key["dtype"] = dtype
        return key

    def representative(self, key: Mapping[str, Any]) -> dict[str, Any]:
        """The concrete problem built and measured for a (bucketed) key: the key itself."""
        return dict(key)

    # -- cost -----------------------------------------------------------------------------------

    @abc.abstractmethod
    def flops(self, problem: Mapping[str, Any]) -> float:
        """Floating-point operations of one launch."""

    @abc.abstractmethod
    def bytes(self, problem: Mapping[str, Any]) -> float:
        """Bytes one launch must move to and from memory at least."""

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"


# -- C kernels ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Isa:
    """What a C kernel is built for: the facts that change which source is rendered.

    Attributes:
        name: the core (``"x280"``) or ``"host"``.
        arch: ``"riscv64"``, ``"x86_64"``, ``"aarch64"``.
        rvv: the RVV 1.0 intrinsics path is available (``riscv_vector.h``).
        vlen: bits of one vector register (RVV VLEN; the widest SIMD register on the host).
        vregs: architectural vector registers (32 for RVV and AVX-512, 16 for AVX2/NEON...).
    """

    name: str
    arch: str
    rvv: bool
    vlen: int
    vregs: int = 32

    def lanes(self, sew: int = 32) -> int:
        """Elements of ``sew`` bits in one vector register (LMUL 1)."""
        return max(1, self.vlen // sew)

    def facts(self) -> dict[str, int]:
        """Values a kernel's space constraints may read: ``vlen``, ``rvv`` (0/1), ``vregs``,
        ``lanes`` (float32 elements per register)."""
        return {"vlen": self.vlen, "rvv": int(self.rvv), "vregs": self.vregs,
                "lanes": self.lanes(32)}

    @classmethod
    def of_fingerprint(cls, target: Mapping[str, Any]) -> Isa:
        """The ISA a C target's fingerprint (``vlen`` and ``arch``) describes: a RISC-V core
        (``arch`` is its ``-mcpu``, or ``riscv64``) or a host ISA."""
        vlen = int(target["vlen"])
        arch = str(target.get("arch", ""))
        if arch in ("x86_64", "amd64"):
            return cls("host", arch, False, vlen, 32 if vlen >= 512 else 16)
        if arch in ("aarch64", "arm64"):
            return cls("host", arch, False, vlen, 32)
        return cls(arch or "riscv64", "riscv64", True, vlen, 32)


class CKernel(Kernel):
    """A kernel written in C: a source rendered per config, checked against NumPy.

    Subclasses declare :attr:`inputs` and :attr:`outputs` (buffer names in ABI order, see the
    module docstring), :meth:`shapes`, :meth:`reference`, :meth:`render` and
    :meth:`baseline`. Inputs are float32, uniform in [-1, 1) from a seeded generator unless
    :meth:`make_inputs` is overridden.
    """

    language = "c"
    dtypes = ("float32",)
    #: Input buffers, in the order ``tx_kernel`` receives them (before the outputs).
    inputs: ClassVar[tuple[str, ...]]
    #: Output buffers, after the inputs.
    outputs: ClassVar[tuple[str, ...]]
    #: ``(rtol, atol)`` of :meth:`check`: float32 accumulated in another order.
    tolerance: ClassVar[tuple[float, float]] = (1e-4, 1e-5)

    #: Files the kernel reads its C from (templates, headers), relative to the folder of its
    #: class's module: their contents are part of :attr:`source_hash`.
    sources: ClassVar[tuple[str, ...]] = ()

    @cached_property
    def source_hash(self) -> str:
        """sha256 (16 hex digits) of what renders the kernel's C: the source of its class's
        module, then of the modules of its other ``CKernel`` base classes, then the files
        named by :attr:`sources`. Editing any of them forgets the configs tuned before.

        Raises:
            ConfigError: a file of :attr:`sources` cannot be read.
        """
        h = hashlib.sha256()
        modules = dict.fromkeys(c.__module__ for c in type(self).__mro__
                                if issubclass(c, CKernel) and c is not CKernel)
        for name in modules:
            h.update(inspect.getsource(sys.modules[name]).encode())
        folder = os.path.dirname(inspect.getfile(sys.modules[type(self).__module__]))
        for source in self.sources:
            path = os.path.join(folder, source)
            try:
                with open(path, "rb") as f:
                    h.update(f.read())
            except OSError as e:
                raise ConfigError(f"{self.name}: cannot read {path} of its `sources` "
                                  f"({e.strerror}); name the files relative to {folder}"
                                  ) from None
        return h.hexdigest()[:16]

    @property
    def buffers(self) -> tuple[str, ...]:
        return (*self.inputs, *self.outputs)

    @abc.abstractmethod
    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """The shape of every buffer (inputs and outputs) for a concrete problem."""

    def make_inputs(self, problem: Mapping[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
        """Input arrays (float32, C-contiguous) for ``problem``; the same for the same seed."""
        import numpy as np

        rng = np.random.default_rng(seed)
        shapes = self.shapes(problem)
        return {n: rng.uniform(-1.0, 1.0, size=shapes[n]).astype(np.float32)
                for n in self.inputs}

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        """Expected outputs (in :attr:`outputs` order) computed with NumPy in float64."""

    @abc.abstractmethod
    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        """C source defining ``tx_kernel`` for ``config`` on ``problem`` (a concrete problem:
        sizes may be compiled in as constants)."""

    def target_facts(self, target: Mapping[str, Any]) -> dict[str, Any]:
        return dict(Isa.of_fingerprint(target).facts())

    @abc.abstractmethod
    def baseline(self, problem: Mapping[str, Any], isa: Isa) -> str:
        """The plain C form a user would write, left to the compiler (``-O3``, its own
        vectorisation and LMUL): what tuned configs are compared against."""

    def magnitude(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...] | None:
        """The size of the terms summed into each output element, which the rounding error
        of a float32 sum grows with (not with the result: a matmul element near zero may
        carry an error far above ``rtol * |result|``). Sums of products return their
        reference on the absolute inputs (``|A| @ |B|``). ``None``: the expected values'
        own size is the scale."""
        return None

    def check(self, got: Sequence[np.ndarray], want: Sequence[np.ndarray],
              magnitude: Sequence[np.ndarray] | None = None) -> str | None:
        """``None`` when ``got`` matches ``want`` within :attr:`tolerance`
        (``|got - want| <= atol + rtol * scale``, the scale being :meth:`magnitude` where
        given, else ``|want|``), else what is wrong."""
        import numpy as np

        rtol, atol = self.tolerance
        for i, (name, g, w) in enumerate(zip(self.outputs, got, want)):
            if g.shape != w.shape:
                return f"{name}: shape {g.shape} != {w.shape}"
            scale = np.abs(w) if magnitude is None else np.asarray(magnitude[i])
            with np.errstate(invalid="ignore"):
                bad = ~(np.abs(g.astype(np.float64) - w) <= atol + rtol * scale)
            n = int(bad.sum())
            if n:
                err = np.nan_to_num(np.abs(g.astype(np.float64) - w), nan=np.inf)
                first = np.unravel_index(int(np.argmax(bad)), g.shape)
                return (f"{name}: {n} of {g.size} elements off (max abs error {err.max():.3g}, "
                        f"first at {tuple(int(i) for i in first)}, rtol={rtol}, atol={atol})")
        return None


def _line_of(e: BaseException, ours: Any, with_file: bool = False) -> str:
    """`` (line N)`` (``(file, line N)``) of the last frame of ``e``'s traceback whose file
    ``ours(filename)`` accepts: where in a user's kernel the error was raised; "" if none."""
    import traceback

    where = [f for f in traceback.extract_tb(e.__traceback__) if ours(f.filename)]
    if not where:
        return ""
    return (f" ({os.path.basename(where[-1].filename)}, line {where[-1].lineno})" if with_file
            else f" (line {where[-1].lineno})")


@contextlib.contextmanager
def kernel_code(kernel: Kernel, what: str) -> Iterator[None]:
    """Around a call of a kernel's own Python that does not depend on the config (``space()``,
    ``shapes()``, ``reference()``...): an exception it raises is a slip in the kernel that every
    config would meet alike, so it becomes one :class:`TargetError` saying where, not a failed
    trial per config (nor a traceback)."""
    try:
        yield
    except TunexError:
        raise
    except Exception as e:
        files = {getattr(sys.modules.get(c.__module__), "__file__", None)
                 for c in type(kernel).__mro__} - {__file__, None}
        at = _line_of(e, lambda f: f in files, with_file=True)
        said = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise TargetError(f"{kernel.name}: its {what} raised {said}{at}; fix the kernel's "
                          "Python") from None


# -- registry -----------------------------------------------------------------------------------

#: The library shipped with tunex (``kernels/``), by name.
LIBRARY: dict[str, str] = {
    "matmul": "kernels.matmul:Matmul",
    "matmul_tma": "kernels.matmul_tma:MatmulTMA",
    "softmax": "kernels.softmax:Softmax",
    "layernorm": "kernels.layernorm:LayerNorm",
    "flash_attention": "kernels.flash_attention:FlashAttention",
    "sgemm": "kernels.rvv.sgemm:Sgemm",
    "softmax_c": "kernels.rvv.softmax:SoftmaxC",
    "conv2d": "kernels.rvv.conv2d:Conv2d",
}

_REGISTRY: dict[str, str] = {}
_INSTANCES: dict[str, Kernel] = {}
_LOADED = False


def _from_environment(text: str) -> dict[str, str]:
    """``name=module:Class,...`` from TUNEX_KERNELS; a malformed entry is an error, not ignored."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, path = item.partition("=")
        if not sep or ":" not in path or not name.strip().isidentifier():
            raise ConfigError(f"TUNEX_KERNELS entry {item!r} is not NAME=package.module:Class")
        out[name.strip()] = path.strip()
    return out


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    from importlib.metadata import entry_points

    _REGISTRY.update(LIBRARY)
    _REGISTRY.update({ep.name: ep.value for ep in entry_points(group="tunex.kernels")})
    _REGISTRY.update(_from_environment(os.environ.get("TUNEX_KERNELS", "")))
    _LOADED = True


def register_kernel(name: str, path: str) -> None:
    """Make a kernel available to :func:`get_kernel` (``"module:Class"``, imported on use).

    The registry is per process: tunex's build and measure workers (spawned processes) do not
    see a registration made at run time in the parent. Name such kernels in the environment
    variable ``TUNEX_KERNELS`` instead, which workers inherit.
    """
    _load()
    _REGISTRY[name] = path
    _INSTANCES.pop(name, None)


def known_space(workload: Workload) -> Space | None:
    """The bound space the registry gives a recorded ``workload``: ``None`` unless a kernel of
    that name is registered (and importable here) with the same code (source hash) and can
    bind the workload's problem and target."""
    try:
        kernel = get_kernel(workload.kernel)
        if kernel.source_hash != workload.kernel_hash:
            return None
        return kernel.workload_space(workload)
    except (ImportError, TunexError, KeyError, TypeError, ValueError):
        return None


def available_kernels() -> list[str]:
    _load()
    return sorted(_REGISTRY)


def _import_class(path: str) -> Any:
    """The object ``path`` names: ``package.module:Class`` or ``path/to/file.py:Class`` (a file
    is loaded as a module of its own, whatever ``sys.path`` holds)."""
    module, sep, attr = path.rpartition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"kernel {path!r} is not package.module:Class or file.py:Class")
    if module.endswith(".py"):
        file = os.path.abspath(module)
        if not os.path.isfile(file):
            raise ConfigError(f"kernel file {module!r} does not exist (from {path!r})")
        digest = hashlib.sha256(file.encode()).hexdigest()[:8]
        stem = "".join(c if c.isalnum() else "_" for c in os.path.basename(file)[:-3])
        name = f"tunex_user_{stem}_{digest}"
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, file)
            if spec is None or spec.loader is None:
                raise ConfigError(f"cannot load kernel file {module!r}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod  # inspect.getsource (the kernel's source hash) finds it
            try:
                spec.loader.exec_module(mod)
            except SyntaxError as e:
                sys.modules.pop(name, None)
                raise ConfigError(f"kernel file {module!r} does not compile: {e}") from None
            except Exception as e:  # the user's module failed: say where, in one line
                sys.modules.pop(name, None)
                import traceback

                where = [f for f in traceback.extract_tb(e.__traceback__)
                         if os.path.abspath(f.filename) == file]
                at = f" (line {where[-1].lineno})" if where else ""
                raise ConfigError(f"kernel file {module!r} failed to load{at}: "
                                  f"{type(e).__name__}: {e}") from None
            except BaseException:
                sys.modules.pop(name, None)
                raise
    else:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
                raise  # the module was found; something it imports is not installed
            raise ConfigError(f"no module {module!r} to load kernel {path!r} from: put its "
                              "folder on PYTHONPATH, or name the file (path/to/file.py:Class)"
                              ) from None
        except SyntaxError as e:
            raise ConfigError(f"kernel module {module!r} does not compile: {e}") from None
        except Exception as e:  # the user's module failed: say where, in one line
            tail = module.replace(".", os.sep)
            at = _line_of(e, lambda f: f.endswith((f"{tail}.py",
                                                   os.path.join(tail, "__init__.py"))))
            raise ConfigError(f"kernel module {module!r} failed to load{at}: "
                              f"{type(e).__name__}: {e}") from None
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ConfigError(f"{module} has no {attr!r} (from kernel {path!r})") from None


def _kernel_class(cls: Any, where: str) -> type[Kernel]:
    """``cls`` if it is a kernel class that can be made, else a ConfigError naming ``where``."""
    if not (isinstance(cls, type) and issubclass(cls, Kernel)):
        raise ConfigError(f"{where} is not a tunex Kernel class (subclass tunex.kernel.CKernel "
                          "or kernels.TritonKernel)")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise ConfigError(f"{where}: the kernel class must define {', '.join(missing)} "
                          "(see tunex.kernel's Kernel and CKernel)")
    name = getattr(cls, "name", None)
    twins = [c.__name__ for c in vars(sys.modules[cls.__module__]).values()
             if isinstance(c, type) and issubclass(c, Kernel) and c is not cls
             and c.__module__ == cls.__module__ and not getattr(c, "__abstractmethods__", ())
             and isinstance(name, str) and getattr(c, "name", None) == name]
    if twins:  # one module, one name: one source hash, so one workload for both
        raise ConfigError(f"{where}: {', '.join(twins)} of the same module is also named "
                          f"{name!r}, so the two would share their trials and best configs; "
                          "give each kernel class its own `name`")
    return cls


def _from_spec(spec: str) -> Kernel:
    """The kernel a ``module:Class`` or ``file.py:Class`` spec names, registered under its
    ``name`` here and, through ``TUNEX_KERNELS``, in the worker processes started later."""
    module, _, attr = spec.rpartition(":")
    if module.endswith(".py"):  # workers may start elsewhere: the registry keeps it absolute
        spec = f"{os.path.abspath(module)}:{attr}"
    if "," in spec or "=" in spec:  # TUNEX_KERNELS's separators
        raise ConfigError(f"{spec!r}: a kernel path may not contain ',' or '='")
    kernel = _kernel_class(_import_class(spec), repr(spec))()
    _adopt(kernel, spec)
    return kernel


def _adopt(kernel: Kernel, spec: str) -> None:
    """Register ``kernel`` under its own ``name`` here and, through ``TUNEX_KERNELS``, in the
    worker processes started later: they look kernels up by the name its workloads carry."""
    name = getattr(kernel, "name", "")
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"{spec!r}: a kernel class needs a `name` attribute that is an "
                          f"identifier, not {name!r}")
    _load()
    taken = _REGISTRY.get(name)
    if taken is not None and taken != spec:  # two kernels under one name would share trials
        raise ConfigError(f"{spec!r}: the kernel name {name!r} is taken by {taken}; give "
                          "your kernel class another `name`")
    _REGISTRY[name] = spec
    _INSTANCES[name] = kernel
    entries = _from_environment(os.environ.get("TUNEX_KERNELS", ""))
    entries[name] = spec
    os.environ["TUNEX_KERNELS"] = ",".join(f"{n}={p}" for n, p in entries.items())


def get_kernel(name: str | Kernel) -> Kernel:
    """The kernel called ``name`` (one shared instance per name), or the kernel a spec names
    (``package.module:Class``, ``path/to/file.py:Class``).

    Raises:
        ConfigError: no kernel has that name, or the spec does not name a kernel class.
        ImportError: the kernel's module needs triton (or torch) and it is not installed.
    """
    if isinstance(name, Kernel):
        return name
    kernel = _INSTANCES.get(name)
    if kernel is None:
        if ":" in name:
            return _from_spec(name)
        _load()
        path = _REGISTRY.get(name)
        if path is None:  # a worker forked before its parent named the kernel: read again
            _REGISTRY.update(_from_environment(os.environ.get("TUNEX_KERNELS", "")))
            path = _REGISTRY.get(name)
        if path is None:
            raise ConfigError(f"unknown kernel {name!r}; choose one of {available_kernels()}"
                              " (or name yours: package.module:Class or file.py:Class, or "
                              "TUNEX_KERNELS=name=package.module:Class)")
        # named by TUNEX_KERNELS or an entry point: checked as a spec given directly is
        kernel = _kernel_class(_import_class(path), f"kernel {name!r} ({path})")()
        if kernel.name != name:  # an alias: its workloads (and workers) go by its own name
            _adopt(kernel, path)
        _INSTANCES[name] = kernel
    return kernel
