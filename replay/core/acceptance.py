"""Greedy acceptance: walk one root-to-leaf path following the target's top-1 token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tree import Tree
from .vocab import (
    BONUS_CORRECTION,
    BONUS_LEAF,
    LAYOUT_ALL,
    LAYOUT_PARENTS,
    PAD_TOKEN,
    STOP_LEAF,
    STOP_MISMATCH,
    STOP_NO_ROW,
)


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


def validate_row(is_all: np.ndarray | bool, node: np.ndarray | int, expanded_row: np.ndarray | int) -> np.ndarray:
    """The validate row that scores a node's children: the all layout gives every node its own row,
    its tree-order id ``node``; the parents layout one row per expanded node, in the order the draft
    steps expanded them, ``expanded_row`` (head_offsets[step] + slot; the root's is 0 in both).

    is_all: bool, or bool per round; the arguments broadcast (numpy arrays or ints)."""
    return np.where(is_all, node, expanded_row)


def node_validate_rows(is_all: np.ndarray | bool, num_nodes: int, expanded_order: np.ndarray) -> np.ndarray:
    """Every node's validate_row: [num_nodes + 1] int64 for one round, [num_nodes + 1, C] for C rounds
    of one shape; -1 where the layout has no row for the node (parents layout: not expanded).

    expanded_order: [E] (or [E, C]) tree-order ids of the expanded nodes in validate-row order
    (Tree.expanded_order); is_all: bool (or [C] bool)."""
    order = np.asarray(expanded_order, dtype=np.int64)
    lead = (1,) * (order.ndim - 1)
    expanded_row = np.full((num_nodes + 1, *order.shape[1:]), -1, dtype=np.int64)
    np.put_along_axis(expanded_row, order, np.arange(order.shape[0], dtype=np.int64).reshape(-1, *lead), axis=0)
    out: np.ndarray = validate_row(is_all, np.arange(num_nodes + 1, dtype=np.int64).reshape(-1, *lead), expanded_row)
    return out


def is_all_layout(layout: str) -> bool:
    """Whether ``layout`` names the all layout (the parents layout: False); any other name is refused."""
    if layout not in (LAYOUT_ALL, LAYOUT_PARENTS):
        raise ValueError(f"unknown validate layout {layout!r}: expected 'parents' or 'all'")
    return layout == LAYOUT_ALL


def target_top1_per_node(tree: Tree, validate_ids: np.ndarray, layout: str) -> np.ndarray:
    """Map the validate matrix's first column onto tree nodes (each node's validate_row).

    validate_ids: [rows, cols] int64, rows already trimmed to the layout's row count
    layout: "all" (row r = node r) or "parents" (row r = r-th expanded node, step by step)
    Returns [num_nodes + 1] int64, PAD_TOKEN where the dump holds no row for the node.
    """
    rows = node_validate_rows(is_all_layout(layout), tree.num_nodes, tree.expanded_order)
    has = (rows >= 0) & (rows < validate_ids.shape[0])
    out = np.full(tree.tokens.shape[0], PAD_TOKEN, dtype=np.int64)
    out[has] = validate_ids[rows[has], 0]
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
