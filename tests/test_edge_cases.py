"""Hand-built rounds: each expected value is worked out by hand in the comment above it."""

import math

import numpy as np
import pytest

from replay.core.config import TreeConfig
from replay.core.tree import Tree, tree_layout
from replay.io.rounds import Round
from replay.testing.replayer import replay_round
from replay.util.errors import RoundError


def test_gamma_one_chain_root_hit_then_leaf_bonus():
    cfg = TreeConfig.from_lists([[3]])
    # root children 10, 11, 12; target at root wants 11 (rank 1), at node 2 (token 11) wants 99
    rnd = Round.from_lists([[[10, 11, 12]]], [[11], [0], [99], [0]])
    res = replay_round(rnd, cfg)
    assert res.acceptance.accepted_nodes == (2,)
    assert res.acceptance.bonus_token == 99
    assert res.acceptance.bonus_kind == "leaf_bonus"
    assert res.acceptance.committed_tokens == (11, 99)


def test_gamma_one_parents_layout_miss_gives_correction():
    cfg = TreeConfig.from_lists([[2]])
    rnd = Round.from_lists([[[10, 11]]], [[42]])  # one row: the root's
    res = replay_round(rnd, cfg)
    assert res.layout == "parents"
    assert res.acceptance.accepted_length == 0
    assert res.acceptance.bonus_token == 42 and res.acceptance.bonus_kind == "correction"
    assert res.acceptance.committed_tokens == (42,)


def test_early_stop_round_with_fewer_steps_is_valid():
    cfg = TreeConfig.from_lists([[2], [1, 1], [1, 1]])
    # only 2 of 3 steps ran: nodes 1,2 (level 1), 3,4 (level 2); all layout needs 5 rows
    rnd = Round.from_lists([[[5, 6]], [[7], [8]]], [[6], [1], [8], [1], [31]])
    res = replay_round(rnd, cfg)
    assert res.tree.num_steps == 2 and res.tree.num_nodes == 4
    # root wants 6 → node 2; node 2 wants 8 → node 4 (a leaf); node 4's row says 31
    assert res.acceptance.accepted_nodes == (2, 4)
    assert res.acceptance.committed_tokens == (6, 8, 31)


def test_same_token_under_two_parents_follows_only_the_accepted_branch():
    cfg = TreeConfig.from_lists([[2], [1, 1]])
    # both branches have child token 50; the root picks node 2, so the hit is node 4, not node 3
    rnd = Round.from_lists([[[5, 6]], [[50], [50]]], [[6], [50], [50]])  # parents layout: R, n1, n2
    res = replay_round(rnd, cfg)
    assert res.acceptance.accepted_nodes == (2, 4)
    assert res.tree.tokens.tolist() == [-1, 5, 6, 50, 50]


def test_non_uniform_topkspec_and_extra_columns_and_padding_rows():
    cfg = TreeConfig.from_lists([[3], [3, 2, 1]], [1, 3])
    step0 = [[1, 2, 3, 90, 91]]  # two extra recorded columns
    step1 = [[11, 12, 13, 92], [21, 22, 93, 94], [31, 95, 96, 97], [-1, -1, -1, -1], [-1, -1, -1, -1]]
    # tree: 1,2,3 | 11,12,13 (under 1), 21,22 (under 2), 31 (under 3) = nodes 4..9
    validate = [[3], [0], [0], [31], [-1]]  # parents layout R,1,2,3 then a padding row
    res = replay_round(Round.from_lists([step0, step1], validate), cfg)
    assert res.tree.num_nodes == 9
    assert res.tree.parents.tolist() == [-1, 0, 0, 0, 1, 1, 1, 2, 2, 3]
    assert res.layout == "parents"
    assert res.acceptance.accepted_nodes == (3, 9)
    assert res.acceptance.bonus_token is None  # node 9 is a leaf: no parents-layout row
    assert res.rebuilt.candidates.shape == (4, 5)


def test_duplicate_sibling_tokens_resolve_to_lowest_rank():
    cfg = TreeConfig.from_lists([[3]])
    rnd = Round.from_lists([[[7, 7, 8]]], [[7], [1], [2], [3]])
    assert replay_round(rnd, cfg).acceptance.accepted_nodes == (1,)


def test_path_probability_selection_and_tie_by_tree_order():
    cfg = TreeConfig.from_lists([[3], [1]], [1, 1])
    half = math.log(0.5)
    # nodes 1,2,3 have log-probs ln .25, ln .5, ln .5 → tie between 2 and 3: tree order picks 2
    lp0 = [[math.log(0.25), half, half]]
    rnd = Round.from_lists([[[1, 2, 3]], [[40]]], [[2], [0], [40], [0], [0]], step_logp=[lp0, [[0.0]]])
    res = replay_round(rnd, cfg)
    assert res.tree.expanded[1].tolist() == [2]
    assert res.rebuilt.selection_summary == "path_probability"
    assert res.acceptance.accepted_nodes == (2, 4)
    assert res.tree.logprobs[4] == pytest.approx(half)


