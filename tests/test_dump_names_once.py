"""A dump matrix's file name is spelt from its (step, a, b) in one place: replay.io.dumpnames.matrix_name,
the inverse of DUMP_NAME. The writer, the grouping's skip reasons, the step-0 notes and a rejected
round's words call it, so a name a message suggests is the name the writer writes and the grouping
reads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from replay.engine.batch.rejections import lost_step_words
from replay.io.dumpnames import DUMP_NAME, matrix_name
from replay.io.dumpwrite import step_file_name
from tests.library_scan import assert_one_place

HOME = "replay/io/dumpnames.py"
FOLDERS = ("replay/io", "replay/engine", "replay/live", "replay/cli", "replay/util")

# A name built from formatted numbers: f"draft_step_{i}_{a}_{b}", f"validate_{a}_{b}", "validate_%d_%d".
SPELT = re.compile(r"draft_step_(\{\}|%d|\d+)_(\{\}|%d)_(\{\}|%d)|validate_(\{\}|%d)_(\{\}|%d)")

# (module, the expression's start) → why it spells names itself.
ALLOWED = {
    ("replay/io/roundbatch.py", 'f"{self._prefix}draft_step_'): "SourceNames rebuilds every round's paths "
    "in the bulk readers' loop: a call per name there costs more than the whole name",
    ("replay/io/roundbatch.py", 'f"{self._prefix}validate_'): "as above",
}


def _spelt_names(path: Path) -> list[str]:
    """Source text of each f-string (its numbers as {}) or %-formatted string that spells a name."""
    text = path.read_text()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.JoinedStr):
            shape = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
            shape = str(node.left.value)
        else:
            continue
        if SPELT.search(shape):
            found.append(ast.get_source_segment(text, node) or shape)
    return found


def test_names_are_spelt_by_matrix_name_only():
    assert_one_place(HOME, _spelt_names, "a dump file name spelt", "matrix_name", allowed=ALLOWED, folders=FOLDERS)


@pytest.mark.parametrize("matrix", [(-1, 124, 140), (0, 123, 139), (2, -5, 7), (12, 0, 0)])
def test_matrix_name_is_dump_names_inverse(matrix):
    m = DUMP_NAME.match(matrix_name(matrix))
    assert m is not None and not m.group("ext") and not m.group("companion")
    step = -1 if m.group("validate") else int(m.group("step"))
    assert (step, int(m.group("a")), int(m.group("b"))) == matrix


def test_the_writer_names_files_by_it():
    assert step_file_name("validate", (124, 140)) == matrix_name((-1, 124, 140)) == "validate_124_140"
    assert step_file_name("draft", (124, 140), 1) == matrix_name((1, 124, 140)) == "draft_step_1_124_140"
    assert step_file_name("draft", (124, 140), 0) == matrix_name((0, 123, 139))


def test_a_lost_step_is_named_as_the_writer_names_it():
    words = lost_step_words(7, 2, 1, (124, 140))
    assert f"{step_file_name('draft', (124, 140), 1)} is missing" in words


@pytest.mark.parametrize(
    ("companion", "paired"),
    [("validate_10_20.scores.txt", True), ("validate_010_20.scores", True), ("validate_10_20.scores.foo", False)],
)
def test_a_messages_scores_companion_is_the_one_the_grouping_pairs(tmp_path, companion, paired):
    """scores_companion (which names a batch's scores file in messages) pairs by the grouping's rule:
    a companion whose extension no reader takes is a stray there, so no message names it as read."""
    from replay.io.dumpnames import scores_companion
    from replay.io.grouping import group_directory

    for name in ("draft_step_0_9_19", "draft_step_1_10_20", "validate_10_20", companion):
        (tmp_path / name).write_text("1 2\n")
    grouping = group_directory(tmp_path)
    (found,) = grouping.rounds
    expected = str(tmp_path / companion) if paired else None
    assert found.validate.scores == expected
    assert scores_companion(str(tmp_path / "validate_10_20")) == expected
    assert [s.what for s in grouping.skipped] == ([] if paired else [companion])
