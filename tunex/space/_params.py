"""Parameter kinds. Every parameter has a finite, ordered domain of hashable values."""

from __future__ import annotations

import contextlib
import itertools
import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

from tunex.errors import SpaceError
from tunex.trial import canonical_json

__all__ = ["Bool", "Choice", "Int", "Param", "Permutation", "Pow2"]


def _shown(values: Sequence[Any], most: int = 12) -> str:
    """A domain as a message shows it: every value of a short one, the ends of a long one (a
    permutation of 8 items has 40,320; printing them made messages of megabytes)."""
    if len(values) <= most:
        return repr(tuple(values))
    head = ", ".join(map(repr, values[:most // 2]))
    tail = ", ".join(map(repr, values[-2:]))
    return f"({head}, ... {len(values) - most // 2 - 2:,} more ..., {tail})"


def _plain(name: str, value: Any) -> Any:
    """``value`` as a config can hold it (stored as JSON, encoded as numbers for the cost
    model): None, a bool, an integer within 64 bits, a finite float, a string, or a tuple of
    these; a numpy scalar becomes its Python value."""
    if hasattr(value, "item") and callable(value.item):
        with contextlib.suppress(TypeError, ValueError):
            value = value.item()
    if isinstance(value, tuple):
        return tuple(_plain(name, v) for v in value)
    ok = (value is None or isinstance(value, (bool, str))
          or (isinstance(value, int) and -2**63 <= value < 2**63)
          or (isinstance(value, float) and (math.isfinite(value) or math.isnan(value))))
    if not ok:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise SpaceError(f"parameter {name!r} has a value a config cannot hold: {shown} "
                         f"({type(value).__name__}); use numbers (integers within 64 bits, "
                         "finite floats), strings, bools, None or tuples of these")
    return value


class Param:
    """A named tuning parameter with a finite domain.

    Attributes:
        name: identifier used in configs and constraints (must be a Python identifier).
        values: the domain, in order.
        ordered: whether neighbouring values in :attr:`values` are "close" (block sizes are,
            algorithm choices are not); drives :meth:`Space.neighbours`.
        default: the value a kernel uses when nothing better is known.
    """

    ordered: bool = True

    def __init__(self, name: str, values: Iterable[Any], *, default: Any = None) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise SpaceError(f"parameter name {name!r} must be a Python identifier")
        vals = tuple(_plain(name, v) for v in values)
        if not vals:
            raise SpaceError(
                f"parameter {name!r} has an empty domain: give it at least one value"
            )
        try:
            distinct = len(set(vals))
        except TypeError:
            raise SpaceError(f"parameter {name!r} has a value that cannot be a config value "
                             f"({_shown(vals)}): use numbers, strings, bools or tuples") from None
        if distinct != len(vals):
            alike = ""
            if len({(type(v), v) for v in vals}) == len(vals):  # 1 and True, 2 and 2.0
                alike = (" (values Python holds equal, such as 1 and True or 2 and 2.0, are one "
                         "value to a config: keep one, or name the other as a string)")
            raise SpaceError(f"parameter {name!r} lists a value twice: {_shown(vals)}{alike}")
        if any(isinstance(v, float) and math.isnan(v) for v in vals):
            raise SpaceError(f"parameter {name!r} has a NaN value: NaN equals nothing, not even "
                             "itself, so a config holding it is never found again; use a string "
                             "or None for 'no value'")
        self.name = name
        self.values = vals
        self._index = {v: i for i, v in enumerate(vals)}
        if default is not None and default not in self._index:
            raise SpaceError(f"default {default!r} of {name!r} is not one of {_shown(vals)}")
        self.default = vals[0] if default is None else default

    @property
    def width(self) -> int:
        """Number of numeric features :meth:`encode` produces."""
        return 1

    def _find(self, value: Any) -> int | None:
        """The position of ``value``, which must be the domain's value as a config holds it:
        ``4.0`` or ``True`` equal ``4`` and ``1`` in Python, but are other configs (another
        database key) and other kernel arguments (a float block size does not compile)."""
        try:
            i = self._index.get(value)
        except TypeError:
            return None
        if i is None:
            return None
        v = self.values[i]
        if type(v) is not type(value) and canonical_json(v) != canonical_json(value):
            return None
        return i

    def index(self, value: Any) -> int:
        i = self._find(value)
        if i is None:
            raise SpaceError(f"{value!r} is not a value of {self.name!r} {_shown(self.values)}")
        return i

    def __contains__(self, value: object) -> bool:
        return self._find(value) is not None

    def encode(self, value: Any) -> list[float]:
        return [float(value)]

    def encode_any(self, value: Any) -> list[float]:
        """:meth:`encode` of a value that may lie outside the domain (a config recorded under
        another version of the space): a finite number where this parameter's domain is
        numbers (its encoding the number itself or its log2), ``nan`` (unknown to a cost
        model) for anything else."""
        if value in self:
            return self.encode(value)
        numeric = (isinstance(value, numbers.Real) and not isinstance(value, bool)
                   and math.isfinite(value))
        if numeric and self.width == 1 and all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) for v in self.values):
            return self.encode(value)
        return [math.nan] * self.width

    def neighbours(self, value: Any) -> list[Any]:
        """Values one step away: adjacent ones if ordered, all others otherwise."""
        i = self.index(value)
        if self.ordered:
            return [self.values[j] for j in (i - 1, i + 1) if 0 <= j < len(self.values)]
        return [v for v in self.values if v != value]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, "name": self.name, "values": list(self.values),
                "default": self.default}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.values!r})"


