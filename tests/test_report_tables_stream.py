"""report's tables/ written block by block (analysis.tables.stream): the round and node tables are
the files export_tables writes for the whole tables (byte for byte), in run order, whatever the
order a packed run stores its rounds in; and the output phases' progress bars."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import analysis.tables.stream as stream
from analysis.report.plots import save_figure
from analysis.tables.build import build_tables, export_tables
from analysis.tables.runs import TABLES_FULL, TABLES_METRICS, load_run, load_runs
from analysis.tables.stream import TableWriter, write_run_tables
from replay.cli import main
from replay.core.config import TreeConfig
from replay.engine.runs import open_run
from replay.io.packed.pack import pack_batches
from replay.io.table_files import PARQUET_OPTIONS
from replay.testing.batch_synth import synth_run, varied_run
from tests.test_cli_conventions import Terminal

SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"
ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def packed(tmp_path: Path, name: str, batches, block_rounds: int = 64) -> str:
    path = tmp_path / name
    pack_batches(batches, path, block_rounds=block_rounds, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    return str(path)


def whole_tables(paths: list[str], out: Path) -> Path:
    """What report wrote before: build_tables' two tables of the fully loaded runs, by export_tables."""
    t = build_tables(load_runs(paths, progress=False, tables=TABLES_FULL))
    export_tables({"rounds": t.rounds, "nodes": t.nodes}, out)
    return out


def assert_same_files(got: Path, want: Path, names=("rounds", "nodes"), exts=("csv", "parquet")) -> None:
    for name in names:
        for ext in exts:
            assert (got / f"{name}.{ext}").read_bytes() == (want / f"{name}.{ext}").read_bytes(), f"{name}.{ext}"


