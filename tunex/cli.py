"""The ``tunex`` command."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from tunex.errors import TunexError

__all__ = ["main"]


def escape(text: str) -> str:
    """``text`` printed by rich as written: names and values come from databases, packs and
    recorded spaces, and a ``[/]`` in one is not markup (it raised MarkupError)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _shape(given: str | Sequence[str] | None) -> dict[str, Any]:
    """The sizes of ``--shape`` (given once as ``M=4096,N=4096`` or once per size)."""
    text = given if isinstance(given, str) or given is None else ",".join(given)
    out: dict[str, Any] = {}
    for part in filter(None, (text or "").split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise TunexError(f"cannot read shape {text!r}: use NAME=VALUE,... e.g. M=4096,N=4096")
        if key.strip() in out:
            raise TunexError(f"shape {text!r} gives {key.strip()} twice: give each size once")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            out[key.strip()] = value.strip()
    return out


def _not_the_database(output: str | None, db: Any) -> None:
    """Refuse an output file that is the database being read (or one of its SQLite side
    files): writing an export, a pack or a report there would destroy every trial in it."""
    if output in (None, "-") or getattr(db, "path", None) is None:
        return
    mine = os.path.realpath(db.path)
    files = (mine, *(mine + s for s in ("-wal", "-shm", "-journal")))

    def same(path: str) -> bool:  # a hard link to it is the database under another name
        try:
            return os.path.samefile(output, path)
        except OSError:  # one of them does not exist
            return False

    if os.path.realpath(output) in files or any(same(f) for f in files):
        raise TunexError(f"-o {output} is the tuning database being read: writing there would "
                         "destroy every trial in it; pass another output file")


def _load_kernel(name: str | None) -> Any:
    if not name:
        return None
    try:
        from tunex.kernel import get_kernel
    except ImportError as e:
        raise TunexError(f"no kernel library available to find {name!r} ({e})") from None
    try:
        return get_kernel(name)
    except ImportError as e:  # its module imports a package that is not installed
        raise TunexError(f"kernel {name!r} cannot be imported: {type(e).__name__}: {e}; "
                         "install what it needs") from None


def _run_interruptible(tuner: Any) -> Any:
    """``tuner.run()`` with Ctrl-C also telling the tuner to stop: Python drops a
    KeyboardInterrupt raised inside an import's cleanup, and the search must end anyway.
    SIGTERM (``kill``, a batch system's time limit) ends it the same way, so its workers (a
    hung kernel among them) are stopped and its claims released, not left to their lease."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return tuner.run()

    def interrupt(signum: int, frame: Any) -> None:
        tuner.stop()
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return tuner.run()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def cmd_search(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tunex.cluster import InlineExecutor, LocalExecutor
    from tunex.db import Database
    from tunex.targets import make_target
    from tunex.tuner import Budget, Tuner

    console = Console(stderr=True)
    budget = Budget.parse(args.budget)
    if args.optuna_storage is not None and not args.optuna_storage.strip():
        raise TunexError("--optuna-storage needs a storage URL (e.g. sqlite:///optuna.db); "
                         "leave the flag out to mirror nothing")
    _check_numbers(args, workers_least=0, more=(("--batch", args.batch, 1),
                                                ("--seed", args.seed, 0),
                                                ("--patience", args.patience, 1),
                                                ("--sim-slots", args.sim_slots, 1)))
    from tunex.targets import target_class

    on_ray = args.ray is not None or bool(args.sim_slots) or bool(args.devices)
    service = None
    if args.service is not None:
        from tunex.cluster._service import ServiceExecutor, service_address

        if on_ray or any(v is not None for v in (args.workers, args.measure_workers,
                                                   args.build_timeout, args.measure_timeout)):
            raise TunexError("--service runs the trials in a tunex service, whose workers and "
                             "timeouts are its own (tunex serve --workers N --build-timeout S "
                             "...): drop --ray, --workers, --measure-workers and the timeouts")
        if not args.service and not args.target:
            raise TunexError("--service needs --target (to find that target's service) or "
                             "the service's socket: --service PATH")
        address = args.service or service_address(target_class(args.target).name)
        service = ServiceExecutor(address, spec=args.target or None)
        target = service.target
        _replay_takes_no_problem(target.name, args)
    else:
        if not args.target:
            raise TunexError("name the target: --target triton_gpu, cpu, riscv-sim:x280, "
                             "replay:PATH ... (or --service to use a running tunex serve)")
        cls = target_class(args.target)
        _replay_takes_no_problem(cls.name, args)  # before a recording of minutes is read
        inline = not on_ray and (args.workers == 0 or cls.name == "replay")
        if not on_ray and not inline:
            from tunex.cluster import prestart

            # the workers' fork server imports the target's toolchain while this process
            # builds the target and its space
            prestart(getattr(cls, "worker_imports", ()))
        target = make_target(args.target)
    space, workload = target.prepare(_load_kernel(args.kernel), _shape(args.shape))
    executor: Any
    timeouts = _timeouts(args)
    if service is not None:
        executor = service
    elif on_ray:
        from tunex.cluster import Device, load_devices, simulator_devices
        from tunex.cluster._ray import RayExecutor, RayOptions

        if args.ray is None:
            raise TunexError("--sim-slots and --devices place measurements on a Ray cluster: "
                             "add --ray [ADDRESS]")
        if args.workers is not None or args.measure_workers is not None:
            raise TunexError("--workers and --measure-workers size this machine's process "
                             "pools; with --ray, builds are Ray tasks and measurements Ray "
                             "actors (one per device: --devices FILE, --sim-slots N): drop them")
        specs: tuple[Device, ...] = load_devices(args.devices) if args.devices else ()
        specs += simulator_devices(args.sim_slots) if args.sim_slots else ()
        if not specs and target.measure_slots is None:  # a simulator: a slot per local CPU
            specs = simulator_devices(os.cpu_count() or 1)
        executor = RayExecutor(target, RayOptions(address=args.ray or None, device_specs=specs,
                                                  **timeouts))
    elif inline:
        executor = InlineExecutor(target)
    else:
        executor = LocalExecutor(target, _local_options(args))
    quiet = args.quiet or args.json
    with Database(args.db) as db, executor:
        hooks: list[Any] = ([] if quiet or console.is_terminal
                            else [_TrialLog(budget, executor.activity)])
        if args.optuna_storage:
            from tunex.interop import OptunaMirror

            mirror = OptunaMirror(args.optuna_storage, space, workload, database=db.url)
            mirror.sync(db.measurements(workload))  # a resumed search: its earlier trials
            hooks.append(mirror)
        tuner = Tuner(target, space, workload=workload, db=db, strategy=args.strategy,
                      budget=budget, executor=executor, batch=args.batch, seed=args.seed,
                      patience=args.patience, transfer=not args.no_transfer, like=args.like,
                      related=not args.no_related, prior=not args.no_prior,
                      # a kernel's own default first: no search reports worse than it (a
                      # recorded space's "default" is only its first values)
                      first=[] if target.name == "replay" else [space.default()],
                      on_trial=_each(hooks) if hooks else None,
                      progress=not quiet and console.is_terminal)
        if not quiet:
            from tunex.db import problem_label

            console.print("[bold]tunex[/] " + escape(
                f"{workload.kernel} {problem_label(workload)} on {dict(workload.target)} "
                f"(workload {workload.digest}): space of {space.size:,} valid points "
                f"({space.raw_size:,} raw), strategy {args.strategy}, budget {budget}, "
                f"db {args.db}"), highlight=False)
        result = _run_interruptible(tuner)
        versus = None
        if (not args.no_baseline and result.best is not None and result.stopped != "interrupted"
                and hasattr(target, "versus_baseline") and not on_ray and service is None):
            # a C kernel's winner against its plain C at -O3 (the compiler's own
            # vectorisation), measured side by side here: what tuning gained
            versus = target.versus_baseline(workload, result.best.config)
        _report(console, result, space, args, versus)
    if result.stopped == "interrupted":
        print("tunex: interrupted; every finished trial is saved, run again to resume",
              file=sys.stderr)
        return 130
    return 0


_MAX_BATCH = 4096


def _replay_takes_no_problem(target: str, args: argparse.Namespace) -> None:
    if target == "replay" and (args.shape or args.kernel):
        raise TunexError("a replay target answers from its recorded space, whose problem is "
                         "fixed: drop the kernel and --shape (they would be ignored)")


def _check_numbers(args: argparse.Namespace, workers_least: int,
                   more: tuple[tuple[str, Any, int], ...] = ()) -> None:
    """Worker counts, timeouts and ``more`` (flag, value, least) are in range, or one line."""
    for flag, value, least in (("--workers", args.workers, workers_least),
                               ("--measure-workers", args.measure_workers, 1), *more):
        if value is not None and value < least:
            raise TunexError(f"{flag} {value} is not allowed: give a number >= {least}")
    most = max(64, 16 * (os.cpu_count() or 1))  # processes started at once, on this machine
    for flag, value, limit in (("--workers", args.workers, most),
                               ("--measure-workers", args.measure_workers, most),
                               ("--batch", getattr(args, "batch", None), _MAX_BATCH)):
        if value is not None and value > limit:
            raise TunexError(f"{flag} {value} is not allowed: give a number <= {limit} "
                             + ("(processes, on this machine)" if flag != "--batch"
                                else "(trials in flight; the strategy proposes them at once)"))
    for flag, seconds in (("--build-timeout", args.build_timeout),
                          ("--measure-timeout", args.measure_timeout)):
        if seconds is not None and not seconds > 0:
            raise TunexError(f"{flag} {seconds} is not allowed: give seconds > 0")


def _timeouts(args: argparse.Namespace) -> dict[str, Any]:
    """The executors' timeout options from the flags: a measurement limit the user gave is
    kept as given, not shortened once measurements show how long a config takes."""
    out: dict[str, Any] = {k: v for k, v in (("build_timeout", args.build_timeout),
                                             ("measure_timeout", args.measure_timeout)) if v}
    if args.measure_timeout:
        out["hang_factor"] = None
    return out


def _local_options(args: argparse.Namespace) -> Any:
    """The local executor's options from the flags (unset ones keep their defaults)."""
    from tunex.cluster import LocalOptions

    return LocalOptions(**{k: v for k, v in (("build_workers", args.workers),
                                             ("measure_workers", args.measure_workers)) if v},
                        **_timeouts(args))


def cmd_serve(args: argparse.Namespace) -> int:
    from tunex.cluster import prestart
    from tunex.cluster._service import Service
    from tunex.targets import target_class

    _check_numbers(args, workers_least=1)
    prestart(getattr(target_class(args.target), "worker_imports", ()))
    service = Service(args.target, _local_options(args), address=args.socket)

    def ready() -> None:
        ex = service.executor
        builds, measures = ex.options.build_workers, ex.slots - ex.options.build_workers
        print(f"tunex: serving {args.target} at {service.address} ({builds} build "
              f"{'worker' if builds == 1 else 'workers'}, {measures} measuring); searches use "
              f"it with --service; Ctrl-C stops", file=sys.stderr, flush=True)

    service.serve(ready)
    print(f"tunex: service stopped after {service.clients} searches", file=sys.stderr)
    return 0


def _each(hooks: list[Any]) -> Any:
    def on_trial(m: Any, number: int) -> None:
        for hook in hooks:
            hook(m, number)
    return on_trial


class _TrialLog:
    """One line per finished trial on standard error, for logs and pipes (a terminal gets the
    progress bar instead), with what the executor is doing then when it says (``activity``:
    builds queued and running, measurements running per device)."""

    def __init__(self, budget: Any, activity: Any = None) -> None:
        self.total = f"/{budget.trials}" if budget.trials else ""
        self.best = math.inf
        self.best_trial = 0
        self.failures: dict[str, int] = {}
        self.activity = activity

    def __call__(self, m: Any, number: int) -> None:
        if m.ok and m.value < self.best:
            self.best, self.best_trial = m.value, number
        if not m.ok:
            self.failures[m.status.value] = self.failures.get(m.status.value, 0) + 1
        what = f"{m.value:.5g} ms" if m.ok else str(m.status)
        best = f"{self.best:.5g} ms (trial {self.best_trial})" if self.best_trial else "-"
        failed = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items())) or "none"
        now = self.activity() if self.activity is not None else None
        print(f"tunex: trial {number}{self.total} {what}; best {best}; failures: {failed}; "
              + (f"{now}; " if now is not None else "")
              + " ".join(f"{k}={v}" for k, v in m.config.items()), file=sys.stderr, flush=True)


