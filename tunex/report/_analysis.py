"""What a report shows, computed from the recorded trials alone (no plotting here)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunex.cost_model import FeatureExtractor, GBMRanker
from tunex.db import Database, Decision, Trial
from tunex.space import Choice, Space
from tunex.trial import Config, Measurement, Workload

__all__ = ["Quality", "Series", "WorkloadReport", "analyse"]

_REMEASURE = "remeasure"
MIN_MODEL_TRIALS = 12  # fewer ok trials than this teach a model nothing worth plotting
#: Most values of a parameter the partial dependence plot shows (evenly spaced by rank).
MAX_EFFECT_VALUES = 24


@dataclass
class Series:
    """Best time so far of one strategy's trials, by its own trial count and by wall time."""

    strategy: str
    best_ms: list[float]  # after each of its trials in trial order; nan until the first ok
    seconds: list[float]  # when each trial ended, since the strategy's first trial started
    best_by_time: list[float]  # the best among the trials ended by then


@dataclass
class Quality:
    """The cost model fitted on the first ``seen`` trials, scored on the ok trials after them."""

    seen: int
    unseen: int
    spearman: float  # rank correlation of predicted and measured speed on the unseen trials
    top_hit: float  # measured time of the model's top pick among the unseen, over their best
    predicted_rank: list[int] = field(default_factory=list)
    measured_rank: list[int] = field(default_factory=list)


