"""A resident worker service: build and measuring processes that outlive one command.

Every ``tunex search`` with local workers starts its own: a fork server that imports the
target's toolchain, the build processes, a measuring process that opens the device. On a GPU
that costs seconds before the first result (importing torch, creating the CUDA context),
whatever the search. ``tunex serve --target SPEC`` starts that executor once and keeps it
warm; ``tunex search ... --service`` sends its trials there, so a search starts measuring
as soon as its first build is done::

    tunex serve --target triton_gpu --workers 15 &
    tunex search matmul --service --shape M=4096,N=4096,K=4096 --budget 200trials

The service runs one target (the one it was started with; a search names it by the
service's socket, ``service-<target>.sock`` under ``$TUNEX_SERVICE_DIR``, default
``~/.cache/tunex``) and serves any number of searches at once, each through its own
connection: a Unix socket in a directory only its user may enter, with a key only that user
can read (messages are pickles, so nobody else may connect). A search's trials behave as with
a local executor: failures come back as recorded statuses; if the service goes away, the
trials it was running are ``worker_lost`` and the search stops with an error that says how
to restart it (every finished trial is in the database already).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import queue
import secrets
import signal
import stat
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future, InvalidStateError
from multiprocessing import AuthenticationError
from multiprocessing.connection import (
    Client,
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
)
from pathlib import Path
from typing import Any

from tunex.cluster._base import Activity, BuildEvents, Executor
from tunex.cluster._local import LocalExecutor, LocalOptions
from tunex.errors import ConfigError, TargetError, TunexError
from tunex.trial import Artifact, Config, Measurement, Status, Workload

__all__ = ["Service", "ServiceBuildPool", "ServiceExecutor", "service_address"]

log = logging.getLogger("tunex.service")


def _folder(create: bool = True) -> Path:
    folder = Path(os.environ.get("TUNEX_SERVICE_DIR") or "~/.cache/tunex").expanduser()
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot make the tunex service folder {folder} "
                              f"({e.strerror or e}): set TUNEX_SERVICE_DIR to a folder this "
                              "user may write") from None
    return folder


def service_address(target_name: str) -> str:
    """The default socket of the service of a target (by the target's name: ``triton_gpu``,
    ``cpu``, ``riscv-sim``...). Naming it creates nothing (a read-only home is no error)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in target_name)
    return str(_folder(create=False) / f"service-{safe}.sock")


#: seconds a search waits for a service to answer its connection (a stopped or hung service
#: would otherwise hold the search forever)
CONNECT_TIMEOUT = 10.0


def _serve_command(spec: str, address: str) -> str:
    """The command that starts again the service of ``spec`` at ``address``."""
    name = spec.partition("?")[0].partition(":")[0]
    try:
        default = address == service_address(name)
    except TunexError:
        default = False
    return f"tunex serve --target {spec}" + ("" if default else f" --socket {address}")


