"""The report's comparison and gamma strategies, replayed from one reading of the run, are those each
computes on its own (every config's outcomes are its own, whatever the others replayed with it)."""

import pandas as pd
import pytest

from analysis.compare.batch import ema_window_of, priced_comparison, simulate_run_strategies
from analysis.cost.source import run_pricing
from analysis.report.html import _comparisons
from analysis.report.options import ReportOptions, run_configs
from analysis.tables.runs import TABLES_METRICS, load_runs
from replay.core.config import TreeConfig


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
    _, tables, strategies = _comparisons([run], opts, pricing)
    alone, _ = priced_comparison(run, run_configs(run, opts), pricing[run.label], threshold, per_round=False)
    alone.insert(0, "run", run.label)
    pd.testing.assert_frame_equal(tables[0], alone)
    cost = pricing[run.label].cost
    sims = simulate_run_strategies(run, run.config, opts.strategies, cost, ema_window_of(run), threshold)
    st = pd.DataFrame([s.to_row(cost) for s in sims])
    st.insert(0, "run", run.label)
    pd.testing.assert_frame_equal(strategies[0], st)
