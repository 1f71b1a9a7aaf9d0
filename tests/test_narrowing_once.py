"""A stack is narrowed losslessly in one place: replay.io.roundbatch's MatrixStack.narrowed (and
MatrixStack.of_rounds, the bulk readers' cut of kept rounds in front of it). The per-round reader and
the text and array bulk readers all call it, so one round reads with the same dtypes whichever reader
took it."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from replay.io.roundbatch import MatrixStack
from tests.library_scan import assert_one_place

HOME = "replay/io/roundbatch.py"
NARROWERS = ("narrow_ids", "narrow_logp")


def _narrowing_calls(path: Path) -> list[str]:
    """Source text of each call of narrow_ids / narrow_logp."""
    text = path.read_text()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in NARROWERS:
                found.append(ast.get_source_segment(text, node) or str(name))
    return found


def test_stacks_are_narrowed_by_matrix_stack_only():
    assert_one_place(HOME, _narrowing_calls, "a stack narrowed", "MatrixStack.narrowed / of_rounds")


def test_of_rounds_cuts_kept_rounds_and_narrows():
    ids = np.full((3, 4, 3), -1, dtype=np.int64)  # [rows, cols, R] int64
    ids[:2, :2, 0], ids[:3, :4, 1], ids[:2, :3, 2] = 5, 2**40, 7
    logp = np.full(ids.shape, np.nan)  # [rows, cols, R] float64
    logp[:2, :2, 0], logp[:2, :3, 2] = -0.5, -0.25
    rows_of, cols_of = np.array([2, 3, 2]), np.array([2, 4, 3])
    st = MatrixStack.of_rounds(ids, logp, rows_of, cols_of, np.array([0, 2]))
    assert st.ids.shape == (2, 3, 2) and st.ids.dtype == np.int32 and st.ids.flags.c_contiguous
    assert st.logp is not None and st.logp.dtype == np.float32
    assert st.rows_of is None and st.cols_of is not None and st.cols_of.tolist() == [2, 3]
    whole = MatrixStack.of_rounds(ids, logp, rows_of, cols_of)
    assert whole.ids.dtype == np.int64 and whole.ids.shape == (3, 4, 3)
    assert whole.rows_of is not None and whole.rows_of.tolist() == [2, 3, 2]


def test_narrowed_keeps_every_value():
    precise = np.full((1, 1, 2), -0.1)  # [rows, cols, R] float64 that float32 would round
    st = MatrixStack(np.zeros((1, 1, 2), dtype=np.int64), precise, np.zeros((1, 2), dtype=np.int64)).narrowed()
    assert st.logp is not None and st.logp.dtype == np.float64 and st.ids.dtype == np.int32
    assert st.parents is not None and st.parents.dtype == np.int32
