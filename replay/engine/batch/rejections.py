"""Why a round is rejected, in words: one function per reason, and the batch's rejected rounds worded.

The batch kernel records, for each round it rejects, the reason's code (``BatchResult.error``) and
its place (``BatchResult.error_at``: the draft step, the row, a detail); ``rejection_reasons`` words
them from that and from the batch's own arrays and file names, with no second replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.config import TreeConfig
from replay.core.vocab import LAYOUT_ALL, LAYOUT_PARENTS, PAD_TOKEN, first_not_token_id
from replay.io.dumpnames import matrix_name
from replay.io.formats.matrix_io import RawSpec, reads_as_raw
from replay.io.roundbatch import MatrixStack, RoundBatch
from replay.util.words import counted, row_words

from .codes import (
    ERR_LOST_COMPANION,
    ERR_LOST_STEP,
    ERR_MATRIX_SHAPE,
    ERR_NO_ROWS,
    ERR_PARENTS,
    ERR_TOKENS,
    ERR_TOO_MANY_STEPS,
    ERR_VALIDATE_COL0,
    ERR_VALIDATE_ROWS,
    LOST_PARENTS,
    MATRIX_ROWS,
    PARENTS_ROOT,
    ROWS_FEWER,
    ROWS_NO_LAYOUT,
    ROWS_OF_ALL,
    ROWS_RUN_LAYOUT,
    TOKEN_PADDING,
)
from .companions import holds_parents, holds_scores
from .result import BatchResult
from .shapes import TreeShape

# --------------------------------------------------------------------------------------------
# The words of each reason (the draft steps' checks, then the validate matrix's, in check order)


def too_many_steps_words(steps: int, gamma: int) -> str:
    return f"dump has {steps} draft steps but gamma = {gamma}"


def no_valid_row_words(step: int) -> str:
    return f"draft_step_{step} has no valid row: every row is padding or has a negative parent"


def matrix_rows_words(step: int, rows: int, heads: int) -> str:
    return f"draft_step_{step} has {rows} row(s) but topHead[{step}] = {heads}"


def matrix_columns_words(step: int, cols: int, widths: Sequence[int]) -> str:
    return f"draft_step_{step} has {cols} column(s) but topKSpec[{step}] = {list(widths)} needs {max(widths)}"


def padding_words(step: int, row: int, width: int) -> str:
    return f"draft_step_{step} {row_words(row)} has padding inside its {width} kept column(s)"


def negative_words(matrix: str, row: int, column: int, value: int) -> str:
    """A row that holds a value below 0 other than padding (PAD_TOKEN) in any column, read or not: the
    words of draft and validate files alike (``matrix``: "draft_step_1", "validate")."""
    return (
        f"{matrix} {row_words(row)} has negative token ids: column {column} holds {value} "
        f"(token ids are 0 or more; only padding, {PAD_TOKEN}, is below 0)"
    )


def root_parent_words(parent: int) -> str:
    return f"draft_step_0 parents[0] = {parent}, expected 0 (the root)"


def parents_words(step: int, chosen: Sequence[int], first: int, last: int) -> str:
    """Explicit parents that are not distinct nodes of their level (tree-order ids first..last)."""
    return f"draft_step_{step} parents {list(chosen)} must be distinct nodes of level {step} (nodes {first}..{last})"


def lost_step_words(rows: int, drafted: int, steps: int, key: tuple[int, int]) -> str:
    """An all-layout validate with the rows of a tree of ``drafted`` steps, in a round of ``steps``."""
    return (
        f"validate has {rows} rows, the all layout of {drafted} draft steps, but the round has "
        f"{steps}: {matrix_name((steps, *key))} is missing (an early stop has no rows "
        "for the steps it did not draft)"
    )


def lost_companion_words(kind: str, step: int, found: int, chosen: int) -> str:
    """draft_step_``step`` without ``kind`` ("scores" or "parents") while draft_step_``found`` of its
    round has them: draft step ``chosen``'s expanded nodes would not be the dump's."""
    lost = (
        f"draft_step_{step} has no {kind} while draft_step_{found} has them (a lost .{kind} companion, "
        f"or a matrix saved without its {kind} array?): "
    )
    if kind == "parents":
        why = "its expanded nodes would be chosen by a rule (path probability or the rank-major fallback), not read from the dump"
    else:
        which = "its" if chosen == step else f"draft step {chosen}'s"
        why = f"{which} expanded nodes would be a guess by the rank-major fallback, not the engine's tree"
    # an engine that writes them for some steps only loses no file: the fallback's replay is left to the user
    fix = f"restore the file, or, if the engine writes no {kind} for that step, remove the round's others"
    return f"{lost}{why}; {fix} (docs/dump-format.md)"


def fewer_rows_words(rows: int, layout: str, need: int) -> str:
    return f"validate has {rows} row(s); the {layout} layout needs {need}"


def rows_of_all_words(rows: int, n_all: int, need: int) -> str:
    """A stated parents layout whose matrix has a row for every node: reading its first rows as the
    expanded nodes' would silently use other nodes' targets."""
    return (
        f"validate has {rows} row(s) beyond trailing padding, as the all layout has (at least {n_all}); "
        f"the parents layout needs {need}: state --layout all, or remove the extra rows"
    )


def unexplained_rows_message(rows: int, layout: str, need: int, config: str) -> str:
    """Why a round whose validate matrix holds more rows than its layout uses is skipped: rows that
    are not padding (padding rows hold only PAD_TOKEN) would be read as other nodes' targets."""
    return (
        f"validate has {rows} row(s) that are not padding, {rows - need} more than the {layout} layout of "
        f"config {config} uses ({need}); the config may not be the one the dump was drafted with "
        "(check config.json or --config; rows made only of -1 are padding)"
    )


