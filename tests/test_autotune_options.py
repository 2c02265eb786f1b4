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
