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
- **runtime**: :attr:`Kernel.tuned` is the kernel under ``@tunex.autotune``, built from these
  declarations (space, dims and their buckets through :meth:`Kernel.problem_key`, device facts
  through :meth:`Kernel.bind`), and :meth:`Kernel.launch` runs it with the config the database or
  a pack holds for the problem. Each kernel module has a user-facing launcher on top
  (``kernels.matmul.matmul(a, b)``). Its workload is, by construction, the one
  ``TritonGPUTarget.prepare`` records for the same problem on the same device: same name, same
  :attr:`Kernel.source_hash`, same problem key, same device fingerprint.

Nothing here imports triton or torch at module import; kernel modules import triton (their jit
functions live at module level) and are loaded on first use by :func:`kernels.get_kernel`.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from tunex.kernel import BUCKETS, Kernel, device_facts, next_pow2
from tunex.kernel import source_hash as _source_hash
from tunex.space import Space
from tunex.trial import Workload

if TYPE_CHECKING:
    from tunex.decorator import Autotuned

__all__ = ["BUCKETS", "TritonKernel", "install_allocator", "next_pow2", "torch_dtype"]

#: Launch options of Triton that a space may hold; every other parameter is a constexpr.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def install_allocator() -> None:
    """Give Triton a scratch allocator backed by torch, unless one is set already.

    Kernels that make tensor descriptors on the device (``tl.make_tensor_descriptor``) need
    global scratch memory for them at every launch; Triton asks the allocator set with
    ``triton.set_allocator`` and fails without one. torch's caching allocator makes the
    per-launch allocation cheap. An allocator the application set is left alone.
    """
    import triton
    from triton.runtime import _allocation

    if not isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        return

    def alloc(size: int, alignment: int, stream: Any) -> Any:
        import torch

        return torch.empty(size, dtype=torch.int8,
                           device="cuda" if torch.cuda.is_available() else "cpu")

    triton.set_allocator(alloc)


