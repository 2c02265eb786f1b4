from __future__ import annotations

import math

import numpy as np
import pytest

from tunex import Config, TunexError, Workload
from tunex.cost_model import FeatureExtractor, GBMRanker, relevance
from tunex.space import Choice, Int, Pow2, Space


def test_relevance_labels():
    lab = relevance(np.array([3.0, 1.0, np.inf, 2.0, np.nan]))
    assert lab[2] == lab[4] == 0
    assert lab[1] > lab[3] > lab[0] > 0


def data(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 8, size=(n, 3))
    y = 1 + (X[:, 0] - 5) ** 2 + 0.3 * X[:, 1] + rng.normal(0, 0.05, n)
    y[X[:, 2] > 7] = np.inf  # a failure region
    return X, y


@pytest.mark.parametrize("objective", ["lambdarank", "regression"])
def test_ranker_learns_order_and_failures(objective):
    X, y = data()
    m = GBMRanker(objective=objective, random_state=0).fit(X, y)
    Xt, yt = data(seed=1)
    s = m.predict(Xt)
    ok = np.isfinite(yt)
    from scipy.stats import spearmanr

    assert spearmanr(s[ok], -yt[ok]).statistic > 0.7  # lambdarank cares most about the top
    assert s[~ok].mean() < np.median(s[ok])  # failures learned as bad
    top = np.argsort(-s)[:10]
    assert np.mean(yt[top]) < np.percentile(yt[ok], 25)


def test_save_load_round_trip(tmp_path):
    X, y = data()
    m = GBMRanker(random_state=0).fit(X, y)
    m.save(tmp_path / "m.json")
    m2 = GBMRanker.load(tmp_path / "m.json")
    assert np.allclose(m.predict(X), m2.predict(X))
    assert m2.get_params() == m.get_params()
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(TunexError, match="retrain"):
        GBMRanker.load(tmp_path / "bad.json")


def test_groups_rank_within_each_workload():
    # same ranking, runtimes 1000x apart: grouped fitting must not confuse the scales
    X, y = data(n=200)
    Xg = np.vstack([X, X])
    yg = np.concatenate([y, y * 1000])
    g = np.r_[np.zeros(200), np.ones(200)]
    s = GBMRanker(random_state=0).fit(Xg, yg, g).predict(X)
    ok = np.isfinite(y)
    from scipy.stats import spearmanr

    assert spearmanr(s[ok], -y[ok]).statistic > 0.8


def test_features_include_problem_target_and_interactions():
    space = Space([Pow2("bx", 16, 64), Int("t", 1, 3), Choice("alg", ["x", "y"])])
    w1 = Workload("k", problem={"M": 1024, "dtype": "fp16"}, target={"sms": 132, "name": "h"})
    w2 = Workload("k", problem={"M": 64, "dtype": "fp16"}, target={"sms": 132, "name": "h"})
    fx = FeatureExtractor.for_workloads(space, [w1, w2])
    assert fx.problem_keys == ("M",) and fx.target_keys == ("sms",)
    X = fx.transform([Config(bx=32, t=2, alg="y")], w1)
    names = fx.feature_names
    assert X.shape == (1, len(names))
    row = dict(zip(names, X[0]))
    assert row["bx"] == 5 and row["problem.M"] == 10 and row["target.sms"] == pytest.approx(
        np.log2(132))
    assert row["log2(bx*t)"] == pytest.approx(5 + 1)


def test_features_spread_list_problem_sizes():
    """A recorded problem size [M, N, K] becomes three numeric columns (transfer across shapes
    needs them: a list is no number)."""
    space = Space([Pow2("bx", 1, 64)])
    w1 = Workload("k", problem={"problem_size": [1024, 64, 8]}, target={"device": "a"})
    w2 = Workload("k", problem={"problem_size": [64, 64, 4096]}, target={"device": "b"})
    fx = FeatureExtractor.for_workloads(space, [w1, w2])
    assert fx.problem_keys == ("problem_size[0]", "problem_size[1]", "problem_size[2]")
    row = dict(zip(fx.feature_names, fx.transform([Config({"bx": 4})], w2)[0]))
    assert row["problem.problem_size[0]"] == 6 and row["problem.problem_size[2]"] == 12
    assert row["target.device=b"] == 1 and row["target.device=a"] == 0  # which device


def test_row_weights_decide_between_workloads_that_disagree():
    # two workloads ranked in opposite orders by the same feature: the one weighed up wins
    X, y = data(n=200)
    ok = np.isfinite(y)
    X, y = X[ok], y[ok]
    n = len(y)
    Xg, yg = np.vstack([X, X]), np.concatenate([y, y.max() + y.min() - y])
    g = np.r_[np.zeros(n), np.ones(n)]
    from scipy.stats import spearmanr

    for heavy, sign in ((0, 1), (1, -1)):
        w = np.where(g == heavy, 20.0, 1.0)
        rho = [spearmanr(GBMRanker(random_state=seed).fit(Xg, yg, g, weights=w).predict(X),
                         -y).statistic for seed in range(5)]  # one fit's bagging varies
        assert sign * np.median(rho) > 0.2  # unweighted: about 0


