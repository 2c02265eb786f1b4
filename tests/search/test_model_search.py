"""The model strategy's own behaviour (issue 8): a space-filling start, the model followed only
as far as its held-out rank correlation says it predicts, and transfer that earns its place."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from tunex import Config, Measurement, Status, Workload
from tunex.search import get_strategy
from tunex.search._model import ModelSearch, rank_correlation
from tunex.space import Choice, Int, Pow2, Space


def space() -> Space:
    return Space([Pow2("bx", 1, 64), Pow2("by", 1, 64), Int("t", 1, 8), Choice("alg", ["a", "b"])],
                 ["bx * by >= 8", "bx * by <= 1024"])


def smooth(c: Config) -> float:
    return 1 + abs(math.log2(c["bx"] * c["by"]) - 6) + abs(c["t"] - 3) * 0.5 + (
        0.3 if c["alg"] == "a" else 0)


def scrambled(c: Config) -> float:
    """No structure a model can learn: a hash of the config."""
    return 1 + int(hashlib.sha256(c.key.encode()).hexdigest()[:8], 16) / 2**32


def search(strategy: ModelSearch, f, trials: int) -> list[float]:
    out = []
    for _ in range(trials):
        c = strategy.ask(1)[0]
        out.append(f(c))
        strategy.tell([Measurement(c, Status.OK, (out[-1],))])
    return out


def first(s: Space, seed: int, n: int = 10, **options) -> list[Config]:
    """The design's first ``n`` proposals on ``s`` (the model not yet checked), each told its
    :func:`smooth` time before the next."""
    st = get_strategy("model", s, seed=seed, n_init=n + 2, explore=0.0, **options)
    out = []
    for _ in range(n):
        c = st.ask(1)[0]
        st.tell([Measurement(c, Status.OK, (smooth(c),))])
        out.append(c)
    return out


def test_rank_correlation():
    y = np.array([1.0, 2.0, 3.0, np.inf])
    assert rank_correlation(-y, y) == pytest.approx(1.0)  # higher score = faster, fail last
    assert rank_correlation(y, y) == pytest.approx(-1.0)
    assert rank_correlation(np.ones(4), y) == 0.0


def test_initial_design_fills_the_space():
    """The first proposals spread over the valid points: their closest pair is farther apart
    than uniform samples' (on every seed)."""
    s = space()

    def closest(configs: list[Config]) -> float:
        X = s.encode(configs)
        X = (X - X.min(0)) / np.maximum(np.ptp(X, 0), 1e-9)
        d = ((X[:, None] - X[None]) ** 2).sum(-1)
        return float(d[np.triu_indices(len(X), 1)].min())

    for seed in range(5):
        st = get_strategy("model", s, seed=seed)
        design = [st.ask(1)[0] for _ in range(10)]
        uniform = s.sample(10, np.random.default_rng(seed))
        assert closest(design) > closest(uniform)


def test_the_design_does_not_run_from_the_best_on_small_spaces():
    """Where the design's pool is a large share of the space (``near_best``), a config within
    5% of the best so far no longer pushes the space-filling proposals away: they come nearer
    to it than with every measured config repelling. On a space of more than 2,048 points the
    option changes nothing."""

    def nearest(st: ModelSearch, best: Config, s: Space, n: int = 6) -> float:
        X = s.encode([st.ask(1)[0] for _ in range(n)] + [best])
        X = (X - X.min(0)) / np.maximum(np.ptp(X, 0), 1e-9)
        return float(((X[:-1] - X[-1]) ** 2).sum(-1).min())

    def told(s: Space, seed: int, **options) -> tuple[ModelSearch, Config]:
        st = get_strategy("model", s, seed=seed, explore=0.0, **options)
        measured = s.sample(6, np.random.default_rng(100 + seed))
        st.tell([Measurement(c, Status.OK, (1.0 if i == 0 else 2.0 + i,))
                 for i, c in enumerate(measured)])
        return st, measured[0]

    small = space()
    assert small.size <= 2048
    near, far = [], []
    for seed in range(20):
        near.append(nearest(*told(small, seed), small))
        far.append(nearest(*told(small, seed, near_best=None), small))
    assert np.mean(near) < 0.7 * np.mean(far)
    assert sum(a < b for a, b in zip(near, far)) > 2 * sum(a > b for a, b in zip(near, far))

    big = Space([Pow2("bx", 1, 1024), Pow2("by", 1, 1024), Int("t", 1, 32),
                 Choice("alg", ["a", "b"])])
    assert big.size > 2048
    for seed in range(3):
        a, _ = told(big, seed)
        b, _ = told(big, seed, near_best=None)
        assert [a.ask(1)[0] for _ in range(6)] == [b.ask(1)[0] for _ in range(6)]
    for bad in (0.0, 1.5, float("nan"), True, "1/32"):
        with pytest.raises(ValueError, match="near_best"):
            get_strategy("model", small, near_best=bad)


