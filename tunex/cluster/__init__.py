"""Where trials run: in-process, local worker processes, or a Ray cluster."""

from tunex.cluster._base import Executor, run_trial
from tunex.cluster._local import InlineExecutor, LocalExecutor, LocalOptions

__all__ = ["Executor", "InlineExecutor", "LocalExecutor", "LocalOptions", "RayExecutor",
           "run_trial"]


def __getattr__(name: str):  # Ray is optional and heavy: import it only when asked for
    if name == "RayExecutor":
        from tunex.cluster._ray import RayExecutor

        return RayExecutor
    raise AttributeError(name)
