"""A replayed round's tree is read from its selection in one place: replay.engine.batch.shapes
(node_parents: each node's parent; rank_paths: each node's rank path from the root; the shape's
depths and ranks).

Two checks: no library module builds a node's parent from the selection (the expanded slots
indexed by ``slot_parent``) or a rank path (a path plus one rank, a path decoded from a code)
itself, except the forms listed here with their reason (the shape search's trees under its model
are trees no round recorded); and node_parents and rank_paths give the
per-round reference rebuild's tree, round by round, on rounds of several shapes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig
from replay.engine.batch import node_parents, rank_paths, rebuilt_levels, replay_batch, replayed_by_shape
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.in_memory import round_at
from replay.testing.rebuild import rebuild_tree
from tests.library_scan import ROOT, findings_outside

HOME = "replay/engine/batch/shapes.py"

# (module, the source text starts with) → why it is not a replayed round's tree.
ALLOWED = {
    ("analysis/shapes/search.py", "path"): "the best-first search's candidate nodes under the shape model",
    ("replay/io/roundbatch.py", "tuple((self.step_path"): "a round's file paths",
    ("analysis/tables/slot_hits.py", "def _rank_paths"): "a node table's rows (node_hit_frequency on a table alone)",
}


def _tree_readings(path: Path) -> list[str]:
    """Source text of each place that adds one rank to a path, decodes a path from a code, indexes
    the expanded slots by ``slot_parent`` or defines a function named for rank paths."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and "rank_path" in node.name:
            out.append(f"def {node.name}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Tuple):
            text = ast.unparse(node)
            if len(node.right.elts) == 1 and ("path" in text or "rank" in text):
                out.append(text)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "divmod":
            if "code" in ast.unparse(node):
                out.append(ast.unparse(node))
        elif isinstance(node, ast.Subscript) and "slot_parent" in ast.unparse(node.slice):
            if "chosen" in ast.unparse(node.value):
                out.append(ast.unparse(node))
    return out


def test_no_library_module_reads_a_rounds_tree_from_its_selection_itself():
    found = findings_outside(HOME, _tree_readings, ALLOWED)
    assert not found, f"a round's parents or rank paths built outside {HOME} (use node_parents / rank_paths): {found}"
    assert len(_tree_readings(ROOT / HOME)) >= 3, "shapes.py no longer builds parents and rank paths: update this test"


def _check_against_rebuild(batch, cfg: TreeConfig) -> int:
    """Every replayed round's parents and rank paths against rebuild_tree's; returns the rounds checked."""
    res = replay_batch(batch, cfg, workers=1)
    checked = 0
    for shape, members, sub, _ in replayed_by_shape(batch, res):
        chosen = rebuilt_levels(sub, shape, static=True).chosen
        parents, ranked = node_parents(shape, chosen), rank_paths(shape, chosen)
        for col, i in enumerate(members.tolist()):
            tree = rebuild_tree(round_at(batch, i), cfg).tree
            want = [tuple(int(tree.ranks[v]) for v in tree.path_to(u)[1:]) for u in range(tree.num_nodes + 1)]
            assert parents[:, col].tolist() == tree.parents.tolist()
            assert [ranked.paths[k] for k in ranked.index[:, col].tolist()] == want
            assert np.array_equal(shape.depths, tree.depths) and np.array_equal(shape.ranks, tree.ranks)
            checked += 1
    return checked


def test_parents_and_rank_paths_are_the_rebuilds():
    cfg = TreeConfig.from_lists([[2], [2, 2], [1, 1]], [1, 2, 2])
    checked = 0
    for steps, seed in ((3, 1), (2, 2), (1, 3)):  # early stops: fewer draft steps, a smaller shape
        checked += _check_against_rebuild(synth_batch(SynthSpec(cfg, 40, steps=steps, seed=seed)), cfg)
    assert checked == 120
