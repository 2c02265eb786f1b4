"""The report's plots: matplotlib figures written as inline SVG text (no pyplot, no files)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tunex.report._analysis import Quality, WorkloadReport, fmt_value, run_labels
from tunex.trial import Status

__all__ = ["FIGURES"]

_FAIL_COLORS = {
    Status.COMPILE_ERROR.value: "#d62728", Status.RUNTIME_ERROR.value: "#ff7f0e",
    Status.TIMEOUT.value: "#9467bd", Status.WRONG_RESULT.value: "#8c564b",
    Status.PRUNED.value: "#7f7f7f", Status.INVALID.value: "#bcbd22",
    Status.WORKER_LOST.value: "#e377c2",
}
# text.parse_math off: labels are recorded data (config values, strategy names), never TeX; a
# "$" in one would be typeset or fail to parse.
_RC: Any = {"svg.fonttype": "none", "svg.hashsalt": "tunex", "text.parse_math": False,
       "font.size": 9,
       "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
       "grid.alpha": 0.3, "legend.fontsize": 8, "legend.frameon": False}


def _short(text: Any, most: int = 40) -> str:
    """A recorded name or value as a plot label: on one line, and cut to ``most`` characters
    (a long one squeezed the axes to nothing or ran across the plot; the page's tables show
    it whole)."""
    line = " ".join(str(text).split())
    return line if len(line) <= most else line[:most - 1] + "\u2026"


def _figure(width: float = 5.2, height: float = 3.2, ncols: int = 1) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "tunex"})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE


def _log_if_wide(ax: Any, values: Sequence[float], axis: str = "y") -> None:
    v = [x for x in values if math.isfinite(x) and x > 0]
    if v and max(v) / min(v) > 20:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


#: points a scatter draws at most: past it the page grows by megabytes and says no more
_POINTS = 3000


def _spread(n: int, limit: int = _POINTS) -> np.ndarray:
    """Indices of at most ``limit`` of ``n`` items, evenly spaced, first and last kept."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