def _summary(result: Any, versus: dict[str, Any] | None = None) -> dict[str, Any]:
    best = result.best
    w = result.workload
    out = {"workload": w.digest, "kernel": w.kernel, "problem": dict(w.problem),
            "target": dict(w.target), "trials": result.trials, "new_trials": result.new_trials,
            "proposals": result.proposals, "seconds": round(result.seconds, 3),
            "stopped": result.stopped, "failures": dict(sorted(result.failures.items())),
            "best_ms": None if best is None else best.value,
            "spread": None if best is None else best.spread,
            "repeats": None if best is None else len(best.times_ms),
            "config": None if best is None else best.config.to_dict()}
    if result.transfer is not None:
        out["transfer"] = result.transfer
    if versus is not None:
        out["baseline"] = versus
    return out


def _transfer_text(tr: dict[str, Any], best: Any) -> str:
    """What a search took from the kernel's other workloads, in a sentence."""
    from tunex.trial import Config

    n = tr["workloads"]
    near = tr.get("like_candidates")
    if near:
        return (f"no other workload of this kernel in the database; {', '.join(near)}, whose "
                "spaces name most of its parameters, could start it if it is a variant of "
                "them: --like " + " --like ".join(near))
    left = ", ".join(f"{k} {v}" for k, v in tr.get("left_out", {}).items() if v)
    related = tr.get("related") or []
    kernels = [k for k in tr.get("kernels") or [] if k not in related]
    shipped = tr.get("prior")
    if not tr["used"]:
        return (f"{n} other workload{'s' * (n != 1)} of this kernel"
                + (f" or of {', '.join(kernels)} (--like)" if kernels else "")
                + " in the database"
                + (f" and {shipped['workloads']} in {shipped['label']}" if shipped else "")
                + ", none used: " + (tr.get("why") or f"left out: {left}"))
    out = (f"warm start from {tr['used']} of {n} other workload{'s' * (n != 1)} "
           f"({tr['trials']:,} trials"
           + (f"; of kernels named by --like among them: {', '.join(kernels)}" if kernels else "")
           + (f"; of related kernels among them (their spaces name most of its parameters; "
              f"--no-related leaves them out): {', '.join(related)}" if related else "")
           + (f"; {shipped['workloads']} of them from {shipped['label']} "
              "(--no-prior leaves them out)" if shipped else "")
           + ")" + (f"; left out: {left}" if left else ""))
    if tr.get("other_space"):
        k = tr["other_space"]
        where = ("another space (an earlier version of this one, or another kernel's)"
                 if kernels or related else "another version of this space")
        out += (f"; {k} of them recorded under {where} (their configs train the model, with "
                "what this space adds unknown to it)")
    first = [Config(c) for c in tr.get("first", [])]
    raced = tr.get("raced")
    if raced:
        out += (f"; the first proposals raced their model's best configs ({raced['model']}) "
                f"against their own best ({raced['theirs']} of {len(first)})")
    elif first:
        out += f"; their {len(first)} best configs were proposed first"
    if first and best is not None and best.config in first:
        out += ", and the winner is one of their best configs"
    if tr.get("rank_correlation") is not None:
        rule = ("kernels related by their parameter names alone stay only while above chance"
                if tr.get("keep") == "above" else "they are dropped only when worse than chance")
        out += (f"; their model ranks this workload's trials at {tr['rank_correlation']:+.2f} "
                f"(rank correlation; {rule}), so their trials "
                + ("stay in its training" if tr["model_kept"] else "were dropped from it"))
    return out + " (--no-transfer: search cold)"


