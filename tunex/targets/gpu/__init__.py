"""What every Triton-on-GPU path of tunex shares: ahead-of-time compiling, timing, failures.

- :func:`compile_binary` compiles a ``@triton.jit`` function for ``sm_<arch>`` without a GPU
  (in build worker processes); :class:`KernelSource` carries a jit function there (by import,
  or by its source); :func:`prune_reason` refuses builds the device cannot run;
  :func:`load_binary` turns the result back into a launchable kernel where it is measured.
- :class:`GpuTimer` is the one timing harness (warm-up, an L2 flush and a short GPU sleep before
  each repeat, CUDA events), with its :class:`MeasureOptions`; the ``triton_gpu`` target, the
  decorator's tuning on a miss and the benchmarks all time with it.
- :func:`failure_status`: the trial status of an exception, by class.

Nothing here imports torch or triton at module import.
"""

from tunex.targets.gpu._compile import (
    KernelSource,
    TritonBinary,
    compile_binary,
    load_binary,
    prune_reason,
    specialize,
)
from tunex.targets.gpu._timing import GpuTimer, MeasureOptions, failure_status

__all__ = ["GpuTimer", "KernelSource", "MeasureOptions", "TritonBinary", "compile_binary",
           "failure_status", "load_binary", "prune_reason", "specialize"]
