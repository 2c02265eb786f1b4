"""A user's own kernels under ``@tunex.autotune(mode="on_miss")``, against ``triton.autotune``
and torch: the issue-9 benchmark (run on the GPU machine; writes JSON).

Three kernels that are not in ``kernels/``, written as a user would:

- ``gemm_leaky``: the Triton tutorial's matmul with a fused leaky-ReLU epilogue (fp16 in, fp32
  accumulate). tunex: a declarative space of 6 parameters (tiles 16-256, ``BLOCK_K`` 16-128,
  ``GROUP_M``, warps, stages; 3,600 points before its shared-memory constraint).
  ``triton.autotune``: the tutorial's 8 configs. torch: ``leaky_relu(a @ b)``.
- ``rowsum``: ``y[m] = sum_n x[m, n]`` (fp16 in, fp32 out), several rows per program and a
  loop over the row. tunex: rows per program, chunk width, warps, stages. ``triton.autotune``:
  8 configs of the kind its tutorials list. torch: ``x.sum(1, dtype=float32)``.
- ``conv3x3``: a 3x3 convolution (stride 1, padding 1) with a fused ReLU as an implicit GEMM
  over NHWC fp16 activations and (3, 3, C, F) weights, one flattened loop over the 9 taps and
  the input channels (so ``C`` must be a multiple of ``BLOCK_K``: the shapes' ``C`` are 256 and
  512). tunex: tiles 16-256, ``BLOCK_K`` 16-256, warps 2-16, stages 1-5 (2,128 points under
  its shared-memory constraint). ``triton.autotune``: 8 configs of the tutorials' kind. torch:
  ``relu(conv2d(...))`` on the same data.

Four shapes each, in order, in one process with a cold Triton cache and an empty tunex
database: the first call of each shape is timed end to end (``torch.cuda.synchronize()``
included) for tunex (its default budget, or ``--budget``) and for ``triton.autotune``; the
third and fourth tunex shapes are "new shapes with two known" (their siblings' best configs are
measured first). Then the three are timed side by side on each shape with tunex's one GPU
harness (:class:`tunex.targets.gpu.GpuTimer`: L2 flush and a GPU sleep before each repeat,
CUDA events; interleaved rounds whose order rotates), median of the repeats. Time to 95%: from
the trials tunex recorded for the shape (its database rows), the time from the first call until
a trial within 95% of the final best ended.

Usage: ``python benchmarks/user_kernels.py --out results.json [--budget 20s] [--isolated]
[--service 15]`` (``--service N``: a ``tunex serve`` of N build workers runs first, as a user
may keep one, and the decorator compiles there instead of starting its own processes)
(``--isolated``: every shape with an empty database, to measure what transfer from the known
shapes is worth). The space's ceiling (how far any config of it can beat ``triton.autotune``):
``--strategy exhaustive --budget 4000trials --patience 0`` measures every valid config of each
shape (``--shapes 0,1`` picks shapes by index).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import tunex  # noqa: E402
from tunex.db import Database  # noqa: E402
from tunex.space import Choice, Int, Pow2, Space  # noqa: E402
from tunex.targets.gpu import GpuTimer, MeasureOptions  # noqa: E402

GEMM_SHAPES = [(2048, 2048, 2048), (128, 4096, 4096), (3072, 768, 3072), (8192, 1024, 512)]
ROWSUM_SHAPES = [(4096, 4096), (16384, 1024), (1024, 16384), (65536, 256)]
CONV_SHAPES = [(32, 28, 28, 256, 256), (4, 56, 56, 256, 128), (64, 14, 14, 512, 512),
               (2, 112, 112, 256, 64)]  # (NB, H, W, C, F)


# -- the user's kernels -------------------------------------------------------------------------


def gemm_leaky_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = tl.where(acc >= 0, acc, 0.01 * acc)  # the fused epilogue: leaky ReLU
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def rowsum_kernel(x_ptr, y_ptr, M, N, stride_m, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
        acc += x.to(tl.float32)
    tl.store(y_ptr + rows, tl.sum(acc, axis=1), mask=rows < M)


def conv3x3_kernel(x_ptr, w_ptr, y_ptr, NB, H, W, C, F, K, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output pixels
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels
    img = offs_m // (H * W)
    oh = (offs_m % (H * W)) // W
    ow = offs_m % W
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):  # K = 9 * C: tap-major, BLOCK_K divides C
        tap = k0 // C
        ih = oh + tap // 3 - 1
        iw = ow + tap % 3 - 1
        ok = (offs_m < NB * H * W) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        ck = k0 % C + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + ((img * H + ih) * W + iw)[:, None] * C + ck[None, :],
                    mask=ok[:, None], other=0.0)
        b = tl.load(w_ptr + (k0 + tl.arange(0, BLOCK_K))[:, None] * F + offs_n[None, :],
                    mask=offs_n[None, :] < F, other=0.0)
        acc += tl.dot(a, b)
    out = tl.maximum(acc, 0.0).to(tl.float16)
    tl.store(y_ptr + offs_m[:, None] * F + offs_n[None, :], out,
             mask=(offs_m[:, None] < NB * H * W) & (offs_n[None, :] < F))


# the A and B tiles of every pipeline stage in fp16 fit the 227 KiB of shared memory per block
TILES_FIT_SMEM = "(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 * num_stages <= 232448"
GEMM_SPACE = Space(
    [Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 16, 256, default=128),
     Pow2("BLOCK_K", 16, 128, default=64), Choice("GROUP_M", [1, 4, 8], default=8),
     Choice("num_warps", [2, 4, 8], default=4), Int("num_stages", 2, 5, default=3)],
    [TILES_FIT_SMEM], name="gemm_leaky")
ROWSUM_SPACE = Space(
    [Pow2("ROWS", 1, 16, default=1), Pow2("BLOCK_N", 64, 4096, default=1024),
     Choice("num_warps", [1, 2, 4, 8, 16], default=4), Int("num_stages", 1, 4, default=2)],
    ["ROWS * BLOCK_N <= 16384"], name="rowsum")
CONV_SPACE = Space(
    [Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 16, 256, default=128),
     Pow2("BLOCK_K", 16, 256, default=64), Choice("num_warps", [2, 4, 8, 16], default=4),
     Int("num_stages", 1, 5, default=3)],
    [TILES_FIT_SMEM], name="conv3x3")


def tutorial_gemm_configs() -> list[Any]:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8},
                          num_stages=s, num_warps=w)
            for m, n, k, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                                  (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 32, 32, 4, 4),
                                  (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]]


def listed_rowsum_configs() -> list[Any]:
    return [triton.Config({"ROWS": r, "BLOCK_N": b}, num_warps=w)
            for r, b, w in [(1, 256, 4), (1, 512, 4), (1, 1024, 4), (1, 1024, 8), (1, 2048, 8),
                            (2, 512, 4), (4, 256, 4), (4, 512, 8)]]


def listed_conv_configs() -> list[Any]:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_stages=s, num_warps=w)
            for m, n, k, s, w in [(128, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
                                  (128, 256, 64, 3, 8), (64, 64, 64, 3, 4), (256, 128, 32, 3, 8),
                                  (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]]


# -- contenders -----------------------------------------------------------------------------------


def make_gemm(extra: Mapping[str, Any], db: str) -> dict[str, Any]:
    ours = tunex.autotune(space=GEMM_SPACE, key=["M", "N", "K"], mode="on_miss", db=db,
                          name="gemm_leaky", **extra)(triton.jit(gemm_leaky_kernel))
    theirs = triton.autotune(tutorial_gemm_configs(), key=["M", "N", "K"])(
        triton.jit(gemm_leaky_kernel))

    def call(kernel: Any, a: Any, b: Any, c: Any) -> None:
        m, k = a.shape
        n = b.shape[1]
        kernel[lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)](
            a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1))

    def inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
        m, n, k = shape
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        return a, b, torch.empty(m, n, device="cuda", dtype=torch.float16)

    return {"ours": ours, "theirs": theirs, "call": call, "inputs": inputs,
            "torch": lambda a, b, c: torch.nn.functional.leaky_relu(a @ b, 0.01),
            "flops": lambda s: 2.0 * s[0] * s[1] * s[2], "shapes": GEMM_SHAPES,
            "check": lambda a, b, c: torch.testing.assert_close(
                c.float(), torch.nn.functional.leaky_relu(a.float() @ b.float(), 0.01),
                rtol=2e-2, atol=5e-2)}


def make_rowsum(extra: Mapping[str, Any], db: str) -> dict[str, Any]:
    ours = tunex.autotune(space=ROWSUM_SPACE, key=["M", "N"], mode="on_miss", db=db,
                          name="rowsum", **extra)(triton.jit(rowsum_kernel))
    theirs = triton.autotune(listed_rowsum_configs(), key=["M", "N"])(triton.jit(rowsum_kernel))

    def call(kernel: Any, x: Any, y: Any) -> None:
        m, n = x.shape
        kernel[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](x, y, m, n, x.stride(0))

    def inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
        m, n = shape
        return (torch.randn(m, n, device="cuda", dtype=torch.float16),
                torch.empty(m, device="cuda", dtype=torch.float32))

    return {"ours": ours, "theirs": theirs, "call": call, "inputs": inputs,
            "torch": lambda x, y: x.sum(1, dtype=torch.float32),
            "flops": lambda s: 2.0 * s[0] * s[1], "shapes": ROWSUM_SHAPES,  # bytes, in fact
            "check": lambda x, y: torch.testing.assert_close(
                y, x.float().sum(1), rtol=1e-3, atol=1e-2)}


def make_conv3x3(extra: Mapping[str, Any], db: str) -> dict[str, Any]:
    key = ["NB", "H", "W", "C", "F"]
    ours = tunex.autotune(space=CONV_SPACE, key=key, mode="on_miss", db=db, name="conv3x3",
                          **extra)(triton.jit(conv3x3_kernel))
    theirs = triton.autotune(listed_conv_configs(), key=key)(triton.jit(conv3x3_kernel))

    def call(kernel: Any, x: Any, w: Any, y: Any) -> None:
        nb, h, wd, c = x.shape
        f = w.shape[3]
        kernel[lambda meta: (triton.cdiv(nb * h * wd, meta["BLOCK_M"]),
                             triton.cdiv(f, meta["BLOCK_N"]))](x, w, y, nb, h, wd, c, f, 9 * c)

    def inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
        nb, h, wd, c, f = shape
        x = torch.randn(nb, h, wd, c, device="cuda", dtype=torch.float16)
        w = torch.randn(3, 3, c, f, device="cuda", dtype=torch.float16) / (3 * c ** 0.5)
        return x, w, torch.empty(nb, h, wd, f, device="cuda", dtype=torch.float16)

    def reference(x: Any, w: Any, y: Any) -> Any:
        return torch.relu(torch.nn.functional.conv2d(
            x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), padding=1)).permute(0, 2, 3, 1)

    return {"ours": ours, "theirs": theirs, "call": call, "inputs": inputs, "torch": reference,
            "flops": lambda s: 2.0 * s[0] * s[1] * s[2] * s[4] * 9 * s[3],
            "shapes": CONV_SHAPES,
            "check": lambda x, w, y: torch.testing.assert_close(
                y.float(), reference(x.float(), w.float(), y), rtol=2e-2, atol=5e-2)}


def first_call(fn: Callable[[], Any]) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def time_to_95(db: Database, workload: Any, called: float) -> dict[str, Any]:
    """From the first call (``called``, wall clock): the first trial's end, the end of the first
    trial within 95% of the final best, and of the last trial; median compile time."""
    ms = db.measurements(workload)
    ok = [m for m in ms if m.ok]
    if not ok:
        return {}
    final = min(m.value for m in ok)
    hit = min(m.ended_at for m in ok if final / m.value >= 0.95)
    compiles = sorted(m.compile_ms for m in ms if m.compile_ms is not None)
    return {"trials": len(ms), "failed": len(ms) - len(ok),
            "first_trial_s": round(min(m.ended_at for m in ms) - called, 2),
            "to95_s": round(hit - called, 2),
            "last_trial_s": round(max(m.ended_at for m in ms) - called, 2),
            "to95_trials": 1 + sum(1 for m in ms if m.ended_at < hit),
            "compile_ms_median": round(compiles[len(compiles) // 2]) if compiles else None}


def bench_kernel(name: str, make: Callable[[str], Mapping[str, Any]], db_path: str,
                 timer: GpuTimer, isolated: bool = False,
                 only: set[int] | None = None) -> list[dict[str, Any]]:
    """Every shape of one kernel; ``isolated``: each shape with a database of its own (no
    other shape known: no transfer), the Triton cache shared as it is otherwise."""
    rows = []
    spec = make(db_path)
    for i, shape in enumerate(spec["shapes"]):
        if only is not None and i not in only:
            continue
        if isolated and i:
            db_path = os.path.join(tempfile.mkdtemp(prefix="tunex-bench-"), "tunex.db")
            spec = make(db_path)
        ours, theirs, call, ref = spec["ours"], spec["theirs"], spec["call"], spec["torch"]
        args = spec["inputs"](shape)
        fns = {"tunex": lambda k=ours, a=args, c=call: c(k, *a),
               "triton.autotune": lambda k=theirs, a=args, c=call: c(k, *a),
               "torch": lambda a=args, r=ref: r(*a)}
        called = time.time()
        t_ours = first_call(fns["tunex"])
        spec["check"](*args)
        sel = ours.last
        t_theirs = first_call(fns["triton.autotune"])
        spec["check"](*args)
        times = {n: [] for n in fns}  # type: dict[str, list[float]]
        names = list(fns)
        for r in range(6):  # interleaved rounds, order rotated
            for n in names[r % 3:] + names[:r % 3]:
                times[n] += timer.time(fns[n], repeats=10, warmup_ms=5.0)
        med = {n: statistics.median(v) for n, v in times.items()}
        with Database(db_path) as db:
            progress = time_to_95(db, sel.workload, called)
        row = {"kernel": name, "shape": "x".join(map(str, shape)), "index": i,
               "first_call_s": {"tunex": round(t_ours, 2), "triton.autotune": round(t_theirs, 2)},
               "median_ms": {n: round(v, 5) for n, v in med.items()},
               "speedup_vs_autotune": round(med["triton.autotune"] / med["tunex"], 3),
               "speedup_vs_torch": round(med["torch"] / med["tunex"], 3),
               "tunex_config": dict(sel.config), "tunex_reason": sel.reason,
               "autotune_config": str(getattr(theirs, "best_config", "")), **progress}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def mark_cut_short(db_path: str, kernels: Sequence[str]) -> None:
    """Take the searches recorded in ``db_path`` for ``kernels`` as cut short: a "tuning" mark
    of this process on each workload, so that the decorator's first call resumes it (as after a
    killed run) instead of using its best so far. A recording stopped by its time budget ends
    as tuned, so the next ``--resume`` is again the first cut in a row."""
    with Database(db_path) as db:
        for name in kernels:
            for w in db.workloads(kernel=name):
                ms = db.measurements(w)
                if ms:
                    db.record_decision(w, ms[0].config, "tuning",
                                       detail="user_kernels.py --resume: finish this search")
                    print(f"resuming {name} {dict(w.problem)}: {len(ms)} trials recorded",
                          flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="user_kernels.json")
    p.add_argument("--budget", default=None, help="tunex budget (default: the decorator's)")
    p.add_argument("--kernels", default="gemm_leaky,rowsum",
                   help="comma list of gemm_leaky, rowsum, conv3x3")
    p.add_argument("--isolated", action="store_true",
                   help="each shape with an empty database: no transfer from the others")
    p.add_argument("--strategy", default=None, help="tunex strategy (default: the decorator's)")
    p.add_argument("--patience", type=int, default=None,
                   help="trials without a 1%% gain before tunex stops (0: none; default: the "
                        "decorator's)")
    p.add_argument("--prior", action=argparse.BooleanOptionalAction, default=None,
                   help="prior= on the decorator (default: the decorator's, on): a first "
                        "search also learns from the searches tunex ships for this device "
                        "(tunex.db.prior)")
    p.add_argument("--db", default=None,
                   help="keep the run's tunex database here (a new file; default: a temporary one)")
    p.add_argument("--resume", action="store_true",
                   help="--db may exist: its searches of these kernels are taken as cut short "
                        "and resumed, their trials kept and not run again (to finish a recording "
                        "in parts: give --budget a time, e.g. 4000trials,540s)")
    p.add_argument("--shapes", default=None, help="comma list of shape indices (default: all)")
    p.add_argument("--service", type=int, default=0, metavar="N",
                   help="start `tunex serve --target triton_gpu --workers N` first (as a user "
                        "would have running): the decorator builds in its warm processes")
    args = p.parse_args(argv)
    server = start_service(args.service) if args.service else None
    try:
        return run(args)
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)


def start_service(workers: int) -> Any:
    """A ``tunex serve`` of the triton_gpu target in a folder of its own, which this process's
    decorator then finds (``TUNEX_SERVICE_DIR``); returns once it listens."""
    import subprocess

    folder = tempfile.mkdtemp(prefix="tunex-svc-")
    os.environ["TUNEX_SERVICE_DIR"] = folder
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(folder, "triton-cache"))
    server = subprocess.Popen([sys.executable, "-m", "tunex.cli", "serve", "--target",
                               "triton_gpu", "--workers", str(workers)], env=env,
                              stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    line = server.stderr.readline()
    if "serving" not in line:
        server.kill()
        raise SystemExit(f"tunex serve did not start: {line}")
    return server


def run(args: argparse.Namespace) -> int:
    makers = {"gemm_leaky": make_gemm, "rowsum": make_rowsum, "conv3x3": make_conv3x3}
    names = args.kernels.split(",")
    unknown = [n for n in names if n not in makers]
    if unknown:
        raise SystemExit(f"--kernels: no kernel {', '.join(unknown)}; choose from "
                         f"{', '.join(makers)}")
    extra: dict[str, Any] = {}
    if args.budget:
        extra["budget"] = args.budget
    if args.strategy:
        extra["strategy"] = args.strategy
    if args.patience is not None:
        extra["patience"] = args.patience or None
    if args.prior is not None:
        extra["prior"] = args.prior
    only = {int(i) for i in args.shapes.split(",")} if args.shapes else None
    db_path = args.db or os.path.join(tempfile.mkdtemp(prefix="tunex-bench-"), "tunex.db")
    if args.db and os.path.exists(args.db) and not args.resume:
        raise SystemExit(f"--db {args.db}: exists; give a new path (every run starts "
                         "empty), or --resume to finish the searches recorded in it")
    if args.resume and os.path.exists(db_path):
        mark_cut_short(db_path, names)
    timer = GpuTimer(MeasureOptions())
    started = time.time()
    rows = []
    for name in names:
        rows += bench_kernel(name, lambda db, n=name: makers[n](extra, db), db_path, timer,
                             args.isolated, only)
    sp = [r["speedup_vs_autotune"] for r in rows]
    doc = {"budget": args.budget or "default", "isolated": args.isolated, "rows": rows,
           "service_workers": args.service,
           "options": extra,
           "geomean_vs_autotune": round(math.exp(sum(map(math.log, sp)) / len(sp)), 3),
           "min_vs_autotune": min(sp), "seconds": round(time.time() - started, 1),
           "machine": {"gpu": torch.cuda.get_device_name(), "python": platform.python_version(),
                       "torch": torch.__version__, "triton": triton.__version__,
                       "cpus": os.cpu_count()},
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "rows"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
