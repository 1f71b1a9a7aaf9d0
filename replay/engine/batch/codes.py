"""Codes of the batch replay's per-round arrays (BatchResult): selection, stop, bonus, rejection."""

from __future__ import annotations

from enum import IntEnum

from replay.core.vocab import (
    BONUS_CORRECTION,
    BONUS_LEAF,
    SELECT_FALLBACK,
    SELECT_PARENTS,
    SELECT_PATH_PROB,
    SELECT_ROOT,
    STOP_LEAF,
    STOP_MISMATCH,
    STOP_NO_ROW,
)

# Per-step selection codes (BatchResult.selection); -1 = no such step.
SEL_NONE, SEL_ROOT, SEL_PARENTS, SEL_PATH, SEL_FALLBACK = -1, 0, 1, 2, 3
SELECTION_NAMES = {
    SEL_ROOT: SELECT_ROOT,
    SEL_PARENTS: SELECT_PARENTS,
    SEL_PATH: SELECT_PATH_PROB,
    SEL_FALLBACK: SELECT_FALLBACK,
}


class StopCode(IntEnum):
    """BatchResult.stop: where the acceptance walk stopped (the word: STOP_CODES[code])."""

    LEAF = 0
    MISMATCH = 1
    NO_ROW = 2


class BonusCode(IntEnum):
    """BatchResult.bonus_kind: which bonus token the round commits (the word: BONUS_NAMES[code])."""

    NONE = 0
    CORRECTION = 1
    LEAF = 2


_STOP_WORDS = {StopCode.LEAF: STOP_LEAF, StopCode.MISMATCH: STOP_MISMATCH, StopCode.NO_ROW: STOP_NO_ROW}
STOP_CODES = tuple(_STOP_WORDS[c] for c in StopCode)  # indexed by StopCode
BONUS_NAMES = {BonusCode.NONE: None, BonusCode.CORRECTION: BONUS_CORRECTION, BonusCode.LEAF: BONUS_LEAF}

# Why a round was rejected (the first failing check: steps in order, each step's size first).
# BatchResult.error_at records where: (draft step, row, detail); replay.engine.batch.rejections words it.
ERR_OK = 0
ERR_TOO_MANY_STEPS = 1  # at: the last draft step (its file is named)
ERR_MATRIX_SHAPE = 2  # fewer rows/columns than the shape needs; at: the step, MATRIX_ROWS/MATRIX_COLUMNS
ERR_TOKENS = 3  # padding in a kept column, a negative id in any; at: the step, the row, TOKEN_PADDING/TOKEN_NEGATIVE
ERR_PARENTS = 4  # explicit parents outside the level or repeated; at: the step, PARENTS_ROOT/PARENTS_LEVEL
ERR_VALIDATE_ROWS = 5  # validate row count fits no layout; at: row = the rows used, detail ROWS_*
ERR_VALIDATE_COL0 = 6  # a used validate row: padding in column 0, a negative id in any; at: that row, TOKEN_*
ERR_NO_ROWS = 7  # dynamic tree: a draft step with no valid row; at: the step
ERR_LOST_STEP = 8  # all-layout validate rows of a deeper tree; at: row = the rows used, detail = the steps lost
# the fallback guessed at a step while another draft step of the round has scores or parents;
# at: the step whose file lacks them, row = the step that guessed, detail LOST_SCORES/LOST_PARENTS
ERR_LOST_COMPANION = 9
# error_at's detail: which of a code's messages applies (in check order)
MATRIX_ROWS, MATRIX_COLUMNS = 0, 1
TOKEN_PADDING, TOKEN_NEGATIVE = 0, 1
PARENTS_ROOT, PARENTS_LEVEL = 0, 1
ROWS_FEWER, ROWS_OF_ALL, ROWS_UNEXPLAINED, ROWS_NO_LAYOUT = 0, 1, 2, 3
ROWS_RUN_LAYOUT = 4  # the rows of the layout the run's other rounds do not have (replay.engine.runs)
LOST_SCORES, LOST_PARENTS = 0, 1
ERROR_NAMES = {
    ERR_OK: "ok",
    ERR_TOO_MANY_STEPS: "more draft steps than gamma",
    ERR_MATRIX_SHAPE: "draft matrix smaller than the shape",
    ERR_TOKENS: "padding in kept columns or a negative id",
    ERR_PARENTS: "bad explicit parents",
    ERR_VALIDATE_ROWS: "validate rows fit no layout",
    ERR_VALIDATE_COL0: "validate row without a column-0 token or with a negative id",
    ERR_NO_ROWS: "draft step without valid rows",
    ERR_LOST_STEP: "validate rows of a deeper tree: a draft step is missing",
    ERR_LOST_COMPANION: "a draft step without the scores or parents its round's other steps have",
}
