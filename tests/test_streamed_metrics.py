"""The node metrics counted block by block (analysis.tables.runs.TABLES_METRICS: what stats and plot
load, so memory does not grow with a run's node rows) are the metrics of the whole node table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from analysis.tables.batch import (
    SLIM_ROUND_COLUMNS,
    batch_metric_parts,
    batch_table_parts,
    join_parts,
    join_slim,
)
from analysis.tables.build import Tables, build_tables
from analysis.tables.definitions import METRIC_TABLES
from analysis.tables.metrics import all_metrics, combine_node_counts
from analysis.tables.runs import TABLES_KEYS, TABLES_METRICS, TABLES_ROUNDS, load_run, with_node_counts
from analysis.tables.stream import write_run_tables
from replay.cli import main
from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import replay_batch
from replay.io.packed.pack import pack_batches
from replay.testing.batch_synth import synth_run, varied_run
from replay.testing.frame_counts import metric_parts_by_frame, metrics_by_frame
from replay.testing.in_memory import batch_from_rounds
from tests.test_batch_property import runs

SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"
ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def assert_same_metrics(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name in want:
        assert list(got[name].columns) == list(want[name].columns), name
        assert [str(t) for t in got[name].dtypes] == [str(t) for t in want[name].dtypes], name
        pd.testing.assert_frame_equal(got[name], want[name], check_exact=True, obj=name)


def packed(tmp_path: Path, name: str, batches, cfg: TreeConfig = ARTICLE) -> str:
    path = tmp_path / name
    pack_batches(batches, path, block_rounds=128, manifest={"config": cfg.to_json(), "layout": "all"})
    return str(path)


def streamed_and_whole(paths: list[str]) -> tuple[dict, dict]:
    labels = [f"run{k}" for k in range(len(paths))]
    slim = [load_run(p, label, progress=False, tables=TABLES_METRICS) for p, label in zip(paths, labels)]
    whole = [load_run(p, label, progress=False) for p, label in zip(paths, labels)]
    full = build_tables(whole)
    assert full.node_counts is not None  # the whole tables bring the same counts, from the arrays
    assert_same_metrics(all_metrics(full), all_metrics(build_tables(slim)))
    return all_metrics(build_tables(slim)), metrics_by_frame(full)  # counted from the rows


@pytest.mark.parametrize("name", ["synthetic_article", "qwen2.5-coder/deep", "qwen2.5-coder/wide"])
def test_samples(name):
    assert_same_metrics(*streamed_and_whole([str(SAMPLES / name)]))


@pytest.mark.slow
def test_packed_runs_of_many_blocks_side_by_side(tmp_path):
    """Blocks of 128 rounds, early stops, varied matrix shapes, a dynamic tree, three runs at once."""
    dynamic = TreeConfig.from_lists([[3], [2, 1], [1, 1]], [1, 2, 2], tree_type=TREE_DYNAMIC)
    paths = [
        packed(tmp_path, "uniform", synth_run(ARTICLE, 900, seed=3, early_stop_rate=0.2)),
        packed(tmp_path, "varied", varied_run(ARTICLE, 700, seed=4)),
        packed(tmp_path, "dynamic", synth_run(dynamic, 500, seed=5, early_stop_rate=0.1), dynamic),
    ]
    slim = load_run(paths[0], "x", progress=False, tables=TABLES_METRICS)
    assert slim.tables[1] is None and list(slim.tables[0].columns) == list(SLIM_ROUND_COLUMNS)
    assert len(slim.node_counts) >= 900 // 128  # one count per block, no node rows kept
    assert_same_metrics(*streamed_and_whole(paths))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_random_runs(case):
    """Random configs (static and dynamic), scores or not, layouts, defects, varied shapes; the
    rounds in two reads, so that the counts of several batches add up."""
    cfg, rounds = case
    whole, slim = [], []
    half = len(rounds) // 2
    for part in (rounds[:half], rounds[half:]):
        for batch in batch_from_rounds(part):
            res = replay_batch(batch, cfg, workers=1)
            whole.append(batch_table_parts(batch, res, cfg, "r"))
            slim.append(batch_metric_parts(batch, res, cfg, "r"))
    rounds_table, nodes_table = join_parts(whole)
    if not len(rounds_table):
        return
    counts = [p.node_counts for p in slim if p.node_counts is not None]
    got = all_metrics(Tables(join_slim(slim, SLIM_ROUND_COLUMNS), None, {"r": cfg}, counts))
    assert_same_metrics(got, metrics_by_frame(Tables(rounds_table, nodes_table, {"r": cfg})))


def test_stats_json_is_the_same_streamed_or_whole(tmp_path, capsys):
    """Through the CLI: `stats --json` counts block by block; with -o it loads the whole tables."""
    run = packed(tmp_path, "run", synth_run(ARTICLE, 600, seed=7, early_stop_rate=0.1))
    assert main(["stats", run, "--json", "--no-progress"]) == 0
    streamed = capsys.readouterr().out
    assert main(["stats", run, "--json", "--no-progress", "-o", str(tmp_path / "tables")]) == 0
    whole = capsys.readouterr().out
    assert streamed == whole and json.loads(streamed)["node_hits"]


@pytest.mark.parametrize("keep", [0, 1 << 30], ids=["read-again", "kept"])
def test_node_metrics_counted_in_the_tables_pass(keep, tmp_path):
    """report loads the metrics' round columns alone (TABLES_ROUNDS) and counts the node metrics in
    tables/' pass (write_run_tables' on_counts), or, without tables/, from the batches
    (with_node_counts): the tables and metrics TABLES_METRICS' loading gives, whichever order the
    blocks come in (a packed run's groups interleave), from kept batches or the runs read again."""
    paths = [
        packed(tmp_path, "synth", synth_run(ARTICLE, 500, seed=3, early_stop_rate=0.3)),
        packed(tmp_path, "varied", varied_run(ARTICLE, 300, seed=4)),
        str(SAMPLES / "synthetic_article"),
    ]
    labels = ["synth", "varied", "text"]
    want = build_tables([load_run(p, k, progress=False, tables=TABLES_METRICS) for p, k in zip(paths, labels)])
    runs = [load_run(p, k, progress=False, tables=TABLES_ROUNDS, keep_bytes=keep) for p, k in zip(paths, labels)]
    assert all(r.node_counts is None for r in runs) and all((r.batches is not None) == bool(keep) for r in runs)
    counted: dict = {}
    write_run_tables(runs, tmp_path / "tables", ["parquet"], on_counts=counted.__setitem__)
    assert sorted(counted) == sorted(labels)
    for got_runs in ([replace(r, node_counts=counted[r.label]) for r in runs], [with_node_counts(r) for r in runs]):
        got = build_tables(got_runs)
        pd.testing.assert_frame_equal(got.rounds, want.rounds, check_exact=True)
        assert_same_metrics(all_metrics(got), all_metrics(want))


def test_keys_only_tables_refuse_to_tabulate(tmp_path):
    """compare's runs (TABLES_KEYS) keep the round keys only: asking them for tables is a clear error."""
    run = load_run(str(SAMPLES / "synthetic_article"), "a", progress=False, tables=TABLES_KEYS)
    assert run.tables[1] is None and run.rounds == len(run.tables[0])
    with pytest.raises(ValueError, match="TABLES_FULL"):
        build_tables([run])


def test_speed_row_needs_no_round_by_round_replay():
    """report's speedup row (analysis.compare.configs.speed_row) of a batch-loaded run comes from its
    arrays, the same figure as from the reference RoundResults, without replaying them."""
    from analysis.compare.configs import speed_row
    from analysis.cost.model import CostModel
    from replay.testing.compare_reference import round_sizes
    from tests.reference_runs import load_reference

    path = str(SAMPLES / "qwen2.5-coder/deep")
    cost = CostModel.default()
    for mode in (TABLES_KEYS, TABLES_METRICS, "full"):
        run = load_run(path, "a", progress=False, tables=mode)
        got = speed_row("a", run.sizes, cost, None)
        want = speed_row("a", round_sizes(load_reference(path, "a", progress=False).results), cost, None)
        assert got["modelled_speedup"] == want["modelled_speedup"] and got["rounds"] == want["rounds"]


@pytest.mark.slow
def test_report_without_tables_is_the_same_page(tmp_path, capsys):
    """`report --no-tables` counts the metrics by block: the page is the one `report` writes with tables/,
    less the sentences that point into tables/ (the page names only tables it wrote)."""
    import re

    def without_table_pointers(page: str) -> str:
        page = re.sub(r"<p>Tables: [^<]*</p>\n", "", page)
        page = re.sub(r"; tables/\w+\.csv holds each bound as a column", "", page)
        return page.replace(" Every grid point is in tables/sampling_curve.csv.", "")

    run = packed(tmp_path, "run", synth_run(ARTICLE, 400, seed=8, early_stop_rate=0.1))
    pages = []
    for extra in ([], ["--no-tables"]):
        out = tmp_path / ("report" + "".join(extra))
        assert main(["report", run, "-o", str(out), "--no-progress", *extra]) == 0
        page = (out / "index.html").read_text()
        pages.append(re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "<DATE>", page))
    assert (tmp_path / "report" / "tables").is_dir() and not (tmp_path / "report--no-tables" / "tables").exists()
    assert "tables/depth_acceptance.csv" in pages[0] and "tables/" not in pages[1]
    assert without_table_pointers(pages[0]) == pages[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "terminal,extra,drawn", [(True, [], True), (True, ["--no-progress"], False), (False, [], False)]
)
def test_plot_bar_only_on_a_terminal(terminal, extra, drawn, tmp_path, monkeypatch):
    """plot draws a "plot" bar over its figures (after the reading bar), on a terminal only."""
    import io
    import sys

    from tests.test_cli_conventions import Terminal

    err = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert main(["plot", str(SAMPLES / "synthetic_article"), "-o", str(tmp_path / "p"), "--format", "png", *extra]) == 0
    assert ("plot:" in err.getvalue()) is drawn, err.getvalue()
    assert len(list((tmp_path / "p").glob("*.png"))) == 6


