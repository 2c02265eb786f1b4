"""A tiny C kernel whose space holds every way a trial can fail, for the C targets' tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tunex.kernel import CKernel, Isa
from tunex.space import Choice, Pow2, Space


class ToyAxpy(CKernel):
    """y = 2 x + 1 over N elements; ``mode`` picks a correct or a broken body."""

    name = "toy_axpy"
    dims = ("N",)
    inputs = ("x",)
    outputs = ("y",)

    def space(self) -> Space:
        return Space([Pow2("UNROLL", 1, 8, default=1),
                      Choice("mode", ["ok", "wrong", "crash", "hang", "syntax"], default="ok")],
                     ["UNROLL <= N"], problem=["N"], name="toy_axpy")

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"x": (problem["N"],), "y": (problem["N"],)}

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        return (2.0 * inputs["x"].astype(np.float64) + 1.0,)

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        body = {"ok": "y[i] = 2.0f * x[i] + 1.0f;",
                "wrong": "y[i] = 2.0f * x[i] + (i == 3 ? 2.0f : 1.0f);",
                "crash": "y[i] = ((volatile float *)0)[i];",
                "hang": "for (volatile int z = 1; z; ) {} ",
                "syntax": "y[i] = = 1;"}[config["mode"]]
        return f"""
void tx_kernel(float *const *buf, const long *dim) {{
    const float *x = buf[0]; float *y = buf[1]; long n = dim[0];
    #pragma clang loop unroll_count({config["UNROLL"]})
    for (long i = 0; i < n; i++) {{ {body} }}
}}
"""

    def baseline(self, problem: Mapping[str, Any], isa: Isa) -> str:
        return self.render({"UNROLL": 1, "mode": "ok"}, problem, isa)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * problem["N"]

    def bytes(self, problem: Mapping[str, Any]) -> float:
        return 8.0 * problem["N"]


class ToyBareReference(ToyAxpy):
    """A user's slip: ``reference`` returns the array itself, not a tuple of outputs."""

    name = "toy_bare_reference"

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        return 2.0 * inputs["x"].astype(np.float64) + 1.0  # type: ignore[return-value]


class ToyDictReference(ToyAxpy):
    """A user's slip: ``reference`` returns its outputs by name, as ``make_inputs`` takes them."""

    name = "toy_dict_reference"

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        return {"y": 2.0 * inputs["x"] + 1.0}  # type: ignore[return-value]


class ToyIntShapes(ToyAxpy):
    """A user's slip: ``shapes`` gives a 1-D buffer's size as a bare int."""

    name = "toy_int_shapes"

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"x": problem["N"], "y": problem["N"]}  # type: ignore[dict-item]


class ToyHelper(ToyAxpy):
    """y = 2 x + 1 done by a ``static`` helper of the kernel's file, inlined or not, or by one
    that is not ``static`` (``extern``: a careless user's)."""

    name = "toy_helper"

    def space(self) -> Space:
        return Space([Choice("inline", ["always", "never", "extern"])], problem=["N"],
                     name="toy_helper")

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        attr = "always_inline" if config["inline"] == "always" else "noinline"
        static = "" if config["inline"] == "extern" else "static inline "
        return f"""
{static}__attribute__(({attr})) void axpy(const float *x, float *y, long n) {{
    for (long i = 0; i < n; i++) y[i] = 2.0f * x[i] + 1.0f;
}}
void tx_kernel(float *const *buf, const long *dim) {{ axpy(buf[0], buf[1], dim[0]); }}
"""


class ToyRaisingReference(ToyAxpy):
    """A user's slip: ``reference`` reads a size the kernel does not have."""

    name = "toy_raising_reference"

    def reference(self, inputs: Mapping[str, np.ndarray], problem: Mapping[str, Any]
                  ) -> tuple[np.ndarray, ...]:
        return (np.zeros(problem["M"]),)


class ToyShortInputs(ToyAxpy):
    """A user's slip: ``make_inputs`` gives an input of another shape than ``shapes``."""

    name = "toy_short_inputs"

    def make_inputs(self, problem: Mapping[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
        return {"x": np.ones(3, dtype=np.float32)}


class ToyNoSpace(ToyAxpy):
    """A user's slip: ``space`` builds its space and does not return it."""

    name = "toy_no_space"

    def space(self) -> Space:
        Space([Pow2("UNROLL", 1, 8)], problem=["N"])  # no return
        return None  # type: ignore[return-value]


class ToyBrokenBaseline(ToyAxpy):
    """A user's slips: no ``baseline`` written yet, a ``render`` that falls off its end."""

    name = "toy_broken_baseline"

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        if config["UNROLL"] < 8:
            return super().render(config, problem, isa)
        return None  # type: ignore[return-value]

    def baseline(self, problem: Mapping[str, Any], isa: Isa) -> str:
        raise NotImplementedError


class ToyExits(ToyAxpy):
    """A careless kernel: it ends the program (``exit(0)``) once done."""

    name = "toy_exits"

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        return "#include <stdlib.h>\n" + super().render(config, problem, isa).replace(
            "long n = dim[0];", "long n = dim[0]; if (n) exit(0);")


class ToyForks(ToyAxpy):
    """A kernel that forks a child which outlives it (sleeping forever)."""

    name = "toy_forks"

    def render(self, config: Mapping[str, Any], problem: Mapping[str, Any], isa: Isa) -> str:
        return "#include <unistd.h>\n" + super().render(config, problem, isa).replace(
            "long n = dim[0];", "long n = dim[0]; if (fork() == 0) { for (;;) sleep(1); }")


class ToyOneBufferTwice(ToyAxpy):
    """A user's slip: one buffer declared as an input and as an output."""

    name = "toy_one_buffer_twice"
    outputs = ("x",)

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"x": (problem["N"],)}


class ToyNoDims(ToyAxpy):
    """A kernel of a fixed size: no dims."""

    name = "toy_no_dims"
    dims = ()

    def space(self) -> Space:
        return Space([Pow2("UNROLL", 1, 8, default=1)], name="toy_no_dims")

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"x": (64,), "y": (64,)}


class ToyEmptyOutput(ToyAxpy):
    """A user's slip: an output of no elements (every run would pass the check)."""

    name = "toy_empty_output"

    def shapes(self, problem: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"x": (problem["N"],), "y": (0,)}
