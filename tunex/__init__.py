"""tunex: search-based autotuning for Triton GPU kernels and RISC-V vector kernels.

Light on import: nothing here starts a cluster, touches a GPU or installs anything. The
``@tunex.autotune`` decorator (which needs Triton) is imported on first use.
"""

from __future__ import annotations

from typing import Any

from tunex.errors import (
    BudgetError,
    ClusterError,
    ConfigError,
    DatabaseError,
    PackError,
    SpaceError,
    StrategyError,
    TargetError,
    TunexError,
)
from tunex.space import Bool, Choice, Constraint, Int, Permutation, Pow2, Space
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__version__ = "0.1.0"

__all__ = [
    "Artifact", "Bool", "Budget", "BudgetError", "Choice", "ClusterError", "Config",
    "ConfigError", "Constraint", "Database", "DatabaseError", "Int", "Measurement", "PackError",
    "Permutation", "Pow2", "Space", "SpaceError", "Status", "StrategyError", "TargetError",
    "Tuner", "TunexError", "Workload", "__version__", "autotune", "bucket",
]


def __getattr__(name: str) -> Any:
    if name in ("Tuner", "Budget", "TuneResult"):
        from tunex import tuner

        return getattr(tuner, name)
    if name == "Database":
        from tunex.db import Database

        return Database
    if name == "autotune":
        from tunex.decorator import autotune

        return autotune
    if name == "bucket":
        from tunex.decorator import bucket

        return bucket
    raise AttributeError(f"module 'tunex' has no attribute {name!r}")
