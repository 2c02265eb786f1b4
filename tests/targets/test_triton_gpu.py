"""The triton_gpu target without a GPU: ahead-of-time builds for sm_90, compile-time facts and
pruning, the launch specialisation, pickling to workers, and clear errors."""

from __future__ import annotations

import pickle

import pytest

torch = pytest.importorskip("torch", reason="triton_gpu needs torch (scripts/install-triton.sh)")
pytest.importorskip("triton", reason="triton_gpu needs triton (scripts/install-triton.sh)")

from kernels import get_kernel  # noqa: E402
from kernels.matmul import TUTORIAL_CONFIGS  # noqa: E402
from tunex.errors import ConfigError, TargetError  # noqa: E402
from tunex.targets import make_target  # noqa: E402
from tunex.targets.triton_gpu import (  # noqa: E402
    TritonBinary,
    TritonGPUTarget,
    parse_arch,
    specialize,
)
from tunex.trial import Config, Status  # noqa: E402

NO_GPU = not torch.cuda.is_available()


@pytest.fixture(scope="module")
def sm90() -> TritonGPUTarget:
    target = make_target("triton_gpu:sm_90?repeats=5")
    assert isinstance(target, TritonGPUTarget)
    return target


def test_make_target_and_fingerprint(sm90: TritonGPUTarget) -> None:
    fp = sm90.fingerprint()
    # what @tunex.autotune reads on a device: no torch or CUDA version (trial facts instead)
    assert set(fp) == {"device", "arch", "triton"} and fp["arch"] == "sm_90" and fp["triton"]
    if NO_GPU:
        assert fp["device"] == "sm_90 (ahead of time)"
    assert sm90.options.repeats == 5
    facts = sm90.facts()
    assert facts["smem_per_block"] == 232448 and facts["sm_count"] > 0
    assert all(isinstance(v, float) for v in facts.values())


def test_parse_arch() -> None:
    assert parse_arch("sm_90") == parse_arch("sm90a") == parse_arch(90) == parse_arch("9.0") == 90
    assert parse_arch("sm_80") == 80
    with pytest.raises(TargetError, match="sm_90"):
        parse_arch("hopper")


@pytest.mark.skipif(not NO_GPU, reason="a GPU is visible")
def test_without_gpu_an_arch_is_required_and_measure_says_why(sm90: TritonGPUTarget) -> None:
    with pytest.raises(TargetError, match="triton_gpu:sm_90"):
        make_target("triton_gpu")
    space, wl = sm90.prepare("softmax", {"M": 64, "N": 256})
    art = sm90.build(wl, space.default())
    assert art.ok
    with pytest.raises(TargetError, match="NVIDIA GPU"):
        sm90.measure(art)


def test_prepare_binds_space_and_names_the_workload(sm90: TritonGPUTarget) -> None:
    space, wl = sm90.prepare("matmul", {"M": 1000, "N": 4096, "K": 4096})
    assert wl.kernel == "matmul" and wl.kernel_hash == get_kernel("matmul").source_hash
    assert wl.problem == {"M": 1024, "N": 4096, "K": 4096, "dtype": "float16"}
    assert wl.target == sm90.fingerprint()
    assert space.is_bound and space.bound["smem"] == 232448
    with pytest.raises(ConfigError):
        sm90.prepare("matmul", {"M": 10})
    with pytest.raises(TargetError, match="name the kernel"):
        sm90.prepare(None, {})


# One real config of every kernel (the tutorial's first for matmul), built for sm_90 on CPU.
BUILDS = {
    "matmul": ({"M": 512, "N": 4096, "K": 1024}, TUTORIAL_CONFIGS[0]),
    "softmax": ({"M": 4096, "N": 1000}, {"ROWS": 2, "num_warps": 4, "num_stages": 2}),
    "layernorm": ({"M": 4096, "N": 1000}, {"BLOCK_N": 1024, "num_warps": 4, "num_stages": 2}),
    "flash_attention": ({"Z": 4, "H": 16, "N_CTX": 1024, "D": 64},
                        {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3,
                         "TMA": True}),
    "matmul_tma": ({"M": 512, "N": 4096, "K": 1024},
                   {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                    "num_stages": 3, "SUBTILE": True, "FLATTEN": True}),
}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_ahead_of_time_build_for_sm90_records_facts(sm90: TritonGPUTarget, name: str) -> None:
    shape, config = BUILDS[name]
    space, wl = sm90.prepare(name, shape)
    config = Config(config)
    assert config in space
    art = sm90.build(wl, config)
    assert art.status is Status.OK, art.error
    f = art.facts
    assert f["num_warps"] == config["num_warps"] and f["num_stages"] == config["num_stages"]
    assert f["code_bytes"] > 1000 and f["shared_bytes"] >= 0
    assert 16 <= f["n_regs"] <= 255 and f["n_spills"] == 0
    assert art.compile_ms is not None and art.compile_ms > 0
    # the payload crosses to the measuring process: cubin and metadata, picklable
    binary = pickle.loads(pickle.dumps(art)).payload
    assert isinstance(binary, TritonBinary) and binary.arch == 90
    assert binary.cubin[:4] == b"\x7fELF"
    assert '"arch": "sm90"' in binary.metadata_json or "sm90" in binary.metadata_json


def test_matmul_tile_size_drives_shared_memory(sm90: TritonGPUTarget) -> None:
    _, wl = sm90.prepare("matmul", {"M": 512, "N": 4096, "K": 1024})
    art = sm90.build(wl, Config(TUTORIAL_CONFIGS[0]))  # 128x256x64, 3 stages
    assert art.facts["shared_bytes"] == (128 + 256) * 64 * 2 * 3


