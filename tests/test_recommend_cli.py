"""`specreplay recommend` on packed runs: progress on stderr, --no-progress, refusals and --extrapolate."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from analysis.shapes.recommend import compare_predictions, recommend_runs
from replay.cli import main
from replay.cli.cmd_recommend import progress_bars
from replay.core.config import TreeConfig
from replay.core.config_grammar import parse_config_text
from replay.io.packed.pack import pack_batches
from replay.testing.batch_synth import synth_run

CFG = TreeConfig.from_lists([[4], [2, 2], [1, 1]], [1, 2, 2])


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    pack_batches(
        synth_run(CFG, 2000, seed=2, early_stop_rate=0.05),
        out,
        block_rounds=512,
        manifest={"config": CFG.to_json(), "layout": "all"},
    )
    return str(out)


def test_progress_goes_to_stderr_and_no_progress_silences_it(packed, capsys):
    with progress_bars(True) as stage:  # as on a terminal
        recommend_runs([packed], budget=6, bootstrap=10, progress=stage)
    err = capsys.readouterr().err
    assert "recommend: statistics 1/1" in err and "recommend: exact replay" in err
    assert main(["recommend", packed, "--budget", "6", "--bootstrap", "10", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "recommend:" not in captured.err and "top shapes by expected block efficiency" in captured.out


def test_depths_without_data_are_refused_unless_extrapolating(packed, capsys):
    # the run records 3 steps: acceptance is estimated at depths 0..2, trees up to depth 3
    assert main(
        ["recommend", packed, "--budget", "10", "--max-depth", "5", "--bootstrap", "10", "--json", "--no-progress"]
    ) in (0, 1)
    obj = json.loads(capsys.readouterr().out)
    assert obj["max_depth"] == 3 and obj["model"]["supported_depth"] == 3
    assert all(s["depth"] <= 3 and not s["extrapolated"] for s in obj["by_block_efficiency"])
    assert any("refused depths beyond 3" in n for n in obj["notes"])
    assert main(
        [
            "recommend",
            packed,
            "--budget",
            "10",
            "--max-depth",
            "5",
            "--bootstrap",
            "10",
            "--json",
            "--no-progress",
            "--extrapolate",
        ]
    ) in (0, 1)
    obj = json.loads(capsys.readouterr().out)
    assert obj["max_depth"] == 5 and any("extrapolated from the deepest estimated depth" in n for n in obj["notes"])


def test_a_deeper_config_is_refused_or_extrapolated(packed):
    rec = recommend_runs([packed], budget=6, max_depth=5, bootstrap=10, extrapolate=True)
    model = rec.model
    chain = TreeConfig.from_lists([[1]] * 5)
    (refused,) = compare_predictions(model, [chain], lambda c: None, boots=None, depth_cap=model.supported_depth)
    assert refused.predicted_be is None and "needs depth 5" in refused.refused
    (extra,) = compare_predictions(model, [chain], lambda c: None, boots=None, depth_cap=10**9)
    # depths 3 and 4 reuse depth 2's row (the deepest estimated one), its acceptance and its share of
    # rounds that go on drafting (the run stops early: the factors are go_on · p)
    f = model.factors
    chain_p = [f[0, 0, 0], f[1, 0, 0], f[2, 0, 0], f[2, 0, 0], f[2, 0, 0]]
    assert extra.predicted_be == pytest.approx(1 + sum(np.cumprod(chain_p)))
    assert model.extrapolated.tolist() == [False, False, False, True, True]
    assert model.go_on[0] == 1 and 0.9 < model.go_on[1] < 1 and model.go_on[3] == model.go_on[4] == model.go_on[2]


def test_refused_comparison_rows_are_not_judged(packed):
    # min_count above the depth-2 visits: depth 2 has no estimate, so the recorded 3-step config
    # cannot be predicted; it is still replayed, and listed as refused
    rec = recommend_runs([packed], budget=6, bootstrap=10, min_count=10**6)
    assert rec.model.supported_depth == 1 and rec.search.max_depth == 1
    (row,) = [c for c in rec.comparisons if c.label == "recorded"]
    assert row.predicted_be is None and row.refused and "depth 3" in row.refused
    assert row.measured is not None and row.agree is None
    assert row.to_json()["predicted_ci95"] is None


def test_the_recorded_trees_row_obeys_the_same_depth_refusal_as_the_recorded_config(packed, capsys):
    # depth 2 has no estimate: the recorded config (3 steps) and the recorded trees (3 deep) are both
    # refused in the same words; --extrapolate predicts both
    args = ["recommend", packed, "--budget", "6", "--bootstrap", "10", "--min-count", str(10**6), "--no-progress"]
    assert main([*args, "--json"]) in (0, 1)
    rows = {c["label"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    assert rows["recorded trees"]["predicted_block_efficiency"] is None
    assert rows["recorded trees"]["refused"] == rows["recorded"]["refused"]
    assert rows["recorded trees"]["refused"].startswith("needs depth 3; the dumps estimate acceptance to depth 1")
    assert rows["recorded trees"]["measured_block_efficiency"] == pytest.approx(
        rows["recorded"]["measured_block_efficiency"]
    )
    assert main([*args, "--json", "--extrapolate"]) in (0, 1)
    rows = {c["label"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    assert rows["recorded trees"]["refused"] is None and rows["recorded trees"]["predicted_block_efficiency"] > 1
    assert main(args) in (0, 1)
    assert "recorded trees: no prediction: needs depth 3" in capsys.readouterr().out


@pytest.mark.parametrize("agree", [False, True])
def test_a_disagreeing_prediction_is_a_warning_not_exit_1(packed, capsys, monkeypatch, agree):
    """Exit 1 means skipped input in every command; a prediction the replay disproves is a result
    (agree = NO in the table) and a warning line, with exit 0 when no input was skipped."""
    from analysis.shapes.recommend import ShapeCheck

    monkeypatch.setattr(ShapeCheck, "agree", property(lambda self: agree))
    code = main(["recommend", packed, "--budget", "6", "--bootstrap", "10", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0
    assert ("disagree with their prediction" in err) is (not agree)


def test_text_output_writes_each_shape_in_the_canonical_form_and_json_keeps_objects(packed, capsys):
    """docs/vocabulary.md: every output writes a config as ``[2]`` / ``[6]|[2,2]|[1,1]``; --json holds
    the config's object."""
    assert main(["recommend", packed, "--budget", "6", "--bootstrap", "10", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert '"topKSpec"' not in out
    shapes = re.findall(r"^\d+\. (\S+)$", out, flags=re.MULTILINE)
    assert shapes and all(parse_config_text(s).short() == s for s in shapes)
    assert main(["recommend", packed, "--budget", "6", "--bootstrap", "10", "--no-progress", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert isinstance(body["by_block_efficiency"][0]["config"], dict)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--budget", "0"], "--budget must be at least 1, got 0"),
        (["--budget", "4", "--max-depth", "0"], "--max-depth must be at least 1, got 0"),
    ],
)
def test_bad_budget_and_depth_read_the_same_greedy_and_at_t(capsys, argv, words):
    """One check each (analysis.shapes.recommend.check_budget / check_max_depth), whichever search runs."""
    for at_t in ([], ["--temperature", "0.7"]):
        code = main(["recommend", "sample_dumps/synthetic_article", *argv, *at_t, "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and err.strip() == f"specreplay: error: {words}", (at_t, err)
