"""Greedy acceptance: walk one root-to-leaf path following the target's top-1 token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tree import Tree
from .vocab import BONUS_CORRECTION, BONUS_LEAF, PAD_TOKEN, STOP_LEAF, STOP_MISMATCH, STOP_NO_ROW


@dataclass(frozen=True)
class Acceptance:
    """The outcome of one round (see replay.core.vocab for the words)."""

    accepted_nodes: tuple[int, ...]  # node ids on the accepted path, root excluded
    accepted_tokens: tuple[int, ...]
    bonus_token: int | None  # None when the dump has no target row at the last accepted node
    bonus_kind: str | None  # BONUS_CORRECTION or BONUS_LEAF, None with bonus_token
    stop: str  # STOP_LEAF, STOP_MISMATCH or STOP_NO_ROW

    @property
    def accepted_length(self) -> int:
        """Draft tokens accepted; the bonus token is not counted."""
        return len(self.accepted_nodes)

    @property
    def committed_tokens(self) -> tuple[int, ...]:
        return self.accepted_tokens + (() if self.bonus_token is None else (self.bonus_token,))

    @property
    def last_node(self) -> int:
        return self.accepted_nodes[-1] if self.accepted_nodes else 0


def target_top1_per_node(tree: Tree, validate_ids: np.ndarray, layout: str) -> np.ndarray:
    """Map the validate matrix's first column onto tree nodes.

    validate_ids: [rows, cols] int64, rows already trimmed to the layout's row count
    layout: "all" (row r = node r) or "parents" (row r = r-th expanded node, step by step)
    Returns [num_nodes + 1] int64, PAD_TOKEN where the dump holds no row for the node.
    """
    out = np.full(tree.tokens.shape[0], PAD_TOKEN, dtype=np.int64)
    if layout == "all":
        out[: validate_ids.shape[0]] = validate_ids[: out.shape[0], 0]
    elif layout == "parents":
        order = tree.expanded_order
        out[order] = validate_ids[: order.shape[0], 0]
    else:
        raise ValueError(f"unknown validate layout {layout!r}: expected 'parents' or 'all'")
    return out


def accept_greedy(tree: Tree, target_top1: np.ndarray) -> Acceptance:
    """The article's rule: from the root, move to the child whose token is the target's top-1.

    target_top1: [num_nodes + 1] int64, PAD_TOKEN where unknown.
    A duplicate token among siblings resolves to the lowest draft rank (first in tree order).
    """
    if target_top1.shape != tree.tokens.shape:
        raise ValueError(f"target_top1: expected shape {tree.tokens.shape}, got {target_top1.shape}")
    has_children = tree.has_children()
    node = 0
    path: list[int] = []
    while True:
        want = int(target_top1[node])
        if want == PAD_TOKEN:
            return _result(tree, path, None, None, STOP_NO_ROW if has_children[node] else STOP_LEAF)
        kids = tree.children(node)
        hit = kids[tree.tokens[kids] == want]
        if hit.shape[0] == 0:
            if has_children[node]:
                return _result(tree, path, want, BONUS_CORRECTION, STOP_MISMATCH)
            return _result(tree, path, want, BONUS_LEAF, STOP_LEAF)
        node = int(hit[0])
        path.append(node)


def _result(tree: Tree, path: list[int], bonus: int | None, kind: str | None, stop: str) -> Acceptance:
    return Acceptance(tuple(path), tuple(int(tree.tokens[u]) for u in path), bonus, kind, stop)
