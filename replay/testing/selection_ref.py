"""The selection rule by a sort, one level at a time: the one test-side form of it. Every oracle
(replay/testing and tests/) orders a level through ``selection_order_ref`` / ``select_ref`` /
``ranks_before``, and replay.core.selection's top_k_columns (so every run-time form) is tested
against it; tests/test_tie_rule_once.py refuses a sort of selection keys anywhere else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replay.core import selection  # rank_ties read at call time: the tests patch it


def selection_order_ref(keys: Sequence[float], ties: Sequence[Any] | None = None) -> list[int]:
    """[l] level-local indices, highest key first, equal keys by rank_ties of ``ties`` ([l] int
    tree-order positions, or (parent slot, rank) pairs; default the index), equal ranks by index.
    keys: no NaN."""
    pos = range(len(keys)) if ties is None else [_position(t) for t in ties]
    rank = [selection.rank_ties(p) for p in pos]
    return sorted(range(len(keys)), key=lambda j: (-keys[j], rank[j], j))


def select_ref(keys: Sequence[float], heads: int, ties: Sequence[Any] | None = None) -> list[int]:
    """The ``heads`` level-local indices a step expands, in selection order (selection_order_ref)."""
    return selection_order_ref(keys, ties)[:heads]


def ranks_before(tie_a: Any, tie_b: Any) -> bool:
    """Of two nodes with equal keys, whether a is expanded before b (tree-order positions, or
    (parent slot, rank) pairs, as in selection_order_ref)."""
    return bool(selection.rank_ties(_position(tie_a)) < selection.rank_ties(_position(tie_b)))


def _position(tie: Any) -> int:
    """A tree-order position as one int: (parent slot, rank) pairs through tree_position."""
    return selection.tree_position(*tie) if isinstance(tie, tuple) else int(tie)
