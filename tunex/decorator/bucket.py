"""Bucketing of autotune keys: which argument values share a tuned config.

A key entry maps an argument's value to its bucket; calls whose key values fall in the same
buckets share one workload, so a new shape in a known bucket is not tuned again::

    @tunex.autotune(space=..., key={"M": bucket.pow2, "N": bucket.pow2, "K": bucket.multiple(64)})

Bucket functions are plain callables ``value -> bucket value`` (the bucket value is what the
database and packs store). Names are accepted too: ``"exact"``, ``"pow2"``, ``"pow2_floor"``,
``"multiple:N"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tunex.errors import ConfigError

__all__ = ["Bucket", "exact", "get", "multiple", "pow2", "pow2_floor"]

Bucket = Callable[[Any], Any]


def exact(value: Any) -> Any:
    """Every value is its own bucket (Triton's behaviour)."""
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def pow2(value: Any) -> Any:
    """Positive integers round up to a power of two (1000 -> 1024, 1024 -> 1024, 1025 -> 2048);
    other values are their own bucket."""
    if _is_int(value) and value > 0:
        return 1 << (value - 1).bit_length()
    return value


def pow2_floor(value: Any) -> Any:
    """Positive integers round down to a power of two (1000 -> 512, 1024 -> 1024)."""
    if _is_int(value) and value > 0:
        return 1 << (value.bit_length() - 1)
    return value


def multiple(n: int) -> Bucket:
    """Positive integers round up to a multiple of ``n`` (``multiple(64)``: 100 -> 128)."""
    if not _is_int(n) or n < 1:
        raise ConfigError(f"bucket.multiple needs a positive integer, got {n!r}")

    def bucket(value: Any) -> Any:
        if _is_int(value) and value > 0:
            return -(-value // n) * n
        return value

    bucket.__name__ = f"multiple_{n}"
    bucket.__qualname__ = f"multiple({n})"
    return bucket


_NAMED: dict[str, Bucket] = {"exact": exact, "pow2": pow2, "pow2_floor": pow2_floor}


def get(spec: str | Bucket | None) -> Bucket:
    """A bucket function from a callable, a name (``"pow2"``, ``"multiple:64"``) or None
    (exact)."""
    if spec is None:
        return exact
    if callable(spec):
        return spec
    if isinstance(spec, str):
        if spec in _NAMED:
            return _NAMED[spec]
        head, _, arg = spec.partition(":")
        if head == "multiple" and arg.isdigit():
            return multiple(int(arg))
    raise ConfigError(
        f"unknown bucket {spec!r}: use a callable or one of {sorted(_NAMED)} or 'multiple:N'"
    )