def _report(console: Any, result: Any, space: Any, args: argparse.Namespace,
            versus: dict[str, Any] | None = None) -> None:
    from rich.table import Table

    if args.json or args.quiet:  # -q: the same summary on one line
        print(json.dumps(_summary(result, versus), indent=2 if args.json else None))
        return
    t = Table(title=escape(f"{result.workload.kernel}: best of {result.trials} trials"),
              show_header=False)
    if result.best is not None:
        for k, v in result.best.config.items():
            t.add_row(escape(k), escape(str(v)))
        t.add_row("[bold]time", f"{result.best.value:.5g} ms (spread {result.best.spread:.1%}, "
                  f"{len(result.best.times_ms)} repeats)")
    else:
        t.add_row("[bold]time", "no successful trial")
    if versus is not None:
        t.add_row("vs baseline", f"{versus['speedup']:.2f}x the speed of the plain C at -O3 "
                  f"({versus['tuned_ms']:.5g} ms against {versus['baseline_ms']:.5g} ms, "
                  "measured side by side)" if versus["speedup"] is not None
                  else f"not measured: {versus['error']}")
    t.add_row("this run", f"{result.new_trials} new trials in {result.seconds:.1f} s; "
              f"{result.proposals} configs proposed (a config already in the database is "
              f"answered from it, without a trial); stopped: {result.stopped}")
    if result.failures:
        t.add_row("failures", ", ".join(f"{k}: {v}" for k, v in sorted(result.failures.items())))
    if result.transfer is not None:
        t.add_row("transfer", _transfer_text(result.transfer, result.best))
    console.print(t)