def test_relative_features_give_each_parameter_per_differing_problem_size():
    """log2(param / size) for the sizes that differ between the workloads, nothing for those
    that do not (a constant size adds a copy of log2(param)) or for a non-numeric parameter."""
    space = Space([Pow2("BLOCK", 128, 4096), Int("t", 1, 3), Choice("alg", ["x", "y"])])
    w1 = Workload("k", problem={"problem_size": [1024, 8192]})
    w2 = Workload("k", problem={"problem_size": [1024, 256]})
    fx = FeatureExtractor.for_workloads(space, [w1, w2], relative=True)
    assert fx.relative == ("problem_size[1]",)
    X = fx.transform([Config(BLOCK=1024, t=2, alg="y")], w2)
    row = dict(zip(fx.feature_names, X[0]))
    assert X.shape == (1, len(fx.feature_names))
    assert row["log2(BLOCK/problem.problem_size[1])"] == 2  # 1024 / 256
    assert row["log2(t/problem.problem_size[1])"] == pytest.approx(1 - 8)
    assert not any(n.startswith("log2(alg") for n in fx.feature_names)
    same = [Workload("k", problem={"problem_size": [1024, 256]}, target={"device": d})
            for d in ("a", "b")]
    fixed = FeatureExtractor.for_workloads(space, same, relative=True)
    plain = FeatureExtractor.for_workloads(space, same)
    c = [Config(BLOCK=256, t=1, alg="x")]
    assert fixed.relative == () and np.array_equal(fixed.transform(c, same[0]),
                                                   plain.transform(c, same[0]))
    with pytest.raises(ValueError, match="not among the problem keys"):
        FeatureExtractor(space, ["M"], relative=["N"])


def test_an_anchor_keeps_the_problem_sizes_it_shares_with_some_of_the_others():
    """Other kernels whose problems name other sizes (a flash attention's Z, H beside
    matmuls' M, N, K) take the searched workload's sizes away from every workload unless it
    is the anchor: then its sizes that another names stay, ``nan`` where a workload lacks
    them, and the relative sizes with them."""
    space = Space([Pow2("BLOCK_M", 16, 256), Pow2("num_warps", 1, 8)])
    mm = Workload("mm", problem={"M": 1024, "N": 1024, "K": 64, "dtype": "f16"})
    tma = Workload("tma", problem={"M": 4096, "N": 1024, "K": 64, "dtype": "f16"})
    fa = Workload("fa", problem={"Z": 1, "H": 32, "dtype": "f16"})
    assert FeatureExtractor.for_workloads(space, [tma, fa, mm]).problem_keys == ()
    fx = FeatureExtractor.for_workloads(space, [tma, fa, mm], relative=True, anchor=mm)
    assert fx.problem_keys == ("K", "M", "N") and fx.relative == ("M",)
    c = [Config(BLOCK_M=64, num_warps=4)]
    row = dict(zip(fx.feature_names, fx.transform(c, fa)[0]))
    assert math.isnan(row["problem.M"]) and math.isnan(row["log2(BLOCK_M/problem.M)"])
    row = dict(zip(fx.feature_names, fx.transform(c, tma)[0]))
    assert row["problem.M"] == 12 and row["log2(BLOCK_M/problem.M)"] == 6 - 12
    # siblings that name the same sizes: the anchor changes nothing
    both = [tma, mm]
    assert FeatureExtractor.for_workloads(space, both, relative=True, anchor=mm).feature_names \
        == FeatureExtractor.for_workloads(space, both, relative=True).feature_names


def test_relative_pairs_count_the_blocks_of_a_grid_over_two_dimensions():
    """A pair column is log2 of two parameters over two differing sizes: minus log2 of the
    number of blocks a 2-D grid has (a matrix product's output tiles), for different
    parameters and different sizes only, and only when asked."""
    space = Space([Pow2("BM", 16, 256), Pow2("BN", 16, 256), Int("stages", 2, 4)])
    ws = [Workload("mm", problem={"M": m, "N": n, "K": 64}) for m, n in ((1024, 512), (64, 8192))]
    plain = FeatureExtractor.for_workloads(space, ws, relative=True)
    fx = FeatureExtractor.for_workloads(space, ws, relative=True, relative_pairs=True)
    assert fx.relative == ("M", "N")
    c = [Config(BM=128, BN=64, stages=3)]
    row = dict(zip(fx.feature_names, fx.transform(c, ws[0])[0]))
    assert len(row) == fx.transform(c, ws[0]).shape[1]
    tiles = (1024 // 128) * (512 // 64)
    assert row["log2(BM*BN/(problem.M*problem.N))"] == pytest.approx(-math.log2(tiles))
    crossed = math.log2(128 / 512 * 64 / 1024)  # BM over N, BN over M
    assert row["log2(BM*BN/(problem.N*problem.M))"] == pytest.approx(crossed)
    # 3 parameters, 2 sizes: 3 pairs of parameters x 2 orders of the sizes
    assert len(fx.feature_names) - len(plain.feature_names) == 6
    assert not any("*problem" in n for n in plain.feature_names)
    # the plain columns come first, unchanged
    n = len(plain.feature_names)
    assert np.array_equal(fx.transform(c, ws[1])[:, :n], plain.transform(c, ws[1]))
    many = Space([Pow2(f"p{k}", 2, 64) for k in range(12)])
    big = [Workload("mm", problem={"M": m, "N": 2 * m, "K": 4 * m}) for m in (64, 128)]
    capped = FeatureExtractor.for_workloads(many, big, relative=True, relative_pairs=True)
    assert capped.relative == ("K", "M", "N")  # 12 x 11 / 2 x 6 = 396 pair columns: none
    assert len(capped.feature_names) == len(
        FeatureExtractor.for_workloads(many, big, relative=True).feature_names)
