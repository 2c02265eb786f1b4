"""Devices of a Ray cluster: what each measuring actor owns, declared as Ray custom resources.

A device is a thing that measures one artifact at a time: a GPU, a RISC-V board reached over
SSH, or one slot of a simulator. Ray decides *where* a measuring actor runs from the resources
it asks for, so each device names the custom resource that only its nodes declare::

    # the node the board is attached to (over SSH, from an x86 host: Ray has no riscv64 wheel)
    ray start --address=HEAD:6379 --resources='{"board:bpi1": 1}'
    # a node that simulates, four at once
    ray start --address=HEAD:6379 --resources='{"riscv-sim": 4}'

and the devices file says which actors to create (``tunex search ... --ray --devices FILE``)::

    [[board]]                  # one actor needing {"board:bpi1": 1}
    name = "bpi1"
    host = "user@10.0.0.5"     # everything else goes to the target's for_device(options)
    port = 22

    [[simulator]]              # four actors, each needing {"riscv-sim": 1}
    resource = "riscv-sim"     # the default
    slots = 4

    [[device]]                 # anything else, spelled out
    name = "a100-0"
    resources = {"a100" = 1}
    gpus = 1
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunex.errors import ConfigError

__all__ = ["Device", "load_devices", "simulator_devices"]

_EXAMPLE = """a valid devices file looks like:

    [[board]]
    name = "bpi1"              # the actor needs resource "board:bpi1"
    host = "user@10.0.0.5"     # target options (riscv-ssh: host, port, identity, ...)

    [[simulator]]
    resource = "riscv-sim"     # default
    slots = 4
"""


@dataclass(frozen=True)
class Device:
    """One measuring actor: its name, the Ray resources it needs, and its target options.

    Attributes:
        name: unique label; measurements record it (``Measurement.worker`` is
            ``"<node-ip>/<name>"``, ``facts["device"]`` is ``name``).
        resources: Ray custom resources the actor reserves (``{"board:bpi1": 1}``), so that it
            is placed only on a node that declares them, and never two actors on one device.
        options: handed to the target's ``for_device(options)`` on the actor (a board's ``host``
            reaches the ``riscv-ssh`` target); ignored by targets without that method.
        gpus: GPUs the actor reserves (GPU devices; 0 for boards and simulators).
    """

    name: str
    resources: Mapping[str, float]
    options: Mapping[str, Any] = field(default_factory=dict)
    gpus: float = 0.0

    def __hash__(self) -> int:
        return hash(self.name)


#: Simulator slots one search may ask for: each is a Ray actor (and a thread here).
MAX_SLOTS = 4096


def simulator_devices(slots: int, resource: str = "riscv-sim",
                      name: str | None = None) -> tuple[Device, ...]:
    """``slots`` simulator actors, each needing ``{resource: 1}`` (``--sim-slots N``)."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise ConfigError(f"simulator slots must be a positive integer, not {slots!r}")
    if slots > MAX_SLOTS:
        raise ConfigError(f"simulator slots {slots} are too many: give at most {MAX_SLOTS} (one "
                          "measuring actor each; a node's simulators are its riscv-sim "
                          "resource)")
    base = name or resource
    return tuple(Device(f"{base}{i}", {resource: 1.0}) for i in range(slots))


_RAY_OWN = {"CPU", "GPU", "memory", "object_store_memory"}  # Ray's own resources


def _str(entry: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key!r} must be a non-empty string, not {value!r}; "
                          + _EXAMPLE)
    if key == "resource" and value in _RAY_OWN:
        raise ConfigError(f"{where}: 'resource' names a custom resource of the node the "
                          f"device is on (e.g. board:bpi1), not Ray's own {value!r}; " + _EXAMPLE)
    return value


def _resources(value: Any, where: str) -> dict[str, float]:
    if not isinstance(value, Mapping) or not value or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            and 0 < v < math.inf for k, v in value.items()):
        raise ConfigError(f"{where}: 'resources' must be a table of positive amounts, e.g. "
                          f'resources = {{"a100" = 1}}, not {value!r}')
    if set(value) & _RAY_OWN:
        raise ConfigError(f"{where}: 'resources' names custom resources only; reserve GPUs "
                          "with gpus = N")
    return {k: float(v) for k, v in value.items()}