def cmd_db(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from tunex.db import Database

    # importing may start a database; reading one must not create it
    with Database(args.db, create=args.db_cmd == "import") as db:
        if getattr(args, "kernel", None) is not None:
            from tunex.db._frames import require_kernel

            require_kernel(db, args.kernel)
        if args.db_cmd == "export":
            from tunex.db import find_workloads

            _not_the_database(args.output, db)

            out = sys.stdout if args.output in (None, "-") else args.output
            fmt = args.format or None
            if out is sys.stdout:
                fmt = fmt or "csv"
                if fmt == "parquet" and sys.stdout.isatty():
                    raise TunexError("parquet is binary: write it to a file with -o FILE")
            one = (find_workloads(db, args.workload, kernel=args.kernel)[0]
                   if args.workload is not None else None)  # "": an empty $ID, not all
            if fmt in ("kernel_tuner", "t4"):
                return _export_kt(db, args, one, fmt)
            n = db.export(out, format=fmt, workload=one, kernel=args.kernel)
            if out is not sys.stdout:
                print(f"wrote {n} trials to {args.output}", file=sys.stderr)
        elif args.db_cmd == "import":
            from tunex.interop import import_cache, is_cache

            if is_cache(args.file):
                w, n = import_cache(db, args.file)
                print(f"imported {n} trials of Kernel Tuner cache {args.file} into {args.db} "
                      f"(workload {w.digest}, {w.kernel})", file=sys.stderr)
                return 0
            n = db.import_trials(args.file)
            print(f"imported {n} trials into {args.db}", file=sys.stderr)
        elif args.db_cmd == "best":
            rows = db.best_per_workload(args.kernel)
            if args.json:
                print(json.dumps([{"workload": w.to_dict(), "digest": w.digest,
                                   "time_ms": m.value, "spread": m.spread,
                                   "config": m.config.to_dict()} for w, m in rows], indent=2))
                return 0
            from tunex.db import problem_label

            console = Console()
            for w, m in rows:
                console.print(f"[bold]{escape(w.kernel)}[/] " + escape(
                    f"{problem_label(w)}  target {json.dumps(w.target)}  (workload "
                    f"{w.digest})"), highlight=False)
                console.print(f"  [green]{m.value:.5g} ms[/] (spread {m.spread:.1%}, "
                              f"{len(m.times_ms)} repeats)  "
                              + escape(" ".join(f"{k}={v}" for k, v in m.config.items())),
                              highlight=False)
            if not rows:
                print("no successful trial recorded yet", file=sys.stderr)
        elif args.db_cmd == "workloads":
            from tunex.db import problem_label, target_label

            found = [(w, db.count(w), db.best(w, db.space(w))) for w in db.workloads(args.kernel)]
            if args.json:
                print(json.dumps([{"workload": w.digest, "kernel": w.kernel,
                                   "problem": dict(w.problem), "target": dict(w.target),
                                   "trials": n, "best_ms": None if b is None else b.value}
                                  for w, n, b in found], indent=2))
                return 0
            t = Table(title=escape(f"workloads in {args.db}"))
            for col in ("kernel", "problem", "target", "trials", "best (ms)", "workload"):
                t.add_column(col, overflow="fold")
            for w, n, b in found:
                t.add_row(escape(w.kernel), escape(problem_label(w)), escape(target_label(w)),
                          str(n),
                          "-" if b is None else f"{b.value:.5g}", w.digest)
            Console().print(t)
    return 0


def _export_kt(db: Any, args: argparse.Namespace, one: Any, fmt: str) -> int:
    """``db export --format kernel_tuner|t4``: one workload as a Kernel Tuner file."""
    from tunex.db import find_workloads
    from tunex.interop import export_cache, export_t4

    if one is None:
        found = find_workloads(db, kernel=args.kernel)
        if not found:
            raise TunexError(f"no workload{f' of kernel {args.kernel!r}' if args.kernel else ''} "
                             f"in {db!r}: nothing to export (tunex db workloads lists what it "
                             "holds)")
        if len(found) != 1:
            raise TunexError(f"a {fmt} file holds one workload and {len(found)} match: pass "
                             "--workload ID (tunex db workloads lists them)")
        one = found[0]
    if args.output in (None, "-"):
        raise TunexError(f"write the {fmt} file with -o FILE (.json, or .json.gz)")
    n = (export_cache if fmt == "kernel_tuner" else export_t4)(db, one, args.output)
    print(f"wrote {n} {'entries' if fmt == 'kernel_tuner' else 'results'} of workload "
          f"{one.digest} ({one.kernel}) to {args.output}", file=sys.stderr)
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    """``tunex pack export|import|verify|show``: config packs (see tunex.db.packs)."""
    from pathlib import Path

    from tunex.db import Database
    from tunex.db.packs import (
        export_pack,
        generate_key,
        import_pack,
        load_pack,
        sign_pack,
        trusted_keys,
    )

    trusted = trusted_keys(args.trust) if getattr(args, "trust", None) else None
    if args.pack_cmd == "keygen":
        key = generate_key(args.output)
        print(f"wrote signing key {key} to {args.output} (keep it private) and its public key "
              f"to {args.output}.pub (give it to your users: TUNEX_TRUSTED_KEYS)",
              file=sys.stderr)
    elif args.pack_cmd == "export":
        name = args.name or Path(args.output).stem
        with Database(args.db, create=False) as db:
            _not_the_database(args.output, db)
            pack = export_pack(db, args.output, kernel=args.kernel, name=name,
                               version=args.version, sign_with=args.sign)
        signed = f", signed by key {pack.signer}" if pack.signer else ""
        print(f"wrote pack {pack.label} to {args.output}: {len(pack.entries)} workloads, "
              f"{pack.checksum}{signed}", file=sys.stderr)
    elif args.pack_cmd == "sign":
        pack = sign_pack(load_pack(args.pack, trusted=trusted), args.key).write(args.pack)
        print(f"signed pack {pack.label} in {args.pack} with key {pack.signer}",
              file=sys.stderr)
    elif args.pack_cmd == "import":
        pack = load_pack(args.pack, trusted=trusted)
        with Database(args.db) as db:
            n = import_pack(db, args.pack, trusted=trusted)
        print(f"imported {n} new best configs of pack {pack.label} ({len(pack.entries)} "
              f"workloads) into {args.db}", file=sys.stderr)
    elif args.pack_cmd == "verify":
        pack = load_pack(args.pack, trusted=trusted)
        if pack.signer is None:
            sig = "unsigned (no trusted keys configured, so it loads; sign packs you ship)"
        elif pack.trusted:
            sig = f"signed by trusted key {pack.signer}"
        else:
            sig = (f"signature valid, by key {pack.signer}; no trusted keys configured, so "
                   "who signed it is not checked (--trust KEY.pub or TUNEX_TRUSTED_KEYS)")
        print(f"{args.pack}: pack {pack.label} is valid, schema ok, checksum ok "
              f"({pack.checksum}); {len(pack.entries)} workloads of "
              f"{len(pack.kernels())} kernels; {sig}")
    elif args.pack_cmd == "show":
        pack = load_pack(args.pack, trusted=trusted)
        if args.json:
            print(json.dumps(pack.to_dict(), indent=2))
            return 0
        from rich.console import Console
        from rich.table import Table

        prov = dict(pack.provenance)
        def listed(value: Any) -> str:  # provenance is free-form: show what is there
            items = value if isinstance(value, list) else [value] if value else []
            return ", ".join(str(v) for v in items) or "?"

        t = Table(title=escape(
            f"pack {pack.label} ({pack.created_at}; tunex {prov.get('tunex')}, "
            f"Triton {listed(prov.get('triton'))}, CUDA {listed(prov.get('cuda'))})"))
        for col in ("kernel", "problem", "device", "median (ms)", "spread", "repeats", "config"):
            t.add_column(col)
        from tunex.db.packs import target_arch, target_device

        for e in pack.entries:
            w = e.workload
            t.add_row(escape(f"{w.kernel} {w.kernel_hash[:8]}"),
                      escape(" ".join(f"{k}={v}" for k, v in w.problem.items())),
                      escape(f"{target_device(w.target)} {target_arch(w.target)}"),
                      f"{e.median_ms:.5g}", f"{e.spread:.1%}", str(e.repeats),
                      escape(" ".join(f"{k}={v}" for k, v in e.config.items())))
        Console().print(t)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``tunex report``: one self-contained HTML page of a database's searches."""
    from tunex.db import Database
    from tunex.report import write_report

    with Database(args.db, create=False) as db:
        _not_the_database(args.output, db)
        n = write_report(db, args.output, args.workload, kernel=args.kernel,
                         spaces=args.space or ())
    print(f"wrote the report of {n} workload{'s' if n != 1 else ''} to {args.output}",
          file=sys.stderr)
    return 0


DB_HELP = "SQLite file or SQLAlchemy URL (default: $TUNEX_DB, else ~/.cache/tunex/tunex.db)"


def cmd_doctor(args: argparse.Namespace) -> int:
    """``tunex doctor``: what this machine offers, each missing piece with what installs it."""
    from tunex.doctor import diagnose, environment

    checks = diagnose(db=args.db, ray_address=args.ray)
    if args.json:
        print(json.dumps({"checks": [c.to_dict() for c in checks],
                          "environment": environment()}, indent=2))
        return 0
    from rich.console import Console

    mark = {"ok": "[green]ok     [/]", "missing": "[red]missing[/]", "none": "[yellow]none   [/]"}
    console = Console(highlight=False)
    wide = max(len(c.name) for c in checks)
    for c in checks:
        console.print(f"{c.area:<9}{c.name:<{wide + 2}}{mark.get(c.state, c.state)}  "
                      f"{escape(c.detail)}", markup=True, soft_wrap=True)
        if c.fix and c.state != "ok":
            console.print(f"{'':<{wide + 20}}-> {escape(c.fix)}", soft_wrap=True)
    for name, value in environment().items():
        console.print(escape(f"{name}={value}"), highlight=False)
    return 0


def cmd_strategies(args: argparse.Namespace) -> int:
    """``tunex strategies``: each strategy with a line saying what it does."""
    from tunex.search import DEFAULT_STRATEGY, available_strategies
    from tunex.search._base import _resolve

    names: dict[Any, list[str]] = {}
    for name in available_strategies():
        try:
            names.setdefault(_resolve(name), []).append(name)
        except TunexError as e:  # an optional dependency is missing
            print(f"{name:<12}unavailable: {e}")
    rows = []
    for cls, aliases in names.items():
        main_name = cls.name if cls.name in aliases else aliases[0]
        doc = (cls.__doc__ or "").strip().splitlines()[0].rstrip(".").replace("``", "")
        other = [a for a in aliases if a != main_name]
        label = main_name + (":VARIANT" if main_name == "optuna" else "")
        default = main_name == DEFAULT_STRATEGY and "default" not in doc
        rows.append((label, doc + (f" (also: {', '.join(other)})" if other else "")
                     + (" [default]" if default else "")))
    wide = max(len(label) for label, _ in rows) + 2
    for label, text in rows:
        print(f"{label:<{wide}}{text}")
    print(f"{'':<{wide}}VARIANT: tpe (default), tpe-independent, cmaes (pip install "
          "'tunex[cmaes]'), gp (needs torch), qmc, random")
    print("\nA trial is a config measured and recorded. A search's proposals count every config "
          "its strategy proposed, including those answered from the database without a new "
          "trial (when resuming, or a repeat).")
    return 0


def cmd_kernels(args: argparse.Namespace) -> int:
    """``tunex kernels``: every kernel ``tunex search`` can tune here, with what it takes."""
    from tunex.errors import ConfigError
    from tunex.kernel import available_kernels, get_kernel
    from tunex.space import Space

    rows: list[dict[str, Any]] = []
    for name in available_kernels():
        try:
            k = get_kernel(name)
            space = k.space()
            if not isinstance(space, Space):
                raise ConfigError(f"its space() returned {type(space).__name__}, not a "
                                  "tunex Space")
            params = list(space.names)
        except Exception as e:  # a user's kernel that does not load: say why, list the rest
            rows.append({"name": name, "error": str(e) if isinstance(e, TunexError)
                         else f"{type(e).__name__}: {e}"})
            continue
        doc = " ".join((type(k).__doc__ or "").strip().split("\n\n")[0].split())
        doc = doc.split("; see the module docstring")[0].replace("``", "").rstrip(".")
        rows.append({"name": name, "language": k.language,
                     "targets": "cpu, riscv-sim, riscv-ssh" if k.language == "c" else
                     "triton_gpu", "dims": list(k.dims), "dtypes": list(k.dtypes),
                     "parameters": params,
                     "about": doc})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        if "error" in r:
            print(f"{r['name']}: does not load: {r['error']}")
            continue
        shape = "--shape " + ",".join(f"{d}=..." for d in r["dims"]) if r["dims"] else ""
        print(f"{r['name']} ({r['language']}: {r['targets']}): {r['about']}\n"
              f"    tunex search {r['name']} {shape}   dtypes {', '.join(r['dtypes'])}; "
              f"tunes {', '.join(r['parameters'])}")
    print("\nA kernel of your own: tunex search ./file.py:Class (or package.module:Class), or "
          "name it in TUNEX_KERNELS='name=package.module:Class' or a 'tunex.kernels' entry "
          "point (README, 'RISC-V vector kernels').")
    return 0


class _Help(argparse.HelpFormatter):
    """Help that shows each option's default (where it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" not in text and action.default not in (None, False, argparse.SUPPRESS)
                and action.option_strings and action.nargs != 0):
            text += " (default: %(default)s)"
        return text


_LEVELS = ("debug", "info", "warning", "error")


def _logging_options(p: argparse.ArgumentParser, top: bool) -> None:
    """-v and --log-level, accepted before and after the subcommand."""
    default = None if top else argparse.SUPPRESS
    p.add_argument("-v", "--verbose", action="store_true", default=False if top else default,
                   help="log what tunex does (as --log-level info)")
    p.add_argument("--log-level", choices=_LEVELS, default=default, metavar="LEVEL",
                   help=f"{', '.join(_LEVELS)} (default: warning)")


def build_parser() -> argparse.ArgumentParser:
    from tunex import __version__

    p = argparse.ArgumentParser(prog="tunex", description="Search-based kernel autotuner.",
                                formatter_class=_Help)
    p.add_argument("--version", action="version", version=f"tunex {__version__}")
    _logging_options(p, top=True)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("search", help="tune a kernel's workload within a budget")
    s.add_argument("kernel", nargs="?",
                   help="kernel from the library, or yours as package.module:Class or "
                        "path/to/file.py:Class (not needed for replay)")
    s.add_argument("--target", default=None,
                   help="replay:PATH[?noisy=1], triton_gpu, cpu, riscv-sim:x280, ... (see "
                   "tunex.targets); required unless --service names a socket")
    s.add_argument("--shape", action="append",
                   help="problem sizes, e.g. M=4096,N=4096,K=4096 (or --shape M=4096 "
                        "--shape N=4096 ...)")
    s.add_argument("--strategy", default="model", help="model, random, exhaustive, optuna:tpe ...")
    s.add_argument("--budget", default="100trials", help="2h, 90m, 500trials, or 2h,500trials")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--db", default=None, help=DB_HELP)
    s.add_argument("--batch", type=int, default=None, help="trials in flight")
    s.add_argument("--workers", type=int, default=None,
                   help="build processes (default: CPUs - 1; 0: build and measure in-process)")
    s.add_argument("--measure-workers", type=int, default=None, metavar="N",
                   help="measuring processes (default: 1 for a device, every CPU for a "
                   "simulator such as riscv-sim)")
    s.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run trials on a Ray cluster: HOST:6379, auto (RAY_ADDRESS or the "
                   "cluster `ray start` runs here); no ADDRESS: a new local Ray instance")
    s.add_argument("--sim-slots", type=int, default=None, metavar="N",
                   help="with --ray: N simulator actors, each needing Ray resource riscv-sim "
                   "(ray start --resources='{\"riscv-sim\": N}')")
    s.add_argument("--devices", default=None, metavar="FILE",
                   help="with --ray: TOML file of [[board]]/[[simulator]] devices "
                   "(see tunex.cluster.load_devices)")
    s.add_argument("--service", nargs="?", const="", default=None, metavar="SOCKET",
                   help="run the trials in a running `tunex serve` (warm workers); no SOCKET: "
                   "the default socket of --target's service")
    s.add_argument("--build-timeout", type=float, default=None, metavar="S",
                   help="seconds before a build is cancelled and recorded as timeout "
                   "(default 300)")
    s.add_argument("--measure-timeout", type=float, default=None, metavar="S",
                   help="seconds before a measurement is cancelled and recorded as timeout "
                   "(default: 60, and once 3 measurements have succeeded 10x the slowest of "
                   "them, at least 5 s; a value given here is kept as given)")
    s.add_argument("--patience", type=int, default=None,
                   help="stop after this many trials without a 1%% gain (trials in flight "
                   "when the last gain was measured do not count)")
    s.add_argument("--no-transfer", action="store_true",
                   help="do not warm-start from other workloads in the database")
    s.add_argument("--like", action="append", default=[], metavar="KERNEL",
                   help="also warm-start from this other kernel's workloads in the database "
                   "(repeatable): a variant of a kernel tuned before, whose configs name most "
                   "of this space's parameters")
    s.add_argument("--no-related", action="store_true",
                   help="do not warm-start from the other kernels whose spaces name most of "
                   "its parameters (by default: beside this kernel's other workloads, and on "
                   "its first search those measured on this device)")
    s.add_argument("--no-prior", action="store_true",
                   help="do not warm-start from the recordings tunex ships (searches of this "
                   "kernel on other devices, and of related kernels on this device: its "
                   "Triton kernels on an NVIDIA H200, its RVV kernels on the X60 and X280, "
                   "Kernel Tuner's public convolution, dedispersion, CLBlast GEMM and pnpoly "
                   "on several GPUs): only the database's")
    s.add_argument("--no-baseline", action="store_true",
                   help="C kernels: do not measure the winner against the kernel's plain C "
                   "form at -O3 when the search ends")
    s.add_argument("--optuna-storage", default=None, metavar="URL",
                   help="mirror each trial into this Optuna storage as it ends (e.g. "
                   "sqlite:///optuna.db), to watch the search in optuna-dashboard")
    s.add_argument("-q", "--quiet", action="store_true",
                   help="no progress and no table: the --json summary on one line")
    s.add_argument("--json", action="store_true",
                   help="print the final summary as JSON (no progress, no table)")
    s.set_defaults(fn=cmd_search)

    sv = sub.add_parser("serve", help="keep a target's build and measuring workers warm "
                        "for searches to use (tunex search --service)")
    sv.add_argument("--target", required=True, help="the target it runs (triton_gpu, cpu, ...)")
    sv.add_argument("--workers", type=int, default=None, help="build processes "
                    "(default: CPUs - 1)")
    sv.add_argument("--measure-workers", type=int, default=None, metavar="N",
                    help="measuring processes (default: 1 for a device, every CPU for a "
                    "simulator)")
    sv.add_argument("--build-timeout", type=float, default=None, metavar="S")
    sv.add_argument("--measure-timeout", type=float, default=None, metavar="S")
    sv.add_argument("--socket", default=None,
                    help="where it listens (default: service-TARGET.sock in $TUNEX_SERVICE_DIR "
                    "or ~/.cache/tunex)")
    sv.set_defaults(fn=cmd_serve)

    d = sub.add_parser("db", help="inspect, export and import a tuning database")
    dsub = d.add_subparsers(dest="db_cmd", required=True)
    e = dsub.add_parser("export", help="every trial, one row each, in order")
    e.add_argument("--format", default=None,
                   choices=["csv", "json", "jsonl", "parquet", "kernel_tuner", "t4"],
                   help="default: from the file's suffix, else csv; kernel_tuner (a cache "
                   "file) and t4 (FAIR T4 results) hold one workload")
    e.add_argument("-o", "--output", default=None, help="file, gzip'd when it ends in .gz "
                   "(trials.json.gz) (default: standard output)")
    e.add_argument("--kernel", default=None, help="only this kernel's trials")
    e.add_argument("--workload", default=None, metavar="ID",
                   help="only this workload's trials (digest or a unique prefix)")
    i = dsub.add_parser("import", help="trials from a json/jsonl export, or a Kernel Tuner "
                        "cache file (either maybe gzip'd: .json.gz)")
    i.add_argument("file")
    b = dsub.add_parser("best", help="best config per workload")
    b.add_argument("--json", action="store_true")
    w = dsub.add_parser("workloads", help="workloads and their trial counts")
    for x in (e, i, b, w):
        x.add_argument("--db", default=None, help=DB_HELP)
    for x in (b, w):
        x.add_argument("--kernel", default=None)
    w.add_argument("--json", action="store_true")
    d.set_defaults(fn=cmd_db)

    pk = sub.add_parser("pack", help="export, import, verify and show config packs")
    psub = pk.add_subparsers(dest="pack_cmd", required=True)
    pe = psub.add_parser("export", help="best config per workload of a database, as a pack")
    pe.add_argument("--db", default=None, help=DB_HELP)
    pe.add_argument("-o", "--output", required=True, help="the pack file to write (JSON)")
    pe.add_argument("--kernel", default=None, help="only this kernel's workloads")
    pe.add_argument("--name", default=None, help="pack name (default: the file's stem)")
    pe.add_argument("--version", default="0", help="pack version (default: 0)")
    pe.add_argument("--sign", default=None, metavar="KEY",
                    help="sign the pack with this private key (tunex pack keygen)")
    pg = psub.add_parser("keygen", help="make an Ed25519 key pair to sign packs with")
    pg.add_argument("-o", "--output", required=True,
                    help="private key file to write (its public key goes to OUTPUT.pub)")
    pn = psub.add_parser("sign", help="sign an existing pack (rewrites the file)")
    pn.add_argument("pack")
    pn.add_argument("--key", required=True, help="the private key (tunex pack keygen)")
    trust_help = ("a public key (.pub) or folder of them to trust; repeatable (default: "
                  "$TUNEX_TRUSTED_KEYS); with any, unsigned or otherwise signed packs are refused")
    pi = psub.add_parser("import", help="verify a pack and add its configs to a database")
    pi.add_argument("pack")
    pi.add_argument("--db", default=None, help=DB_HELP)
    pv = psub.add_parser("verify",
                         help="check a pack's format, schema, checksum and signature")
    pv.add_argument("pack")
    ps = psub.add_parser("show", help="a pack's provenance and configs")
    ps.add_argument("pack")
    for parser in (pi, pv, ps, pn):
        parser.add_argument("--trust", action="append", default=None, metavar="KEY",
                            help=trust_help)
    ps.add_argument("--json", action="store_true", help="print the verified document")
    pk.set_defaults(fn=cmd_pack)

    rp = sub.add_parser("report", help="an HTML page of the searches in a database (plots, "
                        "top configs, parameter importances, cost model quality)")
    rp.add_argument("--db", default=None, help=DB_HELP)
    rp.add_argument("--workload", default=None, metavar="ID",
                    help="only this workload (digest or a unique prefix; default: all)")
    rp.add_argument("--kernel", default=None, help="only this kernel's workloads")
    rp.add_argument("-o", "--output", default="report.html", help="the HTML file to write")
    rp.add_argument("--space", action="append", metavar="PATH",
                    help="a recorded space that a workload replayed: its optimum is drawn "
                    "(repeatable)")
    rp.set_defaults(fn=cmd_report)

    dr = sub.add_parser("doctor", help="what this machine offers tunex (GPUs, Triton, RISC-V "
                        "toolchain, Ray, database) and what installs each missing piece")
    dr.add_argument("--db", default=None, help="the database to look at (default: $TUNEX_DB, "
                    "else ~/.cache/tunex/tunex.db)")
    dr.add_argument("--ray", default=None, metavar="ADDRESS",
                    help="the Ray cluster to try (default: RAY_ADDRESS or this machine's)")
    dr.add_argument("--json", action="store_true", help="print the findings as JSON")
    dr.set_defaults(fn=cmd_doctor)

    st = sub.add_parser("strategies", help="list search strategies")
    st.set_defaults(fn=cmd_strategies)
    kn = sub.add_parser("kernels", help="list the kernels tunex search can tune here (the "
                        "library's and your own), with their dims and parameters")
    kn.add_argument("--json", action="store_true")
    kn.set_defaults(fn=cmd_kernels)
    for q in _subparsers(p):
        q.formatter_class = _Help
        _logging_options(q, top=False)
    return p


def _subparsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out: list[argparse.ArgumentParser] = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for q in dict.fromkeys(action.choices.values()):
                out += [q, *_subparsers(q)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "db", "") is None:
        from tunex.db import default_path

        args.db = default_path()
    elif isinstance(getattr(args, "db", None), str) and not args.db.strip():
        # --db "$DB" with DB unset: not the current folder, as a path of "" would be read
        print("tunex: error: --db is empty: give a SQLite file or a SQLAlchemy URL, or leave "
              "--db out for the default ($TUNEX_DB, else ~/.cache/tunex/tunex.db)",
              file=sys.stderr)
        return 2
    level = args.log_level or ("info" if args.verbose else "warning")
    logging.basicConfig(level=getattr(logging, level.upper()),
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.fn(args) or 0)
    except TunexError as e:
        print(f"tunex: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tunex: interrupted; every finished trial is saved, run again to resume",
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (tunex ... | head): stop quietly, as a SIGPIPE'd tool does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
