"""The Kernel contract: what a tunable kernel of the library declares.

A :class:`Kernel` bundles one ``@triton.jit`` function with everything tunex needs to tune it,
and everything a caller needs to run it:

- **space**: a declarative :class:`~tunex.space.Space` of tuning parameters. Parameters whose
  names are arguments of the jit function marked ``tl.constexpr`` are passed to it; the names
  ``num_warps`` and ``num_stages`` are Triton launch options. Constraints may read the problem
  sizes and the device facts that :meth:`Kernel.bind` supplies (``smem``: shared memory per
  block, ``sm_count``, plus whatever :meth:`Kernel.derived` adds).
- **problem key and bucketing**: :meth:`Kernel.problem_key` turns what a user gives
  (``{"M": 1000, "N": 4096, "K": 4096}``) into the key stored in the database, after the
  declared bucketing (e.g. ``M`` rounded up to a power of two), and
  :meth:`Kernel.representative` gives the concrete shape that is built and measured for a key.
- **inputs, arguments and grid**: :meth:`Kernel.make_inputs` allocates inputs (on ``"meta"``
  for ahead-of-time builds: shapes, strides and dtypes without memory), :meth:`Kernel.args`
  orders every argument of the jit function (constexprs included) and :meth:`Kernel.grid`
  gives the launch grid. Building (tunex.targets.triton_gpu) derives the specialisation
  (types, 16-byte divisibility, ints equal to 1 as constants) from these arguments exactly as
  Triton's JIT would, so an ahead-of-time binary is the kernel the JIT would have compiled.
- **reference and check**: :meth:`Kernel.reference` computes the expected outputs with torch,
  :meth:`Kernel.check` compares within the kernel's tolerances (``rtol``/``atol`` per dtype).
- **cost**: :meth:`Kernel.flops` and :meth:`Kernel.bytes` for TFLOP/s and GB/s figures.

Nothing here imports triton or torch at module import; kernel modules import triton (their jit
functions live at module level) and are loaded on first use by :func:`kernels.get_kernel`.
"""

from __future__ import annotations

import abc
import hashlib
import inspect
import math
import sys
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar

from tunex.errors import ConfigError, SpaceError
from tunex.space import Space
from tunex.trial import Config

__all__ = ["BUCKETS", "Kernel", "next_pow2"]

