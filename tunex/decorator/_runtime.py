"""Process-wide state of the decorator: loaded packs, listeners, device fingerprints, databases."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunex.db.packs import Pack, load_pack
from tunex.errors import ConfigError, DatabaseError
from tunex.identity import device_fingerprint, toolchain_facts
from tunex.trial import Config, Workload

if TYPE_CHECKING:
    from tunex.db import Database

__all__ = [
    "MODES",
    "Selection",
    "add_listener",
    "clear_packs",
    "fingerprint",
    "load_packs",
    "loaded_packs",
    "remove_listener",
]

log = logging.getLogger("tunex.autotune")

#: The runtime modes (see :func:`tunex.autotune`).
MODES = ("never", "on_miss", "pinned")
#: The sources a selection can come from.
SOURCES = ("cache", "db", "pack", "model", "default", "tuned")

_lock = threading.RLock()


@dataclass(frozen=True)
class Selection:
    """What a decorated kernel picked for a new workload, from where and why.

    Given to listeners (and logged on ``tunex.autotune``: at INFO, at DEBUG for ``"cache"``)
    once per new key: never on the hot path of a known one. Each one of a new workload (not
    ``"cache"``) is recorded in the tuning database too, as a :class:`tunex.db.Decision`,
    except in ``"pinned"`` mode and where the database is missing, read-only or unwritable.

    Attributes:
        kernel: the kernel's name.
        workload: the workload (kernel, source hash, bucketed key, device fingerprint).
        config: the config picked (tunex :class:`~tunex.trial.Config`: meta-parameters plus
            ``num_warps``/``num_stages``).
        source: ``"cache"`` (same bucket as an earlier call in this process), ``"db"`` (this
            workload's best in the database or, in ``"never"`` mode, its nearest tuned
            workload's: ``reason`` says which), ``"pack"``, ``"model"`` (cost-model
            prediction), ``"default"``, or ``"tuned"``.
        reason: one line, e.g. ``"tuned 40 trials in 12.3 s, 1.23x over default"`` or
            ``"pack mylib-1.2 exact device"``.
        mode: the mode in force (``"never"``, ``"on_miss"``, ``"pinned"``).
        key: the call's key values before bucketing.
        trials: trials measured by this selection (tuned only).
        seconds: time spent resolving (tuning included).
        speedup: best over the default config's runtime, when both were measured.
        time_ms: the picked config's median runtime when known (db, pack, tuned).
        transfer: other workloads of the kernel (shapes, devices) whose trials the tuning
            started from (tuned only; 0: a cold search).
    """

    kernel: str
    workload: Workload
    config: Config
    source: str
    reason: str
    mode: str
    key: Mapping[str, Any] = field(default_factory=dict)
    trials: int = 0
    seconds: float = 0.0
    speedup: float | None = None
    time_ms: float | None = None
    transfer: int = 0


Listener = Callable[[Selection], None]
_listeners: list[Listener] = []


def add_listener(fn: Listener) -> Listener:
    """Call ``fn(selection)`` each time any decorated kernel resolves a new key. Returns ``fn``,
    so it can be used as a decorator. Exceptions in a listener are logged, never raised."""
    with _lock:
        _listeners.append(fn)
    return fn


def remove_listener(fn: Listener) -> None:
    """Stop calling ``fn`` (no error if it was not added)."""
    with _lock:
        if fn in _listeners:
            _listeners.remove(fn)


def notify(selection: Selection, local: Listener | None) -> None:
    key = ",".join(f"{k}={v}" for k, v in selection.workload.problem.items())
    # a new shape in a known bucket is routine (dynamic shapes make many): not worth INFO
    level = logging.DEBUG if selection.source == "cache" else logging.INFO
    log.log(level, "%s[%s]: %s from %s (%s)", selection.kernel, key,
             " ".join(f"{k}={v}" for k, v in selection.config.items()), selection.source,
             selection.reason)
    for fn in ([local] if local else []) + list(_listeners):
        try:
            fn(selection)
        except Exception:  # a listener must never break a kernel launch
            log.exception("autotune listener %r failed", fn)


# -- packs -------------------------------------------------------------------------------------

_packs: list[Pack] = []  # loaded with load_packs(), in order
_env_packs: tuple[str, tuple[Pack, ...]] = ("", ())
_kernels: weakref.WeakSet[Any] = weakref.WeakSet()  # live decorated kernels


def register(kernel: Any) -> None:
    _kernels.add(kernel)


def _invalidate() -> None:
    for k in list(_kernels):
        k.clear_cache()


def load_packs(*paths: str | os.PathLike[str]) -> list[Pack]:
    """Load and verify config packs for runtime resolution; return them.

    Packs are consulted after the database, in the order loaded (packs given here before those
    of ``TUNEX_PACKS``). Every pack is verified whole before any is added: one bad pack raises
    :class:`~tunex.errors.PackError` and none of ``paths`` is loaded. Decorated kernels forget
    what they resolved so far, so the packs apply to the next call of every key. Loading a
    pack of the same name and version as one loaded before replaces it, in its place.
    """
    loaded = [load_pack(p) for p in paths]
    with _lock:
        for pack in loaded:  # a pack loaded again (the same name and version) replaces itself
            same = [i for i, q in enumerate(_packs)
                    if (q.name, q.version) == (pack.name, pack.version)]
            if same:
                _packs[same[0]] = pack
            else:
                _packs.append(pack)
        _invalidate()
    return loaded


def clear_packs() -> None:
    """Forget the packs loaded with :func:`load_packs` (``TUNEX_PACKS`` is read again)."""
    global _env_packs
    with _lock:
        _packs.clear()
        _env_packs = ("", ())
        _invalidate()


def loaded_packs() -> list[Pack]:
    """Packs in resolution order: :func:`load_packs` ones, then ``TUNEX_PACKS`` ones.

    ``TUNEX_PACKS`` (paths separated by ``os.pathsep``) is read when it changes. A bad pack
    there is skipped with one warning, and resolution goes on without it, as it does without an
    unusable database: an environment setting must not make every kernel launch of a program
    raise. :func:`load_packs`, an explicit call, raises instead.
    """
    global _env_packs
    env = os.environ.get("TUNEX_PACKS", "")
    with _lock:
        if env != _env_packs[0]:
            good = []
            for path in (p for p in env.split(os.pathsep) if p):
                try:
                    good.append(load_pack(path))
                except Exception as exc:  # whatever it is, a launch goes on without it
                    log.warning("TUNEX_PACKS: skipping %s: %s", path, exc)
            _env_packs = (env, tuple(good))
        return _packs + list(_env_packs[1])


# -- device ------------------------------------------------------------------------------------

#: The device fingerprint of a workload: device name, architecture, Triton version, read once
#: per device (:func:`tunex.identity.device_fingerprint`; the ``triton_gpu``
#: target builds its own with the same function).
fingerprint = device_fingerprint

#: Toolchain versions stored with each tuned trial, not in the key (pack provenance reads ``cuda``).
env_facts = toolchain_facts


# -- databases ---------------------------------------------------------------------------------

_dbs: dict[str, Database] = {}


def default_db_path() -> str:
    """The database every entry point uses by default (:func:`tunex.db.default_path`)."""
    from tunex.db import default_path

    return default_path()


def open_db(spec: Any, *, create: bool) -> Database | None:
    """The database of ``spec`` (a Database, a path or URL, or None for the default), opened
    once per process; None when it is a file that does not exist and ``create`` is false."""
    from tunex.db import Database

    if isinstance(spec, Database):
        return spec
    where = os.fspath(spec) if spec is not None else default_db_path()
    with _lock:
        db = _dbs.get(where)
        if db is not None:
            return db
        if "://" not in where and not create and not Path(where).expanduser().exists():
            return None
        db = Database(where, create=True)
        _dbs[where] = db
        return db


_bad_env_modes: set[str] = set()  # TUNEX_MODE values warned about once


def resolve_mode(mode: str) -> str:
    """``TUNEX_MODE`` when set (it overrides the decorator's mode; case and spaces aside),
    else ``mode``. A ``TUNEX_MODE`` that names no mode is warned about once and ``mode``
    kept: an environment setting never makes a launch raise."""
    env = os.environ.get("TUNEX_MODE", "")
    wanted = env.strip().lower()
    if wanted in MODES:
        return wanted
    if env.strip() and env not in _bad_env_modes:
        _bad_env_modes.add(env)
        log.warning("TUNEX_MODE=%r is not a mode (use one of %s): the decorator's own mode "
                    "%r stands", env, ", ".join(MODES), mode)
    if mode not in MODES:
        raise ConfigError(f"unknown autotune mode {mode!r}: use one of {', '.join(MODES)}")
    return mode


def db_error(exc: DatabaseError) -> None:
    log.warning("tuning database unusable, resolving without it: %s", exc)


_unwritable: set[str] = set()  # databases a decision could not be written to: not tried again


def record(selection: Selection, spec: Any) -> None:
    """Keep ``selection`` in the tuning database of ``spec`` (:meth:`Database.record_decision`)
    where there is one this process may write to.

    Not for a new shape of a known bucket (``"cache"``), nor in ``"pinned"`` mode (whose ranks
    only read the database, so none waits on another's write lock), nor for a database that
    is missing (``never`` mode does not create one) or read-only. A database that cannot be
    written is warned about once and not tried again in this process: a kernel launch never
    fails, nor waits a busy timeout per key, for a record of why it picked its config.
    """
    if selection.source == "cache" or selection.mode == "pinned":
        return
    try:
        db = open_db(spec, create=False)
    except DatabaseError as exc:  # resolution has just said so (or raised, on a miss)
        log.debug("not recording the decision: %s", exc)
        return
    if db is None or db.readonly or db.url in _unwritable:
        return
    try:
        db.record_decision(selection.workload, selection.config, selection.source,
                           detail=selection.reason, mode=selection.mode,
                           key=dict(selection.key), time_ms=selection.time_ms,
                           seconds=selection.seconds)
    except Exception as exc:  # whatever it is, the launch goes on without the record
        with _lock:
            _unwritable.add(db.url)
        log.warning("%s: cannot record the decision in %r (%s); the kernel runs on, and this "
                    "process records no more decisions there (the tunex.autotune log still "
                    "has them): make the database writable to keep them", selection.kernel, db,
                    exc)