def test_the_design_covers_each_parameters_values_on_small_spaces():
    """On a small space the design's first proposals (``design="auto"``: MaxPro) cover more of
    each ordered parameter's values than maximin's corner sweep or uniform samples do; on a
    space of more than 2,048 points "auto" is maximin, proposal for proposal."""

    def coverage(s: Space, configs: list[Config]) -> float:
        return float(np.mean([len({c[p.name] for c in configs}) / len(p.values)
                              for p in s.params if p.ordered]))

    small = space()
    assert small.size <= 2048
    auto = [coverage(small, first(small, seed)) for seed in range(20)]
    maximin = [coverage(small, first(small, seed, design="maximin")) for seed in range(20)]
    uniform = [coverage(small, small.sample(10, np.random.default_rng(seed)))
               for seed in range(20)]
    assert np.mean(auto) > np.mean(maximin) + 0.1
    assert np.mean(auto) > np.mean(uniform) + 0.1
    assert sum(a > b for a, b in zip(auto, maximin)) >= 15

    big = Space([Pow2("bx", 1, 1024), Pow2("by", 1, 1024), Int("t", 1, 32),
                 Choice("alg", ["a", "b"])])
    assert big.size > 2048
    for seed in range(3):
        assert first(big, seed, 6) == first(big, seed, 6, design="maximin")
    for bad in ("MaxPro", "lhs", None, 1):
        with pytest.raises(ValueError, match="design must be"):
            get_strategy("model", small, design=bad)


def test_the_design_proposes_the_middle_of_the_ranges_once():
    """The design's seventh proposal (``middle_at=6``) is the config at the middle of every
    ordered range, where a kernel's good tiles often lie and a space-filling design seldom
    goes: on a small space the pool's config nearest to it, on a large one (whose design pool
    seldom holds it) the middle itself, or the pool's nearest where the middle is invalid."""

    small = Space([Int("bx", 1, 3), Int("by", 1, 3), Int("t", 1, 3), Choice("alg", ["a", "b"])])
    assert small.size <= 64  # the design's pool holds every point not yet proposed
    at_six = {"default": 0, "none": 0}
    for seed in range(20):
        got = first(small, seed, 8)
        middle = [c for c in got if (c["bx"], c["by"], c["t"]) == (2, 2, 2)]
        assert middle, "the middle of the ranges is among the first proposals"
        at_six["default"] += got[6] in middle
        assert got[6] in middle or got.index(middle[0]) < 6
        plain = first(small, seed, 8, middle_at=None)
        at_six["none"] += (plain[6]["bx"], plain[6]["by"], plain[6]["t"]) == (2, 2, 2)
        assert got[:6] == plain[:6]  # the proposals before it are the design's own
    assert at_six["default"] >= 15 and at_six["none"] <= 3

    big = Space([Pow2("bx", 1, 1024), Pow2("by", 1, 1024), Int("t", 1, 32),
                 Choice("alg", ["a", "b"])])
    assert big.size > 2048
    for seed in range(5):
        got, plain = first(big, seed, 8), first(big, seed, 8, middle_at=None)
        assert got[:6] == plain[:6] and got[6] != plain[6]
        # a pool of 64 draws seldom holds it: the middle itself (t: one of its two middles)
        assert (got[6]["bx"], got[6]["by"]) == (32, 32) and got[6]["t"] in (16, 17)

    # where the middle is no valid point, the pool's config nearest to it
    bounded = Space([Pow2("bx", 1, 1024), Pow2("by", 1, 1024), Int("t", 1, 32),
                     Choice("alg", ["a", "b"])], ["bx * by <= 512"])
    assert bounded.size > 2048

    def off(c: Config) -> float:
        return sum(abs(p.index(c[p.name]) / (len(p.values) - 1) - 0.5)
                   for p in bounded.params if p.ordered)

    for seed in range(5):
        c, plain = first(bounded, seed, 8)[6], first(bounded, seed, 8, middle_at=None)[6]
        assert c in bounded and off(c) < min(off(plain), 0.5)
    for bad in (-1, 2.5, True, "6"):
        with pytest.raises(ValueError, match="middle_at"):
            get_strategy("model", small, middle_at=bad)


def test_a_best_config_that_holds_has_its_neighbourhood_completed():
    """Once the best config has held for ``complete_local`` trials, the next proposals are its
    untried one-step neighbours until none is left (so a search never sits beside a better
    config one step from its best); a new best restarts the count."""
    s = space()
    top = Config(bx=8, by=8, t=3, alg="b")  # smooth's optimum
    start = Config(bx=8, by=4, t=4, alg="b")  # one step from it in two parameters
    for k in (0, 3):
        st = get_strategy("model", s, seed=1, complete_local=k)
        told = [c for c in s.sample(40, np.random.default_rng(7)) if c not in (top, start)][:12]
        st.tell([Measurement(start, Status.OK, (0.5,))])  # the best, held from the start
        st.tell([Measurement(c, Status.OK, (smooth(c),)) for c in told])
        near = set(s.neighbours(start))
        got = []
        while len(got) < len(near):
            c = st.ask(1)[0]
            got.append(c)
            st.tell([Measurement(c, Status.OK, (smooth(c),))])  # none beats start's
        assert set(got) == near, k  # every neighbour, before anything else
    # not before the best has held k trials, and not before the initial design is told
    st = get_strategy("model", s, seed=1, complete_local=3)
    st.tell([Measurement(start, Status.OK, (0.5,))])
    assert st._complete([]) is None  # below n_init
    st.tell([Measurement(c, Status.OK, (smooth(c),)) for c in told[:9]])  # n_init, 10, told
    assert st._complete([]) in near
    st.tell([Measurement(top, Status.OK, (0.1,))])  # a new best: its count starts again
    assert st._complete([]) is None
    # None: the arms alone (no neighbour poll, whatever has held)
    off = get_strategy("model", s, seed=1, complete_local=None)
    off.tell([Measurement(start, Status.OK, (0.5,))])
    off.tell([Measurement(c, Status.OK, (smooth(c),)) for c in told[:9]])
    assert off._complete([]) is None
    assert get_strategy("model", s).complete_local == 1  # the default
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="complete_local"):
            get_strategy("model", s, complete_local=bad)


