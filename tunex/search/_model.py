"""Model-guided search: a gradient-boosted ranker proposes what to measure next.

It starts from a space-filling design over the valid points, each proposal picked from a pool of
uniform valid samples: on larger spaces the farthest, in the space's encoding, from everything
measured or pending (maximin); on spaces small enough that the pool is a large share of them,
the least crowded in every parameter's own values (MaxPro, Joseph, Gul and Ba 2015: the design's
points cover each parameter's values, not only the corners), the configs within 5% of the
best so far do not push it away. Its seventh proposal is the config at the middle of the
ordered ranges (where CMA-ES starts, and a GPU kernel's good tiles often lie): on small spaces
the pool's config nearest to it, on larger ones, whose pool seldom holds it, the middle itself.
The model only takes over as far as it has earned it: at every evidence check the ranker is
refitted on two thirds of the trials and scored on the held-back third (three folds, Spearman
rank correlation between its scores and the measured times, failures last), and the share of
proposals that follow the model grows with how far that correlation is above chance; the rest
keep filling the space. A model no better than chance thus costs about what uniform sampling
costs, and a good one takes over after the first evidence check.

Each model proposal is the best unmeasured config by a :class:`~tunex.cost_model.GBMRanker` fit
on every trial so far (failures included, as the worst label). Candidates are the whole valid
space when it is small enough to enumerate (exact argmax over the model), otherwise a pool of
uniform samples plus mutations of the best configs found (an evolutionary step that keeps the
search local where the model is sure). Fits draw a fresh seed each (bagging), so successive fits
differ a little (Thompson-style exploration), and a small share of proposals is uniform.

The model's proposals come from a portfolio of two methods, chosen per proposal by the
search's own evidence: the model's best config anywhere (global) or its best config near the
leaders (local search, what genetic algorithms and annealing exploit on small spaces: one step
of one parameter from the three best configs, or any point of a trust region around the best
whose size follows the local arm's successes and failures, as in TuRBO), each arm drawn by
Thompson sampling on how often its trials landed among the best tenth so far. Once the best
config has held for a trial, its untried one-step neighbours come first, the model's favourite
first (a pattern search's poll, ``complete_local``), so a stalled search never sits beside a
faster config one step away. Leave-one-out over 21 recorded spaces (40 seeds) it reaches 95%
of the optimum within 100 trials in 90% of runs (benchmarks/RESULTS.md).

Transfer (:meth:`ModelSearch.warm_start`): the first proposals race the model of the same
kernel's other workloads (its best config for this workload's problem and device) against
their own best configs (a sibling's favourite, right where the best does not move with the
shape), each side proposing more while it has measured the faster config; their trials train
the model beside this workload's own, unless a model fit on them alone ranks this workload's
own trials worse than chance. This
workload's own trials weigh half of every fit from the first one (the siblings' thousands of
trials would otherwise drown its few), and the siblings' share of the rows falls to a tenth by
its 45th trial. A sibling whose top is flat (half its configs within 5% of its best) is left
out: its best configs are noise. Where the siblings' problem sizes differ, the model also sees
each numeric parameter relative to each size (``log2(param / size)``), so "a block the size of
the row" carries to a shape none of them had, and the sums of two of those (the number of blocks
of a two-dimensional grid, such as a matrix product's output tiles).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tunex.cost_model import FeatureExtractor, GBMRanker, flatten, trainable
from tunex.errors import StrategyError
from tunex.search._base import SearchStrategy
from tunex.space import Space
from tunex.trial import Config, Measurement, Workload

if TYPE_CHECKING:  # imported where the arm is first drawn: Optuna is slow to import
    from tunex.search._optuna import OptunaSearch

__all__ = ["ModelSearch", "rank_correlation"]

_ARM_MAX_HISTORY = 300  # a sampler's cost per ask grows with the history; past it the arm rests
_TWO_STEP_LIMIT = 1024  # two-step moves scored per leader by the local arm, at most
_DESIGN_POOL = 64  # uniform valid samples the space-filling design picks its proposal from
_SMALL = 1 / 32  # a space is small where the design's pool is at least this share of it
_NEAR_BEST = 1.05  # measured configs within 5% of the best so far: ``near_best``'s reach


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties sharing their mean rank."""
    a = np.nan_to_num(np.asarray(a, dtype=np.float64), nan=-np.inf, neginf=-1e300, posinf=1e300)
    order = np.argsort(a, kind="stable")
    r = np.empty(len(a))
    r[order] = np.arange(len(a))
    _, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
    return (np.bincount(inv, weights=r) / counts)[inv]


def rank_correlation(scores: np.ndarray, values: np.ndarray) -> float:
    """Spearman correlation between model scores (higher: faster) and measured times (lower:
    faster; ``inf``/``nan``: failed, slowest of all). 1: the model orders them perfectly; 0:
    no better than chance."""
    v = np.where(np.isfinite(values), values, np.inf)
    a, b = _ranks(np.asarray(scores)), _ranks(-v)
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


#: the model's variants (``model:VARIANT``): LightGBM objectives :class:`GBMRanker` fits
_OBJECTIVES = ("lambdarank", "rank_xendcg", "regression")


def _distance(w: Workload, current: Workload) -> tuple[int, float]:
    """How far workload ``w`` is from ``current``: another device first (by the targets'
    ``device``, else the whole fingerprint), then how far apart their problems are (log2 of
    each numeric size, a list's elements one by one; 1 for any other difference)."""
    pa, pb = flatten(w.problem), flatten(current.problem)
    d = 0.0
    for k in set(pa) | set(pb):
        a, b = pa.get(k), pb.get(k)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
            d += abs(math.log2(a) - math.log2(b))
        elif a != b:
            d += 1.0
    return (0 if w.device == current.device else 1, d)


