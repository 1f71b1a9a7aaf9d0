"""The report's comparison and gamma strategies, replayed from one reading of the run, are those each
computes on its own (every config's outcomes are its own, whatever the others replayed with it); the
recommendation's exact measurements taken from the comparison's walks are those it makes itself."""

import pandas as pd
import pytest

from analysis.compare.batch import ema_window_of, priced_comparison, simulate_run_strategies
from analysis.cost.source import run_pricing
from analysis.report.html import _comparisons
from analysis.report.options import ReportOptions, run_configs
from analysis.shapes.dumps import scan_run
from analysis.tables.runs import TABLES_METRICS, load_runs
from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.testing.batch_synth import synth_run
from tests.test_streamed_metrics import packed

DYNAMIC = "a packed run of a dynamic tree"


@pytest.mark.parametrize(
    ("directory", "configs"),
    [
        ("sample_dumps/synthetic_article", None),
        ("sample_dumps/qwen2.5-coder/wide", None),
        ("sample_dumps/qwen2.5-coder/deep", [TreeConfig.from_lists([[3], [1, 1]])]),
    ],
)
@pytest.mark.parametrize("threshold", [None, 0.3])
def test_the_tables_are_those_computed_alone(directory: str, configs, threshold) -> None:
    (run,) = load_runs([directory], tables=TABLES_METRICS, progress=False)
    opts = ReportOptions(configs=configs, gamma_threshold=threshold, strategies=(0, 1, 2, 3, 4))
    pricing = {run.label: run_pricing(run.replay, run.label, None)}
    _, tables, strategies, _ = _comparisons([run], opts, pricing)
    alone, _ = priced_comparison(run, run_configs(run, opts), pricing[run.label], threshold, per_round=False)
    alone.insert(0, "run", run.label)
    pd.testing.assert_frame_equal(tables[0], alone)
    cost = pricing[run.label].cost
    sims = simulate_run_strategies(run, run.config, opts.strategies, cost, ema_window_of(run), threshold)
    st = pd.DataFrame([s.to_row(cost) for s in sims])
    st.insert(0, "run", run.label)
    pd.testing.assert_frame_equal(strategies[0], st)


@pytest.mark.parametrize(
    "directory",
    ["sample_dumps/synthetic_article", "sample_dumps/qwen2.5-coder/wide", "sample_dumps/article_round", DYNAMIC],
)
@pytest.mark.parametrize("threshold", [None, 0.3])
def test_the_walks_the_recommendation_takes_are_its_own(directory: str, threshold, tmp_path) -> None:
    if directory == DYNAMIC:  # its own config's outcome in the comparison is the replay's, not a walk
        cfg = TreeConfig.from_lists([[3], [2, 1], [1, 1]], [1, 2, 2], tree_type=TREE_DYNAMIC)
        directory = packed(tmp_path, "dynamic", synth_run(cfg, 300, seed=5, early_stop_rate=0.1), cfg)
    (run,) = load_runs([directory], tables=TABLES_METRICS, progress=False)
    opts = ReportOptions(gamma_threshold=threshold)
    pricing = {run.label: run_pricing(run.replay, run.label, None)}
    *_, walked = _comparisons([run], opts, pricing)
    known = walked[run.label]
    assert bool(known) == (threshold is None)  # a simulated early stop is not the walk recommend measures
    assert (run.config in known) == (threshold is None and run.config.tree_type != TREE_DYNAMIC)
    configs = run_configs(run, opts)
    given = scan_run(directory, run.options, loaded=run, known=known)
    own = scan_run(directory, run.options, loaded=run)
    assert given.measure_many(configs) == own.measure_many(configs)
    assert given.leaf_stops(configs) == own.leaf_stops(configs)
