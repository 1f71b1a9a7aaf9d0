"""The validate row of a node (which row of the target's verification matrix scores its children)
lives in one place: replay.core.acceptance.validate_row, with node_validate_rows for every node.

Two checks: no library module picks between the layouts' rows itself (an ``np.where`` on a layout
flag) except the choices listed here, which pick something other than the row; and
node_validate_rows gives validate_row's row to every node, one round or many.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from replay.core.acceptance import node_validate_rows, target_top1_per_node, validate_row
from replay.core.tree import Tree
from replay.core.vocab import LAYOUT_ALL, LAYOUT_PARENTS, NO_PARENT, PAD_TOKEN
from replay.testing.round_sampling import node_rows
from tests.library_scan import assert_one_place

HOME = "replay/core/acceptance.py"

# (module, the call's source text starts with) → what it picks by layout, other than the row.
ALLOWED = {
    ("replay/engine/batch/rising.py", "np.where(result.layout == _ALL"): "how many rows the layout uses",
    ("replay/engine/batch/kernel.py", "np.where(targets.is_all | walk.expanded_at"): "whether the node has a row",
    ("analysis/compare/sampling_subtrees.py", "np.where(is_all[None, :], has_all"): "whether the node has a row",
}


def _layout_choices(path: Path) -> list[str]:
    """Source text of every np.where whose condition names a layout flag."""
    text = path.read_text()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "where":
            cond = ast.get_source_segment(text, node.args[0]) if node.args else ""
            if cond and ("all" in cond or "layout" in cond):
                out.append(ast.get_source_segment(text, node) or "where")
    return out


def test_no_library_module_picks_a_layouts_row_itself():
    assert_one_place(HOME, _layout_choices, "a layout's validate row chosen", "validate_row", allowed=ALLOWED)


def _tree() -> Tree:
    """Root → A1, A2; A2 → B21, B22; B22 → C221 (expanded in that order: 0, 2, 4)."""
    parents = np.array([NO_PARENT, 0, 0, 2, 2, 4])
    depths = np.array([0, 1, 1, 2, 2, 3])
    ranks = np.array([-1, 0, 1, 0, 1, 0])
    expanded = (np.array([0]), np.array([2]), np.array([4]))
    return Tree(np.arange(6) + 100, parents, depths, ranks, np.zeros(6), expanded)


def test_every_node_gets_validate_rows_row():
    tree = _tree()
    order = tree.expanded_order
    for is_all, want in ((True, [0, 1, 2, 3, 4, 5]), (False, [0, -1, 1, -1, 2, -1])):
        rows = node_validate_rows(is_all, tree.num_nodes, order)
        assert rows.tolist() == want
        for u in order.tolist():
            assert rows[u] == validate_row(is_all, u, int(np.flatnonzero(order == u)[0]))
    both = node_validate_rows(np.array([True, False]), tree.num_nodes, np.stack([order, order], axis=1))
    assert both[:, 0].tolist() == [0, 1, 2, 3, 4, 5] and both[:, 1].tolist() == [0, -1, 1, -1, 2, -1]


def test_the_per_round_readers_read_those_rows():
    tree = _tree()
    ids = (np.arange(6 * 2).reshape(6, 2) + 500).astype(np.int64)
    lp = -np.arange(6 * 2, dtype=np.float64).reshape(6, 2)
    for layout, n_rows in ((LAYOUT_ALL, 6), (LAYOUT_PARENTS, 3)):
        rows = node_validate_rows(layout == LAYOUT_ALL, tree.num_nodes, tree.expanded_order)
        want = np.where(rows >= 0, ids[np.maximum(rows, 0), 0], PAD_TOKEN)
        assert target_top1_per_node(tree, ids[:n_rows], layout).tolist() == want.tolist()
        got_ids, got_lp, has = node_rows(6, ids[:n_rows], lp[:n_rows], layout, tree.expanded_order)
        assert has.tolist() == (rows >= 0).tolist()
        assert (got_ids[has] == ids[rows[has]]).all() and (got_lp[has] == lp[rows[has]]).all()