def _connect(address: str, hello: bool = True) -> tuple[Connection, Any]:
    """A connection to the service at ``address`` that proved the key both ways, and (with
    ``hello``) the service's first message; ``TimeoutError`` after :data:`CONNECT_TIMEOUT`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            conn = Client(address, family="AF_UNIX", authkey=_key())
            box["hello"] = conn.recv() if hello else None
            box["conn"] = conn
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT)
    if t.is_alive():
        raise TimeoutError(f"no answer in {CONNECT_TIMEOUT:g} s")
    if "error" in box:
        raise box["error"]
    return box["conn"], box["hello"]


@functools.cache
def code_version() -> str:
    """tunex's version and a digest of its sources, as this process loaded them: what a service
    and its searches must share (their messages are pickles of tunex's classes, and the
    service builds and measures what the search records as its own)."""
    import hashlib

    from tunex import __version__

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        with contextlib.suppress(OSError):
            h.update(path.read_bytes())
    return f"{__version__} ({h.hexdigest()[:12]})"


def canonical_spec(spec: str) -> str:
    """``spec`` as a service and its clients compare it: a replay file's path made absolute,
    links resolved (``replay:./x.json`` in one folder is ``replay:/abs/x.json``)."""
    name, sep, rest = spec.partition(":")
    if name != "replay" or not sep:
        return spec
    path, q, query = rest.partition("?")
    return f"replay:{os.path.realpath(os.path.expanduser(path))}{q}{query}"


def _key() -> bytes:
    """The key every connection proves it holds: a file readable by this user only."""
    path = _folder() / "service.key"
    try:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            key = secrets.token_bytes(32)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process wrote it meanwhile
                return path.read_bytes()
            with os.fdopen(fd, "wb") as f:
                f.write(key)
            return key
    except OSError as e:
        raise ConfigError(f"cannot read or write the tunex service key {path} "
                          f"({e.strerror or e}): set TUNEX_SERVICE_DIR to a folder this user "
                          "may write") from None


class Service:
    """The server half: a :class:`~tunex.cluster.LocalExecutor` of ``target`` behind a socket.

    Args:
        spec: the target string (``triton_gpu``, ``cpu``, ``riscv-sim:x280``...).
        options: the executor's workers and timeouts.
        address: the socket (default :func:`service_address` of the target's name).
    """

    def __init__(self, spec: str, options: LocalOptions | None = None,
                 address: str | None = None) -> None:
        from tunex.targets import make_target

        self.spec = canonical_spec(spec)
        self.code = code_version()  # as it starts: files edited later do not run here
        self.target = make_target(spec)
        self.address = address or service_address(self.target.name)
        if os.path.lexists(self.address) and not stat.S_ISSOCK(os.lstat(self.address).st_mode):
            raise ConfigError(f"{self.address} exists and is not a socket: tunex would replace "
                              "it; give another --socket (a path that does not exist)")
        if os.path.exists(self.address):
            try:  # a live service answers; a dead one's socket is left over
                _connect(self.address, hello=False)[0].close()
            except TimeoutError:
                raise ConfigError(f"a process holds {self.address} but does not answer (a "
                                  "stopped or hung tunex service?): end it, or give another "
                                  "--socket") from None
            except OSError:
                os.unlink(self.address)
            except AuthenticationError:  # live, with the key of another TUNEX_SERVICE_DIR
                raise ConfigError(f"a tunex service of another key (another TUNEX_SERVICE_DIR "
                                  f"or user) already listens at {self.address}: stop it "
                                  "first, or give another --socket") from None
            else:
                raise ConfigError(f"a tunex service already listens at {self.address}: stop it "
                                  "first, or give another --socket")
        if len(os.fsencode(self.address)) > 100:  # sockaddr_un holds 108 bytes
            raise ConfigError(f"the socket path {self.address} is too long for a Unix socket "
                              "(at most 100 bytes): give a shorter --socket or TUNEX_SERVICE_DIR")
        try:
            os.makedirs(os.path.dirname(self.address) or ".", exist_ok=True)
            # no authkey here: each client proves the key in its own thread, so one that
            # connects and says nothing holds up no other search
            self._authkey = _key()
            self.listener = Listener(self.address, family="AF_UNIX")
            os.chmod(self.address, 0o600)
        except OSError as e:
            raise ConfigError(f"cannot listen at {self.address} ({e.strerror or e}): give "
                              "another --socket or TUNEX_SERVICE_DIR") from None
        try:
            self.executor = LocalExecutor(self.target, options)
        except BaseException:
            self.listener.close()
            with contextlib.suppress(OSError):
                os.unlink(self.address)
            raise
        self._closed = threading.Event()
        self.clients = 0

    def serve(self, ready: Callable[[], None] | None = None) -> None:
        """Accept searches until :meth:`close` (or SIGTERM / SIGINT in the main thread)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.close())
        if ready is not None:
            ready()
        while not self._closed.is_set():
            try:
                conn = self.listener.accept()
            except (OSError, EOFError):  # closed, or a client gone at once: the service goes on
                if self._closed.is_set():
                    break
                continue
            self.clients += 1
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()
        self.executor.close()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self.listener.close()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.address)

    def _client(self, conn: Connection) -> None:
        try:
            deliver_challenge(conn, self._authkey)
            answer_challenge(conn, self._authkey)
        except (OSError, EOFError, AuthenticationError):  # another key, or gone: turned away
            conn.close()
            return
        lock = threading.Lock()
        running: dict[int, Future[Any]] = {}  # trials and builds of this client, by its ids

        def send(msg: tuple[Any, ...]) -> None:
            with lock, contextlib.suppress(OSError, ValueError):  # or the search went away
                conn.send(msg)

        def done(kind: str, i: int, fut: Future[Any]) -> None:
            running.pop(i, None)
            if fut.cancelled():
                return
            exc = fut.exception()
            send((kind, i, None if exc is not None else fut.result(), exc))

        send(("hello", {"spec": self.spec, "code": self.code, "target": self.target,
                        "slots": self.executor.slots, "pid": os.getpid(),
                        "build_workers": len(self.executor.pool.workers)}))
        while True:
            try:
                msg = conn.recv()
                kind = msg[0]
                if kind == "submit":
                    _, i, workload, config = msg
                    fut = self.executor.submit(workload, config,
                                               on_built=functools.partial(send, ("built", i)))
                    running[i] = fut
                    fut.add_done_callback(functools.partial(done, "result", i))
                elif kind == "build":  # a build only, with the client's builder (the decorator's)
                    _, i, key, builder, workload, config = msg
                    build = self.executor.pool.submit(key, builder, workload, config)
                    running[i] = build
                    build.add_done_callback(functools.partial(done, "artifact", i))
                elif kind == "cancel":
                    gone = running.pop(msg[1], None)
                    if gone is not None:
                        gone.cancel()
                elif kind == "activity":
                    send(("activity", self.executor.activity()))
                elif kind == "bye":
                    break
            except (EOFError, OSError):
                break
            except Exception as e:  # a message it cannot read: say why, not wait forever
                log.warning("turned a search away: cannot read its message (%s: %s)",
                            type(e).__name__, e)
                send(("refused", f"the tunex service at {self.address} cannot read what this "
                      f"search sent ({type(e).__name__}: {e}): it runs other tunex code; "
                      f"restart it ({_serve_command(self.spec, self.address)}) with this tunex"))
                break
        for left in list(running.values()):
            left.cancel()
        conn.close()


