"""docs/api.md "Sampling mode": its example runs as written, says true, and agrees with the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replay.cli import api
from replay.engine.sampling import SAMPLING_KEYS
from replay.util.errors import SpecReplayError
from tests.test_sampling_cli import tiny_dump
from tests.test_user_mistakes import run

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"
TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)


@pytest.mark.slow
def test_the_sampling_example_runs_and_says_true(capsys, monkeypatch):
    section = PAGE.read_text(encoding="utf-8").split("## Sampling mode")[1].split("\n## ")[0]
    (block,) = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(compile(block, str(PAGE), "exec"), ns)  # noqa: S102 - our own documentation
    capsys.readouterr()
    frame, means = ns["frame"], ns["means"]
    assert list(frame.columns) == ["round", *SAMPLING_KEYS]
    assert not frame.duplicated(["round", "temperature"]).any()  # one row per (round, T)
    said = re.search(r"# T = 0: ([\d.]+) .*0\.7: \[([\d.]+), ([\d.]+)\], 1\.0: \[([\d.]+), ([\d.]+)\]", block)
    t0, lo7, hi7, lo1, hi1 = (float(x) for x in said.groups())
    assert means.loc[0.0].round(4).tolist() == [t0, t0]
    assert means.loc[0.7].round(4).tolist() == [lo7, hi7] and means.loc[1.0].round(4).tolist() == [lo1, hi1]
    exact = eval(re.search(r"# (\{.*?\})", block).group(1))  # noqa: S307 - the page's own comment
    assert frame.groupby("temperature")["exact"].sum().to_dict() == exact
    for t in (0.7, 1.0):
        code, out, err = run(capsys, "stats", ROOT / "sample_dumps/qwen2.5-coder/article", "--temperature", t, "--json")
        assert code == 0, err
        (s,) = json.loads(out)["summary"]
        assert s["mean_accepted_length_lo"] == pytest.approx(means.loc[t, "expected_accepted_length_lo"], abs=TOL)
        assert s["mean_accepted_length_hi"] == pytest.approx(means.loc[t, "expected_accepted_length_hi"], abs=TOL)


def test_api_sampling_takes_the_manifest_vocab_size_and_refuses_a_contradiction(tmp_path):
    d = tiny_dump(tmp_path / "d")
    (d / "manifest.json").write_text(json.dumps({"vocab_size": 8}))
    frame = api.sampling(d, 1.5)
    assert frame["expected_accepted_length_lo"].iloc[0] > 0  # lower bounds above T = 1 need V: the manifest's
    assert frame.equals(api.sampling(d, 1.5, vocab_size=8))
    with pytest.raises(SpecReplayError, match="vocab_size 9 disagrees .* vocab_size 8"):
        api.sampling(d, 1.5, vocab_size=9)
    with pytest.raises(SpecReplayError, match="temperature"):
        api.sampling(d, ["x"])


def test_api_sampling_notes_the_refused_lower_bound_above_one(tmp_path):
    # A user saw lo 0.0 at T = 1.3 with attrs {'skipped': []}: the refusal must be said.
    from tests.test_user_mistakes import small_scored_by_hand

    d = small_scored_by_hand(tmp_path / "my")
    frame = api.sampling(d, [0.7, 1.3])
    assert frame.attrs["skipped"] == []
    assert len(frame.attrs["notes"]) == 1 and "T = 1.3 > 1" in frame.attrs["notes"][0]
    assert "vocab_size" in frame.attrs["notes"][0]
    assert api.sampling(d, [1.3], vocab_size=4).attrs["notes"] == []
    skipped = api.sampling(d, [0.7], vocab_size=3).attrs["skipped"]
    assert len(skipped) == 1 and "from vocab_size=" in skipped[0][2] and "validate_10_20.scores" in skipped[0][2]