def test_the_model_leads_only_where_it_predicts():
    s = space()
    learnable = get_strategy("model", s, seed=0)
    search(learnable, smooth, 40)
    assert learnable.rho_ is not None and learnable.rho_ > 0.5
    assert learnable._share() > 0.9
    # on noise the held-out correlation is a draw around zero, and the gate's share a clipped
    # function of it: judged over several seeds, not by whether three draws fell below 0.5
    shares, rhos = [], []
    for seed in range(8):
        # the gate alone: the neighbour poll (complete_local) picks what is measured, not
        # whether the model leads, and its clustered trials move this draw
        noise = get_strategy("model", s, seed=seed, complete_local=None)
        search(noise, scrambled, 40)
        assert noise.rho_ is not None and abs(noise.rho_) < 0.5
        rhos.append(noise.rho_)
        shares.append(noise._share())
    assert abs(np.mean(rhos)) < 0.15  # a draw around zero: no seed's is far from it
    assert np.mean(shares) < 0.45  # mostly space-filling: no worse than uniform sampling
    assert sum(x < 0.5 for x in shares) >= 5


def test_the_design_comes_first_then_evidence():
    st = get_strategy("model", space(), seed=1)
    search(st, smooth, 9)
    assert st.rho_ is None  # n_init = 10: no model judged yet, so none followed
    assert st._order == []
    search(st, smooth, 3)
    assert st.rho_ is not None


def test_other_kernels_join_a_warm_start_only_beside_a_kept_sibling():
    """Another kernel's trials (named with like=, or related by its parameter names) warm-start
    a search beside this kernel's kept workloads, or on a kernel's first search; where all of
    this kernel's own are left out (a flat top), they are left out too, and it searches as
    from its own alone."""
    s = space()
    here = Workload("k", problem={"n": 2})
    flat_w, steep_w, other_w = (Workload("k", problem={"n": 1}), Workload("k", problem={"n": 3}),
                                Workload("j", problem={"n": 2}))
    pool = s.sample(90, rng=1)
    flat = [Measurement(c, Status.OK, (1.0 + 0.01 * (i % 3),)) for i, c in enumerate(pool[:30])]
    steep = [Measurement(c, Status.OK, (smooth(c),)) for c in pool[30:60]]
    other = [Measurement(c, Status.OK, (smooth(c),)) for c in pool[60:]]

    def start(groups, **options):
        st = get_strategy("model", s, seed=0, **options)
        st.warm_start(groups, current=here)
        return st

    beside = start([(steep_w, steep), (other_w, other)])
    assert beside.transfer_["used"] == 2 and beside.transfer_["kernels"] == ["j"]
    alone = start([(flat_w, flat), (other_w, other)])
    assert alone.transfer_["used"] == 0 and alone._other is None and not alone._queue
    assert alone.transfer_["left_out"] == {"no config in this space": 0, "flat top": 1,
                                           "another kernel, no sibling kept": 1}
    assert alone.transfer_["kernels"] == []
    first = start([(other_w, other)])  # no workload of its own kernel: a first search
    assert first.transfer_["used"] == 1 and first.transfer_["kernels"] == ["j"]
    as_own = start([(flat_w, flat), (other_w, other)], like_rule=None)
    assert as_own.transfer_["used"] == 1 and as_own.transfer_["kernels"] == ["j"]
    with pytest.raises(ValueError, match="like_rule"):
        ModelSearch(s, like_rule="always")


def test_warm_start_proposes_the_siblings_best_first():
    s = space()
    w_a, w_b, here = (Workload("k", problem={"n": n}) for n in (1, 2, 3))
    trials = [Measurement(c, Status.OK, (smooth(c),)) for c in s.sample(60, rng=0)]
    best_a = [m.config for m in sorted(trials, key=lambda m: m.value)[:2]]
    best_b = [m.config for m in sorted(trials[:30], key=lambda m: m.value)[:2]]
    st = get_strategy("model", s, seed=0)
    st.warm_start([(w_a, trials), (w_b, trials[:30])], current=here)
    # each sibling's best, the nearer problem's (n=2) first, then each one's second
    expected = list(dict.fromkeys([best_b[0], best_a[0], best_b[1], best_a[1]]))
    assert st.ask(len(expected)) == expected