def test_explicit_parents_win_and_disagreement_is_reported():
    cfg = TreeConfig.from_lists([[2], [1]], [1, 1])
    # scores say node 1 (p .6) is best, the dump's parents say node 2 was expanded
    rnd = Round.from_lists(
        [[[1, 2]], [[9]]], [[2], [9]], step_logp=[[[math.log(0.6), math.log(0.4)]], [[0.0]]], step_parents=[[0], [2]]
    )
    res = replay_round(rnd, cfg)
    assert res.tree.parents.tolist() == [-1, 0, 0, 2]
    assert any("differ from path-probability" in n for n in res.notes)
    assert res.acceptance.accepted_nodes == (2, 3)


def test_fallback_orders_rank_zero_children_first():
    # level 2 nodes: n3 (p1 r0), n4 (p1 r1), n5 (p2 r0), n6 (p2 r1): fallback picks n3, n5
    cfg = TreeConfig.from_lists([[2], [2, 2], [1, 1]], [1, 2, 2])
    rnd = Round.from_lists([[[1, 2]], [[3, 4], [5, 6]], [[7], [8]]], [[2], [0], [5], [0], [8]])
    res = replay_round(rnd, cfg)
    assert res.tree.expanded[2].tolist() == [3, 5]
    assert res.acceptance.accepted_nodes == (2, 5, 8)


def test_config_dump_disagreement_is_a_round_error():
    cfg = TreeConfig.from_lists([[2], [1, 1]])
    with pytest.raises(RoundError, match=r"draft_step_1 has 1 row\(s\) but topHead\[1\] = 2"):
        replay_round(Round.from_lists([[[1, 2]], [[3]]], [[1], [0], [0]]), cfg)
    with pytest.raises(RoundError, match="needs 2"):
        replay_round(Round.from_lists([[[1]], [[3], [4]]], [[1], [0], [0]]), TreeConfig.from_lists([[2], [1, 1]]))
    with pytest.raises(RoundError, match="4 draft steps but gamma = 3"):
        replay_round(Round.from_lists([[[1]]] * 4, [[1]] * 5), TreeConfig.from_lists([[1], [1], [1]]))


def test_ambiguous_validate_rows_need_a_stated_layout():
    cfg = TreeConfig.from_lists([[2], [1, 1]])  # parents layout 3 rows, all layout 5 rows
    rnd = Round.from_lists([[[1, 2]], [[3], [4]]], [[1], [3], [0], [0]])
    with pytest.raises(RoundError, match="expected 3 .* or 5"):
        replay_round(rnd, cfg)
    # a stated layout explains no extra row: one that is not padding skips the round
    stated = Round.from_lists([[[1, 2]], [[3], [4]]], [[1], [3], [0], [0]], layout="parents")
    with pytest.raises(RoundError, match="4 row.s. that are not padding, 1 more than the parents layout"):
        replay_round(stated, cfg)
    padded = Round.from_lists([[[1, 2]], [[3], [4]]], [[1], [3], [0], [-1]], layout="parents")
    assert replay_round(padded, cfg).acceptance.accepted_nodes == (1, 3)


def test_dynamic_tree_takes_shape_from_dump():
    cfg = TreeConfig.from_lists([[2], [2, 2]], [1, 2], tree_type=1)
    # the engine expanded only one node at step 1 (second row is padding) with width 1 (PAD beyond)
    rnd = Round.from_lists([[[1, 2]], [[5, -1], [-1, -1]]], [[1], [5], [0], [0], [-1]])
    res = replay_round(rnd, cfg)
    assert res.tree.shape() == ((1, 1), ((2,), (1,)))
    assert res.acceptance.accepted_nodes == (1, 3)


def test_tree_layout_mask_matches_ancestor_definition():
    tree = Tree.from_lists([0, 1, 2, 3, 4, 5], [-1, 0, 0, 1, 1, 3])
    mask, pos, retrieve = tree_layout(tree.parents, tree.depths)
    for q in range(6):
        anc = set(tree.path_to(q))
        assert {k for k in range(6) if mask[q, k]} == anc
    assert pos.tolist() == [0, 1, 1, 2, 2, 3]
    leaves = {tuple(int(v) for v in row if v >= 0) for row in retrieve}
    assert leaves == {(0, 2), (0, 1, 4), (0, 1, 3, 5)}


def test_tree_rejects_parent_after_child():
    with pytest.raises(ValueError, match="earlier in tree order"):
        Tree(np.array([1, 2, 3]), np.array([-1, 2, 0]), np.array([0, 1, 1]), np.array([-1, 0, 0]), np.zeros(3), ())
