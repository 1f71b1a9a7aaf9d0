"""Acceptance model for tree-shape search, estimated from replayed dumps.

``p[d, q, r]`` = P(the target's top-1 at an accepted node u of depth d, whose own draft rank is q
(the root: q = 0), equals the draft's rank-r candidate at u). It is estimated only from nodes the
acceptance walk actually reached (the root and the accepted nodes) that have a recorded candidate
row (expanded nodes) and a known target top-1: a node off the accepted path has a prefix the
target rejected, so its statistics answer a different question. Ranks at or beyond the recorded
column count are misses. See docs/shape-search.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from replay.replayer import RoundResult
from replay.vocab import PAD_TOKEN

MISS = -1  # hit_rank of a visit whose target top-1 is not among the recorded candidates
DEFAULT_MIN_COUNT = 30
Z95 = 1.959963984540054


@dataclass(frozen=True, eq=False)
class Visits:
    """One entry per (round, reached expanded node): the raw material of the model."""

    round_index: np.ndarray  # [V] int64, index into the rounds used
    depth: np.ndarray  # [V] int64, depth of the visited node (root 0)
    own_rank: np.ndarray  # [V] int64, the node's own draft rank (root 0)
    hit_rank: np.ndarray  # [V] int64, draft rank of the target's top-1 among the node's candidates, MISS if absent
    num_rounds: int
    cols: int  # recorded candidate columns (widest row seen)
    max_tree_depth: int  # deepest recorded tree (draft steps)

    def __post_init__(self) -> None:
        v = self.round_index.shape
        for name in ("depth", "own_rank", "hit_rank"):
            arr = getattr(self, name)
            if arr.shape != v or arr.ndim != 1:
                raise ValueError(f"Visits.{name}: expected shape {v}, got {arr.shape}")


def collect_visits(results: Sequence[RoundResult]) -> Visits:
    """Visits of the root and the accepted nodes that were expanded and have a target top-1."""
    rounds, depth, own, hit = [], [], [], []
    cols, max_depth = 1, 0
    for k, res in enumerate(results):
        tree = res.tree
        order = tree.expanded_order
        row_of = {int(u): j for j, u in enumerate(order)}  # node id → row of rebuilt.candidates
        cand = res.rebuilt.candidates
        cols = max(cols, int(cand.shape[1]))
        max_depth = max(max_depth, tree.num_steps)
        for u in (0,) + tuple(res.acceptance.accepted_nodes):
            j = row_of.get(u)
            want = int(res.target_top1[u])
            if j is None or want == PAD_TOKEN:
                continue  # no candidate row (a leaf) or no target row: nothing to learn here
            match = np.flatnonzero(cand[j] == want)
            rounds.append(k)
            depth.append(int(tree.depths[u]))
            own.append(0 if u == 0 else int(tree.ranks[u]))
            hit.append(int(match[0]) if match.shape[0] else MISS)
    as_int = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    return Visits(as_int(rounds), as_int(depth), as_int(own), as_int(hit), len(results), cols, max_depth)


@dataclass(frozen=True, eq=False)
class ShapeModel:
    p: np.ndarray  # [depths, cols, cols] float64: p[d, q, r], rows non-increasing in r
    lo: np.ndarray  # [depths, cols, cols] float64: Wilson 95% lower bound of the raw cell
    hi: np.ndarray  # [depths, cols, cols] float64: Wilson 95% upper bound
    visits: np.ndarray  # [depths, cols] int64: visits behind row (d, q) (the depth's total when pooled)
    pooled: np.ndarray  # [depths, cols] bool: row (d, q) pooled over q (fewer than min_count visits)
    extrapolated: np.ndarray  # [depths] bool: depth copied from the deepest estimated depth
    num_rounds: int
    min_count: int
    source: Visits | None = None  # kept for the bootstrap

    def __post_init__(self) -> None:
        if self.p.ndim != 3 or self.p.shape[1] != self.p.shape[2]:
            raise ValueError(f"p: expected [depths, cols, cols], got {self.p.shape}")
        if np.any(self.p < 0) or np.any(self.p > 1):
            raise ValueError("p: probabilities must lie in [0, 1]")

    @property
    def cols(self) -> int:
        return int(self.p.shape[2])

    @property
    def depths(self) -> int:
        return int(self.p.shape[0])

    def factor(self, depth: int, own_rank: int, rank: int) -> float:
        """p[d, q, r]; depths beyond the table reuse the deepest row, ranks beyond the columns are 0."""
        if rank >= self.cols:
            return 0.0
        d = min(depth, self.depths - 1)
        q = min(own_rank, self.cols - 1)
        return float(self.p[d, q, rank])

    def is_extrapolated(self, depth: int) -> bool:
        return depth >= self.depths or bool(self.extrapolated[depth])

    def path_probability(self, path: Sequence[int]) -> float:
        """Product of factors along a rank path (root excluded): P(every node on it is accepted)."""
        prob, q = 1.0, 0
        for d, r in enumerate(path):
            prob *= self.factor(d, q, r)
            q = r
        return prob


def wilson(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95% Wilson score interval; k, n broadcastable float arrays; (0, 1) where n == 0."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    safe = np.maximum(n, 1e-300)
    ph = k / safe
    z2 = Z95**2
    den = 1 + z2 / safe
    mid = (ph + z2 / (2 * safe)) / den
    half = Z95 * np.sqrt(ph * (1 - ph) / safe + z2 / (4 * safe**2)) / den
    lo = np.where(n > 0, np.clip(mid - half, 0, 1), 0.0)
    hi = np.where(n > 0, np.clip(mid + half, 0, 1), 1.0)
    return lo, hi


def pava_nonincreasing(y: np.ndarray) -> np.ndarray:
    """[k] float64 → the closest (least squares, equal weights) non-increasing sequence.

    Equal weights are right here: every rank of one row shares the same visits. Pooling keeps the
    row's sum, so a row stays a sub-probability vector.
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


