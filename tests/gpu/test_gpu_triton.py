"""The triton_gpu target on a real GPU: build, load the cubin, check, time.

Marked ``gpu``; skipped where torch sees no CUDA device. Run with ``pytest -m gpu tests``.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")
pytest.importorskip("triton", reason="needs triton")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch"),
]

from kernels import get_kernel, register_kernel  # noqa: E402
from kernels.matmul import TUTORIAL_CONFIGS, Matmul  # noqa: E402
from tunex.cluster import LocalExecutor, LocalOptions  # noqa: E402
from tunex.targets import make_target  # noqa: E402
from tunex.targets.triton_gpu import TritonGPUTarget  # noqa: E402
from tunex.trial import Artifact, Config, Status  # noqa: E402
from tunex.tuner import Tuner  # noqa: E402


class WrongMatmul(Matmul):
    """A matmul whose reference is off: every correct kernel must be reported wrong."""

    name = "matmul_wrong_reference"

    def reference(self, inputs, problem):  # type: ignore[no-untyped-def]
        (c,) = super().reference(inputs, problem)
        return (c + 1,)


register_kernel(WrongMatmul.name, f"{__name__}:WrongMatmul")


class FaultingMatmul(Matmul):
    """A matmul told that A's rows are 2^28 elements apart: its loads leave the allocation
    (the offsets overflow 32 bits), so the kernel faults with an illegal memory access."""

    name = "matmul_faulting"

    def args(self, inputs, problem, config):  # type: ignore[no-untyped-def]
        return {**super().args(inputs, problem, config), "stride_am": 1 << 28}


@pytest.fixture(scope="module")
def gpu() -> TritonGPUTarget:
    t = make_target("triton_gpu?repeats=10")
    assert isinstance(t, TritonGPUTarget)
    yield t
    t.close()


def test_fingerprint_and_facts_name_the_device(gpu: TritonGPUTarget) -> None:
    fp = gpu.fingerprint()
    name = torch.cuda.get_device_name()
    assert fp["device"] == name and set(fp) == {"device", "arch", "triton"}
    cap = torch.cuda.get_device_capability()
    assert fp["arch"] == f"sm_{cap[0]}{cap[1]}"
    assert gpu.facts()["sm_count"] == torch.cuda.get_device_properties(0).multi_processor_count


SHAPES = {
    "matmul": {"M": 512, "N": 1024, "K": 768},
    "softmax": {"M": 1000, "N": 3000},
    "layernorm": {"M": 1000, "N": 3000},
    "flash_attention": {"Z": 2, "H": 4, "N_CTX": 500, "D": 64},
    "matmul_tma": {"M": 500, "N": 1000, "K": 776},  # ragged: TMA clips the edge tiles
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_measure_default_and_sampled_configs(gpu: TritonGPUTarget, name: str) -> None:
    space, wl = gpu.prepare(name, SHAPES[name])
    configs = [space.default(), *space.sample(3, rng=0)]
    for c in configs:
        art = gpu.build(wl, c)
        if art.status is Status.PRUNED:
            continue
        assert art.ok, art.error
        m = gpu.measure(art)
        assert m.status is Status.OK, (c, m.error)
        assert len(m.times_ms) >= 5 and all(t > 0 for t in m.times_ms)
        assert m.facts["tflops"] > 0 and m.facts["n_regs"] > 0
        assert m.facts["cuda"] == torch.version.cuda  # a fact (pack provenance), not the key


def test_matmul_bf16_and_ragged_shape(gpu: TritonGPUTarget) -> None:
    space, wl = gpu.prepare("matmul", {"M": 300, "N": 200, "K": 100, "dtype": "bfloat16"})
    m = gpu.measure(gpu.build(wl, space.default()))
    assert m.status is Status.OK, m.error


def test_jit_launch_matches_reference(gpu: TritonGPUTarget) -> None:
    k = get_kernel("matmul")
    problem = k.representative(k.problem_key({"M": 256, "N": 256, "K": 256}))
    inputs = k.make_inputs(problem, device="cuda")
    got = k.run(inputs, problem, TUTORIAL_CONFIGS[2])
    assert k.check(got, k.reference(inputs, problem), "float16") is None


def test_launcher_runs_the_config_the_target_recorded(
        gpu: TritonGPUTarget, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what `tunex search matmul --target triton_gpu` records is what kernels.matmul.matmul uses
    from kernels.matmul import matmul
    from tunex.db import Database
    from tunex.decorator import add_listener, remove_listener

    space, wl = gpu.prepare("matmul", {"M": 200, "N": 256, "K": 128})
    default, best = space.default(), None
    for c in space:
        if c != default and (m := gpu.measure(gpu.build(wl, c))).ok:
            best = c
            break
    assert best is not None
    with Database(tmp_path / "t.db") as db:
        db.record(wl, m)
    for var in ("TUNEX_MODE", "TUNEX_PACKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TUNEX_DB", str(tmp_path / "t.db"))
    seen: list = []
    listener = add_listener(seen.append)
    try:
        a = torch.randn(200, 128, device="cuda", dtype=torch.float16)
        b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
        c = matmul(a, b)
    finally:
        remove_listener(listener)
    sel = [s for s in seen if s.kernel == "matmul"][-1]
    assert sel.workload == wl and sel.source == "db" and sel.config == best
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_matmul_runs_the_kernel_measured_faster(
        gpu: TritonGPUTarget, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # both library matmul kernels measured for one shape: kernels.matmul.matmul runs the faster
    import kernels.matmul
    from tunex.db import Database
    from tunex.decorator import add_listener, remove_listener

    shape = {"M": 1024, "N": 1024, "K": 512}
    times = {}
    with Database(tmp_path / "t.db") as db:
        for name in kernels.matmul.ALTERNATIVES:
            space, wl = gpu.prepare(name, shape)
            m = gpu.measure(gpu.build(wl, space.default()))
            assert m.ok, (name, m.error)
            db.record(wl, m)
            times[name] = m.value
    for var in ("TUNEX_MODE", "TUNEX_PACKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TUNEX_DB", str(tmp_path / "t.db"))
    kernels.matmul.clear_choices()
    seen: list = []
    listener = add_listener(seen.append)
    try:
        a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
        b = torch.randn(512, 1024, device="cuda", dtype=torch.float16)
        c = kernels.matmul.matmul(a, b)
        ran = kernels.matmul.implementation(a, b).name
    finally:
        remove_listener(listener)
        kernels.matmul.clear_choices()
    assert ran == min(times, key=lambda x: times[x]), times
    assert seen[-1].kernel == ran and seen[-1].source == "db"
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_wrong_result_is_recorded(gpu: TritonGPUTarget) -> None:
    space, wl = gpu.prepare(WrongMatmul.name, {"M": 128, "N": 128, "K": 128})
    m = gpu.measure(gpu.build(wl, space.default()))
    assert m.status is Status.WRONG_RESULT and "elements off" in (m.error or "")


def test_broken_binary_is_a_runtime_error(gpu: TritonGPUTarget) -> None:
    space, wl = gpu.prepare("softmax", {"M": 64, "N": 128})
    art = gpu.build(wl, space.default())
    bad = dataclasses.replace(art.payload, cubin=b"\x7fELF not really a cubin")
    m = gpu.measure(Artifact(wl, art.config, payload=bad, facts=art.facts))
    assert m.status is Status.RUNTIME_ERROR and m.error
    assert gpu.measure(art).status is Status.OK  # the process is still usable


def test_cuda_graphs_and_no_flush() -> None:
    t = make_target("triton_gpu?graphs=1&flush_mb=0&repeats=7")
    space, wl = t.prepare("softmax", {"M": 4096, "N": 1024})
    m = t.measure(t.build(wl, space.default()))
    assert m.status is Status.OK and len(m.times_ms) == 7
    t.close()


def test_tuner_with_local_executor_builds_in_workers(gpu: TritonGPUTarget) -> None:
    space, wl = gpu.prepare("matmul", {"M": 1024, "N": 1024, "K": 1024})
    with LocalExecutor(gpu, LocalOptions(build_workers=4, build_timeout=300)) as ex:
        result = Tuner(gpu, space, workload=wl, strategy="random", budget="12trials",
                       executor=ex, seed=1, remeasure=0).run()
    assert result.best is not None and result.best.ok
    assert result.new_trials >= 8
    assert not result.failures.get("worker_lost")
    assert Config(result.best.config) in space


def test_a_faulting_kernel_costs_one_trial_not_the_search(
        gpu: TritonGPUTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    # An illegal address kills the CUDA context of the measuring process: the target reports
    # it as a status (worker_lost, device_lost), the executor starts a fresh measuring process.
    monkeypatch.setenv("TUNEX_KERNELS", f"{FaultingMatmul.name}={__name__}:FaultingMatmul")
    register_kernel(FaultingMatmul.name, f"{__name__}:FaultingMatmul")
    bad_space, bad = gpu.prepare(FaultingMatmul.name, {"M": 4096, "N": 1024, "K": 512})
    space, good = gpu.prepare("matmul", {"M": 1024, "N": 1024, "K": 1024})
    with LocalExecutor(gpu, LocalOptions(build_workers=2, measure_timeout=60)) as ex:
        first = ex.submit(bad, bad_space.default()).result()
        after = ex.submit(good, space.default()).result()
    assert first.status in (Status.WORKER_LOST, Status.RUNTIME_ERROR), first
    assert after.status is Status.OK, after.error
    if first.status is Status.WORKER_LOST:  # the context died: said so, not found by exiting
        assert first.facts.get("device_lost") and "CUDA context died" in (first.error or "")
