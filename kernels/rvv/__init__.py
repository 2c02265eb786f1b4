"""C kernels for RISC-V vector CPUs (and the host): sgemm, softmax_c, conv2d.

Each renders C per config in one of two styles: RVV 1.0 intrinsics at a chosen LMUL, or
portable loops with clang vectorisation pragmas (what the ``cpu`` target builds). They are
registered by name through the ``tunex.kernels`` entry points; import them through
:func:`tunex.kernel.get_kernel`.
"""

from __future__ import annotations

__all__: list[str] = []
