from __future__ import annotations

import itertools
import json
import time
from collections import Counter

import numpy as np
import pytest

from tunex import Config, ConfigError, SpaceError
from tunex.space import Bool, Choice, Int, Permutation, Pow2, Space


def brute(space: Space) -> list[Config]:
    """Reference: filter the Cartesian product."""
    out = []
    for vals in itertools.product(*(p.values for p in space.params)):
        c = Config(dict(zip(space.names, vals)))
        if c in space:
            out.append(c)
    return out


def matmul_space() -> Space:
    return Space(
        [Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), Pow2("BLOCK_K", 16, 128),
         Choice("GROUP_M", [1, 8]), Choice("num_warps", [2, 4, 8]), Int("num_stages", 2, 5)],
        constraints=["(BLOCK_M + BLOCK_N) * BLOCK_K * num_stages * 2 <= smem",
                     lambda BLOCK_M, M: BLOCK_M <= max(16, M),
                     "BLOCK_M * BLOCK_N >= 32 * num_warps * 4"],
        problem=["M", "smem"],
    )


def test_param_domains():
    assert Pow2("b", 16, 128).values == (16, 32, 64, 128)
    assert Int("s", 2, 8, 2).values == (2, 4, 6, 8)
    assert Bool("f").values == (False, True)
    p = Permutation("order", "mnk")
    assert len(p.values) == 6 and ("m", "n", "k") in p
    assert p.encode(("k", "m", "n")) == [1.0, 2.0, 0.0]
    assert sorted(p.neighbours(("m", "n", "k"))) == [("m", "k", "n"), ("n", "m", "k")]


@pytest.mark.parametrize("make", [
    lambda: Choice("x", []),
    lambda: Int("x", 5, 1),
    lambda: Pow2("x", 3, 16),
    lambda: Choice("x", [1, 1]),
    lambda: Choice("not an identifier", [1]),
])
def test_bad_params_fail_at_declaration(make):
    with pytest.raises(SpaceError):
        make()


def test_unknown_name_in_constraint_is_reported():
    with pytest.raises(SpaceError, match="BLOCK_Q"):
        Space([Pow2("BLOCK_M", 16, 64)], ["BLOCK_M * BLOCK_Q <= 4096"])
    with pytest.raises(SpaceError, match="smem"):
        Space([Pow2("BLOCK_M", 16, 64)], [lambda BLOCK_M, smem: BLOCK_M < smem])


def test_empty_space_is_reported_at_declaration_or_bind():
    with pytest.raises(SpaceError, match="no valid point"):
        Space([Pow2("B", 16, 64)], ["B > 1000"])
    s = Space([Pow2("B", 16, 64)], ["B <= M"], problem=["M"])  # fine until bound
    with pytest.raises(SpaceError, match="no valid point"):
        s.bind(M=8)
    with pytest.raises(SpaceError, match="bind"):
        _ = s.size


def test_expression_strings_are_not_code():
    with pytest.raises(SpaceError):
        Space([Pow2("B", 16, 64)], ["__import__('os').system('true') or B"])
    with pytest.raises(SpaceError):
        Space([Pow2("B", 16, 64)], ["B.bit_length() > 2"])


def test_count_enumerate_and_membership_match_brute_force():
    s = matmul_space().bind(M=64, smem=65536)
    ref = brute(s)
    assert s.size == len(ref) > 0
    assert list(s) == sorted(ref, key=list(s).index)  # same set, enumeration has no repeats
    assert set(s) == set(ref)
    assert len(set(s)) == s.size
    assert [s.at(i) for i in range(s.size)] == list(s)
    for c in ref[:50]:
        assert c in s
    bad = Config(BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, GROUP_M=1, num_warps=2, num_stages=5)
    assert bad not in s
    assert any("smem" in v for v in s.violations(bad))
    with pytest.raises(ConfigError, match="not a valid point"):
        s.validate(bad)


def test_walks_and_enumeration_stay_exact_past_the_tables_kept(monkeypatch):
    """Counting keeps, per level, a table of the values with valid completions (keyed like the
    counts), which drawing and listing points look up; past ``_TABLES_LIMIT`` tables none is
    kept and they are made again when needed, which must not change a rank's point."""
    s = matmul_space().bind(M=64, smem=65536)
    ref = list(s)
    assert [s.at(i) for i in range(s.size)] == ref
    monkeypatch.setattr(Space, "_TABLES_LIMIT", 3)
    small = matmul_space().bind(M=64, smem=65536)
    assert [small.at(i) for i in range(small.size)] == ref
    assert list(small) == ref
    assert small._tables_size <= 3 < s._tables_size
    assert small.sample(40, rng=5) == s.sample(40, rng=5)