def _changes(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """A step line's vertices where it changes (and its last one): the same line drawn."""
    keep = [i for i in range(len(ys)) if i == 0 or ys[i] != ys[i - 1] or i == len(ys) - 1]
    return [xs[i] for i in keep], [ys[i] for i in keep]


def _optimum(ax: Any, optimum: float | None) -> None:
    if optimum is not None:
        ax.axhline(optimum, color="black", linestyle="--", linewidth=1,
                   label=f"recorded optimum {optimum:.4g} ms")


def convergence_trials(r: WorkloadReport) -> str:
    fig, (ax,) = _figure()
    for s in r.series:
        ax.step(*_changes(range(1, len(s.best_ms) + 1), s.best_ms), where="post",
                label=_short(s.strategy))
    _optimum(ax, r.optimum_ms)
    _log_if_wide(ax, [y for s in r.series for y in s.best_ms])
    ax.set(xlabel="trials of the strategy", ylabel="best time so far (ms)")
    ax.legend()
    return _svg(fig)


def convergence_time(r: WorkloadReport) -> str:
    fig, (ax,) = _figure()
    for s in r.series:
        ax.step(*_changes(s.seconds, s.best_by_time), where="post",
                label=_short(s.strategy))
    _optimum(ax, r.optimum_ms)
    _log_if_wide(ax, [y for s in r.series for y in s.best_ms])
    ax.set(xlabel="wall time since the strategy's first trial (s)",
           ylabel="best time so far (ms)")
    ax.legend()
    return _svg(fig)


def over_search(r: WorkloadReport) -> str:
    """Every trial's time in order; failures as crosses along the top, by kind."""
    fig, (ax,) = _figure(width=10.6)
    labels = run_labels(r.trials)
    ok = [(t.number, t.measurement.value, lab) for t, lab in zip(r.trials, labels)
          if t.measurement.ok]
    # past _POINTS trials: every one that set a new best, and the rest evenly spaced
    best, record = math.inf, set()
    for i, (_, v, _) in enumerate(ok):
        if v < best:
            best = v
            record.add(i)
    shown = [ok[i] for i in sorted(record | set(_spread(len(ok)).tolist()))]
    for lab in dict.fromkeys(labels):
        pts = [(n, v) for n, v, ll in shown if ll == lab]
        if pts:
            ax.scatter(*zip(*pts), s=10, alpha=0.7, label=_short(lab))
    _log_if_wide(ax, [v for _, v, _ in ok])
    top = max((v for _, v, _ in ok), default=1.0)
    _optimum(ax, r.optimum_ms)
    failed = 0
    for kind, color in _FAIL_COLORS.items():
        xs = [t.number for t in r.trials if t.measurement.status.value == kind]
        failed += len(xs)
        xs = [xs[i] for i in _spread(len(xs))]
        if xs:
            ax.scatter(xs, [top * 1.15] * len(xs), marker="x", s=22, color=color,
                       label=kind.replace("_", " "))
    thinned = len(shown) < len(ok) or failed > _POINTS
    ax.set(xlabel="trial" + (f" (of {len(r.trials):,}, {len(shown):,} successful ones drawn: "
                             "each new best and the rest evenly spaced)" if thinned else ""),
           ylabel="median time (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig)


def runtime_hist(r: WorkloadReport) -> str:
    fig, (ax,) = _figure()
    v = np.array([t.measurement.value for t in r.ok])
    wide = v.min() > 0 and v.max() / v.min() > 20
    bins: Any = (np.geomspace(v.min(), v.max(), 30) if wide else 30)
    ax.hist(v, bins=bins, color="#1f77b4", alpha=0.8)
    if wide:
        ax.set_xscale("log")
    if r.top:
        ax.axvline(r.top[0].value, color="#2ca02c", linewidth=1.5,
                   label=f"chosen {r.top[0].value:.4g} ms")
    if r.optimum_ms is not None:
        ax.axvline(r.optimum_ms, color="black", linestyle="--", linewidth=1,
                   label=f"recorded optimum {r.optimum_ms:.4g} ms")
    ax.set(xlabel="median time of a successful trial (ms)", ylabel="trials")
    ax.legend()
    return _svg(fig)


def failures_by_kind(r: WorkloadReport) -> str:
    fig, (ax,) = _figure()
    n = len(r.trials)
    bins = max(1, min(20, n // 5))
    edges = np.linspace(0, n, bins + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    width = (edges[1] - edges[0]) * 0.9
    bottom = np.zeros(bins)
    index = np.minimum((np.arange(n) / max(n, 1) * bins).astype(int), bins - 1)
    for kind in r.failures:
        counts = np.bincount(index[[t.measurement.status.value == kind for t in r.trials]],
                             minlength=bins)
        ax.bar(centers, counts, width, bottom=bottom, color=_FAIL_COLORS.get(kind, "#333"),
               label=kind.replace("_", " "))
        bottom += counts
    ax.set(xlabel=f"trial (windows of {n / bins:.3g})", ylabel="failed trials")
    ax.legend()
    return _svg(fig)


def importances(r: WorkloadReport) -> str:
    items = list(r.importances.items())[:12][::-1]
    fig, (ax,) = _figure(height=0.5 + 0.28 * len(items))
    ax.barh(range(len(items)), [v for _, v in items], color="#1f77b4")
    ax.set_yticks(range(len(items)), [_short(k) for k, _ in items])
    ax.set(xlabel="share of the cost model's split gain")
    ax.grid(axis="y", visible=False)
    return _svg(fig)


def effects(r: WorkloadReport) -> str:
    k = len(r.effects)
    fig, axes = _figure(width=10.6, height=3.0, ncols=max(k, 3))
    for ax in axes[k:]:
        ax.set_visible(False)
    for ax, (name, rows) in zip(axes, r.effects.items()):
        x = np.arange(len(rows))
        ax.plot(x, [p for _, p, _ in rows], marker="o", label="model (partial dependence)")
        ax.scatter(x, [m for _, _, m in rows], color="#ff7f0e", marker="s", s=18, zorder=3,
                   label="measured median")
        ax.set_xticks(x, [_short(fmt_value(v), 16) for v, _, _ in rows],
                      rotation=45 if len(rows) > 6 else 0, fontsize=7)
        ax.set(xlabel=_short(name), ylabel="time (ms)")
    axes[0].legend()
    return _svg(fig)


def quality(r: WorkloadReport) -> str:
    fig, (a, b, c) = _figure(width=10.6, ncols=3)
    qs: list[Quality] = r.quality
    seen = [q.seen for q in qs]
    a.plot(seen, [q.spearman for q in qs], marker="o")
    a.axhline(0, color="black", linewidth=0.8)
    a.set_ylim(-1.05, 1.05)
    a.set(xlabel="trials the model was fitted on", ylabel="Spearman rho",
          title="rank correlation on the unseen trials")
    b.plot(seen, [q.top_hit for q in qs], marker="s", color="#ff7f0e")
    b.axhline(1, color="black", linewidth=0.8)
    b.set(xlabel="trials the model was fitted on", ylabel="time ratio",
          title="its top pick / best unseen trial")
    mid = qs[len(qs) // 2]
    some = _spread(len(mid.measured_rank))
    c.scatter(np.asarray(mid.measured_rank)[some], np.asarray(mid.predicted_rank)[some], s=10,
              alpha=0.7)
    c.plot([1, mid.unseen], [1, mid.unseen], color="black", linewidth=0.8, linestyle="--")
    c.set(xlabel="measured rank (1 = fastest)", ylabel="predicted rank",
          title=f"fitted on {mid.seen}: {mid.unseen} unseen, rho {mid.spearman:.2f}")
    for ax in (a, b, c):
        ax.title.set_fontsize(9)
    return _svg(fig)


def _enough(r: WorkloadReport) -> str | None:
    if len(r.trials) < 3:  # a decorator's database may hold thousands: no plot to draw
        return "fewer than 3 trials: nothing to follow over a search yet (the table says all)"
    return None


def _have_ok(r: WorkloadReport) -> str | None:
    return _enough(r) or (None if r.ok else "no successful trial yet")


#: (key, title, caption, plot, why it may be missing) for each figure, in page order.
FIGURES: list[tuple[str, str, str, Any, Any]] = [
    ("convergence-trials", "Convergence by trials",
     "Best median time found so far against the number of trials, one line per strategy that "
     "searched this workload (re-measurements of the leaders count with the search before "
     "them); the dashed line is the recorded optimum of a replayed space.",
     convergence_trials, _have_ok),
    ("convergence-time", "Convergence by wall time",
     "The same against wall time since the strategy's first trial started.",
     convergence_time, _have_ok),
    ("over-search", "Every trial over the search",
     "Median time of each successful trial by trial number; failed trials are crosses along "
     "the top, coloured by kind.", over_search, _enough),
    ("runtime-hist", "Distribution of runtimes",
     "Median times of the successful trials, with the chosen config.", runtime_hist, _have_ok),
    ("failures", "Failures by kind over the search",
     "Failed trials per window of trials, by kind (compile error, runtime error, timeout, "
     "wrong result, pruned, invalid, worker lost).", failures_by_kind,
     lambda r: None if r.failures else "no failed trial"),
    ("importances", "Which parameters matter",
     "Importance of each parameter: its share of the split gain of tunex's cost model (a "
     "LightGBM regression on log time) fitted on every trial of this workload.",
     importances, lambda r: None if r.importances else r.notes.get("model")),
    ("effects", "Effect of the top parameters",
     "Partial dependence: the model's mean predicted time over the successful trials with "
     "the parameter set to each value, beside the median measured time of the trials that "
     "had that value (of a parameter of more than 24 values, 24 evenly spaced by rank).",
     effects, lambda r: None if r.effects else r.notes.get("model")),
    ("quality", "Cost model quality on unseen trials",
     "The model-guided strategy's ranker (LambdaRank, same features) refitted on the first k "
     "trials and scored on the successful trials after them: the rank correlation of its "
     "predictions with the measured times, how much slower than the best of those trials its "
     "top pick was (1 = it picked the best), and predicted against measured rank for the "
     "middle refit. LambdaRank learns the top of the ranking, which is what the search "
     "uses: a low correlation over all unseen trials beside top picks near 1 is expected.",
     quality,
     lambda r: None if r.quality else (r.notes.get("quality") or r.notes.get("model"))),
]


def render(r: WorkloadReport) -> list[tuple[str, str, str, str | None, str | None]]:
    """(key, title, caption, svg or None, why not) of each figure of ``r``."""
    import matplotlib

    out = []
    with matplotlib.rc_context(_RC):
        for key, title, caption, plot, missing in FIGURES:
            why = missing(r)
            out.append((key, title, caption, None if why else plot(r), why))
    return out