def test_a_sibling_whose_top_is_flat_is_left_out_of_the_warm_start():
    """A sibling whose measured configs are nearly all within 95% of its best says nothing
    about where the best is: its best configs are not proposed first and its trials do not
    train the model; a steep sibling's are and do."""
    s = space()
    here = Workload("k", problem={"n": 2})
    flat_w, steep_w = Workload("k", problem={"n": 1}), Workload("k", problem={"n": 3})
    pool = s.sample(60, rng=1)
    flat = [Measurement(c, Status.OK, (1.0 + 0.01 * (i % 3),)) for i, c in enumerate(pool[:30])]
    steep = [Measurement(c, Status.OK, (smooth(c),)) for c in pool[30:]]
    st = get_strategy("model", s, seed=0, first="siblings")
    st.warm_start([(flat_w, flat), (steep_w, steep)], current=here)
    assert st.ask(2) == [m.config for m in sorted(steep, key=lambda m: m.value)[:2]]
    assert st._other is not None and len(st._other[1]) == 30  # the steep sibling's only
    assert st.transfer_ is not None and st.transfer_["used"] == 1  # and says so
    assert st.transfer_["left_out"]["flat top"] == 1 and st.transfer_["trials"] == 30
    assert {Config(c) for c in st.transfer_["first"]} == st.pending  # what it proposed first
    alone = get_strategy("model", s, seed=0)
    alone.warm_start([(flat_w, flat)], current=here)
    assert alone._other is None and not alone._queue  # nothing to learn from: a cold start
    kept = get_strategy("model", s, seed=0, flat=None)
    kept.warm_start([(flat_w, flat)], current=here)
    assert kept._other is not None and len(kept._queue) == 2


def test_similar_seed_order_starts_from_the_nearest_sibling():
    s = space()
    here = Workload("k", problem={"size": [128, 128]}, target={"device": "x280", "file": "a"})
    far = Workload("k", problem={"size": [16, 16]}, target={"device": "x280", "file": "b"})
    near = Workload("k", problem={"size": [64, 128]}, target={"device": "x280", "file": "c"})
    other = Workload("k", problem={"size": [128, 128]}, target={"device": "x60", "file": "d"})
    pool = s.sample(90, rng=1)
    given = [(other, pool[:30]), (far, pool[30:60]), (near, pool[60:])]
    trials = [(w, [Measurement(c, Status.OK, (smooth(c),)) for c in cs]) for w, cs in given]
    best = {w: min(ms, key=lambda m: m.value).config for w, ms in trials}
    st = ModelSearch(s, seed=0, seed_configs=1, first="siblings")  # seed_order="similar"
    st.warm_start(trials, current=here)
    # the same device before another; among those, the closer problem (log2 of each size)
    assert st.ask(3) == [best[near], best[far], best[other]]
    plain = ModelSearch(s, seed=0, seed_configs=1, seed_order="given", first="siblings")
    plain.warm_start(trials, current=here)
    assert plain.ask(3) == [best[other], best[far], best[near]]  # as given
    with pytest.raises(ValueError, match="seed_order"):
        ModelSearch(s, seed_order="nearest")


def test_transfer_is_dropped_when_the_siblings_mislead():
    """Siblings whose ranking is this workload's reversed stop training the model once this
    workload's own trials show it; siblings that agree keep doing so."""
    s = space()
    others = [Measurement(c, Status.OK, (smooth(c),)) for c in s.sample(150, rng=0)]
    w_o, here = Workload("k", problem={"n": 1}), Workload("k", problem={"n": 2})
    agree = get_strategy("model", s, seed=0)
    agree.warm_start([(w_o, others)], current=here)
    search(agree, smooth, 20)
    assert agree.prior_rho_ is not None and agree.prior_rho_ > 0.3 and agree.use_other_
    assert agree.transfer_ is not None and agree.transfer_["model_kept"]
    assert agree.transfer_["rank_correlation"] == round(agree.prior_rho_, 3)
    mislead = get_strategy("model", s, seed=0)
    mislead.warm_start([(w_o, others)], current=here)
    search(mislead, lambda c: 10 - smooth(c), 20)
    assert mislead.prior_rho_ is not None and mislead.prior_rho_ < 0 and not mislead.use_other_
    assert mislead.transfer_ is not None and not mislead.transfer_["model_kept"]


def test_kernels_guessed_from_parameter_names_are_trusted_less():
    """A warm start whose every source is a kernel guessed from its parameter names (a first
    search's related kernels): their best configs still come first, but their model has half
    the proposals before the first check, and they stay only while it ranks this workload's
    trials above chance. Named kernels, or guessed ones beside a sibling, keep the full
    trust."""
    s = space()
    pool = s.sample(150, rng=0)
    w_o, here = Workload("other", problem={"n": 1}), Workload("k", problem={"n": 2})
    sib = Workload("k", problem={"n": 4})
    theirs = [Measurement(c, Status.OK, (smooth(c),)) for c in pool]
    best = min(theirs, key=lambda m: m.value).config
    guessed = ModelSearch(s, seed=0)
    guessed.warm_start([(w_o, theirs)], current=here, guessed={"other"})
    named = ModelSearch(s, seed=0)
    named.warm_start([(w_o, theirs)], current=here)
    beside = ModelSearch(s, seed=0)
    beside.warm_start([(sib, theirs[:60]), (w_o, theirs[60:])], current=here, guessed={"other"})
    assert guessed.ask(1) == [best]  # their favourite first, their model after it
    assert best in named.ask(2)  # their model's best and their favourite race (first="race")
    assert guessed._share() == pytest.approx(0.5 * (1 - guessed.explore))
    assert named._share() == beside._share() == pytest.approx(1 - named.explore)
    assert guessed.transfer_ is not None and guessed.transfer_["keep"] == "above"
    assert named.transfer_ is not None and named.transfer_["keep"] == "chance"
    for f in (smooth, scrambled):
        for keep in (0.0, 0.5):
            st = ModelSearch(s, seed=1, related_keep=keep)
            st.warm_start([(w_o, theirs)], current=here, guessed={"other"})
            search(st, f, 20)
            assert st.prior_rho_ is not None and st.use_other_ is (st.prior_rho_ > keep)
    with pytest.raises(ValueError, match="related_start"):
        ModelSearch(s, related_start=1.5)
    with pytest.raises(ValueError, match="related_keep"):
        ModelSearch(s, related_keep=1.0)


