"""Every registered strategy through the same conformance checks, plus per-strategy behaviour."""

from __future__ import annotations

import math

import pytest

from tunex import Config, Measurement, Status, StrategyError
from tunex.search import available_strategies, get_strategy
from tunex.space import Choice, Int, Pow2, Space

SPECS = ["random", "exhaustive", "model", "optuna:tpe", "optuna:cmaes", "optuna:qmc",
         "optuna:random", "optuna:gp"]


def space() -> Space:
    return Space([Pow2("bx", 1, 64), Pow2("by", 1, 64), Int("t", 1, 4), Choice("alg", ["a", "b"])],
                 ["bx * by >= 8", "bx * by <= 512"])


def runtime(c: Config) -> float:
    """A smooth landscape with its optimum at bx*by = 64, t = 3, alg = b; t == 4 fails."""
    return (1 + abs(math.log2(c["bx"] * c["by"]) - 6) + abs(c["t"] - 3) * 0.5
            + (0.3 if c["alg"] == "a" else 0) + 0.05 * abs(math.log2(c["bx"]) - 3))


def measure(c: Config) -> Measurement:
    if c["t"] == 4:
        return Measurement.failed(c, Status.RUNTIME_ERROR, "out of resources")
    return Measurement(c, Status.OK, (runtime(c),))


def make(spec: str, s: Space, seed: int = 0):
    if spec == "optuna:gp":
        pytest.importorskip("torch")
    return get_strategy(spec, s, seed=seed)


def test_registry_lists_and_rejects():
    assert {"random", "exhaustive", "optuna", "model"} <= set(available_strategies())
    with pytest.raises(StrategyError, match="unknown search strategy"):
        get_strategy("nope", space())
    with pytest.raises(StrategyError, match="sampler"):
        get_strategy("optuna:nope", space())


