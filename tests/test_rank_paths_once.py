"""A replayed round's tree is read from its selection in one place: replay.engine.batch.shapes
(node_parents: each node's parent; rank_paths: each node's rank path from the root; the shape's
depths and ranks; round_tree: one round as the one-round Tree; the RankPath alias).

Three checks: no library module builds a node's parent from the selection (the expanded slots
indexed by ``slot_parent``) or a rank path (a path plus one rank, a path decoded from a code, a
level of children ranks 0..w-1) itself, except the forms listed here with their reason (the shape
search's trees under its model are trees no round recorded); no library module holds a second
form of a tree at run time (a class with depths beside parents or parent rows, a Tree built from
parts, a second rank-path alias), except those listed; and node_parents and rank_paths give the
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
    ("replay/testing/frame_counts.py", "def _rank_paths"): "a node table's rows (the reference node_hits counts)",
    (
        "analysis/shapes/paths.py",
        "u + (r,)",
    ): "next_level: trees under the shape model, each level selected by its paths' keys",
}

# (module, the form) → why this tree form is not a second one of a replayed round's tree.
FORMS_ALLOWED = {
    ("replay/core/tree.py", "class Tree"): "the one-round form: the live harness and what render draws",
    ("replay/core/sampling_columns.py", "class TreeLayout"): "the sampling kernel's rows (core: no engine shapes)",
    ("replay/live/draft.py", "class _Partial"): "the live harness drafts one round with the one-round rule",
    ("replay/live/draft.py", "Tree("): "the live harness drafts one round with the one-round rule",
    (
        "analysis/compare/sampling_subtrees.py",
        "class SubTrees",
    ): "other configs' sub-trees at T (issue 37 item 4, open)",
}


def _tree_readings(path: Path) -> list[str]:
    """Source text of each place that adds one rank to a path, decodes a path from a code, indexes
    the expanded slots by ``slot_parent`` or defines a function named for rank paths."""
    out = []
    module = ast.parse(path.read_text())
    level_steps = {id(node.elt) for node in ast.walk(module) if _children_by_rank(node)}
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef) and "rank_path" in node.name:
            out.append(f"def {node.name}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Tuple):
            text = ast.unparse(node)
            if len(node.right.elts) == 1 and ("path" in text or "rank" in text or id(node) in level_steps):
                out.append(text)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "divmod":
            if "code" in ast.unparse(node):
                out.append(ast.unparse(node))
        elif isinstance(node, ast.Subscript) and "slot_parent" in ast.unparse(node.slice):
            if "chosen" in ast.unparse(node.value):
                out.append(ast.unparse(node))
    return out


def _children_by_rank(node: ast.AST) -> bool:
    """A comprehension over range(...) whose item is something plus one rank: a level of children."""
    if not isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return False
    item = node.elt
    if not (isinstance(item, ast.BinOp) and isinstance(item.op, ast.Add) and isinstance(item.right, ast.Tuple)):
        return False
    ranged = (g.iter for g in node.generators)
    return any(isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" for it in ranged)


TREE_FIELDS = {"parents", "parent", "node_row", "edge_row"}


def _tree_forms(path: Path) -> list[str]:
    """Each class holding depths beside parents or parent rows, each Tree built from parts (Tree(...)),
    and each alias of tuple[int, ...] (the rank path's)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if "depths" in fields and fields & TREE_FIELDS:
                out.append(f"class {node.name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Tree":
            out.append("Tree(")
        elif isinstance(node, ast.Assign) and ast.unparse(node.value) == "tuple[int, ...]":
            out.append(f"{ast.unparse(node.targets[0])} = tuple[int, ...]")
    return out


def test_no_library_module_holds_a_second_tree_form():
    found = findings_outside(HOME, _tree_forms, FORMS_ALLOWED)
    assert not found, f"a second tree form at run time (build it from {HOME}'s shapes, rank paths, round_tree): {found}"
    assert _tree_forms(ROOT / HOME) == ["RankPath = tuple[int, ...]", "Tree("], (
        "shapes.py's forms moved: update this test"
    )


def test_no_library_module_reads_a_rounds_tree_from_its_selection_itself():
    found = findings_outside(HOME, _tree_readings, ALLOWED)
    assert not found, f"a round's parents or rank paths built outside {HOME} (use node_parents / rank_paths): {found}"
    assert len(_tree_readings(ROOT / HOME)) >= 3, "shapes.py no longer builds parents and rank paths: update this test"
    model_steps = [t for t in _tree_readings(ROOT / "analysis/shapes/paths.py") if t.startswith("u + (r,)")]
    assert len(model_steps) == 1, (
        f"the shape model's level of children written {len(model_steps)} times: use next_level"
    )


def _check_against_rebuild(batch, cfg: TreeConfig) -> int:
    """Every replayed round's parents and rank paths against rebuild_tree's; returns the rounds checked."""
    res = replay_batch(batch, cfg, workers=1)
    checked = 0
    for shape, members, sub, sub_res in replayed_by_shape(batch, res):
        chosen = rebuilt_levels(sub, sub_res, shape).chosen
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
