from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from tests._data import recorded
from tunex import (
    Budget,
    BudgetError,
    Config,
    ConfigError,
    Database,
    Measurement,
    Status,
    Tuner,
    Workload,
)
from tunex.cluster import InlineExecutor
from tunex.search import SearchStrategy
from tunex.space import Int, Space
from tunex.targets._base import Target
from tunex.targets.replay import ReplayTarget
from tunex.trial import Artifact


@pytest.mark.parametrize("text,seconds,trials", [
    ("2h", 7200, None), ("90m", 5400, None), ("45s", 45, None), ("1h30m", 5400, None),
    ("500trials", None, 500), ("2h,500trials", 7200, 500), ("1trial", None, 1),
])
def test_budget_parse(text, seconds, trials):
    b = Budget.parse(text)
    assert (b.seconds, b.trials) == (seconds, trials)


@pytest.mark.parametrize("text", ["", "2 hours", "fast", "10x", "h2"])
def test_budget_parse_errors(text):
    with pytest.raises(BudgetError, match="budget"):
        Budget.parse(text)


@pytest.mark.parametrize("kwargs", [
    {"trials": 0}, {"trials": -3}, {"trials": 2.5}, {"trials": True}, {"trials": "5"},
    {"seconds": -1}, {"seconds": 0}, {"seconds": float("nan")}, {"seconds": "2h"},
])
def test_a_budget_built_directly_is_checked_as_a_parsed_one(kwargs):
    """Budget(trials=-3) ran no trial and reported "trial budget"; Budget("2h") crashed the
    search with a TypeError; Budget(seconds=nan) was no limit at all."""
    with pytest.raises(BudgetError, match="Budget"):
        Budget(**kwargs)
    assert Budget(seconds=90, trials=5) == Budget.parse("90s,5trials")
    assert Budget() == Budget(None, None)  # no limit, as documented


class FlakyTarget(Target):
    """A toy target where some configs fail to build, some crash, and the rest are timed."""

    name = "toy"
    noisy = False

    def __init__(self) -> None:
        self.measured: list[Config] = []

    def fingerprint(self):
        return {"device": "toy"}

    def build(self, workload, config):
        if config["a"] == 3:
            return Artifact(workload, config, Status.COMPILE_ERROR, error="does not compile")
        return Artifact(workload, config)

    def measure(self, artifact):
        c = artifact.config
        self.measured.append(c)
        if c["b"] == 0:
            raise RuntimeError("kernel crashed")
        return Measurement(c, Status.OK, (float(abs(c["a"] - 6) + abs(c["b"] - 2) + 1),))


def toy_space() -> Space:
    return Space([Int("a", 0, 9), Int("b", 0, 4)])


@pytest.mark.parametrize("kwargs", [
    {"patience": 0}, {"patience": -1}, {"patience": 2.5}, {"batch": -1}, {"batch": 0},
    {"batch": "4"}, {"remeasure": -1}, {"remeasure": None},
])
def test_nonsense_loop_settings_are_refused(kwargs):
    """patience=0 or batch=-1 ran no trial at all, and the result said 'no improvement in 0
    trials' or 'trial budget'; remeasure=-1 measured a trial past the budget."""
    from tunex import ConfigError

    target = FlakyTarget()
    with pytest.raises(ConfigError, match=f"Tuner {next(iter(kwargs))}="):
        Tuner(target, toy_space(), workload=Workload("toy"), budget="5trials", **kwargs)
    result = Tuner(target, toy_space(), workload=Workload("toy"), budget="5trials",
                   strategy="random", patience=None, batch=None, remeasure=0).run()
    assert result.new_trials == 5


@pytest.mark.parametrize("kwargs, says", [
    ({"db": "x.db"}, "Tuner db='x.db': give a tunex.db.Database"),
    ({"strategy": None}, "strategy None: give a strategy's name"),
    ({"first": [{"a": 1, "b": 0}]}, "Tuner first=.*give tunex.trial.Config"),
])
def test_api_arguments_of_the_wrong_kind_say_what_to_give(kwargs, says):
    """Each once failed deep inside with an AttributeError or TypeError."""
    from tunex.errors import TunexError
    from tunex.targets import make_target

    with pytest.raises(TunexError, match=says):
        Tuner(FlakyTarget(), toy_space(), workload=Workload("toy"), **kwargs)
    with pytest.raises(TunexError, match="give a target's spec"):
        make_target(None)  # type: ignore[arg-type]


