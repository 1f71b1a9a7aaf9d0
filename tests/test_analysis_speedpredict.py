"""analysis.speedpredict: predicted speedup from acceptance on calibration rounds and a cost curve,
the shape chosen, and the ceiling; every expectation worked out by hand from the formulas in the
module docstring."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.costmodel import CostModel
from analysis.shape_dumps import HOW_EXACT, Measured
from analysis.speedpredict import (
    all_accepted_speedup, best_prediction, ceiling, chains, least_verify_s, nondecreasing, predict, prediction_lines,
)
from replay.config import TreeConfig
from replay.config_grammar import parse_spec

# t_verify(1) = 0.5 s, (2) = 0.6, (4) = 1.0, (8) = 1.8; a draft step 0.2 s
COST = CostModel(np.array([1.0, 2.0, 4.0, 8.0]), np.array([0.5, 0.6, 1.0, 1.8]), 0.2, "test curve")
CALIB = parse_spec("6,2x2,1x1,1,1,1", "test").tree


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
    noisy = CostModel(np.array([1.0, 2.0, 3.0, 4.0, 8.0, 16.0]), np.array([0.85, 0.77, 0.75, 1.8, 3.7, 2.7]), 0.3, "noisy")
    fit = nondecreasing(noisy)
    # 1-3 pooled to their mean, 8 and 16 pooled to theirs; 4 stays
    assert fit.verify_s.tolist() == pytest.approx([0.79, 0.79, 0.79, 1.8, 3.2, 3.2])
    assert fit.draft_step_s == 0.3 and "non-decreasing" in fit.source
    assert nondecreasing(COST) is COST  # already monotone: unchanged
