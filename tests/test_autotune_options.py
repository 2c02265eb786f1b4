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
