"""Build one round's draft tree exactly by the tree config: draft steps 0 and i >= 1, head
selection by path probability, and gammaThreshold, as docs/live-harness.md ("One round",
"gammaThreshold") states them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from replay.core.config import TreeConfig
from replay.core.selection import select_top
from replay.core.tree import Tree, tree_layout
from replay.core.vocab import NO_PARENT, NO_RANK
from replay.io.dumpwrite import StepRecord

from .checks import check_shape
from .forward import LAST_ROW, cache_length, causal_visible, forward_tokens, to_device
from .models.load import LiveModel
from .scores import log_probs, top_candidates


@dataclass(frozen=True, eq=False)
class DraftedTree:
    tree: Tree
    steps: tuple[StepRecord, ...]  # one per draft step run; rows in selection order, parents = node ids
    cached_nodes: tuple[int, ...]  # nodes whose draft KV entries follow the committed tokens, root first
    stopped_early: bool  # gammaThreshold ended drafting before gamma steps


@dataclass(frozen=True, eq=False)
class _Partial:
    """The tree so far, in tree order (a growing prefix of the final Tree's arrays)."""

    tokens: np.ndarray  # [m] int64
    parents: np.ndarray  # [m] int64
    depths: np.ndarray  # [m] int64
    ranks: np.ndarray  # [m] int64
    logprobs: np.ndarray  # [m] float64 path log-probability

    @classmethod
    def root(cls, token: int) -> _Partial:
        one = lambda v: np.array([v], dtype=np.int64)  # noqa: E731
        return cls(one(token), one(NO_PARENT), one(0), one(NO_RANK), np.zeros(1))

    def grow(self, heads: np.ndarray, ids: np.ndarray, scores: np.ndarray, widths: Sequence[int]) -> _Partial:
        """Append each head's first ``widths[j]`` candidates as children (heads [h], ids/scores [h, k])."""
        check_shape("heads", heads, (len(widths),), np.dtype(np.int64))
        check_shape("ids", ids, (len(widths), None), np.dtype(np.int64))
        check_shape("scores", scores, ids.shape, np.dtype(np.float32))
        rows = [(j, r) for j, w in enumerate(widths) for r in range(w)]
        j_idx = np.array([j for j, _ in rows], dtype=np.int64)
        r_idx = np.array([r for _, r in rows], dtype=np.int64)
        parents = heads[j_idx]
        # Sum in float64 from the recorded float32 scores so an offline replay recomputes the same order.
        lp = self.logprobs[parents] + scores[j_idx, r_idx].astype(np.float64)
        return _Partial(
            np.concatenate([self.tokens, ids[j_idx, r_idx]]),
            np.concatenate([self.parents, parents]),
            np.concatenate([self.depths, self.depths[parents] + 1]),
            np.concatenate([self.ranks, r_idx]),
            np.concatenate([self.logprobs, lp]),
        )

    def level(self, depth: int) -> np.ndarray:
        return np.flatnonzero(self.depths == depth)


def select_heads(path_logprobs: np.ndarray, level_nodes: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` most probable nodes of a level, most probable first (ties: rank_ties (replay/core/selection.py)).

    path_logprobs: [m] float64 over all nodes; level_nodes: [l] int64 node ids (increasing)
    Returns [count] int64 node ids in selection order. The offline rule (replay.core.selection) on the
    CPU copy of the path log-probs: a few nodes per step, so the replay recomputes the same order.
    """
    check_shape("path_logprobs", path_logprobs, (None,), np.dtype(np.float64))
    check_shape("level_nodes", level_nodes, (None,), np.dtype(np.int64))
    order = select_top(path_logprobs[level_nodes], count, ties=level_nodes)
    return level_nodes[np.asarray(order, dtype=np.int64)]


def draft_tree(
    draft: LiveModel, cache: Any, committed: Sequence[int], config: TreeConfig, record_k: int
) -> DraftedTree:
    """Draft one round's tree; the root is ``committed[-1]``. Leaves ``cache`` holding every committed
    token plus the KV of every expanded node (``cached_nodes``), for ``draft_keep_indices``."""
    if record_k < config.max_width:
        raise ValueError(f"record_k = {record_k} is below the widest topKSpec entry {config.max_width}")
    root_pos = len(committed) - 1
    partial = _Partial.root(int(committed[-1]))
    cached: list[int] = [0]
    steps: list[StepRecord] = []
    for step in range(config.gamma):
        if step == 0:
            heads = np.zeros(1, dtype=np.int64)
            lp = _catch_up(draft, cache, committed)
        else:
            heads = select_heads(partial.logprobs, partial.level(step), config.top_head[step])
            lp = _expand(draft, cache, partial, heads, cached, root_pos)
            cached.extend(int(h) for h in heads)
        ids, scores = top_candidates(lp, record_k)
        steps.append(StepRecord(ids, scores, heads.copy()))
        partial = partial.grow(heads, ids, scores, config.top_k_spec[step])
        if step + 1 < config.gamma and _below_threshold(partial, step + 1, config.gamma_threshold):
            return _finish(partial, steps, cached, stopped_early=True)
    return _finish(partial, steps, cached, stopped_early=False)


def _below_threshold(partial: _Partial, depth: int, threshold: float) -> bool:
    best = float(partial.logprobs[partial.level(depth)].max())
    return threshold > 0 and math.exp(best) < threshold


def _catch_up(draft: LiveModel, cache: Any, committed: Sequence[int]) -> torch.Tensor:
    """Feed the committed tokens the draft cache lacks (root included); [1, V] log-probs at the root
    (the output layer runs on the root's row only)."""
    past = cache_length(cache)
    tokens = to_device(np.asarray(committed[past:], dtype=np.int64), draft.device)  # [n] int64, n = len - past
    positions = torch.arange(past, len(committed), dtype=torch.int64, device=draft.device)  # [n] int64
    logits = forward_tokens(  # [1, V] float32: the root's row only
        draft, cache, tokens, positions, causal_visible(past, tokens.shape[0], draft.device), LAST_ROW
    )
    return log_probs(logits)


def _expand(
    draft: LiveModel, cache: Any, partial: _Partial, heads: np.ndarray, cached: list[int], root_pos: int
) -> torch.Tensor:
    """One batched draft forward over ``heads`` ([h] int64); [h, V] log-probs."""
    mask, _, _ = tree_layout(partial.parents, partial.depths)
    tree_part = mask[np.ix_(heads, np.array(cached + heads.tolist()))]  # [h, len(cached) + h]
    # [h, past + c + h]
    vis = torch.ones(heads.shape[0], root_pos + tree_part.shape[1], dtype=torch.bool, device=draft.device)
    vis[:, root_pos:] = to_device(tree_part, draft.device)  # [h, len(cached) + h] bool
    tokens = to_device(partial.tokens[heads], draft.device)  # [h] int64
    positions = to_device(root_pos + partial.depths[heads], draft.device)  # [h] int64
    return log_probs(forward_tokens(draft, cache, tokens, positions, vis))


def _finish(partial: _Partial, steps: list[StepRecord], cached: list[int], stopped_early: bool) -> DraftedTree:
    expanded = tuple(np.asarray(s.parents, dtype=np.int64) for s in steps)
    tree = Tree(partial.tokens, partial.parents, partial.depths, partial.ranks, partial.logprobs, expanded)
    return DraftedTree(tree, tuple(steps), tuple(cached), stopped_early)


def draft_keep_indices(drafted: DraftedTree, root_pos: int, accepted_nodes: Sequence[int]) -> torch.Tensor:
    """[m] int64 draft-cache entries to keep: committed tokens through the root, then the accepted
    nodes the draft has KV for (a leaf at the end of the path never ran through the draft; the
    next round's catch-up feeds it)."""
    slot = {node: root_pos + i for i, node in enumerate(drafted.cached_nodes)}
    keep = list(range(root_pos + 1))
    for node in accepted_nodes:
        if node not in slot:
            break
        keep.append(slot[node])
    return torch.tensor(keep, dtype=torch.int64)  # [m] int64 on the host
