"""The tuning loop: ask -> build -> measure -> record -> tell, under a Budget.

Every finished trial is written to the database before anything else happens, so an
interrupted search loses nothing and the same call resumes it: trials already recorded for the
workload are told to the strategy first, and a config proposed again is answered from them
without a new trial.
"""

from __future__ import annotations

import collections
import inspect
import logging
import math
import numbers
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from tunex.cluster import Activity, Executor, InlineExecutor
from tunex.db import Database
from tunex.db._records import CLAIM_LEASE_S, Claims, claim_owner
from tunex.db.prior import Prior, names_most
from tunex.errors import BudgetError, ConfigError, TunexError
from tunex.search import DEFAULT_STRATEGY, SearchStrategy, get_strategy
from tunex.space import Space
from tunex.targets._base import Target
from tunex.trial import Config, Measurement, Workload, settled

__all__ = ["Budget", "TuneResult", "Tuner"]

log = logging.getLogger("tunex")

_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Budget:
    """How long a search may run: wall time of this session and/or trials of the workload.

    ``trials`` counts every trial recorded for the workload, earlier sessions included, so a
    search that was interrupted finishes its budget when run again. ``None`` means no limit.
    """

    seconds: float | None = None
    trials: int | None = None

    def __post_init__(self) -> None:
        s, t = self.seconds, self.trials
        if s is not None and (isinstance(s, bool) or not isinstance(s, numbers.Real)
                              or not s > 0):
            raise BudgetError(f"Budget(seconds={s!r}): give a number of seconds > 0, or None "
                              "for no time limit (or Budget.parse('2h'))")
        if t is not None and (isinstance(t, bool) or not isinstance(t, numbers.Integral)
                              or t < 1):
            raise BudgetError(f"Budget(trials={t!r}): give a whole number of trials >= 1, or "
                              "None for no trial limit (or Budget.parse('500trials'))")
        object.__setattr__(self, "seconds", None if s is None else float(s))
        object.__setattr__(self, "trials", None if t is None else int(t))

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``"2h"``, ``"90m"``, ``"45s"``, ``"1h30m"``, ``"500trials"``, ``"2h,500trials"``."""
        seconds: float | None = None
        trials: int | None = None
        for part in filter(None, (p.strip() for p in str(text).lower().split(","))):
            m = re.fullmatch(r"(\d+)\s*(trials?|t)", part)
            if m:
                if trials is not None:
                    raise BudgetError(f"budget {text!r} gives two trial counts: give one, "
                                      "e.g. 2h,500trials")
                trials = int(m.group(1))
                if trials <= 0:
                    raise BudgetError(f"budget {text!r} allows no trial: give at least 1")
                continue
            pieces = re.findall(r"(\d+(?:\.\d+)?)\s*(sec|min|s|m|h|d)", part)
            if not pieces or "".join(n + u for n, u in pieces) != part.replace(" ", ""):
                raise BudgetError(
                    f"cannot read budget {text!r}: use a time (2h, 90m, 45s, 1h30m), a number of "
                    "trials (500trials), or both separated by a comma"
                )
            if seconds is not None:
                raise BudgetError(f"budget {text!r} gives two times: write one (1h30m), "
                                  "and at most one trial count beside it")
            seconds = sum(float(n) * _UNITS[u] for n, u in pieces)
            if seconds <= 0:
                raise BudgetError(f"budget {text!r} allows no time: give e.g. 30s or 2h")
        if seconds is None and trials is None:
            raise BudgetError(f"empty budget {text!r}: give e.g. 2h or 500trials")
        return cls(seconds, trials)

    def __str__(self) -> str:
        parts = []
        if self.seconds is not None:
            parts.append(f"{self.seconds:g}s")
        if self.trials is not None:
            parts.append(f"{self.trials}trials")
        return ",".join(parts) or "unlimited"


@dataclass
class TuneResult:
    """What a search found and why it stopped."""

    workload: Workload
    best: Measurement | None
    trials: int  # recorded for the workload, all sessions
    new_trials: int  # measured by this session
    proposals: int
    seconds: float
    stopped: str
    failures: dict[str, int] = field(default_factory=dict)
    #: what the search took from other workloads of the kernel (``None``: none in the
    #: database, or ``transfer=False``): the strategy's ``transfer_``, with ``"used": 0`` and
    #: a ``"why"`` where the strategy does not learn from them
    transfer: dict[str, Any] | None = None


class Tuner:
    """Searches one workload's space on one target, recording into a database.

    Args:
        target: builds and measures configs.
        space: the bound space to search.
        workload: what is tuned (default: ``target.workload()`` where the target has one).
        db: the tuning database (default: an in-memory one).
        strategy: a strategy name (``"model"``, ``"optuna:tpe"``...) or instance.
        budget: a :class:`Budget` or budget string.
        executor: where trials run (default: in this process).
        batch: trials kept in flight (default: the executor's slots); trials built and
            waiting for a device do not count, up to another batch of them (see
            :meth:`~tunex.cluster.Executor.built`), so builders never wait for measurements.
        seed: seed of the strategy.
        patience: stop after this many trials without a 1% improvement, counting those
            proposed once the last improvement was measured: trials already in flight then (a
            batch asked ahead of its results) could not learn from it and do not count. With
            one trial in flight, the last ``patience`` trials.
        remeasure: trials kept aside (within the budget) to measure again the leaders within 3%
            of the best before declaring a winner (noisy targets only).
        transfer: warm-start the strategy from other workloads of the same kernel in the db.
        like: other kernels whose workloads in the db also warm-start it (a variant of a
            kernel tuned before: a matmul with TMA after the matmul); their configs train
            the model where they name more than half of this space's parameters, and are
            trusted as the kernel's own other workloads are. Leave-one-out, a first search
            from its variants' trials reaches 95% in a tenth of the trials, and from
            unrelated kernels that share parameter names (a convolution's block sizes for a
            dedispersion) slower than cold (benchmarks/RESULTS.md).
        related: also warm-start from the other kernels whose declared spaces name more than
            half of this space's parameters (guessed, not named): where the db holds other
            workloads of this kernel, all of their workloads, which the default strategy
            uses only beside a kept workload of this kernel (leave-one-out, 34 recorded
            spaces, 40 seeds: 95% within 20 trials in 1,231 of 1,360 warm runs against 1,224
            from the siblings alone); on the kernel's first search, their workloads measured
            on this device, whose model the default strategy follows for half of the
            proposals before its first evidence check and keeps only while it ranks this
            workload's trials above chance (leave-one-out, 40 seeds: 95% within 20 trials in
            634 of 680 runs on the H200 Triton kernels against 495 cold, level on Kernel
            Tuner's; benchmarks/RESULTS.md). Where none was measured on this device, the
            result's ``transfer`` lists them (``like_candidates``).
        prior: trials measured elsewhere that join the warm start (``related`` on): ``True``, the
            priors tunex ships (searches of its Triton kernels on an H200, its RVV kernels on the
            X60 and X280, and Kernel Tuner's public recordings on several GPUs); a
            :class:`~tunex.db.prior.Prior` (``Prior.load`` of a trials export); ``False``, none.
            The same kernel's workloads are taken from any device, other kernels' only where
            measured on this device (:meth:`~tunex.db.prior.Prior.related`); the database's own
            trials of a workload come before the prior's.
        first: configs to measure before the strategy proposes (a default config, the best
            configs of related workloads); each is told to the strategy like any trial.
        on_trial: called with each recorded measurement and its trial number.
        progress: show a progress bar.
        started: ``time.monotonic()`` at which the time budget's clock started (default: when
            :meth:`run` starts); the decorator starts it when the call missed, so a time budget
            bounds the whole first call, set-up included.
    """

    def __init__(self, target: Target, space: Space, *, workload: Workload | None = None,
                 db: Database | None = None, strategy: str | SearchStrategy = DEFAULT_STRATEGY,
                 budget: Budget | str = "100trials", executor: Executor | None = None,
                 batch: int | None = None, seed: int | None = None, patience: int | None = None,
                 remeasure: int = 4, transfer: bool = True, like: Sequence[str] = (),
                 related: bool = True, prior: Prior | bool | None = True,
                 first: Sequence[Config] = (),
                 on_trial: Callable[[Measurement, int], None] | None = None,
                 progress: bool = False, started: float | None = None) -> None:
        for what, value, least in (("patience", patience, 1), ("batch", batch, 1),
                                   ("remeasure", remeasure, 0)):
            if (value is not None or what == "remeasure") and (
                    isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise ConfigError(f"Tuner {what}={value!r}: give a whole number >= {least}"
                                  + ("" if what == "remeasure" else ", or None"))
        self.target = target
        self.space = space
        if workload is None:
            make = getattr(target, "workload", None)
            if make is None:
                raise TypeError("pass workload=...: this target does not name its workload")
            workload = make()
        self.workload = workload
        if db is not None and not isinstance(db, Database):
            raise ConfigError(f"Tuner db={db!r}: give a tunex.db.Database (e.g. "
                              "Database('tunex.db'), closed by the caller), or None for one "
                              "in memory")
        self.db = db if db is not None else Database("sqlite://")
        self.strategy = (strategy if isinstance(strategy, SearchStrategy)
                         else get_strategy(strategy, space, seed=seed))
        first = list(first)
        bad = [c for c in first if not isinstance(c, Config)]
        if bad:  # (configs outside this workload's space, a sibling's, are left out below)
            raise ConfigError(f"Tuner first={bad[:3]!r}: give tunex.trial.Config objects "
                              "(e.g. space.default(), Config({'BLOCK': 64}))")
        self.budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
        self.executor = executor or InlineExecutor(target)
        if self.executor.target is not target:
            raise ConfigError("the executor runs another target than the tuner's: create it "
                              "with the same target object")
        self.batch = batch or self.executor.slots
        self.patience = patience
        self.remeasure = remeasure
        self.transfer = transfer
        if isinstance(like, str) or not all(isinstance(k, str) and k for k in like):
            raise ConfigError(f"Tuner like={like!r}: give a list of kernel names, e.g. "
                              "['matmul']")
        self.like = [k for k in dict.fromkeys(like) if k != workload.kernel]
        self.related = bool(related)
        if not isinstance(prior, (Prior, bool)) and prior is not None:
            raise ConfigError(f"Tuner prior={prior!r}: give True (the recordings tunex ships), "
                              "False, or a tunex.db.prior.Prior (Prior.load('trials.jsonl'))")
        self.prior = prior
        self.first = list(dict.fromkeys(c for c in first if c in space))
        self.on_trial = on_trial
        self.progress = progress
        self.started = started
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask a running :meth:`run` (from another thread or a signal handler) to end as
        ``interrupted`` after the trials it is waiting for; everything finished is recorded.
        A Ctrl-C that Python swallows (one that lands inside an import's cleanup is only
        printed as "Exception ignored") still stops the search this way."""
        self._stop.set()

    def run(self) -> TuneResult:
        start = time.monotonic() if self.started is None else min(self.started, time.monotonic())
        self.db.declare_space(self.workload, self.space)
        done: dict[Config, Measurement] = {}
        recorded = self.db.measurements(self.workload)
        resumed = [m for m in recorded if m.config in self.space]
        # a config whose one trial lost its worker (a service gone, a board rebooting) is
        # measured again, once: it is neither resumed nor told (the database's claims agree)
        measured = settled((m.config, m.status) for m in resumed)
        resumed = [m for m in resumed if m.config in measured]
        # trials of an earlier version of the space (a parameter added, a range changed): not
        # resumed, but a model that learns from other workloads learns from them too
        older = [m for m in recorded if m.config not in self.space]
        if older:
            log.warning("%d recorded trials of %s have configs outside the space searched now "
                        "(another version of it): not resumed%s", len(older),
                        self.workload.kernel, "; they join the warm start" if self.transfer
                        else "")
        for m in resumed:
            done[m.config] = m
        count = len(resumed)  # trials of an earlier space neither resume nor spend the budget
        new = 0
        best = min((m.value for m in resumed), default=math.inf)
        # patience counts the trials proposed once the last gain was known: those in flight
        # then (a batch asked ahead of its results) could not learn from it
        launched = gain_mark = stale = 0
        launch_no: dict[Config, int] = {}
        reserve = self.remeasure if self.target.noisy else 0
        if self.budget.trials is not None:  # never more than a tenth of a trial budget
            reserve = min(reserve, self.budget.trials // 10)
        total = None if self.budget.trials is None else self.budget.trials + len(older)
        limit = None if total is None else total - reserve  # claims count every recorded trial
        claims = _Claims(self.db, self.workload)
        running: dict[Future[Measurement], Config] = {}
        elsewhere: set[Config] = set()  # claimed by a concurrent search when asked
        stopped = "strategy exhausted"
        bar = _Progress(self.progress, self.budget, count, self.executor.activity)
        full = False
        used = count  # trials and live claims of the workload, as the last claim saw them

        def submit(c: Config) -> None:
            nonlocal launched
            running[self.executor.submit(self.workload, c)] = c
            launch_no[c] = launched
            launched += 1

        def launch(configs: list[Config]) -> None:
            """Claim ``configs`` and submit those granted (the others a concurrent search
            measures)."""
            nonlocal full, used
            got = claims.take([c.key for c in configs], limit)
            full, used = got.full, got.used or used
            for c in configs:
                if c.key in got.granted:
                    submit(c)
                else:
                    elsewhere.add(c)

        first = [c for c in self.first if c not in done]
        if first:  # they need no strategy: the first batch of them builds (and the workers
            # start) while the warm start reads the other workloads and fits its first models
            early, first = first[:self.batch], first[self.batch:]
            self.strategy.pending.update(early)
            launch(early)
        try:
            transfer, related, shipped = self._warm_start(older, bool(resumed))
        except BaseException:  # the given configs' trials and claims end with it
            for fut in running:
                fut.cancel()
            bar.close()
            claims.release()
            claims.close()
            raise
        # the other workloads' best configs the strategy proposes first, to be marked so
        seeded = {Config(c) for c in (transfer or {}).get("first", ())}
        if resumed:
            self.strategy.tell(resumed)
            log.info("resuming %s: %d trials already recorded", self.workload.kernel,
                     len(resumed))
        absorbed = reclaimed = 0.0
        idle = 0  # proposals answered from the record since the last trial
        # seconds between the run's last results: what one more trial costs the budget
        latency: collections.deque[float] = collections.deque(maxlen=100)
        last_end: float | None = None
        keep = _reserve(reserve, latency, self.budget.seconds)  # of a time budget

        try:
            while True:
                if self._stop.is_set():
                    raise KeyboardInterrupt
                if self.budget.seconds is not None and (
                        time.monotonic() - start >= self.budget.seconds - keep):
                    stopped = "time budget"  # (the remeasures' share of it kept aside)
                    break
                if self.patience is not None and stale >= self.patience:
                    stopped = f"no improvement in {self.patience} trials"
                    break
                if elsewhere and (not running or time.monotonic() - absorbed > 2.0):
                    absorbed = time.monotonic()  # what concurrent searches measured meanwhile
                    for m in self._measured_elsewhere(elsewhere):
                        elsewhere.discard(m.config)
                        done[m.config] = m
                        self.strategy.tell([m])
                    free = self.batch - len(running)
                    if elsewhere and free > 0 and time.monotonic() - reclaimed > 2.0:
                        # a concurrent search that stopped (or died) without measuring what
                        # it claimed released it: measure it here, not wait for it forever
                        reclaimed = time.monotonic()
                        left = sorted(elsewhere, key=lambda c: c.key)[:free]
                        got = claims.take([c.key for c in left], limit)
                        full, used = got.full, got.used or used
                        for c in left:
                            if c.key in got.granted:
                                elsewhere.discard(c)
                                submit(c)
                if reserve and limit is not None and best == math.inf and (
                        full or used >= limit):
                    # no trial succeeded: nothing to re-measure, the trials kept for it go to
                    # the search (it stopped one short of its budget)
                    limit, reserve, full = total, 0, False
                room = math.inf if limit is None else (0 if full else limit - used)
                # a trial built and waiting for a device holds no build worker: start the
                # next build meanwhile (at most a second batch of them waiting)
                spare = min(self.executor.built(running), self.batch) if running else 0
                want = int(min(self.batch + spare - len(running), room))
                if want > 0:
                    asked: list[Config] | None
                    given = bool(first)
                    if given:  # pending for the strategy, so it does not propose them too
                        asked, first = first[:want], first[want:]
                        self.strategy.pending.update(asked)
                    else:
                        asked = self.strategy.ask(want)
                    if asked is None:
                        if not running and not elsewhere:
                            break
                        if not running:
                            time.sleep(0.2)  # wait for what the others measure
                    else:
                        fresh = []
                        inflight = set(running.values())
                        for c in asked:
                            if c in done:  # answered from the record: costs no trial
                                self.strategy.tell([done[c]])
                                idle += 1
                            elif c not in inflight and c not in fresh:  # one trial per config
                                fresh.append(c)
                        launch(fresh)
                        if given:  # fill the rest of the batch from the strategy, not later
                            continue
                        if not running:
                            if full:
                                stopped = "trial budget"
                                break
                            if idle > 10 * max(self.batch, 100):
                                stopped = "strategy repeats measured configs only"
                                break
                            continue
                elif not running:
                    stopped = "trial budget"
                    break
                timeout = None
                if self.budget.seconds is not None:
                    timeout = max(0.0, self.budget.seconds - keep - (time.monotonic() - start))
                finished = self.executor.wait(list(running), timeout)
                # the trials that ended first, then an error of the target that stops the search
                for fut in sorted(finished, key=lambda f: f.exception() is not None):
                    running.pop(fut)
                    idle = 0
                    m = fut.result()
                    now = time.monotonic()
                    if last_end is not None:
                        latency.append(now - last_end)
                        keep = _reserve(reserve, latency, self.budget.seconds)
                    last_end = now
                    if m.config in seeded:  # why it was tried: the report says so
                        m = replace(m, facts={**m.facts, "origin": "another workload's best"})
                    number = self.db.record(self.workload, m, strategy=self.strategy.name,
                                            claim=m.config.key)
                    count = max(count + 1, number)
                    new += 1
                    done[m.config] = m
                    self.strategy.tell([m])
                    no = launch_no.pop(m.config, launched)
                    if m.value < best * 0.99:
                        gain_mark, stale = launched, 0
                    elif no >= gain_mark:
                        stale += 1
                    best = min(best, m.value)
                    bar.update(count, m, number, len(running))
                    if self.on_trial:
                        self.on_trial(m, number)
        except KeyboardInterrupt:
            stopped = "interrupted"
            log.warning("interrupted: %d trials recorded, run again to resume", count)
        finally:
            for fut in running:
                fut.cancel()
            bar.close()
            claims.release()
            if sys.exc_info()[0] is not None:  # an error ends the run: stop the heartbeat too
                claims.close()
        try:
            if reserve > 0 and stopped != "interrupted":
                deadline = (None if self.budget.seconds is None
                            else start + self.budget.seconds)
                new += self._remeasure(reserve, claims, total, deadline, latency)
        finally:
            claims.close()
        count = self.db.count(self.workload) - len(older)
        failures: dict[str, int] = {}
        for m in self.db.measurements(self.workload):
            if not m.ok and m.config in self.space:
                failures[m.status.value] = failures.get(m.status.value, 0) + 1
        took = getattr(self.strategy, "transfer_", None)
        if transfer is not None and took is not None:  # with its evidence on this run's trials
            transfer = dict(took)
        if transfer is not None and "like_candidates" not in transfer:  # a warm start's
            transfer["related"] = [k for k in related if k in transfer.get("kernels", ())]
            if shipped:  # where they came from: not this database
                transfer["prior"] = {
                    "label": getattr(self._prior(), "label", ""),
                    "workloads": len(shipped), "kernels": sorted({w.kernel for w, _ in shipped})}
        return TuneResult(self.workload, self.db.best(self.workload, self.space), count, new,
                          self.strategy.proposals, time.monotonic() - start, stopped, failures,
                          transfer)

    def _warm_start(self, older: list[Measurement], resumed: bool
                    ) -> tuple[dict[str, Any] | None, list[str],
                               list[tuple[Workload, list[Measurement]]]]:
        """Tell the strategy what other workloads measured (:meth:`run`'s transfer): this
        kernel's other workloads (and ``older``, trials of an earlier version of this space),
        the ``like`` kernels, the related ones and the prior's. Returns the transfer's account
        for the result, the related kernels used, and the prior's workloads."""
        related: list[str] = []
        if not self.transfer:
            return None, related, []
        others = self.db.history(kernel=self.workload.kernel, exclude=self.workload)
        if older:
            others = [(self.workload, older), *others]
        own = bool(others)
        for kernel in self.like:  # named related kernels
            theirs = self.db.history(kernel=kernel)
            if not theirs:
                log.warning("like %r: no workload of that kernel in the database (tunex db "
                            "workloads lists the kernels tuned in it)", kernel)
            others = [*others, *theirs]
        # the kernels whose spaces name most of this one's parameters: beside this
        # kernel's own other workloads, all of theirs; on its first search, those measured
        # on this device (the strategy trusts them less than named ones: ``guessed``)
        near = self._like_candidates()  # read once: it reads every kernel's declaration
        for kernel in near if self.related else []:
            if kernel in self.like:
                continue
            theirs = [(w, ms) for w, ms in self.db.history(kernel=kernel)
                      if own or w.device == self.workload.device]
            if theirs:
                related.append(kernel)
                others = [*others, *theirs]
        shipped = self._from_prior({w for w, _ in others}) if self.related else []
        for w, _ms in shipped:  # of another kernel, unless named: guessed
            if w.kernel not in (self.workload.kernel, *self.like, *related):
                related.append(w.kernel)
        others = [*others, *shipped]
        if others:
            self.strategy.warm_start(others, current=self.workload,
                                     **_guessed(self.strategy, related))
            transfer = getattr(self.strategy, "transfer_", None) or {
                "workloads": len(others), "used": 0,
                "why": f"strategy {self.strategy.name!r} does not learn from other workloads"}
            log.info("warm start from %d of %d other workloads", transfer["used"],
                     len(others))
            return transfer, related, shipped
        if not resumed and near:  # a first search, no related kernel on this device: what
            # --like could name
            return {"workloads": 0, "used": 0, "like_candidates": near}, related, shipped
        return None, related, shipped

    def _from_prior(self, have: set[Workload]) -> list[tuple[Workload, list[Measurement]]]:
        """The prior's workloads this search may learn from (:meth:`Prior.related`), less
        those the database holds too (its trials are the user's own); the prior is read here,
        on the first search that asks."""
        prior = self._prior()
        if prior is None:
            return []
        return [(w, ms) for w, ms in prior.related(self.workload, self.space.names)
                if w not in have]

    def _prior(self) -> Prior | None:
        if isinstance(self.prior, Prior):
            return self.prior
        return Prior.shipped(self.workload.device, self.workload.kernel) if self.prior else None

    def _measured_elsewhere(self, configs: set[Config]) -> list[Measurement]:
        return [m for m in self.db.measurements(self.workload) if m.config in configs]

    def _like_candidates(self) -> list[str]:
        """Other kernels in the database (judged by the first workload of each) whose declared
        space names more than half of this space's parameters: what ``like`` could name, and
        what ``related`` takes (beside the kernel's own other workloads, all of theirs; on its
        first search, those measured on this device, which the strategy trusts less: a kernel
        that shares parameter names may mislead a search that has nothing else)."""
        names = self.space.names
        seen: set[str] = {self.workload.kernel}
        out: list[str] = []
        for w in self.db.workloads():
            if w.kernel in seen:
                continue
            seen.add(w.kernel)
            try:
                theirs = self.db.space_names(w)  # names only: making the space counts it
            except TunexError:  # a damaged declaration says nothing either way
                continue
            if theirs is not None and names_most(names, theirs):
                out.append(w.kernel)
        return out

    def _remeasure(self, n: int, claims: _Claims, limit: int | None,
                   deadline: float | None = None, latency: Sequence[float] = ()) -> int:
        """Measure the close leaders again so noise does not pick the winner; each repeat
        claims a slot of the trial budget first, so reruns and concurrent searches of a
        finished workload add none, and under a time budget starts only while one as long as
        the remeasures before it (the first: the median of ``latency``) ends before
        ``deadline``. Returns how many were measured."""
        top = self.db.top_k(self.workload, 4, self.space)
        if len(top) < 2:  # nothing to tell apart
            return 0
        close = [m for m in top if m.value <= top[0].value * 1.03] or top[:1]
        if len(close) < 2:  # a lone leader may owe its lead to noise: check the runner-up too
            close = top[:2]
        slots = [f"remeasure:{claims.owner}:{i}" for i in range(n)]
        granted = claims.take(slots, limit).granted
        took: list[float] = []  # what the remeasures take (a build kept: less than a trial)
        measured = 0
        for i, slot in enumerate(granted):
            now = time.monotonic()
            last = took or latency
            if deadline is not None and now + (statistics.median(last) if last else 0) > deadline:
                break  # the slots left are released with the other claims
            config = close[i % len(close)].config
            fut = self.executor.submit(self.workload, config)
            while not fut.done():
                self.executor.wait([fut])
            again = fut.result()
            took.append(time.monotonic() - now)
            self.db.record(self.workload, again, strategy="remeasure", claim=slot)
            measured += 1
        return measured


def _guessed(strategy: SearchStrategy, kernels: Sequence[str]) -> dict[str, Any]:
    """``warm_start``'s ``guessed=`` for a strategy whose method takes it (a user's strategy
    written against the older two-argument form is not broken by it)."""
    if not kernels:
        return {}
    try:
        params = inspect.signature(strategy.warm_start).parameters
    except (TypeError, ValueError):
        return {}
    takes = "guessed" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {"guessed": set(kernels)} if takes else {}


def _reserve(n: int, latency: Sequence[float], seconds: float | None) -> float:
    """Seconds of a time budget kept for ``n`` remeasures: ``n`` times the median time between
    the run's results (what a trial costs in the steady state, however many run at once; a
    remeasure reuses its build), at least a second (stopping the loop takes some: trials in
    flight are cancelled, claims released), at most a twentieth of the budget."""
    if not n or seconds is None:
        return 0.0
    return min(max(n * statistics.median(latency) if latency else 0.0, 1.0), 0.05 * seconds)


class _Claims:
    """One search's claims on its workload's configs and trial budget (see
    :meth:`Database.claim`), kept alive by a heartbeat thread while the search runs."""

    def __init__(self, db: Database, workload: Workload) -> None:
        self.db = db
        self.workload = workload
        self.owner = claim_owner()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tunex-claims", daemon=True)
        self._thread.start()

    def take(self, keys: list[str], limit: int | None) -> Claims:
        if not keys:
            return Claims((), (), (), False, 0)
        return self.db.claim(self.workload, keys, owner=self.owner, limit=limit)

    def _beat(self) -> None:
        while not self._stop.wait(CLAIM_LEASE_S / 6):
            try:
                self.db.heartbeat(self.owner)
            except TunexError as exc:  # the next claim or record reports a lasting problem
                log.warning("cannot renew claims: %s", exc)

    def release(self) -> None:
        self.db.release(self.owner)

    def close(self) -> None:
        self._stop.set()
        self.release()


class _Progress:
    """A rich progress bar of a search (a no-op when off): trials done of the budget, the best
    time and the trial that found it, failures by kind, trials in flight and trials measured per
    worker (device); and, refreshed live where the executor says (``activity``), builds queued
    and running and the measurements running on each device."""

    def __init__(self, enabled: bool, budget: Budget, start: int,
                 activity: Callable[[], Activity | None] | None = None) -> None:
        self.p = None
        self.failures: dict[str, int] = {}
        self.workers: dict[str, int] = {}
        self.best = (math.inf, 0)
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            Task,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.text import Text

        class ActivityColumn(ProgressColumn):
            """The executor's activity, asked at each refresh (not only when a trial ends)."""

            def render(self, task: Task) -> Text:
                try:
                    now = activity() if activity is not None else None
                except Exception:  # a display must never stop a search
                    now = None
                return Text("" if now is None else f"| {now}")

        self.p = Progress(TextColumn("[bold]tuning"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[best]}"), TimeElapsedColumn(),
                          TextColumn("{task.fields[detail]}"), ActivityColumn(),
                          transient=False)
        self.task = self.p.add_task("tune", total=budget.trials, completed=start, best="best -",
                                    detail="")
        self.p.start()

    def update(self, count: int, m: Measurement, number: int, in_flight: int) -> None:
        if m.ok and m.value < self.best[0]:
            self.best = (m.value, number)
        if not m.ok:
            self.failures[m.status.value] = self.failures.get(m.status.value, 0) + 1
        if m.worker:
            self.workers[m.worker] = self.workers.get(m.worker, 0) + 1
        if self.p is None:
            return
        best = ("best -" if math.isinf(self.best[0])
                else f"best {self.best[0]:.4g} ms (trial {self.best[1]})")
        parts = [f"{in_flight} in flight"]
        if self.failures:
            parts.append("failed: " + ", ".join(f"{k} {v}" for k, v in
                                                sorted(self.failures.items())))
        if len(self.workers) > 1:
            parts.append(" ".join(f"{w}:{n}" for w, n in sorted(self.workers.items())))
        self.p.update(self.task, completed=count, best=best, detail=" | ".join(parts))

    def close(self) -> None:
        if self.p is not None:
            self.p.stop()
