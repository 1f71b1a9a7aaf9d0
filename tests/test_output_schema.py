"""Every per-round output loads in one pandas line with the record's columns and the same values;
every summary JSON loads through its documented one-liner (docs/output-schema.md)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from replay.cli import api, main
from replay.core import records
from replay.core.headline import metric_text
from replay.testing.replayer import replay_directory

SAMPLES = ["sample_dumps/article_round", "sample_dumps/synthetic_article"]
COLS = list(records.COLUMNS)


def _stdout(argv, capsys) -> str:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, argv
    return out


def _loaded(sample: str, tmp_path, capsys) -> dict[str, pd.DataFrame]:
    """Each per-round output, loaded as docs/output-schema.md says (one line each)."""
    got = {}
    for cmd in ("replay", "batch"):
        text = _stdout([cmd, sample, "--json"], capsys)
        got[f"{cmd} --json"] = records.read_json(io.StringIO(text))  # the documented one-liner
        got[f"{cmd} --json, plain pandas"] = records.normalize_frame(
            pd.read_json(io.StringIO(text), lines=True, dtype=records.JSON_DTYPES)
        )
    for ext in ("csv", "parquet"):
        path = tmp_path / f"rounds.{ext}"
        assert main(["batch", sample, "-o", str(path), "--no-progress"]) == 0
        capsys.readouterr()
        got[f"batch -o .{ext}"] = (
            records.read_csv(path) if ext == "csv" else records.normalize_frame(pd.read_parquet(path))
        )
    got["batch -o .csv, plain pandas"] = records.normalize_frame(
        pd.read_csv(tmp_path / "rounds.csv", converters=records.CSV_CONVERTERS, dtype=records.CSV_DTYPES)
    )
    export = tmp_path / "tables"
    _stdout(["stats", sample, "--table", "rounds", "--export", str(export), "--no-progress"], capsys)
    got["stats export .parquet"] = records.normalize_frame(pd.read_parquet(export / "rounds.parquet"))
    got["stats export .csv"] = records.read_csv(export / "rounds.csv")
    text = _stdout(["stats", sample, "--table", "rounds", "--csv", "--no-progress"], capsys)
    got["stats --table rounds --csv"] = records.read_csv(io.StringIO(text))
    got["stats --table rounds --json"] = records.read_json(
        io.StringIO(_stdout(["stats", sample, "--table", "rounds", "--json", "--no-progress"], capsys))
    )
    got["api rounds_table"] = records.normalize_frame(api.rounds_table(api.load(sample)))
    return got


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLES)
def test_per_round_outputs_agree(sample, tmp_path, capsys):
    got = _loaded(sample, tmp_path, capsys)
    # The oracle: the scalar reference replay, read field by field (not through the serializer).
    ref = replay_directory(sample).results
    assert ref
    for what, frame in got.items():
        assert list(frame.columns[: len(COLS)]) == COLS, what
        frame = frame[COLS].reset_index(drop=True)
        assert frame["round"].tolist() == [r.name for r in ref], what
        assert frame["accepted_length"].tolist() == [r.acceptance.accepted_length for r in ref], what
        assert frame["accepted_tokens"].tolist() == [list(r.acceptance.accepted_tokens) for r in ref], what
        assert frame["committed_tokens"].tolist() == [list(r.acceptance.committed_tokens) for r in ref], what
        assert frame["num_committed"].tolist() == [len(r.acceptance.committed_tokens) for r in ref], what
        assert frame["bonus_token"].tolist() == [
            pd.NA if r.acceptance.bonus_token is None else r.acceptance.bonus_token for r in ref
        ], what
        assert frame["bonus_kind"].tolist() == [r.acceptance.bonus_kind for r in ref], what
        assert frame["notes"].tolist() == [list(r.notes) for r in ref], what
        pd.testing.assert_frame_equal(frame, got["replay --json"][COLS], check_dtype=False, obj=what)


def test_article_round_by_hand(tmp_path, capsys):
    """The article's round (docs/vocabulary.md): path A1 > B11 > C111, no bonus row in the dump."""
    frame = _loaded("sample_dumps/article_round", tmp_path, capsys)["batch -o .csv"]
    row = frame.iloc[0]
    assert (row["round"], row["key_a"], row["key_b"], row["shape"]) == ("124_140", 124, 140, "[6]|[2,2]|[1,1]")
    assert row["accepted_tokens"] == [41824, 41760, 22870] and row["accepted_nodes"] == [1, 7, 11]
    assert (
        row["accepted_length"] == 3
        and row["num_committed"] == 3
        and pd.isna(row["bonus_token"])
        and row["bonus_kind"] is None
    )