def test_failures_are_recorded_and_search_goes_on(tmp_path):
    target = FlakyTarget()
    w = Workload("toy", problem={"n": 1}, target=target.fingerprint())
    with Database(tmp_path / "t.db") as db:
        res = Tuner(target, toy_space(), workload=w, db=db, strategy="exhaustive",
                    budget="50trials").run()
        assert res.trials == 50 == db.count(w)
        statuses = {m.config: m.status for m in db.measurements(w)}
        assert statuses[Config(a=3, b=1)] is Status.COMPILE_ERROR
        assert statuses[Config(a=1, b=0)] is Status.RUNTIME_ERROR
        assert res.best is not None and res.best.config == Config(a=6, b=2)
        assert res.failures["compile_error"] == 5 and res.failures["runtime_error"] == 9


def test_every_trial_is_in_the_db_the_moment_it_ends(tmp_path):
    target = FlakyTarget()
    w = Workload("toy", target=target.fingerprint())
    path = tmp_path / "t.db"
    seen = []

    def on_trial(m, number):
        with Database(path) as other:  # another connection sees it already
            seen.append((number, other.count(w)))

    with Database(path) as db:
        Tuner(target, toy_space(), workload=w, db=db, strategy="random", seed=0,
              budget="10trials", on_trial=on_trial).run()
    assert seen == [(i, i) for i in range(1, 11)]


def test_interrupted_search_resumes_without_repeating(tmp_path):
    target = FlakyTarget()
    w = Workload("toy", target=target.fingerprint())
    path = tmp_path / "t.db"

    def stop_at_7(m, number):
        if number == 7:
            raise KeyboardInterrupt

    with Database(path) as db:
        res = Tuner(target, toy_space(), workload=w, db=db, strategy="model", seed=1,
                    budget="30trials", on_trial=stop_at_7).run()
    assert res.stopped == "interrupted" and res.trials == 7
    with Database(path) as db:
        res = Tuner(target, toy_space(), workload=w, db=db, strategy="model", seed=1,
                    budget="30trials").run()
        assert res.trials == 30 and res.new_trials == 23
        configs = [m.config for m in db.measurements(w)]
    assert len(configs) == len(set(configs)) == 30
    assert len(target.measured) == len(set(target.measured))


def test_stop_ends_a_search_as_interrupted_even_when_the_interrupt_is_swallowed(tmp_path):
    """`Tuner.stop()` (what the CLI's Ctrl-C handler calls before raising) ends the search at
    its next step, so a KeyboardInterrupt that Python drops still stops it."""
    target = FlakyTarget()
    w = Workload("toy", target=target.fingerprint())
    tuner: Tuner

    def swallowed_ctrl_c(m, number):
        if number == 5:
            tuner.stop()  # the handler's first step; its raise is "lost" here

    with Database(tmp_path / "t.db") as db:
        tuner = Tuner(target, toy_space(), workload=w, db=db, strategy="random", seed=1,
                      budget="30trials", on_trial=swallowed_ctrl_c)
        res = tuner.run()
        assert res.stopped == "interrupted" and res.trials == 5 == db.count(w)


def test_strategy_exhaustion_and_repeats_cost_no_trial(tmp_path):
    target = FlakyTarget()
    small = Space([Int("a", 5, 7), Int("b", 1, 2)])
    w = Workload("toy", target=target.fingerprint())
    with Database(tmp_path / "t.db") as db:
        res = Tuner(target, small, workload=w, db=db, strategy="random", seed=0,
                    budget="100trials").run()
        assert res.trials == 6 and res.stopped == "strategy exhausted"
        res2 = Tuner(target, small, workload=w, db=db, strategy="random", seed=0,
                     budget="100trials").run()
        assert res2.new_trials == 0 and res2.trials == 6


def test_replay_search_with_time_budget():
    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    res = Tuner(t, t.space, budget="2s", strategy="random", seed=0).run()
    assert res.stopped == "time budget" and res.trials > 10
    assert res.seconds < 10


def test_the_time_budget_counts_from_the_given_start():
    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    res = Tuner(t, t.space, budget="1s", strategy="random", seed=0,
                started=time.monotonic() - 5.0).run()
    assert res.stopped == "time budget" and res.new_trials == 0 and res.seconds >= 5.0
    later = Tuner(t, t.space, budget="1s", strategy="random", seed=0,
                  started=time.monotonic() + 60.0).run()  # a start in the future: now
    assert later.stopped == "time budget" and later.new_trials > 0 and later.seconds < 30.0


