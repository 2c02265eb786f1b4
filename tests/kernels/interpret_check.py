"""Run library kernels under Triton's interpreter on CPU tensors and compare with references.

Used by test_interpret.py in a subprocess, because ``TRITON_INTERPRET=1`` must be set before
triton is imported (``@triton.jit`` reads it when a kernel module is imported), and the rest
of the test session needs the compiler. Usage::

    TRITON_INTERPRET=1 python interpret_check.py '{"kernel": "matmul", "shape": {...},
                                                   "configs": [{...}, ...]}'

prints one JSON line: a list of ``{"config": ..., "error": null | "what is wrong"}``.
"""

from __future__ import annotations

import json
import os
import sys


def _patch_numpy2_index() -> None:
    """Triton 3.6's interpreter turns scalar tensors into ints with ``int(array([x]))``, which
    NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so
    ``range(0, K, BLOCK)`` over a kernel argument fails. Convert through ``.item()`` instead."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):  # type: ignore[no-untyped-def]
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 before running this script", file=sys.stderr)
        return 2
    request = json.loads(sys.argv[1])
    _patch_numpy2_index()
    from kernels import get_kernel

    k = get_kernel(request["kernel"])
    problem = k.representative(k.problem_key(request["shape"]))
    results = []
    for config in request["configs"]:
        inputs = k.make_inputs(problem, device="cpu", seed=1)
        for out in k.outputs(inputs):
            out.fill_(float("nan"))
        try:
            got = k.run(inputs, problem, config)
            error = k.check(got, k.reference(inputs, problem), problem["dtype"])
        except Exception as e:  # report, so the test shows which config broke
            error = f"{type(e).__name__}: {e}"
        results.append({"config": config, "error": error})
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
