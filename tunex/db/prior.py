"""A prior: trials measured elsewhere that a kernel's first search may learn from.

A kernel's first search on a device knows nothing of it; what tunex knows of the device is how
other kernels' configs ran there. A prior holds such trials: whole workloads (the kernel, its
problem, the device), each with its trials and its declared space, read from a trials export
(``tunex db export --format jsonl``; json and gzip'd files too). tunex ships one: a 100-trial
search of each of its own Triton kernels' recorded spaces (matmul, matmul with TMA, flash
attention, softmax, layernorm) on an NVIDIA H200 (``benchmarks/data``;
``benchmarks/make_prior.py`` builds it).

The Tuner adds a prior's workloads to a warm start the way it adds the database's related
kernels (:meth:`Prior.related`): only those measured **on the same device**, only kernels whose
declared spaces name more than half of the searched space's parameters, never the workload
searched itself. Of another kernel they are *guessed* (related by parameter names only), which
the default strategy trusts less: half of its proposals before its first evidence check, and
kept only while their model ranks this workload's own trials above chance. Of the same kernel
(same name) they are its other workloads, as the database's would be. Leave-one-out, each
kernel's prior without that kernel: benchmarks/RESULTS.md, "the prior tunex ships".

    from tunex.db.prior import Prior

    prior = Prior.shipped()                  # tunex's own recordings
    prior = Prior.load("team_trials.jsonl")  # a db export of another machine's database
"""

from __future__ import annotations

import functools
import gzip
import json
import os
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
    def shipped(cls, device: object = None) -> Prior:
        """tunex's own recordings (read once per process); with ``device``, an empty prior
        where none of them ran on it (found without reading them: a first search on any other
        machine pays nothing for the prior)."""
        if device is not None and not _ships(json.dumps(device)):
            return Prior(label=_LABEL)
        return _shipped()

    @property
    def kernels(self) -> list[str]:
        return sorted({w.kernel for w, _ in self.workloads})

    def without(self, kernels: Iterable[str]) -> Prior:
        """This prior less the workloads of ``kernels`` (a leave-one-out benchmark's)."""
        drop = set(kernels)
        kept = tuple((w, ms) for w, ms in self.workloads if w.kernel not in drop)
        return Prior(kept, {w: self.names[w] for w, _ in kept}, self.label)

    def related(self, workload: Workload, names: Sequence[str]
                ) -> list[tuple[Workload, list[Measurement]]]:
        """The workloads a search of ``workload`` over a space of parameters ``names`` may
        learn from: measured on the same device, of a kernel whose space names more than half
        of ``names``, not ``workload`` itself; the same kernel's first."""
        out = [(w, list(ms)) for w, ms in self.workloads
               if w != workload and w.device == workload.device and ms
               and names_most(names, self.names.get(w, ()))]
        out.sort(key=lambda wm: wm[0].kernel != workload.kernel)
        return out


_LABEL = "tunex's recordings"


@functools.cache
def _shipped() -> Prior:
    return Prior.load(*SHIPPED, label=_LABEL)


@functools.cache
def _ships(device: str) -> bool:
    """Whether a shipped file names ``device`` (JSON) as a workload's device."""
    return any(f'"device": {device}'.encode() in gzip.decompress(p.read_bytes())
               for p in SHIPPED)
