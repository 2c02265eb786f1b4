"""Per-call overhead of ``@tunex.autotune`` on a known workload, beside ``triton.autotune``'s.

Measures, in one run on one GPU, the median wall time per call from Python of:

- a 2-argument kernel (``tiny(x_ptr, n, BLOCK: constexpr)``): a bare ``kernel[grid](...)``
  launch, the same kernel under ``@tunex.autotune`` (1 config, 8 configs, a declarative space
  of 8 points) and under ``triton.autotune`` (1 config, 8 configs), each on a workload already
  resolved (tuned once before timing);
- a 1024^3 fp16 matmul (the Triton tutorial's kernel, written below, with the tutorial's 8
  configs), end to end: the decorated call as a user makes it, back to back, against
  ``triton.autotune`` over the same configs, a bare launch with the config tunex picked, and
  ``torch.matmul``; plus the kernel alone (``triton.testing.do_bench``).

Variants are interleaved round by round so clock drift hits them alike; each round times
``--calls`` back-to-back calls and one synchronisation; the table gives the median over
``--rounds`` rounds. Usage::

    python benchmarks/dispatch_overhead.py [--calls 2000] [--rounds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton
import triton.language as tl

import tunex
from kernels.matmul import matmul_kernel as _library_matmul
from kernels.matmul import tutorial_triton_configs as tutorial_configs
from tunex.space import Choice, Pow2, Space


def tiny(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


# The library's matmul (the Triton tutorial's kernel) as a plain function, so that each
# autotuner below wraps a JIT object of its own.
matmul_kernel = _library_matmul.fn


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def timed(variants: dict[str, Callable[[], Any]], calls: int, rounds: int) -> dict[str, dict]:
    """Median (and quartiles) of µs per call, variants interleaved round by round."""
    for fn in variants.values():  # warm: compile, tune, fill caches
        for _ in range(20):
            fn()
    torch.cuda.synchronize()
    per: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            per[name].append((time.perf_counter() - t0) / calls * 1e6)
    out = {}
    for name, xs in per.items():
        q = statistics.quantiles(xs, n=4, method="inclusive")
        out[name] = {"median_us": statistics.median(xs), "q1_us": q[0], "q3_us": q[2],
                     "rounds": len(xs), "calls": calls}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="tunex-bench-")
    db = os.path.join(tmp, "tunex.db")
    os.environ.pop("TUNEX_MODE", None)

    # -- 2-argument kernel -----------------------------------------------------------------------
    configs8 = [triton.Config({"BLOCK": 1 << k}, num_warps=4) for k in range(5, 13)]
    base = triton.jit(tiny)
    tx1 = tunex.autotune(configs8[2:3], key=["n"], db=db)(triton.jit(tiny))
    tx8 = tunex.autotune(configs8, key=["n"], mode="on_miss", db=db, warmup=5,
                         rep=20)(triton.jit(tiny))
    space = Space([Pow2("BLOCK", 32, 4096), Choice("num_warps", [4])])
    txs = tunex.autotune(space=space, key={"n": "pow2"}, mode="on_miss", db=db, warmup=5,
                         rep=20)(triton.jit(tiny))
    tr1 = triton.autotune(configs8[2:3], key=["n"])(triton.jit(tiny))
    tr8 = triton.autotune(configs8, key=["n"])(triton.jit(tiny))
    n = 4096
    x = torch.empty(n, device="cuda")
    g = (32,)
    tiny_variants: dict[str, Callable[[], Any]] = {
        "bare kernel[grid](x, n, BLOCK=128)": lambda: base[g](x, n, BLOCK=128),
        "bare + launch options (num_warps, num_stages)":
            lambda: base[g](x, n, BLOCK=128, num_warps=4, num_stages=3),
        "tunex.autotune, 1 config": lambda: tx1[g](x, n),
        "tunex.autotune, 8 configs": lambda: tx8[g](x, n),
        "tunex.autotune, space of 8 points": lambda: txs[g](x, n),
        "triton.autotune, 1 config": lambda: tr1[g](x, n),
        "triton.autotune, 8 configs": lambda: tr8[g](x, n),
    }
    tiny_res = timed(tiny_variants, args.calls, args.rounds)
    env = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": triton.__version__, "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "calls": args.calls, "rounds": args.rounds,
    }
    bare = tiny_res["bare kernel[grid](x, n, BLOCK=128)"]["median_us"]
    print(f"## environment\n{json.dumps(env)}\n")
    print("| 2-argument kernel, known workload | median µs/call | IQR µs | over bare µs |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in tiny_res.items():
        print(f"| {name} | {r['median_us']:.2f} | {r['q3_us'] - r['q1_us']:.2f} | "
              f"{r['median_us'] - bare:+.2f} |")
    print(flush=True)
    results: dict[str, Any] = {"env": env, "tiny": tiny_res}
    try:
        results.update(bench_matmul(db, args))
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def bench_matmul(db: str, args: argparse.Namespace) -> dict[str, Any]:
    """1024^3 fp16 matmul, end to end, tunex against triton.autotune, bare and cuBLAS."""
    # -- 1024^3 fp16 matmul, end to end ----------------------------------------------------------
    M = N = K = 1024
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    mm_base = triton.jit(matmul_kernel)
    mm_tx = tunex.autotune(tutorial_configs(), key=["M", "N", "K"], mode="on_miss", db=db,
                           warmup=25, rep=100)(triton.jit(matmul_kernel))
    mm_tr = triton.autotune(tutorial_configs(), key=["M", "N", "K"])(triton.jit(matmul_kernel))

    def mgrid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    t0 = time.perf_counter()
    mm_tx[mgrid](a, b, c, M, N, K, *strides)
    torch.cuda.synchronize()
    tx_tune_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mm_tr[mgrid](a, b, c, M, N, K, *strides)
    torch.cuda.synchronize()
    tr_tune_s = time.perf_counter() - t0
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=0.5, rtol=0.05)
    picked = mm_tx.last.config.to_dict()
    meta = {k: v for k, v in picked.items()}
    mm_variants: dict[str, Callable[[], Any]] = {
        "bare launch, tunex's config": lambda: mm_base[mgrid](a, b, c, M, N, K, *strides, **meta),
        "tunex.autotune (8 tutorial configs)": lambda: mm_tx[mgrid](a, b, c, M, N, K, *strides),
        "triton.autotune (8 tutorial configs)": lambda: mm_tr[mgrid](a, b, c, M, N, K,
                                                                     *strides),
        "torch.matmul (cuBLAS)": lambda: torch.matmul(a, b, out=c),
    }
    mm_res = timed(mm_variants, max(args.calls // 4, 200), args.rounds)
    kernel_ms = triton.testing.do_bench(
        lambda: mm_base[mgrid](a, b, c, M, N, K, *strides, **meta), warmup=25, rep=200,
        return_mode="median")
    flops = 2.0 * M * N * K

    print("| 1024^3 fp16 matmul, end to end | median µs/call | TFLOP/s |")
    print("| --- | ---: | ---: |")
    for name, r in mm_res.items():
        print(f"| {name} | {r['median_us']:.2f} | {flops / r['median_us'] / 1e6:.1f} |")
    print(f"| kernel alone (do_bench, tunex's config) | {kernel_ms * 1e3:.2f} | "
          f"{flops / (kernel_ms * 1e-3) / 1e12:.1f} |")
    print()
    print(f"tunex picked {picked} ({mm_tx.last.reason}); first call incl. tuning "
          f"{tx_tune_s:.2f} s; triton.autotune first call {tr_tune_s:.2f} s, picked "
          f"{mm_tr.best_config}")
    return {"matmul": mm_res, "matmul_kernel_ms": kernel_ms, "tunex_pick": picked,
            "tunex_reason": mm_tx.last.reason, "tunex_first_call_s": tx_tune_s,
            "triton_first_call_s": tr_tune_s, "triton_pick": str(mm_tr.best_config)}

if __name__ == "__main__":
    sys.exit(main())
