"""Where trials run: in-process, local worker processes, or a Ray cluster."""

from tunex.cluster._base import Activity, Executor, HangDeadline, run_trial
from tunex.cluster._devices import Device, load_devices, simulator_devices
from tunex.cluster._local import (
    BuildPool,
    CallerExecutor,
    InlineExecutor,
    LocalExecutor,
    LocalOptions,
    prestart,
    shared_build_pool,
    worker_context,
)
from tunex.cluster._service import Service, ServiceExecutor, service_address

__all__ = ["Activity", "BuildPool", "CallerExecutor", "Device", "Executor", "HangDeadline",
           "InlineExecutor",
           "LocalExecutor", "LocalOptions", "RayExecutor", "RayOptions", "Service",
           "ServiceExecutor", "load_devices", "prestart", "run_trial", "service_address",
           "shared_build_pool", "simulator_devices", "worker_context"]


def __getattr__(name: str):  # Ray is optional and heavy: import it only when asked for
    if name in ("RayExecutor", "RayOptions"):
        from tunex.cluster import _ray

        return getattr(_ray, name)
    raise AttributeError(name)