def count_cells(visits: Visits, weights: np.ndarray | None, depths: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(n [depths, cols] float64 visits per (d, q), k [depths, cols, cols] float64 hits per (d, q, r)).

    weights: [num_rounds] float64 multiplicity per round (bootstrap), None for all ones.
    """
    w = np.ones(visits.round_index.shape[0]) if weights is None else weights[visits.round_index]
    keep = (visits.depth < depths) & (visits.own_rank < cols)
    d, q, r, w = visits.depth[keep], visits.own_rank[keep], visits.hit_rank[keep], w[keep]
    n = np.zeros((depths, cols))
    np.add.at(n, (d, q), w)
    k = np.zeros((depths, cols, cols))
    hit = (r != MISS) & (r < cols)
    np.add.at(k, (d[hit], q[hit], r[hit]), w[hit])
    return n, k


def estimate_model(
    visits: Visits, min_count: int = DEFAULT_MIN_COUNT, weights: np.ndarray | None = None, depths: int | None = None
) -> ShapeModel:
    """Frequencies per (d, q, r); rows with fewer than ``min_count`` visits use their depth's pooled
    row; each row made non-increasing in r (PAVA); depths with fewer than ``min_count`` visits in
    all (beyond the first) copy the deepest estimated depth and are flagged ``extrapolated``.

    weights: [num_rounds] float64 round multiplicities (bootstrap resampling), None = all ones.
    """
    if weights is not None and weights.shape != (visits.num_rounds,):
        raise ValueError(f"weights: expected shape ({visits.num_rounds},), got {weights.shape}")
    depths = max(1, visits.max_tree_depth) if depths is None else depths
    cols = visits.cols
    n, k = count_cells(visits, weights, depths, cols)
    n_depth, k_depth = n.sum(axis=1), k.sum(axis=1)  # [depths], [depths, cols]: pooled over q
    pooled = n < min_count
    n_used = np.where(pooled, n_depth[:, None], n)
    k_used = np.where(pooled[:, :, None], k_depth[:, None, :], k)
    raw = k_used / np.maximum(n_used, 1e-300)[:, :, None]
    lo, hi = wilson(k_used, n_used[:, :, None])
    extrapolated = np.zeros(depths, dtype=bool)
    last = 0
    for d in range(depths):
        if d > 0 and n_depth[d] < min_count:
            extrapolated[d] = True
            raw[d], lo[d], hi[d], n_used[d] = raw[last], lo[last], hi[last], n_used[last]
        else:
            last = d
    p = np.stack([np.stack([pava_nonincreasing(raw[d, q]) for q in range(cols)]) for d in range(depths)])
    return ShapeModel(
        np.clip(p, 0.0, 1.0), lo, hi, n_used.astype(np.int64), pooled, extrapolated, visits.num_rounds, min_count, visits
    )


def model_from_hits(hit: np.ndarray, cols: int | None = None) -> ShapeModel:
    """The known model behind replay.synth: hit [depths, cols] float64 → p[d, q, r] = hit[d, r]."""
    hit = np.asarray(hit, dtype=np.float64)
    if hit.ndim != 2:
        raise ValueError(f"hit: expected [depths, cols], got {hit.shape}")
    cols = hit.shape[1] if cols is None else cols
    h = hit[:, :cols]
    p = np.repeat(h[:, None, :], cols, axis=1)
    z = np.zeros(hit.shape[0], dtype=bool)
    return ShapeModel(
        p, p.copy(), p.copy(), np.zeros((hit.shape[0], cols), np.int64), np.zeros((hit.shape[0], cols), bool), z, 0, 0
    )


def bootstrap_models(model: ShapeModel, count: int, seed: int = 0) -> list[ShapeModel]:
    """Re-estimate ``count`` times from rounds resampled with replacement (same settings)."""
    if model.source is None or model.num_rounds == 0:
        return []
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        draw = rng.integers(0, model.num_rounds, model.num_rounds)
        weights = np.bincount(draw, minlength=model.num_rounds).astype(np.float64)
        out.append(estimate_model(model.source, model.min_count, weights, model.depths))
    return out
