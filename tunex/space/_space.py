"""Space: parameters + constraints, with exact counting, lazy enumeration and uniform sampling.

Valid points are never listed to be counted or sampled. Parameters are put in an order where
constraints can be checked early, and the number of valid completions of a partial assignment
is memoised by the values of the assigned parameters that later constraints still read (the
"frontier"). For kernel spaces, where constraints tie a few parameters together, the frontier
stays small, so counting is fast even when the raw product is 10^8 or more and constraints cut
most of it. The counts then give exact ranking: point ``i`` of the valid set can be built
directly, which makes uniform sampling (with or without replacement) and partitioned
enumeration cheap.
"""

from __future__ import annotations

import ast
import bisect
import itertools
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tunex._io import read_bounded
from tunex.errors import ConfigError, SpaceError
from tunex.space._constraints import Constraint
from tunex.space._params import Bool, Choice, Param, Permutation, Pow2
from tunex.trial import Config, config_value

log = logging.getLogger("tunex")

#: Seconds a space may take to count its valid points before it is refused
#: (``TUNEX_SPACE_BUILD_S`` overrides); progress is logged once counting takes a while.
BUILD_SECONDS = 120.0
#: Seconds of counting before progress is logged (then every 10 s).
PROGRESS_AFTER_S = 5.0
#: Constraint checks a count may certainly need before it is refused without starting (at
#: one to two microseconds each, past :data:`BUILD_SECONDS`).
BUILD_EVALUATIONS = 60_000_000

__all__ = ["Space"]

RngLike = int | np.random.Generator | None


def _rng(rng: RngLike) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError):
        raise SpaceError(f"rng={rng!r}: give a numpy Generator, a seed >= 0 or None") from None


def _flag(value: Any) -> bool:
    """A declared Bool default: ``"false"`` would read as true."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise TypeError(f"Bool default {value!r} is not true or false")


def _ordered(value: Any) -> bool | None:
    """A declared Choice's ``ordered``: absent (the rule: numbers ordered), true or false."""
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"Choice 'ordered' {value!r} is not true or false")


