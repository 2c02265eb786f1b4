"""Interoperability with other autotuners' files (Kernel Tuner's cache and FAIR T4 results)."""

from tunex.interop.kernel_tuner import export_cache, export_t4, import_cache, is_cache

__all__ = ["export_cache", "export_t4", "import_cache", "is_cache"]
