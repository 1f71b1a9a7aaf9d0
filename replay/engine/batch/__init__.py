"""Batch replay: many rounds of one tree shape at once, as numpy array operations.

One concern per module: ``codes`` (the per-round codes), ``shapes`` (tree shapes and their index
maps), ``result`` (BatchResult and its JSON / pandas output), ``kernel`` (one chunk of rounds of
one shape), ``driver`` (shapes, chunks, threads: ``replay_batch``), ``rejections`` (a rejected
round's reason in words, from where the kernel found it: ``rejection_reasons``). The input stacks
(RoundBatch, MatrixStack) live in replay.io.roundbatch, the reading side's unit. The names other
modules use are importable from ``replay.engine.batch``.
"""

from __future__ import annotations

from replay.io.roundbatch import MatrixStack, RoundBatch

from .codes import ERR_OK, ERR_TOKENS, SEL_FALLBACK, SEL_PARENTS, StopCode
from .driver import expanded_nodes, rebuilt_levels, replay_batch
from .result import BatchResult, empty_result, replayed_by_shape
from .shapes import RankPath, RankPaths, TreeShape, config_tree_shape, node_parents, rank_paths, round_tree

__all__ = [
    "ERR_OK",
    "ERR_TOKENS",
    "SEL_FALLBACK",
    "SEL_PARENTS",
    "BatchResult",
    "MatrixStack",
    "RankPath",
    "RankPaths",
    "RoundBatch",
    "StopCode",
    "TreeShape",
    "config_tree_shape",
    "empty_result",
    "expanded_nodes",
    "node_parents",
    "rank_paths",
    "rebuilt_levels",
    "replay_batch",
    "replayed_by_shape",
    "round_tree",
]
