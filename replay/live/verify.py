"""Verification in one target forward over ``[root] + all tree nodes``, and what survives it.

Mask and positions come from ``replay.tree.tree_layout`` (the offline replay's own function):
each node sees the committed context, its ancestors and itself; its position is the root's plus
its depth. The output at node u verifies u's children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..acceptance import Acceptance, accept_greedy, target_top1_per_node
from ..dumpwrite import StepRecord
from ..tree import Tree, tree_layout
from .forward import cache_length, forward_tokens, tree_visible
from .models import LiveModel
from .scores import log_probs, top_candidates


@dataclass(frozen=True, eq=False)
class Verification:
    logits: torch.Tensor  # [num_nodes + 1, V] float32 target logits, tree order, root first
    validate: StepRecord  # "all" layout: [num_nodes + 1, record_k] ids by descending prob + log-probs


def verify_tree(target: LiveModel, cache: Any, tree: Tree, root_pos: int, record_k: int) -> Verification:
    """One target forward over the whole tree; ``cache`` must hold exactly the ``root_pos`` tokens
    before the root. Appends the KV of every node (trim with ``target_keep_indices``)."""
    if cache_length(cache) != root_pos:
        raise ValueError(f"target cache holds {cache_length(cache)} entries, expected root position {root_pos}")
    mask, depth, _ = tree_layout(tree.parents, tree.depths)
    tokens = torch.from_numpy(tree.tokens).to(target.device)
    positions = torch.from_numpy(root_pos + depth).to(target.device)
    logits = forward_tokens(target, cache, tokens, positions, tree_visible(root_pos, mask, target.device))
    ids, scores = top_candidates(log_probs(logits), record_k)
    return Verification(logits, StepRecord(ids, scores))


def accept_verified_greedy(tree: Tree, verification: Verification) -> Acceptance:
    """Greedy acceptance read from the validate matrix exactly as an offline replay reads the dump."""
    return accept_greedy(tree, target_top1_per_node(tree, verification.validate.ids, "all"))


def target_keep_indices(root_pos: int, accepted_nodes: Sequence[int]) -> torch.Tensor:
    """[m] int64 target-cache entries to keep: the prefix, the root, the accepted nodes.

    The verification appended ``[root] + nodes`` in tree order after ``root_pos`` entries, so
    node u sits at ``root_pos + u``.
    """
    nodes = np.asarray([0, *accepted_nodes], dtype=np.int64)
    return torch.from_numpy(np.concatenate([np.arange(root_pos, dtype=np.int64), root_pos + nodes]))