def test_compare_builds_the_per_round_frame_only_when_asked(tmp_path, capsys):
    """priced_comparison(per_round=False) (compare without --per-round, report, the API): the same
    summary, no per-round frame; `compare --per-round FILE` still writes every round and config."""
    from analysis.compare.batch import priced_comparison
    from analysis.cost.source import run_pricing
    from analysis.report.options import default_comparison_configs

    path = packed(tmp_path, "run", synth_run(ARTICLE, 300, seed=2, early_stop_rate=0.1))
    run = load_run(path, "a", progress=False, tables=TABLES_KEYS)
    pricing = run_pricing(run.replay, run.label, None)
    configs = default_comparison_configs(run.config)
    table, rounds = priced_comparison(run, configs, pricing)
    lean, none = priced_comparison(run, configs, pricing, per_round=False)
    pd.testing.assert_frame_equal(lean, table, check_exact=True)
    assert len(rounds) == 300 * len(configs) and none.empty
    out = tmp_path / "per_round.csv"
    assert main(["compare", path, "--no-progress", "--per-round", str(out)]) == 0
    assert len(pd.read_csv(out)) == 300 * len(configs)


# --- the counts from the per-node arrays (analysis.tables.node_counts) against the block's node table ---


def assert_same_block(batch, res, cfg) -> None:
    """One batch's node metric counts from its arrays finish to the tables its node frame's counts
    finish to (metric_parts_by_frame: the reference), and its round columns are the same."""
    arrays, frame = batch_metric_parts(batch, res, cfg, "r"), metric_parts_by_frame(batch, res, cfg, "r")
    if frame.node_counts is None:
        assert arrays.node_counts is None and not arrays.rounds
        return
    pd.testing.assert_frame_equal(join_slim([arrays], SLIM_ROUND_COLUMNS), join_slim([frame], SLIM_ROUND_COLUMNS))
    configs = {"r": cfg}
    assert_same_metrics(
        combine_node_counts([arrays.node_counts], configs), combine_node_counts([frame.node_counts], configs)
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_array_counts_are_the_frame_counts_of_each_batch(case):
    """Random configs (static and dynamic), scores or not, layouts, rejected rounds, varied shapes."""
    cfg, rounds = case
    for batch in batch_from_rounds(rounds):
        assert_same_block(batch, replay_batch(batch, cfg, workers=1), cfg)


def test_array_counts_of_a_batch_of_several_shapes():
    """A dynamic tree's batch holds rounds of several shapes (here: a step-1 row left empty in every
    third round, so that step expands one node there): the counts of its shapes add up."""
    cfg = TreeConfig.from_lists([[3], [2, 1], [1, 1]], [1, 2, 2], tree_type=TREE_DYNAMIC)
    shapes = []
    for batch in synth_run(cfg, 200, seed=5, early_stop_rate=0.1):
        if len(batch.steps) > 1:
            np.asarray(batch.steps[1].ids)[1, :, ::3] = PAD_TOKEN
        res = replay_batch(batch, cfg, workers=1)
        shapes.append(len(res.shapes))
        assert_same_block(batch, res, cfg)
    assert max(shapes) > 1


@pytest.mark.parametrize("top", [7, 2**40, 2**62])
def test_count_of_rows_whatever_their_range(top):
    """node_counts._count keys each row by its tuple: by a bincount over a small code space, np.unique
    over a large one, and the rows themselves where the code would overflow int64."""
    from collections import Counter

    from analysis.tables.node_counts import _count

    rng = np.random.default_rng(1)
    a, b = rng.integers(-1, 5, 300), rng.integers(0, 3, 300)
    c = rng.integers(-1, top, 300)
    c[:3], c[3:6] = top, -1
    got: Counter = Counter()
    _count(got, a, b, c)
    _count(got, a[:10], b[:10], c[:10])
    assert got == Counter(zip(a.tolist(), b.tolist(), c.tolist())) + Counter(
        zip(a[:10].tolist(), b[:10].tolist(), c[:10].tolist())
    )


def test_no_runs_give_every_metric_table_empty():
    """No runs bring no counts (an empty list, not a missing one): every metric table, without rows."""
    tables = build_tables([])
    assert tables.node_counts == []
    metrics = all_metrics(tables)
    assert tuple(metrics) == METRIC_TABLES
    assert all(table.empty for table in metrics.values())


def test_tables_without_node_counts_are_refused():
    """The node metrics are counted from the batch arrays only: tables made from a node table alone
    have none, and all_metrics says so rather than count the rows a second way."""
    full = build_tables([load_run(str(SAMPLES / "article_round"), "a", progress=False)])
    with pytest.raises(ValueError, match="without their node counts"):
        all_metrics(Tables(full.rounds, full.nodes, full.configs))