def test_sampling_is_uniform_over_valid_points():
    s = Space([Int("a", 0, 9), Int("b", 0, 9)], ["a + b <= 6", "a != 3"])
    n = s.size
    draws = s.sample(20000, rng=0, unique=False)
    counts = Counter(draws)
    assert set(counts) == set(s)
    expected = 20000 / n
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 2.5 * n  # a strongly skewed sampler lands far above this
    uniq = s.sample(n + 5, rng=1)
    assert len(uniq) == n and len(set(uniq)) == n


def test_sampling_excludes_and_is_seeded():
    s = matmul_space().bind(M=4096, smem=232448)
    a = s.sample(30, rng=7)
    assert a == s.sample(30, rng=7)
    b = s.sample(30, rng=8, exclude=a)
    assert not set(a) & set(b)
    assert all(c in s for c in a + b)


def test_huge_space_with_tight_constraints_is_fast():
    params = [Pow2(f"B{i}", 1, 1024) for i in range(8)]  # 11^8 = 2.1e8 raw points
    s = Space(params, ["B0 * B1 <= 64", "B2 * B3 <= 64", "B4 * B5 * B6 <= 128", "B7 <= B0"])
    assert s.raw_size == 11 ** 8
    t = time.perf_counter()
    n = s.size
    draws = s.sample(500, rng=0)
    first = next(iter(s))
    elapsed = time.perf_counter() - t
    assert all(c in s for c in draws) and first in s
    assert elapsed < 5  # full enumeration would take hours
    # exact count by independent reasoning: pairs with product <= 64 over 1..1024 powers of 2
    pairs = sum(1 for a in range(11) for b in range(11) if a + b <= 6)
    triples = sum(1 for a in range(11) for b in range(11) for c in range(11) if a + b + c <= 7)
    b7 = sum(1 for a in range(11) for b in range(11) if a + b <= 6 for _ in range(a + 1))
    assert n == b7 * pairs * triples


def test_neighbours_are_valid_one_step_moves():
    s = matmul_space().bind(M=4096, smem=232448)
    c = Config(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=3)
    ns = s.neighbours(c)
    assert ns and all(n in s for n in ns)
    assert all(sum(n[k] != c[k] for k in s.names) == 1 for n in ns)
    assert Config(c.to_dict() | {"BLOCK_M": 128}) in ns
    assert Config(c.to_dict() | {"BLOCK_M": 256}) not in ns  # two steps away
    assert len(s.neighbours(c, hamming=True)) > len(ns)


def test_encode_and_feature_names():
    s = Space([Pow2("B", 16, 64), Bool("f"), Permutation("o", "xy"), Choice("alg", ["a", "b"])])
    X = s.encode([Config(B=32, f=True, o=("y", "x"), alg="b")])
    assert X.tolist() == [[5.0, 1.0, 1.0, 0.0, 1.0]]
    assert s.feature_names == ["B", "f", "o[x]", "o[y]", "alg"]


def test_configs_of_another_version_of_the_space_encode_partially():
    """A config recorded before a parameter existed, or with a value the space no longer
    holds, encodes what it can place and nan for the rest; without ``partial`` it is an
    error, as before."""
    s = Space([Pow2("B", 16, 64), Int("t", 1, 4), Bool("f"), Permutation("o", "xy"),
               Choice("alg", ["a", "b"]), Choice("w", [2, 4])])
    old = [{"B": 512, "t": 6, "f": True, "o": ("x", "y"), "alg": "c", "w": 8},  # ranges moved
           {"B": 32, "alg": "b"},  # before t, f, o and w existed
           {"B": -4, "t": "six", "f": 2, "o": ("x", "y", "z"), "alg": 1.5, "w": True}]
    X = s.encode(old, partial=True)
    nan = np.nan
    np.testing.assert_array_equal(X, [[9.0, 6.0, 1.0, 0.0, 1.0, nan, 8.0],
                                      [5.0, nan, nan, nan, nan, 1.0, nan],
                                      [nan, nan, nan, nan, nan, nan, nan]])
    here = Config(B=32, t=2, f=False, o=("y", "x"), alg="b", w=4)
    np.testing.assert_array_equal(s.encode([here], partial=True), s.encode([here]))
    with pytest.raises(KeyError):
        s.encode([{"B": 32, "alg": "b"}])


