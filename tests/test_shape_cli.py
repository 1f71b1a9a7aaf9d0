"""`specreplay recommend` on the sample dumps: text, JSON and the report section."""

from __future__ import annotations

import json

from analysis.recommend import recommend, recommend_section
from replay.cli import main
from replay.replayer import replay_directory

SAMPLE = "sample_dumps/synthetic_article"


def test_cli_text(capsys):
    rc = main(["recommend", SAMPLE, "--budget", "8", "--bootstrap", "30", "--verify-cost", "0.35,0.04", "--draft-cost", "0.02"])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert "top shapes by expected block efficiency" in out and "top shapes by modelled speedup" in out
    assert '"topKSpec"' in out and "R (root" in out and "prediction vs exact replay" in out


def test_cli_json_and_errors(capsys):
    assert main(["recommend", SAMPLE, "--budget", "6", "--bootstrap", "20", "--json"]) in (0, 1)
    obj = json.loads(capsys.readouterr().out)
    assert obj["by_block_efficiency"][0]["nodes"] == 6 and obj["by_speedup"] == []
    assert main(["recommend", SAMPLE, "--budget", "0"]) == 2
    assert main(["recommend", SAMPLE, "--budget", "4", "--draft-cost", "0.1"]) == 2


def test_report_section():
    rec = recommend([replay_directory(SAMPLE)], 6, bootstrap=20)
    html = recommend_section(rec)
    assert html.startswith("<section") and "Tree-shape search" in html and "recorded" in html