def no_layout_words(rows: int, n_parents: int, num_nodes: int) -> str:
    """Validate rows that fit neither layout (fewer than the all layout's, not the parents layout's)."""
    return (
        f"validate has {rows} row(s): expected {n_parents} (parents layout: one per expanded node) "
        f"or {num_nodes + 1} (all layout: root + {counted(num_nodes, 'node')}); is the config the dump's (--config), is a "
        "draft step missing, or is the layout ambiguous (then state it with --layout)?"
    )


def other_layout_words(rows: int, n_parents: int, n_all: int) -> str:
    """A round whose validate rows are one layout's while the run's layout, decided once from its
    rounds (replay.engine.run_notes.run_layout), is the other: a file cut to the parents layout's
    rows, or one from another recording, would otherwise replay by another rule than its run's."""
    own, run, need = (
        (LAYOUT_PARENTS, LAYOUT_ALL, n_all) if rows == n_parents else (LAYOUT_ALL, LAYOUT_PARENTS, n_parents)
    )
    why = "a cut-off file?" if own == LAYOUT_PARENTS else "a file from another recording?"
    return (
        f"validate has {rows} row(s), as the {own} layout has, but the run's layout, that of most of its rounds "
        f"(all on a tie), is {run}, which needs {need} here: {why} (--layout states the run's layout)"
    )


def raw_columns_words(words: str, source: str) -> str:
    """``words`` of a shape mismatch in a file read as headerless binary, with where its column counts
    came from: its rows are its size over the stated count, so a wrong count reads as wrong rows."""
    hint = (
        f"the raw column counts came from {source} (rows = file size / columns): if the files' differ, "
        "state them per kind with --raw DTYPE:draft=N,validate=M"
    )
    return f"{words} {hint[0].upper()}{hint[1:]}" if words.endswith("?") else f"{words}; {hint}"


def column0_words(row: int) -> str:
    """A used validate row whose column 0 is padding (PAD_TOKEN): the target's top-1 for that node
    is not in the dump, so the walk has nothing to compare the draft against."""
    return (
        f"validate {row_words(row)} has no token in column 0: it holds {PAD_TOKEN} (padding), so the target's "
        "token at this row is missing"
    )


# --------------------------------------------------------------------------------------------
# A batch's rejected rounds, worded from the kernel's record


@dataclass(frozen=True)
class _Rejected:
    """One rejected round of a batch: where the kernel found its fault, and what the words read."""

    batch: RoundBatch
    tree: TreeConfig
    index: int  # the round's place in the batch
    shape: TreeShape | None  # its tree's shape, None when it was rejected before one was known
    step: int  # error_at[0]: the draft step of the fault, -1 for the validate matrix
    row: int  # error_at[1]: the row (or the validate's rows used), -1 when none
    detail: int  # error_at[2]: which of the code's messages (codes.MATRIX_ROWS, ...), or a number

    @property
    def matrix_shape(self) -> tuple[int, int]:
        """(rows, columns) of the faulty draft step's matrix as the round's own file has them."""
        st = self.batch.steps[self.step]
        return int(st.own_rows()[self.index]), int(st.own_cols()[self.index])

    def own_row(self, stack: MatrixStack) -> np.ndarray:
        """Row ``row`` of the round's own matrix in ``stack`` (its own columns, not the batch's padding)."""
        return stack.matrix(self.index, "").ids[self.row]

    def parents(self) -> list[int]:
        """The faulty draft step's explicit parents of its expanded slots, as the round's file has them."""
        assert self.shape is not None
        own = self.batch.steps[self.step].matrix(self.index, "").parents
        assert own is not None  # ERR_PARENTS comes from explicit parents only
        return [int(p) for p in own[: self.shape.heads[self.step]]]


