"""report -o DIR: new, empty, or an earlier report (replaced whole); anything else refused before any
work. A report written over an earlier one replaces it whole: none of the earlier temperature-curve
tables stays, so tables/ never describes two different dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from replay.cli import main

SCORED = "sample_dumps/synthetic_article"  # validate scores: its report writes the curve's tables
UNSCORED = "sample_dumps/article_round"  # no scores: no curve, no sampling_curve table
RECORD = ".specreplay-report.json"  # what a report wrote: the files the next one may replace


def report(capsys, dump: str, out: Path, *extra: str) -> tuple[int, str]:
    code = main(["report", dump, "-o", str(out), "--no-progress", *extra])
    return code, capsys.readouterr().err


def test_a_report_over_an_earlier_one_keeps_none_of_its_tables(capsys, tmp_path):
    out = tmp_path / "rep"
    assert report(capsys, SCORED, out)[0] == 0
    before = {p.name for p in (out / "tables").iterdir()}
    assert "sampling_curve.csv" in before
    code, err = report(capsys, UNSCORED, out)
    assert code == 0, err
    after = {p.name for p in (out / "tables").iterdir()}
    assert "sampling_curve.csv" not in after and "sampling_curve.parquet" not in after
    assert after and after < before
    assert sorted(p.name for p in out.iterdir()) == [RECORD, "index.html", "tables"]  # no staging left behind
    assert set(pd.read_parquet(out / "tables" / "rounds.parquet")["run"]) == {"article_round"}
    # --no-tables over a report with tables: the old tables/ would describe the other dump
    code, _ = report(capsys, SCORED, out, "--no-tables")
    assert code == 0 and sorted(p.name for p in out.iterdir()) == [RECORD, "index.html"]


def test_the_row_tables_are_parquet_unless_csv_tables_is_given(capsys, tmp_path):
    """The round and node tables are Parquet only by default, CSV too with --csv-tables (the same
    Parquet bytes either way); the aggregate tables are both; the record lists what was written and
    the page says where the row tables are."""
    pages, parquet = [], []
    for extra in ((), ("--csv-tables",)):
        out = tmp_path / f"rep{len(extra)}"
        code, err = report(capsys, UNSCORED, out, *extra)
        assert code == 0, err
        names = {p.name for p in (out / "tables").iterdir()}
        assert {"rounds.parquet", "nodes.parquet", "summary.csv", "summary.parquet"} <= names
        assert ({"rounds.csv", "nodes.csv"} <= names) is bool(extra)
        record = json.loads((out / RECORD).read_text(encoding="utf-8"))["files"]
        assert sorted(record) == sorted(["index.html", *(f"tables/{n}" for n in names)])
        pages.append((out / "index.html").read_text(encoding="utf-8"))
        parquet.append([(out / "tables" / f"{n}.parquet").read_bytes() for n in ("rounds", "nodes")])
    assert "as Parquet only (tables/rounds.parquet, tables/nodes.parquet): report --csv-tables writes" in pages[0]
    assert "as Parquet only" not in pages[1]
    assert parquet[0] == parquet[1]


def test_a_directory_of_other_files_is_refused_and_left_as_it_was(capsys, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    code, err = report(capsys, UNSCORED, out)
    assert code == 2
    assert f"-o {out}: not empty and not a report (it holds notes.txt)" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    # a report directory with a foreign file in tables/ is not an earlier report either
    rep = tmp_path / "rep"
    assert report(capsys, UNSCORED, rep)[0] == 0
    (rep / "tables" / "chart.png").write_bytes(b"x")
    code, err = report(capsys, UNSCORED, rep)
    assert code == 2 and "tables/chart.png" in err
    assert (rep / "tables" / "chart.png").exists()


def test_the_staging_of_an_interrupted_report_is_cleared(capsys, tmp_path):
    out = tmp_path / "rep"
    assert report(capsys, UNSCORED, out)[0] == 0
    stale = out / ".tables.partial-999999"
    stale.mkdir()
    (stale / "rounds.csv").write_text("half", encoding="utf-8")
    code, err = report(capsys, UNSCORED, out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [RECORD, "index.html", "tables"]


def test_a_tables_link_is_not_an_earlier_reports_tables(capsys, tmp_path):
    # the report replaces tables/ whole: a symbolic link there would have the files it points at removed
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    (elsewhere / "keep.csv").write_text("a\n", encoding="utf-8")
    out = tmp_path / "rep"
    out.mkdir()
    (out / "tables").symlink_to(elsewhere, target_is_directory=True)
    code, err = report(capsys, UNSCORED, out)
    assert code == 2 and "(it holds tables)" in err and "Traceback" not in err
    assert (elsewhere / "keep.csv").read_text(encoding="utf-8") == "a\n"

    (out / "tables").unlink()
    (out / "index.html").symlink_to(elsewhere / "keep.csv")
    code, err = report(capsys, UNSCORED, out)
    assert code == 2 and "(it holds index.html)" in err
    assert (elsewhere / "keep.csv").read_text(encoding="utf-8") == "a\n"


@pytest.mark.parametrize(
    "own",
    [("tables/mine.csv",), ("index.html",), ("index.html", "tables/results.csv")],
    ids=["tables-only", "index-only", "both"],
)
def test_a_users_own_index_or_tables_is_not_an_earlier_report(capsys, tmp_path, own):
    # a directory holding only tables/mine.csv, or the user's own index.html, is not taken for an
    # earlier report by its names (mine.csv deleted, the page overwritten, exit 0)
    out = tmp_path / "site"
    for name in own:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("mine", encoding="utf-8")
    code, err = report(capsys, UNSCORED, out)
    assert code == 2 and "not empty and not a report" in err, err
    for name in own:
        assert (out / name).read_text(encoding="utf-8") == "mine"


def test_a_file_added_to_an_earlier_reports_tables_is_not_deleted(capsys, tmp_path):
    out = tmp_path / "rep"
    assert report(capsys, UNSCORED, out)[0] == 0
    (out / "tables" / "notes.csv").write_text("mine", encoding="utf-8")
    code, err = report(capsys, UNSCORED, out)
    assert code == 2 and "tables/notes.csv" in err
    assert (out / "tables" / "notes.csv").read_text(encoding="utf-8") == "mine"


def page_names(out: Path) -> set[str]:
    """The files under tables/ that the page at ``out`` names."""
    import re

    return set(
        re.findall(r"tables/([A-Za-z0-9_.]+\.(?:csv|parquet))", (out / "index.html").read_text(encoding="utf-8"))
    )


def test_the_page_names_only_tables_that_were_written(capsys, tmp_path):
    """New-user try: with --no-tables the page still pointed at tables/depth_acceptance.csv and
    tables/sampling_curve.csv, and a dump without scores (no curve) at tables/sampling_curve.csv."""
    out = tmp_path / "rep"
    assert report(capsys, SCORED, out, "--no-tables")[0] == 0
    assert "tables/" not in (out / "index.html").read_text(encoding="utf-8")
    assert report(capsys, SCORED, out)[0] == 0
    named = page_names(out)
    rows = {"rounds.parquet", "nodes.parquet"}  # the line saying where the row tables are
    assert named == {"depth_acceptance.csv", "sampling_curve.csv"} | rows  # both said where each number is
    assert all((out / "tables" / name).is_file() for name in named)
    assert report(capsys, UNSCORED, out)[0] == 0  # no scores: no curve, no sampling_curve.csv
    named = page_names(out)
    assert named == {"depth_acceptance.csv"} | rows and all((out / "tables" / name).is_file() for name in named)


def test_a_depth_no_round_passes_draws_its_interval_from_zero(capsys, tmp_path):
    # 0 of 3 rounds accepted at depth 2: were the Wilson interval's lower end 5.6e-17, the error
    # bar rate - lo would be a negative length, and `report` and `plot` would stop with an internal
    # error (a hand-made 3-round dump)
    import numpy as np

    from replay.core.config import TreeConfig
    from replay.testing.synth import write_synthetic_run

    cfg = TreeConfig.from_lists([[2], [1], [1]], [1, 1, 1])
    hit = np.zeros((cfg.gamma + 1, cfg.max_width + 2))
    hit[0, 0] = 1.0  # depth 1 always accepted, nothing deeper
    dump = tmp_path / "dump"
    write_synthetic_run(dump, cfg, rounds=3, hit=hit)
    code, err = report(capsys, str(dump), tmp_path / "rep")
    assert code == 0, err
    assert main(["plot", str(dump), "-o", str(tmp_path / "plots")]) == 0, capsys.readouterr().err
    assert (tmp_path / "plots" / "depth_acceptance.png").stat().st_size > 0