class ModelSearch(SearchStrategy):
    """Cost-model-guided search (the default strategy).

    Args:
        space: the bound space.
        seed: random seed.
        n_init: trials before the model is first checked: a space-filling design, or after a
            warm start the other workloads' best configs and the model they train.
        explore: share of proposals drawn uniformly at random even from a trusted model.
        refit_every: refit once this share of the history is new (at least one trial).
        enumerate_limit: spaces up to this many valid points are scored whole.
        pool: candidates per round for larger spaces.
        interactions: give the model log2 pairwise products of numeric parameters.
        model: options for :class:`GBMRanker`.
        design: the proposals where the model is not followed: ``"maximin"`` (the pool
            config farthest from everything measured or pending, in the space's encoding),
            ``"maxpro"`` (the pool config least crowded in each parameter's own values, by
            MaxPro's criterion), ``"random"`` (uniform), or ``"auto"`` (the default): MaxPro on
            small spaces (the pool of 64 samples at least 1/32 of the valid points: at most
            2,048), maximin elsewhere. Maximin's farthest point is a corner sweep: a small
            space's corners are few, and its designs are the same on every seed; MaxPro's cover
            each parameter's values. Leave-one-out, cold, the 57 spaces of at most 2,048
            points, seeds 0-59, paired against maximin there: +0.069 mean log2 of trials to
            95% (p 9e-6), 95% within 20 trials in 2,772 runs against 2,633 of 3,420; Triton
            spaces gain (matmul_tma +0.25, flash attention +0.18), RVV sgemm loses (-0.16), its
            best configs lie at the corners. The cut is a proxy: in the recorded spaces it
            keeps Kernel Tuner's (4,092 points and more, best configs at the ends, where MaxPro
            loses) on maximin, while a 3,312-point Triton matmul still gains from MaxPro
            (RESULTS.md).
        gate: evidence at which the model gets every proposal: ``rho * sqrt(n - 1)`` (about a
            z-score under "no better than chance") of its held-out rank correlation ``rho`` on
            ``n`` trials; below it the model's share is proportional. ``0``: always follow it.
        floor: the model's least share once checked (so a slow start can still be overturned).
        check_every: check the evidence again once this share of the history is new.
        seed_configs: best configs of each other workload proposed first after a warm start.
        portfolio: split the model's proposals between its best config anywhere and its best
            neighbour of the leading configs (local search), each chosen by Thompson sampling
            on how often its trials landed among the best tenth so far (``False``: the global
            arm only).
        seed_order: order of the other workloads whose best configs come first: ``"given"``
            (as the database lists them) or ``"similar"`` (the default: same device first,
            then the closest problem sizes). Leave-one-out, warm, 516 runs on the six
            families with differing sizes: ``"similar"`` faster in 206, slower in 135
            (Wilcoxon p 0.018; RESULTS.md).
        flat: a sibling whose measured configs are at least this share within 95% of its
            best has a flat top: its best configs are picked by noise and its ranking of the
            top says nothing, so it is left out of the warm start (``None``: keep every one).
        transfer_decay: after a warm start, the share of the other workloads' trials in each
            fit falls linearly to a tenth as this workload's own trials reach this many.
        own_share: after a warm start, weigh this workload's own trials to at least this
            share of each fit's loss, however many sibling trials train beside them
            (``None``: every trial weighs the same, so a few own trials are drowned out).
        sampler_arm: a third arm in the portfolio: one of Optuna's samplers on this
            workload's own trials: ``"tpe"`` (density ratio of good to other configs, per
            parameter and joint, the method that wins early on spaces where a few parameters
            decide) or ``"cmaes"`` (CMA-ES, a search distribution that adapts around the best
            configs, started from the best tenth of the trials when the arm is first drawn);
            it rests
            once the history reaches 300 trials, where its cost per proposal would grow past
            the model's. Off by default (``None``): leave-one-out TPE traded spaces cold and
            lost warm (RESULTS.md).
        local_moves: the local arm's candidates around the leading configs: ``"step"`` (one
            step of one parameter: an adjacent value of an ordered one), ``"two"`` (also one
            step in each of two parameters at once, so settings that only pay together, such
            as a cache flag and a read path, are one move apart; at most 1,024 such moves per
            leader, sampled where there are more) or ``"any"`` (any other value of one
            parameter, so a method selector declared as an ordered int is one move from each
            of its values), or ``"region"`` (the default: one step as ``"step"``, plus the
            valid points of a trust region around the best config, each ordered parameter
            within a share of its range and at most that share of the parameters changed; the
            share starts at a quarter, doubles after two new bests from the local arm in a row
            and halves after ``max(4, parameters)`` local trials without one). Leave-one-out,
            ``"region"`` reaches 95% in more runs than ``"step"`` cold and warm; ``"two"``
            and ``"any"`` do not (RESULTS.md).
        seed_spread: after a warm start, skip any of the other workloads' best configs within
            one parameter of a config already queued for the first proposals (a near-copy of
            a sibling's favourite teaches little), taking that sibling's next best instead.
            With ``local_moves="two"`` faster warm on fixed sources, not end to end (RESULTS.md).
        relative: after a warm start from workloads of other problem sizes, also give the
            model each numeric parameter relative to each problem size that differs between
            them (``log2(param / size)``, see :class:`~tunex.cost_model.FeatureExtractor`).
            Leave-one-out on the six families with differing sizes, warm, 40 seeds: 95%
            within 20 trials in 795 of 840 runs against 778 without (RESULTS.md).
        relative_pairs: with ``relative``, also the sums of two such columns of different
            parameters and sizes (``log2(a * b / (size_i * size_j))``, minus log2 of the
            number of blocks of a grid over two dimensions, see
            :class:`~tunex.cost_model.FeatureExtractor`): a matrix product's best tiles follow
            the number of output tiles against the device's cores, a sum trees cannot form
            from the columns one at a time. Leave-one-out on all 34 recorded spaces, warm, 40
            seeds: 95% within 20 trials in 1,224 of 1,360 runs against 1,210 without
            (matmul 4096^3 28 -> 39 of 40; RESULTS.md).
        other_spaces: after a warm start, also learn from the other workloads' trials of
            configs recorded under another version of this space (a parameter added since,
            a range changed), as long as they name more than half of its parameters: what
            they lack, or hold outside this space's values, is unknown to the model
            (``nan``; a number outside a numeric range keeps its value). They train the
            model only; the first proposals are other workloads' best configs that are
            points of this space.
        like_rule: other kernels' workloads in a warm start (the Tuner's ``like`` and
            ``related``): ``"alongside"`` (the default: used only beside a kept workload of
            this kernel, when it has any: where all of its own are left out, a flat top or no
            config of this space, the other kernels' are too, and it searches as from its own
            alone; a kernel's first search still starts from them) or ``None`` (used as this
            kernel's own other workloads are). Leave-one-out, related kernels beside the
            siblings, 34 spaces, 40 seeds: the one space this changes (dedispersion/MI250X,
            whose sibling has a flat top) reaches 95% within 20 trials in 27 of 40 runs
            against 15 (RESULTS.md).
        related_start: where every workload a warm start keeps is of a kernel ``guessed``
            from its parameter names (a kernel's first search, see :meth:`warm_start`), the
            share of the proposals before the first evidence check that follow their model;
            the rest fill the space as a cold search does. Their best configs still come
            first.
        related_keep: in that case their trials stay in the training only while their model
            ranks this workload's trials above this rank correlation (``None``: as the
            kernel's own other workloads, dropped only when worse than chance).
            Leave-one-out, a first search from the other kernels of the same device whose
            spaces name most of its parameters, 40 seeds: with ``0.5`` and ``0.0`` its mean
            log2 of trials to 95% is 1.39 below cold on the 17 H200 Triton spaces (95% within
            20 trials in 634 of 680 runs against 495) and level with cold on Kernel Tuner's
            (-0.07, p 0.59); following their model from the first trial (``1.0``, ``None``;
            seeds 0-15) gains 1.92 on the former and loses 0.18 on the latter (RESULTS.md).
        first: a warm start's first proposals (until the first evidence check): ``"race"``
            (the default: the model's best config and the nearest other workload's best, in
            the order ``race_start`` gives, then more of whichever of the two has measured the
            faster config, until their best configs run out or the first check is due; not
            where every workload kept is a kernel guessed from its parameter names, whose
            favourites come first) or
            ``"siblings"`` (the other workloads' best configs, all of them, before the model).
            A sibling's best config is right where the best does not move with the problem
            (the same kernel on the same core at another size), the model where it moves in a
            way its features carry (a matrix product's tiles against the output's size).
            Leave-one-out, each recorded space's first search from the prior tunex ships less
            that space, 20 seeds: mean log2 of trials to 95% +1.22 against ``"siblings"`` on
            the 17 H200 Triton spaces (matmul 7 -> 1 trial, median), +0.26 on Kernel Tuner's
            13, -0.42 on the 12 RVV spaces (median 1 -> 2 trials on 6 of them: the nearest
            sibling's favourite was the optimum); 95% within 20 trials unchanged on each.
            From a database of the family's other searches, 10 seeds: H200 and RVV -0.08
            (95% within 20 trials in 286 of 290 runs against 282), Kernel Tuner's +0.25
            (RESULTS.md).
        transfer_rows: at most this many of the other workloads' trials train a fit (a
            uniform sample, drawn anew for each fit), so a database of many large searches does
            not make every proposal slow: a warm start from 20,304 trials of three other GPUs
            took 323 ms per trial (median of its first 40) without it, against 48 ms from 900
            (RESULTS.md). ``None``: all of them.
        race_start: which side makes the race's first proposal: ``"agree"`` (the default):
            the nearest other workload's best config where a model of the other workloads'
            trials that sees the parameters only as they are (none relative to the problem
            sizes) picks it and theirs with the relative columns picks another, so a best
            that does not move with the problem is tried first (spaces of up to
            ``enumerate_limit`` points), else the model's pick; ``"model"``: the model's pick
            always. Against ``"model"``, paired runs of the leave-one-out benchmark, mean log2
            of trials to 95%: from the shipped prior less the space's own recording, 20 seeds,
            RVV +0.21 (p 5e-7), H200 -0.03, Kernel Tuner +0.03; from a database of the
            family's other searches, 10 seeds, H200 and RVV +0.03, Kernel Tuner 0.00, an H100
            rowsum +0.03; 95% within 20 trials level or better in each; on 17 spaces recorded
            on an H100 after the choice, 20 seeds, +0.10 (p 0.04), 315 runs within 20 trials
            against 319 of 340 (RESULTS.md).
        near_best: where the space-filling design's pool (64 uniform valid samples) is at
            least this share of the space's valid points (the default, 1/32: spaces of at most
            2,048 points), the configs measured within 5% of the best so far do not push its
            proposals away; everything else measured still does. Where the pool is a large
            share of the space, the farthest of it is the same corner sweep on every seed, and
            a first good config drove the design away from the region around it; on larger
            spaces the design's reach to far basins is worth more, and every measured config
            repels. ``None``: everything measured repels on every space. Leave-one-out, cold,
            63 spaces, seeds 0-19, paired against ``None``: +0.066 mean log2 of trials to 95%
            (p 0.04); fresh seeds 40-59 on the 50 spaces it changes: +0.092 (p 0.02); on
            seven RVV spaces recorded after the choice, 40 seeds: +0.056 (p 0.33); the one easy
            space where uniform sampling was significantly faster, 1.44x -> 1.18x its
            expectation over 100 seeds (RESULTS.md).
        middle_at: the design's proposal made once this many configs are measured or pending
            is the config at the middle of the ordered parameters' ranges, where CMA-ES
            starts its search: a GPU kernel's good tiles often lie there, away from the
            corners a space-filling design favours. On spaces where the design's pool is at
            least 1/32 of the valid points (at most 2,048) the pool config nearest the middle
            (least summed ``|position / (values - 1) - 0.5|``); on larger ones, whose pool
            seldom holds a config near it, the middle itself (each ordered parameter of at
            least three values at its middle value, one of two middles at random; the pool's
            nearest where that is invalid or measured). Late enough that an easy space is
            mostly solved before it (a reduction's best block is at an end), early enough that
            the model has it at its first evidence check. ``None``: no such proposal.
            Leave-one-out, cold, the 57 spaces of at most 2,048 points, seeds 0-39, paired
            against ``None``: +0.047 mean log2 of trials to 95% (p 0.002), 95% within 20
            trials in 1,905 runs against 1,845 of 2,280, flash attention +0.33 and no family
            below -0.03; at ``3`` the RVV sgemm spaces, whose best configs are at the corners,
            lost 0.13. A first search from the prior: 330 against 327 of 340 runs within 20.
            The larger spaces, seeds 0-39, against no such proposal there: conv3x3's four H100
            shapes +0.55 (within 100 in 134 runs against 113 of 160), the 17 others +0.035
            (p 0.17; gemm_leaky +0.27, CLBlast's GEMM -0.12, pnpoly -0.11); the pool's nearest
            there instead gained nothing (+0.001, RESULTS.md).
        complete_local: once the best config has held for this many trials after the initial
            design, the next proposals are its untried one-step neighbours (see
            :meth:`~tunex.space.Space.neighbours`), the model's favourite first, until none is
            left or a new best takes over (a pattern search's poll): a stalled search never
            sits beside a faster config one step from its best (a cold trace on an H100
            matmul sat 20 trials at 93-94% with the 95% config one step away). ``None``: the
            arms alone. Leave-one-out, cold, paired against ``None``: the 57 spaces of at
            most 2,048 points, seeds 0-39, +0.021 mean log2 of trials to 95% (509 faster / 392
            slower, p 0.0004), 95% within 20 trials in 1,947 runs against 1,905 of 2,280
            (matmul +0.13, flash attention +0.10, RVV sgemm -0.08); the 17 larger spaces, seeds
            0-19, +0.040 (p 0.16) but 281 runs within 100 against 286 of 340 (CLBlast's GEMM
            slower); warm, 21 H100 spaces, +0.009, within 20 in 95% of runs against 94%.
            ``0`` and ``3`` gained less (RESULTS.md).
    """

    name = "model"

    def __init__(self, space: Space, *, seed: int | None = None, variant: str = "",
                 n_init: int = 10, explore: float = 0.05, refit_every: float = 0.02,
                 enumerate_limit: int = 250_000, pool: int = 2048, interactions: bool = True,
                 model: dict[str, Any] | None = None, design: str = "auto",
                 gate: float = 1.0, floor: float = 0.1, check_every: float = 0.1,
                 seed_configs: int = 2, portfolio: bool = True,
                 seed_order: str = "similar", flat: float | None = 0.5,
                 transfer_decay: float = 50.0, own_share: float | None = 0.5,
                 sampler_arm: str | None = None, local_moves: str = "region",
                 seed_spread: bool = False, relative: bool = True,
                 relative_pairs: bool = True, other_spaces: bool = True,
                 like_rule: str | None = "alongside", related_start: float = 0.5,
                 related_keep: float | None = 0.0, transfer_rows: int | None = 4000,
                 first: str = "race", race_start: str = "agree",
                 near_best: float | None = _SMALL, middle_at: int | None = 6,
                 complete_local: int | None = 1) -> None:
        super().__init__(space, seed=seed)
        for name, count in (("complete_local", complete_local), ("middle_at", middle_at)):
            if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                      or count < 0):
                raise ValueError(f"{name} must be None or a count of trials (0 or more), not "
                                 f"{count!r}")
        self.complete_local = complete_local
        self.middle_at = middle_at
        if design not in ("auto", "maximin", "maxpro", "random"):
            raise ValueError(f"design must be 'auto', 'maximin', 'maxpro' or 'random', "
                             f"not {design!r}")
        self.interactions = interactions
        self.n_init = n_init
        self.explore = explore
        self.refit_every = refit_every
        self.pool = pool
        self.design = design
        self.gate = gate
        self.floor = floor
        self.check_every = check_every
        self.seed_configs = seed_configs
        self.portfolio = portfolio
        if seed_order not in ("given", "similar"):
            raise ValueError(f"seed_order must be 'given' or 'similar', not {seed_order!r}")
        self.seed_order = seed_order
        self.flat = flat
        if not transfer_decay > 0:
            raise ValueError(f"transfer_decay must be above 0, not {transfer_decay!r}")
        if own_share is not None and not 0 < own_share < 1:
            raise ValueError(f"own_share must be between 0 and 1, not {own_share!r}")
        self.transfer_decay = transfer_decay
        self.own_share = own_share
        if sampler_arm not in (None, "tpe", "cmaes"):
            raise ValueError(f"sampler_arm must be None, 'tpe' or 'cmaes', not {sampler_arm!r}")
        self.sampler_arm = sampler_arm if portfolio else None
        if local_moves not in ("step", "any", "two", "region"):
            raise ValueError("local_moves must be 'step', 'any', 'two' or 'region', not "
                             f"{local_moves!r}")
        self.local_moves = local_moves
        #: the trust region of ``local_moves="region"``: share of each ordered parameter's
        #: range around the incumbent, and the local arm's runs of successes and failures
        self.region_ = 0.25
        self._region_run = [0, 0]
        self._idx: np.ndarray | None = None  # value index of each enumerated candidate
        self.seed_spread = seed_spread
        self.relative = relative
        self.relative_pairs = relative_pairs
        self.other_spaces = other_spaces
        if like_rule not in (None, "alongside"):
            raise ValueError(f"like_rule must be None or 'alongside', not {like_rule!r}")
        self.like_rule = like_rule
        if not 0.0 <= related_start <= 1.0:
            raise ValueError(f"related_start must be between 0 and 1, not {related_start!r}")
        self.related_start = related_start
        if related_keep is not None and not -1.0 <= related_keep < 1.0:
            raise ValueError("related_keep must be None or a rank correlation in [-1, 1), not "
                             f"{related_keep!r}")
        self.related_keep = related_keep
        if transfer_rows is not None and (isinstance(transfer_rows, bool)
                                          or not isinstance(transfer_rows, int)
                                          or transfer_rows < 1):
            raise ValueError(f"transfer_rows must be None or at least 1, not {transfer_rows!r}")
        self.transfer_rows = transfer_rows
        if first not in ("siblings", "race"):
            raise ValueError(f"first must be 'siblings' or 'race', not {first!r}")
        self.first = first
        if race_start not in ("model", "agree"):
            raise ValueError(f"race_start must be 'model' or 'agree', not {race_start!r}")
        self.race_start = race_start
        if near_best is not None and (isinstance(near_best, bool)
                                      or not isinstance(near_best, (int, float))
                                      or not 0.0 < near_best <= 1.0):
            raise ValueError(f"near_best must be None or a share in (0, 1], not {near_best!r}")
        self.near_best = near_best
        #: whether the race's first proposal is the model's (else the nearest favourite's)
        self._model_starts = True
        #: the first proposals' source (``"queue"``: a sibling's best config; ``"model"``)
        self._first_by: dict[Config, str] = {}
        self._guessed = False  # every source kept is a kernel related by its parameter names
        self._sampler: OptunaSearch | None = None  # the sampler arm, on this workload's trials
        self._model: GBMRanker | None = None
        self._arm: dict[Config, str] = {}  # proposing arm of each model proposal
        #: per arm, [trials among the best tenth, other trials]
        self.arms_: dict[str, list[int]] = {"global": [0, 0], "local": [0, 0]}
        if self.sampler_arm:
            self.arms_[self.sampler_arm] = [0, 0]
        self.model_options = dict(model or {})
        if variant:
            if variant not in _OBJECTIVES:
                raise StrategyError(f"strategy 'model:{variant}': the model's variant is its "
                                    f"ranking objective, one of {', '.join(_OBJECTIVES)}")
            self.model_options.setdefault("objective", variant)
        self.features = FeatureExtractor(space, interactions=interactions)
        self.workload: Workload | None = None
        self._other: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._prior: GBMRanker | None = None  # fit on the other workloads' trials only
        self._queue: list[Config] = []  # the other workloads' best configs, proposed first
        self._cands: list[Config] | None = None
        self._cand_X: np.ndarray | None = None
        if space.size <= enumerate_limit:
            self._cands = list(space)
            self._cand_X = self.features.transform(self._cands)
        self._order: list[Config] = []  # candidates by descending score, from the last fit
        self._pos = 0
        self._told_at_fit = -1
        self._rows: dict[Config, np.ndarray] = {}
        self._checked_at = 0
        #: held-out rank correlation of the model on this workload's trials, at the last check
        self.rho_: float | None = None
        #: rank correlation of the other workloads' model on this workload's trials
        self.prior_rho_: float | None = None
        self.use_other_ = True  # train on the other workloads' trials (while they predict)

    # -- transfer -------------------------------------------------------------------------------

    def warm_start(self, others: Sequence[tuple[Workload, Sequence[Measurement]]],
                   current: Workload | None = None, guessed: Collection[str] = ()) -> None:
        """Learn from other workloads of the same kernel (other shapes or devices).

        Their best configs are proposed first; their trials train a model from the start and
        stay in the training set, weighed down as this workload's own trials grow, unless a
        model fit on them alone ranks this workload's own trials worse than chance.
        ``guessed``: other kernels among them taken for their parameter names only; where
        they are all that is kept, their model has ``related_start`` of the proposals before
        the first check and stays only while it ranks this workload's trials above
        ``related_keep``.
        """
        usable = [(w, ms) for w, ms in others if ms]
        if not usable:
            return
        if self.seed_order == "similar" and current is not None:
            usable.sort(key=lambda wm: _distance(wm[0], current))
        groups = [(w, *trainable(self.space, ms, self.other_spaces)) for w, ms in usable]
        alone = 0
        if self.like_rule == "alongside" and current is not None:
            own = [self._says_something(keep) for w, keep, _ in groups
                   if w.kernel == current.kernel]
            if own and not any(own):  # this kernel's others say nothing: neither do others
                alone = sum(w.kernel != current.kernel for w, _, _ in groups)
                groups = [gr for gr in groups if gr[0].kernel == current.kernel]
        self.workload = current
        self.features = FeatureExtractor.for_workloads(
            self.space, [w for w, _, _ in groups] + ([current] if current else []),
            interactions=self.interactions, relative=self.relative,
            relative_pairs=self.relative_pairs, anchor=current)
        X, y, g = [], [], []
        best: list[list[Config]] = []
        outside = flat = foreign = 0
        for gi, (w, keep, partial) in enumerate(groups):
            if not keep:
                outside += 1
                continue
            if not self._says_something(keep):
                flat += 1
                continue
            foreign += partial
            X.append(self.features.transform([m.config for m in keep], w, partial=partial))
            y.append([m.value for m in keep])
            g.append(np.full(len(keep), gi + 1))
            ok = sorted((m for m in keep if m.ok), key=lambda m: m.value)
            best.append([m.config for m in ok if m.config in self.space][
                :10 * self.seed_configs if self.seed_spread else self.seed_configs])
        self._guessed = bool(X) and all(
            groups[int(gi[0]) - 1][0].kernel in guessed for gi in g)
        if X:
            self._other = (np.vstack(X), np.concatenate(y), np.concatenate(g))
            prior = self._other
            if self.transfer_rows is not None and len(prior[1]) > self.transfer_rows:
                sel = self.rng.choice(len(prior[1]), size=self.transfer_rows, replace=False)
                prior = (prior[0][sel], prior[1][sel], prior[2][sel])
            self._prior = GBMRanker(random_state=int(self.rng.integers(2**31)),
                                    **self.model_options).fit(*prior)
        if self.seed_spread:  # skip near-copies (one parameter apart) of queued configs
            names = self.space.names
            left = [list(c) for c in best]
            for _ in range(self.seed_configs):
                for configs in left:
                    while configs:
                        c = Config(configs.pop(0))
                        if all(sum(c[n] != q[n] for n in names) > 1 for q in self._queue):
                            self._queue.append(c)
                            break
        else:
            for rank in range(self.seed_configs):  # round robin over the other workloads
                for configs in best:
                    if rank < len(configs) and configs[rank] not in self._queue:
                        self._queue.append(Config(configs[rank]))
        if self._cands is not None:
            self._cand_X = self.features.transform(self._cands, current)
        if X and self.race_start == "agree" and self._racing() and self._queue:
            self._model_starts = not self._absolute_agrees(prior)
        self._rows.clear()
        self._told_at_fit = -1
        self.transfer_ = {
            "workloads": len(groups), "used": len(X), "trials": sum(len(v) for v in y),
            # other kernels among them (the Tuner's like= and related kernels)
            "kernels": sorted({w.kernel for w, _, _ in groups} - {current.kernel}) if current
            else [],
            "left_out": {"no config in this space": outside, "flat top": flat,
                         **({"another kernel, no sibling kept": alone} if alone else {})},
            # workloads whose trials include configs of another version of the space
            "other_space": foreign,
            "first": [c.to_dict() for c in self._queue],
            # the siblings' model on this workload's trials, from the first evidence check on
            "rank_correlation": None, "model_kept": bool(X),
            # how their trials are judged at the evidence checks: "chance" (dropped when their
            # model ranks this workload's trials worse than chance) or "above" (kept only while
            # it ranks them better: kernels guessed from their parameter names, nothing else)
            "keep": "above" if self._guessed and self.related_keep is not None else "chance"}

    def _racing(self) -> bool:
        """Whether a warm start's first proposals race the model against the favourites
        (``first="race"``, other workloads kept, not only kernels guessed by their names)."""
        return self.first == "race" and self._other is not None and not self._guessed

    def _absolute_agrees(self, rows: tuple[np.ndarray, np.ndarray, np.ndarray]) -> bool:
        """Whether the race starts from the nearest favourite (``race_start="agree"``): a model
        of the other workloads' trials that sees the parameters only as they are (not relative
        to the problem sizes) picks it as its best, and theirs with the relative columns
        picks another (the best of that workload that does not move with the problem)."""
        k = self.features.n_relative
        if not k or self._prior is None or self._cands is None or self._cand_X is None:
            return False
        absolute = GBMRanker(random_state=int(self.rng.integers(2**31)),
                             **self.model_options).fit(rows[0][:, :-k], rows[1], rows[2])
        pick = self._cands[int(np.argmax(absolute.predict(self._cand_X[:, :-k])))]
        theirs = self._cands[int(np.argmax(self._prior.predict(self._cand_X)))]
        return pick == self._queue[0] and theirs != pick

    def _says_something(self, keep: Sequence[Measurement]) -> bool:
        """Whether another workload's trials (of this space) say where its best is: some, and
        no flat top (a ``flat`` share or more of them within 95% of its best is picked among
        by noise, so its ranking of the top says nothing here)."""
        if not keep:
            return False
        if self.flat is None:
            return True
        vals = [m.value for m in keep if m.ok]
        near = min(vals, default=0.0) / 0.95
        return not (vals and sum(v <= near for v in vals) >= self.flat * len(vals))

    # -- evidence -------------------------------------------------------------------------------

    def _training(self, rows: np.ndarray | slice | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Own trials (``rows`` of them) plus, while they predict, the other workloads';
        features, runtimes, workload of each row (0: own) and row weights."""
        told = list(self.history.values())
        X = np.vstack([self._row(m.config) for m in told]) if told else np.empty(
            (0, len(self.features.feature_names)))
        y = np.array([m.value for m in told], dtype=np.float64)
        if rows is not None:
            X, y = X[rows], y[rows]
        g = np.zeros(len(y), dtype=np.int64)
        if self._other is not None and self.use_other_:
            oX, oy, og = self._other
            keep = max(0.1, 1.0 - len(told) / self.transfer_decay)  # own trials take over
            n = int(len(oy) * keep)
            if self.transfer_rows is not None:  # a fit's cost grows with its rows
                n = min(n, self.transfer_rows)
            sel = self.rng.choice(len(oy), size=n, replace=False) if n < len(oy) else slice(None)
            own = len(y)
            X = np.vstack([X, oX[sel]])
            y = np.concatenate([y, oy[sel]])
            g = np.concatenate([g, og[sel]])
            if self.own_share is not None and own:
                w = np.ones(len(y))
                w[:own] = max(1.0, self.own_share / (1.0 - self.own_share) * (len(y) - own) / own)
                return X, y, g, w
        return X, y, g, None

    def _check(self) -> None:
        """Score the model on held-back trials (3 folds) and the other workloads' model on all
        of this workload's trials; the results set the model's share of the proposals."""
        told = list(self.history.values())
        n = len(told)
        X = np.vstack([self._row(m.config) for m in told])
        y = np.array([m.value for m in told], dtype=np.float64)
        if self._prior is not None:
            self.prior_rho_ = rank_correlation(self._prior.predict(X), y)
            # dropped only on evidence against them: the first trials of a warm search are
            # the siblings' near-tied best configs, whose order says little either way
            self.use_other_ = self.prior_rho_ * math.sqrt(n - 1) > -1.0
            if self._guessed and self.related_keep is not None:
                self.use_other_ = self.prior_rho_ > self.related_keep
            if self.transfer_ is not None:
                self.transfer_.update(rank_correlation=round(self.prior_rho_, 3),
                                      model_kept=self.use_other_, checked_at=n)
        folds = self.rng.permutation(n) % 3
        pct = np.empty(n)
        for f in range(3):
            test = folds == f
            model = GBMRanker(random_state=int(self.rng.integers(2**31)), **self.model_options)
            model.fit(*self._training(np.flatnonzero(~test)))
            pct[test] = _ranks(model.predict(X[test])) / max(int(test.sum()) - 1, 1)
        self.rho_ = rank_correlation(pct, y)
        self._checked_at = n

    def _share(self) -> float:
        """Share of the next proposals that follow the model."""
        own = len(self.history)
        warm = self._other is not None
        if own >= self.n_init and (
                self.rho_ is None
                or own - self._checked_at >= max(2, math.ceil(self.check_every * own))):
            self._check()
        if self.rho_ is None:
            if not warm:
                return 0.0
            return (1.0 - self.explore) * (self.related_start if self._guessed else 1.0)
        if self.gate <= 0:
            return 1.0 - self.explore
        rho = self.rho_
        if self.use_other_ and self.prior_rho_ is not None:  # evidence for the siblings' model
            rho = max(rho, self.prior_rho_)
        z = rho * math.sqrt(max(self._checked_at - 1, 1))
        return (1.0 - self.explore) * min(1.0, max(self.floor, z / self.gate))

    # -- ask/tell -------------------------------------------------------------------------------

    def _row(self, c: Config) -> np.ndarray:
        r = self._rows.get(c)
        if r is None:
            r = self.features.transform([c], self.workload)[0]
            self._rows[c] = r
        return r

    def _fit(self) -> None:
        model = GBMRanker(random_state=int(self.rng.integers(2**31)), **self.model_options)
        model.fit(*self._training())
        cands = self._candidates()
        CX = self._cand_X if cands is self._cands and self._cand_X is not None else (
            self.features.transform(cands, self.workload))
        self._model = model
        scores = model.predict(CX) + self.rng.uniform(0, 1e-9, len(cands))
        self._order = [cands[i] for i in np.argsort(-scores).tolist()]  # ints index fast
        self._pos = 0
        self._told_at_fit = len(self.history)

    def _candidates(self) -> list[Config]:
        if self._cands is not None:
            return self._cands
        pool = set(self.space.sample(self.pool, self.rng, exclude=self.history.keys()))
        ok = sorted((m for m in self.history.values() if m.ok), key=lambda m: m.value)
        for m in ok[:8]:  # local moves around the leaders
            pool.update(self.space.neighbours(m.config))
            pool.update(self._mutate(m.config, ok))
        return sorted((c for c in pool if self._fresh(c)), key=lambda c: c.key)  # reproducible

    def _mutate(self, config: Config, ok: list[Measurement], k: int = 16) -> list[Config]:
        """Crossover with other good configs plus random resets of one or two parameters."""
        out = []
        names = self.space.names
        for _ in range(k):
            d = dict(config)
            if len(ok) > 1 and self.rng.random() < 0.5:
                other = ok[int(self.rng.integers(min(len(ok), 16)))].config
                for n in names:
                    if self.rng.random() < 0.5:
                        d[n] = other[n]
            resets = min(len(names), int(self.rng.integers(1, 3)))
            for n in self.rng.choice(names, size=resets, replace=False):
                vals = self.space.param(str(n)).values
                d[str(n)] = vals[int(self.rng.integers(len(vals)))]
            c = Config(d)
            if c in self.space:
                out.append(c)
        return out

    def _stale(self) -> bool:
        told = len(self.history)
        new = told - self._told_at_fit
        return self._told_at_fit < 0 or new >= max(1, math.ceil(self.refit_every * told))

    def _ranked(self, taken: list[Config]) -> Config | None:
        """The model's best fresh config (``None``: every candidate is measured or pending)."""
        if self._stale():
            self._fit()
        while True:
            while self._pos < len(self._order) and not (
                    self._fresh(self._order[self._pos]) and self._order[self._pos] not in taken):
                self._pos += 1
            if self._pos < len(self._order):
                self._pos += 1
                return self._order[self._pos - 1]
            if self._cands is not None:
                return None
            self._fit()  # pool used up: draw a new one
            if not self._order:
                return None

    def _local(self, taken: list[Config]) -> Config | None:
        """The model's best fresh config near the leaders (``local_moves``)."""
        if self._stale() or self._model is None:
            self._fit()
        ok = sorted((m for m in self.history.values() if m.ok), key=lambda m: m.value)[:3]
        near = {c for m in ok
                for c in self.space.neighbours(m.config, hamming=self.local_moves == "any")
                if self._fresh(c) and c not in taken}
        if self.local_moves == "two":
            near.update(c for m in ok for c in self._two_steps(m.config)
                        if self._fresh(c) and c not in taken)
        elif self.local_moves == "region" and ok:
            near.update(c for c in self._region(ok[0].config)
                        if self._fresh(c) and c not in taken)
        return self._favourite(near)

    def _favourite(self, configs: Collection[Config]) -> Config | None:
        """The model's favourite of ``configs`` (fit first where stale; ``None``: none)."""
        if not configs:
            return None
        if self._stale() or self._model is None:
            self._fit()
        assert self._model is not None  # set by every fit
        cands = sorted(configs, key=lambda c: c.key)  # a set's order varies between processes
        scores = self._model.predict(np.vstack([self._row(c) for c in cands]))
        return cands[int(np.argmax(scores))]

    def _complete(self, taken: list[Config]) -> Config | None:
        """Once the best config has held for ``complete_local`` trials (after the initial
        design), its untried one-step neighbours, the model's favourite first (``None``: the
        best config is newer, or every neighbour of it is measured, pending or ``taken``)."""
        if self.complete_local is None or len(self.history) < self.n_init:
            return None
        held, best = 0, None
        for m in self.history.values():  # in the order told
            if m.ok and (best is None or m.value < best.value):
                held, best = 0, m
            else:
                held += 1
        if best is None or held < self.complete_local:
            return None
        return self._favourite([c for c in self.space.neighbours(best.config)
                                if self._fresh(c) and c not in taken])

    def _region(self, center: Config, limit: int = 2048, draws: int = 256) -> list[Config]:
        """Valid points in the trust region around ``center``: each ordered parameter within
        ``region_`` of its range (at least one step), between one and ``region_`` of the
        parameters changed. Enumerated spaces: all of them (a uniform sample of ``limit``
        where there are more); larger ones: ``draws`` uniform perturbations of ``center``."""
        params = self.space.params
        d = len(params)
        ci = np.array([p.index(center[p.name]) for p in params])
        size = np.array([len(p.values) for p in params])
        radius = np.array([max(1, round(self.region_ * (n - 1))) if p.ordered else n
                           for p, n in zip(params, size)])
        changes = max(1, round(self.region_ * d))
        if self._cands is not None:
            if self._idx is None:  # value index of each candidate, built once
                self._idx = np.empty((len(self._cands), d), dtype=np.int64)
                for j, p in enumerate(params):
                    pos = {v: i for i, v in enumerate(p.values)}
                    self._idx[:, j] = [pos[c[p.name]] for c in self._cands]
            diff = np.abs(self._idx - ci)
            moved = (diff > 0).sum(1)
            inside = np.flatnonzero((diff <= radius).all(1) & (moved >= 1) & (moved <= changes))
            if len(inside) > limit:
                inside = self.rng.choice(inside, size=limit, replace=False)
            return [self._cands[i] for i in inside]
        # each draw changes k (1..changes) parameters, picked uniformly, to a value in reach
        k = self.rng.integers(1, changes + 1, size=draws)
        picked = np.argsort(self.rng.random((draws, d)), axis=1).argsort(axis=1) < k[:, None]
        lo, hi = np.maximum(0, ci - radius), np.minimum(size - 1, ci + radius)
        new = lo + (self.rng.random((draws, d)) * (hi - lo + 1)).astype(np.int64)
        rows = np.unique(np.where(picked, new, ci), axis=0)
        out = []
        for row in rows[(rows != ci).any(1)]:
            c = Config({p.name: p.values[int(v)] for p, v in zip(params, row)})
            if c in self.space:
                out.append(c)
        return out

    def _adapt_region(self, improved: bool) -> None:
        """TuRBO's rule: the region doubles after 2 local successes in a row (a new best) and
        halves after ``max(4, parameters)`` failures in a row, between one step and the whole
        range."""
        run = self._region_run
        run[0], run[1] = (run[0] + 1, 0) if improved else (0, run[1] + 1)
        if run[0] >= 2:
            self.region_, run[0] = min(1.0, 2 * self.region_), 0
        elif run[1] >= max(4, len(self.space.params)):
            self.region_, run[1] = max(1e-3, self.region_ / 2), 0

    def _two_steps(self, config: Config) -> list[Config]:
        """Valid points one step away in each of two parameters (a uniform sample of
        ``_TWO_STEP_LIMIT`` of them where there are more)."""
        moves = [[(p.name, v) for v in p.neighbours(config[p.name])] for p in self.space.params]
        pairs = [(i, j) for i in range(len(moves)) for j in range(i + 1, len(moves))
                 if moves[i] and moves[j]]
        n = sum(len(moves[i]) * len(moves[j]) for i, j in pairs)
        out = []
        if n <= _TWO_STEP_LIMIT:
            steps = [(a, b) for i, j in pairs for a in moves[i] for b in moves[j]]
        else:
            w = np.array([len(moves[i]) * len(moves[j]) for i, j in pairs], dtype=float)
            picks = self.rng.choice(len(pairs), size=_TWO_STEP_LIMIT, p=w / w.sum())
            steps = [(moves[pairs[k][0]][int(self.rng.integers(len(moves[pairs[k][0]])))],
                      moves[pairs[k][1]][int(self.rng.integers(len(moves[pairs[k][1]])))])
                     for k in picks]
        for (pa, a), (pb, b) in steps:
            c = config.replace(**{pa: a, pb: b})
            if c in self.space:
                out.append(c)
        return out

    def _sampler_pick(self, taken: list[Config]) -> Config | None:
        """The sampler arm's next config, its sampler fit on this workload's trials (``None``
        once it has too long a history to stay cheap, or when it proposes nothing fresh)."""
        if len(self.history) >= _ARM_MAX_HISTORY:
            return None
        if self._sampler is None:
            from tunex.search._optuna import OptunaSearch

            self._sampler = OptunaSearch(self.space, seed=int(self.rng.integers(2**31)),
                                         variant=str(self.sampler_arm),
                                         source=list(self.history.values()))
            self._sampler.tell(list(self.history.values()))
        self._sampler.pending = self.pending | set(taken)  # what it must not propose again
        got = self._sampler.ask(1)
        c = got[0] if got else None
        return c if c is not None and self._fresh(c) and c not in taken else None

    def _model_pick(self, taken: list[Config]) -> Config | None:
        if not self.portfolio:
            return self._ranked(taken)
        draw = {a: self.rng.beta(1 + won, 1 + lost) for a, (won, lost) in self.arms_.items()}
        arm = max(draw, key=lambda a: draw[a])
        c = self._local(taken) if arm == "local" else (
            self._sampler_pick(taken) if arm == self.sampler_arm else None)
        if c is None:
            arm, c = "global", self._ranked(taken)
        if c is not None:
            self._arm[c] = arm
        return c

    def _tell(self, measurements: Sequence[Measurement]) -> None:
        if self._sampler is not None:
            self._sampler.tell(measurements)
        if not self._arm:
            return
        ok = np.sort([m.value for m in self.history.values() if m.ok])
        top = ok[max(0, int(0.1 * len(ok)) - 1)] if len(ok) else math.inf
        for m in measurements:
            arm = self._arm.pop(m.config, None)
            if arm is not None:
                self.arms_[arm][0 if m.ok and m.value <= top else 1] += 1
            if arm == "local" and self.local_moves == "region":
                self._adapt_region(m.ok and m.value <= ok[0])

    def _spread(self, taken: list[Config]) -> Config | None:
        """A fresh valid config far from everything measured, pending or ``taken``."""
        seen = self.history.keys() | self.pending | set(taken)
        pool = self.space.sample(1 if self.design == "random" else _DESIGN_POOL, self.rng,
                                 exclude=seen)
        small = _DESIGN_POOL >= _SMALL * self.space.size
        if self.design != "random" and pool and len(seen) == self.middle_at:
            middle = self._middle(pool, seen, exact=not small)
            if middle is not None:
                return middle
        if len(pool) <= 1 or not seen:
            return pool[0] if pool else None
        repel = seen
        best = self.best
        if (best is not None and self.near_best is not None
                and _DESIGN_POOL >= self.near_best * self.space.size):
            near = _NEAR_BEST * best.value
            repel = seen - {c for c, m in self.history.items() if m.ok and m.value <= near}
            if not repel:
                return pool[0]
        if self.design == "maxpro" or (self.design == "auto" and small):
            return pool[int(np.argmin(self._crowding(pool, list(repel))))]
        ref = self.space.encode(list(repel))
        P = self.space.encode(pool)
        lo = np.minimum(ref.min(0), P.min(0))
        span = np.maximum(ref.max(0), P.max(0)) - lo
        span[span == 0] = 1.0
        d = (((P[:, None, :] - ref[None, :, :]) / span) ** 2).sum(-1).min(1)
        return pool[int(np.argmax(d))]

    def _positions(self, configs: Sequence[Config]) -> np.ndarray:
        """Each config's value positions: an ordered parameter's scaled to [0, 1], a
        categorical one's its index."""
        return np.array([[p.index(c[p.name]) / max(len(p.values) - 1, 1) if p.ordered
                          else float(p.index(c[p.name])) for p in self.space.params]
                         for c in configs], dtype=np.float64)

    def _middle(self, pool: Sequence[Config], seen: Collection[Config],
                exact: bool) -> Config | None:
        """The pool config nearest the middle of the ordered ranges (least summed
        ``|position / (values - 1) - 0.5|`` over the ordered parameters of at least three
        values; ``None``: the space has none). ``exact`` (a pool that is a small share of the
        space seldom holds it): the config with each of those parameters at its middle value
        (one of two middles at random), the others as in the pool's nearest, unless that is
        no valid point or is ``seen``."""
        mid = [p.ordered and len(p.values) > 2 for p in self.space.params]
        if not any(mid):
            return None
        near = pool[int(np.argmin(np.abs(self._positions(pool)[:, mid] - 0.5).sum(1)))]
        if not exact:
            return near
        values = dict(near)
        for p, m in zip(self.space.params, mid):
            if m:
                n = len(p.values)
                values[p.name] = p.values[(n - 1) // 2 + (int(self.rng.integers(2))
                                                          if n % 2 == 0 else 0)]
        middle = Config(values)
        return middle if middle in self.space and middle not in seen else near

    def _crowding(self, pool: Sequence[Config], seen: Sequence[Config]) -> np.ndarray:
        """MaxPro's criterion for each pool config against ``seen`` (Joseph, Gul and Ba 2015),
        in log: ``log sum_j prod_p 1 / (d_p(x, s_j)^2 + eps_p)``, lowest the least crowded.
        An ordered parameter's ``d_p`` is the distance of the two values' positions in its
        list, scaled to [0, 1], and ``eps_p`` half a step, squared; a categorical one's is
        0 or 1 (same value or not), with ``eps_p = 1/4``. The product makes a config crowded
        by any one measured config that shares a value with it in every parameter; ``eps_p``
        keeps a shared value from counting as infinitely crowded (a small space's pool
        rarely holds a config new in every parameter)."""
        params = self.space.params

        ordered = np.array([p.ordered for p in params], dtype=bool)
        steps = np.array([max(len(p.values) - 1, 1) for p in params], dtype=np.float64)
        eps = np.where(ordered, (0.5 / steps) ** 2, 0.25)
        diff = self._positions(pool)[:, None, :] - self._positions(seen)[None, :, :]
        d2 = np.where(ordered, diff ** 2, (diff != 0).astype(np.float64))
        logs = -np.log(d2 + eps).sum(-1)
        top = logs.max(1, keepdims=True)
        return top[:, 0] + np.log(np.exp(logs - top).sum(1))

    def _lead(self, out: list[Config]) -> bool:
        """Whether the siblings' model, not their next best config, makes the next of a warm
        start's first proposals (``first="race"``): the model first, then one of theirs, then
        whichever of the two has measured the faster config (by count while either has none
        measured, as with many proposals in flight)."""
        best = {"queue": math.inf, "model": math.inf}
        count = {"queue": 0, "model": 0}
        for c, by in self._first_by.items():  # those in ``out`` too
            count[by] += 1
            m = self.history.get(c)
            if m is not None and m.ok:
                best[by] = min(best[by], m.value)
        if math.isinf(best["queue"]) or math.isinf(best["model"]):
            if self._model_starts:
                return count["model"] <= count["queue"]
            return count["model"] < count["queue"]
        return best["model"] < best["queue"]

    def _raced(self, config: Config, by: str) -> None:
        """Record that ``by`` (``"model"`` or ``"queue"``) proposed ``config`` in the race, in
        :attr:`_first_by` and in the transfer's account (``raced``)."""
        self._first_by[config] = by
        if self.transfer_ is not None:
            raced = self.transfer_.setdefault("raced", {"model": 0, "theirs": 0})
            raced["model" if by == "model" else "theirs"] += 1

    def _ask(self, n: int) -> list[Config] | None:
        out: list[Config] = []
        race = self._racing()
        while self._queue and len(out) < n:
            if race and self.proposals + len(out) >= self.n_init:
                self._queue.clear()  # the race is over: the evidence checks take it from here
                break
            if race and self._lead(out):
                pick = self._model_pick(out)  # the model of the siblings (and of what is told)
                if pick is not None:
                    self._raced(pick, "model")
                    out.append(pick)
                    continue
            first = self._queue.pop(0)
            if self._fresh(first) and first not in out:
                if race:
                    self._raced(first, "queue")
                out.append(first)
        share = self._share() if len(out) < n else 0.0
        while len(out) < n:
            c = self._complete(out)
            if c is not None:
                out.append(c)
                continue
            u = self.rng.random()
            if u < share:
                c = self._model_pick(out)
            elif u < share + self.explore:
                got = self.space.sample(1, self.rng, exclude=self.history.keys()
                                        | self.pending | set(out))
                c = got[0] if got else None
            if c is None:
                c = self._spread(out)
            if c is None:
                break
            out.append(c)
        self.proposals += len(out)
        return out or None
