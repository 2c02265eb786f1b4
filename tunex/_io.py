"""Reading files a user names, bounded: a path that is not a regular file (``/dev/zero``, a
FIFO) or that is larger than anything tunex would read is refused before it is read whole."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["read_bounded", "too_deep"]


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Raises ``OSError`` where it cannot be read (a missing file among them) and ``ValueError``
    where it is not a regular file or holds more than ``limit`` bytes; the caller turns either
    into its own error, which says what to do.
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError("it is a directory, not a file")
    if p.exists() and not p.is_file():
        raise ValueError("it is not a regular file (a device, a pipe or a socket)")
    with open(p, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"it is over {_size(limit)}, more than tunex reads from such a file")
    return data


def too_deep(value: Any, limit: int) -> bool:
    """Whether parsed JSON ``value`` nests lists and objects more than ``limit`` deep (checked
    without recursion, so a hostile document cannot exhaust the stack here or later)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
