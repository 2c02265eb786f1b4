"""The SearchStrategy contract (ask/tell) and the registry of strategies by name."""

from __future__ import annotations

import abc
import importlib
import inspect
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from tunex.errors import StrategyError
from tunex.space import Space
from tunex.trial import Config, Measurement, Workload

__all__ = [
    "SearchStrategy",
    "available_strategies",
    "get_strategy",
    "register_strategy",
]


class SearchStrategy(abc.ABC):
    """Proposes configs to measure and learns from their measurements.

    A strategy only proposes: it never builds, measures or stores anything, and never knows where
    trials run. The tuner calls :meth:`ask` for a batch (one config per free worker), measures
    the batch, and calls :meth:`tell` with the results, in any order and possibly interleaved
    with further asks (asynchronous workers).

    Subclasses implement :meth:`_ask`; they may override :meth:`_tell`. The base class keeps
    :attr:`history` (every told measurement by config: the latest one wins) and counts
    :attr:`proposals`, the configs proposed including repeats that the strategy resolved on its
    own.

    Args:
        space: the (bound) space to search.
        seed: makes the strategy deterministic for a given sequence of tells.
    """

    name = "strategy"

    def __init__(self, space: Space, *, seed: int | None = None) -> None:
        check_seed(seed, f"strategy {self.name!r}")
        self.space = space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.history: dict[Config, Measurement] = {}
        self.pending: set[Config] = set()
        self.proposals = 0
        #: what :meth:`warm_start` took from other workloads (``None``: nothing): a strategy
        #: that transfers says how many workloads and trials it learnt from and what it
        #: proposes first, so a user can see why the first trials were what they were
        self.transfer_: dict[str, Any] | None = None

    def ask(self, n: int = 1) -> list[Config] | None:
        """Up to ``n`` configs to measure next; ``None`` once there is nothing left to propose.

        Configs are valid points of :attr:`space`, not yet told and not pending. Fewer than
        ``n`` may come back (e.g. near the end of a small space).
        """
        if n < 1:
            raise ValueError(f"ask(n) needs n >= 1, got {n}")
        batch = self._ask(n)
        if batch is None:
            return None
        self.pending.update(batch)
        return batch

    def tell(self, measurements: Sequence[Measurement]) -> None:
        """Report finished trials (failures included). Told configs need not have been asked:
        telling a database's earlier trials before the first ask resumes a search."""
        for m in measurements:
            self.pending.discard(m.config)
            self.history[m.config] = m
        self._tell(measurements)

    def warm_start(self, others: Sequence[tuple[Workload, Sequence[Measurement]]],  # noqa: B027
                   current: Workload | None = None, guessed: Collection[str] = ()) -> None:
        """Offer trials of *other* workloads (other shapes, other devices) before the search.

        ``current`` is the workload being searched (its problem sizes and target facts are what
        a model relates the others to). ``guessed``: kernels among the others that nobody
        named, taken because their spaces share most of this one's parameter names (a weaker
        claim than a kernel's own other workloads, or kernels the user named as variants of
        this one). Strategies that can transfer knowledge use them and record what they took
        in :attr:`transfer_`; the default ignores them.
        """

    @abc.abstractmethod
    def _ask(self, n: int) -> list[Config] | None: ...

    def _tell(self, measurements: Sequence[Measurement]) -> None:  # noqa: B027 - optional hook
        pass

    def _fresh(self, config: Config) -> bool:
        return config not in self.history and config not in self.pending

    def _random_fresh(self, n: int, also: Collection[Config] = ()) -> list[Config] | None:
        """``n`` uniform valid configs never told nor pending nor in ``also`` (those proposed
        so far in this ask); ``None`` if none is left."""
        seen = self.history.keys() | self.pending | set(also)
        out = self.space.sample(n, self.rng, exclude=seen)
        self.proposals += len(out)
        return out or None

    @property
    def best(self) -> Measurement | None:
        ok = [m for m in self.history.values() if m.ok]
        return min(ok, key=lambda m: m.value) if ok else None


_REGISTRY: dict[str, str | type[SearchStrategy]] = {
    "random": "tunex.search._random:RandomSearch",
    "exhaustive": "tunex.search._random:ExhaustiveSearch",
    "grid": "tunex.search._random:ExhaustiveSearch",
    "optuna": "tunex.search._optuna:OptunaSearch",
    "model": "tunex.search._model:ModelSearch",
}
DEFAULT_STRATEGY = "model"


def register_strategy(name: str, cls: str | type[SearchStrategy]) -> None:
    """Make a strategy available by name (a class, or ``"module:Class"`` imported on use)."""
    _REGISTRY[name] = cls


def check_seed(seed: Any, who: str) -> None:
    """Refuse a seed NumPy cannot take (a negative number, a float, a string) when it is given,
    not as a traceback from deep inside the first search."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise StrategyError(f"{who}: seed={seed!r} is not a seed; give a whole number >= 0, or "
                            "None for a random one")


def available_strategies() -> list[str]:
    return sorted(_REGISTRY)


def _resolve(name: str) -> type[SearchStrategy]:
    entry = _REGISTRY.get(name)
    if entry is None:
        raise StrategyError(
            f"unknown search strategy {name!r}; choose one of {available_strategies()}"
        )
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        try:
            entry = getattr(importlib.import_module(module), attr)
        except ImportError as e:
            top = (e.name or "").partition(".")[0]
            if not top or top == "tunex":  # tunex itself is broken, not a missing extra
                raise StrategyError(
                    f"strategy {name!r} cannot be loaded ({e}): the tunex install is "
                    "incomplete or mixed; reinstall it (pip install --force-reinstall tunex)"
                ) from e
            raise StrategyError(
                f"strategy {name!r} needs the package {top!r}: pip install {top}"
            ) from e
    assert isinstance(entry, type)
    return entry


def get_strategy(spec: str, space: Space, *, seed: int | None = None,
                 **options: Any) -> SearchStrategy:
    """Create a strategy from a spec: ``"model"``, ``"random"``, ``"optuna:cmaes"``, ...

    The part after ``:`` is the strategy's variant (for ``optuna``: the sampler).
    """
    if not isinstance(spec, str):
        raise StrategyError(f"strategy {spec!r}: give a strategy's name (e.g. 'model', "
                            f"'random', 'optuna:tpe'); choose one of {available_strategies()}")
    name, _, variant = spec.partition(":")
    cls = _resolve(name)
    if variant:
        if "variant" not in inspect.signature(cls.__init__).parameters:
            raise StrategyError(f"strategy {spec!r}: {name!r} has no variants; write "
                                f"--strategy {name}")
        options = {"variant": variant, **options}
    try:
        return cls(space, seed=seed, **options)
    except TypeError as e:
        raise StrategyError(f"strategy {spec!r}: {e}") from None