def test_a_fit_takes_at_most_transfer_rows_of_the_other_workloads_trials():
    """A large database does not make every fit slow: at most ``transfer_rows`` of the other
    workloads' trials (a fresh uniform sample per fit) train beside this workload's own."""
    s = space()
    others = [Measurement(c, Status.OK, (smooth(c),)) for c in s.sample(300, rng=0)]
    w_o, here = Workload("k", problem={"n": 1}), Workload("k", problem={"n": 2})
    capped = ModelSearch(s, seed=0, transfer_rows=100)
    capped.warm_start([(w_o, others)], current=here)
    search(capped, smooth, 5)
    _X, y, g, _w = capped._training()
    assert (g == 0).sum() == 5 and (g != 0).sum() == 100
    again = capped._training()[1][5:]
    assert set(again) != set(y[5:])  # drawn anew
    whole = ModelSearch(s, seed=0, transfer_rows=None)
    whole.warm_start([(w_o, others)], current=here)
    search(whole, smooth, 5)
    assert (whole._training()[2] != 0).sum() == int(300 * (1 - 5 / 50))  # the decay alone
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="transfer_rows"):
            ModelSearch(s, transfer_rows=bad)


def test_own_trials_weigh_their_share_of_a_warm_fit():
    """With ``own_share`` (0.5 by default), this workload's trials carry at least that share of
    each fit's loss however many sibling trials train beside them; without it every row weighs
    one."""
    s = space()
    others = [Measurement(c, Status.OK, (smooth(c),)) for c in s.sample(120, rng=0)]
    w_o, here = Workload("k", problem={"n": 1}), Workload("k", problem={"n": 2})
    for options, share in (({"own_share": 0.3}, 0.3), ({}, 0.5)):  # {}: the default
        st = ModelSearch(s, seed=0, **options)
        st.warm_start([(w_o, others)], current=here)
        search(st, smooth, 8)
        _X, y, g, w = st._training()
        assert w is not None and (g == 0).sum() == 8 and len(y) > 100
        assert w[g == 0].sum() / w.sum() == pytest.approx(share)
        assert np.all(w[g != 0] == 1.0)
    plain = ModelSearch(s, seed=0, own_share=None)
    plain.warm_start([(w_o, others)], current=here)
    search(plain, smooth, 8)
    assert plain._training()[3] is None
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match="own_share"):
            ModelSearch(s, own_share=bad)
    with pytest.raises(ValueError, match="transfer_decay"):
        ModelSearch(s, transfer_decay=0)


def test_portfolio_splits_model_proposals_by_their_hits():
    """With ``portfolio=True`` the model's proposals come from both arms (its best anywhere,
    its best neighbour of the leaders), and every one of them is scored when told."""
    st = get_strategy("model", space(), seed=0, portfolio=True, gate=0)
    search(st, smooth, 40)
    won_lost = st.arms_
    assert all(sum(v) > 0 for v in won_lost.values())
    assert sum(map(sum, won_lost.values())) <= 40 - st.n_init
    assert not st._arm  # no proposal left unscored


def test_ask_tell_stays_cheap_with_a_long_history():
    """The evidence checks (three extra fits) are spaced by check_every: 200 more trials after
    1,000 cost few of them."""
    big = Space([Pow2("bx", 1, 256), Pow2("by", 1, 256), Int("t", 1, 16),
                 Choice("alg", ["a", "b"])], ["bx * by >= 8", "bx * by <= 4096"])
    st = get_strategy("model", big, seed=0)
    configs = big.sample(1000, np.random.default_rng(0))
    st.tell([Measurement(c, Status.OK, (smooth(c),)) for c in configs[:1000]])
    checks = []
    real = st._check

    def counted() -> None:
        checks.append(len(st.history))
        real()

    st._check = counted  # type: ignore[method-assign]
    search(st, smooth, 200)
    assert 1 <= len(checks) <= 3


DETERMINISM = """
import sys
from tests._data import recorded
from tunex import Tuner
from tunex.search._model import ModelSearch
from tunex.targets.replay import ReplayTarget

t = ReplayTarget(recorded("convolution/A4000.json.gz"), noisy=True, seed=3)
s = ModelSearch(t.space, seed=3, portfolio=True)
Tuner(t, t.space, strategy=s, budget="60trials", seed=3).run()
print([c.key for c in s.history])
"""


def test_a_seeded_search_repeats_exactly_in_another_process():
    # set and dict orders of strings change with PYTHONHASHSEED: no proposal may depend on them
    import os
    import subprocess
    import sys

    from tests._data import recorded

    recorded("convolution/A4000.json.gz")  # skip cleanly where ../shared is absent
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": root}
        done = subprocess.run([sys.executable, "-c", DETERMINISM], capture_output=True,
                              text=True, timeout=300, env=env, cwd=root)
        assert done.returncode == 0, done.stderr[-2000:]
        out.append(done.stdout)
    assert out[0] == out[1]


