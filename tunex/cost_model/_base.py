"""The CostModel contract: a scikit-learn style estimator that ranks configs by speed."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CostModel"]


class CostModel(abc.ABC):
    """Learns which configs are fast from measured trials.

    ``fit(X, y, groups)``: ``X`` is a feature matrix (see :class:`FeatureExtractor`), ``y`` the
    measured runtimes (lower is better; ``inf`` or ``nan`` for a failed trial, which the model
    learns as worse than any success), ``groups`` one label per row naming its workload (runtimes
    are only compared within a workload, so trials of other shapes or devices can be mixed in).
    ``predict(X)`` returns scores where *higher means faster*; only their order matters.

    Follows scikit-learn's conventions: ``__init__`` only stores parameters, ``fit`` returns
    ``self``, learned state ends in ``_``.
    """

    @abc.abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> CostModel:
        ...

    @abc.abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray: ...

    @abc.abstractmethod
    def save(self, path: str | Path) -> None: ...

    @classmethod
    @abc.abstractmethod
    def load(cls, path: str | Path) -> CostModel: ...

    def get_params(self) -> dict[str, Any]:
        import inspect

        names = inspect.signature(type(self).__init__).parameters
        return {n: getattr(self, n) for n in names if n != "self"}
