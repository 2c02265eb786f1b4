"""What a hung kernel costs a search: the measurement limit fixed at 60 s, against the adaptive
one (once three measurements have succeeded, 10x the slowest of them, at least 5 s).

A user's C kernel (a dot product in RVV intrinsics or portable C, with LMUL and unroll) whose
``fault`` parameter makes some configs spin forever, the way a strip-mining loop with a wrong
step does. Each round runs the same ``tunex search`` twice, in alternating order: with
``--measure-timeout 60`` (a given limit is kept as given: the fixed behaviour) and without it
(the default, adaptive). Reported per run: wall time, trials, timeouts, and the simulator
processes still running after the command ended (a hung kernel's simulator must die with its
measurement).

    python benchmarks/hung_kernels.py [--target riscv-sim:x60] [--budget 40] [--rounds 2]

Needs the RISC-V toolchain (``bash scripts/setup.sh --riscv``) for ``riscv-sim:*``, or a C
compiler for ``--target cpu``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNEL = '''
import numpy as np
from tunex.kernel import CKernel
from tunex.space import Choice, Space


class Dot(CKernel):
    """s = sum(x * y); ``fault="spin"`` never returns."""

    name = "bench_hung_dot"
    dims = ("N",)
    inputs = ("x", "y")
    outputs = ("s",)

    def space(self):
        return Space([Choice("style", ["vec", "rvv"], default="vec"),
                      Choice("LMUL", [1, 2, 4, 8], default=1),
                      Choice("U", [1, 2, 4, 8], default=1),
                      Choice("fault", ["none", "spin"], default="none")],
                     ["style == 'vec' or rvv == 1", "U * LMUL * 2 <= vregs"],
                     problem=["N", "rvv", "vregs"], name="bench_hung_dot")

    def shapes(self, problem):
        return {"x": (problem["N"],), "y": (problem["N"],), "s": (1,)}

    def reference(self, inputs, problem):
        return (np.array([np.dot(inputs["x"].astype(np.float64), inputs["y"])]),)

    def render(self, config, problem, isa):
        spin = "for (volatile int q = 1; q; ) {}" if config["fault"] == "spin" else ""
        if config["style"] == "rvv":
            L, U = config["LMUL"], config["U"]
            acc = "".join(f"vfloat32m{L}_t a{u} = __riscv_vfmv_v_f_f32m{L}(0.0f, vlmax);"
                          for u in range(U))
            body = "".join(
                f"{{ size_t vl = __riscv_vsetvl_e32m{L}(n - i); if (vl == 0) break;"
                f" vfloat32m{L}_t vx = __riscv_vle32_v_f32m{L}(x + i, vl);"
                f" vfloat32m{L}_t vy = __riscv_vle32_v_f32m{L}(y + i, vl);"
                f" a{u} = __riscv_vfmacc_vv_f32m{L}_tu(a{u}, vx, vy, vl); i += vl; }}"
                for u in range(U))
            red = "".join(f"r = __riscv_vfredusum_vs_f32m{L}_f32m1(a{u}, r, vlmax);"
                          for u in range(U))
            return f"""
#include <riscv_vector.h>
void tx_kernel(float *const *buf, const long *dim) {{
    const float *x = buf[0], *y = buf[1]; float *s = buf[2]; long n = dim[0];
    size_t vlmax = __riscv_vsetvlmax_e32m{L}();
    {acc}
    long i = 0;
    while (i < n) {{ {body} }}
    vfloat32m1_t r = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    {red}
    s[0] = __riscv_vfmv_f_s_f32m1_f32(r);
    {spin}
}}
"""
        return f"""
void tx_kernel(float *const *buf, const long *dim) {{
    const float *x = buf[0], *y = buf[1]; float *s = buf[2]; long n = dim[0];
    float acc = 0.0f;
    #pragma clang loop vectorize(enable) interleave_count({config["U"]})
    for (long i = 0; i < n; i++) acc += x[i] * y[i];
    s[0] = acc;
    {spin}
}}
"""

    def baseline(self, problem, isa):
        return self.render({"style": "vec", "LMUL": 1, "U": 1, "fault": "none"}, problem, isa)

    def flops(self, problem):
        return 2 * problem["N"]

    def bytes(self, problem):
        return 8.0 * problem["N"]
'''

SIMULATORS = ("qemu-riscv64", "kernel.bin")


def running(names: tuple[str, ...]) -> set[int]:
    """Processes whose command line mentions any of ``names``."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(n in cmd for n in names) and "hung_kernels" not in cmd:
                out.add(int(d.name))
    return out


def one(work: Path, mode: str, args: argparse.Namespace, seed: int) -> dict[str, object]:
    db = work / f"{mode}-{seed}.db"
    cmd = [sys.executable, "-m", "tunex.cli", "search", "dot.py:Dot", "--target", args.target,
           "--shape", f"N={args.n}", "--budget", f"{args.budget}trials", "--seed", str(seed),
           "--db", str(db), "--json"]
    if mode == "fixed":
        cmd += ["--measure-timeout", "60"]
    before = running(SIMULATORS)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=3600)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{done.stderr[-3000:]}")
    time.sleep(2)
    left = running(SIMULATORS) - before
    summary = json.loads(done.stdout)
    return {"mode": mode, "seed": seed, "wall_s": round(wall, 1), "trials": summary["trials"],
            "failures": summary["failures"], "best_ms": summary["best_ms"],
            "left_running": len(left)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="riscv-sim:x60")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the runs as JSON here")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "dot.py").write_text(KERNEL)
        for r in range(args.rounds):
            for mode in (("fixed", "adaptive") if r % 2 == 0 else ("adaptive", "fixed")):
                runs.append(one(work, mode, args, seed=r))
                print(json.dumps(runs[-1]), flush=True)
    med = {m: statistics.median(x["wall_s"] for x in runs if x["mode"] == m)
           for m in ("fixed", "adaptive")}
    doc = {"command": " ".join(sys.argv), "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs,
           "median_wall_s": med, "ratio": round(med["fixed"] / med["adaptive"], 2)}
    print(json.dumps({k: doc[k] for k in ("median_wall_s", "ratio")}))
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
