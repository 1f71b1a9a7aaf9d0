"""A known acceptance model whose draft ranks its tokens unlike the target, as dumps and as an oracle.

Written independently of analysis.shapes.model / shape_search, so that recommend's answer can be
checked against the truth:

* the draft's probability of its rank-r token at a node of depth d is ``DRAFT[d, r]`` in every
  round (fixed, decreasing in r), so the engine's path-probability selection is the same every
  round and known;
* the target's top-1 at an expanded node of depth d whose own rank is q is the draft's rank-r
  candidate with probability ``HIT[d, q, r]`` (any recorded column), another token otherwise.
  ``HIT`` is *not* decreasing in r: at depth 0 the target takes the draft's rank 1 more often than
  its rank 0, and at depth 1 it depends on the parent's rank.

``true_value(cfg)`` is the exact expected accepted length of a config: the engine's tree built
with the draft's order, each node's probability the product of HIT along its rank path.
"""

from __future__ import annotations

import numpy as np

from replay.core.config import TreeConfig
from replay.engine.batch import MatrixStack, RoundBatch
from replay.testing.selection_ref import select_ref

COLS = 6
DRAFT = np.array(
    [
        [0.40, 0.26, 0.15, 0.09, 0.05, 0.03],
        [0.50, 0.21, 0.12, 0.08, 0.05, 0.02],
        [0.46, 0.29, 0.11, 0.07, 0.04, 0.02],
    ]
)
HIT = np.zeros((3, COLS, COLS))
HIT[0, :] = [0.26, 0.40, 0.12, 0.05, 0.02, 0.01]
HIT[1, :] = [0.36, 0.30, 0.10, 0.04, 0.02, 0.01]
HIT[1, 0] = [0.52, 0.20, 0.09, 0.05, 0.02, 0.01]
HIT[1, 1] = [0.28, 0.47, 0.10, 0.03, 0.01, 0.00]
HIT[2, :] = [0.31, 0.42, 0.10, 0.05, 0.02, 0.01]
# The recording expands every node of levels 0..2 (so every (d, q) row is observed) and keeps
# 4 children at the first two levels, 2 at the third: 4 + 16 + 32 = 52 nodes.
RECORDED = TreeConfig.from_lists([[4], [4] * 4, [2] * 16], [1, 4, 16])
MISS_BASE = 10**7  # target tokens that are no candidate


def draft_key(path: tuple[int, ...]) -> float:
    return float(sum(np.log(DRAFT[d, r]) for d, r in enumerate(path)))


def true_probability(path: tuple[int, ...]) -> float:
    prob, q = 1.0, 0
    for d, r in enumerate(path):
        prob *= HIT[min(d, 2), min(q, COLS - 1), r] if r < COLS else 0.0
        q = r
    return prob


def engine_tree(cfg: TreeConfig) -> list[tuple[int, ...]]:
    """Rank paths the engine builds: per level, the topHead nodes of highest draft path probability
    (ties: rank_ties (replay/core/selection.py)), each keeping topKSpec children, in tree order."""
    out, level = [], [()]
    for i in range(cfg.gamma):
        order = select_ref([draft_key(p) for p in level], cfg.top_head[i])
        level = [level[j] + (r,) for j, w in zip(order, cfg.top_k_spec[i]) for r in range(w)]
        out += level
    return out


def true_value(cfg: TreeConfig) -> float:
    return sum(true_probability(p) for p in engine_tree(cfg))


def synth_batch(rounds: int, seed: int) -> RoundBatch:
    """``rounds`` rounds recorded with RECORDED (all layout, log-prob scores), one RoundBatch."""
    rng = np.random.default_rng(seed)
    cfg = RECORDED
    r_all = np.arange(rounds)
    steps, _top1_rows = [], []
    level = [()]  # rank paths of the current level, tree order
    n_all = 1 + cfg.num_nodes
    top1 = MISS_BASE + rng.integers(0, 10**6, size=(n_all, rounds))
    start = 0  # tree-order id of the level's first node
    for i in range(cfg.gamma):
        order = select_ref([draft_key(p) for p in level], cfg.top_head[i])
        h = len(order)
        # distinct tokens within a row: token = random * COLS + rank
        ids = (rng.integers(0, 10**5, size=(h, COLS, rounds)) * COLS + np.arange(COLS)[None, :, None]).astype(np.int64)
        logp = np.broadcast_to(np.log(DRAFT[i])[None, :, None], (h, COLS, rounds)).astype(np.float32).copy()
        for slot, j in enumerate(order):
            q = level[j][-1] if level[j] else 0
            p = HIT[i, q]
            u = rng.random(rounds)
            rank = np.searchsorted(np.cumsum(p), u, side="right")  # COLS (or more) = a miss
            hit = rank < COLS
            top1[start + j, hit] = ids[slot, np.minimum(rank, COLS - 1), r_all][hit]
        steps.append(MatrixStack(ids, logp))
        next_level = [level[j] + (r,) for j, w in zip(order, cfg.top_k_spec[i]) for r in range(w)]
        start += len(level)
        level = next_level
    val = top1[:, None, :]
    keys = np.stack([100 + 8 * r_all, 116 + 8 * r_all]).astype(np.int64)
    roots = rng.integers(0, 10**5, size=rounds).astype(np.int64)
    return RoundBatch(keys, roots, tuple(steps), MatrixStack(val), "all", None, r_all.astype(np.int64))