class TritonKernel(Kernel):
    """A tunable Triton kernel with its space, reference and problem key.

    Subclasses set :attr:`name`, :attr:`dims`, :attr:`dtypes` (first is the default) and
    :attr:`buckets`, :attr:`dtype_arg` (and :attr:`dim_args`, :attr:`heuristics` where
    needed), and implement the abstract methods. Instances are cheap and hold no state but
    their :attr:`tuned` launcher, made on first use; the registry keeps one per kernel.
    """

    #: Tolerances of :meth:`check` per dtype: ``(rtol, atol)``.
    tolerances: ClassVar[Mapping[str, tuple[float, float]]] = {
        "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-4)}
    #: The argument of :attr:`fn` that carries each dim, where it is not the dim's own name
    #: (softmax: ``{"M": "n_rows", "N": "n_cols"}``). Every dim must be an argument: the
    #: runtime dispatch is keyed on them.
    dim_args: ClassVar[Mapping[str, str]] = {}
    #: The tensor argument of :attr:`fn` whose dtype is the problem's ``dtype``.
    dtype_arg: ClassVar[str]
    #: Constexpr arguments computed from the other arguments and the config (e.g. flash
    #: attention's ``EVEN``): ``name -> f(args by name)``. :meth:`ordered_args` adds them, and
    #: :attr:`tuned` applies them with ``triton.heuristics`` once the config is picked.
    heuristics: ClassVar[Mapping[str, Callable[[Mapping[str, Any]], Any]]] = {}
    #: The kernel makes tensor descriptors on the device, which needs Triton's scratch
    #: allocator: :meth:`prepare_thread` sets one in the calling thread (Triton keeps it in a
    #: context variable, which a new thread starts without).
    needs_allocator: ClassVar[bool] = False

    # -- the jit function -----------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def fn(self) -> Any:
        """The ``@triton.jit`` function (a module-level object of the kernel's module)."""

    @cached_property
    def source_hash(self) -> str:
        """sha256 (16 hex digits) of the jit function's source from its ``def`` on: changes
        whenever the kernel's code changes, and is what ``@tunex.autotune`` computes for the
        same function (:func:`tunex.identity.source_hash`). Edits elsewhere in
        the module (the space, docs) keep tuned configs valid."""
        return _source_hash(self.fn)

    # -- problem key ----------------------------------------------------------------------------

    def call_problem(self, named: Mapping[str, Any]) -> dict[str, Any]:
        """The problem key of a launch of :attr:`fn` from its arguments by name: the dims
        (through :attr:`dim_args`) and the dtype of :attr:`dtype_arg`, through
        :meth:`problem_key`, so it equals the key offline tuning records for that problem."""
        values = {d: named[self.dim_args.get(d, d)] for d in self.dims}
        values["dtype"] = named[self.dtype_arg].dtype
        return self.problem_key(values)

    # -- runtime: the kernel under @tunex.autotune ----------------------------------------------

    def autotune(self, **options: Any) -> Autotuned:
        """:attr:`fn` under ``@tunex.autotune``, declared by this kernel (a new object).

        Space: :meth:`space`, bound per problem and device with :meth:`bind` (device limits
        from the GPU the call runs on; none under Triton's interpreter). Key: the dims'
        arguments; the workload's problem: :meth:`call_problem`; name: :attr:`name`.
        ``options`` are the decorator's other options (``mode``, ``db``, ``listener``, ...).
        """
        from tunex.decorator import autotune

        fn = self.fn
        if self.heuristics:
            import triton

            fn = triton.heuristics(dict(self.heuristics))(fn)
        key = [self.dim_args.get(d, d) for d in self.dims]
        return autotune(space=self.space(), key=key, problem=self.call_problem,
                        bind=self._bind_workload, name=self.name, **options)(fn)

    @cached_property
    def tuned(self) -> Autotuned:
        """The :class:`~tunex.decorator.Autotuned` that :meth:`launch` runs, with the decorator's
        defaults (mode ``never`` unless ``TUNEX_MODE`` says otherwise, the database of
        ``TUNEX_DB``, packs from :func:`tunex.autotune.load_packs` or ``TUNEX_PACKS``)."""
        return self.autotune()

    def tuned_time(self, problem: Mapping[str, Any]) -> float | None:
        """The median time (ms) of the config :meth:`launch` would run for ``problem`` on this
        device, when the database or a pack measured it (``None`` otherwise: a default or a
        cost-model pick has no time). What a caller choosing between kernels that compute
        the same thing compares (:func:`kernels.matmul.matmul`)."""
        return self.tuned.known(self.problem_key(problem))[2]

    def target_facts(self, target: Mapping[str, Any]) -> dict[str, Any]:
        return device_facts(target)

    def _bind_workload(self, space: Space, workload: Workload) -> Space:
        return self.bind(space, self.representative(workload.problem),
                         self.target_facts(workload.target))

    @cached_property
    def _launch_names(self) -> tuple[str, ...]:
        """The arguments a launch passes (every one but the config's and the heuristics'),
        in the jit function's order; they lead its parameter list."""
        names = list(self.fn.arg_names)
        tuned = set(self.space().names) | set(self.heuristics)
        lead = [n for n in names if n not in tuned]
        if names[:len(lead)] != lead:
            raise TypeError(f"{self.name}: the tuned parameters {sorted(tuned)} must come last "
                            f"in the kernel's parameters {names}")
        return tuple(lead)

    def launch(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]) -> tuple[Any, ...]:
        """Launch through :attr:`tuned` (the config the database, a pack or the default gives
        for the problem's workload) and return the outputs.

        ``problem`` holds the concrete dims (not bucketed); :meth:`args` gets an empty config,
        so it must give every argument but the space's parameters and :attr:`heuristics`.
        """
        args = self.args(inputs, problem, {})
        self.prepare_thread()
        self.tuned[lambda meta: self.grid(problem, meta)](*[args[n] for n in self._launch_names])
        return self.outputs(inputs)

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
        """Every argument of :attr:`fn` by name, constexprs included, but those of
        :attr:`heuristics`; the config's parameters come from ``config`` alone (an empty
        config gives the arguments of a :meth:`launch`)."""

    @abc.abstractmethod
    def grid(self, problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, ...]:
        """The launch grid."""

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, Any], problem: Mapping[str, Any]
                  ) -> tuple[Any, ...]:
        """Expected outputs computed with torch (in float32 where precision matters)."""

    def prepare_thread(self) -> None:
        """What a launch from the calling thread needs set first: Triton's scratch allocator
        for a kernel that :attr:`needs_allocator`. :meth:`launch` and :meth:`run` call it, and
        so does the ``triton_gpu`` target before it measures."""
        if self.needs_allocator:
            install_allocator()

    def accepts(self, inputs: Mapping[str, Any]) -> bool:
        """Whether the kernel can run these inputs as they are (layout, sizes, device);
        :func:`kernels.matmul.matmul` skips a kernel that cannot."""
        return True

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
        for name, rule in self.heuristics.items():
            args[name] = rule(args)
        names = list(self.fn.arg_names)
        if set(args) != set(names):
            raise TypeError(f"{self.name}: args() gives {sorted(args)}, the kernel takes "
                            f"{names}")
        return [args[n] for n in names]

    def run(self, inputs: Mapping[str, Any], problem: Mapping[str, Any],
            config: Mapping[str, Any]) -> tuple[Any, ...]:
        """Launch through Triton's JIT (or its interpreter) and return the outputs."""
        args = self.ordered_args(inputs, problem, config)
        self.prepare_thread()
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
