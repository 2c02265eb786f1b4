"""Paths to the shared recorded spaces (skip cleanly where ../shared is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "spaces" / "kernel_tuner"


def recorded(rel: str) -> Path:
    p = SHARED / rel
    if not p.is_file():
        pytest.skip(f"recorded space {p} not present (CI has ../shared beside the repo)")
    return p