@pytest.mark.slow
def test_summary_json_one_liners(capsys):
    sample = "sample_dumps/synthetic_article"
    stats = json.loads(_stdout(["stats", sample, "--json", "--no-progress"], capsys))
    summary = pd.DataFrame(stats["summary"])  # docs/output-schema.md
    n = len(replay_directory(sample).results)
    assert summary["rounds"].tolist() == [n]
    compare = json.loads(_stdout(["compare", sample, "--configs", "[[4],[1,1]]", "--json", "--no-progress"], capsys))
    table = pd.DataFrame(compare["configs"])  # docs/output-schema.md
    assert len(table) == 2 and {"config", "run"} <= set(table.columns)


def test_compare_csv_top_head_round_trips(capsys):
    text = _stdout(
        ["compare", "sample_dumps/article_round", "--configs", "[[4],[1,1]]", "--csv", "--no-progress"], capsys
    )
    table = pd.read_csv(io.StringIO(text), converters={"top_head": json.loads})  # docs/output-schema.md
    # the recorded config's topHead (sample_dumps/article_round/config.json) and the given one's
    # (a topKSpec list alone: one head per width listed, [[4],[1,1]] -> [1,2])
    assert sorted(map(tuple, table["top_head"])) == [(1, 2), (1, 2, 2)]


# --- docs/output-schema.md names only what the data holds, and everything it holds ---------------

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "output-schema.md"


def _doc_record_columns() -> list[str]:
    """The per-round record's columns as the doc's column table lists them, in order."""
    text = SCHEMA.read_text(encoding="utf-8")
    table = text.split("Columns, in this order", 1)[1].split("\n\n", 2)[1]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])]


def _doc_cells(column: str) -> str:
    row = next(ln for ln in SCHEMA.read_text(encoding="utf-8").splitlines() if ln.startswith(f"| `{column}` |"))
    return row.split("|")[3]


def _doc_analysis_columns() -> list[str]:
    text = SCHEMA.read_text(encoding="utf-8")
    sentence = text.split("followed by analysis columns:", 1)[1].split("; meanings", 1)[0]
    return [c for c in re.findall(r"`([^`]+)`", sentence) if re.fullmatch(r"[a-z_]+", c)]


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLES)
def test_output_schema_md_names_exactly_the_columns_the_data_has(sample, capsys):
    """Every column the doc names is a real column, in the real order, and every real column is
    named: a doc that says path_prob for path_probability, or misses a column, fails here."""
    documented = _doc_record_columns()
    assert documented == list(records.COLUMNS)
    assert set(documented) == set(records.COLUMN_MEANINGS)
    line = _stdout(["replay", sample, "--json"], capsys).splitlines()[0]
    assert list(json.loads(line)) == documented  # what a user's file holds
    rounds = json.loads(_stdout(["stats", sample, "--table", "rounds", "--json", "--no-progress"], capsys))
    from analysis.tables.build import ANALYSIS_COLUMNS

    assert list(rounds[0]) == documented + _doc_analysis_columns()
    assert _doc_analysis_columns() == list(ANALYSIS_COLUMNS)


@pytest.mark.slow
def test_output_schema_md_names_the_values_the_data_uses(capsys):
    """The words the doc gives for selection, stop, bonus_kind and layout are the code's words, and
    the bundled samples use no other."""
    from replay.core import vocab

    words = {
        "selection": {vocab.SELECT_PATH_PROB, vocab.SELECT_PARENTS, vocab.SELECT_FALLBACK, vocab.SELECT_ROOT},
        "stop": {vocab.STOP_LEAF, vocab.STOP_MISMATCH, vocab.STOP_NO_ROW},
        "bonus_kind": {vocab.BONUS_CORRECTION, vocab.BONUS_LEAF},
        "layout": {"parents", "all"},
        "layout_source": {"stated", "detected"},
    }
    for column, expected in words.items():
        named = set(re.findall(r"`([a-z_]+)`", _doc_cells(column))) - {column}
        assert named == expected, column
    seen = {c: set() for c in words}
    for sample in [*SAMPLES, "sample_dumps/qwen2.5-coder/article"]:
        for line in _stdout(["replay", sample, "--json"], capsys).splitlines():
            obj = json.loads(line)
            for c in words:
                if obj[c] is not None:
                    seen[c].update(obj[c].split("+") if c == "selection" else [obj[c]])
    for c, named in words.items():
        assert seen[c] <= named, c
    assert vocab.SELECT_PATH_PROB in seen["selection"]  # a scored sample: the word users filter on


