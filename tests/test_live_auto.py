"""``generate --config auto`` on tiny models built in the test: the calibration run, the choice by
predicted speedup under an injected cost curve, the files left for checking by hand, and the CLI
end to end (its own cost curve, measured on the tiny pair)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.cost.model import CostModel
from analysis.shapes.auto_choice import choose
from analysis.shapes.speedpredict import all_accepted_speedup, nondecreasing
from replay.cli import main
from replay.cli.live_auto import AUTO_FILE, calibrate
from replay.core.vocab import STOP_LEAF
from replay.live.calibration import CALIBRATION_DIR, CURVE_FILE, curve_sizes
from replay.live.generate import DecodeOptions
from replay.live.sweep.directory import dumps_dir
from replay.testing.replayer import replay_directory
from tests.live_fixtures import cli_args, live_qwen_pair, save_tiny_pair  # noqa: F401

PROMPTS = [[1, 2, 3, 4, 5, 6], [50, 7, 9], [11, 12, 13, 14]]


def flat_cost(draft_step_s: float, per_token_s: float) -> CostModel:
    """t_verify(k) = 1 + per_token_s * (k - 1) seconds; a draft step ``draft_step_s``."""
    return CostModel(np.array([1.0, 2.0]), np.array([1.0, 1.0 + per_token_s]), draft_step_s, "injected")


@pytest.fixture(scope="module")
def calibrated(live_qwen_pair, tmp_path_factory):
    draft, target = live_qwen_pair
    out = tmp_path_factory.mktemp("auto")
    choice = calibrate(draft, target, PROMPTS, DecodeOptions(20), out, tokens=16, cost=flat_cost(0.05, 0.02))
    return draft, target, out, choice


@pytest.mark.slow
def test_calibration_acceptance_is_the_live_runs_own(calibrated):
    """The calibration tree replayed on its own rounds gives back the accepted length the live run
    recorded (manifest totals), and the calibration prompts are the run's first ones."""
    _, _, out, choice = calibrated
    manifest = json.loads((out / CALIBRATION_DIR / "manifest.json").read_text())
    assert [s["prompt_ids"] for s in manifest["sequences"]] == PROMPTS[:2]
    again = choose(out / CALIBRATION_DIR, choice.cost, [choice.calibration])
    own = next(p for p in again.predictions if p.config == choice.calibration)
    assert own.undecidable == 0
    assert own.accepted == pytest.approx(manifest["totals"]["mean_accepted_length"])


def test_the_choice_is_the_best_predicted_candidate(calibrated):
    _, _, _, choice = calibrated
    candidates = [p for p in choice.predictions if p.config.short() in choice.candidates]
    assert choice.prediction.speedup == max(p.speedup for p in candidates if p.speedup is not None)
    # every chain up to the calibration depth is weighed
    assert {f"[1]{'|[1]' * (d - 1)}" for d in range(1, choice.calibration.gamma + 1)} <= set(choice.candidates)
    # by hand: (A + 1) * t_verify(1) / (gamma * draft + t_verify(nodes + 1)) with the injected curve
    p, c = choice.prediction, choice.prediction.config
    assert p.speedup == pytest.approx((p.accepted + 1) * 1.0 / (c.gamma * 0.05 + 1.0 + 0.02 * c.num_nodes))
    assert choice.ceiling.best is not None and choice.ceiling.best.speedup == pytest.approx(p.speedup)
    assert choice.ceiling.bound >= p.speedup


@pytest.mark.slow
def test_the_cost_curve_steers_the_choice(calibrated):
    """Same calibration rounds, different machines: a dear draft step makes auto draft fewer steps
    than a free one; verify cost growing steeply with tokens makes it verify fewer nodes."""
    _, _, out, _ = calibrated
    free = choose(out / CALIBRATION_DIR, flat_cost(0.0, 0.0)).config
    dear_draft = choose(out / CALIBRATION_DIR, flat_cost(5.0, 0.0)).config
    dear_verify = choose(out / CALIBRATION_DIR, flat_cost(0.0, 2.0)).config
    assert dear_draft.gamma == 1 and dear_draft.gamma <= free.gamma
    assert dear_verify.num_nodes <= free.num_nodes and dear_verify.num_nodes == dear_verify.gamma  # a chain


