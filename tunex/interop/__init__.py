"""Interoperability with the tools people already use: Kernel Tuner's cache and FAIR T4 results
files, and a live mirror of a search into an Optuna storage (for optuna-dashboard)."""

from tunex.interop._optuna_mirror import OptunaMirror
from tunex.interop.kernel_tuner import export_cache, export_t4, import_cache, is_cache

__all__ = ["OptunaMirror", "export_cache", "export_t4", "import_cache", "is_cache"]
