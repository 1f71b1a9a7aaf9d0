"""Metric definitions live in one module and the docs and printed output repeat them verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.tables.definitions import BY_NAME, DEFINITIONS, DEPTH_NAMES, SUMMARY_NAMES, definitions_text, label
from analysis.tables.metrics import depth_acceptance, summary
from replay.cli import main
from tests.test_analysis_metrics import CFG, hand_results

VOCABULARY = Path(__file__).resolve().parent.parent / "docs" / "vocabulary.md"


def test_vocabulary_md_holds_every_definition_as_the_code_does():
    text = VOCABULARY.read_text(encoding="utf-8")
    for d in DEFINITIONS:
        row = f"| `{d.name}` | `{d.formula}` | {d.meaning} | {d.engines or '–'} |"
        assert row in text, (
            f"docs/vocabulary.md: no row for {d.name} as analysis/tables/definitions.py states it:\n{row}"
        )


def test_every_printed_metric_column_has_a_definition():
    from replay.testing.table_rows import round_table

    rounds = round_table(hand_results(), "hand", CFG)
    metric_cols = [c for c in summary(rounds).columns if c not in ("run", "rounds")]
    assert set(metric_cols) == set(SUMMARY_NAMES)
    rates = [
        c
        for c in depth_acceptance(rounds).columns
        if c in ("conditional", "per_position_acceptance_rate", "conditional_when_expanded")
    ]
    assert set(rates) == set(DEPTH_NAMES)
    assert all(name in BY_NAME for name in metric_cols + rates)


def test_definitions_text_and_labels():
    text = definitions_text(["draft_acceptance_rate"])
    assert text.splitlines()[0] == "  draft_acceptance_rate = Σ_r L_r / Σ_r nodes_r"
    assert "vLLM 'Draft acceptance rate'" in text and "llama.cpp" in text
    assert "bonus included" in label("mean_acceptance_length") and "bonus excluded" in label("mean_accepted_length")
    with pytest.raises(KeyError, match="no definition for 'nope'"):
        label("nope")


def test_stats_prints_the_definitions_of_what_it_shows(capsys):
    assert main(["stats", "sample_dumps/article_round", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "== definitions (docs/vocabulary.md) ==" in out
    for name in SUMMARY_NAMES + DEPTH_NAMES:
        assert f"  {name} = {BY_NAME[name].formula}" in out
    # the article's round: L = 3 of 12 drafted nodes, 4 tokens counting the target's
    assert "draft_acceptance_rate" in out and "0.2500" in out and "4.0000" in out
