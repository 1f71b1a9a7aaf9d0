"""The selection rule by a sort, one level at a time: the oracle that replay.core.selection's
top_k_columns (and so every run-time form) is tested against."""

from __future__ import annotations

from collections.abc import Sequence

from replay.core import selection  # rank_ties read at call time: the tests patch it


def selection_order_ref(keys: Sequence[float], ties: Sequence[int] | None = None) -> list[int]:
    """[l] level-local indices, highest key first, equal keys by rank_ties of ``ties`` ([l] int
    tree-order positions; default the index), equal ranks by index. keys: no NaN."""
    pos = range(len(keys)) if ties is None else ties
    rank = [selection.rank_ties(p) for p in pos]
    return sorted(range(len(keys)), key=lambda j: (-keys[j], rank[j], j))