def test_packed_blocks_in_run_order(tmp_path):
    """Run.chunks(in_run_order=True): a packed run's blocks by their first round (they are stored one
    group per shape, whose rounds interleave), so no later block starts before an earlier one."""
    run = open_run(packed(tmp_path, "run", synth_run(ARTICLE, 900, seed=3, early_stop_rate=0.3), block_rounds=50))
    firsts = []
    for load in run.chunks(1, in_run_order=True):
        batches, _ = load()
        firsts += [int(b.ordinals.min()) for b in batches]
    assert firsts == sorted(firsts) and len(firsts) > 3
    stored = [int(b.ordinals.min()) for load in run.chunks(1) for b in load()[0]]
    assert stored != sorted(stored)  # the groups' blocks do interleave: the test means something


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: packed(tmp, "synth", synth_run(ARTICLE, 700, seed=5, early_stop_rate=0.3)),
        lambda tmp: packed(tmp, "varied", varied_run(ARTICLE, 500, seed=6)),
        lambda tmp: str(SAMPLES / "synthetic_article"),
        lambda tmp: str(SAMPLES / "qwen2.5-coder/deep"),
    ],
    ids=["packed", "packed-varied", "text", "qwen-deep"],
)
def test_streamed_tables_are_the_whole_tables(make, tmp_path):
    path = make(tmp_path)
    run = load_run(path, Path(path).name, progress=False, tables=TABLES_METRICS)
    seen = []
    write_run_tables([run], tmp_path / "got", progress=lambda done, total: seen.append((done, total)))
    assert_same_files(tmp_path / "got", whole_tables([path], tmp_path / "want"))
    assert seen[-1] == (run.rounds, run.rounds) and [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.parametrize("group", [97, 1000])
def test_node_row_groups_across_blocks(group, tmp_path, monkeypatch):
    """A run's node rows made into row groups of PARQUET_ROW_GROUP rows that start and end inside
    the blocks read (a packed run whose groups interleave), and a short last one: the files pandas
    writes for the whole tables with that row group size (CSV too)."""
    monkeypatch.setattr(stream, "PARQUET_ROW_GROUP", group)
    path = packed(tmp_path, "run", synth_run(ARTICLE, 400, seed=8, early_stop_rate=0.3), block_rounds=30)
    run = load_run(path, "run", progress=False, tables=TABLES_METRICS)
    write_run_tables([run], tmp_path / "got")
    whole = build_tables(load_runs([path], labels=["run"], progress=False, tables=TABLES_FULL))
    want = tmp_path / "want"
    export_tables({"rounds": whole.rounds, "nodes": whole.nodes}, want, ["csv"])
    for name, df in (("rounds", whole.rounds), ("nodes", whole.nodes)):
        df.to_parquet(want / f"{name}.parquet", index=False, row_group_size=group, **PARQUET_OPTIONS)
    assert len(whole.nodes) > 3 * group  # several row groups, the last one shorter
    assert_same_files(tmp_path / "got", want)


def test_row_groups_across_blocks(tmp_path, monkeypatch):
    """Row groups of PARQUET_ROW_GROUP rows cut across the blocks, a block's column all empty lists
    or all missing typed by a later block: the file to_parquet writes with that row group size."""
    monkeypatch.setattr(stream, "PARQUET_ROW_GROUP", 100)
    rng = np.random.default_rng(0)
    n = 730
    df = pd.DataFrame(
        {
            "name": rng.choice(np.asarray(["R", "A1", "B11"], dtype=object), n),
            "tok": pd.arrays.IntegerArray(rng.integers(0, 9, n), rng.random(n) < 0.2),
            "lp": rng.standard_normal(n),
            "ids": [[] if i < 250 else [int(i), 1] for i in range(n)],  # empty lists until row 250
            "kind": [None if i < 250 else "draft" for i in range(n)],
        }
    )
    df.to_parquet(tmp_path / "want.parquet", index=False, row_group_size=100, **PARQUET_OPTIONS)
    w = TableWriter(tmp_path, "got", ["parquet"])
    for start in range(0, n, 70):
        w.append(df.iloc[start : start + 70])
    w.close()
    assert (tmp_path / "got.parquet").read_bytes() == (tmp_path / "want.parquet").read_bytes()


WRITERS = {
    "export_tables": lambda out, fmts: export_tables({"rounds": pd.DataFrame({"a": [1]})}, out, fmts),
    "TableWriter": lambda out, fmts: TableWriter(out, "rounds", fmts),
    "save_figure": lambda out, fmts: save_figure(Figure(), out, "plot", fmts),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_unknown_format_is_refused_before_anything_is_written(writer, tmp_path):
    """The first format given is known, the second is not: no directory, no file of the first."""
    out = tmp_path / "out"
    kind, known = ("image", "png") if writer == "save_figure" else ("table", "csv")
    with pytest.raises(ValueError, match=f"unknown {kind} format 'xlsx': expected one of"):
        WRITERS[writer](out, [known, "xlsx"])
    assert not out.exists()


def test_exported_parquet_has_no_statistics(tmp_path):
    """Every Parquet file the tool writes, `stats DUMP -o DIR` (export_tables, whose files report's
    streamed tables/ equal byte for byte) and `batch DUMP -o rounds.parquet`, is written without
    min/max statistics (PARQUET_OPTIONS: their cost, not their use, at 10^6 rounds),
    snappy-compressed, and the tables read back whole."""
    import pyarrow.parquet as pq

    sample = str(SAMPLES / "synthetic_article")
    assert main(["stats", sample, "-o", str(tmp_path / "out")]) == 0
    assert main(["batch", sample, "-o", str(tmp_path / "out" / "batch.parquet"), "--no-progress"]) == 0
    for name in ("rounds", "nodes", "batch"):
        meta = pq.ParquetFile(tmp_path / "out" / f"{name}.parquet").metadata
        chunks = [meta.row_group(g).column(c) for g in range(meta.num_row_groups) for c in range(meta.num_columns)]
        assert chunks and not any(c.is_stats_set for c in chunks), name
        assert {c.compression for c in chunks} == {"SNAPPY"}, name
    want = build_tables(load_runs([sample], progress=False, tables=TABLES_FULL)).nodes
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out" / "nodes.parquet"), want)


@pytest.mark.slow
def test_report_tables_through_the_cli(tmp_path, monkeypatch):
    """`report A B -o DIR` (two runs, one packed with interleaved groups): tables/rounds and
    tables/nodes are the whole tables' files (Parquet; CSV too with --csv-tables); the "tables" bar
    shows on a terminal, never with --no-progress, and the tables are the same either way."""
    a = packed(tmp_path, "a", synth_run(ARTICLE, 300, seed=9, early_stop_rate=0.3))
    b = str(SAMPLES / "synthetic_article")
    want = whole_tables([a, b], tmp_path / "want")
    for extra, drawn in (([], True), (["--no-progress", "--csv-tables"], False)):
        err = Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        out = tmp_path / f"report{len(extra)}"
        assert main(["report", a, b, "-o", str(out), *extra]) == 0
        assert ("tables:" in err.getvalue()) is drawn, err.getvalue()
        exts = ("csv", "parquet") if extra else ("parquet",)
        assert_same_files(out / "tables", want, exts=exts)
        assert (out / "tables" / "nodes.csv").exists() is bool(extra)


@pytest.mark.parametrize(
    "argv",
    [
        ["batch", "{run}", "--json"],
        ["batch", "{run}", "-o", "{out}/r.parquet"],
        ["batch", "{run}", "-o", "{out}/r.csv"],
        ["replay", "{run}", "--json"],
    ],
    ids=["batch-json", "batch-parquet", "batch-csv", "replay-json"],
)
def test_writing_bar_only_on_a_terminal(argv, tmp_path, monkeypatch):
    """The output phase of batch --json / -o and replay --json draws a "writing" bar after the
    reading bar: on a terminal only, never with --no-progress; what is written is the same."""
    run = packed(tmp_path, "run", synth_run(ARTICLE, 200, seed=2, early_stop_rate=0.2))
    outputs = []
    for stream_kind, extra, drawn in (
        (Terminal, [], True),
        (Terminal, ["--no-progress"], False),
        (io.StringIO, [], False),
    ):
        out = tmp_path / f"out{len(outputs)}"
        out.mkdir()
        err, stdout = stream_kind(), io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        monkeypatch.setattr(sys, "stdout", stdout)
        assert main([a.format(run=run, out=out) for a in argv] + extra) == 0
        assert ("writing " in err.getvalue()) is drawn, err.getvalue()  # the bar: "writing WHAT: ..."
        files = sorted(out.iterdir())
        shown = stdout.getvalue() if "--json" in argv else ""  # the summary of -o says how long it took
        outputs.append((shown, [f.read_bytes() for f in files]))
    assert outputs[0] == outputs[1] == outputs[2]


def _random_frame(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Every kind of cell the tables hold: floats of every size and sign (numpy's text, -0.0, inf,
    whole numbers, NaN empty), float32, bools, missing ids, quoted and categorical strings, the
    record's id lists and notes, other lists (a config's top_head, per-position rates)."""
    special = np.asarray(
        [0.0, -0.0, 1.0, -2.0, 1e-5, 1e-4, 9.99e-5, 1e9, 1e15, 1e16, 2.5e-300, np.inf, -np.inf, np.nan]
    )
    values = np.concatenate(
        [
            special,
            rng.uniform(1, 10, n) * 10.0 ** rng.uniform(-8, 18, n),
            -rng.exponential(3, n),
            np.round(rng.standard_normal(n), 2),
        ]
    )
    m = values.shape[0]
    words = np.asarray(["a", "b,c", 'say "x"', "", "line\nend"], dtype=object)
    notes = [["fallback", 'a "b", c'], [], ["x"]]
    return pd.DataFrame(
        {
            "x": values,
            "x32": rng.permutation(values).astype(np.float32),
            "flag": rng.random(m) < 0.5,
            "id": pd.arrays.IntegerArray(rng.integers(-5, 9, m), rng.random(m) < 0.3),
            "word": rng.choice(words, m),
            "kind": pd.Categorical(rng.choice(words[:3], m)),
            "accepted_tokens": [rng.integers(0, 50_000, k).tolist() for k in rng.integers(0, 5, m)],
            "notes": [notes[k] for k in rng.integers(0, 3, m)],
            "top_head": [rng.integers(1, 9, k).tolist() for k in rng.integers(1, 4, m)],
            "rates": [values[rng.integers(0, m, k)].tolist() for k in rng.integers(0, 3, m)],
        }
    )


@pytest.mark.parametrize("seed", [4, 5])
def test_frame_csv_is_pandas_text(seed, monkeypatch):
    """write_frame_csv (Arrow, block by block) writes the bytes of the pandas reference,
    csv_frame(df).to_csv: on a frame of every kind of cell, on its columns without quotes (pyarrow's
    writer joins those), and on each column alone (a row of one empty field is written "")."""
    from replay.io import table_files
    from replay.testing.records_reference import csv_frame

    monkeypatch.setattr(table_files, "_CSV_ROWS_PER_WRITE", 7_001)  # several blocks
    df = _random_frame(np.random.default_rng(seed), 10_000)
    frames = [df, df[["x", "x32", "flag", "id", "accepted_tokens"]], df.iloc[:0]]
    frames += [df[[c]] for c in df.columns]
    for frame in frames:
        got = io.BytesIO()
        table_files.write_frame_csv(frame, got)
        assert got.getvalue() == csv_frame(frame).to_csv(index=False).encode(), list(frame.columns)


def test_report_names_each_phase_on_a_terminal(tmp_path, monkeypatch):
    """On one large run each of report's phases takes long, so a bar counting runs would stand still:
    on a terminal each phase draws its own bar named by phase and run (the comparison, the
    recommendation, the temperature curve of a scored run, tables/); none with --no-progress."""
    run = str(SAMPLES / "synthetic_article")
    for extra, drawn in (([], True), (["--no-progress"], False)):
        err = Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        assert main(["report", run, "-o", str(tmp_path / f"r{len(extra)}"), *extra]) == 0
        for phase in ("compare synthetic_article:", "recommend synthetic_article:", "tables:"):
            assert (phase in err.getvalue()) is drawn, (phase, err.getvalue())
        assert ("temperature curve synthetic_article:" in err.getvalue()) is drawn, err.getvalue()
