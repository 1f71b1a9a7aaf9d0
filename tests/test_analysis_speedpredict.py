"""analysis.shapes.speedpredict: predicted speedup from acceptance on calibration rounds and a cost curve,
the shape chosen, and the ceiling; every expectation worked out by hand from the formulas in the
module docstring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.cost.model import CostModel
from analysis.shapes.dumps import HOW_EXACT, Measured, scan_run
from analysis.shapes.speedpredict import (
    all_accepted_speedup,
    best_prediction,
    ceiling,
    chains,
    leaf_stop_fractions,
    least_verify_s,
    nondecreasing,
    predict,
    predict_speedups,
    prediction_lines,
)
from replay.core.config import TreeConfig
from replay.core.config_grammar import parse_spec
from replay.core.vocab import STOP_LEAF
from replay.testing.replayer import replay_directory
from replay.util.errors import SpecReplayError

REAL = Path(__file__).resolve().parent.parent / "sample_dumps" / "qwen2.5-coder"

# t_verify(1) = 0.5 s, (2) = 0.6, (4) = 1.0, (8) = 1.8; a draft step 0.2 s
COST = CostModel(np.array([1.0, 2.0, 4.0, 8.0]), np.array([0.5, 0.6, 1.0, 1.8]), 0.2, "test curve")
CALIB = parse_spec("6,2x2,1x1,1,1,1", "test").tree
# the same target curve with draft forwards timed by token count: 1 -> 0.2 s, 2 -> 0.25, 4 -> 0.35, 8 -> 0.55
LIVE = CostModel(COST.tokens, COST.verify_s, 0.2, "test curve with draft times", np.array([0.2, 0.25, 0.35, 0.55]))


def cfg(text: str) -> TreeConfig:
    return parse_spec(text, "test").tree


def measured(accepted: float, rounds: int = 10, undecidable: int = 0) -> Measured:
    return Measured(accepted, 0.1, rounds, HOW_EXACT, undecidable, accepted, accepted)


def test_prediction_is_block_efficiency_times_t1_over_round_cost():
    # chain of 3: round = 3 draft steps + a forward over 4 tokens = 0.6 + 1.0 s; 1.8 tokens accepted
    p = predict(cfg("1,1,1"), measured(1.8), COST, CALIB)
    assert p.round_s == pytest.approx(1.6)
    assert p.speedup == pytest.approx(2.8 * 0.5 / 1.6)
    assert p.block_efficiency == pytest.approx(2.8) and p.rounds == 10 and p.refused is None
    # 2,1x1: 2 steps, 4 nodes -> forward over 5 tokens, interpolated 1.0 + 0.2 = 1.2 s
    q = predict(cfg("2,1x1"), measured(1.0), COST, CALIB)
    assert q.round_s == pytest.approx(0.4 + 1.2)
    assert q.speedup == pytest.approx(2.0 * 0.5 / 1.6)


def test_shapes_the_calibration_cannot_decide_are_refused_with_the_reason():
    wide = predict(cfg("7"), measured(0.5), COST, CALIB)
    assert wide.speedup is None and "not contained" in wide.refused
    dyn = predict(cfg("1,1,1@0.4"), measured(0.5), COST, CALIB)
    assert dyn.speedup is None and "gammaThreshold" in dyn.refused
    none = predict(cfg("1,1"), Measured(float("nan"), float("nan"), 0, HOW_EXACT, 4, 0.0, 2.0), COST, CALIB)
    assert none.speedup is None and none.undecidable == 4 and "decides" in none.refused
    assert "(not contained" in "\n".join(prediction_lines([wide]))


def test_the_best_prediction_wins_and_ties_go_to_the_smaller_shape():
    a = predict(cfg("1,1"), measured(1.0), COST, CALIB)  # 2 * 0.5 / (0.4 + 0.8) = 0.833
    b = predict(cfg("1,1,1"), measured(1.8), COST, CALIB)  # 0.875
    assert best_prediction([a, b]) is b
    tie = predict(cfg("2"), measured(1.0), COST, CALIB)  # 1 step, 2 nodes: 2 * 0.5 / (0.2 + 0.8) = 1.0
    chain = predict(cfg("1"), measured(0.6), COST, CALIB)  # 1.6 * 0.5 / (0.2 + 0.6) = 1.0
    assert tie.speedup == pytest.approx(chain.speedup)
    assert best_prediction([tie, chain]) is chain
    assert best_prediction([predict(cfg("7"), None, COST, CALIB)]) is None


def test_all_accepted_bound_by_hand_and_above_every_prediction():
    # depth 1: 2 * 0.5 / (0.2 + 0.6); depth 3: 4 * 0.5 / (0.6 + 1.0)
    assert all_accepted_speedup(COST, 1) == pytest.approx(1.0 / 0.8)
    assert all_accepted_speedup(COST, 3) == pytest.approx(2.0 / 1.6)
    with pytest.raises(ValueError):
        all_accepted_speedup(COST, 0)
    preds = [predict(c, measured(min(c.gamma, 1.9)), COST, CALIB) for c in chains(6)]
    c = ceiling(preds, COST)
    assert c.bound == pytest.approx(max(c.bound_by_depth)) and c.bound_depth == 1 + int(np.argmax(c.bound_by_depth))
    assert c.best is best_prediction(preds)
    assert c.bound >= c.best.speedup


def test_a_dip_in_a_measured_curve_keeps_the_bound_a_bound():
    # noisy: 5 tokens timed faster than 2; a depth-1 round (2 tokens) may cost no more than the dip
    noisy = CostModel(np.array([1.0, 2.0, 5.0, 8.0]), np.array([0.5, 0.9, 0.7, 1.2]), 0.1, "noisy")
    assert least_verify_s(noisy, 2) == pytest.approx(0.7)
    assert all_accepted_speedup(noisy, 1) == pytest.approx(2 * 0.5 / (0.1 + 0.7))
    wide = predict(cfg("4"), measured(1.0), noisy, CALIB)  # 1 step, forward over 5 tokens: 2 * 0.5 / 0.8
    assert wide.speedup == pytest.approx(all_accepted_speedup(noisy, 1))


def test_a_noisy_curve_is_fitted_non_decreasing_by_pooling_violators():
    noisy = CostModel(
        np.array([1.0, 2.0, 3.0, 4.0, 8.0, 16.0]), np.array([0.85, 0.77, 0.75, 1.8, 3.7, 2.7]), 0.3, "noisy"
    )
    fit = nondecreasing(noisy)
    # 1-3 pooled to their mean, 8 and 16 pooled to theirs; 4 stays
    assert fit.verify_s.tolist() == pytest.approx([0.79, 0.79, 0.79, 1.8, 3.2, 3.2])
    assert fit.draft_step_s == 0.3 and "non-decreasing" in fit.source
    assert nondecreasing(COST) is COST  # already monotone: unchanged


def test_a_live_round_pays_a_two_token_catch_up_after_a_leaf_and_one_forward_per_expansion_step():
    # chain 1,1,1, half the rounds after a path ending at a leaf: catch-up 0.5 * 0.2 + 0.5 * 0.25,
    # then two one-token steps (0.2 each), then the target over 4 tokens (1.0)
    assert LIVE.live_draft_cost((1, 1, 1), 0.5) == pytest.approx(0.225 + 0.4)
    assert LIVE.live_round_cost((1, 1, 1), 3, 0.5) == pytest.approx(1.625)
    p = predict(cfg("1,1,1"), measured(1.8), LIVE, CALIB, leaf_stops=0.5)
    assert p.round_s == pytest.approx(1.625) and p.speedup == pytest.approx(2.8 * 0.5 / 1.625) and p.leaf_stops == 0.5
    # the article's tree (topHead 1, 2, 2; 12 nodes), a quarter after a leaf: catch-up 0.75 * 0.2 +
    # 0.25 * 0.25, two steps over 2 heads (0.25 each), the target over 13 tokens: extrapolated
    # from (4, 1.0) and (8, 1.8), 0.2 s a token, 1.8 + 5 * 0.2 = 2.8
    assert LIVE.live_round_cost((1, 2, 2), 12, 0.25) == pytest.approx(0.2125 + 0.5 + 2.8)
    # a draft forward over 3 tokens is interpolated between 2 and 4
    assert LIVE.t_draft(3) == pytest.approx(0.30)


def test_without_draft_times_every_draft_forward_is_one_step_as_before():
    for top_head, nodes in (((1, 1, 1), 3), ((1, 2, 2), 12), ((1,), 4)):
        for f in (0.0, 0.4, 1.0):
            assert COST.live_round_cost(top_head, nodes, f) == pytest.approx(COST.round_cost(len(top_head), nodes))
    with pytest.raises(ValueError, match="fraction"):
        COST.live_draft_cost((1, 1), 1.5)


def test_draft_times_are_read_written_and_checked_with_the_curve():
    body = {"tokens": [1, 2], "verify_s": [0.5, 0.6], "draft_step_s": 0.2, "draft_s": [0.2, 0.3]}
    c = CostModel.from_json(body, "inline")
    assert c.t_draft(2) == pytest.approx(0.3) and c.to_json() == body
    assert CostModel.from_json({**body, "draft_s": None}).draft_s is None
    assert "draft_s" not in CostModel.from_json({k: v for k, v in body.items() if k != "draft_s"}).to_json()
    with pytest.raises(SpecReplayError, match="'draft_s' must be positive numbers, one per entry of 'tokens'"):
        CostModel.from_json({**body, "draft_s": [0.2]}, "short")
    assert c.with_draft_step(0.1).draft_s is None  # an override prices every draft forward the same


def test_the_fit_pools_the_draft_times_too():
    noisy = CostModel(
        np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 0.6, 0.7, 0.8]), 0.34, "noisy", np.array([0.34, 0.40, 0.30, 0.6])
    )
    fit = nondecreasing(noisy)
    assert (
        fit.draft_s.tolist() == pytest.approx([0.34, 0.35, 0.35, 0.6])
        and fit.verify_s.tolist() == noisy.verify_s.tolist()
    )
    assert fit.draft_step_s == 0.34 and "verify and draft times" in fit.source


@pytest.mark.slow
def test_leaf_stops_are_the_rounds_whose_path_ends_at_a_leaf():
    path = str(REAL / "chain4")
    rounds = replay_directory(path).results
    lengths = [r.acceptance.accepted_length for r in rounds]
    dump = scan_run(path)
    # a contained chain of depth d accepts min(L, d) of the recorded chain's L: it ends at its leaf when L >= d
    expected = [sum(L >= d for L in lengths) / len(lengths) for d in (1, 2, 4)]
    assert leaf_stop_fractions(dump, [cfg("1"), cfg("1,1"), cfg("1,1,1,1")]) == pytest.approx(expected)
    assert 0 < expected[2] < expected[0] < 1  # the dump holds both kinds of round
    assert leaf_stop_fractions(dump, [cfg("2")]) == [0.0]  # not contained: nothing to replay
    # the recorded tree itself: the replayer's own stop on each round
    art = str(REAL / "article")
    stops = [r.acceptance.stop == STOP_LEAF for r in replay_directory(art).results]
    assert leaf_stop_fractions(scan_run(art), [cfg("6,2x2,1x1")]) == pytest.approx([sum(stops) / len(stops)])


@pytest.mark.slow
def test_predictions_from_a_dump_price_each_shape_with_its_own_leaf_stops():
    path = str(REAL / "chain4")
    lengths = [r.acceptance.accepted_length for r in replay_directory(path).results]
    f = sum(L >= 2 for L in lengths) / len(lengths)
    a = sum(min(L, 2) for L in lengths) / len(lengths)
    [p] = predict_speedups(scan_run(path), [cfg("1,1")], LIVE)
    round_s = (1 - f) * 0.2 + f * 0.25 + 0.2 + 0.8  # catch-up, one step, the target over 3 tokens (0.6 + 1.0) / 2
    assert p.accepted == pytest.approx(a) and p.leaf_stops == pytest.approx(f)
    assert p.speedup == pytest.approx((a + 1) * 0.5 / round_s)
