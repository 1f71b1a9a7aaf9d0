"""Golden test: the article's round (DESIGN.md's node table, path, lengths), node by node."""

from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig, load_config
from replay.io.rounds import Round
from replay.testing.replayer import replay_directory, replay_round

SAMPLE = Path(__file__).resolve().parent.parent / "sample_dumps" / "article_round"

# DESIGN.md, "Tree order (node numbering)"
NAMES = ["R", "A1", "A2", "A3", "A4", "A5", "A6", "B11", "B12", "B21", "B22", "C111", "C211"]
TOKENS = [43107, 41824, 43744, 44298, 34051, 28380, 37539, 41760, 35740, 45315, 41760, 22870, 22870]
PARENTS = [-1, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 7, 9]
DEPTHS = [0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3]
RANKS = [-1, 0, 1, 2, 3, 4, 5, 0, 1, 0, 1, 0, 0]


def test_article_sample_rebuilds_design_tree_node_by_node():
    rep = replay_directory(SAMPLE)
    assert rep.skipped == ()
    assert len(rep.results) == 1
    res = rep.results[0]
    assert res.key == (124, 140)
    tree = res.tree
    assert tree.names() == NAMES
    assert tree.tokens.tolist() == TOKENS
    assert tree.parents.tolist() == PARENTS
    assert tree.depths.tolist() == DEPTHS
    assert tree.ranks.tolist() == RANKS
    assert tree.num_nodes == 12 == load_config(SAMPLE / "config.json").tree.num_nodes
    assert [e.tolist() for e in tree.expanded] == [[0], [1, 2], [7, 9]]


def test_article_sample_accepts_one_path_without_bonus():
    res = replay_directory(SAMPLE).results[0]
    acc = res.acceptance
    assert res.layout == "parents" and res.layout_source == "detected"
    assert acc.accepted_tokens == (41824, 41760, 22870)
    assert acc.accepted_nodes == (1, 7, 11)
    assert acc.accepted_length == 3
    assert acc.bonus_token is None
    assert acc.committed_tokens == (41824, 41760, 22870)
    assert res.rebuilt.selection_summary == "rank_major_fallback"
    # the other branch A2 -> 45315 -> 22870 also matches locally and must not count
    assert 9 not in acc.accepted_nodes and 12 not in acc.accepted_nodes


def test_article_round_in_all_layout_commits_four_tokens():
    """With one target row per node the leaf bonus is known: 4 tokens committed."""
    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
    bonus = 777
    target = {0: 41824, 1: 41760, 2: 45315, 7: 22870, 9: 22870, 11: bonus}
    validate = [[target.get(u, 5)] for u in range(13)]
    rnd = Round.from_lists(
        [[[41824, 43744, 44298, 34051, 28380, 37539]], [[41760, 35740], [45315, 41760]], [[22870], [22870]]],
        validate,
        key=(124, 140),
        root_token=43107,
    )
    res = replay_round(rnd, cfg)
    assert res.layout == "all"
    assert res.acceptance.accepted_length == 3
    assert res.acceptance.bonus_token == bonus
    assert res.acceptance.bonus_kind == "leaf_bonus"
    assert res.acceptance.committed_tokens == (41824, 41760, 22870, bonus)
    assert np.array_equal(res.tree.tokens, TOKENS)
