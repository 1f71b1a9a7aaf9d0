"""`specreplay recommend` on the sample dumps: text, JSON and the report section."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from analysis.compare.subtree import is_contained
from analysis.shapes.dumps import scan_run
from analysis.shapes.recommend_render import recommend_section
from replay.cli import main
from replay.core.config import TreeConfig, grid_item
from replay.live.sweep.grid import parse_grid
from replay.testing.replayer import replay_directory
from replay.testing.subtree_walk import replay_subconfig
from tests.reference_runs import recommend, subtree_measure

SAMPLE = "sample_dumps/synthetic_article"


def test_cli_text(capsys):
    rc = main(
        [
            "recommend",
            SAMPLE,
            "--budget",
            "8",
            "--bootstrap",
            "30",
            "--verify-cost",
            "0.35,0.04",
            "--draft-cost",
            "0.02",
        ]
    )
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert "top shapes by expected block efficiency" in out and "top shapes by modelled speedup" in out
    assert (
        re.search(r"^1\. \[\d+\]", out, flags=re.MULTILINE) and "R (root" in out and "prediction vs exact replay" in out
    )


def test_cli_json_and_errors(capsys):
    assert main(["recommend", SAMPLE, "--budget", "6", "--bootstrap", "20", "--json"]) in (0, 1)
    obj = json.loads(capsys.readouterr().out)
    assert obj["by_block_efficiency"][0]["nodes"] == 6 and obj["by_speedup"] == []
    assert main(["recommend", SAMPLE, "--budget", "0"]) == 2
    assert main(["recommend", SAMPLE, "--budget", "4", "--draft-cost", "0.1"]) == 2


@pytest.fixture(scope="module")
def sample():
    return replay_directory(SAMPLE)


@pytest.mark.slow
def test_contained_shapes_are_measured_exactly(sample, capsys):
    rec = recommend([sample], 12, bootstrap=30)
    rows = [c for c in rec.comparisons if c.label != "recorded trees"]
    contained = [c for c in rows if is_contained(c.config, sample.tree)]
    assert len(contained) >= 4  # the recorded config and the best contained shapes
    for c in contained:  # every contained shape is replayed by replay.testing.subtree_walk and decided here
        assert c.measured is not None and c.measured.decided and c.agree is not None, c.to_json()
        assert c.measured.rounds == 300 and c.measured.lower == c.measured.upper == c.measured.mean_accepted
    assert all(c.measured is None and c.agree is None for c in rows if c not in contained)
    # the recorded config's measurement is the replay itself: stats' mean acceptance length (accepted + 1), exactly
    (recorded,) = [c for c in rows if c.label == "recorded"]
    assert main(["stats", SAMPLE, "--json", "--no-progress"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)["summary"]
    assert recorded.measured_be == summary["mean_acceptance_length"]


def test_undecidable_rounds_give_bounds_and_no_verdict(sample):
    # [6]|[1,1]|[1,1] is contained but its own selection leaves the recording in some rounds
    # (docs/analysis.md); the bounds are compare's lo..hi, aggregated here by hand from the
    # per-round outcomes of replay.testing.subtree_walk, and the batch path (analysis.compare.subtree_batch) agrees
    cfg = TreeConfig.from_lists([[6], [1, 1], [1, 1]], [1, 2, 2])
    outs = [replay_subconfig(r, cfg, 0.0, None, sample.tree.gamma) for r in sample.results]
    undecidable = sum(not o.decided for o in outs)
    assert 0 < undecidable < len(outs)
    m = subtree_measure(sample.results, sample.tree)(cfg)
    assert m.undecidable == undecidable and m.rounds == len(outs) - undecidable and not m.decided
    assert m.lower == pytest.approx(sum(o.lower for o in outs) / len(outs))
    assert m.upper == pytest.approx(sum(o.upper for o in outs) / len(outs))
    assert m.mean_accepted == pytest.approx(np.mean([o.lower for o in outs if o.decided]))
    assert m.lower < m.upper
    (batch,) = scan_run(SAMPLE).measure_many([cfg])
    assert (batch.undecidable, batch.rounds) == (m.undecidable, m.rounds)
    assert (batch.lower, batch.upper, batch.mean_accepted, batch.se) == pytest.approx(
        (m.lower, m.upper, m.mean_accepted, m.se)
    )


def test_live_command_for_shapes_not_contained(sample, capsys):
    assert main(["recommend", SAMPLE, "--budget", "12", "--bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    (line,) = [x.strip() for x in out.splitlines() if x.strip().startswith("specreplay sweep ")]
    grid = line.split('--grid "')[1].split('"')[0]
    live, _ = parse_grid(grid)
    assert ";".join(grid_item(c) for c in live) == grid  # grid_item is parse_grid's inverse
    assert live and not any(is_contained(c, sample.tree) for c in live)
    assert "live run needed" in out and "contained#1" in out


@pytest.mark.parametrize("budget", [6, 12])
def test_report_section(sample, budget):
    rec = recommend([sample], budget, bootstrap=20)
    html = recommend_section(rec)
    assert html.startswith("<section") and "Tree-shape recommendation" in html and "recorded" in html and "BE#1" in html
    # the live-run command is there exactly when some listed shape is not contained in the recording
    needs_live = any(not is_contained(c.config, sample.tree) for c in rec.comparisons if c.label != "recorded trees")
    assert ("specreplay sweep" in html) == needs_live


@pytest.mark.slow
def test_report_has_recommendation(tmp_path):
    out = tmp_path / "rep"
    args = ["report", SAMPLE, "-o", str(out), "--no-progress", "--no-tables", "--budget", "6", "--max-depth", "2"]
    assert main(args) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<h2>Tree-shape recommendation</h2>" in page and "budget 6 nodes, max depth 2" in page
    assert main(["report", SAMPLE, "-o", str(out), "--budget", "0"]) == 2


def test_agreement_with_undecidable_rounds_is_judged_on_both_bounds():
    """pred BE 3.0 (se .05), measured se .05: tolerance 1.96·hypot(.05, .05) = 0.1386."""
    from analysis.shapes.recommend import Measured, ShapeCheck
    from replay.core.config import TreeConfig

    cfg = TreeConfig.from_lists([[2]])

    def row(lower, upper, undecidable=3):
        m = Measured((lower + upper) / 2, 0.05, 50, "test", undecidable, lower, upper)
        return ShapeCheck("x", cfg, 2, 3.0, 0.05, m)

    assert row(1.95, 2.05).agree is True  # BE 2.95..3.05: both ends within 0.1386 of 3.0
    assert row(1.50, 1.60).agree is False  # BE 2.50..2.60: both ends below 2.8614
    assert row(1.70, 2.30).agree is None  # BE 2.70..3.30: straddles, both ends fail
    assert row(2.0, 2.0, undecidable=0).agree is True and row(2.0, 2.0, 0).error == 0.0