def test_noisy_target_remeasures_close_leaders(tmp_path):
    t = ReplayTarget(recorded("dedispersion/A100.json.gz"), noisy=True, seed=0)
    with Database(tmp_path / "r.db") as db:
        res = Tuner(t, t.space, db=db, strategy="model", seed=0, budget="40trials",
                    remeasure=4).run()
        rows = db.export_rows(t.workload())
    assert res.trials == 40
    strategies = [r["strategy"] for r in rows]
    assert strategies.count("remeasure") == 4 and strategies.count("model") == 36


class _SlowReplay(ReplayTarget):
    """A replay whose every measurement takes ``delay`` seconds, as hardware would."""

    delay = 0.05

    def measure(self, artifact):
        time.sleep(self.delay)
        return super().measure(artifact)


def test_remeasures_fit_inside_a_time_budget(tmp_path):
    """The close leaders were remeasured after the time budget ran out: up to 4 trials past
    it. Their share of the budget is now kept aside (the run's median time per trial each, at
    most a twentieth of the budget)."""
    t = _SlowReplay(recorded("dedispersion/A100.json.gz"), noisy=True, seed=0)
    with Database(tmp_path / "r.db") as db:
        res = Tuner(t, t.space, db=db, strategy="random", seed=0, budget="4s",
                    remeasure=4).run()
        rows = db.export_rows(t.workload())
    assert res.stopped == "time budget"
    assert res.seconds <= 4.0 + 3 * t.delay  # about one trial past the end at most, not four
    assert [r["strategy"] for r in rows].count("remeasure") >= 2
    assert [r["strategy"] for r in rows].count("random") >= 5


def test_transfer_warm_start_from_other_workloads(tmp_path):
    src = ReplayTarget(recorded("convolution/A4000.json.gz"))
    dst = ReplayTarget(recorded("convolution/A100.json.gz"))
    with Database(tmp_path / "x.db") as db:
        Tuner(src, src.space, db=db, strategy="random", seed=0, budget="150trials").run()
        tuner = Tuner(dst, dst.space, db=db, strategy="model", seed=0, budget="5trials",
                      prior=False)  # the database's workloads alone, not the shipped ones
        res = tuner.run()
        assert tuner.strategy._other is not None  # trained on the A4000 trials
        assert db.count(dst.workload()) == 5
        # the result says what the search took from the other workload
        assert res.transfer is not None and res.transfer["used"] == 1
        assert res.transfer["trials"] == 150 and len(res.transfer["first"]) == 2
        # each of those first configs is recorded with why it was tried, and the report says so
        first = {Config(c) for c in res.transfer["first"]}
        marked = {t.measurement.config for t in db.trials(dst.workload())
                  if t.measurement.facts.get("origin") == "another workload's best"}
        assert marked == first
        from tunex.report import render_report

        assert "model (another workload&#x27;s best)" in render_report(db, dst.workload())
        cold = Tuner(dst, dst.space, db=db, strategy="model", seed=0, budget="5trials",
                     transfer=False).run()
        assert cold.transfer is None
        blind = Tuner(dst, dst.space, db=db, strategy="random", seed=0, budget="5trials").run()
        assert blind.transfer is not None and blind.transfer["used"] == 0
        assert "does not learn from other workloads" in blind.transfer["why"]
        assert len(db.workloads()) == 2
        assert json.loads(json.dumps(dst.workload().target))["device"].startswith("NVIDIA A100")


def test_trials_of_an_earlier_space_of_the_workload_join_the_warm_start(tmp_path, caplog):
    """The space gains a parameter: the workload's trials recorded before are no points of it,
    so they are not resumed (nothing counts as measured, nor spends the trial budget, nor can
    be the winner), but the model learns from them."""
    target = FlakyTarget()
    w = Workload("toy", target=target.fingerprint())
    grown = Space([Int("a", 0, 9), Int("b", 0, 4), Int("c", 0, 2)])
    with Database(tmp_path / "g.db") as db:
        Tuner(target, toy_space(), workload=w, db=db, strategy="random", seed=0,
              budget="20trials").run()
        tuner = Tuner(target, grown, workload=w, db=db, strategy="model", seed=0,
                      budget="3trials")
        res = tuner.run()
        assert "20 recorded trials of toy have configs outside the space" in caplog.text
        assert res.new_trials == 3 and res.trials == 3 and len(tuner.strategy.history) == 3
        assert res.best is not None and res.best.config in grown
        assert res.transfer is not None and res.transfer["used"] == 1
        assert res.transfer["other_space"] == 1 and res.transfer["trials"] == 20
        assert tuner.strategy._other is not None and len(tuner.strategy._other[1]) == 20
        assert db.best(w) is not None and db.best(w).config not in grown  # older, faster
        cold = Tuner(target, grown, workload=w, db=db, strategy="model", seed=0,
                     budget="4trials", transfer=False).run()
        assert cold.transfer is None and cold.trials == 4 and db.count(w) == 24


