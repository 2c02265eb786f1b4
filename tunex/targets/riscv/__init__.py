"""RISC-V vector targets: C/RVV kernels cross-compiled with clang-19 for a chosen core.

- :mod:`tunex.targets.riscv.sim` (``riscv-sim:CORE``): QEMU checks each trial's result and a
  cycle model of the core times it (executed blocks x llvm-mca-19 or measured instruction
  costs); deterministic, no hardware needed.
- :mod:`tunex.targets.riscv.ssh` (``riscv-ssh:USER@HOST``): boards over SSH, timed for real.
- ``_toolchain`` (cores, tool discovery with install hints, the cross-compile and QEMU command
  lines), ``_cycles`` (the cycle estimate and build facts), ``_cross`` (what both share), and
  ``txbb.c``, tunex's QEMU plugin, built at install time by ``scripts/install-riscv.sh``.
"""

from __future__ import annotations

__all__: list[str] = []
