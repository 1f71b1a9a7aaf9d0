"""report reads each run once: the batches its loading kept (LabelledRun.batches, within
analysis.report.options.LOADED_BYTES) give the comparison, the recommendation, the temperature curve
and tables/ what reading the run again gave them; beyond the cap nothing is kept and they read it again."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.compare.batch import compare_run
from analysis.compare.sampling import TEMPERATURE_GRID
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.report.options import default_comparison_configs
from analysis.shapes.recommend import recommend_runs
from analysis.shapes.recommend_render import recommendation_json
from analysis.tables.runs import TABLES_METRICS, load_run, ram_bytes
from analysis.tables.stream import write_run_tables
from replay.cli import main
from replay.core.config import TreeConfig
from replay.engine.runs import Run
from replay.testing.batch_synth import varied_run
from tests.test_compare_sampling_batch import VOCAB
from tests.test_report_tables_stream import ARTICLE, SAMPLES, packed
from tests.test_sampling_stats_batch import packed_case

KEEP = 1 << 30


def both(path: str) -> tuple:
    """(the run loaded keeping its batches, loaded without)."""
    kept = load_run(path, "r", progress=False, tables=TABLES_METRICS, keep_bytes=KEEP)
    again = load_run(path, "r", progress=False, tables=TABLES_METRICS)
    assert kept.batches is not None and again.batches is None
    assert sum(len(b.batch) for b in kept.batches) >= kept.rounds
    return kept, again


@pytest.fixture(params=["packed", "directory"])
def run_path(request, tmp_path) -> str:
    if request.param == "packed":  # groups of several shapes, whose rounds interleave
        return packed(tmp_path, "varied", varied_run(ARTICLE, 500, seed=6), block_rounds=40)
    return str(SAMPLES / "synthetic_article")


def test_the_kept_batches_give_what_reading_again_gives(run_path, tmp_path):
    kept, again = both(run_path)
    for name, run in (("kept", kept), ("again", again)):
        write_run_tables([run], tmp_path / name)
    for f in ("rounds.csv", "rounds.parquet", "nodes.csv", "nodes.parquet"):
        assert (tmp_path / "kept" / f).read_bytes() == (tmp_path / "again" / f).read_bytes(), f
    configs = [ARTICLE, TreeConfig.from_lists([[4], [2, 2]], [1, 2])]
    got, want = compare_run(kept, configs), compare_run(again, configs)
    for g, w in zip(got, want):
        pd.testing.assert_frame_equal(g, w)
    recs = [
        recommendation_json(recommend_runs([run_path], kept.options, 9, 3, loaded=loaded)) for loaded in ([kept], [])
    ]
    for rec in recs:
        rec.pop("seconds")
    assert json.dumps(recs[0], sort_keys=True) == json.dumps(recs[1], sort_keys=True)


def test_nothing_is_kept_beyond_the_cap(run_path):
    kept, _ = both(run_path)
    held = sum(ram_bytes(b) for b in kept.batches)
    assert held > 0
    for cap in (0, held - 1):
        run = load_run(run_path, "r", progress=False, tables=TABLES_METRICS, keep_bytes=cap)
        assert run.batches is None
    assert load_run(run_path, "r", progress=False, tables=TABLES_METRICS, keep_bytes=held).batches is not None


def count_readings(monkeypatch) -> list:
    """The paths of the run's whole readings (Run.chunks without --round's one round), as they happen."""
    readings: list = []
    chunks = Run.chunks

    def counted(self, *args, **kwargs):
        if self.options.only_round is None:
            readings.append(self.path)
        return chunks(self, *args, **kwargs)

    monkeypatch.setattr(Run, "chunks", counted)
    return readings


def test_report_reads_a_packed_run_once(tmp_path, monkeypatch, capsys):
    """Whole readings of the run (Run.chunks without --round's one round): the loading's alone."""
    path = packed(tmp_path, "varied", varied_run(ARTICLE, 300, seed=2), block_rounds=40)
    readings = count_readings(monkeypatch)
    out = tmp_path / "rep"
    assert main(["report", path, "-o", str(out), "--no-progress"]) in (0, 1)
    assert len(readings) == 1, readings
    assert (out / "tables" / "nodes.parquet").is_file()


@pytest.fixture(params=["packed", "directory"])
def scored_path(request, tmp_path) -> str:
    """A run whose validate rows carry scores: the temperature curve walks it at every T."""
    if request.param == "packed":
        return str(packed_case(tmp_path, 1))
    return str(SAMPLES / "qwen2.5-coder" / "article")


def test_report_reads_a_scored_run_once(scored_path, tmp_path, monkeypatch):
    """The temperature curve folds the loading's batches: report reads a scored run as often as an
    unscored one (the loading's one reading), and the curve is drawn."""
    readings = count_readings(monkeypatch)
    out = tmp_path / "rep"
    assert main(["report", scored_path, "-o", str(out), "--no-progress"]) in (0, 1)
    assert len(readings) == 1, readings
    assert (out / "tables" / "sampling_curve.parquet").is_file()


def test_the_curve_from_the_kept_batches_is_the_curve_read_again(scored_path):
    kept, again = both(scored_path)
    configs = default_comparison_configs(kept.config)
    for vocab in (None, VOCAB):
        got, want = (
            compare_sampling_run(run, configs, TEMPERATURE_GRID, vocab, per_round=False) for run in (kept, again)
        )
        pd.testing.assert_frame_equal(got.table, want.table)
        assert list(got.skipped) == list(want.skipped)
        assert (got.needs_vocab, got.undetermined) == (want.needs_vocab, want.undetermined)
        assert got.table["determined"].any()  # not vacuous: rounds walked at T > 0


def test_the_statistics_pass_words_rejections_only_of_batches_it_reads(run_path, monkeypatch):
    """scan_run on the loading's kept batches takes the skipped list load_run made: it words no
    rejection again (analysis.shapes.dumps.explain_rejections); reading the run itself, it words each batch's."""
    import analysis.shapes.dumps as dumps

    worded: list = []
    explain = dumps.explain_rejections
    monkeypatch.setattr(dumps, "explain_rejections", lambda *a: worded.append(a) or explain(*a))
    kept, _ = both(run_path)
    given = dumps.scan_run(run_path, kept.options, loaded=kept)
    assert not worded and given.skipped == kept.replay.skipped
    read = dumps.scan_run(run_path, kept.options)
    assert worded and read.skipped == given.skipped
