"""Declarative search spaces: parameters, constraints, counting, sampling, encoding."""

from tunex.space._constraints import Constraint
from tunex.space._params import Bool, Choice, Int, Param, Permutation, Pow2
from tunex.space._space import Space

__all__ = ["Bool", "Choice", "Constraint", "Int", "Param", "Permutation", "Pow2", "Space"]