def test_files_left_for_checking(calibrated):
    _, _, out, choice = calibrated
    assert json.loads((out / CURVE_FILE).read_text()) == choice.cost.to_json()
    assert choice.ceiling.bound == pytest.approx(all_accepted_speedup(choice.cost, choice.ceiling.bound_depth))
    assert curve_sizes(15) == [1, 2, 3, 4, 5, 6, 8, 12, 16] and curve_sizes(2) == [1, 2, 3]


@pytest.mark.slow
def test_generate_config_auto_end_to_end(live_qwen_pair, tmp_path, capsys):
    d = save_tiny_pair(live_qwen_pair, tmp_path / "models")
    run = tmp_path / "run"
    rc = main(
        cli_args("generate", d, config="auto", prompts=d / "prompts.jsonl", max_new_tokens=12, repeats=1, out=run)
    )
    out = capsys.readouterr().out
    assert rc == 0
    auto = json.loads((run / AUTO_FILE).read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    assert f"auto: chose {auto['chosen']}" in out and "outputs identical:      yes" in out
    assert auto["measured_speedup_wall"] == pytest.approx(manifest["totals"]["speedup"])  # auto runs with the baseline
    assert manifest["config"]["topKSpec"] == [list(r) for r in _spec(auto["chosen"])]
    assert (run / CALIBRATION_DIR / "manifest.json").is_file() and (run / CURVE_FILE).is_file()
    assert (
        f"predicted {auto['predicted_speedup']:.3f}x, measured {auto['measured_speedup_wall']:.3f}x end to end" in out
    )
    # the run stays readable by the offline commands, its calibration beside it
    assert main(["replay", str(run)]) == 0


def _spec(short: str) -> list[list[int]]:
    from replay.core.config_grammar import parse_spec

    return [list(r) for r in parse_spec(short, "test").tree.top_k_spec]


@pytest.mark.slow
def test_sweep_prints_predicted_beside_measured(live_qwen_pair, tmp_path, capsys):
    """The sweep's widest tree (4,1x1 contains 1,1 and 2) calibrates the others; on its own rounds
    the prediction uses exactly the accepted length its row measured."""
    d = save_tiny_pair(live_qwen_pair, tmp_path / "models")
    sweep = tmp_path / "sw"
    args = cli_args("sweep", d, prompts=d / "prompts.jsonl", grid="1,1;2;4,1x1", max_new_tokens=8, repeats=1, out=sweep)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "predicted vs measured speedup (acceptance: exact replay on the rounds of [4]|[1,1];" in out
    import pandas as pd

    table = pd.read_csv(sweep / "results.csv")
    curve = nondecreasing(
        CostModel.load(sweep / CURVE_FILE)
    )  # what predictions read (a tiny model's timings are noisy)
    row = table[table["name"] == "4_1x1"].iloc[0]
    # the live round: catch-up over 1 token, or 2 after a round whose path ended at a leaf (the
    # replayer's own stop on the recorded rounds), then one draft forward over step 1's 2 heads,
    # then the target over 7 tokens
    rounds = replay_directory(dumps_dir(sweep) / "4_1x1").results
    f = sum(r.acceptance.stop == STOP_LEAF for r in rounds) / len(rounds)
    assert curve.draft_s is not None
    draft_s = (1 - f) * curve.t_draft(1) + f * curve.t_draft(2) + curve.t_draft(2)
    predicted = (row["mean_accepted_length"] + 1) * curve.t_verify(1) / (draft_s + curve.t_verify(7))
    lines = out.split("predicted vs measured speedup", 1)[1].splitlines()  # the table above names the configs alike
    line = next(ln for ln in lines if ln.startswith("[4]|[1,1] "))
    assert f"{predicted:8.3f}x" in line and f"{row['speedup']:8.3f}x" in line
    for shape in ("[1]|[1] ", "[2] "):
        assert any(ln.startswith(shape) and ln.count("x") >= 2 for ln in lines)


def test_auto_refuses_sampling_before_loading_models(tmp_path, capsys):
    rc = main(
        cli_args(
            "generate",
            draft=tmp_path / "no-draft",
            target=tmp_path / "no-target",
            config="auto",
            prompts=__file__,
            max_new_tokens=4,
            temperature=0.7,
            out=tmp_path / "run",
        )
    )
    err = capsys.readouterr().err
    assert rc == 2 and "--config auto" in err and "--temperature 0.7" in err and len(err.strip().splitlines()) == 1
