"""A dump directory whose name is not UTF-8 works in every command that writes or prints its label.

File names are bytes; Python keeps the bytes that are not UTF-8 as lone surrogates, which pyarrow,
JSON, CSV, HTML and matplotlib refuse to encode: ``stats``, ``plot``, ``compare`` and ``report``
ended in "internal error: UnicodeEncodeError". A run's label is made printable where it is made
from the path (analysis.tables.runs.unique_labels), so ``\\xff`` stands for the byte everywhere.
Each command runs as a separate process, as a user's shell runs it (its stdout is the real one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from replay.core.config_grammar import parse_config_text
from replay.testing.synth import write_synthetic_run

ROOT = Path(__file__).resolve().parent.parent
NAME = "run" + os.fsdecode(b"\xff")  # the directory's name: the byte 0xff, not UTF-8
SHOWN = "run\\xff"  # the label that stands for it


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("undecodable")
    write_synthetic_run(base / NAME, parse_config_text("[3]|[2,2]"), 4, seed=3)
    return base / NAME


def specreplay(*argv: str | os.PathLike) -> tuple[int, str, str]:
    """``specreplay ARGV`` as a separate process: (exit code, stdout, stderr), undecodable bytes kept."""
    done = subprocess.run(
        [sys.executable, "-m", "replay.cli", *map(str, argv), "--no-progress"],
        capture_output=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=300,
    )
    out, err = (s.decode("utf-8", "surrogateescape") for s in (done.stdout, done.stderr))
    assert "internal error" not in err, err
    return done.returncode, out, err


def test_stats_prints_the_label_and_its_json_is_utf8(dump):
    code, out, err = specreplay("stats", dump, dump, "--json")
    assert code == 0, err
    body = json.loads(out.encode("utf-8"))  # strict: no lone surrogates in what it printed
    assert {row["run"] for row in body["summary"]} == {SHOWN, SHOWN + "#2"}


def test_stats_output_tables_name_the_run(dump, tmp_path):
    code, _, err = specreplay("stats", dump, "-o", tmp_path / "tables")
    assert code == 0, err
    assert set(pd.read_parquet(tmp_path / "tables" / "rounds.parquet")["run"]) == {SHOWN}
    assert SHOWN in (tmp_path / "tables" / "rounds.csv").read_text(encoding="utf-8")


def test_plot_draws_the_label(dump, tmp_path):
    code, _, err = specreplay("plot", dump, "-o", tmp_path / "plots")
    assert code == 0, err
    assert any((tmp_path / "plots").glob("*.png"))


def test_compare_prints_the_label(dump):
    code, out, err = specreplay("compare", dump, "--configs", "3,1,1", "--json")
    assert code == 0, err
    assert {row["run"] for row in json.loads(out.encode("utf-8"))["configs"]} == {SHOWN}


def test_report_page_shows_the_label_and_directory(dump, tmp_path):
    code, _, err = specreplay("report", dump, "-o", tmp_path / "rep", "--title", "t" + os.fsdecode(b"\xfe"))
    assert code == 0, err
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert f"{SHOWN}</" in page and "t\\xfe" in page


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_batch_writes_its_table(dump, tmp_path, suffix):
    code, _, err = specreplay("batch", dump, "-o", tmp_path / f"rounds{suffix}")
    assert code == 0, err
    assert (tmp_path / f"rounds{suffix}").stat().st_size > 0


def test_batch_json_lines(dump):
    code, out, err = specreplay("batch", dump, "--json")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()]


def test_a_given_label_that_is_not_utf8_is_shown_the_same_way(dump):
    code, out, err = specreplay("stats", dump, "--label", "a" + os.fsdecode(b"\xfe"), "--json")
    assert code == 0, err
    assert {row["run"] for row in json.loads(out.encode("utf-8"))["summary"]} == {"a\\xfe"}


def test_every_stream_shows_the_name_alike(dump, tmp_path):
    """What a command echoes of a path (replay's summary, stats' first line, an error naming an
    output directory) shows the byte as ``\\xff`` too: no raw byte on stdout, no ``\\udcff`` on stderr."""
    code, out, err = specreplay("replay", dump, "--summary")
    assert code == 0 and f"summary of {dump.parent}/{SHOWN}" in out and NAME not in out, err
    code, out, err = specreplay("stats", dump)
    assert code == 0 and out.startswith(f"{dump.parent}/{SHOWN}  config") and NAME not in out, err
    missing = tmp_path / NAME / "b.csv"
    code, _, err = specreplay("batch", dump, "-o", missing)
    assert code == 2 and f"{tmp_path}/{SHOWN}/b.csv" in err and "\\udcff" not in err and NAME not in err, err


OUT = "out" + os.fsdecode(b"\xfe")  # an output directory whose name is not UTF-8


def _read_table(path: Path) -> pd.DataFrame:
    """A written table, opened by Python (pyarrow refuses such a path itself)."""
    with open(path, "rb") as f:
        return pd.read_parquet(f) if path.suffix == ".parquet" else pd.read_csv(f)


@pytest.mark.parametrize(
    "command, name, written",
    [
        ("stats", "t", ("t/rounds.parquet", "t/nodes.parquet", "t/summary.parquet", "t/rounds.csv")),
        ("report", "r", ("r/tables/rounds.parquet", "r/tables/nodes.parquet", "r/tables/summary.parquet")),
        ("batch", "b.parquet", ("b.parquet",)),
        ("batch", "b.csv", ("b.csv",)),
    ],
)
def test_tables_into_a_directory_whose_name_is_not_utf8(dump, tmp_path, command, name, written):
    # pyarrow is handed open files, never these paths, which it would encode as strict UTF-8
    (tmp_path / OUT).mkdir()
    code, _, err = specreplay(command, dump, "-o", tmp_path / OUT / name)
    assert code == 0, err
    for path in written:
        assert len(_read_table(tmp_path / OUT / path)) > 0, path