@dataclass
class WorkloadReport:
    """Everything the page shows for one workload."""

    workload: Workload
    trials: list[Trial]
    top: list[Measurement]
    first_trial: dict[Config, Trial]
    optimum_ms: float | None
    series: list[Series]
    importances: dict[str, float]
    effects: dict[str, list[tuple[Any, float, float]]]  # param -> (value, predicted, measured)
    quality: list[Quality]
    notes: dict[str, str]  # why a section is empty
    decisions: list[Decision] = field(default_factory=list)  # the decorator's, oldest first
    cut_short: list[Decision] = field(default_factory=list)  # Database.cut_short's marks

    @property
    def ok(self) -> list[Trial]:
        return [t for t in self.trials if t.measurement.ok]

    @property
    def failures(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.trials:
            if not t.measurement.ok:
                out[t.measurement.status.value] = out.get(t.measurement.status.value, 0) + 1
        return dict(sorted(out.items()))

    @property
    def by_decorator(self) -> bool:
        return any((t.strategy or "").startswith("autotune:") for t in self.trials)


def analyse(db: Database, workload: Workload, optimum_ms: float | None = None,
            seed: int = 0) -> WorkloadReport:
    """Read ``workload``'s trials from ``db`` and compute what its report section shows."""
    trials = db.trials(workload)
    first: dict[Config, Trial] = {}
    for t in trials:
        first.setdefault(t.measurement.config, t)
    notes: dict[str, str] = {}
    recorded = _space_of([t.measurement.config for t in trials])
    importances: dict[str, float] = {}
    effects: dict[str, list[tuple[Any, float, float]]] = {}
    quality: list[Quality] = []
    n_ok = sum(t.measurement.ok for t in trials)
    if recorded is None:
        notes["model"] = "the configs of this workload vary in no parameter"
    elif n_ok < MIN_MODEL_TRIALS or len({t.measurement.value for t in trials
                                         if t.measurement.ok}) < 3:
        notes["model"] = (f"{n_ok} successful trials with distinct times: the cost model needs "
                          f"at least {MIN_MODEL_TRIALS}")
    else:
        importances, effects = _importances(*recorded, trials, seed)
        quality = _quality(*recorded, trials, seed)
        if not quality:
            notes["quality"] = ("too few trials to fit on a prefix and score on the rest "
                                "(5 ok trials must stay unseen)")
    return WorkloadReport(workload, trials, db.top_k(workload, 10), first, optimum_ms,
                          _series(trials), importances, effects, quality, notes,
                          db.decisions(workload), db.cut_short(workload))


def run_labels(trials: Sequence[Trial]) -> list[str]:
    """The search each trial belongs to: its strategy, with re-measurements of leaders counted
    with the search that ran before them."""
    out: list[str] = []
    last = "unknown"
    for t in trials:
        s = t.strategy or "unknown"
        if s.endswith(_REMEASURE):
            s = last
        out.append(s)
        last = s
    return out


def _series(trials: Sequence[Trial]) -> list[Series]:
    groups: dict[str, list[Trial]] = {}
    for label, t in zip(run_labels(trials), trials):
        groups.setdefault(label, []).append(t)
    out = []
    for label, ts in groups.items():
        start = min(t.measurement.started_at for t in ts)
        by_time = sorted(ts, key=lambda t: t.measurement.ended_at)  # parallel trials overlap
        out.append(Series(label, _running_best(ts),
                          [max(0.0, t.measurement.ended_at - start) for t in by_time],
                          _running_best(by_time)))
    return out


def _running_best(trials: Sequence[Trial]) -> list[float]:
    best = math.inf
    out = []
    for t in trials:
        best = min(best, t.measurement.value)
        out.append(best if math.isfinite(best) else math.nan)
    return out


def _sort_key(v: Any) -> tuple[int, Any]:
    if isinstance(v, bool):
        return (0, int(v))
    if isinstance(v, (int, float)):
        return (1, v)
    return (2, repr(v))


def _space_of(configs: Sequence[Config]) -> tuple[Space, dict[str, str]] | None:
    """A space spanning the recorded configs (each parameter a Choice of its recorded values,
    no constraints): enough to encode configs for the cost model; and the recorded name of
    each of its parameters. A database takes configs of any names (imported ones, say): a
    name that is no Python identifier stands in the space as ``_recorded<i>``."""
    if not configs:
        return None
    names = set(configs[0])
    for c in configs[1:]:
        names &= set(c)
    params = []
    recorded: dict[str, str] = {}
    for i, n in enumerate(sorted(names)):
        values = sorted({c[n] for c in configs}, key=_sort_key)
        if len(values) > 1:
            params.append(Choice(n if n.isidentifier() and not n.startswith("_recorded")
                                 else f"_recorded{i}", values))
            recorded[params[-1].name] = n
    return (Space(params, name="recorded"), recorded) if params else None


def _xy(space: Space, recorded: Mapping[str, str], features: FeatureExtractor,
        trials: Sequence[Trial]) -> tuple[np.ndarray, np.ndarray]:
    configs = [Config({n: t.measurement.config[recorded[n]] for n in space.names})
               for t in trials]
    return features.transform(configs), np.array([t.measurement.value for t in trials])


def _importances(space: Space, recorded: Mapping[str, str], trials: Sequence[Trial], seed: int
                 ) -> tuple[dict[str, float], dict[str, list[tuple[Any, float, float]]]]:
    """Split gain of the cost model fitted (as a regression on log time) on every trial, summed
    per parameter; and, for the top parameters, the model's partial dependence on each value
    (mean prediction over the ok trials with that parameter set to the value) beside the
    median measured time of the trials that had it."""
    features = FeatureExtractor(space, interactions=False)
    X, y = _xy(space, recorded, features, trials)
    model = GBMRanker(objective="regression", random_state=seed, subsample=1.0, colsample=1.0)
    model.fit(X, y)
    gain = model.booster_.feature_importance(importance_type="gain")
    shares: dict[str, float] = {}
    col = 0
    for p in space.params:
        shares[recorded[p.name]] = float(np.sum(gain[col:col + p.width]))
        col += p.width
    total = sum(shares.values()) or 1.0
    shares = dict(sorted(((k, v / total) for k, v in shares.items()), key=lambda kv: -kv[1]))
    ok = np.isfinite(y)
    best = float(np.min(y[ok]))
    Xok = X[ok]
    effects: dict[str, list[tuple[Any, float, float]]] = {}
    col_of: dict[str, int] = {}
    col = 0
    for p in space.params:
        col_of[recorded[p.name]] = col
        col += p.width
    values = [t.measurement.config for t in trials]
    in_space = {v: k for k, v in recorded.items()}
    for name in [k for k, v in shares.items() if v > 0][:3]:
        p = space.param(in_space[name])
        c0 = col_of[name]
        measured: dict[Any, list[float]] = {}
        for c, m in zip(values, y):
            if math.isfinite(m):
                measured.setdefault(c[name], []).append(m)
        # a parameter of thousands of values (one per trial, say) took minutes and drew an
        # unreadable axis: its values at evenly spaced ranks stand for it
        shown = p.values if len(p.values) <= MAX_EFFECT_VALUES else [
            p.values[int(i)] for i in np.linspace(0, len(p.values) - 1, MAX_EFFECT_VALUES)]
        rows = []
        for v in shown:
            Xv = Xok.copy()
            Xv[:, c0:c0 + p.width] = p.encode(v)
            # the regression target is log(best) - log(time): back to milliseconds
            predicted = best * float(np.exp(-np.mean(model.predict(Xv))))
            at = measured.get(v)
            rows.append((v, predicted, float(np.median(at)) if at else math.nan))
        effects[name] = rows
    return shares, effects


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    return ranks


def _quality(space: Space, recorded: Mapping[str, str], trials: Sequence[Trial], seed: int,
             refits: int = 8, keep_unseen: int = 5) -> list[Quality]:
    """Refit the model-guided search's model (GBMRanker, LambdaRank, the same features) on
    growing prefixes of the trials, and score each fit on the ok trials it had not seen."""
    n = len(trials)
    ok_after = np.cumsum([t.measurement.ok for t in reversed(trials)])[::-1]  # ok at i or later
    first = min(max(MIN_MODEL_TRIALS, n // 10), n)
    last = max((i for i in range(n) if ok_after[i] >= keep_unseen), default=-1)
    if last < first:
        return []
    points = sorted({int(k) for k in np.linspace(first, last, refits)})
    features = FeatureExtractor(space, interactions=True)
    X, y = _xy(space, recorded, features, trials)
    out = []
    for k in points:
        if np.isfinite(y[:k]).sum() < 3:
            continue
        model = GBMRanker(random_state=seed).fit(X[:k], y[:k])
        rest = np.flatnonzero(np.isfinite(y[k:])) + k
        score = model.predict(X[rest])
        predicted = _ranks(-score)  # 1 = predicted fastest
        measured = _ranks(y[rest])
        rho = float(np.corrcoef(predicted, measured)[0, 1]) if len(rest) > 1 else math.nan
        pick = rest[int(np.argmax(score))]
        out.append(Quality(k, len(rest), rho, float(y[pick] / np.min(y[rest])),
                           [int(r) for r in predicted], [int(r) for r in measured]))
    return out


def optimum_of(replays: Sequence[Any], workload: Workload) -> float | None:
    """The recorded optimum of ``workload`` when one of ``replays`` (replay targets of recorded
    space files) is the space it searched (same file content); None otherwise."""
    for target in replays:
        if target.digest == workload.kernel_hash and target.workload() == workload:
            return float(target.optimum())
    return None


def fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple):
        return "(" + ",".join(map(str, v)) + ")"
    return str(v)


def config_text(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={fmt_value(v)}" for k, v in config.items())