def _matrix_shape(r: _Rejected) -> str:
    assert r.shape is not None
    rows, cols = r.matrix_shape
    if r.detail == MATRIX_ROWS:
        return matrix_rows_words(r.step, rows, r.shape.heads[r.step])
    return matrix_columns_words(r.step, cols, r.shape.widths[r.step])


def _tokens(r: _Rejected) -> str:
    assert r.shape is not None
    if r.detail == TOKEN_PADDING:
        return padding_words(r.step, r.row, r.shape.widths[r.step][r.row])
    return negative_words(f"draft_step_{r.step}", r.row, *first_not_token_id(r.own_row(r.batch.steps[r.step])))


def _parents(r: _Rejected) -> str:
    assert r.shape is not None
    chosen = r.parents()
    if r.detail == PARENTS_ROOT:
        return root_parent_words(chosen[0])
    first = r.shape.starts[r.step]
    return parents_words(r.step, chosen, first, first + r.shape.level_sizes[r.step] - 1)


def _lost_companion(r: _Rejected) -> str:
    """The words of ERR_LOST_COMPANION: the first draft step of the round that holds what r.step lacks."""
    kind, holds = ("parents", holds_parents) if r.detail == LOST_PARENTS else ("scores", holds_scores)
    found = next(k for k, st in enumerate(r.batch.steps) if holds(st, r.index, r.index + 1)[0])
    return lost_companion_words(kind, r.step, found, r.row)


def _validate_rows(r: _Rejected) -> str:
    assert r.shape is not None
    n_parents, n_all = r.shape.validate_rows(LAYOUT_PARENTS), r.shape.validate_rows(LAYOUT_ALL)
    layout = r.batch.layout or LAYOUT_ALL  # rows beyond both layouts are judged against the all layout's
    need = r.shape.validate_rows(layout)
    if r.detail == ROWS_FEWER:
        return fewer_rows_words(r.row, layout, need)
    if r.detail == ROWS_OF_ALL:
        return rows_of_all_words(r.row, n_all, need)
    if r.detail == ROWS_NO_LAYOUT:
        return no_layout_words(r.row, n_parents, r.shape.num_nodes)
    if r.detail == ROWS_RUN_LAYOUT:
        return other_layout_words(r.row, n_parents, n_all)
    return unexplained_rows_message(r.row, layout, need, r.tree.short())


def _column0(r: _Rejected) -> str:
    if r.detail == TOKEN_PADDING:
        return column0_words(r.row)
    return negative_words("validate", r.row, *first_not_token_id(r.own_row(r.batch.validate)))


# By error code: the words of a rejected round (a code whose words need no choice calls them here).
_WORDS: dict[int, Callable[[_Rejected], str]] = {
    ERR_TOO_MANY_STEPS: lambda r: too_many_steps_words(r.batch.num_steps, r.tree.gamma),
    ERR_NO_ROWS: lambda r: no_valid_row_words(r.step),
    ERR_MATRIX_SHAPE: _matrix_shape,
    ERR_TOKENS: _tokens,
    ERR_PARENTS: _parents,
    # detail: the steps lost (codes.ERR_LOST_STEP)
    ERR_LOST_STEP: lambda r: lost_step_words(
        r.row, r.batch.num_steps + r.detail, r.batch.num_steps, r.batch.key(r.index)
    ),
    ERR_VALIDATE_ROWS: _validate_rows,
    ERR_VALIDATE_COL0: _column0,
    ERR_LOST_COMPANION: _lost_companion,
}


# The reasons a wrong raw column count shows as: a matrix with other rows than the tree needs.
_SHAPE_ERRORS = (ERR_MATRIX_SHAPE, ERR_LOST_STEP, ERR_VALIDATE_ROWS)


def rejection_reasons(
    batch: RoundBatch, result: BatchResult, tree: TreeConfig, raw: RawSpec | None = None, raw_source: str = ""
) -> dict[int, tuple[str, str]]:
    """{round index in ``batch``: (the file at fault, why)} for every round ``result`` rejects, worded
    from the kernel's record (error, error_at) as the round-by-round replay words it.

    raw, raw_source: the raw spec the files were read with and where it came from ("--raw int32:16");
    a shape mismatch in a file read as raw then says where its column counts came from."""
    out = {}
    for i in np.flatnonzero(~result.ok).tolist():
        step, row, detail = (int(v) for v in result.error_at[:, i])
        k = int(result.shape_index[i])
        rejected = _Rejected(batch, tree, i, result.shapes[k] if k >= 0 else None, step, row, detail)
        paths = batch.paths_of(i)
        path, code = paths[step] if step >= 0 else paths[-1], int(result.error[i])
        words = _WORDS[code](rejected)
        if raw is not None and code in _SHAPE_ERRORS and reads_as_raw(path, raw):
            words = raw_columns_words(words, raw_source)
        out[i] = (path, words)
    return out
