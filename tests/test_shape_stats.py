"""The batch statistics pass (analysis.shapes.dumps.scan_run) counts exactly what the reference
(replay.testing.stats_reference.collect_visits over replayed RoundResults) counts, and the estimator and its bootstrap do what
docs/shape-search.md says, checked on hand-made tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.shapes.counts import MISS, ShapeStats, count_tables
from analysis.shapes.dumps import scan_run
from analysis.shapes.model import bootstrap, estimate_cells, model_from_stats
from replay.core.config import TreeConfig
from replay.testing.replayer import replay_directory
from tests.packed_runs import packed_synth_run
from tests.reference_runs import dump_from_replay

REAL = Path(__file__).resolve().parent.parent / "sample_dumps" / "qwen2.5-coder"


def totals(dump):
    st = dump.stats
    trees = {p: int(c) for p, c in zip(st.trees.paths, st.trees.counts.sum(axis=0))}
    s = st.stats
    return {
        "n": s.n.sum(axis=0),
        "k": s.k.sum(axis=0),
        "draft_sum": s.draft_sum,
        "draft_count": s.draft_count,
        "rounds": st.rounds,
        "accepted": (st.accepted_sum, st.accepted_sq),
        "nodes": st.nodes_sum,
        "trees": trees,
        "first": st.first_shape,
        "depth": s.max_tree_depth,
    }


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            x, y = a[key], b[key]
            shape = tuple(max(i, j) for i, j in zip(x.shape, y.shape))
            pad = lambda t: np.pad(t, [(0, s - d) for s, d in zip(shape, t.shape)])  # noqa: E731
            np.testing.assert_allclose(pad(x), pad(y), rtol=1e-9, err_msg=key)
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize(
    "path",
    [
        "sample_dumps/synthetic_article",
        "sample_dumps/article_round",
        *(str(REAL / n) for n in ("article", "wide", "deep", "chain4")),
    ],
)
def test_batch_statistics_equal_the_reference(path):
    assert_same(totals(scan_run(path)), totals(dump_from_replay(replay_directory(path))))


def test_batch_statistics_on_a_packed_run_with_early_stops(tmp_path):
    cfg = TreeConfig.from_lists([[4], [2, 2], [1, 1]], [1, 2, 2])
    out = packed_synth_run(tmp_path / "run", cfg, 3000, seed=4, early_stop_rate=0.2, block_rounds=1024)
    batch = scan_run(str(out))
    ref = dump_from_replay(replay_directory(out))
    assert batch.stats.rounds == 3000
    assert_same(totals(batch), totals(ref))


def test_estimator_pools_thin_rows_and_copies_empty_depths():
    """Hand-made tables: depth 0 root only; depth 1 rank-0 parent with 40 visits, rank-1 with 10
    (pooled: fewer than 30), depth 2 with 5 visits in all (no estimate)."""
    n = np.zeros((3, 2))
    k = np.zeros((3, 2, 2))
    n[0, 0], k[0, 0] = 100, [30, 50]  # the target prefers rank 1: kept, no smoothing
    n[1, 0], k[1, 0] = 40, [20, 8]
    n[1, 1], k[1, 1] = 10, [1, 6]
    n[2, 0], k[2, 0] = 5, [5, 0]
    p, n_used, pooled, src = estimate_cells(n, k, 30)
    assert p[0, 0].tolist() == [0.3, 0.5]
    assert p[1, 0].tolist() == [0.5, 0.2] and not pooled[1, 0]
    assert pooled[1, 1] and p[1, 1].tolist() == pytest.approx([21 / 50, 14 / 50]) and n_used[1, 1] == 50
    assert src.tolist() == [0, 1, 1]  # depth 2 copies depth 1
    stats = ShapeStats(
        n[None].astype(np.int64),
        k[None].astype(np.int64),
        np.array([100]),
        np.zeros((3, 2, 2)),
        np.zeros((3, 2, 2), np.int64),
        100,
        3,
        np.zeros((1, 3), np.int64),
        np.zeros((1, 3), np.int64),
    )
    model = model_from_stats(stats, 30)
    assert model.supported_depth == 2 and model.extrapolated.tolist() == [False, False, True]
    assert model.draft_logp is None  # no scores: the engine order falls back to the acceptance order


def test_count_tables_by_hand():
    group = np.array([0, 0, 1, 1])
    depth = np.array([0, 1, 0, 1])
    own = np.array([0, 2, 0, 1])
    hit = np.array([1, MISS, 0, 3])
    n, k = count_tables(group, depth, own, hit, 2, 2, 3)
    assert n[0, 0, 0] == 1 and n[0, 1, 2] == 1 and n[1, 0, 0] == 1 and n[1, 1, 1] == 1 and n.sum() == 4
    assert (
        k[0, 0, 0, 1] == 1 and k[1, 0, 0, 0] == 1 and k.sum() == 2
    )  # a miss and a rank beyond 3 columns count nothing


def test_bootstrap_resamples_groups():
    """Two groups with opposite rates: every resample is a mix of the two, and the spread matches
    the binomial over groups (a resample takes group A j times out of 2)."""
    n = np.array([[[100.0]], [[100.0]]])
    k = np.array([[[[80.0]]], [[[20.0]]]])
    stats = ShapeStats(
        n.astype(np.int64),
        k.astype(np.int64),
        np.array([50, 50]),
        np.zeros((1, 1, 1)),
        np.zeros((1, 1, 1), np.int64),
        100,
        1,
        np.zeros((2, 1), np.int64),
        np.zeros((2, 1), np.int64),
    )
    model = model_from_stats(stats, 30)
    assert model.p[0, 0, 0] == pytest.approx(0.5)
    boots = bootstrap(model, 2000, seed=1)
    values = set(np.round(boots.p[:, 0, 0, 0], 6).tolist())
    assert values <= {0.2, 0.5, 0.8}
    share = np.mean(boots.p[:, 0, 0, 0] == 0.5)
    assert abs(share - 0.5) < 0.05  # P(one of each) = 2 · 0.5 · 0.5
