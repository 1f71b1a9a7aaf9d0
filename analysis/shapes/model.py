"""Acceptance model for tree-shape search, estimated from replayed dumps.

``p[d, q, r]`` = P(the target's top-1 at an accepted node u of depth d, whose own draft rank is q
(the root: q = 0), equals the draft's rank-r candidate at u). It is estimated only from what the
engine's selection exposes: nodes the acceptance walk reached (the root and the accepted nodes)
that were expanded (their full candidate row is recorded) and have a known target top-1. The
estimate is the raw frequency of each cell: no smoothing across ranks, because a target that
prefers the draft's rank 1 over its rank 0 is a fact to keep, not noise to flatten.

A node exists only in rounds whose draft ran its step (a round may stop early: fewer draft steps
than gamma). ``go_on[d]`` = P(the draft runs step d | the walk reached depth d; steps counted from 0 as draft_step_d is, step d
making the nodes of depth d + 1), estimated from
the rounds whose acceptance walk reached depth d (``continuation``; row 0 is 1: step 0 always
runs). A node's value is the product of ``factor = go_on[d] · p[d, q, r]`` along its path
(``node_factors``): by the chain rule over depths, the probability that the node is drafted and
accepted. Without early stops go_on is 1 and the factor is the acceptance.

Beside acceptance, the model keeps the draft's own ordering: ``draft_logp[d, q, r]``, the mean
recorded draft log-probability of the rank-r candidate at expanded nodes of (d, q). The engine
expands nodes by *draft* path probability, so the search ranks a level's nodes by the sum of these
along the rank path, not by acceptance. Assumptions, pooling and refusals: docs/shape-search.md.

Everything is computed from count tables per *round group* (consecutive rounds of one dump):
``ShapeStats`` (analysis.shapes.counts). The bootstrap resamples groups (a multinomial draw of group weights) and
re-estimates from the weighted tables, so nothing is re-run per resample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from analysis.tables.intervals import wilson

from .counts import ShapeStats, fit

DEFAULT_MIN_COUNT = 30
ORDER_DECIMALS = 9  # draft path log-probs equal to this many decimals tie (ties: rank_ties (replay/core/selection.py))


# --------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True, eq=False)
class ShapeModel:
    p: np.ndarray  # [depths, cols, cols] float64: p[d, q, r] (raw frequencies; pooled rows where thin)
    lo: np.ndarray  # [depths, cols, cols] float64: Wilson 95% lower bound of the cell used
    hi: np.ndarray  # [depths, cols, cols] float64: Wilson 95% upper bound
    visits: np.ndarray  # [depths, cols] int64: visits behind row (d, q) (the depth's total when pooled)
    pooled: np.ndarray  # [depths, cols] bool: row (d, q) pooled over q (fewer than min_count visits)
    extrapolated: np.ndarray  # [depths] bool: depth without data, copied from the deepest estimated depth
    num_rounds: int
    min_count: int
    source: ShapeStats | None = None  # kept for the bootstrap and the per-depth summary
    draft_logp: np.ndarray | None = None  # [depths, cols, cols] float64 mean draft log-prob; None: unknown
    go_on: np.ndarray | None = None  # [depths] float64 continuation (module docstring); None: no early stop
    factors: np.ndarray = field(init=False, repr=False)  # [depths, cols, cols] node_factors(p, go_on)

    def __post_init__(self) -> None:
        if self.p.ndim != 3 or self.p.shape[1] != self.p.shape[2]:
            raise ValueError(f"p: expected [depths, cols, cols], got {self.p.shape}")
        if np.any(self.p < 0) or np.any(self.p > 1):
            raise ValueError("p: probabilities must lie in [0, 1]")
        if self.draft_logp is not None and self.draft_logp.shape != self.p.shape:
            raise ValueError(f"draft_logp: expected {self.p.shape}, got {self.draft_logp.shape}")
        go_on = np.ones(self.p.shape[0]) if self.go_on is None else np.asarray(self.go_on, dtype=np.float64)
        if go_on.shape != self.p.shape[:1] or np.any(go_on < 0) or np.any(go_on > 1) or go_on[0] != 1:
            raise ValueError(f"go_on: expected [{self.p.shape[0]}] probabilities with go_on[0] = 1, got {go_on}")
        object.__setattr__(self, "go_on", go_on)
        object.__setattr__(self, "factors", node_factors(self.p, go_on))

    @property
    def cols(self) -> int:
        return int(self.p.shape[2])

    @property
    def depths(self) -> int:
        return int(self.p.shape[0])

    @property
    def supported_depth(self) -> int:
        """Deepest tree whose every factor is estimated from data (not extrapolated)."""
        bad = np.flatnonzero(self.extrapolated)
        return int(bad[0]) if bad.shape[0] else self.depths

    def factor(self, depth: int, own_rank: int, rank: int) -> float:
        """go_on[d] · p[d, q, r] (node_factors); depths beyond the table reuse the deepest row, ranks
        beyond the columns are 0."""
        if rank >= self.cols:
            return 0.0
        d = min(depth, self.depths - 1)
        q = min(own_rank, self.cols - 1)
        return float(self.factors[d, q, rank])

    def draft_step(self, depth: int, own_rank: int, rank: int) -> float:
        """The draft's mean log-probability of the rank-r candidate at a (d, q) node (order key step)."""
        if self.draft_logp is None:
            raise ValueError("this model has no draft log-probabilities")
        if rank >= self.cols:
            return -np.inf
        return float(self.draft_logp[min(depth, self.depths - 1), min(own_rank, self.cols - 1), rank])

    def is_extrapolated(self, depth: int) -> bool:
        return depth >= self.depths or bool(self.extrapolated[depth])

    def path_probability(self, path: Sequence[int]) -> float:
        """Product of factors along a rank path (root excluded): P(the node is drafted and every node
        on its path is accepted), the node's expected contribution to the accepted length."""
        prob, q = 1.0, 0
        for d, r in enumerate(path):
            prob *= self.factor(d, q, r)
            q = r
        return prob

    def acceptance_probability(self, path: Sequence[int]) -> float:
        """Product of p along a rank path: P(every node on it is accepted | the node is drafted), for
        trees known to hold the node (each round's recorded tree)."""
        prob, q = 1.0, 0
        for d, r in enumerate(path):
            if r >= self.cols:
                return 0.0
            prob *= float(self.p[min(d, self.depths - 1), min(q, self.cols - 1), r])
            q = r
        return prob

    def order_key(self, path: Sequence[int]) -> float:
        """How the engine ranks a node among its level (higher first): the draft's path log-probability
        from ``draft_logp``, rounded so that equal sums tie; without draft data, the acceptance
        probability (the model's own order, an assumption)."""
        if self.draft_logp is None:
            return self.path_probability(path)
        total, q = 0.0, 0
        for d, r in enumerate(path):
            total += self.draft_step(d, q, r)
            q = r
        return round(total, ORDER_DECIMALS) if np.isfinite(total) else total

    def uses_pooled(self, path: Sequence[int]) -> bool:
        """Whether a node's probability uses a row pooled over parent rank."""
        q = 0
        for d, r in enumerate(path):
            if d < self.depths and self.pooled[d, min(q, self.cols - 1)]:
                return True
            q = r
        return False


