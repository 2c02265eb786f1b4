"""Call the kernels' user-facing launchers under Triton's interpreter on CPU tensors, against
workloads that the triton_gpu target prepared, a database it could have filled, and a pack
exported from that database; report what each launch picked.

Used by test_launchers.py in a subprocess, because ``TRITON_INTERPRET=1`` must be set before the
kernel modules are imported. Usage::

    TRITON_INTERPRET=1 python launcher_check.py WORKDIR

prints one JSON object: ``{"config": the recorded config, "default": the space's default,
"events": [{"phase", "kernel", "shape", "target", "runtime", "source", "reason", "config",
"error"}, ...]}`` where ``target`` is the key of ``TritonGPUTarget.prepare``'s workload for the
shape and ``runtime`` the key of the workload the launcher looked up.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 before running this script", file=sys.stderr)
        return 2
    work = Path(sys.argv[1])
    for var in ("TUNEX_MODE", "TUNEX_PACKS"):
        os.environ.pop(var, None)
    os.environ["TUNEX_DB"] = str(work / "absent.db")  # mode never: not created

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from interpret_check import _patch_numpy2_index

    _patch_numpy2_index()

    import torch

    import kernels.matmul
    import kernels.matmul_tma
    from kernels.flash_attention import flash_attention
    from kernels.layernorm import layernorm
    from kernels.matmul import matmul
    from kernels.matmul_tma import matmul_tma
    from kernels.softmax import softmax
    from tunex.db import Database, export_pack
    from tunex.decorator import Selection, add_listener, fingerprint, load_packs
    from tunex.targets.triton_gpu import TritonGPUTarget
    from tunex.trial import Config, Measurement, Status

    # The target as it would run on this "device": on a GPU, both sides read the same device
    # (test_launchers.py checks that); here the device is the interpreter.
    target = TritonGPUTarget("sm_90")
    interpreter = dict(fingerprint(interpreted=True))
    target.fingerprint = lambda: dict(interpreter)  # type: ignore[method-assign]

    seen: list[Selection] = []
    add_listener(seen.append)
    events: list[dict[str, Any]] = []
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int, dtype: Any = torch.float16) -> Any:
        return torch.randn(shape, generator=g).to(dtype)

    def call(phase: str, name: str, shape: dict[str, int], run: Any) -> None:
        _, wl = target.prepare(name, shape)
        n = len(seen)
        got, want = run()
        picked = seen[n:]
        sel = picked[-1] if picked else None
        events.append({
            "phase": phase, "kernel": name, "shape": shape, "target": wl.key,
            "runtime": sel.workload.key if sel else None,
            "source": sel.source if sel else None, "reason": sel.reason if sel else None,
            "config": sel.config.to_dict() if sel else None,
            "error": float((got.float() - want.float()).abs().max()),
        })

    def mm(m: int, n: int, k: int) -> Any:
        a, b = randn(m, k), randn(k, n)
        return lambda: (matmul(a, b), a.float() @ b.float())

    # 1. every launcher looks up the workload the target prepares for its shape
    x, w, bias = randn(10, 100), randn(100), randn(100)
    q, k, v = (randn(1, 2, 64, 16) for _ in range(3))
    call("align", "matmul", {"M": 20, "N": 32, "K": 32}, mm(20, 32, 32))
    call("align", "softmax", {"M": 10, "N": 100},
         lambda: (softmax(x), x.float().softmax(-1)))
    call("align", "layernorm", {"M": 10, "N": 100},
         lambda: (layernorm(x, w, bias), torch.nn.functional.layer_norm(
             x.float(), (100,), w.float(), bias.float(), 1e-5)))
    call("align", "flash_attention", {"Z": 1, "H": 2, "N_CTX": 64, "D": 16},
         lambda: (flash_attention(q, k, v), torch.softmax(
             q.float() @ k.float().transpose(-1, -2) / 4, -1) @ v.float()))
    # a view with the heads not outermost (copied before the launch), another workload
    qt, kt, vt = (randn(1, 32, 2, 16).transpose(1, 2) for _ in range(3))
    call("align", "flash_attention", {"Z": 1, "H": 2, "N_CTX": 32, "D": 16},
         lambda: (flash_attention(qt, kt, vt), torch.softmax(
             qt.float() @ kt.float().transpose(-1, -2) / 4, -1) @ vt.float()))
    a2, b2 = randn(20, 40), randn(40, 48)
    call("align", "matmul_tma", {"M": 20, "N": 48, "K": 40},
         lambda: (matmul_tma(a2, b2), a2.float() @ b2.float()))

    # 2. a row recorded under the target's workload for M=48 is what matmul runs, for M=48
    # and for M=40 (the same bucket, M=64)
    space, wl = target.prepare("matmul", {"M": 48, "N": 32, "K": 32})
    best = Config(BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, num_warps=2, num_stages=4)
    assert best in space and best != space.default(), (best, space.default())
    with Database(work / "tuned.db") as db:
        db.record(wl, Measurement(best, Status.OK, (0.020, 0.021, 0.019)))
        db.record(wl, Measurement(space.default(), Status.OK, (0.050, 0.052, 0.049)))
        os.environ["TUNEX_DB"] = str(work / "tuned.db")
        call("db", "matmul", {"M": 48, "N": 32, "K": 32}, mm(48, 32, 32))
        call("db", "matmul", {"M": 40, "N": 32, "K": 32}, mm(40, 32, 32))  # in-process cache
        kernels.matmul._KERNEL.tuned.clear_cache()
        call("db", "matmul", {"M": 40, "N": 32, "K": 32}, mm(40, 32, 32))

        # 3. the other matmul kernel measured faster for M=48: matmul now runs it
        tspace, twl = target.prepare("matmul_tma", {"M": 48, "N": 32, "K": 32})
        tma_best = Config(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, num_warps=4,
                          num_stages=2, SUBTILE=False, FLATTEN=True)
        assert tma_best in tspace, tspace.violations(tma_best)
        db.record(twl, Measurement(tma_best, Status.OK, (0.010, 0.011, 0.010)))
        kernels.matmul.clear_choices()
        call("choice", "matmul_tma", {"M": 48, "N": 32, "K": 32}, mm(48, 32, 32))
        call("choice", "matmul", {"M": 200, "N": 32, "K": 32}, mm(200, 32, 32))  # no rows

        # 4. the same through a pack exported from that database, with no database at all
        export_pack(db, work / "pack.json", name="kernels", version="1")
    os.environ["TUNEX_DB"] = str(work / "absent.db")
    load_packs(work / "pack.json")  # decorated kernels and matmul's choices are forgotten
    call("pack", "matmul_tma", {"M": 40, "N": 32, "K": 32}, mm(40, 32, 32))
    kernels.matmul_tma._KERNEL.tuned.clear_cache()
    call("pack", "matmul_tma", {"M": 48, "N": 32, "K": 32}, mm(48, 32, 32))

    print(json.dumps({"config": best.to_dict(), "default": space.default().to_dict(),
                      "tma_config": tma_best.to_dict(), "events": events}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
