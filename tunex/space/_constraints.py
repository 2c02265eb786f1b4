"""Constraints: predicates over parameters and problem sizes.

A constraint is a Python callable whose argument names are the names it reads
(``lambda BLOCK_M, M: BLOCK_M <= M``) or a restricted expression string
(``"BLOCK_M * BLOCK_K * num_stages * 2 <= smem"``). Expression strings are parsed, not executed
as code: only arithmetic, comparisons, boolean logic and a few pure functions are allowed, so
spaces read from files are safe to load.
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

from tunex.errors import SpaceError

__all__ = ["Constraint"]

_FUNCTIONS: dict[str, Any] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "len": len, "round": round,
    "log2": math.log2, "ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt,
    "all": all, "any": any,
}
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.Invert, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
    ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor, ast.Compare, ast.Eq, ast.NotEq,
    ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.IfExp, ast.Name,
    ast.Load, ast.Constant, ast.Tuple, ast.List, ast.Call, ast.Subscript, ast.Index if hasattr(
        ast, "Index") else ast.Constant,
)


# -- bounded cost: an expression string from a file must not hang or exhaust the machine ------

#: Largest exponent of an integer power, shift count, and length a sequence may be repeated to.
_MAX_EXPONENT = 128
_MAX_SEQUENCE = 100_000
#: Largest integer an operation may build, in bits (a nested power grows them 128-fold a step).
_MAX_BITS = 4096


_NUMBERS = (int, float, bool)


class _TooCostly(Exception):
    pass


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and abs(b) > _MAX_EXPONENT and (
            not isinstance(a, (int, float)) or abs(a) > 1):
        raise _TooCostly(f"raises to the power {b}, above the limit of {_MAX_EXPONENT}")
    if type(a) is int and type(b) is int and b > 0 and a.bit_length() * b > _MAX_BITS:
        raise _TooCostly(f"raises a {a.bit_length()}-bit integer to the power {b}: an integer "
                         f"above the limit of {_MAX_BITS} bits")
    return a ** b


def _big(a: Any, b: Any) -> bool:
    """Whether the product of integers ``a`` and ``b`` would pass the size limit."""
    return (type(a) is int and type(b) is int
            and a.bit_length() + b.bit_length() > _MAX_BITS)


def _mul(a: Any, b: Any) -> Any:
    if type(a) in _NUMBERS and type(b) in _NUMBERS:  # the common case: no sequence to build
        if _big(a, b):
            raise _TooCostly(f"multiplies integers of {a.bit_length()} and {b.bit_length()} "
                             f"bits: a product above the limit of {_MAX_BITS} bits")
        return a * b
    for seq, n in ((a, b), (b, a)):
        if (isinstance(seq, (str, list, tuple)) and isinstance(n, int)
                and len(seq) * n > _MAX_SEQUENCE):
            raise _TooCostly(f"builds a sequence of {len(seq) * n:,} items, above the limit "
                             f"of {_MAX_SEQUENCE:,}")
    return a * b


def _lshift(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > _MAX_EXPONENT:
        raise _TooCostly(f"shifts by {b} bits, above the limit of {_MAX_EXPONENT}")
    if type(a) is int and type(b) is int and a.bit_length() + b > _MAX_BITS:
        raise _TooCostly(f"shifts a {a.bit_length()}-bit integer by {b}: an integer above the "
                         f"limit of {_MAX_BITS} bits")
    return a << b


_GUARDS = {"_tx_pow": _pow, "_tx_mul": _mul, "_tx_lshift": _lshift}
#: What an expression string sees besides the names it reads: no builtins, the pure functions
#: and the guards.
_GLOBALS: dict[str, Any] = {"__builtins__": {}, **_FUNCTIONS, **_GUARDS}
_GUARDED_OPS = {ast.Pow: "_tx_pow", ast.Mult: "_tx_mul", ast.LShift: "_tx_lshift"}


class _Guard(ast.NodeTransformer):
    """Turns ``**``, ``*`` and ``<<`` into calls that refuse results too large to compute."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        fn = _GUARDED_OPS.get(type(node.op))
        if fn is None:
            return node
        return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), [node.left, node.right],
                                          []), node)


#: The longest constraint expression read, and the deepest its syntax tree may nest: the
#: compiler and the checks here recurse over the tree.
_MAX_TEXT = 10_000
_MAX_DEPTH = 100