#: Launch options of Triton that a space may hold; every other parameter is a constexpr.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def next_pow2(n: int) -> int:
    """Smallest power of two >= ``n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


#: Bucketing rules a kernel may declare per problem dimension.
BUCKETS = {
    "exact": lambda v: int(v),
    "pow2": next_pow2,
}

_DTYPES = {"float16": "float16", "fp16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float32": "float32", "fp32": "float32", "float": "float32"}


class Kernel(abc.ABC):
    """A tunable Triton kernel with its space, reference and problem key.

    Subclasses set :attr:`name`, :attr:`dims`, :attr:`dtypes` (first is the default) and
    :attr:`buckets`, and implement the abstract methods. Instances are stateless and cheap;
    the registry keeps one per kernel.
    """

    #: Registry name (``tunex search NAME``).
    name: ClassVar[str]
    #: Problem dimensions a user must give, in order (e.g. ``("M", "N", "K")``).
    dims: ClassVar[tuple[str, ...]]
    #: Element types the kernel supports (torch dtype names); the first is the default.
    dtypes: ClassVar[tuple[str, ...]] = ("float16",)
    #: Bucketing per dimension (``"exact"`` or ``"pow2"``); dimensions not named are exact.
    buckets: ClassVar[Mapping[str, str]] = {}
    #: Tolerances of :meth:`check` per dtype: ``(rtol, atol)``.
    tolerances: ClassVar[Mapping[str, tuple[float, float]]] = {
        "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-4)}

    # -- the jit function -----------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def fn(self) -> Any:
        """The ``@triton.jit`` function (a module-level object of the kernel's module)."""

    @cached_property
    def source_hash(self) -> str:
        """sha256 of the kernel module's source: changes whenever the kernel code changes."""
        module = sys.modules[type(self).__module__]
        try:
            text = inspect.getsource(module)
        except (OSError, TypeError):  # frozen or generated module: hash the jit source
            text = getattr(self.fn, "src", repr(self.fn))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

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
            SpaceError: a problem name of the space has no value anywhere.
        """
        values = {**device, **problem, **self.derived(problem)}
        missing = [n for n in space.problem if n not in values]
        if missing:
            raise SpaceError(f"{self.name}: no value for {missing}; give them in the shape "
                             f"({', '.join(self.dims)}) or the device facts")
        return space.bind(**{n: values[n] for n in space.problem})

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
        if missing or unknown:
            raise ConfigError(
                f"{self.name} needs the sizes {', '.join(self.dims)} (and optionally dtype); "
                + (f"missing {missing}" if missing else f"unknown {unknown}")
                + f", e.g. --shape {','.join(f'{d}=1024' for d in self.dims)}")
        key: dict[str, Any] = {}
        for d in self.dims:
            try:
                v = int(problem[d])
            except (TypeError, ValueError):
                raise ConfigError(f"{self.name}: {d}={problem[d]!r} is not an integer") from None
            if v <= 0:
                raise ConfigError(f"{self.name}: {d}={v} must be positive")
            rule = self.buckets.get(d, "exact")
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

    # -- running --------------------------------------------------------------------------------

    @abc.abstractmethod
    def make_inputs(self, problem: Mapping[str, Any], device: str = "cuda",
                    seed: int = 0) -> dict[str, Any]:
        """Input and output tensors for ``problem`` (outputs allocated, not filled).

        ``device="meta"`` gives tensors without memory, for ahead-of-time builds.
        """

    @abc.abstractmethod
    def outputs(self, inputs: Mapping[str, Any]) -> tuple[Any, ...]:
        """The tensors the kernel writes, in the order :meth:`reference` returns them."""

    @abc.abstractmethod
    def args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
             config: Mapping[str, Any]) -> dict[str, Any]:
        """Every argument of :attr:`fn` by name, constexprs included."""

    @abc.abstractmethod
    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        """The launch grid."""

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]
                  ) -> tuple[Any, ...]:
        """Expected outputs computed with torch (in float32 where precision matters)."""

    @abc.abstractmethod
    def flops(self, problem: Mapping[str, Any]) -> float:
        """Floating-point operations of one launch."""

    @abc.abstractmethod
    def bytes(self, problem: Mapping[str, Any]) -> float:
        """Bytes one launch must move to and from global memory at least."""

    def launch_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Triton options of a config (``num_warps``, ``num_stages``, ...)."""
        return {k: config[k] for k in LAUNCH_OPTIONS if k in config}

    def constexprs(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config's parameters that are constexpr arguments of :attr:`fn`."""
        return {k: v for k, v in config.items() if k not in LAUNCH_OPTIONS}

    def ordered_args(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
                     config: Mapping[str, Any]) -> list[Any]:
        """:meth:`args` as a list in the order of the jit function's parameters.

        Raises:
            TypeError: :meth:`args` misses a parameter or names one the function lacks.
        """
        args = self.args(inputs, problem, config)
        names = list(self.fn.arg_names)
        if set(args) != set(names):
            raise TypeError(f"{self.name}: args() gives {sorted(args)}, the kernel takes "
                            f"{names}")
        return [args[n] for n in names]

    def run(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
            config: Mapping[str, Any]) -> tuple[Any, ...]:
        """Launch through Triton's JIT (or its interpreter) and return the outputs."""
        args = self.ordered_args(inputs, problem, config)
        self.fn[self.grid(problem, config)](*args, **self.launch_options(config))
        return self.outputs(inputs)

    def check(self, got: Sequence[Any], want: Sequence[Any], dtype: str) -> str | None:
        """``None`` when ``got`` matches ``want`` within tolerance, else what is wrong."""
        import torch

        rtol, atol = self.tolerances.get(dtype, (1e-2, 1e-2))
        for i, (g, w) in enumerate(zip(got, want)):
            g32, w32 = g.float(), w.float()
            if g32.shape != w32.shape:
                return f"output {i}: shape {tuple(g32.shape)} != {tuple(w32.shape)}"
            bad = ~torch.isclose(g32, w32, rtol=rtol, atol=atol)
            bad |= ~torch.isfinite(g32) & torch.isfinite(w32)
            n = int(bad.sum())
            if n:
                err = (g32 - w32).abs().nan_to_num(nan=math.inf)
                return (f"output {i}: {n} of {g32.numel()} elements off (max abs error "
                        f"{float(err.max()):.3g}, rtol={rtol}, atol={atol})")
        return None

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"


def torch_dtype(name: str) -> Any:
    """The torch dtype called ``name`` (``"float16"`` -> ``torch.float16``)."""
    import torch

    return getattr(torch, name)