def test_a_kernel_named_like_another_starts_from_its_trials(tmp_path, caplog):
    """A matmul with TMA, searched for the first time, learns from the plain matmul's trials
    when told it is like it (their configs lack its SUBTILE and FLATTEN), trusted as its own;
    unnamed, the plain matmul measured on the same device joins as a related kernel, trusted
    less; with ``related=False`` it starts cold, listing what ``like`` could name; a kernel
    name that is not a list is refused."""
    data = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
    plain = ReplayTarget(data / "matmul_H200_1024x1024x1024.json.gz")
    tma = ReplayTarget(data / "matmul_tma_H200_1024x1024x1024.json.gz")
    with Database(tmp_path / "l.db") as db:
        Tuner(plain, plain.space, db=db, prior=False, strategy="random", seed=0,
              budget="30trials").run()
        cold = Tuner(tma, tma.space, db=db, prior=False, strategy="model", seed=0,
                     budget="2trials",
                     related=False).run()
        assert cold.transfer == {"workloads": 0, "used": 0,  # none of its own kernel:
                                 "like_candidates": ["matmul"]}  # what like= could name
        guessed = Tuner(tma, tma.space, db=db, prior=False, strategy="model", seed=0,
                        budget="3trials").run()
        assert guessed.transfer is not None and guessed.transfer["used"] == 1
        assert guessed.transfer["related"] == ["matmul"] and guessed.transfer["keep"] == "above"
        tuner = Tuner(tma, tma.space, db=db, prior=False, strategy="model", seed=0,
                      budget="4trials",
                      like=["matmul", "matmul_tma"])
        res = tuner.run()
        assert res.transfer is not None and res.transfer["used"] == 1
        assert res.transfer["kernels"] == ["matmul"] and res.transfer["related"] == []
        assert res.transfer["keep"] == "chance" and res.transfer["other_space"] == 1
        assert tuner.strategy._other is not None and len(tuner.strategy._other[1]) == 30
        Tuner(tma, tma.space, db=db, prior=False, strategy="model", seed=0, budget="5trials",
              like=["matmul_v2"]).run()
        assert "like 'matmul_v2': no workload of that kernel in the database" in caplog.text
    with pytest.raises(ConfigError, match="list of kernel names"):
        Tuner(tma, tma.space, like="matmul")


def test_a_first_search_takes_related_kernels_of_its_own_device_only(tmp_path):
    """On a kernel's first search, a kernel whose space names most of its parameters joins the
    warm start only where it was measured on the same device (a dedispersion on the MI250X for
    a convolution on the MI250X, not for one on the A100, which lists it instead)."""
    ded = ReplayTarget(recorded("dedispersion/MI250X.json.gz"))
    same = ReplayTarget(recorded("convolution/MI250X.json.gz"))
    other = ReplayTarget(recorded("convolution/A100.json.gz"))
    assert ded.workload().device == same.workload().device != other.workload().device
    for target in (other, same):
        with Database(tmp_path / f"{target.path.name}.db") as db:
            Tuner(ded, ded.space, db=db, strategy="random", seed=0, budget="20trials").run()
            res = Tuner(target, target.space, db=db, strategy="model", seed=0,
                        budget="2trials", prior=False).run()
            if target is other:
                assert res.transfer == {"workloads": 0, "used": 0,
                                        "like_candidates": ["dedispersion_kernel"]}
            else:
                assert res.transfer is not None and res.transfer["used"] == 1
                assert res.transfer["related"] == ["dedispersion_kernel"]
                assert res.transfer["trials"] == 20 and res.transfer["keep"] == "above"


