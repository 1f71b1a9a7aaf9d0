"""The analysis tables built on the batch path equal the ones built from the scalar reference.

Reference: replay.testing.table_rows.round_table / node_table over replay.testing.replayer's RoundResults (the
readable path). Batch: analysis.tables.batch over replay.engine.batch's arrays (what stats, plot,
compare and report use). Same columns, dtypes, values and row order; same skipped lists.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from analysis.tables.batch import batch_table_parts, join_parts
from analysis.tables.build import _typed, build_tables
from analysis.tables.runs import load_run
from analysis.tables.slot_hits import shape_signature
from replay.cli import main
from replay.core.config import TreeConfig
from replay.core.records import COLUMNS, normalize_frame
from replay.engine.batch import ERR_OK, config_tree_shape, replay_batch
from replay.engine.batch.frames import record_arrow
from replay.engine.runs import replay_run
from replay.io.table_files import write_arrow_table
from replay.testing.frame_counts import slot_hits_counts
from replay.testing.in_memory import batch_from_rounds
from replay.testing.records_reference import records_frame, records_of_batch, write_table
from replay.testing.replayer import replay_round
from replay.testing.table_rows import node_table, round_table
from replay.util.errors import RoundError
from replay.util.words import counted
from tests.packed_runs import assert_same_frames, packed_synth_run
from tests.reference_runs import load_reference
from tests.test_batch_property import runs

SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"
SAMPLE_RUNS = [
    "synthetic_article",
    "article_round",
    "qwen2.5-coder/article",
    "qwen2.5-coder/chain4",
    "qwen2.5-coder/deep",
    "qwen2.5-coder/wide",
]
ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def assert_same_run(path: Path, label: str = "run") -> None:
    ref = load_reference(str(path), label, progress=False)
    fast = load_run(str(path), label, progress=False)
    assert fast.tables is not None and fast.rounds == len(ref.results)
    assert_same_frames(fast.tables, (round_table(ref.results, label, ref.config), node_table(ref.results, label)))
    assert fast.replay.skipped == ref.replay.skipped


def assert_same_records(res) -> None:
    """BatchResult.to_frame is the record frame, record by record (replay.core.records)."""
    got, want = res.to_frame(), records_frame(records_of_batch(res))
    assert list(got.columns) == list(COLUMNS)
    assert [str(t) for t in got.dtypes] == [str(t) for t in want.dtypes]
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert_same_arrow(res, want)


def assert_same_arrow(res, want: pd.DataFrame) -> None:
    """batch -o's Arrow table (built from the arrays) is the record frame's, schema and pandas
    metadata included; its CSV and Parquet files are what write_table writes of the frame."""
    import tempfile

    import pyarrow as pa

    table = record_arrow(res)
    ref = pa.Table.from_pandas(want, preserve_index=False)
    assert table.schema.equals(ref.schema, check_metadata=True), (table.schema, ref.schema)
    assert table.equals(ref)
    with tempfile.TemporaryDirectory() as d:
        for ext in ("csv", "parquet"):
            new, old = Path(d) / f"new.{ext}", Path(d) / f"old.{ext}"
            write_arrow_table(table, new)
            write_table(want, old)
            if ext == "csv":
                assert new.read_bytes() == old.read_bytes()
            else:
                pd.testing.assert_frame_equal(pd.read_parquet(new), pd.read_parquet(old), check_exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE_RUNS)
def test_sample_tables_agree(name):
    assert_same_run(SAMPLES / name, name)
    assert_same_records(replay_run(SAMPLES / name).result)


@pytest.mark.parametrize("name", ["article_round", "qwen2.5-coder/deep", "packed"])
def test_batch_table_files_are_the_record_frames(name, tmp_path, capsys, monkeypatch):
    """`batch -o rounds.csv` writes the bytes, and `-o rounds.parquet` the frame, that
    write_table writes of the record frame built record by record."""
    from replay.io import table_files

    monkeypatch.setattr(table_files, "_CSV_ROWS_PER_WRITE", 700)  # the packed run's 3,000 rows: several blocks
    if name == "packed":
        path = packed_synth_run(tmp_path / "run", ARTICLE, 3000, seed=9, early_stop_rate=0.1, block_rounds=512)
    else:
        path = SAMPLES / name
    want = records_frame(records_of_batch(replay_run(path).result))
    write_table(want, tmp_path / "want.csv")
    write_table(want, tmp_path / "want.parquet")
    for ext in ("csv", "parquet"):
        assert main(["batch", str(path), "-o", str(tmp_path / f"rounds.{ext}"), "--no-progress"]) == 0
        assert f"wrote {counted(len(want), 'row')} to" in capsys.readouterr().err
    assert (tmp_path / "rounds.csv").read_bytes() == (tmp_path / "want.csv").read_bytes()
    got, ref = pd.read_parquet(tmp_path / "rounds.parquet"), pd.read_parquet(tmp_path / "want.parquet")
    assert [str(t) for t in got.dtypes] == [str(t) for t in ref.dtypes]
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    pd.testing.assert_frame_equal(normalize_frame(got), want, check_exact=True)


@pytest.mark.slow
def test_packed_run_tables_agree(tmp_path):
    """Several blocks, early stops (two shapes), rounds read back in run order."""
    run = packed_synth_run(tmp_path / "run", ARTICLE, 700, seed=5, early_stop_rate=0.2, block_rounds=128)
    assert_same_run(run)
    assert_same_records(replay_run(run).result)


@pytest.mark.slow
def test_skipped_rounds_agree(tmp_path):
    """A directory with an unreadable and an inconsistent round: both paths list them alike."""
    d = tmp_path / "dump"
    shutil.copytree(SAMPLES / "synthetic_article", d)
    (d / "validate_1004_1020.npz").write_bytes(b"not an npz file")
    with np.load(d / "draft_step_1_100_116.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["ids"] = arrays["ids"][:1]  # one row where topHead[1] = 2 expanded nodes need two
    np.savez(d / "draft_step_1_100_116.npz", **arrays)
    ref = load_reference(str(d), "run", progress=False)
    assert len(ref.replay.skipped) == 2
    assert_same_run(d)


@pytest.mark.slow
def test_build_tables_uses_the_batch_tables():
    """stats' tables come from the batch path and equal the scalar ones."""
    fast = load_run(str(SAMPLES / "synthetic_article"), "a", progress=False)
    ref = load_reference(str(SAMPLES / "synthetic_article"), "a", progress=False)
    got = build_tables([fast])
    want = (_typed(round_table(ref.results, "a", ref.config)), _typed(node_table(ref.results, "a")))
    assert_same_frames((got.rounds, got.nodes), want)