@pytest.mark.parametrize("arm", ["tpe", "cmaes"])
def test_the_sampler_arm_proposes_from_this_workloads_trials_and_rests_on_a_long_history(arm):
    """``sampler_arm``: a third arm of the portfolio, an Optuna sampler fit on every trial told
    to the search; its proposals are scored like the others', and it rests past its history
    cap. CMA-ES starts from a distribution fit to the best trials when it is first drawn."""
    from tunex.search import _model

    st = get_strategy("model", space(), seed=0, gate=0, sampler_arm=arm)
    search(st, smooth, 60)
    assert set(st.arms_) == {"global", "local", arm}
    assert sum(st.arms_[arm]) > 0  # it was drawn, and every one of its trials was scored
    assert st._sampler is not None and len(st._sampler.study.trials) >= len(st.history)
    told = {c.key for c in st._sampler.history}
    assert told == {c.key for c in st.history}  # it learnt from every trial, not only its own
    assert not st._arm
    if arm == "cmaes":
        assert st._sampler.study.sampler._source_trials  # warm-started from the history
    cap = _model._ARM_MAX_HISTORY
    _model._ARM_MAX_HISTORY = len(st.history)
    try:
        before = len(st._sampler.study.trials)
        assert st._sampler_pick([]) is None
        assert len(st._sampler.study.trials) == before  # resting costs no sampler ask
    finally:
        _model._ARM_MAX_HISTORY = cap
    assert get_strategy("model", space(), seed=0).arms_.keys() == {"global", "local"}
    with pytest.raises(ValueError, match="sampler_arm"):
        get_strategy("model", space(), seed=0, sampler_arm="gp")


class _Linear:
    """A stand-in model: score = sum of weight * feature, for the named features."""

    def __init__(self, st: ModelSearch, weights: dict[str, float]) -> None:
        names = st.features.feature_names
        self.w = np.zeros(len(names))
        for n, v in weights.items():
            self.w[names.index(n)] = v

    def predict(self, X):
        return np.asarray(X) @ self.w


def local_picks(sp: Space, told: list[Measurement], weights: dict[str, float],
                moves: tuple[str, ...]) -> dict[str, Config | None]:
    """The local arm's pick around ``told`` under a linear model, per ``local_moves``."""
    picks = {}
    for m in moves:
        st = ModelSearch(sp, seed=0, local_moves=m)
        st.tell(told)
        st._fit()
        st._model = _Linear(st, weights)  # type: ignore[assignment]
        picks[m] = st._local([])
    return picks


def test_local_moves_any_lets_the_local_arm_jump_to_any_value_of_one_parameter():
    """A method selector declared as an ordered int (0..3) is one move from any of its values
    with ``local_moves="any"``; with ``"step"`` the local arm reaches only adjacent ones."""
    sp = Space([Int("method", 0, 3), Pow2("b", 1, 8)])
    told = [Measurement(Config({"method": 3, "b": b}), Status.OK, (1.0 + b / 100,))
            for b in (1, 2, 4)]
    picks = local_picks(sp, told, {"method": -1.0}, ("step", "any"))  # method 0 ranked best
    assert picks["step"]["method"] == 2  # adjacent to the leaders' 3
    assert picks["any"]["method"] == 0  # the model's best value, one parameter away
    with pytest.raises(ValueError, match="local_moves"):
        ModelSearch(sp, local_moves="far")


def test_two_step_moves_reach_settings_that_only_pay_together():
    """Two flags that are slow alone and fast together, leaders with both off: one step of
    one parameter never reaches the pair; ``local_moves="two"`` does, and the local arm picks
    it when the model ranks it best."""
    sp = Space([Choice("a", [0, 1]), Choice("b", [0, 1]), Pow2("x", 1, 8)])
    told = [Measurement(Config({"a": 0, "b": 0, "x": x}), Status.OK, (1.0 + x / 100,))
            for x in (1, 2, 4)]
    picks = local_picks(sp, told, {"a": 1.0, "b": 1.0}, ("step", "two"))
    assert (picks["step"]["a"], picks["step"]["b"]) != (1, 1)
    assert (picks["two"]["a"], picks["two"]["b"]) == (1, 1)


def test_trust_region_moves_stay_near_the_incumbent_and_follow_its_size():
    """``local_moves="region"``: every candidate is valid, changes between one and a quarter
    of the parameters, each ordered one by at most a quarter of its range, whether the space
    is enumerated or sampled; the region doubles after two successes and halves after
    ``max(4, parameters)`` failures in a row."""
    sp = Space([Int(f"p{i}", 0, 6) for i in range(6)], ["p0 + p1 <= 9"])
    c = Config({f"p{i}": 3 for i in range(6)})
    for limit in (10**9, 0):  # the whole space scored, or perturbations sampled
        st = ModelSearch(sp, seed=0, local_moves="region", enumerate_limit=limit)
        got = st._region(c)
        assert got and all(g in sp and g != c for g in got)
        diffs = [[abs(g[n] - c[n]) for n in sp.names] for g in got]
        assert all(max(d) <= 2 and 1 <= sum(x > 0 for x in d) <= 2 for d in diffs)
        assert any(sum(x > 0 for x in d) == 2 for d in diffs)  # two at once, not one step only
    st = ModelSearch(sp, seed=0, local_moves="region")
    st._adapt_region(True)
    st._adapt_region(True)
    assert st.region_ == 0.5
    for _ in range(6):
        st._adapt_region(False)
    assert st.region_ == 0.25
    st._adapt_region(True)
    st._adapt_region(False)  # a failure breaks the run of successes
    st._adapt_region(True)
    assert st.region_ == 0.25


