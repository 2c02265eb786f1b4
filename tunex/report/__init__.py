"""``tunex report``: one self-contained HTML page about the searches recorded in a database.

The page holds everything inline (plots as SVG written by matplotlib, styles, a few lines of
script), fetches nothing (its Content-Security-Policy forbids it), and opens offline. For each
workload it shows convergence (best time so far against trials and wall time, one line per
strategy, the recorded optimum of a replayed space), every trial over the search, the runtime
distribution, failures by kind, the parameters that matter (the cost model's importances and
partial dependence), the top configs with the chosen one, the cost model's quality on
trials it had not seen yet (refitted on prefixes of the trials), and where each decision of
``@tunex.autotune`` for it came from (database, pack, cost model prediction, default, tuning),
as the decorator recorded them.

::

    from tunex.db import Database
    from tunex.report import write_report

    with Database("run.db", create=False) as db:
        write_report(db, "report.html")

Needs matplotlib (``pip install 'tunex[report]'``).
"""

from __future__ import annotations

import datetime
import html
import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tunex.db import Database, Decision, find_workloads, problem_label, target_label
from tunex.db._frames import require_kernel
from tunex.errors import TunexError
from tunex.report._analysis import WorkloadReport, analyse, config_text, fmt_value, optimum_of
from tunex.trial import Workload

__all__ = ["render_report", "write_report"]


_MANY = 50  # workloads past which a report says it will take a while


