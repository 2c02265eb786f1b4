"""A prior: trials measured elsewhere that a kernel's first search may learn from.

A kernel's first search on a device knows nothing of it; what tunex knows is how the same
kernel ran elsewhere (other devices, other problems) and how other kernels' configs ran on this
device. A prior holds such trials: whole workloads (the kernel, its problem, the device), each
with its trials and its declared space, read from a trials export (``tunex db export --format
jsonl``; json and gzip'd files too). tunex ships three, each a 100-trial search of every recorded
space of a set (``benchmarks/make_prior.py`` builds them), the Kernel Tuner one with each
recording's 20 best configs as well (what the exhaustive tuning that recorded it holds):

- ``h200_triton``: its own Triton kernels (matmul, matmul with TMA, flash attention, softmax,
  layernorm) on an NVIDIA H200 (``benchmarks/data``);
- ``kernel_tuner_hub``: the public Kernel Tuner recordings of the FAIR auto-tuning benchmark
  hub (DOI 10.5281/zenodo.15364124, MIT licence, ``prior_data/LICENSE.kernel_tuner_hub``):
  2-D convolution (``convolution_kernel``) on seven GPUs, dedispersion
  (``dedispersion_kernel``) on two, CLBlast's ``Xgemm`` on two and point-in-polygon
  (``cn_pnpoly``) on two;
- ``riscv_rvv``: its own RVV C kernels (``sgemm``, ``softmax_c``, ``conv2d``: LMUL, unroll,
  tiles, loop order) at two problem sizes each on the simulated SpacemiT X60 and SiFive X280
  (``benchmarks/data/riscv``), so a first search on another RVV core or board, or at another
  size, starts from them.

The Tuner adds a prior's workloads to a warm start the way it adds the database's
(:meth:`Prior.related`): **the same kernel's** (same name) on any device or problem, as its
other workloads in the database would be, and **other kernels' measured on the same device**;
in both cases only where their declared spaces name more than half of the searched space's
parameters, and never the workload searched itself. Another kernel's are *guessed* (related by
parameter names only), which the default strategy trusts less: half of its proposals before
its first evidence check, and kept only while their model ranks this workload's own trials
above chance. Leave-one-out: benchmarks/RESULTS.md, "the prior tunex ships" (each kernel's
prior without that kernel), "the Kernel Tuner recordings as a prior" and "the RVV recordings as
a prior" (each recording's prior without that recording).

    from tunex.db.prior import Prior

    prior = Prior.shipped()                  # tunex's own recordings
    prior = Prior.load("team_trials.jsonl")  # a db export of another machine's database
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tunex.errors import DatabaseError
from tunex.trial import Measurement, Workload

__all__ = ["Prior", "SHIPPED", "names_most"]

#: The priors tunex ships (exports of trials), in ``tunex/db/prior_data``.
SHIPPED = tuple(sorted((Path(__file__).parent / "prior_data").glob("*.jsonl.gz")))


def names_most(names: Iterable[str], theirs: Iterable[str]) -> bool:
    """Whether a space of parameters ``theirs`` names more than half of ``names``: the rule
    by which another kernel is related to the one searched (the Tuner's ``related``)."""
    own = set(names)
    return 2 * len(own & set(theirs)) > len(own)


@dataclass(frozen=True, eq=False)
class Prior:
    """Workloads measured elsewhere, each with its trials and its space's parameter names."""

    workloads: tuple[tuple[Workload, tuple[Measurement, ...]], ...] = ()
    names: dict[Workload, frozenset[str]] = field(default_factory=dict)
    label: str = ""

    @classmethod
    def load(cls, *paths: str | os.PathLike[str], label: str | None = None) -> Prior:
        """The trials of one or more trials exports (json or jsonl, gzip'd or not).

        Raises:
            DatabaseError: a file is missing or is not a trials export; it says which.
        """
        from tunex.db._database import _read_export

        trials: dict[Workload, list[Measurement]] = {}
        names: dict[Workload, frozenset[str]] = {}
        for path in paths:
            try:
                items, declared = _read_export(path)
            except DatabaseError as exc:
                raise DatabaseError(f"prior {os.fspath(path)}: {exc}".replace(
                    "nothing was imported", "the prior is not read")) from exc
            for workload, m, _strategy, _at in items:
                trials.setdefault(workload, []).append(m)
            for workload, space in declared.items():
                names.setdefault(workload, frozenset(space.names))
        for workload, ms in trials.items():  # undeclared: the names its configs use
            names.setdefault(workload, frozenset(k for m in ms for k in m.config))
        return cls(tuple((w, tuple(ms)) for w, ms in trials.items()), names,
                   label if label is not None else ", ".join(Path(p).name for p in paths))

    @classmethod
    def shipped(cls, device: object = None, kernel: str | None = None) -> Prior:
        """The priors tunex ships (each file read once per process); with ``device`` (and
        ``kernel``), only the files that name that device (or kernel) in a workload, found
        without parsing them: a first search of another kernel on another machine pays nothing
        for the prior."""
        if device is None and kernel is None:
            return _shipped(SHIPPED)
        needles = [f'"device": {json.dumps(device)}'] if device is not None else []
        if kernel is not None:
            needles.append(f'"kernel": {json.dumps(kernel)}')
        files = tuple(p for p in SHIPPED if not _names(p).isdisjoint(needles))
        return _shipped(files) if files else Prior(label=_LABEL)

    @property
    def kernels(self) -> list[str]:
        return sorted({w.kernel for w, _ in self.workloads})

    def without(self, kernels: Iterable[str] = (), like: Workload | None = None) -> Prior:
        """This prior less the workloads of ``kernels`` and, with ``like``, less every
        workload of its kernel, problem and device (the same space measured, whatever its
        source hash): a leave-one-out benchmark's held-out kernel or recording."""
        drop = set(kernels)
        kept = tuple((w, ms) for w, ms in self.workloads if w.kernel not in drop and not (
            like is not None and (w.kernel, w.device) == (like.kernel, like.device)
            and w.problem == like.problem))
        return Prior(kept, {w: self.names[w] for w, _ in kept}, self.label)

    def related(self, workload: Workload, names: Sequence[str]
                ) -> list[tuple[Workload, list[Measurement]]]:
        """The workloads a search of ``workload`` over a space of parameters ``names`` may
        learn from: of the same kernel on any device, or of another kernel measured on the
        same (named) device; either way of a space that names more than half of ``names``,
        and never the space searched: ``workload`` itself, or its kernel, problem and device
        under another source hash (a replay of a recording the prior was built from, whose
        answer it holds). The same kernel's first."""
        out = [(w, list(ms)) for w, ms in self.without(like=workload).workloads
               if ms and (w.kernel == workload.kernel or (
                   w.device and w.device == workload.device))
               and names_most(names, self.names.get(w, ()))]
        out.sort(key=lambda wm: wm[0].kernel != workload.kernel)
        return out


_LABEL = "the recordings tunex ships"


@functools.cache
def _shipped(paths: tuple[Path, ...]) -> Prior:
    return Prior.load(*paths, label=_LABEL)


_NAMED = re.compile(r'"(?:device|kernel)": "(?:[^"\\]|\\.)*"')


@functools.cache
def _names(path: Path) -> frozenset[str]:
    """The devices and kernels the shipped file ``path`` names, as its export writes them
    (``"device": "NVIDIA H200"``, ``"kernel": "matmul"``): read once per process."""
    return frozenset(_NAMED.findall(gzip.decompress(path.read_bytes()).decode()))
