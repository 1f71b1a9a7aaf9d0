"""The selection rule (replay.core.selection): hand-derived orders, and every form against the scalar one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from replay.core.selection import (
    first_true,
    invalid_parents_columns,
    rank_major_key,
    rank_major_keys,
    select_top,
    selection_method,
    selection_order,
    top_k_columns,
)
from replay.core.vocab import SELECT_FALLBACK, SELECT_PARENTS, SELECT_PATH_PROB, SELECT_ROOT
from replay.io.rounds import Round
from replay.testing.rebuild import parents_are_valid
from replay.testing.replayer import replay_round
from replay.testing.selection_ref import selection_order_ref
from replay.testing.table_rows import node_facts
from tests.test_property import random_round

# Few distinct values so that ties are frequent; -0.0 equals 0.0, -inf is a valid key.
KEYS = [0.0, -0.0, math.log(0.5), math.log(0.25), -math.inf]


def test_highest_key_first_and_equal_keys_in_tree_order():
    # keys by index: 0:-1, 1:-0.5, 2:-1, 3:-0.5, 4:0 -> 4, then the two -0.5 (1, 3), then the two -1 (0, 2)
    assert selection_order([-1.0, -0.5, -1.0, -0.5, 0.0]) == [4, 1, 3, 0, 2]
    assert select_top([-1.0, -0.5, -1.0, -0.5, 0.0], 3) == [4, 1, 3]
    assert selection_order([-0.0, 0.0, -math.inf, 0.0]) == [0, 1, 3, 2]


def test_explicit_tie_order():
    # the level listed out of tree order: ties follow the given positions, not the list index
    assert selection_order([-1.0, -1.0, -2.0], ties=[(1, 0), (0, 1), (0, 0)]) == [1, 0, 2]
    with pytest.raises(ValueError, match="ties"):
        selection_order([0.0, 0.0], ties=[0])


def test_cannot_pick_more_heads_than_the_level_holds():
    with pytest.raises(ValueError, match="cannot pick 3 heads from a level of 2"):
        select_top([0.0, -1.0], 3)


def test_rank_major_fallback_reproduces_the_article():
    # Level 1: six children of the root (slot 0), ranks 0..5: topHead[1] = 2 takes A1, A2.
    assert select_top(rank_major_keys(range(6), [0] * 6), 2) == [0, 1]
    # Level 2 in tree order: B11, B12 (under A1, slot 0), B21, B22 (under A2, slot 1).
    # All rank-0 children first: B11, B21.
    assert select_top(rank_major_keys([0, 1, 0, 1], [0, 0, 1, 1]), 2) == [0, 2]
    assert selection_order(rank_major_keys([0, 1, 0, 1], [0, 0, 1, 1])) == [0, 2, 1, 3]


def test_rank_major_key_rejects_out_of_range_slots():
    with pytest.raises(ValueError, match="parent slot"):
        rank_major_key(0, -1)
    with pytest.raises(ValueError, match="parent slot"):
        rank_major_key(0, 1 << 20)


def test_selection_method_order_of_precedence():
    assert selection_method(0, True, True) == SELECT_ROOT
    assert selection_method(2, True, True) == SELECT_PARENTS
    assert selection_method(2, True, False) == SELECT_PARENTS
    assert selection_method(2, False, True) == SELECT_PATH_PROB
    assert selection_method(2, False, False) == SELECT_FALLBACK


def test_explicit_parents_must_be_distinct_level_nodes():
    assert parents_are_valid([3, 1], [1, 2, 3])
    assert not parents_are_valid([3, 3], [1, 2, 3])
    assert not parents_are_valid([0], [1, 2, 3])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=12))
def test_rank_major_key_orders_by_rank_then_parent_slot_then_tree_order(nodes):
    ranks, slots = zip(*nodes)
    want = sorted(range(len(nodes)), key=lambda j: (ranks[j], slots[j], j))
    assert selection_order(rank_major_keys(ranks, slots)) == want
    assert selection_order_ref(rank_major_keys(ranks, slots)) == want


@st.composite
def levels(draw):
    """(keys [L, C] float64, k): C rounds of one level, keys from a few values."""
    n = draw(st.integers(1, 9))
    c = draw(st.integers(1, 6))
    keys = np.array([[draw(st.sampled_from(KEYS)) for _ in range(c)] for _ in range(n)], dtype=np.float64)
    return keys, draw(st.integers(1, n))


@settings(max_examples=300, deadline=None)
@given(levels())
def test_vectorised_top_k_matches_the_sort(case):
    keys, k = case
    col = np.arange(keys.shape[1])
    got = top_k_columns(keys, k, col)
    for c in range(keys.shape[1]):
        assert got[:, c].tolist() == selection_order_ref(keys[:, c].tolist())[:k], f"column {c}"


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda h: st.tuples(
            st.integers(1, 5), st.lists(st.lists(st.integers(-2, 6), min_size=h, max_size=h), min_size=1, max_size=6)
        )
    )
)
def test_vectorised_parent_check_matches_the_scalar_one(case):
    level, rounds = case
    local = np.array(rounds, dtype=np.int64).T  # [h, C]
    got = invalid_parents_columns(local, level)
    assert got.tolist() == [not parents_are_valid(r, range(level)) for r in rounds]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=5), min_size=1, max_size=9))
def test_first_true_is_the_first_true_row(rows):
    width = min(len(r) for r in rows)
    mask = np.array([r[:width] for r in rows], dtype=bool)  # [K, C]
    want = [next((k for k in range(mask.shape[0]) if mask[k, c]), mask.shape[0]) for c in range(width)]
    assert first_true(mask).tolist() == want


@settings(max_examples=150, deadline=None)
@given(random_round())
def test_level_ranks_put_the_expanded_nodes_first_in_selection_order(case):
    """analysis.tables.build ranks a level by the same rule that replay.testing.rebuild expanded it with."""
    cfg, steps, validate, logp, _, layout = case
    res = replay_round(Round.from_lists(steps, validate, step_logp=logp, layout=layout), cfg)
    facts = node_facts(res)
    for step in res.tree.expanded[1:]:
        assert facts.level_rank[step].tolist() == list(range(step.shape[0]))


@settings(max_examples=300, deadline=None)
@given(levels(), st.data())
def test_top_k_with_positions_matches_the_sort(case, data):
    """Rows out of tree order (positions given, ties among them) and absent nodes (NaN keys, never chosen)."""
    keys, k = case
    n, c = keys.shape
    pos = np.array([[data.draw(st.integers(0, 3)) for _ in range(c)] for _ in range(n)], dtype=np.int64)
    absent = np.array([[data.draw(st.booleans()) for _ in range(c)] for _ in range(n)])
    got = top_k_columns(np.where(absent, np.nan, keys), k, positions=pos)
    for j in range(c):
        rows = [i for i in selection_order_ref(keys[:, j].tolist(), pos[:, j].tolist()) if not absent[i, j]]
        want = (rows + [n] * k)[:k]
        assert got[:, j].tolist() == want, f"column {j}"


def test_one_column_is_the_sort():
    """select_top / selection_order (top_k_columns on one column) on explicit tree positions."""
    keys, ties = [-1.0, -1.0, -2.0, -1.0], [(1, 0), (0, 1), (0, 0), (1, 0)]
    assert selection_order(keys, ties) == selection_order_ref(keys, [2, 1, 0, 3]) == [1, 0, 3, 2]
