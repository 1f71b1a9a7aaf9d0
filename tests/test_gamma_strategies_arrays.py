"""simulate_strategy_arrays (numpy over rounds) against simulate_strategy (the walk, round by round)
on random per-gamma outcomes: one trajectory, ranges of accepted lengths, undecided rounds, the
envelope past max_states, EMA windows 1 and > 1."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.compare.gamma_strategies import STRATEGY_NAMES, GammaOutcomes, _walk_table, simulate_strategy_arrays
from analysis.cost.model import CostModel
from replay.core.config import TreeConfig
from replay.testing.compare_reference import gamma_outcomes, simulate_strategy

CFG = TreeConfig.from_lists([[4], [2, 1], [1, 1], [1, 1]], [1, 2, 2, 2])  # gamma 4
COST = CostModel.from_json({"tokens": [1, 8, 32], "verify_s": [0.013, 0.0151, 0.0233], "draft_step_s": 0.0037})


def random_outcomes(rng: np.random.Generator, rounds: int, ranged: float, undecided: float) -> GammaOutcomes:
    """Per round and gamma g: L in [0, g]; a range of lengths with probability ``ranged``; not decided
    with probability ``undecided`` (a range is never decided); steps_lo <= steps_hi <= g."""
    G = CFG.gamma
    gam = np.arange(1, G + 1)[:, None]
    lower = rng.integers(0, G + 1, (G, rounds)) % (gam + 1)
    wide = rng.random((G, rounds)) < ranged
    upper = np.minimum(gam, lower + wide * rng.integers(1, 3, (G, rounds)))
    decided = (upper == lower) & (rng.random((G, rounds)) >= undecided)
    steps_hi = np.minimum(gam, np.maximum(lower, 1) + rng.integers(0, 2, (G, rounds)))
    steps_lo = np.maximum(1, steps_hi - (rng.random((G, rounds)) < 0.2))
    nodes = np.asarray([0, 4, 7, 9, 11], dtype=np.int64)
    return GammaOutcomes(decided, lower, upper, steps_lo, steps_hi, nodes[steps_lo], nodes[steps_hi])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "ranged,undecided",
    [(0.0, 0.0), (0.0, 0.01), (0.002, 0.0), (0.05, 0.05), (0.5, 0.3)],
)
def test_arrays_equal_the_walk(seed, ranged, undecided):
    rng = np.random.default_rng(seed)
    outs = random_outcomes(rng, int(rng.integers(0, 700)), ranged, undecided)
    walked = list(outs.rounds())
    assert gamma_outcomes(walked, CFG.gamma).lower.tolist() == outs.lower.tolist()  # the two forms agree
    for strategy in STRATEGY_NAMES:
        for window in (1, 3):
            for max_states in (4096, 3):
                want = simulate_strategy(walked, CFG, strategy, COST, window, max_states)
                got = simulate_strategy_arrays(outs, CFG, strategy, COST, window, max_states)
                assert got == want, (strategy, window, max_states)


def test_one_trajectory_is_exact_and_long():
    """Every round decided: the result is exact, its trajectory the walk's, over many chunks."""
    rng = np.random.default_rng(11)
    outs = random_outcomes(rng, 5_003, 0.0, 0.0)
    walked = list(outs.rounds())
    for strategy in STRATEGY_NAMES:
        got = simulate_strategy_arrays(outs, CFG, strategy, COST)
        assert got.exact and len(got.trajectory) == 5_003
        assert got == simulate_strategy(walked, CFG, strategy, COST)
    assert len(set(got.trajectory)) > 1  # the strategy did move gamma


@pytest.mark.parametrize("rounds", [0, 1, 2, 3, 15, 16, 17, 1_000, 1_024])
def test_walk_table_is_the_loop(rounds):
    rng = np.random.default_rng(rounds)
    step = rng.integers(1, 5, (4, rounds))
    g, want = 3, [3]
    for r in range(rounds):
        g = int(step[g - 1, r])
        want.append(g)
    assert _walk_table(step, 3).tolist() == want
