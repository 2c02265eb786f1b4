"""The kernels library: spaces, problem keys, references, and correctness under Triton's
interpreter on CPU tensors (no GPU needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="kernels need torch (scripts/install-triton.sh)")
pytest.importorskip("triton", reason="kernels need triton (scripts/install-triton.sh)")

from kernels import available_kernels, get_kernel
from kernels.matmul import TUTORIAL_CONFIGS
from tunex.errors import ConfigError
from tunex.trial import Config

H200 = {"smem": 232448, "sm_count": 132, "arch": 90}
ROOT = Path(__file__).resolve().parents[2]

SHAPES = {
    "matmul": {"M": 4096, "N": 4096, "K": 4096},
    "softmax": {"M": 4096, "N": 3000},
    "layernorm": {"M": 4096, "N": 3000},
    "flash_attention": {"Z": 4, "H": 16, "N_CTX": 1024, "D": 64},
    "matmul_tma": {"M": 4096, "N": 4096, "K": 4096},
}


def test_registry_has_the_library_kernels() -> None:
    assert set(SHAPES) <= set(available_kernels())
    with pytest.raises(ConfigError, match="unknown kernel"):
        get_kernel("no_such_kernel")
    assert get_kernel("matmul") is get_kernel("matmul")


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_space_binds_and_default_is_valid(name: str) -> None:
    k = get_kernel(name)
    key = k.problem_key(SHAPES[name])
    space = k.bind(k.space(), k.representative(key), H200)
    assert 0 < space.size <= space.raw_size
    assert k.default_config(SHAPES[name], H200) in space
    # every valid point names exactly the kernel's constexprs and launch options
    c = space.at(space.size - 1)
    inputs = k.make_inputs(k.representative(key), device="meta")
    args = k.ordered_args(inputs, k.representative(key), c)
    assert len(args) == len(k.fn.arg_names)
    assert len(k.source_hash) == 16
    assert k.flops(key) > 0 and k.bytes(key) > 0


def test_matmul_space_matches_the_issue_and_fits_shared_memory() -> None:
    k = get_kernel("matmul")
    assert k.space().raw_size == 1152  # BLOCK_M/N 32..256, BLOCK_K 32..128, GROUP_M, 3 x 4
    space = k.bind(k.space(), k.problem_key({"M": 1024, "N": 1024, "K": 1024}), H200)
    assert 300 <= space.size <= 600
    for c in space:
        smem = (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 * c["num_stages"]
        assert smem <= H200["smem"]
    for c in TUTORIAL_CONFIGS:  # the tutorial's configs are all in the space
        assert Config(c) in space
    small = k.bind(k.space(), k.problem_key({"M": 64, "N": 8192, "K": 8192}), H200)
    assert small.size < space.size and all(c["BLOCK_M"] <= 128 for c in small)
    # a smaller shared memory (e.g. an sm_86 part) leaves fewer points
    assert k.bind(k.space(), k.problem_key({"M": 1024, "N": 1024, "K": 1024}),
                  {"smem": 101376}).size < space.size


def test_problem_key_buckets_and_validates() -> None:
    mm = get_kernel("matmul")
    assert mm.problem_key({"M": 1000, "N": 4096, "K": 4096}) == {
        "M": 1024, "N": 4096, "K": 4096, "dtype": "float16"}
    assert mm.problem_key({"M": 513, "N": 100, "K": 7, "dtype": "bf16"})["dtype"] == "bfloat16"
    assert mm.problem_key({"M": 513, "N": 100, "K": 7})["N"] == 100  # N, K are exact
    with pytest.raises(ConfigError, match="missing"):
        mm.problem_key({"M": 1, "N": 2})
    with pytest.raises(ConfigError, match="dtype"):
        mm.problem_key({"M": 1, "N": 2, "K": 3, "dtype": "float64"})
    with pytest.raises(ConfigError, match="positive"):
        mm.problem_key({"M": 0, "N": 2, "K": 3})
    fa = get_kernel("flash_attention")
    assert fa.problem_key({"Z": 1, "H": 2, "N_CTX": 1000, "D": 64})["N_CTX"] == 1024
    with pytest.raises(ConfigError, match="head dim"):
        fa.problem_key({"Z": 1, "H": 2, "N_CTX": 1000, "D": 48})


def test_check_reports_what_is_wrong() -> None:
    import torch

    k = get_kernel("softmax")
    want = torch.ones(4, 4, dtype=torch.float16)
    assert k.check((want.clone(),), (want,), "float16") is None
    bad = want.clone()
    bad[0, 0] = float("nan")
    bad[1, 1] = 2
    msg = k.check((bad,), (want,), "float16")
    assert msg is not None and "2 of 16" in msg


# Tiny shapes, ragged on purpose (masks), two configs each: the interpreter runs every program
# instance in Python. fp16/fp32 only: numpy has no bfloat16 and the interpreter cannot run it.
INTERPRET = {
    "matmul": ({"M": 48, "N": 40, "K": 72}, [
        {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 2,
         "num_stages": 2},
        {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 2,
         "num_stages": 3}]),
    "softmax": ({"M": 7, "N": 100, "dtype": "float32"}, [
        {"ROWS": 1, "num_warps": 1, "num_stages": 1},
        {"ROWS": 4, "num_warps": 2, "num_stages": 2}]),
    "layernorm": ({"M": 5, "N": 300}, [
        {"BLOCK_N": 128, "num_warps": 1, "num_stages": 1},
        {"BLOCK_N": 512, "num_warps": 4, "num_stages": 2}]),
    # two heads and a ragged sequence: blocks run past a head into the next one's rows
    "flash_attention": ({"Z": 1, "H": 2, "N_CTX": 50, "D": 16}, [
        {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "TMA": False},
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "TMA": True}]),
    # more tiles than the interpreter's 4 programs (the persistent loop), ragged edges
    "matmul_tma": ({"M": 100, "N": 72, "K": 136}, [
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4,
         "num_stages": 2, "SUBTILE": True, "FLATTEN": True},
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 4,
         "num_stages": 3, "SUBTILE": False, "FLATTEN": False}]),
}


@pytest.mark.parametrize("name", sorted(INTERPRET))
def test_correct_under_triton_interpreter(name: str) -> None:
    shape, configs = INTERPRET[name]
    k = get_kernel(name)
    space = k.bind(k.space(), k.representative(k.problem_key(shape)), H200)
    for c in configs:
        assert Config(c) in space, space.violations(c)
    # TRITON_INTERPRET must be set before triton is imported: run in a fresh interpreter
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "kernels" / "interpret_check.py"),
         json.dumps({"kernel": name, "shape": shape, "configs": configs})],
        capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["error"] for r in results] == [None] * len(configs), results


def test_kernels_from_the_environment() -> None:
    code = ("import kernels; print(kernels.get_kernel('mm2').name, "
            "'mm2' in kernels.available_kernels())")
    env = {**os.environ, "TUNEX_KERNELS": "mm2=kernels.matmul:Matmul",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["matmul", "True"]
    env["TUNEX_KERNELS"] = "broken"
    done = subprocess.run([sys.executable, "-c", "import kernels; kernels.available_kernels()"],
                          capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode != 0 and "TUNEX_KERNELS entry" in done.stderr


def test_descriptor_kernels_get_a_scratch_allocator_in_every_thread() -> None:
    """Triton keeps its allocator in a context variable: a new thread starts without one, so
    a launch there of a kernel that makes descriptors would fail unless tunex sets it."""
    import threading

    from triton.runtime import _allocation

    from kernels._base import install_allocator

    assert get_kernel("matmul_tma").needs_allocator
    assert get_kernel("flash_attention").needs_allocator
    assert not get_kernel("matmul").needs_allocator
    seen: dict[str, object] = {}

    def fresh_thread() -> None:
        seen["before"] = _allocation._allocator.get()
        install_allocator()
        seen["after"] = _allocation._allocator.get()
        mine = object()
        _allocation._allocator.set(mine)  # an application's own allocator is kept
        install_allocator()
        seen["kept"] = _allocation._allocator.get() is mine

    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    assert isinstance(seen["before"], _allocation.NullAllocator)
    assert not isinstance(seen["after"], _allocation.NullAllocator)
    buf = seen["after"](256, 128, None)  # type: ignore[operator]
    assert buf.numel() == 256 and buf.data_ptr() != 0
    assert seen["kept"] is True


def test_matmul_tma_refuses_rows_tma_cannot_move() -> None:
    k = get_kernel("matmul_tma")
    with pytest.raises(ConfigError, match=r"multiples of 8.*use matmul"):
        k.problem_key({"M": 64, "N": 100, "K": 64})
    assert k.problem_key({"M": 100, "N": 104, "K": 64})["M"] == 128  # M is free (bucketed)