def test_trust_region_moves_reach_two_parameters_the_model_ranks_best():
    """Leaders at the low corner, the model's best two parameters away: one step never gets
    there, the trust region does, and the local arm picks it."""
    sp = Space([Int(n, 0, 3) for n in "abcdef"])
    told = [Measurement(Config({"a": 0, "b": 0, "c": 0, "d": 0, "e": 0, "f": f}), Status.OK,
                        (1.0 + f / 100,)) for f in (0, 1, 2)]
    picks = local_picks(sp, told, {"a": 1.0, "b": 1.0}, ("step", "region"))
    assert (picks["step"]["a"] > 0) != (picks["step"]["b"] > 0)  # one of them moves
    assert picks["region"]["a"] == picks["region"]["b"] == 1  # both, within the region


def test_two_step_moves_are_sampled_where_there_are_too_many():
    """Twelve parameters of eight unordered values each have 66 * 49 two-step moves: the local
    arm scores a sample of ``_TWO_STEP_LIMIT``, each valid and two parameters away."""
    from tunex.search import _model

    sp = Space([Choice(f"p{i}", list("abcdefgh")) for i in range(12)], ["p0 != 'h'"])
    st = ModelSearch(sp, seed=0, local_moves="two")
    c = sp.sample(1, rng=0)[0]
    got = st._two_steps(c)
    assert 0.8 * _model._TWO_STEP_LIMIT <= len(got) <= _model._TWO_STEP_LIMIT
    assert all(g in sp and sum(g[n] != c[n] for n in sp.names) == 2 for g in got)
    small = Space([Pow2("x", 1, 8), Pow2("y", 1, 8)])
    assert sorted(k.key for k in ModelSearch(small, seed=0)._two_steps(Config({"x": 2, "y": 2}))) \
        == sorted(Config({"x": x, "y": y}).key for x in (1, 4) for y in (1, 4))


def test_seed_spread_skips_near_copies_of_a_queued_favourite():
    """With ``seed_spread``, a sibling's second-best config one parameter from its best gives
    way to its next best that differs more; without it both near-copies come first."""
    s = space()
    best = Config({"bx": 8, "by": 8, "t": 3, "alg": "b"})
    near = best.replace(t=4)
    far = Config({"bx": 16, "by": 4, "t": 2, "alg": "b"})
    trials = [Measurement(c, Status.OK, (v,)) for c, v in ((best, 1.0), (near, 1.01),
                                                            (far, 1.02))]
    trials += [Measurement(c, Status.OK, (5.0 + i,)) for i, c in enumerate(s.sample(20, rng=1))
               if c not in (best, near, far)]
    here = Workload("k", problem={"n": 2})
    for spread, expected in ((False, [best, near]), (True, [best, far])):
        st = get_strategy("model", s, seed=0, seed_spread=spread)
        st.warm_start([(Workload("k", problem={"n": 1}), trials)], current=here)
        assert st.ask(2) == expected


def test_a_warm_start_learns_from_trials_of_an_older_version_of_the_space():
    """A sibling recorded before the kernel gained parameter ``t`` (its configs lack it, and
    some hold a ``bx`` the space has since dropped) still trains the model, with ``t``
    unknown: the first proposal has the sibling's best ``bx * by`` and ``alg``. Its configs are
    not points of this space, so none is proposed as it stands; without ``other_spaces``
    (and before) the sibling is left out and the search starts cold."""
    s = space()
    old = Space([Pow2("bx", 1, 128), Pow2("by", 1, 64), Choice("alg", ["a", "b"])],
                ["bx * by >= 8", "bx * by <= 1024"])
    trials = [Measurement(c, Status.OK, (smooth(Config({**c, "t": 3})),))
              for c in old.sample(80, rng=0)]
    assert any(m.config["bx"] == 128 for m in trials)
    sibling, here = Workload("k", problem={"n": 1}), Workload("k", problem={"n": 2})
    for seed in range(3):
        st = ModelSearch(s, seed=seed, explore=0.0)
        st.warm_start([(sibling, trials)], current=here)
        assert st.transfer_ is not None and st.transfer_["used"] == 1
        assert st.transfer_["other_space"] == 1 and st.transfer_["first"] == []
        assert st._other is not None and len(st._other[1]) == 80
        first = st.ask(1)[0]
        assert first["bx"] * first["by"] == 64 and first["alg"] == "b"
    cold = ModelSearch(s, seed=0, other_spaces=False)
    cold.warm_start([(sibling, trials)], current=here)
    assert cold._other is None and cold.transfer_ is not None
    assert cold.transfer_["left_out"]["no config in this space"] == 1


