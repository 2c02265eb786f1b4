"""tunex's exceptions: one root, a handful of subclasses.

Every exception is picklable (they cross process and Ray boundaries) and its message says what to
do next. Failed trials are *not* exceptions: they are :class:`~tunex.trial.Measurement` objects
with a failure status.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ClusterError",
    "ConfigError",
    "DatabaseError",
    "PackError",
    "SpaceError",
    "StrategyError",
    "TargetError",
    "TunexError",
]


class TunexError(Exception):
    """Root of every error tunex raises on purpose."""

    def __reduce__(self):  # keep subclasses picklable whatever their __init__ takes
        return (self.__class__, self.args)


class SpaceError(TunexError, ValueError):
    """A search space is malformed: empty domain, unknown name in a constraint, no valid point."""


class ConfigError(TunexError, ValueError):
    """A configuration does not belong to its space (unknown or missing parameter, bad value)."""


class StrategyError(TunexError, ValueError):
    """Unknown search strategy, or a strategy whose optional dependency is missing."""


class DatabaseError(TunexError):
    """The tuning database cannot be opened or written (corrupt, too new, unreachable)."""


class PackError(TunexError, ValueError):
    """A config pack is malformed, tampered with, or incompatible; nothing of it was imported."""


class TargetError(TunexError):
    """A target cannot be set up (missing toolchain, missing file, no device)."""


class ClusterError(TunexError):
    """The executor cannot reach its workers (e.g. no Ray cluster at the given address)."""


class BudgetError(TunexError, ValueError):
    """A budget string cannot be parsed (use e.g. ``2h``, ``90m``, ``30s``, ``500trials``)."""
