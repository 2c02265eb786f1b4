"""@tunex.autotune's arguments are checked when a kernel is decorated (no GPU, no launch): a
careless one is a clear error there, not a traceback at the first tuning on a GPU."""

from __future__ import annotations

import pytest

import tunex
from tunex.errors import StrategyError
from tunex.space import Pow2, Space

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


SPACE = Space([Pow2("BLOCK", 32, 128)])


def decorate(**options):
    return tunex.autotune(**{"space": SPACE, "key": ["n"], **options})(triton.jit(add_kernel))


@pytest.mark.parametrize("seed", [-1, 1.5, "a"])
def test_a_seed_numpy_cannot_take_is_refused_at_decoration(seed):
    with pytest.raises(StrategyError, match=r"@tunex\.autotune: seed="):
        decorate(seed=seed)
    assert decorate(seed=None).seed is None


@pytest.mark.parametrize("strategy", ["rnadom", "optuna-tpe", None, ""])
def test_an_unknown_strategy_is_refused_at_decoration(strategy):
    """strategy='rnadom' was accepted, and the first call that missed raised from inside the
    kernel launch (with mode='on_miss', on the GPU)."""
    with pytest.raises(StrategyError, match="unknown search strategy"):
        decorate(strategy=strategy, mode="on_miss")
    assert decorate(strategy="optuna:tpe").strategy == "optuna:tpe"


@pytest.mark.parametrize("default", [{"BLOCK": 48}, {"BLOK": 32}, {}, {"BLOCK": 32, "XBLOCK": 8},
                                     {"BLOCK": 32.0}, "BLOCK=32", 5])
def test_a_default_outside_the_space_is_refused_at_decoration(default):
    """default={"BLOCK": 48} or {"BLOK": 32} was accepted: mode 'never' launched it as is (a
    block size that does not compile, an argument the kernel does not take) and tuning on a
    miss silently skipped it; a string crashed with a ValueError."""
    from tunex.errors import ConfigError

    with pytest.raises(ConfigError, match="default="):
        decorate(default=default)
    assert decorate(default={"BLOCK": 64})._default["BLOCK"] == 64
    tc = decorate(default=triton.Config({"BLOCK": 64}, num_warps=2))._default  # launch options
    assert tc["BLOCK"] == 64 and tc["num_warps"] == 2


@pytest.mark.parametrize("options", [
    {"space": {"BLOCK": [32, 64]}}, {"space": [Pow2("BLOCK", 32, 64)]},
    {"space": None, "configs": [{"BLOCK": 32}]}, {"space": None, "configs": ["BLOCK=32"]},
    {"space": None, "configs": triton.Config({"BLOCK": 32})},
])
def test_a_space_or_config_list_of_the_wrong_kind_is_a_config_error(options):
    """These raised AttributeError ('dict' object has no attribute 'names' / 'kwargs') or a
    TypeError from inside the decorator."""
    from tunex.errors import ConfigError

    with pytest.raises(ConfigError, match="takes a"):
        decorate(**options)
    assert decorate(space=None, configs=(triton.Config({"BLOCK": 32}),)).space.size == 1


@pytest.mark.parametrize("options, says", [
    ({"key": None}, "key=None: give the names"),
    ({"key": 5}, "key=5: give the names"),
    ({"key": ["n", "n"]}, "names n twice"),
    ({"warmup": "10"}, "warmup='10': give milliseconds"),
    ({"rep": float("inf")}, "rep=inf: give milliseconds"),
    ({"dtypes": "no"}, "dtypes='no': give True or False"),
    ({"use_cuda_graph": "false"}, "use_cuda_graph='false': give True or False"),
    ({"name": 5}, "name=5: give the kernel's name"),
    ({"name": " "}, "name=' ': give the kernel's name"),
    ({"space": Space([Pow2("BLOCK", 32, 128), Pow2("n", 32, 64)])}, r"\['n'\] both select"),
    ({"db": 5}, "db=5: give the tuning database"),
    ({"db": ["a.db"]}, "db=.*give the tuning database"),
    ({"listener": "print"}, "listener='print': give a function"),
    ({"bench": 3}, "bench=3: give a function"),
    ({"problem": {"n": 1}}, "problem=.*give a function"),
    ({"reset_to_zero": 5}, "reset_to_zero=5: give a list"),
])
def test_options_of_the_wrong_kind_are_refused_at_decoration(options, says):
    """Each once passed decoration: `dtypes="no"` and `use_cuda_graph="false"` read as true,
    `warmup="10"` failed at the first timing, `key=None` with a TypeError from inside, `db=5`
    with a TypeError at the first call, `listener="print"` was never called."""
    from tunex.errors import ConfigError

    with pytest.raises(ConfigError, match=says):
        decorate(**options)
    assert decorate(key="n").key_names == ["n"]  # one name is a key too


def test_one_name_for_reset_to_zero_is_that_argument():
    """reset_to_zero='out' was read letter by letter: "'o' is not an argument of the kernel"."""
    k = decorate(reset_to_zero="out", restore_value="x")
    assert k.reset_to_zero == ["out"] and k.restore_value == ["x"]


def test_a_kernel_decorated_twice_is_refused_at_decoration():
    """It was accepted, and its first call failed inside the inner one: "['BLOCK'] are tuned
    by @tunex.autotune; do not pass them to the call", though the caller passed none."""
    from tunex.errors import ConfigError

    k = decorate()
    with pytest.raises(ConfigError, match=r"already under @tunex\.autotune"):
        tunex.autotune(space=SPACE, key=["n"])(k)
    assert tunex.autotune(space=SPACE, key=["n"], mode="pinned")(k.fn).mode == "pinned"
