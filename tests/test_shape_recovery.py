"""Synthetic dumps from a known acceptance model: the search recovers the true optimum, and the
prediction agrees with a replay of fresh dumps made with the recommended config."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pytest

from analysis.shapes.paths import engine_paths
from analysis.shapes.recommend import Measured, compare_predictions
from analysis.shapes.search import search_shapes
from replay.core.config import TreeConfig
from replay.testing.replayer import replay_directory
from replay.testing.stats_reference import collect_visits, estimate_model
from replay.testing.synth import write_synthetic_run
from tests.reference_runs import recommend, subtree_measure
from tests.shape_builders import model_from_hits

# Non-separable in (depth, rank), so no two nodes of a level tie; draft probabilities equal to the
# hit rows make the engine's path-probability selection rank nodes as the model does.
HIT = np.array(
    [
        [0.62, 0.2, 0.08, 0.04, 0.02, 0.01, 0.005, 0.002],
        [0.72, 0.12, 0.05, 0.03, 0.02, 0.01, 0.005, 0.002],
        [0.5, 0.28, 0.1, 0.04, 0.02, 0.01, 0.005, 0.002],
    ]
)
WIDE = TreeConfig.from_lists([[6], [3, 3, 3], [2, 2, 2]], [1, 3, 3])
BUDGET = 4  # true optimum [2]|[1]|[1] (E 1.490) vs the runner-up at 1.415: clearly separated


@pytest.fixture(autouse=True, scope="module")
def no_fsync():
    # thousands of small files in a temporary directory: durability is not under test here
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield


@pytest.fixture(scope="module")
def wide_replay(tmp_path_factory, no_fsync):
    out = tmp_path_factory.mktemp("wide")
    write_synthetic_run(out, WIDE, 1500, seed=3, hit=HIT, draft_probs=HIT, cols=8)
    return replay_directory(out)


@pytest.mark.slow
def test_estimate_matches_known_model(wide_replay):
    model = estimate_model(collect_visits(wide_replay.results))
    assert model.num_rounds == 1500
    for d in range(3):
        # 27 cells: an individual 95% interval may miss, so check width and closeness instead
        assert np.all(model.lo[d, 0, :3] <= model.hi[d, 0, :3]) and np.all(
            model.hi[d, 0, :3] - model.lo[d, 0, :3] < 0.25
        )
        assert np.abs(model.p[d, 0, :3] - HIT[d, :3]).max() < 0.06


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[0] == 0:
        return float("nan"), float("nan")
    se = float(arr.std(ddof=1) / math.sqrt(arr.shape[0])) if arr.shape[0] > 1 else float("inf")
    return float(arr.mean()), se


def test_search_recovers_true_optimum(wide_replay):
    truth = search_shapes(model_from_hits(HIT), BUDGET, 3).by_block_efficiency
    assert truth[0].expected_accepted - truth[1].expected_accepted > 0.05  # the test's premise
    model = estimate_model(collect_visits(wide_replay.results))
    found = search_shapes(model, BUDGET, 3).by_block_efficiency[0]
    assert found.exact
    assert found.config == truth[0].config
    assert set(found.paths) == set(truth[0].paths)


@pytest.mark.slow
def test_prediction_agrees_with_fresh_replay(wide_replay, tmp_path):
    model = estimate_model(collect_visits(wide_replay.results))
    best = search_shapes(model, BUDGET, 3).by_block_efficiency[0]

    def measure(cfg: TreeConfig) -> Measured:
        # an independent measurement: new dumps under the recommended config, replayed exactly
        out = tmp_path / cfg.short().replace("|", "_")
        write_synthetic_run(out, cfg, 1500, seed=99, hit=HIT, draft_probs=HIT, cols=8)
        rep = replay_directory(out)
        tree_sets = {frozenset(_paths(r)) for r in rep.results}
        assert tree_sets == {frozenset(engine_paths(cfg, model))}  # the engine built the predicted tree
        mean, se = mean_se([r.acceptance.accepted_length for r in rep.results])
        return Measured(mean, se, len(rep.results), "fresh synthetic run")

    # A 95% agreement check fails 5% of the time by design; with these fixed seeds it is a
    # regression test (calibration over 12 seeds: z-scores of the prediction mean -0.08, sd 0.97).
    (row,) = compare_predictions(model, [best], measure, bootstrap=100)
    assert row.measured is not None and row.agree, row.to_json()
    assert abs(row.error) < 0.1


@pytest.mark.slow
def test_recommend_end_to_end_recorded_rows_agree(wide_replay):
    rec = recommend([wide_replay], BUDGET, bootstrap=60)
    recorded = [c for c in rec.comparisons if c.label.startswith("recorded")]
    assert len(recorded) == 2 and all(c.agree for c in recorded)
    # contained shapes are replayed exactly from the wide dump (replay.testing.subtree_walk)
    contained = [c for c in rec.comparisons if c.label.startswith("contained#")]
    assert contained and all(c.measured is not None and c.measured.decided and c.agree for c in contained)
    measure = subtree_measure(wide_replay.results, wide_replay.tree)
    m = measure(TreeConfig.from_lists([[3]]))
    assert m is not None and m.decided and m.mean_accepted == pytest.approx(HIT[0, :3].sum(), abs=0.04)


def _paths(res):
    from replay.testing.stats_reference import round_paths

    return [p for p in round_paths(res) if p]