def _depth(tree: ast.AST) -> int:
    """The depth of ``tree``, found without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(node))
    return deepest


class Constraint:
    """A predicate that valid points satisfy.

    Args:
        rule: a callable (its parameter names say what it reads) or an expression string.
        names: override the names the rule reads (for callables taking ``**kwargs``).
        description: text shown when a config violates it; defaults to the expression.

    Evaluating a rule that raises (e.g. a division by zero) counts as a violation.
    """

    def __init__(self, rule: Constraint | Callable[..., Any] | str,
                 names: tuple[str, ...] | None = None, description: str | None = None) -> None:
        if isinstance(rule, Constraint):
            names, description = tuple(rule.names), rule.description
            rule = rule.rule
        self.rule: Callable[..., Any] | str = rule
        self.description: str
        if isinstance(rule, str):
            self.description = description or rule
            tree = self._parse(rule)
            # a name called is a function; any other name is a parameter read, even one
            # named like a function (a parameter "max" in "max > 1")
            called = {id(n.func) for n in ast.walk(tree)
                      if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            names_of = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
            found = sorted({n.id for n in names_of if id(n) not in called})
            both = sorted(set(found) & {n.id for n in names_of if id(n) in called})
            if both:
                raise SpaceError(f"constraint {rule!r} uses {both[0]!r} both as a parameter "
                                 f"and as a function; rename the parameter")
            guarded = _Guard().visit(tree)
            # compiled once into a function of the names it reads: a constraint is checked for
            # every point a space counts, so a call must not build dictionaries
            fn_tree = ast.Expression(ast.Lambda(
                ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in found], kwonlyargs=[],
                              kw_defaults=[], defaults=[]), guarded.body))
            self._expr: Callable[..., Any] = eval(  # parsed and vetted above
                compile(ast.fix_missing_locations(fn_tree), "<constraint>", "eval"), _GLOBALS)
            self._reads = tuple(found)
            self.names: tuple[str, ...] = tuple(names if names is not None else found)
            self._fn: Callable[[Mapping[str, Any]], Any] = self._eval_expr
        elif callable(rule):
            self.description = description or str(getattr(rule, "__name__", repr(rule)))
            if names is None:
                sig = inspect.signature(rule)
                bad = [p.name for p in sig.parameters.values()
                       if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
                if bad:
                    raise SpaceError(
                        f"constraint {self.description!r} takes *args/**kwargs; name the "
                        "parameters it reads as its arguments, or pass names=(...)"
                    )
                names = tuple(sig.parameters)
            self.names = tuple(names)
            fn = rule
            self._fn = lambda env: fn(**{n: env[n] for n in self.names})
        else:
            raise SpaceError(f"a constraint must be a callable or a string, got {rule!r}")
        if not self.names:
            raise SpaceError(f"constraint {self.description!r} reads no parameter")

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its rule (an expression is compiled again): what it compiled to is a
        # function no pickle can name, and a space travels to worker processes
        return (Constraint, (self.rule, tuple(self.names), self.description))

    @staticmethod
    def _parse(text: str) -> ast.Expression:
        if len(text) > _MAX_TEXT:
            raise SpaceError(f"constraint {text[:60]!r}... is {len(text):,} characters long, "
                             f"over the {_MAX_TEXT:,} an expression may have; split it into "
                             "several constraints or write it as a Python callable")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as e:
            raise SpaceError(f"constraint {text!r} is not a valid expression: {e.msg}") from None
        except (RecursionError, MemoryError):
            tree = None
        if tree is None or _depth(tree) > _MAX_DEPTH:
            raise SpaceError(f"constraint {text[:60]!r}... nests over {_MAX_DEPTH} levels deep; "
                             "split it into several constraints or write it as a Python "
                             "callable")
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise SpaceError(
                    f"constraint {text!r} uses {type(node).__name__}, which is not allowed in "
                    "expression strings; write it as a Python callable instead"
                )
            if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            ):
                raise SpaceError(
                    f"constraint {text!r} calls a function outside {sorted(_FUNCTIONS)}"
                )
        return tree

    def _eval_expr(self, env: Mapping[str, Any]) -> Any:
        try:
            return self._expr(*[env[n] for n in self._reads])
        except _TooCostly as e:
            raise SpaceError(f"constraint {self.description!r} {e}; constraints are checked "
                             "for every point, so they must stay cheap") from None

    def __call__(self, env: Mapping[str, Any]) -> bool:
        try:
            return bool(self._fn(env))
        except SpaceError:  # a constraint too costly to evaluate: the space is unusable
            raise
        except (ArithmeticError, ValueError, TypeError, IndexError):
            return False
        except Exception as e:  # a bug in the rule itself (a missing key, a typo): say so
            raise SpaceError(f"constraint {self.description!r} cannot be evaluated: "
                             f"{type(e).__name__}: {e}; fix the rule (a point it cannot "
                             "judge would be neither valid nor invalid)") from None

    def __repr__(self) -> str:
        return f"Constraint({self.description!r})"
