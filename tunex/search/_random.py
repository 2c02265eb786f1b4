"""Baselines: uniform random sampling without replacement, and exhaustive enumeration."""

from __future__ import annotations

from collections.abc import Iterator

from tunex.search._base import SearchStrategy
from tunex.space import Space
from tunex.trial import Config

__all__ = ["ExhaustiveSearch", "RandomSearch"]


class RandomSearch(SearchStrategy):
    """Valid points drawn uniformly at random, never the same one twice."""

    name = "random"

    def _ask(self, n: int) -> list[Config] | None:
        return self._random_fresh(n)


class ExhaustiveSearch(SearchStrategy):
    """Every valid point once, in enumeration order (``shuffle=True``: in random order)."""

    name = "exhaustive"

    def __init__(self, space: Space, *, seed: int | None = None, shuffle: bool = False) -> None:
        super().__init__(space, seed=seed)
        if shuffle:
            order = self.rng.permutation(space.size)
            self._points: Iterator[Config] = (space.at(int(i)) for i in order)
        else:
            self._points = iter(space)

    def _ask(self, n: int) -> list[Config] | None:
        out: list[Config] = []
        for c in self._points:
            self.proposals += 1
            if self._fresh(c):
                out.append(c)
                if len(out) == n:
                    break
        return out or None
