"""Issue 15: a draft that ranks its tokens unlike the target (tests/shape_oracle.py: the target takes
the draft's rank 1 more often than its rank 0, and at depth 1 its preference depends on the parent's
rank). recommend's #1 shape must be worth, in truth, within 0.01 block efficiency of the best shape
the config language can express, found by brute force over every config with the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.shapes.recommend import recommend_runs
from replay.io.packed.pack import pack_batches
from replay.testing.selection_ref import select_ref
from tests.shape_builders import enumerate_configs
from tests.shape_oracle import COLS, HIT, RECORDED, synth_batch, true_probability, true_value

ROUNDS = 40_000


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    out = tmp_path_factory.mktemp("nonmonotone") / "run"
    manifest = {"config": RECORDED.to_json(), "layout": "all", "score_kind": "logprob"}
    pack_batches([synth_batch(ROUNDS, seed=5)], out, manifest=manifest)
    return str(out)


def brute_force(budget: int, depth: int):
    """(true value, config) of every expressible config, best first."""
    return sorted(
        ((true_value(c), c) for c in enumerate_configs(budget, depth, COLS, limit=10**6)), key=lambda t: -t[0]
    )


def acceptance_order_optimum(budget: int, depth: int):
    """The config an engine ranking nodes by acceptance (the old assumption) would be told to use:
    the best config when each level's expanded nodes are its most acceptable ones."""
    from tests.shape_oracle import engine_tree

    def value_if_acceptance_order(cfg):
        out, level = 0.0, [()]
        for i in range(cfg.gamma):
            order = select_ref([true_probability(p) for p in level], cfg.top_head[i])
            level = [level[j] + (r,) for j, w in zip(order, cfg.top_k_spec[i]) for r in range(w)]
            out += sum(true_probability(p) for p in level)
        return out

    assert engine_tree  # the real engine's tree is the draft-ordered one used by true_value
    return max(enumerate_configs(budget, depth, COLS, limit=10**6), key=value_if_acceptance_order)


@pytest.mark.slow
@pytest.mark.parametrize("budget", [6, 8, 12])
def test_first_shape_matches_the_true_optimum(packed, budget):
    ranked = brute_force(budget, 3)
    best_value = ranked[0][0]
    rec = recommend_runs([packed], budget=budget, bootstrap=50)
    first = rec.search.by_block_efficiency[0]
    assert first.exact
    assert true_value(first.config) >= best_value - 0.01, (
        first.config.short(),
        true_value(first.config),
        ranked[0][1].short(),
        best_value,
    )
    # its prediction is the truth within sampling error
    assert abs(first.expected_accepted - true_value(first.config)) < 0.02
    # the premise: ranking nodes by acceptance instead of the draft's order picks a worse shape here
    if budget == 12:
        wrong = acceptance_order_optimum(budget, 3)
        assert true_value(wrong) < best_value - 0.01


def test_estimates_are_unbiased_and_rows_kept_as_measured(packed):
    rec = recommend_runs([packed], budget=6, bootstrap=20)
    model = rec.model
    n = model.visits
    for d, q in [(0, 0), (1, 0), (1, 1), (2, 0)]:
        se = np.sqrt(HIT[d, q, :2] * (1 - HIT[d, q, :2]) / n[d, q])
        assert np.all(np.abs(model.p[d, q, :2] - HIT[d, q, :2]) < 4 * se), (d, q, model.p[d, q, :2], HIT[d, q, :2])
    assert model.p[0, 0, 1] > model.p[0, 0, 0]  # no smoothing into a decreasing row
    assert any("rank-1 candidate more often than its rank-0" in x for x in rec.notes)
    # every contained shape listed agrees with its exact replay
    measured = [c for c in rec.comparisons if c.measured is not None]
    assert measured and all(c.agree for c in measured), [c.to_json() for c in measured if not c.agree]