#: Most values an :class:`Int` range may hold (each value is kept, and counted over).
MAX_VALUES = 1_000_000


def _integers(name: str, **values: Any) -> None:
    for what, v in values.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise SpaceError(f"parameter {name!r}: {what}={v!r} is not a whole number; an "
                             "Int or Pow2 takes integers (a Choice takes any values)")


class Int(Param):
    """Integers ``low, low+step, ..., <= high``."""

    def __init__(self, name: str, low: int, high: int, step: int = 1, *,
                 default: int | None = None) -> None:
        _integers(name, low=low, high=high, step=step)
        low, high, step = int(low), int(high), int(step)
        if step <= 0:
            raise SpaceError(f"parameter {name!r}: step must be positive, got {step}")
        if high < low:
            raise SpaceError(f"parameter {name!r}: empty range {low}..{high}; swap the bounds?")
        values = range(low, high + 1, step)
        if len(values) > MAX_VALUES:
            raise SpaceError(f"parameter {name!r}: {low}..{high} step {step} has {len(values):,} "
                             f"values, more than {MAX_VALUES:,}; a larger step, or a Pow2, "
                             "keeps the values worth trying")
        super().__init__(name, values, default=default)


class Pow2(Param):
    """Powers of two from ``low`` to ``high`` inclusive (both powers of two)."""

    def __init__(self, name: str, low: int, high: int, *, default: int | None = None) -> None:
        _integers(name, low=low, high=high)
        low, high = int(low), int(high)
        for b in (low, high):
            if b < 1 or b & (b - 1):
                raise SpaceError(f"parameter {name!r}: bound {b} is not a power of two")
        if high < low:
            raise SpaceError(f"parameter {name!r}: empty range {low}..{high}; swap the bounds?")
        vals = [1 << k for k in range(low.bit_length() - 1, high.bit_length())]
        super().__init__(name, vals, default=default)

    def encode(self, value: Any) -> list[float]:
        return [math.log2(value)]

    def encode_any(self, value: Any) -> list[float]:
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and value <= 0:
            return [math.nan]  # no log2
        return super().encode_any(value)


class Choice(Param):
    """One of a list of values. Numeric choices are ordered by default, others are not."""

    def __init__(self, name: str, values: Sequence[Any], *, ordered: bool | None = None,
                 default: Any = None) -> None:
        super().__init__(name, values, default=default)
        self.numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                           for v in self.values)
        self.ordered = self.numeric if ordered is None else ordered

    def encode(self, value: Any) -> list[float]:
        return [float(value)] if self.numeric else [float(self.index(value))]

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if self.ordered != self.numeric:  # declared against the rule: kept, or a reload loses it
            d["ordered"] = self.ordered
        return d


class Bool(Param):
    """``False`` or ``True``."""

    ordered = False

    def __init__(self, name: str, *, default: bool = False) -> None:
        super().__init__(name, (False, True), default=default)


class Permutation(Param):
    """An ordering of items, e.g. loop order ``("m", "n", "k")``; values are tuples.

    Neighbours swap two adjacent items; the encoding is the position of each item.
    """

    ordered = False

    def __init__(self, name: str, items: Sequence[Any], *, default: Sequence[Any] | None = None
                 ) -> None:
        self.items = tuple(items)
        if len(self.items) > 8:
            n = len(self.items)
            raise SpaceError(
                f"parameter {name!r}: {n} items give {math.factorial(n)} orders; split it into "
                "several permutations of at most 8 items"
            )
        super().__init__(name, itertools.permutations(self.items),
                         default=None if default is None else tuple(default))

    @property
    def width(self) -> int:
        return len(self.items)

    def encode(self, value: Any) -> list[float]:
        return [float(value.index(item)) for item in self.items]

    def encode_any(self, value: Any) -> list[float]:
        """Also an order written out as one string of one-letter items (``"kij"``: recordings
        in the Kernel Tuner format key on ``str(value)``, and the RVV recordings tunex ships
        wrote their loop orders so), placed where its tuple is."""
        if (isinstance(value, str) and all(isinstance(i, str) and len(i) == 1 for i in self.items)
                and tuple(value) in self):
            return self.encode(tuple(value))
        return super().encode_any(value)

    def neighbours(self, value: Any) -> list[Any]:
        self.index(value)
        out = []
        for i in range(len(value) - 1):
            v = list(value)
            v[i], v[i + 1] = v[i + 1], v[i]
            out.append(tuple(v))
        return out
