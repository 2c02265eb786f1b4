"""``@tunex.autotune``: a Triton autotuner with a database, config packs and explicit modes.

::

    import tunex
    from tunex import Pow2, Choice, Space

    @tunex.autotune(
        space=Space([Pow2("BLOCK", 64, 1024), Choice("num_warps", [2, 4, 8])]),
        key={"n": "pow2"},               # calls with n in (512, 1024] share a config
        mode="on_miss", budget="20trials,30s",
    )
    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr): ...

    add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)

It is a drop-in for ``triton.autotune`` too: ``@tunex.autotune(configs=[triton.Config(...)],
key=["M", "N"], reset_to_zero=[...], restore_value=[...], pre_hook=..., post_hook=...,
prune_configs_by={...})``.

**Workload.** A call's workload is the kernel (name and sha256 of its source from ``def`` on),
its key after bucketing (each key argument through its bucket function, tensors by dtype, plus
the dtypes of the tensor arguments of the first call unless ``dtypes=False``; or what
``problem=`` makes of the call's arguments) and the device fingerprint (device name,
architecture, Triton version). Two calls with the same workload share a config. The source hash
and the fingerprint come from :mod:`tunex.identity`, shared with the
``triton_gpu`` target, so the library kernels' launchers (``kernels.matmul.matmul(a, b)``...)
find what ``tunex search KERNEL --target triton_gpu`` recorded on the same device.

**Hot path.** A known key costs one tuple build and one dict lookup before
``kernel[grid](...)``'s own launch: no I/O, no tuning, no logging.

**Modes** (``mode=``, overridden by the environment variable ``TUNEX_MODE`` when set):

- ``"never"`` (default): never tune at runtime. A new workload resolves, in order, from the
  in-process cache (same bucket as an earlier call), the database (its best config for this
  exact workload), the loaded config packs (exact device, then same architecture, then nearest
  bucket), the best config of the database's nearest tuned workload (same kernel source, same
  device or architecture, nearest problem in log2, as a pack's nearest bucket: leave-one-out
  nearer the best than the cost model's pick, benchmarks/RESULTS.md), the kernel's cost model
  when one was trained (:meth:`Autotuned.train_model`), and last the kernel's default config
  (``default=``, else the space's default, else the first ``triton.Config``).
- ``"on_miss"``: as above for the database and for packs of the exact device and bucket;
  otherwise tune now, within ``budget``, on the call's own arguments, with the loop of
  ``tunex search`` (:class:`tunex.tuner.Tuner`): the default config, the nearest pack config,
  the model's pick and the best configs of the kernel's other shapes in the database are
  measured first, then the search strategy (``"model"`` by default, whatever form the budget
  takes; warm-started from the other shapes' trials) proposes the rest; the leaders within 3%
  of the best are measured again before one wins. On a GPU, configs are compiled ahead of
  time in a pool of build processes that starts on the first miss and stays up for later ones
  (``TUNEX_BUILD_WORKERS`` sets its size), and measured in the calling thread while the pool
  compiles the next ones. Every trial is recorded in the database the moment it ends,
  failures included (a config that does not compile or runs out of resources is a failed
  trial; the search goes on). A config that corrupts the CUDA context (an illegal memory
  access) cannot be recovered from in-process. A tuning cut short (Ctrl-C, which then stops
  the program rather than only the tuning; the process killed) is resumed by the next miss
  on that workload, in this process or another, its recorded trials kept and counted in the
  budget; once only: cut short again, its best so far is used, with a warning.
- ``"pinned"``: for multi-process jobs. Resolution uses only the database and the packs (then
  the default, with a warning), never timing and never the cost model, so every process that
  sees the same database and packs picks the same config whatever the load of its GPU. Tune
  first (one process with ``mode="on_miss"``, or ``tunex search``), then start the job with
  ``TUNEX_MODE=pinned``. Nothing waits on other ranks: there is no cross-process lock to hang.

**Where from, and why.** Each new key is announced once to the listeners
(:func:`add_listener`, or ``listener=``) as a :class:`Selection` and logged on the
``tunex.autotune`` logger at INFO (DEBUG for a new shape in a known bucket), e.g.
``matmul[M=1024,...]: BLOCK_M=128 ... from tuned (tuned 40 trials in 6.1 s (model, built in
parallel; no improvement in 20 trials), 1.23x over default)`` or ``... from pack (pack
mylib-1.2 exact device)``. Each is also recorded in the tuning database, when there is one this
process may write to (:meth:`tunex.db.Database.decisions`; ``tunex report`` shows them by
workload): not in ``pinned`` mode, whose ranks only read the database, not where ``never`` mode
finds no database file, and a database that cannot be written costs one warning, never a failed
launch.

**Packs** load with :func:`load_packs` or ``TUNEX_PACKS=path1:path2``; see
:mod:`tunex.db.packs`. The database is ``db=`` (a path, URL or Database), else ``TUNEX_DB``,
else ``~/.cache/tunex/tunex.db``; in ``never`` and ``pinned`` modes a missing database file is
not created.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunex.decorator import bucket
from tunex.decorator._kernel import Autotuned
from tunex.decorator._options import AutotuneOptions
from tunex.decorator._runtime import (
    MODES,
    Selection,
    add_listener,
    clear_packs,
    fingerprint,
    load_packs,
    loaded_packs,
    remove_listener,
)

__all__ = [
    "MODES",
    "AutotuneOptions",
    "Autotuned",
    "Selection",
    "add_listener",
    "autotune",
    "bucket",
    "clear_packs",
    "fingerprint",
    "load_packs",
    "loaded_packs",
    "remove_listener",
]


def autotune(configs: Sequence[Any] | None = None, key: Sequence[str] | Mapping[str, Any] = (),
             **options: Any) -> Callable[[Any], Autotuned]:
    """Decorate a ``@triton.jit`` kernel (put ``@tunex.autotune(...)`` above ``@triton.jit``).

    ``configs`` and ``key`` are as ``triton.autotune``'s; every option, with its default, is
    an attribute of :class:`AutotuneOptions` (``space=``, ``mode=``, ``budget=``, ``db=``,
    ``reset_to_zero=``, ``use_cuda_graph=``, ``problem=``...).

    Raises:
        ConfigError: an unknown option, a bad space, key, mode or hook name (at decoration
            time).
    """
    opts = AutotuneOptions.make(configs=configs, key=key, **options)

    def decorate(fn: Any) -> Autotuned:
        return Autotuned(fn, opts)

    return decorate


# ``tunex.autotune`` is this function (``tunex.__getattr__``); it carries the decorator's API as
# attributes, so ``tunex.autotune.add_listener(...)`` reads as well as ``tunex.decorator``'s.
for _name in ("add_listener", "remove_listener", "load_packs", "clear_packs", "loaded_packs",
              "bucket", "Selection", "Autotuned", "AutotuneOptions", "MODES", "fingerprint"):
    setattr(autotune, _name, globals()[_name])
del _name

# ``tunex.bucket.pow2`` reads as well as ``tunex.autotune.bucket.pow2`` once the decorator is in
# use (``@tunex.autotune(key={"M": tunex.bucket.pow2})`` evaluates ``tunex.autotune`` first).
setattr(sys.modules["tunex"], "bucket", bucket)  # noqa: B010
