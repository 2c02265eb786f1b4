"""Search strategies (ask/tell) and their registry.

Strategies by name: ``model`` (default: cost-model guided), ``random``, ``exhaustive``/``grid``,
``optuna`` with a sampler variant (``optuna:tpe``, ``optuna:cmaes``, ``optuna:gp``,
``optuna:qmc``, ``optuna:random``). Optional dependencies are imported when a strategy is used.
"""

from tunex.search._base import (
    DEFAULT_STRATEGY,
    SearchStrategy,
    available_strategies,
    get_strategy,
    register_strategy,
)

__all__ = [
    "DEFAULT_STRATEGY",
    "SearchStrategy",
    "available_strategies",
    "get_strategy",
    "register_strategy",
]
