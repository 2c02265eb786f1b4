"""tunex report: what it computes, and the page rendered for real in headless Chromium.

Pages are made for a replay search, a database the decorator filled (Triton's interpreter),
and a RISC-V search (marked riscv). Chromium is Debian's package (scripts/install-chromium.sh);
the rendering tests skip cleanly without it.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests._data import recorded
from tunex.cli import main
from tunex.db import Database
from tunex.report import render_report
from tunex.report._analysis import analyse
from tunex.trial import Config, Measurement, Status, Workload

pytest.importorskip("matplotlib")

FIGURES = ("convergence-trials", "convergence-time", "over-search", "runtime-hist", "failures",
           "importances", "effects", "quality")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (scripts/install-chromium.sh installs it)")
    return exe


def render_in_chromium(page: Path, tmp_path: Path) -> tuple[str, str]:
    """(DOM after scripts ran, browser log) of ``page``; also leaves a screenshot beside it."""
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr",
            "--v=0"]
    done = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    shot = page.with_suffix(".png")
    subprocess.run([*base, "--window-size=1400,3000", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    return done.stdout, done.stderr


def assert_renders(page: Path, tmp_path: Path, plots: int) -> str:
    dom, log = render_in_chromium(page, tmp_path)
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-ready="1"' in body.group(0) and 'data-errors="0"' in body.group(0)
    assert f'data-plots="{plots}"' in body.group(0)
    # any console message (a script error, a fetch the page's CSP refused) is a failure
    assert [line for line in log.splitlines() if ":CONSOLE" in line] == []
    return dom


def figures(text: str) -> dict[str, bool]:
    """Which figures a page has: key -> plotted (False: shown as 'not shown: why')."""
    return {k: cls == "plot" for cls, k in
            re.findall(r"<figure class='(plot|missing)[^']*' data-figure='([^']+)'", text)}


def test_replay_report(tmp_path: Path, capsys) -> None:
    data = recorded("pnpoly/RTX_2080_Ti.json.gz")
    db = tmp_path / "replay.db"
    for strategy, budget in (("model", "40trials"), ("random", "70trials")):
        assert main(["search", "--target", f"replay:{data}", "--strategy", strategy,
                     "--budget", budget, "--seed", "3", "--db", str(db), "-q"]) == 0
    page = tmp_path / "replay.html"
    assert main(["report", "--db", str(db), "-o", str(page), "--space", str(data)]) == 0
    assert "wrote the report of 1 workload" in capsys.readouterr().err
    text = page.read_text()
    shown = figures(text)
    assert list(shown) == list(FIGURES)
    assert all(v for k, v in shown.items() if k != "failures")
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", text)  # nothing fetched
    convergence = text.split("data-figure='convergence-trials'")[1].split("</figure>")[0]
    assert ">model<" in convergence and ">random<" in convergence  # one line per strategy
    assert "recorded optimum" in convergence
    with Database(db, create=False) as d:
        w = d.workloads()[0]
        best = d.best(w)
        from tunex.targets.replay import ReplayTarget

        optimum = ReplayTarget(data).optimum()
    assert best is not None
    assert f"recorded optimum {optimum:.4g} ms" in text
    assert f"{optimum / best.value:.1%} of optimal" in text
    chosen = re.search(r"<tr class='chosen'>.*?</tr>", text)
    assert chosen is not None and f"{best.value:.5g}" in chosen.group(0)
    assert_renders(page, tmp_path, plots=sum(shown.values()))


def test_report_of_a_database_the_decorator_filled(tmp_path: Path) -> None:
    ta = pytest.importorskip("tests.test_autotune")
    import tunex
    from tunex.space import Choice, Pow2, Space

    def bench(call, config):
        if config["BLOCK"] == 1024 and config["num_warps"] == 1:
            raise RuntimeError("out of resources: registers")  # a failed trial, recorded
        call()
        t = 1.0 + abs(math.log2(config["BLOCK"]) - 7) + 0.1 * config["num_warps"]
        return [t, t * 1.01, t * 0.99]

    db = tmp_path / "decorated.db"
    space = Space([Pow2("BLOCK", 32, 1024), Choice("num_warps", [1, 2, 4])])
    k = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", budget="18trials",
                       strategy="random", db=str(db), bench=bench, remeasure=0)(
        ta.jit(ta.add_kernel))
    ta.call_add(k, 3000)
    # a later run that never tunes: the tuned workload from the database, a new one from the
    # nearest tuned shape's best (no trial of its own)
    reader = tunex.autotune(space=space, key={"n": "pow2"}, db=str(db), bench=bench)(
        ta.jit(ta.add_kernel))
    ta.call_add(reader, 3000)
    ta.call_add(reader, 100)
    page = tmp_path / "decorated.html"
    with Database(db, create=False) as d:
        assert sum(d.count(w) for w in d.workloads()) == 18
        chosen_trial = next(t.number for t in d.trials(k.last.workload)
                            if t.measurement.config == k.last.config)
        text = render_report(d)
    page.write_text(text)
    index, tuned, nearest = re.split(r"<section class='workload'", text)
    assert "<th>decisions</th>" in index and ">database 1, tuned 1<" in index
    # the 18 points fit the budget: searched with the strategy asked for (not enumerated), all
    assert "Tuned by <code>@tunex.autotune</code> on a miss (strategy random)" in tuned
    assert "<b>Chosen</b>: BLOCK=128 num_warps=1" in tuned
    # where each decision came from: tuned on the miss, then read from the database
    assert "2 recorded by 1 process" in tuned and "database: 1" in tuned and "tuned: 1" in tuned
    rows = re.findall(r"<tr class='source-(\w+)'>(.*?)</tr>", tuned)
    assert [source for source, _ in rows] == ["db", "tuned"]  # newest first
    for _, row in rows:
        assert "BLOCK=128 num_warps=1" in row and f"<td class='n'>{chosen_trial}</td>" in row
    assert "best in Database(" in rows[0][1] and "tuned 18 trials in" in rows[1][1]
    assert "database: 1" in nearest and "nearest tuned workload in Database(" in nearest
    assert "<dt>trials</dt><dd>none</dd>" in nearest and "<b>Chosen</b>" not in nearest
    shown = figures(tuned)
    assert shown["failures"] and shown["importances"] and shown["quality"]
    importances = tuned.split("data-figure='importances'")[1].split("</figure>")[0]
    assert ">BLOCK<" in importances
    dom = assert_renders(page, tmp_path, plots=text.count("<figure class='plot"))
    assert dom.count('<table class="decisions">') == 2
    assert "recorded no end" not in text  # the tuning's process recorded where it ended
    with Database(db) as d:  # a tuning begun and never ended (killed): the page says so
        d.record_decision(k.last.workload, k.last.config, "tuning", mode="on_miss")
        cut = render_report(d).split("<section class='workload'")[1]
    assert "<b>Its newest tuning on a miss recorded no end</b>" in cut
    assert "the next <code>on_miss</code> call resumes it" in cut
    assert "2 recorded by 1 process" in cut  # the mark is not a decision of the table


@pytest.mark.riscv
def test_report_of_a_riscv_search(tmp_path: Path) -> None:
    from tunex.errors import TargetError
    from tunex.targets import make_target

    try:
        make_target("riscv-sim:x280")
    except TargetError as e:
        pytest.skip(f"RISC-V toolchain absent ({e})")
    db = tmp_path / "riscv.db"
    assert main(["search", "sgemm", "--target", "riscv-sim:x280", "--shape", "M=16,N=16,K=16",
                 "--budget", "16trials", "--seed", "0", "--workers", "1", "--db", str(db),
                 "-q"]) == 0
    page = tmp_path / "riscv.html"
    assert main(["report", "--db", str(db), "--kernel", "sgemm", "-o", str(page)]) == 0
    text = page.read_text()
    assert "sgemm <span class='problem'>" in text and "riscv-sim:x280" in text
    shown = figures(text)
    assert shown["convergence-trials"] and shown["runtime-hist"] and shown["importances"]
    assert_renders(page, tmp_path, plots=sum(shown.values()))


def _toy(tmp_path: Path, name: str, time_of) -> object:
    rng = __import__("random").Random(0)
    w = Workload("toy", "h", {"n": 1}, {"device": "cpu"})
    with Database(tmp_path / f"{name}.db") as db:
        configs = [Config(a=a, b=b, c=c) for a in range(8) for b in range(4) for c in "xyz"]
        rng.shuffle(configs)
        for cfg in configs[:80]:
            db.record(w, Measurement(cfg, Status.OK, (time_of(cfg, rng),)), strategy="random")
        return analyse(db, w)


def test_model_sections_find_the_parameter_that_matters(tmp_path: Path) -> None:
    """Times that depend on one parameter: the importances say so, the partial dependence
    follows the measured times, and refits pick fast unseen configs; times that depend on
    nothing: the refits' picks are no better than chance."""
    r = _toy(tmp_path, "signal", lambda cfg, rng: 1.0 + cfg["a"] ** 2 + 0.01 * rng.random())
    assert next(iter(r.importances)) == "a" and r.importances["a"] > 0.8
    predicted = [p for _, p, _ in r.effects["a"]]
    assert predicted == sorted(predicted)  # slower as a grows, like the measurements
    assert len(r.quality) == 8 and r.quality[0].seen == 12 and r.quality[-1].unseen == 5
    hits = sorted(q.top_hit for q in r.quality)
    assert hits[len(hits) // 2] < 1.02  # its top pick is about the best unseen trial
    assert sum(q.spearman for q in r.quality[4:]) / 4 > 0.3
    noise = _toy(tmp_path, "noise", lambda cfg, rng: 1.0 + rng.random())
    hits = sorted(q.top_hit for q in noise.quality)
    assert hits[len(hits) // 2] > 1.2


def test_a_parameter_of_a_value_per_trial_shows_its_effect_at_a_few_values(
        tmp_path: Path) -> None:
    """A parameter with a value per trial (a wide Int range, sampled) had its partial
    dependence computed at every value, each over every trial: minutes for 10k trials, an
    axis of 10k labels. It is shown at 24 values evenly spaced by rank, first and last kept."""
    from tunex.report._analysis import MAX_EFFECT_VALUES

    w = Workload("wide", "h", {"n": 1}, {"device": "cpu"})
    with Database(tmp_path / "wide.db") as db:
        for a in range(300):
            db.record(w, Measurement(Config(a=a * 7, b=a % 3), Status.OK, (1.0 + a,)),
                      strategy="random")
        r = analyse(db, w)
    rows = r.effects["a"]
    assert len(rows) == MAX_EFFECT_VALUES == 24
    shown = [v for v, _, _ in rows]
    assert shown[0] == 0 and shown[-1] == 299 * 7 and shown == sorted(set(shown))
    assert [m for _, _, m in rows] == [1.0 + v / 7 for v in shown]  # each value's own time
    assert len(r.effects["b"]) == 3


def test_long_names_are_cut_in_plots_and_whole_in_tables(tmp_path: Path) -> None:
    """A strategy or parameter name of hundreds of letters ran across the convergence plots
    as a legend, squeezed the importances' axes to nothing (a matplotlib warning on the
    terminal) and pushed the page's tables sideways."""
    import warnings

    long = "very" + "L" * 300
    w = Workload("k", "h", {"n": 1}, {"device": "cpu"})
    with Database(tmp_path / "long.db") as db:
        for i in range(20):
            db.record(w, Measurement(Config({long: i % 5, "b": i % 4}), Status.OK,
                                     (1.0 + (i % 5) ** 2 + i % 4,)), strategy=long)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            text = render_report(db)
    plots = re.findall(r"<svg.*?</svg>", text, flags=re.S)
    assert len(plots) >= 5 and not any(long in svg for svg in plots)
    assert any("veryLLL" in svg for svg in plots)  # its start, cut
    assert text.count(long) >= 3  # whole in the page's text: headings, tables
    assert "overflow-wrap: anywhere" in text


def test_report_errors_are_one_line(tmp_path: Path, capsys) -> None:
    with Database(tmp_path / "few.db") as db:
        db.record(Workload("toy"), Measurement(Config(a=1), Status.OK, (1.0,)))
    assert main(["report", "--db", str(tmp_path / "few.db"), "--workload", "beef",
                 "-o", str(tmp_path / "x.html")]) == 2
    assert "no workload 'beef'" in capsys.readouterr().err
    assert main(["report", "--db", str(tmp_path / "none.db")]) == 2
    assert "no tuning database" in capsys.readouterr().err
    # a kernel the database does not hold is an error, not a page saying it holds nothing
    assert main(["report", "--db", str(tmp_path / "few.db"), "--kernel", "toy2",
                 "-o", str(tmp_path / "x.html")]) == 2
    assert "no workload of kernel 'toy2'" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
    out = tmp_path / "few.html"
    assert main(["report", "--db", str(tmp_path / "few.db"), "-o", str(out)]) == 0
    text = out.read_text()  # one trial: the plots that need more say why they are missing
    assert "Not shown: the configs of this workload vary in no parameter." in text
    # and no convergence plot of one point (a page of thousands of them took minutes)
    assert "Not shown: fewer than 3 trials: nothing to follow over a search yet" in text
    assert "<svg" not in text


def test_convergence_by_wall_time_follows_when_trials_ended(tmp_path: Path) -> None:
    """Parallel trials end out of trial order: the wall-time line is ordered by end time."""
    w = Workload("toy")
    with Database(tmp_path / "par.db") as db:
        for a, t, ended in ((1, 5.0, 30.0), (2, 1.0, 20.0), (3, 3.0, 10.0)):
            db.record(w, Measurement(Config(a=a), Status.OK, (t,), started_at=0.0,
                                     ended_at=ended), strategy="model")
        (s,) = analyse(db, w).series
    assert s.best_ms == [5.0, 1.0, 1.0]  # by trial number
    assert s.seconds == [10.0, 20.0, 30.0] and s.best_by_time == [3.0, 1.0, 1.0]


def test_a_best_time_of_zero_ms_is_reported_not_divided_by(tmp_path: Path, capsys) -> None:
    """A recorded space may hold 0 ms (below its timer's resolution): a trial can be measured
    so, and the report of it is written, with the top table's ratios left out."""
    w = Workload("toy")
    db = tmp_path / "zero.db"
    with Database(db) as d:
        for a, t in ((1, 0.0), (2, 0.5), (3, 0.0)):
            d.record(w, Measurement(Config(a=a), Status.OK, (t,)), strategy="random")
    out = tmp_path / "zero.html"
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    assert "wrote the report of 1 workload" in capsys.readouterr().err
    rows = re.findall(r"<tr class='(?:chosen)?'>.*?</tr>", out.read_text())
    assert len(rows) == 3
    assert "<td class='n'>+0.0%</td>" in rows[0] and "<td class='n'>-</td>" in rows[2]


def test_dollar_signs_in_values_and_strategies_are_text_not_tex(tmp_path: Path) -> None:
    """Config values and strategy names are recorded data: a "$" in them is drawn as it is
    (matplotlib would typeset "$x$" as TeX, and fail on "$\\frac$"), and the page escapes
    HTML in them."""
    w = Workload("toy")
    db = tmp_path / "dollar.db"
    with Database(db) as d:
        for i in range(30):
            cfg = Config(a=["$\\frac$", "$x$", "<script>y</script>"][i % 3], b=i % 4)
            d.record(w, Measurement(cfg, Status.OK, (1.0 + (i % 3) + 0.1 * (i % 4),)),
                     strategy="$\\frac{$" if i < 15 else "random")
    out = tmp_path / "dollar.html"
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    text = out.read_text()
    assert figures(text)["effects"] and figures(text)["convergence-trials"]
    assert "$\\frac$" in text and "$\\frac{$" in text  # the tick label and the legend
    assert text.count("<script") == 1 and "&lt;script&gt;y&lt;/script&gt;" in text


def test_parameter_names_that_are_not_identifiers_are_reported(tmp_path: Path) -> None:
    """A database takes configs of any parameter names (a json import, Database.record without
    a space): the report of it is written, the model sections naming them as recorded."""
    w = Workload("toy")
    db = tmp_path / "names.db"
    with Database(db) as d:
        for i in range(30):
            cfg = Config({"block-size": i % 5, "x y": i % 3, "_recorded0": i % 2})
            d.record(w, Measurement(cfg, Status.OK, (1.0 + (i % 5) ** 2 + 0.01 * i,)),
                     strategy="random")
    with Database(db, create=False) as d:
        r = analyse(d, w)
    assert next(iter(r.importances)) == "block-size"
    assert set(r.importances) == {"block-size", "x y", "_recorded0"} and r.quality
    out = tmp_path / "names.html"
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    assert "<th>block-size</th>" in out.read_text()


def test_a_long_search_is_drawn_with_every_new_best_and_a_spread_of_the_rest() -> None:
    """A workload of 20,000 trials drew 20,000 markers (a report of 100k trials was 20 MB):
    the plots now draw each new best and at most a few thousand others, and its step lines
    only where they change (the same lines)."""
    from tunex.db._records import Trial
    from tunex.report import _plots
    from tunex.report._analysis import Series, WorkloadReport

    w = Workload("k", problem={"n": 1})
    rng = np.random.default_rng(0)
    values = 1.0 + rng.random(20_000)
    values[[5, 700, 19_990]] = [0.9, 0.5, 0.1]  # new bests, one near the end
    trials = [Trial(i + 1, w, Measurement(Config(x=i), Status.OK, (float(v),)), "random", 0.0)
              for i, v in enumerate(values)]
    best = np.minimum.accumulate(values).tolist()
    r = WorkloadReport(w, trials, [], {}, None,
                       [Series("random", best, list(map(float, range(20_000))), best)],
                       {}, {}, [], {})
    svg = _plots.over_search(r)
    drawn = svg.count("<use ")  # one per marker (and per tick mark)
    assert _plots._POINTS <= drawn < _plots._POINTS + 400  # not 20,000
    assert "each new best and the rest evenly spaced" in svg
    xs, ys = _plots._changes(list(range(1, 20_001)), best)
    assert ys[-1] == 0.1 and xs[-1] == 20_000 and len(xs) < 100  # the steps, unchanged
    assert all(best[x - 1] == y for x, y in zip(xs, ys))
    assert _plots.convergence_trials(r).count("<path") < 100
