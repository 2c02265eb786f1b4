"""Offline tuning and the runtime name a workload alike: what ``TritonGPUTarget.prepare``
records (and packs exported from it) is what the kernels' ``@tunex.autotune`` launchers
(``kernels.matmul.matmul(a, b)``...) look up for a call of that problem on the same device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="kernels need torch (scripts/install-triton.sh)")
triton = pytest.importorskip("triton", reason="kernels need triton (scripts/install-triton.sh)")

from kernels import get_kernel  # noqa: E402
from tunex import identity as common  # noqa: E402
from tunex.decorator import fingerprint  # noqa: E402
from tunex.targets.triton_gpu import TritonGPUTarget  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SHAPES = {
    "matmul": {"M": 1000, "N": 4096, "K": 4096},
    "softmax": {"M": 1000, "N": 3000},
    "layernorm": {"M": 1000, "N": 3000},
    "flash_attention": {"Z": 2, "H": 4, "N_CTX": 500, "D": 64},
    "matmul_tma": {"M": 1000, "N": 4096, "K": 4096},
}
#: Another shape in the same bucket (M and N_CTX go by powers of two).
SAME_BUCKET = {"matmul": {"M": 600}, "softmax": {"M": 600}, "layernorm": {"M": 513},
               "flash_attention": {"N_CTX": 300}, "matmul_tma": {"M": 600}}


@pytest.fixture
def fake_h200(monkeypatch: pytest.MonkeyPatch) -> Any:
    """torch sees one H200 (its properties only: nothing runs on it)."""
    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                            shared_memory_per_block_optin=232448, L2_cache_size=60 << 20,
                            regs_per_multiprocessor=65536)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    common.clear_device_cache()
    yield props
    common.clear_device_cache()


def test_target_and_decorator_share_the_fingerprint(fake_h200: Any) -> None:
    target = TritonGPUTarget()  # the visible GPU
    fp = {"device": "NVIDIA H200", "arch": "sm_90", "triton": triton.__version__}
    assert target.fingerprint() == fingerprint() == fp  # no torch or CUDA version in the key
    assert TritonGPUTarget("sm_90").fingerprint() == fp
    # ahead of time without the GPU of that arch: say which device will measure
    assert TritonGPUTarget("sm_80").fingerprint()["device"] == "sm_80 (ahead of time)"
    assert TritonGPUTarget("sm_80", device="NVIDIA A100-SXM4-80GB").fingerprint() == {
        "device": "NVIDIA A100-SXM4-80GB", "arch": "sm_80", "triton": triton.__version__}
    assert fingerprint(interpreted=True) == {"device": "cpu", "arch": "interpreter",
                                             "triton": triton.__version__}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_launch_workload_and_space_equal_the_targets(fake_h200: Any, name: str) -> None:
    """On a (faked) H200: the workload and bound space a launch resolves with are the ones the
    target prepares for the same shape, for a shape in the same bucket too."""
    target = TritonGPUTarget()
    k = get_kernel(name)
    space, wl = target.prepare(name, SHAPES[name])
    tuned = k.autotune()
    assert not tuned.interpreted and tuned.kernel_hash == k.source_hash == wl.kernel_hash
    for shape in (SHAPES[name], {**SHAPES[name], **SAME_BUCKET[name]}):
        problem = dict(shape)
        named = k.args(k.make_inputs(problem, device="meta"), problem, {})
        got, raw = tuned.workload(named)
        assert got == wl, (got.key, wl.key)
        assert raw == {k.dim_args.get(d, d): v for d, v in shape.items()}
    assert list(tuned._space_for(got)) == list(space)


def test_launchers_pick_what_the_target_recorded_under_the_interpreter(tmp_path: Path) -> None:
    """End to end on CPU: rows recorded under ``TritonGPUTarget.prepare``'s workload, and a
    pack exported from them, are what ``kernels.matmul.matmul`` runs (see launcher_check.py)."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("launcher_check.py")), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    best, events = out["config"], out["events"]
    assert best != out["default"]

    align = [e for e in events if e["phase"] == "align"]
    assert {e["kernel"] for e in align} == set(SHAPES)  # flash attention twice: a view too
    for e in events:  # every launch looked up the target's workload, and computed right
        assert e["runtime"] == e["target"], e
        assert e["error"] < 0.05, e
    for e in align:  # nothing recorded for these: the space's default
        assert e["source"] == "default", e

    db = [e for e in events if e["phase"] == "db"]
    assert [e["shape"]["M"] for e in db] == [48, 40, 40]
    assert [e["source"] for e in db] == ["db", "cache", "db"]
    assert all(e["config"] == best for e in db)

    # matmul runs whichever library kernel measured faster for the workload: the TMA one,
    # which the database holds at 0.010 ms against 0.020 ms; the plain one, with no rows for
    # M=200, the best config of its nearest tuned shape (M=48)
    choice = [e for e in events if e["phase"] == "choice"]
    assert [(e["kernel"], e["source"]) for e in choice] == [("matmul_tma", "db"),
                                                            ("matmul", "db")]
    assert choice[0]["config"] == out["tma_config"]
    assert choice[1]["config"] == best and "nearest tuned workload" in choice[1]["reason"]

    # a pack exported from that database carries both kernels' rows: the same choice
    pack = [e for e in events if e["phase"] == "pack"]
    assert [e["source"] for e in pack] == ["pack", "pack"]
    assert all(e["config"] == out["tma_config"] and "exact device" in e["reason"]
               for e in pack)
