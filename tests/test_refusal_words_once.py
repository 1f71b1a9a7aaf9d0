"""A check on a dump file's values is worded once: an empty matrix file (npyfile.EMPTY_MATRIX_FILE,
which the .npy, text and raw readers raise), scores or node log-probabilities that are not real numbers
and log-probabilities above 0 (matrix_io's _as_real and _refuse_positive_logp), a matrix of more
values than the cell limit (bounded.check_cells: the .npy header, raw and .pt readers). A second
wording would drift: the same mistake would read differently by the file it was made in."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from replay.io.formats.matrix_io import RawSpec, read_matrix
from replay.util.errors import DumpError
from tests.library_scan import LIBRARY, ROOT, docstring_ids

WORDINGS = ("no matrix rows", "expected real numbers", "log-probabilities must be <=", "matrices are read up to")


def _strings(path: Path) -> list[str]:
    """Every string constant of a module (f-strings' literal parts included), docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = docstring_ids(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("words", WORDINGS)
def test_each_check_is_worded_once(words):
    places = [
        path.relative_to(ROOT).as_posix()
        for folder in LIBRARY
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith("replay/testing/")
        for text in _strings(path)
        if words in text
    ]
    assert len(places) == 1, f"{words!r} is worded in {places}: keep one wording and call it"


@pytest.mark.parametrize("name", ["draft_step_1_10_20.npy", "draft_step_1_10_20.txt"])
def test_an_empty_file_reads_the_same_in_every_format(tmp_path, name):
    (tmp_path / name).write_bytes(b"")
    with pytest.raises(DumpError, match="empty file: no matrix rows"):
        read_matrix(tmp_path / name, "draft")


def test_node_logprobs_and_scores_are_refused_in_the_same_words(tmp_path):
    ids = np.array([[1, 2]])
    np.savez(tmp_path / "a.npz", ids=ids, scores=np.array([[0.5, -1.0]]))
    np.savez(tmp_path / "b.npz", ids=ids, scores=np.array([[-0.5, -1.0]]), node_logprobs=np.array([[0.5]]))
    for name, field in (("a.npz", "scores"), ("b.npz", "node_logprobs")):
        with pytest.raises(DumpError, match=rf"\({field}\): log-probabilities must be <= 0, found 0.5"):
            read_matrix(tmp_path / name, "draft", score_kind="logprob")


def test_a_raw_column_count_is_refused_in_the_same_words_from_the_option_and_from_a_spec(tmp_path):
    """--raw's parser and the raw reader (a RawSpec made in code) ask one check of the column count."""
    (tmp_path / "draft_step_0_1_1.bin").write_bytes(np.arange(4, dtype=np.int32).tobytes())
    words = "expected the draft column count as a positive integer, got 0"
    with pytest.raises(DumpError, match=words):
        RawSpec.parse("int32:draft=0,validate=2")
    with pytest.raises(DumpError, match=rf"draft_step_0_1_1\.bin \(--raw\): {words}"):
        read_matrix(tmp_path / "draft_step_0_1_1.bin", "draft", RawSpec("int32", {"draft": 0}))