@pytest.mark.slow
def test_summary_object_keys_are_the_documented_ones(capsys):
    """The keys docs/output-schema.md lists for stats --json and recommend --json are the keys printed."""
    text = SCHEMA.read_text(encoding="utf-8")

    def listed(command: str) -> set[str]:
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| `{command} --json` |"))
        return set(re.findall(r"`([a-z_]+)`", row.split("|")[2]))

    sample = "sample_dumps/synthetic_article"
    stats = json.loads(_stdout(["stats", sample, "--json", "--no-progress"], capsys))
    assert set(stats) == listed("specreplay stats DUMP...") - {"run"}  # "run → tree config" names the configs' keys
    rec = json.loads(
        _stdout(["recommend", sample, "--budget", "6", "--bootstrap", "5", "--json", "--no-progress"], capsys)
    )
    assert listed("specreplay recommend DUMP") <= set(rec)


def test_stats_summary_columns_are_the_documented_ones(capsys):
    """A new summary metric reaches docs/output-schema.md: its `stats` summary row (greedy) and its
    `stats --temperature --json` row list exactly the summary's columns, in order."""
    text = SCHEMA.read_text(encoding="utf-8")
    greedy_row = next(ln for ln in text.splitlines() if ln.startswith("| `stats` `summary` |"))
    sampled_row = next(ln for ln in text.splitlines() if ln.startswith("| `specreplay stats DUMP... --temperature T"))
    sampled_cell = sampled_row.split("|")[2].split("`summary` (per run:", 1)[1].split(")", 1)[0]
    sample = "sample_dumps/synthetic_article"
    greedy = json.loads(_stdout(["stats", sample, "--json", "--no-progress"], capsys))["summary"]
    greedy_cell = re.sub(r"\([^)]*\)", "", greedy_row.split("|")[2])  # a column's parenthesis names others
    assert re.findall(r"`([a-z_]+)`", greedy_cell) == list(greedy[0])
    sampled = json.loads(_stdout(["stats", sample, "--temperature", "0.7", "--json", "--no-progress"], capsys))
    documented = []
    for name in re.findall(r"`([a-z_]+)`(?:/`(_[a-z]+)`)?", sampled_cell):
        documented += [name[0], name[0][: -len(name[1].lstrip("_")) - 1] + name[1]] if name[1] else [name[0]]
    assert ["run", *documented] == list(sampled["summary"][0])


def test_analysis_md_summary_table_is_what_stats_prints(capsys):
    """docs/analysis.md's "Results on the samples" summary (pasted from scripts/make_analysis_docs.py)
    has the summary's columns and the numbers `stats --json` gives today, as `stats` prints them."""
    text = (SCHEMA.parent / "analysis.md").read_text(encoding="utf-8")
    lines = text.split("## Results on the samples", 1)[1].split("| run |", 1)[1].split("\n\n", 1)[0].splitlines()
    header = ["run", *(c.strip() for c in lines[0].split("|")[:-1])]
    rows = {cells[0]: cells for cells in ([c.strip() for c in ln.split("|")[1:-1]] for ln in lines[2:])}
    assert set(rows) == {"synthetic_article", "article_round"}
    for run, cells in rows.items():
        (printed,) = json.loads(_stdout(["stats", f"sample_dumps/{run}", "--json", "--no-progress"], capsys))["summary"]
        assert header == list(printed)
        for name, cell in zip(header[1:], cells[1:]):
            value = printed[name]
            assert cell == (str(value) if name == "rounds" else metric_text(value)), (run, name)


def test_the_loaders_the_doc_gives_compare_equal(tmp_path, capsys):
    """The doc said `pd.read_parquet` already gives the one form; its list columns are numpy arrays,
    so that frame is not `.equals` the JSON one until records.normalize_frame. Every Parquet load
    the doc gives is wrapped in it, and `records` is imported before the first use."""
    sample = "sample_dumps/article_round"
    parquet = tmp_path / "r.parquet"
    assert main(["batch", sample, "-o", str(parquet), "--no-progress"]) == 0
    from_json = records.read_json(io.StringIO(_stdout(["replay", sample, "--json"], capsys)))
    assert not from_json.equals(pd.read_parquet(parquet))
    assert from_json.equals(records.normalize_frame(pd.read_parquet(parquet)))
    text = SCHEMA.read_text(encoding="utf-8")
    assert text.index("from replay.core import records") < text.index("`records.")
    assert text.count("pd.read_parquet(") == text.count("records.normalize_frame(pd.read_parquet(")
