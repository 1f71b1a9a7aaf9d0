"""docs/api.md's example runs as written on the bundled samples, and shows what the page says."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from analysis.cost.model import SOURCE_DEFAULT
from analysis.cost.source import SOURCE_MANIFEST
from replay.cli import api
from replay.util.errors import SpecReplayError

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_the_pages_example_runs_and_says_true(tmp_path, monkeypatch):
    blocks = _python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 1
    (tmp_path / "sample_dumps").symlink_to(ROOT / "sample_dumps")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(blocks[0], str(PAGE), "exec"), ns)  # noqa: S102 - our own documentation
    assert (tmp_path / "depth_acceptance.png").stat().st_size > 5000
    assert (tmp_path / "typical_failing_round.png").stat().st_size > 5000
    summary, speed = ns["summary"], ns["speed"]
    # the packed run replays to the same rounds as its directory, timings included
    assert summary.loc["real"].equals(summary.loc["real_packed"])
    assert speed.loc["real"].equals(speed.loc["real_packed"])
    assert speed.loc["synthetic", "cost_source"] == SOURCE_DEFAULT and speed["measured_speedup"].isna()["synthetic"]
    assert speed.loc["real", "cost_source"].startswith(SOURCE_MANIFEST)
    # measured only when the manifest timed both sides in one interleaved session (the samples
    # bundled before the harness did are not comparable, and say so)
    interleaved = (
        json.loads((ROOT / ns["runs"][1].replay.manifest.path).read_text())["totals"].get("timing") is not None
    )
    if interleaved:
        assert speed.loc["real", "measured_status"] == "measured" and speed.loc["real", "measured_speedup"] > 0
    else:
        assert (
            speed.loc["real", "measured_status"].startswith("not comparable: ")
            and speed["measured_speedup"].isna()["real"]
        )
    # a typical failing round stopped on a mismatch
    assert ns["pick"].result.acceptance.stop == "mismatch"
    # the compare table starts with the recorded config, which alone has a measured speedup
    table = ns["table"]
    status = table["measured_status"].tolist()
    assert table["config"].tolist()[0] == "[6]|[2,2]|[1,1]" and status[0] in (
        "measured",
        speed.loc["real", "measured_status"],
    )
    assert status[1:] == ["not comparable: this config was not run (only the recorded one has timings)"] * 2
    assert table["measured_speedup"].notna().tolist() == [interleaved, False, False]


def test_example_round_errors_are_clear():
    run = api.load("sample_dumps/article_round")[0]
    assert api.example_round(run, "124_140").result.name == "124_140"
    with pytest.raises(SpecReplayError, match="no round 1_2"):
        api.example_round(run, "1_2")
    with pytest.raises(SpecReplayError, match="expected A_B"):
        api.example_round(run, "x")


def test_load_takes_a_config_dict():
    run = api.load("sample_dumps/article_round", config={"gamma": 2, "topKSpec": [[6], [2, 2]], "topHead": [1, 2]})[0]
    assert run.config.short() == "[6]|[2,2]" and os.fspath(run.replay.directory).endswith("article_round")
