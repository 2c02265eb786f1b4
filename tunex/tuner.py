"""The tuning loop: ask -> build -> measure -> record -> tell, under a Budget.

Every finished trial is written to the database before anything else happens, so an
interrupted search loses nothing and the same call resumes it: trials already recorded for the
workload are told to the strategy first, and a config proposed again is answered from them
without a new trial.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from tunex.cluster import Executor, InlineExecutor
from tunex.db import Database
from tunex.errors import BudgetError, ConfigError
from tunex.search import DEFAULT_STRATEGY, SearchStrategy, get_strategy
from tunex.space import Space
from tunex.targets._base import Target
from tunex.trial import Config, Measurement, Workload

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
        batch: trials kept in flight (default: the executor's slots).
        seed: seed of the strategy.
        patience: stop after this many trials without a 1% improvement.
        remeasure: trials kept aside (within the budget) to measure again the leaders within 3%
            of the best before declaring a winner (noisy targets only).
        transfer: warm-start the strategy from other workloads of the same kernel in the db.
        first: configs to measure before the strategy proposes (a default config, the best
            configs of related workloads); each is told to the strategy like any trial.
        on_trial: called with each recorded measurement and its trial number.
        progress: show a progress bar.
    """

    def __init__(self, target: Target, space: Space, *, workload: Workload | None = None,
                 db: Database | None = None, strategy: str | SearchStrategy = DEFAULT_STRATEGY,
                 budget: Budget | str = "100trials", executor: Executor | None = None,
                 batch: int | None = None, seed: int | None = None, patience: int | None = None,
                 remeasure: int = 4, transfer: bool = True, first: Sequence[Config] = (),
                 on_trial: Callable[[Measurement, int], None] | None = None,
                 progress: bool = False) -> None:
        self.target = target
        self.space = space
        if workload is None:
            make = getattr(target, "workload", None)
            if make is None:
                raise TypeError("pass workload=...: this target does not name its workload")
            workload = make()
        self.workload = workload
        self.db = db if db is not None else Database("sqlite://")
        self.strategy = (strategy if isinstance(strategy, SearchStrategy)
                         else get_strategy(strategy, space, seed=seed))
        self.budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
        self.executor = executor or InlineExecutor(target)
        if self.executor.target is not target:
            raise ConfigError("the executor runs another target than the tuner's: create it "
                              "with the same target object")
        self.batch = batch or self.executor.slots
        self.patience = patience
        self.remeasure = remeasure
        self.transfer = transfer
        self.first = list(dict.fromkeys(c for c in first if c in space))
        self.on_trial = on_trial
        self.progress = progress

    def run(self) -> TuneResult:
        start = time.monotonic()
        done: dict[Config, Measurement] = {}
        prior = self.db.measurements(self.workload)
        for m in prior:
            done[m.config] = m
        if self.transfer:
            others = self.db.history(kernel=self.workload.kernel, exclude=self.workload)
            if others:
                self.strategy.warm_start(others, current=self.workload)
                log.info("warm start from %d other workloads", len(others))
        if prior:
            self.strategy.tell(prior)
            log.info("resuming %s: %d trials already recorded", self.workload.kernel, len(prior))
        count = len(prior)
        new = 0
        best = min((m.value for m in prior), default=math.inf)
        last_gain = count
        reserve = self.remeasure if self.target.noisy else 0
        if self.budget.trials is not None:  # never more than a tenth of a trial budget
            reserve = min(reserve, self.budget.trials // 10)
        running: dict[Future[Measurement], Config] = {}
        stopped = "strategy exhausted"
        bar = _Progress(self.progress, self.budget, count)
        first = [c for c in self.first if c not in done]
        idle = 0  # proposals answered from the record since the last trial

        def left() -> float:
            if self.budget.trials is None:
                return math.inf
            return self.budget.trials - reserve - count - len(running)

        try:
            while True:
                if self.budget.seconds is not None and (
                        time.monotonic() - start >= self.budget.seconds):
                    stopped = "time budget"
                    break
                if self.patience is not None and count - last_gain >= self.patience:
                    stopped = f"no improvement in {self.patience} trials"
                    break
                want = int(min(self.batch - len(running), left()))
                if want > 0:
                    asked: list[Config] | None
                    if first:  # pending for the strategy, so it does not propose them too
                        asked, first = first[:want], first[want:]
                        self.strategy.pending.update(asked)
                    else:
                        asked = self.strategy.ask(want)
                    if asked is None:
                        if not running:
                            break
                    else:
                        for c in asked:
                            if c in done:  # answered from the record: costs no trial
                                self.strategy.tell([done[c]])
                                idle += 1
                            else:
                                running[self.executor.submit(self.workload, c)] = c
                        if not running:
                            if idle > 10 * max(self.batch, 100):
                                stopped = "strategy repeats measured configs only"
                                break
                            continue
                elif not running:
                    stopped = "trial budget"
                    break
                timeout = None
                if self.budget.seconds is not None:
                    timeout = max(0.0, self.budget.seconds - (time.monotonic() - start))
                for fut in self.executor.wait(list(running), timeout):
                    running.pop(fut)
                    idle = 0
                    m = fut.result()
                    number = self.db.record(self.workload, m, strategy=self.strategy.name)
                    count += 1
                    new += 1
                    done[m.config] = m
                    self.strategy.tell([m])
                    if m.value < best * 0.99:
                        last_gain = count
                    best = min(best, m.value)
                    bar.update(count, best)
                    if self.on_trial:
                        self.on_trial(m, number)
        except KeyboardInterrupt:
            stopped = "interrupted"
            log.warning("interrupted: %d trials recorded, run again to resume", count)
        finally:
            for fut in running:
                fut.cancel()
            bar.close()
        if self.budget.trials is not None:  # what is left of the budget, not more: a rerun of
            reserve = min(reserve, self.budget.trials - count)  # a finished search adds none
        if reserve > 0 and stopped != "interrupted":
            count, new = self._remeasure(count, new, reserve)
        failures: dict[str, int] = {}
        for m in self.db.measurements(self.workload):
            if not m.ok:
                failures[m.status.value] = failures.get(m.status.value, 0) + 1
        return TuneResult(self.workload, self.db.best(self.workload), count, new,
                          self.strategy.proposals, time.monotonic() - start, stopped, failures)

    def _remeasure(self, count: int, new: int, n: int) -> tuple[int, int]:
        """Measure the close leaders again so noise does not pick the winner."""
        top = [m for m in self.db.top_k(self.workload, 16) if m.config in self.space][:4]
        if len(top) < 2:  # nothing to tell apart
            return count, new
        close = [m for m in top if m.value <= top[0].value * 1.03] or top[:1]
        if len(close) < 2:  # a lone leader may owe its lead to noise: check the runner-up too
            close = top[:2]
        for i in range(n):
            config = close[i % len(close)].config
            fut = self.executor.submit(self.workload, config)
            while not fut.done():
                self.executor.wait([fut])
            again = fut.result()
            self.db.record(self.workload, again, strategy="remeasure")
            count += 1
            new += 1
        return count, new


class _Progress:
    """A rich progress bar showing trials and the best time so far (a no-op when off)."""

    def __init__(self, enabled: bool, budget: Budget, start: int) -> None:
        self.p = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.p = Progress(TextColumn("[bold]tuning"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("best {task.fields[best]}"), TimeElapsedColumn(),
                          transient=False)
        self.task = self.p.add_task("tune", total=budget.trials, completed=start, best="-")
        self.p.start()

    def update(self, count: int, best: float) -> None:
        if self.p is not None:
            self.p.update(self.task, completed=count,
                          best="-" if math.isinf(best) else f"{best:.4g} ms")

    def close(self) -> None:
        if self.p is not None:
            self.p.stop()