def test_related_kernels_join_a_warm_start_beside_the_kernels_own(tmp_path):
    """Where the database holds other workloads of this kernel, the kernels a first search
    would list as like= candidates (their spaces name most of its parameters) warm-start it
    too; related=False leaves them out."""
    data = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
    plain = ReplayTarget(data / "matmul_H200_1024x1024x1024.json.gz")
    tma = [ReplayTarget(data / f"matmul_tma_H200_{shape}.json.gz")
           for shape in ("4096x4096x4096", "1024x1024x1024", "512x4096x1024")]
    with Database(tmp_path / "r.db") as db:
        Tuner(plain, plain.space, db=db, prior=False, strategy="random", seed=0,
              budget="30trials").run()
        Tuner(tma[0], tma[0].space, db=db, prior=False, strategy="random", seed=0,
              budget="30trials").run()
        res = Tuner(tma[1], tma[1].space, db=db, prior=False, strategy="model", seed=0,
                    budget="3trials").run()
        assert res.transfer is not None and res.transfer["workloads"] == 2
        assert res.transfer["related"] == ["matmul"] and res.transfer["kernels"] == ["matmul"]
        off = Tuner(tma[2], tma[2].space, db=db, prior=False, strategy="model", seed=0,
                    budget="3trials",
                    related=False).run()
        assert off.transfer is not None and off.transfer["workloads"] == 2  # its own two
        assert off.transfer["related"] == [] and off.transfer["kernels"] == []


def test_default_executor_is_inline():
    assert Tuner(FlakyTarget(), toy_space(), workload=Workload("toy")).executor.__class__ is (
        InlineExecutor)


def test_tiny_budget_on_a_noisy_target_still_searches():
    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"), noisy=True, seed=0)
    res = Tuner(t, t.space, budget="3trials", strategy="random", seed=0, remeasure=4).run()
    assert res.trials == 3 and res.proposals == 3  # no trials lost to re-measuring


def test_first_configs_are_measured_before_the_strategy_proposes(tmp_path):
    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    first = [t.space.at(5), t.space.at(0)]
    with Database(tmp_path / "f.db") as db:
        res = Tuner(t, t.space, budget="4trials", strategy="random", seed=0, remeasure=0,
                    first=[*first, first[0]], db=db).run()
        assert [m.config for m in db.measurements(res.workload)][:2] == first
        assert res.new_trials == 4


def test_first_configs_build_while_the_warm_start_runs(tmp_path):
    """The given configs need no strategy: the first batch of them is submitted (the workers
    start, the default config compiles) before the other workloads are read and fitted, and
    an error of the warm start ends their trials and claims with it."""
    from tunex.cluster import CallerExecutor
    from tunex.search._model import ModelSearch

    src = ReplayTarget(recorded("convolution/A4000.json.gz"))
    dst = ReplayTarget(recorded("convolution/A100.json.gz"))
    first = [dst.space.at(7), dst.space.at(3)]
    ex = CallerExecutor(dst)
    submitted: list[Config] = []
    submit = ex.submit
    ex.submit = lambda w, c: submitted.append(c) or submit(w, c)  # type: ignore[method-assign]
    seen: list[list[Config]] = []

    class Watched(ModelSearch):
        def warm_start(self, others, current=None, guessed=()):
            seen.append(list(submitted))
            super().warm_start(others, current=current, guessed=guessed)

    with Database(tmp_path / "w.db") as db:
        Tuner(src, src.space, db=db, strategy="random", seed=0, budget="30trials").run()
        res = Tuner(dst, dst.space, db=db, strategy=Watched(dst.space, seed=0), batch=1,
                    budget="4trials", first=first, executor=ex, remeasure=0,
                    prior=False).run()
        assert seen == [[first[0]]]  # the batch's one given config, the second waits
        assert [m.config for m in db.measurements(res.workload)][:2] == first
        assert res.transfer is not None and res.transfer["used"] == 1

        class Broken(ModelSearch):
            def warm_start(self, others, current=None, guessed=()):
                raise RuntimeError("no model today")

        other = ReplayTarget(recorded("convolution/MI250X.json.gz"))
        with pytest.raises(RuntimeError, match="no model today"):
            Tuner(other, other.space, db=db, strategy=Broken(other.space, seed=0),
                  budget="4trials", first=[other.space.at(0)], remeasure=0).run()
        # its claim released: a later search of that workload runs its whole budget
        again = Tuner(other, other.space, db=db, strategy="random", seed=0, budget="3trials",
                      remeasure=0, transfer=False).run()
        assert again.new_trials == 3


