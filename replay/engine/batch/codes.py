"""Codes of the batch replay's per-round arrays (BatchResult): selection, stop, bonus, rejection."""

from __future__ import annotations

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

DEFAULT_CHUNK_ROUNDS = 16384  # ~2 MB of temporaries per array for the article config: cache-sized

# Per-step selection codes (BatchResult.selection); -1 = no such step.
SEL_NONE, SEL_ROOT, SEL_PARENTS, SEL_PATH, SEL_FALLBACK = -1, 0, 1, 2, 3
SELECTION_NAMES = {
    SEL_ROOT: SELECT_ROOT,
    SEL_PARENTS: SELECT_PARENTS,
    SEL_PATH: SELECT_PATH_PROB,
    SEL_FALLBACK: SELECT_FALLBACK,
}

STOP_CODES = (STOP_LEAF, STOP_MISMATCH, STOP_NO_ROW)  # stop codes 0, 1, 2
BONUS_NONE, BONUS_CODE_CORRECTION, BONUS_CODE_LEAF = 0, 1, 2
BONUS_NAMES = {BONUS_NONE: None, BONUS_CODE_CORRECTION: BONUS_CORRECTION, BONUS_CODE_LEAF: BONUS_LEAF}

# Why a round was rejected (the first failing check, in the reference's order). The exact message
# is the reference's own, obtained by replaying just the rejected rounds (replay.engine.runs).
ERR_OK = 0
ERR_TOO_MANY_STEPS = 1
ERR_MATRIX_SHAPE = 2  # fewer rows/columns than the shape needs
ERR_TOKENS = 3  # padding or negative ids inside the kept columns
ERR_PARENTS = 4  # explicit parents outside the level or repeated
ERR_VALIDATE_ROWS = 5  # validate row count fits neither layout
ERR_VALIDATE_COL0 = 6  # a used validate row has no token in column 0
ERR_NO_ROWS = 7  # dynamic tree: a draft step with no valid row
ERROR_NAMES = {
    ERR_OK: "ok",
    ERR_TOO_MANY_STEPS: "more draft steps than gamma",
    ERR_MATRIX_SHAPE: "draft matrix smaller than the shape",
    ERR_TOKENS: "padding or negative id in kept columns",
    ERR_PARENTS: "bad explicit parents",
    ERR_VALIDATE_ROWS: "validate rows fit no layout",
    ERR_VALIDATE_COL0: "validate row without a column-0 token",
    ERR_NO_ROWS: "draft step without valid rows",
}
