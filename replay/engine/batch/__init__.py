"""Batch replay: many rounds of one tree shape at once, as numpy array operations.

One concern per module: ``codes`` (the per-round codes), ``shapes`` (tree shapes and their index
maps), ``result`` (BatchResult and its JSON / pandas output), ``kernel`` (one chunk of rounds of
one shape), ``driver`` (shapes, chunks, threads: ``replay_batch``), ``rejections`` (a rejected
round's reason in words, from where the kernel found it: ``rejection_reasons``). The input stacks
(RoundBatch, MatrixStack) live in replay.io.roundbatch, the reading side's unit. Every public name
is importable from ``replay.engine.batch``.
"""

from __future__ import annotations

from replay.io.roundbatch import MatrixStack, RoundBatch, SourceNames, signature_of

from .codes import (
    BONUS_NAMES,
    DEFAULT_CHUNK_ROUNDS,
    ERR_LOST_STEP,
    ERR_MATRIX_SHAPE,
    ERR_NO_ROWS,
    ERR_OK,
    ERR_PARENTS,
    ERR_TOKENS,
    ERR_TOO_MANY_STEPS,
    ERR_VALIDATE_COL0,
    ERR_VALIDATE_ROWS,
    ERROR_NAMES,
    SEL_FALLBACK,
    SEL_NONE,
    SEL_PARENTS,
    SEL_PATH,
    SEL_ROOT,
    SELECTION_NAMES,
    STOP_CODES,
    BonusCode,
    StopCode,
)
from .driver import RebuiltLevels, default_workers, expanded_nodes, rebuilt_levels, replay_batch
from .result import BatchResult, empty_result
from .shapes import TreeShape, config_tree_shape, dynamic_shapes

__all__ = [
    "BONUS_NAMES",
    "DEFAULT_CHUNK_ROUNDS",
    "ERR_MATRIX_SHAPE",
    "ERR_LOST_STEP",
    "ERR_NO_ROWS",
    "ERR_OK",
    "ERR_PARENTS",
    "ERR_TOKENS",
    "ERR_TOO_MANY_STEPS",
    "ERR_VALIDATE_COL0",
    "ERR_VALIDATE_ROWS",
    "ERROR_NAMES",
    "SEL_FALLBACK",
    "SEL_NONE",
    "SEL_PARENTS",
    "SEL_PATH",
    "SEL_ROOT",
    "SELECTION_NAMES",
    "STOP_CODES",
    "BatchResult",
    "BonusCode",
    "StopCode",
    "MatrixStack",
    "RebuiltLevels",
    "RoundBatch",
    "SourceNames",
    "TreeShape",
    "config_tree_shape",
    "default_workers",
    "dynamic_shapes",
    "empty_result",
    "expanded_nodes",
    "rebuilt_levels",
    "replay_batch",
    "signature_of",
]