def _parse(doc: Mapping[str, Any], source: str) -> tuple[Device, ...]:
    unknown = sorted(set(doc) - {"board", "simulator", "device"})
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {unknown}; use [[board]], "
                          f"[[simulator]] or [[device]]. " + _EXAMPLE)
    devices: list[Device] = []
    for kind in ("board", "simulator", "device"):
        entries = doc.get(kind, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ConfigError(f"{source}: write each {kind} as a [[{kind}]] table. " + _EXAMPLE)
        for n, e in enumerate(entries):
            where = f"{source}: [[{kind}]] #{n + 1}"
            if kind == "board":
                name = _str(e, "name", where)
                resource = _str(e, "resource", where, f"board:{name}")
                opts = {k: v for k, v in e.items() if k not in ("name", "resource")}
                devices.append(Device(name, {resource: 1.0}, opts))
            elif kind == "simulator":
                extra = sorted(set(e) - {"resource", "slots", "name"})
                if extra:
                    raise ConfigError(f"{where}: unknown key(s) {extra}; a simulator takes "
                                      "resource, slots and name")
                resource = _str(e, "resource", where, "riscv-sim")
                slots = e.get("slots", 1)
                try:
                    devices += simulator_devices(slots, resource,
                                                 _str(e, "name", where, resource))
                except ConfigError as err:
                    raise ConfigError(f"{where}: {err}") from None
            else:
                name = _str(e, "name", where)
                gpus = e.get("gpus", 0)
                if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) \
                        or not 0 <= gpus < math.inf:
                    raise ConfigError(f"{where}: 'gpus' must be a number >= 0, not {gpus!r}; "
                                      + _EXAMPLE)
                options = e.get("options", {})
                if not isinstance(options, Mapping):
                    raise ConfigError(f"{where}: 'options' must be a table")
                resources = (_resources(e["resources"], where) if "resources" in e
                             else {f"device:{name}": 1.0})
                devices.append(Device(name, resources, dict(options), float(gpus)))
    if not devices:
        raise ConfigError(f"{source} declares no device. " + _EXAMPLE)
    seen: set[str] = set()
    for d in devices:
        if d.name in seen:
            raise ConfigError(f"{source}: two devices are named {d.name!r}; give each a "
                              "unique name")
        seen.add(d.name)
    _one_actor_per_board(devices[:len(doc.get("board", []))], source)
    return tuple(devices)


def _one_actor_per_board(boards: list[Device], source: str) -> None:
    """Two [[board]] entries that reach one board (same host, port and workdir) would measure
    on it at once, and each measurement there ends the kernel another left running: healthy
    configs recorded as failures."""
    reach: dict[tuple[str, str, str], str] = {}
    for d in boards:
        host = d.options.get("host")
        if not isinstance(host, str) or not host:
            continue  # the target's own board: the target says where
        where = (host.rpartition("@")[2].lower(), str(d.options.get("port", "")),
                 str(d.options.get("workdir", "")))
        if where in reach:
            raise ConfigError(
                f"{source}: boards {reach[where]!r} and {d.name!r} are one board ({host}"
                + (f", port {where[1]}" if where[1] else "") + "): two measuring actors "
                "there would measure at once, and each measurement ends the kernel the other "
                "runs; list each board once")
        reach[where] = d.name


def load_devices(path: str | Path) -> tuple[Device, ...]:
    """The devices a TOML devices file declares (module docstring for its format).

    Raises:
        ConfigError: the file is missing, is not TOML, or does not describe devices; the
            message shows what a valid file looks like.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read devices file {p}: {e.strerror or e}; pass a TOML "
                          "file with --devices. " + _EXAMPLE) from None
    except UnicodeDecodeError as e:  # TOML is UTF-8
        raise ConfigError(f"devices file {p} is not UTF-8 text ({e.reason} at byte {e.start})"
                          "; pass a TOML file with --devices. " + _EXAMPLE) from None
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError("reading a devices file needs Python 3.11+ or the tomli package "
                              "(pip install tomli)") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"devices file {p} is not valid TOML ({e}). " + _EXAMPLE) from None
    try:
        return _parse(doc, str(p))
    except ConfigError as e:
        if "valid devices file" in str(e):
            raise
        raise ConfigError(f"{e}. " + _EXAMPLE) from None
