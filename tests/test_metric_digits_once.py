"""One acceptance figure, one printed string: compare shows the recorded config's mean acceptance
length, draft acceptance rate, per-position rates and mean accepted length as stats and replay
--summary show the same figures of the same run (replay.core.headline.metric_text), greedy and at
a temperature."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_user_mistakes import SYNTH, run, small_root_by_hand, write_matrix

FIGURES = ("mean_acceptance_length", "draft_acceptance_rate", "mean_accepted_length")


def uneven_rounds_by_hand(directory: Path) -> Path:
    """Three rounds of ``[3]|[2,1]`` accepting 2, 2 and 1 tokens: thirds, which 3 and 4 decimals print apart."""
    small_root_by_hand(directory)
    write_matrix(directory / "validate_30_30", [[300], [7], [8]])  # the first child only: 7 is none of its children
    return directory


def compare_recorded_row(capsys, *argv) -> dict[str, str]:
    """compare's first table row (the recorded config) by column: pandas right-aligns each cell
    under its header's last character (a per-depth cell holds one value per depth)."""
    code, out, err = run(capsys, "compare", *argv, "--no-progress")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["config", "top_head"])
    header, row = lines[at], lines[at + 1]
    cells, start = {}, 0
    for word in re.finditer(r"\S+", header):
        cells[word.group()] = row[start : word.end()].strip()
        start = word.end()
    return cells


def stats_summary_row(capsys, *argv) -> dict[str, str]:
    """The summary table of ``stats`` by column (one run)."""
    code, out, err = run(capsys, "stats", *argv, "--table", "summary", "--no-progress")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    at = next(i for i, line in enumerate(lines) if line.split()[0] == "run")
    return dict(zip(lines[at].split(), lines[at + 1].split()))


def summary_lines(capsys, dump: Path) -> dict[str, str]:
    """replay --summary's headline figures, as printed."""
    code, out, err = run(capsys, "replay", "--summary", dump)
    assert code == 0, err
    number = r"(\d+\.\d+)"
    found = {
        "mean_acceptance_length": re.search(r"mean acceptance length \(bonus included\): " + number, out),
        "draft_acceptance_rate": re.search(r"draft acceptance rate: " + number, out),
        "mean_accepted_length": re.search(r"mean accepted length \(bonus excluded\): " + number, out),
    }
    figures = {name: m.group(1) for name, m in found.items() if m}
    assert len(figures) == len(found), out
    positions = re.search(r"per-position acceptance rate P\(L >= d\): (.*)", out)
    assert positions, out
    figures["per_position_acceptance_rate"] = " ".join(re.findall(r"d\d+: (\S+)", positions.group(1)))
    return figures


@pytest.mark.parametrize("which", ["synthetic_article", "by hand"])
def test_compare_prints_the_recorded_figures_as_stats_and_replay_summary_do(capsys, tmp_path, which):
    dump = SYNTH if which == "synthetic_article" else uneven_rounds_by_hand(tmp_path / "dump")
    shown = compare_recorded_row(capsys, dump)
    stats = stats_summary_row(capsys, dump)
    headline = summary_lines(capsys, dump)
    for name in FIGURES:
        assert shown[name] == stats[name] == headline[name], name
    assert shown["per_position_acceptance_rate"] == headline["per_position_acceptance_rate"]
    if which == "by hand":  # thirds: the strings differ at any other number of decimals
        assert (
            headline["mean_accepted_length"] == "1.6667" and headline["per_position_acceptance_rate"] == "1.0000 0.6667"
        )


def test_compare_at_a_temperature_prints_the_recorded_figures_as_stats_does(capsys):
    shown = compare_recorded_row(capsys, SYNTH, "--temperature", "0.7")
    stats = stats_summary_row(capsys, SYNTH, "--temperature", "0.7")
    assert shown["expected_block_efficiency"] == stats["mean_acceptance_length"]
    assert shown["expected_accepted_length"] == stats["mean_accepted_length"]
    assert ".." in stats["mean_acceptance_length"]  # bounds, each end printed alike