def _below(gen: np.random.Generator, size: int) -> int:
    """A uniform integer in [0, size), also past numpy's int64 (spaces of 10^24 points)."""
    if size < 2**62:
        return int(gen.integers(0, size))
    bits = size.bit_length()
    while True:  # rejection keeps it exactly uniform: at most two draws on average
        value = int.from_bytes(gen.bytes((bits + 7) // 8), "little") >> (-bits % 8)
        if value < size:
            return value


class Space:
    """A declarative search space.

    Args:
        params: the tuning parameters.
        constraints: callables or expression strings over parameter and problem names.
        problem: names of problem sizes that constraints may read (``M``, ``smem``, ...); their
            values are given later with :meth:`bind` (or now, with ``bound``).
        bound: values for some or all problem names.
        name: a label for messages.

    Raises:
        SpaceError: a duplicate name, a constraint reading an unknown name, or (once every
            problem name has a value) constraints that leave no valid point.

    Example::

        space = Space(
            [Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_K", 16, 128), Int("num_stages", 2, 5)],
            constraints=["(BLOCK_M * BLOCK_K) * num_stages * 2 <= smem"],
            problem=["smem"],
        ).bind(smem=232_448)
        space.size, space.sample(4, rng=0)
    """

    _MEMO_LIMIT = 4_000_000
    _TABLES_LIMIT = 50_000  # tables of valid values kept for drawing points (see _expand)

    def __init__(self, params: Sequence[Param],
                 constraints: Iterable[Constraint | Callable[..., Any] | str] = (),
                 problem: Iterable[str] = (), *, bound: Mapping[str, Any] | None = None,
                 name: str = "space") -> None:
        self.name = name
        self.params: tuple[Param, ...] = tuple(params)
        odd = [p for p in self.params if not isinstance(p, Param)]
        if odd:
            raise SpaceError(f"{name}: {odd[0]!r} is not a parameter: give Int, Pow2, Choice, "
                             "Bool or Permutation objects, e.g. Choice('num_warps', [2, 4, 8])")
        if not self.params:
            raise SpaceError(f"{name}: a space needs at least one parameter")
        self.names = tuple(p.name for p in self.params)
        dup = {n for n in self.names if self.names.count(n) > 1}
        if dup:
            raise SpaceError(f"{name}: parameter names given twice: {sorted(dup)}")
        self._by_name = {p.name: p for p in self.params}
        self.problem = tuple(problem)
        clash = set(self.problem) & set(self.names)
        if clash:
            raise SpaceError(f"{name}: {sorted(clash)} are both parameters and problem sizes")
        self.constraints = tuple(Constraint(c) for c in constraints)
        known = set(self.names) | set(self.problem)
        for c in self.constraints:
            unknown = [n for n in c.names if n not in known]
            if unknown:
                raise SpaceError(
                    f"{name}: constraint {c.description!r} reads {unknown}, which is neither a "
                    f"parameter {list(self.names)} nor a declared problem size "
                    f"{list(self.problem)}; fix the name or add it to problem=[...]"
                )
        self.bound: dict[str, Any] = {}
        if bound:
            self._check_bound(bound)
            self.bound = dict(bound)
        self._plan()
        if self.is_bound and self.size == 0:
            raise SpaceError(
                f"{name}: the constraints leave no valid point"
                + (f" for {self.bound}" if self.bound else "")
                + "; relax a constraint or widen a parameter's range"
            )

    # -- declaration ---------------------------------------------------------------------------

    def _check_bound(self, values: Mapping[str, Any]) -> None:
        unknown = [k for k in values if k not in self.problem]
        if unknown:
            raise SpaceError(f"{self.name}: {unknown} are not problem sizes of this space "
                             f"(declared: {list(self.problem)})")

    def bind(self, **values: Any) -> Space:
        """A copy of this space with problem sizes fixed (e.g. ``bind(M=4096, smem=232448)``)."""
        self._check_bound(values)
        return Space(self.params, self.constraints, self.problem,
                     bound={**self.bound, **values}, name=self.name)

    @property
    def is_bound(self) -> bool:
        return all(n in self.bound for n in self.problem)

    def _require_bound(self) -> None:
        if not self.is_bound:
            missing = [n for n in self.problem if n not in self.bound]
            raise SpaceError(f"{self.name}: problem sizes {missing} have no value; "
                             "call space.bind(...) first")

    def param(self, name: str) -> Param:
        return self._by_name[name]

    # -- ordering and counting -----------------------------------------------------------------

    def _plan(self) -> None:
        """Order parameters so constraints are checked early and the frontier stays small."""
        cons_vars = [frozenset(n for n in c.names if n in self._by_name) for c in self.constraints]
        order: list[str] = []
        left = list(self.names)
        while left:
            def cost(cand: str) -> tuple[float, int]:
                placed = set(order) | {cand}
                frontier = {v for vs in cons_vars if not vs <= placed for v in vs & placed}
                closes = sum(1 for vs in cons_vars if cand in vs and vs <= placed)
                width = sum(math.log(len(self._by_name[v].values)) for v in frontier)
                return (width - 0.01 * closes, self.names.index(cand))
            best = min(left, key=cost)
            order.append(best)
            left.remove(best)
        self._order = tuple(self._by_name[n] for n in order)
        pos = {n: i for i, n in enumerate(order)}
        n = len(order)
        # constraints checked when the last parameter they read is placed (level = position+1);
        # constraints reading only problem sizes are checked at level 0.
        self._checks: list[list[Constraint]] = [[] for _ in range(n + 1)]
        for c, vs in zip(self.constraints, cons_vars):
            level = max((pos[v] + 1 for v in vs), default=0)
            self._checks[level].append(c)
        self._frontier: list[tuple[int, ...]] = []
        for level in range(n + 1):
            placed = set(order[:level])
            front = sorted({pos[v] for vs in cons_vars if not vs <= placed for v in vs & placed})
            self._frontier.append(tuple(front))
        self._memo: list[dict[tuple[Any, ...], int]] = [{} for _ in range(n + 1)]
        self._memo_size = 0
        self._tables: list[dict[tuple[Any, ...], tuple[list[Any], list[int]]]] = [
            {} for _ in range(n + 1)]
        self._tables_size = 0
        self._size: int | None = None
        self._evals = 0
        self._next_tick = 50_000
        self._clock: tuple[float, float, int, list[float]] = (0.0, math.inf, 1, [math.inf])

    def _ok(self, level: int, env: dict[str, Any]) -> bool:
        return all(c(env) for c in self._checks[level])

    def _work_bound(self) -> tuple[int, int]:
        """``(bound, certain)``: at most how many constraint checks counting the space needs
        (per level, the distinct values of its frontier, which the memo is keyed on, times the
        level's values), and how many it needs for sure (the levels up to the first with a
        check, where nothing has pruned yet)."""
        total = certain = 0
        placed = 1
        pruned = False
        for level, p in enumerate(self._order):
            front = math.prod(len(self._order[i].values) for i in self._frontier[level])
            work = min(placed, front) * len(p.values)
            checks = bool(self._checks[level + 1])
            total += work if checks else 0
            if not pruned:
                certain += work
            pruned = pruned or checks
            placed *= len(p.values)
        return total, certain

    def _tie(self) -> str:
        """The constraint that reads the most parameters, for messages."""
        widest = max(self.constraints, key=lambda c: len(set(c.names) & set(self.names)),
                     default=None)
        return "" if widest is None else f" (e.g. {widest.description!r})"

    def _build_clock(self) -> None:
        bound, certain = self._work_bound()
        if certain > BUILD_EVALUATIONS:
            raise SpaceError(
                f"{self.name}: counting this space's valid points needs at least {certain:.2g} "
                f"constraint checks, more than can run in reasonable time: its constraints tie "
                f"many parameters together{self._tie()}. Split such a constraint into ones "
                "over fewer parameters, or narrow the parameters' ranges")
        limit = float(os.environ.get("TUNEX_SPACE_BUILD_S", BUILD_SECONDS))
        start = time.monotonic()
        self._clock = (start, start + limit, bound, [start + PROGRESS_AFTER_S])

    def _tick(self) -> None:
        start, deadline, bound, say = self._clock
        now = time.monotonic()
        if now >= say[0]:
            done = min(1.0, self._evals / max(bound, 1))
            log.warning("%s: still counting the valid points after %.0f s (at least %.0f%% of "
                        "the checks done); a constraint that reads many parameters%s is slow",
                        self.name, now - start, 100 * done, self._tie())
            say[0] = now + 10.0
        if now >= deadline:
            raise SpaceError(
                f"{self.name}: counting the valid points took over {deadline - start:.0f} s "
                f"and was stopped: its constraints tie many parameters together{self._tie()}. "
                "Split such a constraint into ones over fewer parameters, narrow the ranges, "
                "or allow longer with TUNEX_SPACE_BUILD_S")

    def _count(self, level: int, values: list[Any], env: dict[str, Any]) -> int:
        """Number of valid completions of the first ``level`` placed values."""
        if level == len(self._order):
            return 1
        key = tuple(values[i] for i in self._frontier[level])
        hit = self._memo[level].get(key)
        if hit is not None:
            return hit
        _, running = self._expand(level, values, env, key, counting=True)
        total = running[-1] if running else 0
        self._memo[level][key] = total
        self._memo_size += 1
        if self._memo_size > self._MEMO_LIMIT:
            raise SpaceError(
                f"{self.name}: constraints tie too many parameters together to count the space "
                "exactly; split a large constraint into smaller ones"
            )
        return total

    def _expand(self, level: int, values: list[Any], env: dict[str, Any],
                key: tuple[Any, ...], counting: bool = False) -> tuple[list[Any], list[int]]:
        """The values of the parameter placed at ``level`` that have a valid completion, each
        with the running total of the completions up to it, given the placed ``values``.

        Like the counts, the table depends only on the values the level's frontier holds
        (``key``): counting the space keeps it (up to ``_TABLES_LIMIT`` tables), so drawing or
        listing points later costs a lookup and a bisection per parameter, not a constraint
        check per value."""
        p = self._order[level]
        if counting:
            self._evals += len(p.values)
            if self._evals >= self._next_tick:
                self._next_tick = self._evals + 50_000
                self._tick()
        last = level + 1 == len(self._order)
        kept: list[Any] = []
        running: list[int] = []
        total = 0
        for v in p.values:
            env[p.name] = v
            values.append(v)
            if self._ok(level + 1, env):
                c = 1 if last else self._count(level + 1, values, env)
                if c:
                    total += c
                    kept.append(v)
                    running.append(total)
            values.pop()
        env.pop(p.name, None)
        if self._tables_size < self._TABLES_LIMIT:
            self._tables[level][key] = (kept, running)
            self._tables_size += 1
        return kept, running

    def _children(self, level: int, values: list[Any], env: dict[str, Any]
                  ) -> tuple[list[Any], list[int]]:
        """:meth:`_expand`'s table for the placed ``values``, kept or made anew."""
        key = tuple(values[i] for i in self._frontier[level])
        table = self._tables[level].get(key)
        return table if table is not None else self._expand(level, values, env, key)

    @property
    def raw_size(self) -> int:
        """Size of the Cartesian product, before constraints."""
        return math.prod(len(p.values) for p in self.params)

    @property
    def size(self) -> int:
        """Number of valid points."""
        self._require_bound()
        if self._size is not None:
            return self._size
        env = dict(self.bound)
        if not self._ok(0, env):
            self._size = 0
            return 0
        self._build_clock()
        self._size = self._count(0, [], env)
        return self._size

    def __len__(self) -> int:
        return self.size

    # -- points --------------------------------------------------------------------------------

    def _walk(self, index: int) -> Config:
        """The valid point with rank ``index`` (in :meth:`__iter__` order)."""
        env = dict(self.bound)
        values: list[Any] = []
        for level, p in enumerate(self._order):
            kept, running = self._children(level, values, env)
            j = bisect.bisect_right(running, index)
            if j == len(kept):  # pragma: no cover - guarded by the caller's range check
                raise IndexError("rank out of range")
            if j:
                index -= running[j - 1]
            env[p.name] = kept[j]
            values.append(kept[j])
        return Config({p.name: env[p.name] for p in self.params})

    def at(self, index: int) -> Config:
        """The valid point of rank ``index``, ``0 <= index < size``."""
        size = self.size
        if not 0 <= index < size:
            raise IndexError(f"rank {index} outside 0..{size - 1}")
        return self._walk(index)

    def __iter__(self) -> Iterator[Config]:
        """Valid points, lazily, skipping subtrees with no valid point."""
        self._require_bound()
        env = dict(self.bound)
        if not self._ok(0, env):
            return
        n = len(self._order)
        values: list[Any] = []

        def rec(level: int) -> Iterator[Config]:
            if level == n:
                yield Config({p.name: env[p.name] for p in self.params})
                return
            p = self._order[level]
            kept, _ = self._children(level, values, env)
            for v in kept:
                env[p.name] = v
                values.append(v)
                yield from rec(level + 1)
                values.pop()
            env.pop(p.name, None)

        yield from rec(0)

    def sample(self, n: int = 1, rng: RngLike = None, *, unique: bool = True,
               exclude: Iterable[Config] = ()) -> list[Config]:
        """``n`` valid points drawn uniformly (without replacement when ``unique``).

        Returns fewer than ``n`` when the space (minus ``exclude``) has fewer points.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise SpaceError(f"sample(n={n!r}): give a whole number of points >= 0")
        n = int(n)
        gen = _rng(rng)
        size = self.size
        if not unique:
            return [self._walk(_below(gen, size)) for _ in range(n)]
        seen = set(exclude)
        free = size - len(seen)  # at least: an excluded config need not be a valid point
        if free <= 4 * n:  # near the end of the space: count exactly (a check per config)
            free = size - sum(1 for c in seen if c in self)
        n = min(n, max(free, 0))
        out: list[Config] = []
        if n == 0:
            return out
        if n > free // 4:  # dense request: permute ranks instead of rejecting
            for i in gen.permutation(size):
                c = self._walk(int(i))
                if c not in seen:
                    out.append(c)
                    seen.add(c)
                    if len(out) == n:
                        break
            return out
        while len(out) < n:
            c = self._walk(_below(gen, size))
            if c not in seen:
                seen.add(c)
                out.append(c)
        return out

    def violations(self, config: Mapping[str, Any]) -> list[str]:
        """Why ``config`` is not a valid point (empty list: it is)."""
        problems = [f"missing parameter {n!r}" for n in self.names if n not in config]
        problems += [f"unknown parameter {k!r}" for k in config if k not in self._by_name]
        if problems:
            return problems
        for p in self.params:
            v = config[p.name]
            if v not in p:
                twin = next((d for d in p.values if _equal(d, v)), None)
                problems.append(
                    f"{p.name}={v!r} is not one of {list(p.values)}" if twin is None else
                    f"{p.name}={v!r} is a {type(v).__name__}; the space's value is "
                    f"{twin!r} ({type(twin).__name__}): write {twin!r}")
        if problems:
            return problems
        env = {**self.bound, **config}
        return [f"violates {c.description}" for level in self._checks for c in level
                if not c(env)]

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Mapping) and not self.violations(config)

    def validate(self, config: Mapping[str, Any]) -> Config:
        """``config`` as a :class:`Config`, or :class:`ConfigError` saying what is wrong."""
        problems = self.violations(config)
        if problems:
            raise ConfigError(f"{self.name}: {dict(config)} is not a valid point: "
                              + "; ".join(problems))
        return config if isinstance(config, Config) else Config(config)

    def default(self) -> Config:
        """The parameters' defaults if that point is valid; else the valid point that changes
        the fewest of them (one, then two; e.g. an RVV kernel's intrinsics style on a host
        without RVV becomes the portable style, the tile kept); else the first valid point."""
        c = Config({p.name: p.default for p in self.params})
        if c in self:
            return c
        for changed in (1, 2):
            for names in itertools.combinations(self.params, changed):
                for values in itertools.product(*(p.values for p in names)):
                    other = c.replace(**{p.name: v for p, v in zip(names, values)})
                    if other != c and other in self:
                        return other
        return self.at(0)

    def neighbours(self, config: Config, *, hamming: bool = False) -> list[Config]:
        """Valid points that differ from ``config`` in one parameter.

        By default one step (adjacent value of an ordered parameter, any value of an unordered
        one, one adjacent swap of a permutation); ``hamming=True`` allows any other value.
        """
        out = []
        for p in self.params:
            cur = config[p.name]
            cands = [v for v in p.values if v != cur] if hamming else p.neighbours(cur)
            for v in cands:
                c = config.replace(**{p.name: v})
                if c in self:
                    out.append(c)
        return out

    # -- numbers -------------------------------------------------------------------------------

    @property
    def feature_names(self) -> list[str]:
        names: list[str] = []
        for p in self.params:
            if p.width == 1:
                names.append(p.name)
            else:
                names += [f"{p.name}[{item}]" for item in getattr(p, "items", range(p.width))]
        return names

    def encode(self, configs: Sequence[Mapping[str, Any]], partial: bool = False) -> np.ndarray:
        """Numeric matrix, one row per config (log2 for powers of two, positions for orders).

        With ``partial``, configs may come from another version of the space: a parameter a
        config lacks is ``nan``, and so is a value outside the domain unless it is a number
        the parameter's encoding can place (:meth:`Param.encode_any`)."""
        width = sum(p.width for p in self.params)
        out = np.empty((len(configs), width), dtype=np.float64)
        for r, c in enumerate(configs):
            row: list[float] = []
            for p in self.params:
                if not partial:
                    row += p.encode(c[p.name])
                elif p.name in c:
                    row += p.encode_any(c[p.name])
                else:
                    row += [math.nan] * p.width
            out[r] = row
        return out

    # -- serialisation -------------------------------------------------------------------------

    def bound_constraints(self) -> list[str]:
        """The constraint expressions with the bound problem values written in: the
        ``restrictions`` of a recorded space, which replay without the problem.

        A constraint that reads only problem values (``M % 8 == 0``) is settled by them: it
        holds for every point and is left out (a replayed space has no problem to read).

        Raises:
            SpaceError: a constraint is a Python callable (only expressions can be written).
        """
        bound = self.bound

        class Sub(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                if node.id in bound:
                    return ast.copy_location(ast.Constant(bound[node.id]), node)
                return node

        out = []
        for c in self.constraints:
            if not isinstance(c.rule, str):
                raise SpaceError(f"constraint {c.description!r} is a Python callable and cannot "
                                 "be written out; use an expression string")
            if c.names and all(n in bound for n in c.names):
                continue  # holds: a bound space has a valid point (bind checks)
            out.append(ast.unparse(Sub().visit(ast.parse(c.rule, mode="eval"))))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able declaration. Only expression-string constraints can be written out."""
        cons = []
        for c in self.constraints:
            if not isinstance(c.rule, str):
                raise SpaceError(f"constraint {c.description!r} is a Python callable and cannot "
                                 "be written to JSON; use an expression string")
            cons.append(c.rule)
        return {"name": self.name, "params": [p.to_dict() for p in self.params],
                "constraints": cons, "problem": list(self.problem), "bound": self.bound}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Space:
        kinds: dict[str, Callable[..., Param]] = {
            "Int": lambda n, vs, dflt, _: Choice(n, vs, ordered=True, default=dflt),
            "Pow2": lambda n, vs, dflt, _: Pow2(n, min(vs), max(vs), default=dflt),
            "Choice": lambda n, vs, dflt, ordered: Choice(
                n, [config_value(v) for v in vs], default=config_value(dflt),
                ordered=_ordered(ordered)),
            "Bool": lambda n, vs, dflt, _: Bool(n, default=_flag(dflt)),
            "Permutation": lambda n, vs, dflt, _: Permutation(
                n, vs[0], default=None if dflt is None else tuple(dflt)),
        }
        try:
            params = [kinds[p["kind"]](p["name"], p["values"], p.get("default"),
                                       p.get("ordered"))
                      for p in d["params"]]
            problem = d.get("problem", ())
            if isinstance(problem, str):  # "MN" would read as the sizes M and N
                raise TypeError(f"'problem' {problem!r} is not a list of names")
            return cls(params, d.get("constraints", ()), problem,
                       bound=d.get("bound") or None, name=d.get("name", "space"))
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise SpaceError(f"malformed space declaration: missing or bad field {e}") from None

    @classmethod
    def from_t1(cls, path: str | Path, *, values: Mapping[str, Sequence[Any]] | None = None
                ) -> Space:
        """Read a space in the T1 JSON format (``ConfigurationSpace.TuningParameters`` and
        ``Conditions``). ``values`` overrides parameter domains (e.g. with the values a
        recorded cache actually holds); parameters with a single value become constants."""
        try:
            doc = json.loads(read_bounded(path, _DEFINITION_BYTES))
            cs = doc["ConfigurationSpace"]
            declared: dict[str, list[Any]] = {}
            for p in cs["TuningParameters"]:
                vals = p["Values"]
                if isinstance(vals, str):
                    vals = _eval_values(vals)
                vals = list(vals)
                odd = [v for v in vals if not isinstance(v, (bool, int, float, str, list, tuple))
                       or (isinstance(v, float) and not math.isfinite(v))]
                if odd:
                    raise ValueError(f"parameter {p['Name']!r} takes the value {odd[0]!r}, "
                                     "which is not a number, a string or a list")
                declared[p["Name"]] = vals
            conds = [c["Expression"] for c in cs.get("Conditions", [])]
        except (OSError, ValueError, KeyError, TypeError, SyntaxError,  # a domain's text
                NameError, IndexError,  # a domain that names nothing known, or indexes past
                ArithmeticError,  # a domain's number past a float
                RecursionError, MemoryError) as e:  # nested deeper than the readers go
            raise SpaceError(f"{path}: not a readable T1 space definition ({e})") from None
        if values:
            declared.update({k: list(v) for k, v in values.items()})
        params = [Choice(n, vs) for n, vs in declared.items() if len(vs) > 1]  # names unordered
        consts = {n: vs[0] for n, vs in declared.items() if len(vs) == 1}
        return cls(params, conds, problem=list(consts), bound=consts,
                   name=Path(path).stem)

    def __repr__(self) -> str:
        return (f"Space({self.name!r}, params={list(self.names)}, "
                f"constraints={len(self.constraints)}, raw_size={self.raw_size})")


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an odd value's comparison: not equal
        return False


_DOMAIN_ITEMS = 1_000_000  # values a T1 domain may make in all (and loop steps it may take)
_DOMAIN_BITS = 4096  # the largest integer a T1 domain may make, in bits
_DEFINITION_BYTES = 16 << 20  # the largest T1 definition file read


class _Guarded(ast.NodeTransformer):
    """Powers and products of a domain expression go through checked functions."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        fn = {ast.Pow: "_pow", ast.Mult: "_mul", ast.LShift: "_shift"}.get(type(node.op))
        if fn is None:
            return node
        return ast.copy_location(
            ast.Call(func=ast.Name(fn, ast.Load()), args=[node.left, node.right], keywords=[]),
            node)

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        """Each value a comprehension's loop takes is counted, whatever it iterates over."""
        self.generic_visit(node)
        node.iter = ast.copy_location(
            ast.Call(func=ast.Name("_each", ast.Load()), args=[node.iter], keywords=[]),
            node.iter)
        return node


def _eval_values(text: str) -> list[Any]:
    """T1 domains are Python list expressions (``[32 * i for i in range(1, 32)]``).

    A definition is found beside recorded data and read without asking, so its text is held
    to what such domains need: no attributes, lambdas or calls but ``range`` and ``list``,
    powers to exponents of at most 64, and at most a million values made in all (ranges,
    repeated lists): ``list(range(10**9))`` or ``[0] * 10**9`` would fill the memory.
    """
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Lambda)) or (
            isinstance(node, ast.Call)
            and not (isinstance(node.func, ast.Name) and node.func.id in ("range", "list"))
        ):
            raise ValueError(f"domain {text!r} is not a plain list expression")
    made = [0]

    def count(n: int) -> None:
        made[0] += n
        if made[0] > _DOMAIN_ITEMS:
            raise ValueError(f"domain {text!r} makes over {_DOMAIN_ITEMS:,} values")

    def bounded_range(*args: int) -> Iterator[int]:
        return each(range(*args))

    def pow_(a: Any, b: Any) -> Any:
        if isinstance(b, int) and (abs(b) > 64 or (  # nor a power of a power of a power...
                isinstance(a, int) and abs(a).bit_length() * b > 4096)):
            raise ValueError(f"domain {text!r} raises to the power {b}")
        return a**b

    def mul(a: Any, b: Any) -> Any:
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, (list, tuple, str)) and isinstance(n, int):
                count(len(seq) * max(n, 0))
        if isinstance(a, int) and isinstance(b, int) and (
                a.bit_length() + b.bit_length() > _DOMAIN_BITS):
            raise ValueError(f"domain {text!r} makes a number over {_DOMAIN_BITS} bits")
        return a * b

    def shift(a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int) and b > 0 and (
                a.bit_length() + b > _DOMAIN_BITS):
            raise ValueError(f"domain {text!r} makes a number over {_DOMAIN_BITS} bits")
        return a << b

    def each(values: Any) -> Iterator[Any]:
        for v in values:
            count(1)
            yield v

    tree = ast.fix_missing_locations(_Guarded().visit(tree))
    return list(eval(compile(tree, "<domain>", "eval"),
                     {"__builtins__": {}, "range": bounded_range, "list": list,
                      "_pow": pow_, "_mul": mul, "_shift": shift, "_each": each}))