def test_a_warm_start_carries_a_block_relative_to_the_shape_to_a_new_shape():
    """Siblings at rows of 256, 1024 and 8192 elements are fastest with a block the size of the
    row; at an unseen 2048 the first proposal after their favourites is a 2048 block when the
    model sees block / row (``relative``), and one of the siblings' own blocks when it sees
    each alone."""
    s = Space([Pow2("BLOCK", 128, 16384), Pow2("warps", 1, 16)])

    def time(c: Config, n: int) -> float:
        return 1 + abs(math.log2(c["BLOCK"] / n)) + 0.1 * abs(math.log2(c["warps"]) - 2)

    def rows(n: int) -> Workload:
        return Workload("rows", problem={"shape": [4096, n]})

    siblings = [(rows(n), [Measurement(c, Status.OK, (time(c, n),)) for c in s])
                for n in (256, 1024, 8192)]
    for relative in (True, False):
        for seed in range(3):
            st = ModelSearch(s, seed=seed, explore=0.0, relative=relative, first="siblings")
            st.warm_start(siblings, current=rows(2048))
            assert {c["BLOCK"] for c in st.ask(6)} == {256, 1024, 8192}  # their favourites
            block = st.ask(1)[0]["BLOCK"]
            assert (block == 2048) if relative else (block in (256, 1024, 8192))
            # racing the model against the favourites, the model goes first
            raced = ModelSearch(s, seed=seed, explore=0.0, relative=relative,
                                race_start="model")
            raced.warm_start(siblings, current=rows(2048))
            block = raced.ask(1)[0]["BLOCK"]
            assert (block == 2048) if relative else (block in (256, 1024, 8192))
            # by default the favourite goes first where a model blind to the relative columns
            # picks it (here, wrongly: the best moves with the row), the model's 2048 second
            raced = ModelSearch(s, seed=seed, explore=0.0, relative=relative)
            raced.warm_start(siblings, current=rows(2048))
            blocks = [c["BLOCK"] for c in raced.ask(2)]
            assert (2048 in blocks) if relative else (set(blocks) <= {256, 1024, 8192})


def test_the_siblings_model_races_their_favourites():
    """A warm start's first proposals: the siblings' model's best config, then the nearest
    sibling's best, then more of whichever of the two measured the faster config, until the
    favourites run out; with many in flight before any result, the two take turns."""
    s = space()
    w_a, w_b, here = (Workload("k", problem={"n": n}) for n in (1, 2, 3))
    siblings = [(w, [Measurement(c, Status.OK, (scrambled(c),)) for c in s.sample(40, rng=i)])
                for i, w in enumerate((w_a, w_b))]

    def start() -> ModelSearch:  # the model's pick first (by default it is where they differ)
        st = ModelSearch(s, seed=0, explore=0.0, race_start="model")
        st.warm_start(siblings, current=here)
        return st

    queue = start()._queue
    assert len(queue) == 4
    for model_wins in (True, False):
        st = start()
        m1, q1 = st.ask(2)
        assert q1 == queue[0]  # the model's best, then the nearest sibling's favourite
        assert (st._first_by[m1], st._first_by[q1]) == ("model", "queue")
        st.tell([Measurement(m1, Status.OK, (1.0 if model_wins else 3.0,)),
                 Measurement(q1, Status.OK, (2.0,))])
        nxt = st.ask(1)[0]
        assert st._first_by[nxt] == ("model" if model_wins else "queue")
    st = start()
    both = st.ask(6)  # nothing measured yet: turns
    assert [st._first_by[c] for c in both[:4]] == ["model", "queue"] * 2
    plain = ModelSearch(s, seed=0, first="siblings")
    plain.warm_start(siblings, current=here)
    assert plain.ask(4) == queue
    with pytest.raises(ValueError, match="first"):
        ModelSearch(s, first="model")


def test_a_one_parameter_space_too_large_to_enumerate():
    """Mutations of a single parameter (the candidates of a space not enumerated) reset that
    one parameter; the search finds the bottom of a smooth valley."""
    s = Space([Int("a", 0, 3000)])
    strategy = ModelSearch(s, seed=0, enumerate_limit=100, pool=64)
    times = search(strategy, lambda c: 1.0 + ((c["a"] - 1234) / 1000) ** 2, 40)
    assert min(times) < 1.05


def test_the_race_starts_from_the_favourite_where_an_absolute_model_agrees_with_it():
    """``race_start="agree"`` (the default): a first search of a recorded RVV softmax from
    the prior less itself, whose siblings' best config holds at every shape, starts from the
    nearest favourite (a model that sees the parameters as they are picks it; the usual
    model, which also sees them relative to the problem, picks another); a matmul whose best
    moves with the shape starts from the model either way, as every search does with
    ``race_start="model"``."""
    from pathlib import Path

    from tunex.db.prior import Prior
    from tunex.targets.replay import ReplayTarget

    data = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
    prior = Prior.shipped()
    for path, favourite_first in ((data / "riscv/softmax_c/x280-128x512.json.gz", True),
                                  (data / "matmul_H200_512x4096x1024.json.gz", False)):
        target = ReplayTarget(path)
        w = target.workload()
        taken = prior.without(like=w).related(w, target.space.names)
        for options in ({}, {"race_start": "agree"}, {"race_start": "model"}):
            st = ModelSearch(target.space, seed=0, **options)
            st.warm_start(taken, current=w, guessed={x.kernel for x, _ in taken} - {w.kernel})
            nearest = st._queue[0]
            first, second = st.ask(2)
            theirs = favourite_first and options.get("race_start") != "model"
            assert (first == nearest) is theirs
            assert (st._first_by[first], st._first_by[second]) == (
                ("queue", "model") if theirs else ("model", "queue"))
    with pytest.raises(ValueError, match="race_start"):
        ModelSearch(space(), race_start="favourite")