def reference_results(cfg: TreeConfig, rounds) -> list:
    out = []
    for rnd in rounds:
        try:
            out.append(replay_round(rnd, cfg))
        except RoundError:
            pass
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_random_run_tables_agree(case):
    """Random configs (static and dynamic), scores or not, parents or not, layouts, defects."""
    cfg, rounds = case
    parts = []
    for batch in batch_from_rounds(rounds):
        res = replay_batch(batch, cfg, workers=1)
        parts.append(batch_table_parts(batch, res, cfg, "r"))
        assert sum(len(c["round"]) for c in parts[-1].rounds) == int((res.error == ERR_OK).sum())
        assert_same_records(res)
    results = reference_results(cfg, rounds)
    got = join_parts(parts)
    if not results:
        assert len(got[0]) == 0 and len(got[1]) == 0
        return
    assert_same_frames(got, (round_table(results, "r", cfg), node_table(results, "r")))


@pytest.mark.slow
def test_reference_slot_counts_leave_other_shapes_out():
    """The reference's slot counts (replay.testing.frame_counts) leave out the rounds whose tree is not
    a prefix of the static shape, whatever the order of the node rows."""
    run = load_run(str(SAMPLES / "synthetic_article"), "a", progress=False)
    nodes = run.tables[1].copy()
    rounds = nodes["round"].unique()
    nodes.loc[(nodes["round"] == rounds[3]) & (nodes["node"] == 2), "rank"] = 5  # another shape
    r7 = nodes["round"] == rounds[7]
    first_expanded = int(nodes.loc[r7 & (nodes["depth"] == 1) & (nodes["expanded_slot"] == 0), "node"].iloc[0])
    nodes.loc[r7 & (nodes["node"] == 9), "parent"] = first_expanded  # node 9 hangs under slot 0, not slot 1
    present, hits, other = slot_hits_counts(nodes, {"a": ARTICLE})["a"]
    assert other == 2 and present[0] == len(rounds) - 2
    assert present.shape == (len(shape_signature(config_tree_shape(ARTICLE, ARTICLE.gamma))) + 1,)
    order = np.random.default_rng(1).permutation(len(rounds))
    moved = pd.concat([nodes[nodes["round"] == rounds[k]] for k in order], ignore_index=True)
    for rows in (moved, nodes.sort_values("node", kind="stable")):
        again = slot_hits_counts(rows, {"a": ARTICLE})["a"]
        assert again[2] == 2 and all(np.array_equal(x, y) for x, y in zip(again[:2], (present, hits)))


@pytest.mark.slow
def test_example_round_replays_only_the_round_drawn():
    """plot/report's example round: chosen from the run's round table as from the reference's rounds,
    drawn from the batch engine's view of that round alone."""
    from analysis.report.example_round import example_pick, example_round
    from tests.test_replay_on_batch_engine import assert_same_view

    path = str(SAMPLES / "synthetic_article")
    fast, ref = load_run(path, "a", progress=False), load_reference(path, "a", progress=False)
    summaries = (
        [r.acceptance.accepted_length for r in ref.results],
        [r.acceptance.stop for r in ref.results],
        [tuple(r.key) for r in ref.results],
    )
    pick, why = example_pick(summaries)
    got = example_round(fast)
    assert got.why == why
    assert_same_view(got.result, ref.results[pick])
    key = tuple(ref.results[17].key)
    assert_same_view(example_round(fast, key).result, ref.results[17])
    assert example_round(fast, (1, 2)) is None


def test_selection_positions_are_the_reference_order():
    """_level_ranks' positions by score (replay.core.selection.selection_positions: counted for small
    levels, sorted for large ones) are each row's place in replay.testing.selection_ref's order:
    ties by rank_ties of the row, -0.0 equal to 0.0."""
    import numpy as np

    from replay.core.selection import selection_positions
    from replay.testing.selection_ref import selection_order_ref

    rng = np.random.default_rng(0)
    for rows in (1, 2, 6, 16, 17, 40):
        lp = rng.integers(-3, 1, size=(rows, 200)).astype(np.float64)
        lp[rng.random(lp.shape) < 0.2] = -0.0
        want = np.empty(lp.shape, dtype=np.int64)
        for j in range(lp.shape[1]):
            want[selection_order_ref(lp[:, j].tolist()), j] = np.arange(rows)
        np.testing.assert_array_equal(selection_positions(lp), want)