class ServiceExecutor(Executor):
    """The search's half: an :class:`Executor` whose trials run in a :class:`Service`.

    Its :attr:`target` is the service's (sent over at connection, without its device state),
    so a search builds its space and workload as the service's workers will.

    Args:
        address: the service's socket.
        spec: the target the search means (``None``: whatever the service runs); a service
            of another target is a :class:`~tunex.errors.ConfigError`.

    Raises:
        TargetError: no service listens at ``address``.
    """

    def __init__(self, address: str, spec: str | None = None) -> None:
        self.address = address
        try:
            self._conn, (_kind, hello) = _connect(address)
        except TimeoutError:
            raise TargetError(f"the tunex service at {address} does not answer in "
                              f"{CONNECT_TIMEOUT:g} s (stopped or hung?): restart it (`tunex "
                              "serve --target TARGET`), or search without --service") from None
        except (OSError, EOFError) as e:
            raise TargetError(f"no tunex service at {address} ({e.__class__.__name__}): start "
                              "one with `tunex serve --target TARGET`") from None
        except AuthenticationError:
            raise ConfigError(f"the tunex service at {address} holds another key than "
                              f"{_folder() / 'service.key'}: it was started with another "
                              "TUNEX_SERVICE_DIR (or by another user); use the same "
                              "TUNEX_SERVICE_DIR as `tunex serve`") from None
        except Exception as e:  # a hello this tunex cannot unpickle
            raise ConfigError(f"cannot read the hello of the tunex service at {address} "
                              f"({type(e).__name__}: {e}): it runs other tunex code; stop it "
                              "and start it again with this tunex (tunex serve --target "
                              "TARGET)") from None
        if hello.get("code") != code_version():
            self._conn.close()
            raise ConfigError(f"the tunex service at {address} runs other tunex code "
                              f"({hello.get('code', 'an older tunex')}) than this search "
                              f"({code_version()}): its workers would build and measure with "
                              "their code what this search records as its own; stop it and "
                              "start it again with this tunex ("
                              f"{_serve_command(str(hello.get('spec', 'TARGET')), address)})")
        if spec is not None and canonical_spec(spec) != canonical_spec(hello["spec"]):
            self._conn.close()
            raise ConfigError(f"the service at {address} runs --target {hello['spec']}, not "
                              f"{spec}: start one for {spec} (tunex serve --target {spec} "
                              "--socket PATH) or drop --target")
        self.spec: str = hello["spec"]
        self.target = hello["target"]
        self.slots = int(hello["slots"])
        self.build_workers = int(hello.get("build_workers", 1))
        self._lock = threading.Lock()
        #: by id: the future, and what it becomes if the service goes away meanwhile
        self._futures: dict[int, tuple[Future[Any], Callable[[str], Any]]] = {}
        self._ids = itertools.count()
        self._activity: queue.Queue[Activity] = queue.Queue()
        self._events = BuildEvents()  # the service says when a trial's build is done
        self._gone: str | None = None
        self._closing = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _send(self, msg: tuple[Any, ...]) -> None:
        with self._lock:
            self._conn.send(msg)

    def submit(self, workload: Workload, config: Config) -> Future[Measurement]:
        fut: Future[Measurement] = Future()
        if self._gone is not None:
            fut.set_exception(TargetError(self._gone))
            return fut
        self._events.track(fut)
        return self._start(fut, ("submit", workload, config), lambda why: Measurement.failed(
            config, Status.WORKER_LOST, why, worker="service"))

    def submit_build(self, key: str, builder: Any, workload: Workload, config: Config
                     ) -> Future[Artifact]:
        """Build ``config`` with ``builder`` in the service's build processes (kept there
        under ``key``), as :meth:`BuildPool.submit <tunex.cluster.BuildPool.submit>` does."""
        fut: Future[Artifact] = Future()
        if self._gone is not None:
            fut.set_result(Artifact(workload, config, Status.WORKER_LOST, error=self._gone))
            return fut
        return self._start(fut, ("build", key, builder, workload, config),
                           lambda why: Artifact(workload, config, Status.WORKER_LOST, error=why))

    def _start(self, fut: Future[Any], msg: tuple[Any, ...], lost: Callable[[str], Any]
               ) -> Future[Any]:
        i = next(self._ids)
        self._futures[i] = (fut, lost)
        try:
            self._send((msg[0], i, *msg[1:]))
        except (OSError, ValueError):
            self._futures.pop(i, None)
            why = self._lost()
            if msg[0] == "submit":
                fut.set_exception(TargetError(why))
            else:
                fut.set_result(lost(why))
            return fut
        fut.add_done_callback(lambda f: self._cancel(i) if f.cancelled() else None)
        return fut

    def _cancel(self, i: int) -> None:
        if self._futures.pop(i, None) is not None and self._gone is None:
            with contextlib.suppress(OSError, ValueError):
                self._send(("cancel", i))

    def _lost(self) -> str:
        self._gone = (f"the tunex service at {self.address} went away; its finished trials are "
                      "recorded: restart it ("
                      f"{_serve_command(self.spec, self.address)}) and run the search again "
                      "to resume")
        return self._gone

    def _read(self) -> None:
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                break
            except Exception as e:  # an answer this tunex cannot read: never wait for it
                msg = ("refused", f"cannot read what the tunex service at {self.address} "
                       f"answered ({type(e).__name__}: {e}): it runs other tunex code; "
                       f"restart it ({_serve_command(self.spec, self.address)}) with this tunex")
            if msg[0] == "refused":  # nothing can run there: trials stop the search with the
                self._gone = msg[1]   # reason (unrecorded), lent builds come back lost
                for fut, lost in list(self._futures.values()):
                    instead = lost(msg[1])
                    with contextlib.suppress(InvalidStateError):
                        if isinstance(instead, Measurement):
                            fut.set_exception(TargetError(msg[1]))
                        else:
                            fut.set_result(instead)
                self._futures.clear()
                return
            if msg[0] in ("result", "artifact"):
                _, i, m, exc = msg
                entry = self._futures.pop(i, None)
                if entry is None:
                    continue
                with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
                    if exc is not None:
                        entry[0].set_exception(exc)
                    else:
                        entry[0].set_result(m)
            elif msg[0] == "built":
                entry = self._futures.get(msg[1])
                if entry is not None:
                    self._events.built(entry[0])
            elif msg[0] == "activity":
                self._activity.put(msg[1])
        if self._gone is None and not self._closing:
            why = self._lost()
            for fut, lost in list(self._futures.values()):  # running when it went away
                with contextlib.suppress(InvalidStateError):
                    fut.set_result(lost(why))
            self._futures.clear()

    @property
    def gone(self) -> bool:
        """The service went away: what runs through it now comes back ``worker_lost``."""
        return self._gone is not None

    def built(self, futures: Collection[Future[Measurement]]) -> int:
        return self._events.count(futures)

    def wait(self, futures: Collection[Future[Measurement]], timeout: float | None = None
             ) -> set[Future[Measurement]]:
        return self._events.wait(futures, timeout)

    def activity(self) -> Activity | None:
        if self._gone is not None:
            return None
        try:
            self._send(("activity",))
            return self._activity.get(timeout=1.0)
        except (OSError, ValueError, queue.Empty):
            return None

    def close(self) -> None:
        self._closing = True
        for fut, _ in list(self._futures.values()):
            fut.cancel()
        with contextlib.suppress(OSError, ValueError):
            self._send(("bye",))
        self._conn.close()


