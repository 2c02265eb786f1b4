"""Paths to the shared recorded spaces (skip cleanly where ../shared is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "spaces" / "kernel_tuner"


#: Set by the test command (scripts/test.sh): CI has ../shared beside the repository, so a
#: missing recorded space there is a broken checkout, not a reason to skip.
REQUIRE = os.environ.get("TUNEX_REQUIRE_SHARED") == "1"


def recorded(rel: str) -> Path:
    p = SHARED / rel
    if not p.is_file():
        why = f"recorded space {p} not present (CI has ../shared beside the repo)"
        if REQUIRE:
            pytest.fail(why + "; TUNEX_REQUIRE_SHARED=1 makes that an error")
        pytest.skip(why)
    return p