def test_a_strategy_that_cannot_be_imported_names_the_missing_package(monkeypatch, tmp_path):
    from tunex.search import _base

    (tmp_path / "needs_extra.py").write_text("import no_such_extra_pkg\n")
    (tmp_path / "broken_inside.py").write_text("from tunex.trial import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(_base._REGISTRY, "x-extra", "needs_extra:S")
    monkeypatch.setitem(_base._REGISTRY, "x-broken", "broken_inside:S")
    with pytest.raises(StrategyError, match="pip install no_such_extra_pkg"):
        get_strategy("x-extra", space())
    # an import that fails inside tunex is a broken install, not a package to pip install
    with pytest.raises(StrategyError, match="install is incomplete") as err:
        get_strategy("x-broken", space())
    assert "pip install tunex.trial" not in str(err.value)


@pytest.mark.parametrize("spec", SPECS)
def test_conformance_valid_fresh_batches(spec):
    s = space()
    st = make(spec, s)
    seen: set[Config] = set()
    for _ in range(3 if spec == "optuna:gp" else 12):  # a GP ask costs seconds
        batch = st.ask(4)
        assert batch, f"{spec} stopped early"
        assert len(batch) <= 4 and len(set(batch)) == len(batch)
        for c in batch:
            assert c in s, f"{spec} proposed an invalid point {c}"
            assert c not in seen, f"{spec} proposed a measured point again"
            seen.add(c)
        st.tell([measure(c) for c in batch])
    assert st.proposals >= len(seen)


@pytest.mark.parametrize("spec", SPECS)
def test_conformance_deterministic_for_a_seed(spec):
    def run():
        st = make(spec, space(), seed=3)
        out = []
        for _ in range(2 if spec == "optuna:gp" else 5):
            b = st.ask(2)
            out += b
            st.tell([measure(c) for c in b])
        return out
    assert run() == run()


@pytest.mark.parametrize("spec", ["random", "exhaustive", "model", "optuna:tpe"])
def test_exhausts_a_small_space_then_returns_none(spec):
    s = Space([Int("a", 0, 4), Int("b", 0, 4)], ["a + b <= 3"])
    st = get_strategy(spec, s, seed=0)
    seen = set()
    for _ in range(200):
        b = st.ask(3)
        if b is None:
            break
        seen.update(b)
        st.tell([Measurement(c, Status.OK, (1.0 + c["a"],)) for c in b])
    assert seen == set(s)
    assert st.ask(1) is None


@pytest.mark.parametrize("spec", ["model", "optuna:tpe"])
def test_learning_strategies_beat_random(spec):
    s = space()
    opt = min(runtime(c) for c in s if c["t"] != 4)

    def trials_to_opt(sp: str, seed: int) -> int:
        st = get_strategy(sp, s, seed=seed)
        for n in range(1, s.size + 1):
            c = st.ask(1)[0]
            m = measure(c)
            st.tell([m])
            if m.ok and m.value <= opt * 1.0001:
                return n
        return s.size

    learned = sorted(trials_to_opt(spec, sd) for sd in range(5))[2]
    rand = sorted(trials_to_opt("random", sd) for sd in range(5))[2]
    assert learned < rand


def test_resume_by_telling_history_first():
    s = space()
    st = get_strategy("model", s, seed=0)
    past = [measure(c) for c in s.sample(30, rng=1)]
    st.tell(past)
    nxt = st.ask(5)
    assert not set(nxt) & {m.config for m in past}


@pytest.mark.parametrize("spec", [s for s in SPECS if s != "optuna:gp"])
def test_batches_exhaust_a_small_constrained_space_without_a_repeat(spec):
    """An Optuna sampler stuck on excluded points falls back to fresh random ones: in a batch
    (--batch 7) those could repeat a config already in that batch, measured twice."""
    s = Space([Pow2("bx", 1, 256), Pow2("by", 1, 256)], ["bx * by == 256"])  # 9 of 81 valid
    st = get_strategy(spec, s, seed=0)
    got: list[Config] = []
    while (b := st.ask(7)) is not None:
        got += b
        st.tell([Measurement(c, Status.OK, (float(c["bx"]),)) for c in b])
    assert len(got) == len(set(got)) and set(got) == set(s)


def test_optuna_never_sends_excluded_or_repeated_points():
    s = Space([Pow2("bx", 1, 256), Pow2("by", 1, 256)], ["bx * by == 256"])  # 9 of 81 valid
    st = get_strategy("optuna:tpe", s, seed=0)
    got = []
    while (b := st.ask(1)) is not None:
        got += b
        st.tell([Measurement(c, Status.OK, (float(c["bx"]),)) for c in b])
    assert sorted(got, key=lambda c: c["bx"]) == sorted(s, key=lambda c: c["bx"])
    assert st.proposals >= len(got)


def test_qmc_seeds_give_different_sequences():
    s = space()
    a = get_strategy("optuna:qmc", s, seed=0).ask(4)
    b = get_strategy("optuna:qmc", s, seed=1).ask(4)
    assert a != b


@pytest.mark.parametrize("spec", SPECS)
def test_a_seed_beyond_32_bits_is_taken_by_every_strategy(spec):
    """`tunex search --seed 99999999999999999999` (any seed >= 0 is allowed) seeds every
    strategy deterministically instead of ending in NumPy's 'Seed must be between 0 and
    2**32 - 1' traceback."""
    if spec == "optuna:cmaes":
        pytest.importorskip("cmaes")

    def run():
        st = make(spec, space(), seed=10**20 + 3)
        out = []
        for _ in range(2):
            b = st.ask(2)
            out += b
            st.tell([measure(c) for c in b])
        return out

    assert len(run()) == 4 and run() == run()


@pytest.mark.parametrize("spec", ["random", "exhaustive", "model", "optuna:tpe"])
@pytest.mark.parametrize("seed", [-1, 1.5, "a", True])
def test_a_seed_numpy_cannot_take_is_a_strategy_error(spec, seed):
    """seed=-1 crashed with NumPy's bare 'expected non-negative integer' (Tuner, decorator)."""
    with pytest.raises(StrategyError, match="is not a seed"):
        get_strategy(spec, space(), seed=seed)
    assert get_strategy(spec, space(), seed=2**40).seed == 2**40
