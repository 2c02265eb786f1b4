"""The one default tuning database of every entry point."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_path"]


def default_path() -> str:
    """``$TUNEX_DB`` when set, else ``~/.cache/tunex/tunex.db``: where ``tunex search`` and the
    other commands, ``@tunex.autotune`` and the library kernels' launchers read and write when
    no database is named, so what one tunes the others find."""
    return os.environ.get("TUNEX_DB") or str(Path("~/.cache/tunex/tunex.db").expanduser())
