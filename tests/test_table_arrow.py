"""report's tables/ built as pyarrow Tables from the batch arrays (analysis.tables.node_arrow,
analysis.tables.round_arrow) are the Tables ``pa.Table.from_pandas`` makes of the batch frames
(analysis.tables.batch.join_parts): types, values and pandas metadata, so the CSV and Parquet
files stay byte for byte what they were."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from analysis.tables.batch import batch_table_parts, join_parts
from analysis.tables.node_arrow import node_arrow_table
from analysis.tables.round_arrow import round_table
from analysis.tables.stream import _in_order_cells
from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.engine.runs import iter_run_parts, open_run
from replay.io.packed.pack import pack_batches
from replay.testing.batch_synth import synth_run, varied_run
from replay.testing.in_memory import batch_from_rounds
from tests.test_batch_property import runs

SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"
ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def assert_same_tables(batches, cfg: TreeConfig) -> None:
    parts = [batch_table_parts(batch, res, cfg, "r") for batch, res in batches]
    want = join_parts(parts)
    fast = [p for p in parts if p.rounds]
    if fast:
        (rounds, num_rounds), (nodes, num_nodes) = _in_order_cells(fast)
        got = [round_table(rounds), node_arrow_table([nodes])]
        assert (num_rounds, num_nodes) == (len(want[0]), len(want[1]))
    else:
        got = [want[0][:0], want[1][:0]]
    for g, w in zip(got, want):
        if not len(w):
            assert not len(g)
            continue
        w = pa.Table.from_pandas(w, preserve_index=False)
        assert g.schema.equals(w.schema, check_metadata=True), (g.schema, w.schema)
        assert g.equals(w)


@pytest.mark.parametrize(
    "name", ["synthetic_article", "article_round", "qwen2.5-coder/deep", "qwen2.5-coder/wide", "qwen2.5-coder/chain4"]
)
def test_sample_tables_are_from_pandas(name):
    run = open_run(SAMPLES / name)
    got = []
    for res, _, batch in iter_run_parts(run, 1, per_batch=lambda b, r, tree: b):
        if batch is not None:
            got.append((batch, res))
    assert_same_tables(got, run.tree)


@pytest.mark.parametrize(
    "make", [lambda: synth_run(ARTICLE, 300, seed=5, early_stop_rate=0.5), lambda: varied_run(ARTICLE, 300, seed=6)]
)
def test_packed_tables_are_from_pandas(make, tmp_path):
    pack_batches(make(), tmp_path / "run", block_rounds=40, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    run = open_run(tmp_path / "run")
    got = [(b, r) for r, _, b in iter_run_parts(run, 1, per_batch=lambda b, r, tree: b) if b is not None]
    assert_same_tables(got, run.tree)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_random_run_tables_are_from_pandas(case):
    """Random configs (static and dynamic), scores or not, parents or not, layouts, defects."""
    cfg, rounds = case
    assert_same_tables([(b, replay_batch(b, cfg, workers=1)) for b in batch_from_rounds(rounds)], cfg)