def pava_nonincreasing(y: np.ndarray) -> np.ndarray:
    """[k] float64 → the closest (least squares, equal weights) non-increasing sequence.

    Not used by the estimator (a non-monotone row is kept as measured); test models use it.
    """
    if y.ndim != 1:
        raise ValueError(f"pava: expected a 1-D array, got {y.shape}")
    blocks: list[list[float]] = []  # [sum, count]
    for v in y:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    return np.concatenate([np.full(int(c), s / c) for s, c in blocks])


def estimate_cells(
    n: np.ndarray, k: np.ndarray, min_count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The estimator on tables with any leading (bootstrap) axes.

    n: [..., depths, cols] visits; k: [..., depths, cols, cols] hits. Returns (p [..., D, C, C] raw
    frequencies with thin rows pooled over q, n_used [..., D, C], pooled [..., D, C] bool,
    source depth [..., D] int64: the depth whose row each depth uses — itself, or the deepest
    earlier depth with data when it has fewer than ``min_count`` visits in all).
    """
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    n_depth, k_depth = n.sum(axis=-1), k.sum(axis=-2)  # [..., D], [..., D, C]: pooled over q
    pooled = n < min_count
    n_used = np.where(pooled, n_depth[..., None], n)
    k_used = np.where(pooled[..., None], k_depth[..., None, :], k)
    p = k_used / np.maximum(n_used, 1e-300)[..., None]
    depths = n.shape[-2]
    has_data = n_depth >= min_count
    has_data[..., 0] = True  # depth 0 is estimated from whatever there is (the root is always visited)
    src = np.where(has_data, np.arange(depths), 0)
    src = np.maximum.accumulate(src, axis=-1)
    p = np.take_along_axis(p, src[..., :, None, None], axis=-3)
    n_used = np.take_along_axis(n_used, src[..., :, None], axis=-2)
    pooled = np.take_along_axis(pooled, src[..., :, None], axis=-2)
    return np.clip(p, 0.0, 1.0), n_used, pooled, src


def draft_order_table(stats: ShapeStats, min_count: int) -> np.ndarray | None:
    """[depths, cols, cols] mean draft log-prob per cell; rows with fewer than ``min_count`` recorded
    rows use their depth's pooled mean, depths without rows the deepest one with; None when the
    dumps hold no scores at all. Cells never recorded are -inf (the engine could not rank them)."""
    total, count = stats.draft_sum, stats.draft_count
    if not count.any():
        return None
    rows = count.max(axis=-1)  # [D, C] recorded rows per (d, q) (column 0 is always finite)
    thin = rows < min_count
    t = np.where(thin[..., None], total.sum(axis=1)[:, None, :], total)
    c = np.where(thin[..., None], count.sum(axis=1)[:, None, :], count)
    mean = np.where(c > 0, t / np.maximum(c, 1), -np.inf)
    has = count.sum(axis=(1, 2)) > 0
    src = np.maximum.accumulate(np.where(has, np.arange(stats.depths), 0))
    return mean[src]


def continuation(went_on: np.ndarray, stopped: np.ndarray, depths: int) -> np.ndarray:
    """go_on [..., depths] float64 from step tables with any leading (bootstrap) axes.

    went_on, stopped: [..., S] (analysis.shapes.counts.step_tables: column i is "after i + 1 draft
    steps"). Row d (d >= 1) is went_on / (went_on + stopped) of column d - 1: of the rounds whose
    walk reached depth d and whose config allowed another step, the share that drafted step d.
    Only those rounds matter: in a round whose walk stopped above depth d, step d adds nothing
    whether it runs or not. Row 0 is 1 (step 0 always runs). A row without such rounds (deeper than
    every recording's gamma, or never reached) reuses the deepest row with some, as acceptance
    reuses its deepest estimated depth; none at all: 1.
    """
    went, at_risk = step_rows(went_on, stopped, depths)
    go = np.where(at_risk > 0, went / np.maximum(at_risk, 1e-300), 1.0)
    has = at_risk > 0
    has[..., 0] = True
    src = np.maximum.accumulate(np.where(has, np.arange(depths), 0), axis=-1)
    return np.take_along_axis(go, src, axis=-1)


def step_rows(went_on: np.ndarray, stopped: np.ndarray, depths: int) -> tuple[np.ndarray, np.ndarray]:
    """(went [..., depths], could [..., depths]) float64 per model row: row d (d >= 1) holds the rounds
    whose walk reached depth d that drafted step d, and all those whose config allowed step
    d (went + stopped of step-table column d - 1); row 0 and rows beyond the tables hold 0."""
    lead = went_on.shape[:-1]
    went, stop = np.zeros(lead + (depths,)), np.zeros(lead + (depths,))
    m = min(depths - 1, went_on.shape[-1])
    went[..., 1 : 1 + m] = went_on[..., :m]
    stop[..., 1 : 1 + m] = stopped[..., :m]
    return went, went + stop


def node_factors(p: np.ndarray, go_on: np.ndarray) -> np.ndarray:
    """The one rule for a node's value: factor[..., d, q, r] = go_on[..., d] · p[..., d, q, r], the
    probability that the rank-r candidate of an accepted (d, q) node is drafted and is the target's
    top-1. p: [..., D, C, C]; go_on: [..., D]."""
    return p * go_on[..., :, None, None]


def model_from_stats(stats: ShapeStats, min_count: int = DEFAULT_MIN_COUNT, depths: int | None = None) -> ShapeModel:
    """Frequencies per (d, q, r); rows with fewer than ``min_count`` visits use their depth's pooled
    row; depths with fewer than ``min_count`` visits in all (beyond the first) copy the deepest
    estimated depth and are flagged ``extrapolated`` (the search refuses them unless told to
    extrapolate). ``depths`` pads or crops the table (deeper = extrapolated). The continuation
    ``go_on`` comes from the step tables (``continuation``)."""
    depths = stats.depths if depths is None else depths
    d_have = min(depths, stats.depths)
    n_tab = fit(stats.n.sum(axis=0)[:d_have], (depths, stats.cols))
    k_tab = fit(stats.k.sum(axis=0)[:d_have], (depths, stats.cols, stats.cols))
    p, n_used, pooled, src = estimate_cells(n_tab, k_tab, min_count)
    k_used = p * n_used[..., None]
    lo, hi = wilson(k_used, n_used[..., None])
    extrapolated = src != np.arange(depths)
    order = draft_order_table(stats, min_count)
    if order is not None:
        order = order[np.minimum(np.arange(depths), stats.depths - 1)]  # deeper than the dumps: the deepest
    go_on = continuation(stats.went_on.sum(axis=0), stats.stopped.sum(axis=0), depths)
    return ShapeModel(
        p, lo, hi, n_used.astype(np.int64), pooled, extrapolated, stats.num_rounds, min_count, stats, order, go_on
    )


# --------------------------------------------------------------------------------------------
# Bootstrap


@dataclass(frozen=True, eq=False)
class Bootstrap:
    """Resampled acceptance tables: the model re-estimated under ``count`` group resamples."""

    p: np.ndarray  # [B, depths, cols, cols] float64 acceptance
    go_on: np.ndarray | None = None  # [B, depths] float64 continuation; None: 1 (no early stop)

    def __len__(self) -> int:
        return int(self.p.shape[0])

    def path_values(self, paths: Sequence[Sequence[int]]) -> np.ndarray:
        """[B] Σ over ``paths`` of the path probability (ShapeModel.path_probability) under each resample."""
        if self.go_on is None:
            return path_values(self.p, paths)
        return path_values(node_factors(self.p, self.go_on), paths)

    def acceptance_values(self, paths: Sequence[Sequence[int]]) -> np.ndarray:
        """[B] Σ over ``paths`` of ShapeModel.acceptance_probability under each resample."""
        return path_values(self.p, paths)


def bootstrap(model: ShapeModel, count: int, seed: int = 0) -> Bootstrap | None:
    """``count`` resamples of the round groups (with replacement), the model re-estimated from the
    weighted count tables with the same settings. None without data or resamples."""
    src = model.source
    if src is None or count <= 0 or src.num_rounds == 0:
        return None
    rng = np.random.default_rng(seed)
    g = src.groups
    weights = rng.multinomial(g, np.full(g, 1.0 / g), size=count).astype(np.float64)  # [B, G]
    d_have = min(model.depths, src.depths)
    n = np.zeros((count, model.depths, src.cols))
    k = np.zeros((count, model.depths, src.cols, src.cols))
    n[:, :d_have] = (weights @ src.n[:, :d_have].reshape(g, -1)).reshape(count, d_have, src.cols)
    k[:, :d_have] = (weights @ src.k[:, :d_have].reshape(g, -1)).reshape(count, d_have, src.cols, src.cols)
    p, _, _, _ = estimate_cells(n, k, model.min_count)
    went = weights @ src.went_on.astype(np.float64)  # [B, S]
    stop = weights @ src.stopped.astype(np.float64)
    return Bootstrap(p, continuation(went, stop, model.depths))


def path_values(p: np.ndarray, paths: Sequence[Sequence[int]]) -> np.ndarray:
    """Σ over rank paths of Π p[..., d, q, r] along each path; p: [..., D, C, C] → [...] (an
    acceptance table, or node_factors of one).

    Depths beyond the table reuse the deepest row and ranks beyond the columns are 0, as
    ShapeModel.factor does.
    """
    depths, cols = p.shape[-3], p.shape[-1]
    total = np.zeros(p.shape[:-3])
    for path in paths:
        prob = np.ones(p.shape[:-3])
        q = 0
        for d, r in enumerate(path):
            if r >= cols:
                prob = prob * 0.0
                break
            prob = prob * p[..., min(d, depths - 1), min(q, cols - 1), r]
            q = r
        total = total + prob
    return total