def render_report(db: Database, workload: str | Workload | None = None, *,
                  kernel: str | None = None, spaces: Sequence[str | os.PathLike[str]] = (),
                  seed: int = 0) -> str:
    """The report page as HTML text.

    Args:
        db: the database to read.
        workload: one workload (a :class:`Workload`, its digest or a unique prefix), or every
            workload of the database (of ``kernel`` when given).
        kernel: only this kernel's workloads.
        spaces: recorded space files (``replay:`` targets): a workload replayed from one of
            them gets its recorded optimum on the plots.
        seed: seed of the cost-model fits.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TunexError("tunex report draws its plots with matplotlib: pip install "
                         "'tunex[report]'") from None
    from tunex.report._plots import render
    from tunex.targets.replay import ReplayTarget

    require_kernel(db, kernel)
    workloads = find_workloads(db, workload, kernel=kernel)
    if len(workloads) > _MANY:  # each takes a fraction of a second: say what is coming
        logging.getLogger("tunex.report").warning(
            "drawing the report of %d workloads (up to a second each); --kernel NAME or "
            "--workload ID draws fewer", len(workloads))
    replays = [ReplayTarget(os.fspath(p)) for p in spaces]
    reports = [analyse(db, w, optimum_of(replays, w), seed=seed) for w in workloads]
    sections = [_section(r, render(r)) for r in reports]
    n_trials = sum(len(r.trials) for r in reports)
    title = (f"{workloads[0].kernel} {problem_label(workloads[0])}" if len(workloads) == 1
             else f"{len(workloads)} workloads")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    from tunex import __version__

    head = (f"<header><h1>tunex report: {_e(title)}</h1><p class='meta'>database "
            f"<code>{_e(str(db.path or repr(db)))}</code>, {len(workloads)} workload"
            f"{'s' if len(workloads) != 1 else ''}, {n_trials} trials; written {now} by tunex "
            f"{_e(__version__)}</p></header>")
    body = head + (_index(reports) if len(reports) > 1 else "") + "".join(sections)
    if not reports:
        body += "<p class='note'>This database holds no workload yet.</p>"
    return _PAGE.format(title=_e(title), style=_STYLE, body=body, script=_SCRIPT)


def write_report(db: Database, path: str | os.PathLike[str],
                 workload: str | Workload | None = None, *, kernel: str | None = None,
                 spaces: Sequence[str | os.PathLike[str]] = (), seed: int = 0) -> int:
    """Write :func:`render_report` to ``path``; return the number of workloads in it."""
    text = render_report(db, workload, kernel=kernel, spaces=spaces, seed=seed)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise TunexError(f"cannot write report {os.fspath(path)} ({exc}): check the path and "
                         "its permissions") from exc
    return text.count("<section class='workload'")


# -- page --------------------------------------------------------------------------------------


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _when(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def _ms(value: float) -> str:
    return f"{value:.4g} ms"


def _index(reports: Sequence[WorkloadReport]) -> str:
    rows = []
    for r in reports:
        w = r.workload
        best = _ms(r.top[0].value) if r.top else "-"
        strategies = ", ".join(sorted({s.strategy for s in r.series}))
        decided = ", ".join(f"{_SOURCES.get(k, k)} {n}"
                            for k, n in _by_source(r.decisions).items()) or "-"
        rows.append(f"<tr><td><a href='#w-{w.digest}'>{_e(w.kernel)}</a></td>"
                    f"<td>{_e(problem_label(w))}</td><td>{_e(target_label(w))}</td>"
                    f"<td class='n'>{len(r.trials)}</td><td class='n'>{len(r.ok)}</td>"
                    f"<td class='n'>{best}</td><td>{_e(strategies)}</td><td>{_e(decided)}</td>"
                    f"<td><code>{w.digest}</code></td></tr>")
    return ("<nav><h2>Workloads</h2><table><thead><tr><th>kernel</th><th>problem</th>"
            "<th>target</th><th>trials</th><th>ok</th><th>best</th><th>strategies</th>"
            "<th>decisions</th><th>workload</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></nav>")


def _section(r: WorkloadReport, figures: list[tuple[str, str, str, str | None, str | None]]
             ) -> str:
    w = r.workload
    out = [f"<section class='workload' id='w-{w.digest}'>",
           f"<h2>{_e(w.kernel)} <span class='problem'>{_e(problem_label(w))}</span></h2>"]
    by_strategy = Counter(t.strategy or "unknown" for t in r.trials)
    facts = [("workload", f"<code>{w.digest}</code> (kernel hash <code>"
                          f"{_e(w.kernel_hash[:16] or '-')}</code>)"),
             ("target", "<code>" + _e(json.dumps(dict(w.target), sort_keys=True)) + "</code>"),
             ("trials", f"{len(r.trials)}: {len(r.ok)} ok"
                        + "".join(f", {n} {_e(k.replace('_', ' '))}"
                                  for k, n in r.failures.items()) if r.trials else "none"),
             ("strategies", ", ".join(f"{_e(s)} ({n})" for s, n in by_strategy.items())
              or "-")]
    if r.trials:
        facts.append(("recorded", f"{_when(min(t.measurement.started_at for t in r.trials))}"
                                  f" to {_when(max(t.measurement.ended_at for t in r.trials))}"))
    if r.top:
        best = r.top[0].value
        line = _ms(best)
        if r.optimum_ms is not None:
            line += (f"; recorded optimum {_ms(r.optimum_ms)} (the best found is "
                     f"{_share(r.optimum_ms, best)} of optimal)")
        facts.append(("best", line))
    out.append("<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    out.append(_decision(r))
    out.append(_decisions_table(r))
    out.append("<div class='figures'>")
    for key, title, caption, svg, why in figures:
        wide = " wide" if key in ("over-search", "quality", "effects") else ""
        if svg is None:
            out.append(f"<figure class='missing{wide}' data-figure='{key}'><h3>{_e(title)}</h3>"
                       f"<p class='note'>Not shown: {_e(why)}.</p></figure>")
        else:
            out.append(f"<figure class='plot{wide}' data-figure='{key}'><h3>{_e(title)}</h3>"
                       f"{svg}<figcaption>{_e(caption)}</figcaption></figure>")
    out.append("</div>")
    out.append(_top_table(r))
    out.append("</section>")
    return "\n".join(out)


def _decision(r: WorkloadReport) -> str:
    tuned = [s for s in dict.fromkeys(t.strategy or "" for t in r.trials)
             if s.startswith("autotune:") and not s.endswith("remeasure")]
    lines = []
    if tuned:
        lines.append(f"Tuned by <code>@tunex.autotune</code> on a miss (strategy "
                     f"{_e(', '.join(s.split(':', 1)[1] for s in tuned))}), every trial "
                     "recorded here.")
    if r.top:
        chosen = r.top[0]
        first = r.first_trial.get(chosen.config)
        lines.append(f"<b>Chosen</b>: {_e(config_text(chosen.config))}, {_ms(chosen.value)} "
                     f"over {len(chosen.times_ms)} repeats"
                     + (f", first measured in trial {first.number} by "
                        f"{_e(_by(first) or 'an unknown strategy')}" if first else "")
                     + ". It is what <code>tunex db best</code> and <code>tunex pack export"
                     "</code> give, and where <code>@tunex.autotune</code> takes its config "
                     "from for this workload in every mode: it looks in the database first, "
                     "and only a workload without a successful trial there falls back to "
                     "config packs, then the nearest tuned shape's best config, then the "
                     "cost model's pick, then the default config.")
    else:
        lines.append(f"No {'successful ' if r.trials else ''}trial: <code>@tunex.autotune"
                     "</code> falls back to config "
                     "packs, then the nearest tuned shape's best config, then the cost "
                     "model's pick, then the kernel's default config.")
    if r.cut_short:
        m = r.cut_short[-1]
        lines.append(
            f"<b>Its newest tuning on a miss recorded no end</b> (begun {_when(m.decided_at)} "
            f"by process {_e(f'{m.host}:{m.pid}')}; killed, interrupted, or still running): "
            + ("the next <code>on_miss</code> call resumes it once that process is gone, its "
               "trials kept." if len(r.cut_short) == 1 else
               f"cut short {len(r.cut_short)} times in a row, it is not resumed again; the "
               "best so far is used (if a config ends the process, it was being measured "
               "after the last trial recorded here)."))
    if r.decisions:
        lines.append("Its decisions for this workload are listed below.")
    elif r.by_decorator:
        lines.append("No decision of <code>@tunex.autotune</code> is recorded for it: runs in "
                     "pinned mode or on a read-only database record none, nor did tunex "
                     "before database schema 4.")
    return "<p class='decision'>" + " ".join(lines) + "</p>"


#: How the page names the source of a decision.
_SOURCES = {"db": "database", "pack": "pack", "model": "prediction", "default": "default",
            "tuned": "tuned"}
_LATEST = 12


def _by_source(decisions: Sequence[Decision]) -> dict[str, int]:
    counts = Counter(d.source for d in decisions)
    order = list(_SOURCES) + sorted(set(counts) - set(_SOURCES))
    return {k: counts[k] for k in order if counts[k]}


def _decisions_table(r: WorkloadReport) -> str:
    """Where each decision of the decorator for this workload came from: counts by source,
    and the latest decisions, newest first."""
    if not r.decisions:
        return ""
    ds = r.decisions
    processes = len({(d.host, d.pid) for d in ds})
    counts = ", ".join(f"<span class='source-{_e(k)}'>{_e(_SOURCES.get(k, k))}: {n}</span>"
                       for k, n in _by_source(ds).items())
    rows = []
    for d in sorted(ds, key=lambda d: d.decided_at, reverse=True)[:_LATEST]:
        trial = "-" if d.trial is None else str(d.trial)
        rows.append(f"<tr class='source-{_e(d.source)}'><td>{_when(d.decided_at)}</td>"
                    f"<td>{_e(_SOURCES.get(d.source, d.source))}</td>"
                    f"<td>{_e(config_text(d.config))}</td>"
                    f"<td class='n'>{'-' if d.time_ms is None else f'{d.time_ms:.5g}'}</td>"
                    f"<td class='n'>{trial}</td><td>{_e(d.detail or '-')}</td>"
                    f"<td>{_e(d.mode or '-')}</td>"
                    f"<td>{_e(f'{d.host}:{d.pid}' if d.host else '-')}</td></tr>")
    shown = f"the latest {_LATEST}" if len(ds) > _LATEST else "each"
    first, last = _when(ds[0].decided_at), _when(ds[-1].decided_at)
    span = f"at {first}" if first == last else f"from {first} to {last}"
    return (f"<h3>Decisions of <code>@tunex.autotune</code></h3><p class='decisions'>"
            f"{len(ds)} recorded by {processes} process{'es' if processes != 1 else ''}, "
            f"{span}: {counts}. "
            f"Where {shown} came from, newest first:</p><table class='decisions'><thead><tr>"
            "<th>when</th><th>source</th><th>config</th><th>median (ms)</th><th>trial</th>"
            "<th>why</th><th>mode</th><th>process</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table><p class='note'>A process decides once per "
            "workload it meets, the first time it meets it: from the database's best trial "
            "(trial: the first trial of that config), a config pack, the cost model's "
            "prediction, the kernel's default config, or by tuning on the miss.</p>")


def _share(part: float, whole: float) -> str:
    """``part / whole`` as a percentage; a recorded time may be 0 ms (below the timer's
    resolution), where a ratio says nothing."""
    if whole > 0:
        return f"{part / whole:.1%}"
    return "100.0%" if part == whole else "-"


def _versus(value: float, best: float) -> str:
    if best > 0:
        return f"{value / best - 1:+.1%}"
    return "+0.0%" if value == best else "-"


def _by(trial: Any) -> str | None:
    """The strategy that proposed a trial, and why where it says (``origin``: one of the
    other workloads' best configs, proposed first after a warm start)."""
    origin = trial.measurement.facts.get("origin")
    return (f"{trial.strategy or 'an unknown strategy'} ({origin})" if origin
            else trial.strategy)


def _top_table(r: WorkloadReport) -> str:
    if not r.top:
        return ""
    names = list(r.top[0].config)
    best = r.top[0].value
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = []
    for i, m in enumerate(r.top, 1):
        first = r.first_trial.get(m.config)
        cells = "".join(f"<td>{_e(fmt_value(m.config.get(n)))}</td>" for n in names)
        rows.append(f"<tr class='{'chosen' if i == 1 else ''}'><td class='n'>{i}</td>"
                    f"<td class='n'>{m.value:.5g}</td><td class='n'>{_versus(m.value, best)}"
                    f"</td><td class='n'>{m.spread:.1%}</td><td class='n'>{len(m.times_ms)}"
                    f"</td><td class='n'>{first.number if first else '-'}</td>"
                    f"<td>{_e((_by(first) if first else None) or '-')}</td>{cells}</tr>")
    return (f"<h3>Top {len(r.top)} configs</h3><table class='top'><thead><tr><th>#</th>"
            "<th>median (ms)</th><th>vs chosen</th><th>spread</th><th>repeats</th>"
            f"<th>trial</th><th>strategy</th>{head}</tr></thead><tbody>{''.join(rows)}"
            "</tbody></table><p class='note'>Spread: interquartile range over the median; a "
            "config measured several times is ranked by the median of all its repeats. The "
            "chosen config is highlighted; a strategy marked (another workload's best) proposed it "
            "first after a warm start from the kernel's other workloads.</p>")


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunex report: {title}</title>
<style>{style}</style>
</head>
<body data-ready="0" data-errors="0">
{body}
<script>{script}</script>
</body>
</html>
"""

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem auto; max-width: 1400px;
       padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { margin-top: 2.5rem; }
h2 .problem { font-weight: normal; color: #555; }
.meta, .note, figcaption { color: #555; font-size: .9em; }
section.workload { border-top: 2px solid #ddd; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
           gap: 1rem; }
figure { margin: 0; padding: .5rem; border: 1px solid #e4e4e4; border-radius: 6px; }
figure.wide { grid-column: 1 / -1; }
figure h3 { margin: 0 0 .3rem; font-size: 1rem; }
figure svg { width: 100%; height: auto; }
table { border-collapse: collapse; font-size: .9em; }
th, td { padding: .2rem .5rem; border-bottom: 1px solid #eee; text-align: left; }
/* a name of 300 letters wraps instead of pushing the page sideways; numbers and digests not */
h1, h2, dd, .decision, td { overflow-wrap: anywhere; } td { min-width: 5em; }
td.n, td code { overflow-wrap: normal; white-space: nowrap; } td.n { min-width: 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.chosen { background: #e8f5e9; font-weight: 600; }
code { font-size: .9em; }
.decision { background: #f6f8fa; padding: .6rem .8rem; border-radius: 6px; }
"""

# Marks the page as rendered (and counts its plots and script errors) for headless checks.
_SCRIPT = """
window.addEventListener("error", function () {
  document.body.dataset.errors = String(Number(document.body.dataset.errors) + 1);
});
document.body.dataset.plots = String(document.querySelectorAll("figure.plot svg").length);
document.body.dataset.ready = "1";
"""