class ServiceBuildPool:
    """A running service's build processes, lent to this process's builds: what
    :func:`~tunex.cluster.shared_build_pool` hands the decorator when a ``tunex serve
    --target triton_gpu`` runs, so a script's first miss starts no processes and its compiles
    go to workers that are warm already. Its interface is :class:`~tunex.cluster.BuildPool`'s
    (``submit``, ``counts``, ``workers``, ``close``); a build in flight when the service goes
    away comes back ``worker_lost``, and :attr:`gone` tells the caller to build elsewhere.
    """

    def __init__(self, link: ServiceExecutor) -> None:
        self._link = link
        self.workers = [f"service-build{i}" for i in range(link.build_workers)]
        self._lock = threading.Lock()
        self._running = 0

    @classmethod
    def find(cls, target_name: str) -> ServiceBuildPool | None:
        """The build pool of the service of ``target_name`` if one answers at its default
        socket (``None``: no service; one that does not answer is logged and skipped)."""
        address = service_address(target_name)
        if not os.path.exists(address):
            return None
        try:
            link = ServiceExecutor(address)
        except (TargetError, ConfigError) as e:
            log.warning("not building in the tunex service: %s", e)
            return None
        log.info("building in the tunex service at %s (%d workers)", address,
                 link.build_workers)
        return cls(link)

    @property
    def gone(self) -> bool:
        return self._link.gone

    def submit(self, key: str, builder: Any, workload: Workload, config: Config
               ) -> Future[Artifact]:
        with self._lock:
            self._running += 1
        fut = self._link.submit_build(key, builder, workload, config)
        fut.add_done_callback(self._ended)
        return fut

    def _ended(self, _fut: Future[Artifact]) -> None:
        with self._lock:
            self._running -= 1

    def counts(self) -> tuple[int, int]:
        """(0, builds sent and not back): the service's queue is shared with its other users."""
        with self._lock:
            return 0, self._running

    def close(self) -> None:
        self._link.close()