def test_json_round_trip_and_t1(tmp_path):
    s = Space([Pow2("B", 16, 64), Choice("w", [2, 4])], ["B * w <= cap"], problem=["cap"])
    s2 = Space.from_dict(json.loads(json.dumps(s.bind(cap=128).to_dict())))
    assert set(s2) == set(s.bind(cap=128))
    t1 = {"ConfigurationSpace": {
        "TuningParameters": [{"Name": "bx", "Type": "int",
                              "Values": "[32 * i for i in range(1, 5)]"},
                             {"Name": "fixed", "Type": "int", "Values": "[15]"},
                             {"Name": "t", "Type": "int", "Values": [1, 2]}],
        "Conditions": [{"Expression": "bx * t <= 4 * fixed", "Parameters": ["bx", "t"]}]}}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(t1))
    s3 = Space.from_t1(p)
    assert s3.bound == {"fixed": 15}
    assert set(s3) == {Config(bx=32, t=1)}


def test_a_t1_domain_that_is_no_expression_is_a_space_error(tmp_path):
    """A T1 domain with a syntax error (``"[1, 2,"``) names the file, not a traceback."""
    t1 = {"ConfigurationSpace": {"TuningParameters": [{"Name": "a", "Values": "[1, 2,"}],
                                 "Conditions": []}}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(t1))
    with pytest.raises(SpaceError, match=r"s\.json: not a readable T1 space definition"):
        Space.from_t1(p)


@pytest.mark.parametrize("domain", ["list(range(10**9))", "[2**2**30]", "[0] * 10**9",
                                    "[i * j for i in range(10**4) for j in range(10**4)]",
                                    "[((((2**64)**64)**64)**64)**64]", "[(1e10)**64]"])