def test_a_strategy_that_only_repeats_measured_configs_stops(tmp_path):
    from tunex.search import SearchStrategy

    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))

    class Stuck(SearchStrategy):
        name = "stuck"

        def _ask(self, n):
            return [self.space.at(0)]

        def _fresh(self, config):
            return True

    res = Tuner(t, t.space, budget="50trials", strategy=Stuck(t.space), remeasure=0).run()
    assert res.new_trials == 1 and res.stopped == "strategy repeats measured configs only"


def test_a_config_proposed_twice_at_once_is_measured_once(tmp_path):
    """A strategy (a user's, registered by name) that proposes one config twice in a batch,
    or again while it runs, gets one trial of it, not two."""
    from tunex.search import SearchStrategy

    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))

    class Twice(SearchStrategy):
        name = "twice"

        def _ask(self, n):
            c = self._random_fresh(1)
            return None if c is None else [c[0], c[0], *self.pending][:max(n, 2)]

    with Database(tmp_path / "d.db") as db:
        res = Tuner(t, t.space, db=db, budget="12trials", strategy=Twice(t.space, seed=0),
                    batch=4, remeasure=0).run()
        configs = [m.config for m in db.measurements(res.workload)]
    assert len(configs) == len(set(configs)) == res.new_trials == 12


def test_an_executor_is_bound_to_its_target_at_construction():
    from tunex.errors import ConfigError

    t, other = FlakyTarget(), FlakyTarget()
    ex = InlineExecutor(t)
    default = toy_space().default()
    assert ex.submit(Workload("toy"), default).result().config == default
    with pytest.raises(ConfigError, match="another target"):
        Tuner(other, toy_space(), workload=Workload("toy"), executor=ex)


def test_first_configs_in_flight_are_not_proposed_again(tmp_path):
    from tunex.cluster import CallerExecutor

    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    first = [t.space.at(2), t.space.at(1), t.space.at(0)]
    with Database(tmp_path / "p.db") as db:  # one trial ends per wait: the others in flight
        res = Tuner(t, t.space, budget="6trials", strategy="exhaustive", batch=4, remeasure=0,
                    first=first, db=db, executor=CallerExecutor(t)).run()
        configs = [m.config for m in db.measurements(res.workload)]
    assert configs[:3] == first and len(configs) == 6 == len(set(configs))


# -- mutation gaps (issue: hardening): behaviour the suite could not see break -----------------


def test_a_noisy_replay_draws_every_recorded_repeat():
    """Noise must be the recorded noise: every repeat is drawn, in proportion (a replay drawing
    only from part of the repeats would bias every noisy search)."""
    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"), noisy=True, seed=3)
    space, wl = t.prepare(None, {})
    config = next(c for c in space if len(t._entry(c).get("times") or []) >= 5)
    times = sorted(t._entry(config)["times"])
    art = t.build(wl, config)
    drawn = Counter(t.measure(art).times_ms[0] for _ in range(400 * len(times)))
    assert set(drawn) == set(times)
    assert min(drawn.values()) > 400 * 0.6  # each about equally often


class _Spy(SearchStrategy):
    """Proposes the space in order whatever it was told (as a strategy that does not track
    history would), and notes what it knew at its first ask."""

    name = "spy"

    def __init__(self, space, seed=None):
        super().__init__(space, seed=seed)
        self.known_at_first_ask: int | None = None
        self.i = 0

    def _ask(self, n):
        if self.known_at_first_ask is None:
            self.known_at_first_ask = len(self.history)
        out = [self.space.at(j) for j in range(self.i, min(self.i + n, self.space.size))]
        self.i += len(out)
        return out or None


def test_resuming_tells_the_record_and_never_measures_a_config_twice():
    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))
    db = Database("sqlite://")
    first = Tuner(t, t.space, db=db, strategy=_Spy(t.space), budget="12trials").run()
    assert first.trials == 12
    spy = _Spy(t.space)
    again = Tuner(t, t.space, db=db, strategy=spy, budget="30trials").run()
    assert spy.known_at_first_ask == 12  # told the record before asking
    configs = [m.config for m in db.measurements(again.workload)]
    assert len(configs) == 30 and len(set(configs)) == 30
    assert again.new_trials == 18