def test_build_prunes_a_config_that_overflows_shared_memory(sm90: TritonGPUTarget) -> None:
    space, wl = sm90.prepare("matmul", {"M": 512, "N": 4096, "K": 1024})
    big = Config(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=1, num_warps=8, num_stages=5)
    assert big not in space  # the declarative constraint already rejects it...
    art = sm90.build(wl, big)  # ...and if asked anyway, the compiled metadata does too
    assert art.status is Status.PRUNED
    assert art.facts["shared_bytes"] > 232448
    assert "shared memory" in (art.error or "") and art.payload is None
    m = sm90.measure(art)  # a pruned artifact is a measurement, no GPU needed
    assert m.status is Status.PRUNED and not m.ok and m.facts["shared_bytes"] > 232448


def test_pruning_against_a_smaller_device_limit() -> None:
    small = make_target("triton_gpu:sm_90?smem=49152")
    _, wl = small.prepare("flash_attention", {"Z": 1, "H": 2, "N_CTX": 256, "D": 64})
    art = small.build(wl, Config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, TMA=False))
    assert art.status is Status.PRUNED and art.facts["shared_bytes"] > 49152


def test_a_config_that_cannot_compile_is_data(sm90: TritonGPUTarget) -> None:
    _, wl = sm90.prepare("softmax", {"M": 64, "N": 256})
    art = sm90.build(wl, Config(ROWS=1, num_warps=3, num_stages=1))  # not a power of two
    assert art.status is Status.COMPILE_ERROR and art.error
    assert sm90.measure(art).status is Status.COMPILE_ERROR


def test_specialize_mirrors_the_jit() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend
    from triton.runtime.jit import native_specialize_impl

    k = get_kernel("matmul")
    problem = {"M": 64, "N": 40, "K": 1024, "dtype": "float16"}
    inputs = k.make_inputs(problem, device="meta")
    args = k.ordered_args(inputs, problem, TUTORIAL_CONFIGS[1])
    sig, constexprs, attrs = specialize(k.fn, args)
    assert sig["a_ptr"] == "*fp16" and (0,) in attrs
    assert sig["stride_ak"] == "constexpr" and constexprs[(7,)] == 1  # unit strides are constants
    assert sig["N"] == "i32" and (4,) not in attrs  # 40 is not a multiple of 16
    assert (5,) in attrs and sig["BLOCK_M"] == "constexpr"
    backend = make_backend(GPUTarget("cuda", 90, 32))
    for i, v in enumerate(args):
        if isinstance(v, int) and not isinstance(v, bool) and i not in k.fn.constexprs:
            ty, spec = native_specialize_impl(backend, v, False, True, True)
            name = k.fn.arg_names[i]
            assert sig[name] == ty
            assert ((i,) in attrs) == (spec == "D")


def test_target_pickles_without_device_state(sm90: TritonGPUTarget) -> None:
    clone = pickle.loads(pickle.dumps(sm90))
    assert clone.fingerprint() == sm90.fingerprint() and clone._state is None


def test_unknown_load_mode_is_refused() -> None:
    with pytest.raises(TargetError, match="load=binary"):
        make_target("triton_gpu:sm_90?load=bogus")


USER_TRITON_KERNEL = '''
import triton
import triton.language as tl

from kernels._base import TritonKernel
from tunex.space import Pow2, Space


@triton.jit
def twice_kernel(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class Twice(TritonKernel):
    name = "user_twice"
    dims = ("N",)
    dim_args = {"N": "n"}
    dtype_arg = "x_ptr"
    dtypes = ("float32",)

    @property
    def fn(self):
        return twice_kernel

    def space(self):
        return Space([Pow2("BLOCK", 64, 1024, default=256), Pow2("num_warps", 1, 4, default=4)],
                     name="user_twice")

    def make_inputs(self, problem, device="cuda", seed=0):
        import torch

        x = torch.empty(problem["N"], device=device) if device == "meta" else (
            torch.randn(problem["N"], generator=torch.Generator().manual_seed(seed)).to(device))
        return {"x": x, "y": torch.empty(problem["N"], device=device)}

    def outputs(self, inputs):
        return (inputs["y"],)

    def args(self, inputs, problem, config):
        return {"y_ptr": inputs["y"], "x_ptr": inputs["x"], "n": problem["N"],
                **self.constexprs(config)}

    def grid(self, problem, config):
        return (triton.cdiv(problem["N"], config["BLOCK"]),)

    def reference(self, inputs, problem):
        return (2 * inputs["x"],)

    def flops(self, problem):
        return problem["N"]

    def bytes(self, problem):
        return 8.0 * problem["N"]
'''


def test_a_users_triton_kernel_file_builds_in_the_workers(sm90: TritonGPUTarget, tmp_path,
                                                          monkeypatch) -> None:
    from tunex.cluster import BuildPool

    monkeypatch.setenv("TUNEX_KERNELS", "")  # restored after: the spec adds the kernel to it
    (tmp_path / "twice.py").write_text(USER_TRITON_KERNEL)
    space, wl = sm90.prepare(str(tmp_path / "twice.py") + ":Twice", {"N": 10_000})
    assert wl.kernel == "user_twice" and space.size == 15
    pool = BuildPool(1, timeout=120)  # a worker process: it finds the kernel by its name
    try:
        art = pool.submit("t", sm90, wl, Config({"BLOCK": 128, "num_warps": 2})).result(120)
    finally:
        pool.close()
    assert art.status is Status.OK, art.error
    assert art.payload.cubin[:4] == b"\x7fELF"
