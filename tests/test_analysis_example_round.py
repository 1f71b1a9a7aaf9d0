"""The example round drawn per run: a typical failing round (analysis.report.example_round), by hand.

Hand rounds of tests/test_analysis_metrics.py (config [2]|[1], all layout): root row [10, 20, 30]
keeps A1 = 10, A2 = 20; A1's row [11, 12] keeps B11 = 11. A round's validate rows are R, A1, A2, B11.
"""

from __future__ import annotations

import pytest

from analysis.report.example_round import example_pick, typical_failing_pick
from replay.io.rounds import Round
from replay.testing.replayer import replay_round
from replay.util.errors import SpecReplayError
from tests.test_analysis_metrics import CFG, STEPS

LEAF_2 = [[10], [11], [21], [5]]  # R→10, A1→11: path A1, B11 (leaf), L = 2
LEAF_1 = [[20], [11], [22], [5]]  # R→20: path A2 (leaf), L = 1
MISS_0 = [[30], [11], [21], [5]]  # R→30 matches no child: mismatch at L = 0
MISS_1 = [[10], [12], [21], [5]]  # R→10, A1→12 matches no child: mismatch at L = 1
MISS_1_NOWHERE = [[10], [99], [21], [5]]  # as above, the target's token not even recorded


def rounds(*validates):
    return [
        replay_round(Round.from_lists(STEPS, v, key=(k, 100 + k), root_token=7, layout="all"), CFG)
        for k, v in enumerate(validates)
    ]


def summaries(res):
    """What the choice reads per round (a LabelledRun's round table gives the same)."""
    return (
        [r.acceptance.accepted_length for r in res],
        [r.acceptance.stop for r in res],
        [tuple(r.key) for r in res],
    )


def typical_failing_round(res):
    """(the picked RoundResult, why)."""
    pick, why = typical_failing_pick(summaries(res))
    return res[pick], why


def example_round(res, key=None):
    got = example_pick(summaries(res), key)
    return None if got is None else res[got[0]]


def test_typical_failing_round_is_the_middle_of_the_commonest_failure_length():
    res = rounds(LEAF_2, MISS_0, MISS_1, MISS_1_NOWHERE, LEAF_1, MISS_1)
    assert [r.acceptance.stop for r in res] == ["leaf", "mismatch", "mismatch", "mismatch", "leaf", "mismatch"]
    # failing rounds: keys 1 (L 0), 2, 3, 5 (L 1): L = 1 is the commonest; of keys 2, 3, 5 the middle is 3
    pick, why = typical_failing_round(res)
    assert pick.key == (3, 103)
    assert "4 of 6 rounds failed" in why and "accepting 1 token(s) (3 rounds)" in why


def test_ties_go_to_the_shorter_failure_and_even_counts_to_the_lower_middle():
    res = rounds(MISS_1, MISS_0, LEAF_2)
    pick, why = typical_failing_round(res)
    assert pick.key == (1, 101)  # L 0 and L 1 once each: the shorter, and the caption says it was a tie
    assert "accepting 0 token(s) (1 round; as many with length 1)" in why
    res = rounds(MISS_1, MISS_1_NOWHERE, MISS_1, MISS_1)
    assert typical_failing_round(res)[0].key == (1, 101)  # 4 rounds at L 1: index (4 - 1) // 2 = 1


def test_without_failures_a_typical_round_and_it_says_so():
    res = rounds(LEAF_2, LEAF_1, LEAF_1, LEAF_1)
    pick, why = typical_failing_round(res)
    assert pick.key == (2, 102)  # L 1 three times: the middle one
    assert why.startswith("no round failed")


def test_a_named_round_and_a_missing_one():
    res = rounds(LEAF_2, MISS_0)
    assert example_round(res, (0, 100)).key == (0, 100)
    assert example_round(res, (9, 9)) is None
    assert example_round(res).key == (1, 101)
    with pytest.raises(SpecReplayError, match="no rounds"):
        typical_failing_round([])
