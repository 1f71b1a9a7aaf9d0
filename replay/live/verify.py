"""Verification in one target forward over ``[root] + all tree nodes``, and what survives it.

Mask and positions come from ``replay.core.tree.tree_layout`` (the offline replay's own function).
The output layer runs only on the rows that are used; which rows, and why ``first_rows`` takes
the ones it does: docs/live-harness.md, "Logits only where they are used".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from replay.core.acceptance import Acceptance, accept_greedy, target_top1_per_node
from replay.core.tree import Tree, tree_layout
from replay.core.vocab import PAD_TOKEN
from replay.io.dumpwrite import StepRecord

from .forward import cache_length, forward_hidden, output_logits, to_device, tree_visible
from .models.load import LiveModel
from .scores import log_probs, node_logprobs, top_candidates


class TargetLogits:
    """The target's logits at the tree's nodes, computed on first use (output layer on those rows only)."""

    def __init__(self, model: LiveModel, hidden: torch.Tensor) -> None:
        self._model = model
        self._hidden = hidden  # [num_nodes + 1, H] last hidden states, tree order, root first
        self._rows: dict[int, torch.Tensor] = {}  # node -> [V] float32
        self.output_calls = 0  # output-layer calls so far (what a round paid for its logits)

    @property
    def num_rows(self) -> int:
        return int(self._hidden.shape[0])

    def rows(self, nodes: Sequence[int]) -> torch.Tensor:
        """[len(nodes), V] float32 logits at ``nodes``; the missing ones in one output-layer call."""
        nodes = [int(u) for u in nodes]
        if any(not 0 <= u < self.num_rows for u in nodes):
            raise ValueError(f"nodes {nodes}: the tree has nodes 0..{self.num_rows - 1}")
        missing = sorted(set(nodes) - self._rows.keys())
        if missing:
            self._rows.update(
                zip(missing, output_logits(self._model, self._hidden[_row_index(missing, self._hidden.device)]))
            )
            self.output_calls += 1
        return torch.stack([self._rows[u] for u in nodes])  # [len(nodes), V] float32

    def all(self) -> torch.Tensor:
        """[num_nodes + 1, V] float32: every row."""
        return self.rows(range(self.num_rows))


def _row_index(rows: list[int], device: torch.device) -> slice | torch.Tensor:
    """A slice for consecutive rows (no index tensor to copy to the device), else [m] int64."""
    if rows == list(range(rows[0], rows[-1] + 1)):
        return slice(rows[0], rows[-1] + 1)
    return to_device(np.asarray(rows, dtype=np.int64), device)  # [m] int64


@dataclass(frozen=True, eq=False)
class Verification:
    target: TargetLogits  # per-node target logits on demand
    validate: StepRecord | None  # "all" layout ([num_nodes + 1, record_k] ids + log-probs) when recorded

    @property
    def logits(self) -> torch.Tensor:
        """[num_nodes + 1, V] float32 target logits, tree order, root first (computes every row)."""
        return self.target.all()


def verify_tree(
    target: LiveModel,
    cache: Any,
    tree: Tree,
    root_pos: int,
    record_k: int,
    record: bool = True,
    temperature: float = 0.0,
) -> Verification:
    """One target forward over the whole tree; ``cache`` must hold exactly the ``root_pos`` tokens
    before the root. Appends the KV of every node (trim with ``target_keep_indices``).

    ``record``: compute every row and the validate matrix (a dump records it). Otherwise only the
    rows of ``first_rows(tree)`` are computed now, and the validate matrix is None. A recorded
    matrix carries each node's log-probability under its parent at ``node_logprob_temperatures``
    (``temperature``, the run's, and 1): what makes a sampling replay of the dump exact there.
    """
    if cache_length(cache) != root_pos:
        raise ValueError(f"target cache holds {cache_length(cache)} entries, expected root position {root_pos}")
    mask, depth, _ = tree_layout(tree.parents, tree.depths)
    tokens = to_device(tree.tokens, target.device)  # [num_nodes + 1] int64, root first
    positions = to_device(root_pos + depth, target.device)  # [num_nodes + 1] int64 absolute positions
    # [num_nodes + 1, H]
    hidden = forward_hidden(target, cache, tokens, positions, tree_visible(root_pos, mask, target.device))
    logits = TargetLogits(target, hidden)
    if not record:
        logits.rows(first_rows(tree))
        return Verification(logits, None)
    every = logits.all()
    ids, scores = top_candidates(log_probs(every), record_k)
    own = node_logprobs(every, tree.parents, tree.tokens, node_logprob_temperatures(temperature))
    return Verification(logits, StepRecord(ids, scores, node_logprobs=own))


def node_logprob_temperatures(temperature: float) -> tuple[float, float]:
    """The temperatures of a recorded round's ``node_logprobs`` columns: the run's, then 1."""
    return (float(temperature), 1.0)


def first_rows(tree: Tree) -> np.ndarray:
    """[m] int64 nodes whose rows an unrecorded verification computes up front: every node with
    children (a walk reads only those until it stops) and the leaves of the deepest level (where
    a walk that accepts a whole path stops)."""
    deepest = tree.depths == tree.depths.max()
    return np.flatnonzero(tree.has_children() | deepest).astype(np.int64)


def accept_verified_greedy(tree: Tree, verification: Verification) -> Acceptance:
    """Greedy acceptance: ``accept_greedy`` on the target's top-1 per node, read from the validate
    matrix exactly as an offline replay reads the dump; unrecorded, from the rows computed so far,
    plus the row of a leaf the walk stopped at (its bonus token)."""
    if verification.validate is not None:
        return accept_greedy(tree, target_top1_per_node(tree, verification.validate.ids, "all"))
    logits = verification.target
    top1 = np.full(tree.tokens.shape[0], PAD_TOKEN, dtype=np.int64)
    known = first_rows(tree)
    top1[known] = _top1(logits, known)
    acc = accept_greedy(tree, top1)
    if acc.bonus_token is None:  # stopped at a leaf whose row is not computed yet
        leaf = acc.accepted_nodes[-1] if acc.accepted_nodes else 0
        top1[leaf] = _top1(logits, [leaf])[0]
        acc = accept_greedy(tree, top1)
    return acc


def _top1(logits: TargetLogits, nodes: Sequence[int]) -> np.ndarray:
    # The same function as the validate matrix's first column (ties broken the same way).
    ids, _ = top_candidates(log_probs(logits.rows(nodes)), 1)
    return ids[:, 0]


def target_keep_indices(root_pos: int, accepted_nodes: Sequence[int]) -> torch.Tensor:
    """[m] int64 target-cache entries to keep: the prefix, the root, the accepted nodes.

    The verification appended ``[root] + nodes`` in tree order after ``root_pos`` entries, so
    node u sits at ``root_pos + u``.
    """
    nodes = np.asarray([0, *accepted_nodes], dtype=np.int64)
    return torch.from_numpy(np.concatenate([np.arange(root_pos, dtype=np.int64), root_pos + nodes]))