def test_a_t1_domain_that_would_fill_the_memory_is_refused_at_once(tmp_path, domain):
    """A definition found beside recorded data is read unasked: a domain that would make a
    billion values or a billion-digit number is refused, not evaluated."""
    t1 = {"ConfigurationSpace": {"TuningParameters": [
        {"Name": "a", "Values": domain}, {"Name": "b", "Values": "[2**i for i in range(4)]"}],
        "Conditions": []}}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(t1))
    with pytest.raises(SpaceError, match="not a readable T1 space definition"):
        Space.from_t1(p)
    t1["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "list(range(1, 4))"
    p.write_text(json.dumps(t1))
    assert Space.from_t1(p).param("b").values == (1, 2, 4, 8)


def test_default_is_valid():
    s = matmul_space().bind(M=16, smem=232448)
    assert s.default() in s
    assert isinstance(np.asarray(s.encode([s.default()])), np.ndarray)


def test_bound_constraints_write_the_problem_in_and_replay_alike() -> None:
    from tunex.space import Int, Space

    s = Space([Int("a", 1, 8)], ["a * 2 <= M"], problem=["M"]).bind(M=6)
    assert s.bound_constraints() == ["a * 2 <= 6"]
    assert Space([Int("a", 1, 8)], s.bound_constraints()).size == s.size == 3
    with pytest.raises(SpaceError, match="callable"):
        Space([Int("a", 1, 8)], [lambda a: a < 3]).bound_constraints()


def test_a_constraint_on_the_problem_alone_is_settled_when_written_out() -> None:
    """matmul_tma's ``M % 8 == 0 and N % 8 == 0`` reads no parameter once bound: written as is,
    the recorded space could not be replayed."""
    from tunex.space import Int, Space

    s = Space([Int("a", 1, 8)], ["a * 2 <= M", "M % 2 == 0"], problem=["M"])
    assert s.bind(M=6).bound_constraints() == ["a * 2 <= 6"]
    assert Space([Int("a", 1, 8)], s.bind(M=6).bound_constraints()).size == 3


def test_an_invalid_default_moves_to_the_nearest_valid_point() -> None:
    from tunex.space import Choice, Int, Space

    s = Space([Choice("style", ["vec", "rvv"], default="rvv"), Int("tile", 1, 8, default=6)],
              ["style == 'vec' or rvv == 1", "tile <= M"], problem=["rvv", "M"])
    assert s.bind(rvv=1, M=8).default() == Config(style="rvv", tile=6)
    assert s.bind(rvv=0, M=8).default() == Config(style="vec", tile=6)  # one change, tile kept
    assert s.bind(rvv=0, M=2).default() == Config(style="vec", tile=1)  # two changes


def test_a_value_of_another_type_is_not_a_point_of_the_space() -> None:
    """4.0 and True equal 4 and 1 in Python, but a config holding them is another config
    (another database key) and another launch (a float block size does not compile)."""
    s = Space([Choice("num_warps", [1, 2, 4]), Pow2("BLOCK", 16, 64)])
    assert {"num_warps": 4, "BLOCK": 16} in s
    for bad in ({"num_warps": 4.0, "BLOCK": 16}, {"num_warps": True, "BLOCK": 16},
                {"num_warps": 4, "BLOCK": 16.0}):
        assert bad not in s
        with pytest.raises(ConfigError, match="write"):
            s.validate(bad)
    assert "num_warps=4.0 is a float; the space's value is 4 (int)" in \
        s.violations({"num_warps": 4.0, "BLOCK": 16})[0]
    assert Config(num_warps=np.int64(4), BLOCK=16) in s  # numpy scalars are plain ints
    assert 2 in Choice("x", np.arange(4)) and 2.0 not in Choice("x", np.arange(4))


@pytest.mark.parametrize("declare, says", [
    (lambda: Int("x", 1.5, 3), "low=1.5 is not a whole number"),
    (lambda: Int("x", "1", "3"), "low='1' is not a whole number"),
    (lambda: Int("x", 1, 8, 0.5), "step=0.5 is not a whole number"),
    (lambda: Pow2("x", 1.0, 4), "low=1.0 is not a whole number"),
    (lambda: Pow2("x", None, 4), "low=None is not a whole number"),
    (lambda: Int("x", 0, 10**12), "1,000,000,000,001 values"),
    (lambda: Choice("x", [float("nan"), 1.0]), "NaN"),
    (lambda: Choice("x", [8, 8]), r"lists a value twice: \(8, 8\)$"),
    # Kernel Tuner's own test cache declares ["test", 1, True, 2.45]
    (lambda: Choice("x", ["test", 1, True, 2.45]), "such as 1 and True"),
    (lambda: Space([("BLOCK", [32, 64])]), "is not a parameter"),
    (lambda: Space(["BLOCK"]), "is not a parameter"),
])
def test_a_careless_declaration_is_a_space_error(declare, says):
    """These raised TypeError or AttributeError from inside tunex, Int(0, 10**12) tried to
    hold 10^12 values, and a NaN value was accepted though a config holding it (NaN equals
    nothing) could never be found again, e.g. read back from the database."""
    with pytest.raises(SpaceError, match=says):
        declare()
    assert Int("x", np.int64(1), 4).values == (1, 2, 3, 4)
    assert Pow2("x", np.int32(2), 8).values == (2, 4, 8)


def test_a_constraint_that_cannot_be_evaluated_says_so():
    """A rule that raises KeyError (a bug in it, not a judgement of the point) once escaped
    as a bare KeyError from deep in the search; a rule that raises an arithmetic error on some
    points still only excludes them."""
    from tunex.space import Choice

    with pytest.raises(SpaceError, match="cannot be evaluated: KeyError"):
        list(Space([Choice("x", [1, 2])], [lambda x: {}[x]]))
    assert Space([Choice("x", [0, 1, 2])], [lambda x: 1 / x > 0.6]).size == 1


def test_from_dict_and_sample_refuse_what_they_would_misread():
    """`"problem": "MN"` became the sizes M and N, a Bool default "false" became True,
    `sample(2.5)` returned every point and a bad `rng` raised NumPy's own error."""
    good = {"params": [{"kind": "Bool", "name": "flag", "values": [False, True],
                        "default": False}]}
    assert Space.from_dict(good).param("flag").default is False
    for bad in ({**good, "problem": "MN"},
                {"params": [{**good["params"][0], "default": "false"}]},
                {"params": [{"kind": "Pow2", "name": "x", "values": []}]}):
        with pytest.raises(SpaceError, match="malformed space declaration"):
            Space.from_dict(bad)
    space = Space([Pow2("x", 1, 64)])
    for n in (2.5, -1, True):
        with pytest.raises(SpaceError, match=r"sample\(n="):
            space.sample(n)
    with pytest.raises(SpaceError, match="rng='a'"):
        space.sample(2, rng="a")
    assert len(space.sample(np.int64(3), rng=1)) == 3


def test_a_choice_of_tuples_survives_json():
    """A Choice of tile shapes came back from JSON (a database's declared space) as lists,
    which are no config values: every search of such a kernel stopped at its first trial."""
    s = Space([Choice("tile", [(1, 2), (2, (4, 1))], default=(2, (4, 1)))])
    s2 = Space.from_dict(json.loads(json.dumps(s.to_dict())))
    assert list(s2) == list(s) and s2.default() == s.default()


def test_sampling_far_from_the_end_does_not_check_every_excluded_config(monkeypatch):
    """A search's history is excluded from every draw: checking each excluded config's
    validity made random search take 0.1 s a trial at 1,000 trials (quadratic). Only near
    the end of the space, where the count matters, is it checked."""
    s = Space([Int("a", 0, 99), Int("b", 0, 99)], ["a + b < 150"])
    history = s.sample(1000, rng=0)
    calls = []
    real = Space.violations
    monkeypatch.setattr(Space, "violations", lambda self, c: calls.append(c) or real(self, c))
    got = s.sample(5, rng=1, exclude=history)
    assert len(got) == 5 and not set(got) & set(history)
    assert len(calls) < 100  # the drawn points' checks, not the 1,000 excluded ones'
    calls.clear()
    assert len(s.sample(10_000, rng=1, exclude=history)) == s.size - 1000  # to the end: exact


def test_a_parameter_named_like_a_constraint_function_is_read_as_the_parameter():
    """`max > 1` read no parameter (max was taken for the function); a name called is the
    function, any other the parameter, and a name used as both is refused."""
    from tunex.errors import SpaceError
    from tunex.space import Choice, Int

    s = Space([Choice("max", [1, 2, 3]), Int("a", 1, 4)], ["max > 1", "min(a, max) >= 2"])
    assert sorted((c["max"], c["a"]) for c in s) == [(m, a) for m in (2, 3) for a in (2, 3, 4)]
    with pytest.raises(SpaceError, match="uses 'max' both as a parameter and as a function"):
        Space([Choice("max", [1, 2])], ["max(max, 1) > 1"])


def test_a_value_outside_a_large_domain_is_named_in_a_short_message():
    """One bad value of a permutation of 8 items printed all 40,320 of them (1.7 MB)."""
    from tunex.errors import SpaceError
    from tunex.space import Int, Permutation

    for space, value in ((Space([Int("x", 1, 10**6)]), {"x": 0}),
                         (Space([Permutation("o", list("abcdefgh"))]), {"o": ("z",)})):
        with pytest.raises(SpaceError, match="is not a value of") as info:
            space.neighbours(value)
        assert len(str(info.value)) < 500 and "more ..." in str(info.value)


def test_a_choice_declared_against_the_rule_keeps_its_order_through_json():
    """Names declared ordered (sizes "S" < "M" < "L") and numbers declared unordered (codes)
    came back from a database's declared space with the default rule: a resumed or exported
    search stepped between other neighbours than the kernel's."""
    s = Space([Choice("size", ["S", "M", "L"], ordered=True),
               Choice("algo", [3, 1, 2], ordered=False), Choice("u", [1, 2, 4])])
    d = json.loads(json.dumps(s.to_dict()))
    assert "ordered" not in d["params"][2]  # the rule's own choice is not written
    s2 = Space.from_dict(d)
    assert [p.ordered for p in s2.params] == [True, False, True]
    assert s2.param("size").neighbours("S") == ["M"]
    assert sorted(s2.param("algo").neighbours(3)) == [1, 2]
    d["params"][0]["ordered"] = "yes"
    with pytest.raises(SpaceError, match=r"malformed space declaration.*ordered"):
        Space.from_dict(d)


def test_an_order_recorded_as_one_string_encodes_as_its_tuple():
    """The shipped RVV recordings write a loop order as "kij"; a live kernel's Permutation
    holds ('k', 'i', 'j'): a warm start from them lost the order (nan) in every config."""
    s = Space([Permutation("order", ("i", "j", "k")), Choice("u", [1, 2])])
    rows = s.encode([{"order": "kij", "u": 2}, {"order": ("k", "i", "j"), "u": 2},
                     {"order": "kix", "u": 2}, {"order": "ijkk", "u": 1}], partial=True)
    assert np.array_equal(rows[0], rows[1]) and not np.isnan(rows[0]).any()
    assert np.isnan(rows[2][:3]).all() and np.isnan(rows[3][:3]).all()  # not an order of them
    assert "kij" not in s.param("order")  # a config still holds the tuple, not the string