def test_the_progress_line_says_best_trial_failures_in_flight_and_workers():
    from tunex.cluster import Activity
    from tunex.tuner import _Progress

    now: list[Activity | None] = [Activity(4, 2, 1, {"gpu0": 1, "gpu1": 0})]

    def activity() -> Activity | None:
        if now[0] is None:
            raise RuntimeError("executor gone")
        return now[0]

    bar = _Progress(True, Budget(None, 10), 0, activity)
    try:
        bar.update(1, Measurement(Config(a=1), Status.OK, (2.0,), worker="gpu0"), 1, 3)
        bar.update(2, Measurement(Config(a=2), Status.OK, (1.0,), worker="gpu1"), 2, 3)
        bar.update(3, Measurement.failed(Config(a=3), Status.TIMEOUT, "hung"), 3, 2)
        fields = bar.p.tasks[0].fields
        assert fields["best"] == "best 1 ms (trial 2)"
        assert fields["detail"] == "2 in flight | failed: timeout 1 | gpu0:1 gpu1:1"
        assert bar.p.tasks[0].completed == 3 and bar.p.tasks[0].total == 10
        # builds and measurements per device, asked of the executor at each refresh
        column = bar.p.columns[-1]
        assert column.render(bar.p.tasks[0]).plain == (
            "| builds: 4 queued, 2 running; measuring: gpu0 1, gpu1 0, 1 built waiting")
        now[0] = Activity(0, 1, 0, {"gpu0": 0, "gpu1": 1})
        assert "builds: 0 queued, 1 running; measuring: gpu0 0, gpu1 1" in column.render(
            bar.p.tasks[0]).plain
        now[0] = None  # a failing executor blanks the column, never the search
        assert column.render(bar.p.tasks[0]).plain == ""
    finally:
        bar.close()


def test_trials_that_ended_beside_a_target_error_are_recorded(tmp_path):
    """Several trials end at once and one of them fails the target (a TargetError: the device
    cannot measure at all): the search stops with that error, but the others, finished, were
    left unrecorded when the error came first."""
    from concurrent.futures import Future

    from tunex.cluster import Executor
    from tunex.errors import TargetError

    t = ReplayTarget(recorded("pnpoly/RTX_2080_Ti.json.gz"))

    class AtOnce(Executor):
        """Every trial in flight ends in one wait, the first one with a TargetError."""

        slots = 4
        target = t

        def __init__(self):
            self.pending = []

        def submit(self, workload, config):
            fut = Future()
            self.pending.append((fut, workload, config))
            return fut

        def wait(self, futures, timeout=None):
            for i, (fut, workload, config) in enumerate(self.pending):
                if i == 0:
                    fut.set_exception(TargetError("the device is gone"))
                else:
                    fut.set_result(t.measure(t.build(workload, config)))
            ended, self.pending = [f for f, _, _ in self.pending], []
            return ended  # in the order they ended

    with Database(tmp_path / "e.db") as db:
        tuner = Tuner(t, t.space, db=db, budget="10trials", strategy="random", seed=0,
                      executor=AtOnce(), remeasure=0)
        with pytest.raises(TargetError, match="device is gone"):
            tuner.run()
        assert db.count(tuner.workload) == 3


def test_configs_a_concurrent_search_claimed_and_left_are_measured_here(tmp_path):
    """Another search of the workload claimed configs and stopped (its time budget, Ctrl-C,
    kill -9) without measuring them: this search, its strategy done, waited for them forever
    (or until its time budget ended), and they were never measured."""
    from tunex.db._records import claim_owner
    from tunex.space import Space

    t = FlakyTarget()
    space = Space([Int("a", 0, 5), Int("b", 2, 2)])
    wl = Workload("toy")
    with Database(tmp_path / "c.db") as db:
        other = claim_owner()  # a live search of this host (this process)
        claimed = [Config(a=2, b=2).key, Config(a=3, b=2).key]
        assert len(db.claim(wl, claimed, owner=other).granted) == 2

        def stop_other(m, number):  # once this search has found both claimed by the other
            if number == 4:
                db.release(other)

        res = Tuner(t, space, workload=wl, db=db, strategy="exhaustive", remeasure=0,
                    budget="60s,100trials", on_trial=stop_other).run()
        assert res.stopped == "strategy exhausted"
        assert sorted(m.config["a"] for m in db.measurements(wl)) == list(range(6))


