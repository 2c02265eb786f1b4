"""RISC-V vector targets: cross-compiled C/RVV kernels, simulated (QEMU + a cycle model) or run
on boards over SSH."""

__all__: list[str] = []
