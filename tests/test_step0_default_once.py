"""The default step-0 offset (step 0 named one position before its round) is written once:
replay.io.step0.DEFAULT_STEP0_OFFSET. The readers' options, the rebuilt file names, the packer of
in-memory batches and the dump writer take it from there, so a second spelling of the number in a
default cannot drift from the rule the grouping applies."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from replay.io.dumpwrite import StepRecord, step_file_name, write_round
from replay.io.fastread import ReadOptions
from replay.io.grouping import group_directory
from replay.io.roundbatch import SourceNames
from replay.io.step0 import DEFAULT_STEP0_OFFSET
from tests.library_scan import assert_one_place

HOME = "replay/io/step0.py"

# (module, the default's source text) → why it states its own offset.
ALLOWED = {
    ("replay/live/dumps.py", "STEP0_OFFSET = 1"): "the harness's stated offset, written into its manifest",
}


def _literal_offset_defaults(path: Path) -> list[str]:
    """Source text of every step-0 offset given a literal value: a parameter or field default named
    ``step0_offset``, an assignment to a ``*STEP0_OFFSET`` name, or a literal passed as a step-0
    offset argument of PackWriter."""
    text = path.read_text()
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            positional = [a.arg for a in (*node.posonlyargs, *node.args)]
            pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults)) + [
                (a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None
            ]
            found += [ast.get_source_segment(text, d) or "" for n, d in pairs if n == "step0_offset" and _literal(d)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if node.target.id.lower().endswith("step0_offset") and _literal(node.value):
                found.append(ast.get_source_segment(text, node) or "")
        elif isinstance(node, ast.Assign) and _literal(node.value):
            if any(isinstance(t, ast.Name) and t.id.lower().endswith("step0_offset") for t in node.targets):
                found.append(ast.get_source_segment(text, node) or "")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PackWriter" and len(node.args) > 2:
            if _literal(node.args[2]):
                found.append(ast.get_source_segment(text, node) or "")
    return found


def _literal(node: ast.expr) -> bool:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return False
    return isinstance(value, (int, tuple)) and not isinstance(value, bool)


def test_the_default_step0_offset_is_written_once():
    assert_one_place(
        HOME,
        _literal_offset_defaults,
        "a step-0 offset spelled as a literal",
        "DEFAULT_STEP0_OFFSET",
        allowed=ALLOWED,
        folders=("replay/io", "replay/live"),
    )


def test_every_default_is_the_groupings(tmp_path):
    assert ReadOptions().step0_offset == DEFAULT_STEP0_OFFSET
    assert SourceNames("d", ("", "")).step0_offset == DEFAULT_STEP0_OFFSET
    da, db = DEFAULT_STEP0_OFFSET
    assert step_file_name("draft", (124, 140), 0) == f"draft_step_0_{124 - da}_{140 - db}"
    assert step_file_name("draft", (124, 140), 0, (2, 0)) == "draft_step_0_122_140"
    assert step_file_name("draft", (124, 140), 0, 3) == "draft_step_0_121_137"
    step = StepRecord(ids=np.asarray([[5, 6]], dtype=np.int64))
    write_round(tmp_path, (124, 140), [step, step], step)
    grouping = group_directory(tmp_path)
    assert [r.key for r in grouping.rounds] == [(124, 140)] and not grouping.skipped
    assert grouping.step0_offset == DEFAULT_STEP0_OFFSET