def test_a_trial_budget_is_spent_whole_when_no_trial_succeeds():
    """One trial of the budget is kept to re-measure the leaders; with no trial ok there is
    none, and the search stopped at 9 of 10 saying "trial budget"."""

    class AlwaysFails(Target):
        name = "fails"

        def fingerprint(self):
            return {"device": "toy"}

        def build(self, workload, config):
            return Artifact(workload, config)

        def measure(self, artifact):
            return Measurement.failed(artifact.config, Status.RUNTIME_ERROR, "boom")

    w = Workload("toy", "", {"N": 1}, {"device": "toy"})
    with Database(":memory:") as db:
        r = Tuner(AlwaysFails(), Space([Int("B", 1, 64)]), workload=w, db=db,
                  budget="10trials", strategy="random", seed=1).run()
        assert (r.stopped, r.trials, db.count(w)) == ("trial budget", 10, 10)


def test_a_config_whose_worker_was_lost_is_measured_again_once_when_the_search_resumes(
        tmp_path):
    """A service gone or a board rebooting left its configs recorded as worker_lost, and a
    resumed search never measured them again (the claims counted them as measured)."""

    class Flaky(Target):
        name = "flaky"
        noisy = False

        def __init__(self, lose):
            self.lose = lose

        def fingerprint(self):
            return {"device": "toy"}

        def build(self, workload, config):
            return Artifact(workload, config)

        def measure(self, artifact):
            c = artifact.config
            if c["B"] in self.lose:
                return Measurement.failed(c, Status.WORKER_LOST, "the service went away")
            return Measurement(c, Status.OK, (float(c["B"]),))

    space = Space([Int("B", 1, 6)])
    w = Workload("toy", "", {"N": 1}, {"device": "toy"})
    with Database(str(tmp_path / "r.db")) as db:
        Tuner(Flaky({1, 2}), space, workload=w, db=db, budget="6trials",
              strategy="exhaustive").run()
        # run again with a larger budget: 1 and 2 once more; 2 is lost again
        r = Tuner(Flaky({2}), space, workload=w, db=db, budget="8trials",
                  strategy="exhaustive").run()
        statuses = Counter((m.config["B"], m.status.value) for m in db.measurements(w))
        assert statuses == Counter({(1, "worker_lost"): 1, (1, "ok"): 1,
                                    (2, "worker_lost"): 2, (3, "ok"): 1, (4, "ok"): 1,
                                    (5, "ok"): 1, (6, "ok"): 1})
        assert r.best.config["B"] == 1
        # lost twice: measured, not tried again
        r = Tuner(Flaky(set()), space, workload=w, db=db, budget="20trials",
                  strategy="exhaustive").run()
        assert db.count(w) == 8 and r.stopped == "strategy exhausted"


class _FirstIsBest(FlakyTarget):
    """Every config builds, and every one after the first measures slower than it: no gain
    after trial 1."""

    def build(self, workload, config):
        return Artifact(workload, config)

    def measure(self, artifact):
        self.measured.append(artifact.config)
        return Measurement(artifact.config, Status.OK, (1.0 if len(self.measured) == 1 else 2.0,))


@pytest.mark.parametrize("batch,trials", [(1, 4), (8, 16)])
def test_patience_counts_the_trials_proposed_after_the_last_gain(batch, trials):
    """A batch asked before its first result cannot learn from a gain in it: with 8 in flight
    (measured together here), patience 3 stopped after the first batch, on 7 trials "without a
    gain" all proposed before the gain was known (what stalled the decorator on a GPU, 32 in
    flight); now the next batch, proposed after it, is measured. One in flight: the last 3
    trials, as before."""
    target = _FirstIsBest()
    space = Space([Int("a", 0, 63)])
    workload = Workload("k", problem={"n": 1}, target={"device": "toy"})
    result = Tuner(target, space, workload=workload, strategy="random", seed=0, batch=batch,
                   patience=3, remeasure=0, budget="40trials").run()
    assert result.stopped == "no improvement in 3 trials"
    assert len(target.measured) == trials


@pytest.mark.parametrize("args", [("",), (None,), ("k", {"n": 1}), ("k", "", [1]),
                                  ("k", "", {}, "gpu")])
def test_a_workload_of_the_wrong_types_is_refused_where_it_is_made(args):
    """Workload("k", {"n": 1}) (the problem given as the kernel hash) was accepted and failed
    deep in the database as "Error binding parameter 3: type 'dict' is not supported"."""
    with pytest.raises(TypeError, match="Workload"):
        Workload(*args)
