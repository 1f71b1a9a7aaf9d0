"""bench/duel.py: a smoke run on tiny random models (no timing assertions), and its arithmetic
on hand-made runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent


def load_duel():
    spec = importlib.util.spec_from_file_location("duel", ROOT / "bench" / "duel.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["duel"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_ceilings_follow_from_the_measured_costs():
    duel = load_duel()
    # 3 tokens per round; a round costs 100 ms draft + 200 ms verify + 20 ms other; decode 120 ms/token.
    row = {
        "committed_per_round": 3.0,
        "draft_ms_per_round": 100.0,
        "verify_ms_per_round": 200.0,
        "other_ms_per_round": 20.0,
    }
    c = duel.ceilings(row, 120.0)
    assert c["round_ms"] == pytest.approx(320.0)
    assert c["modelled_speedup"] == pytest.approx(3 * 120 / 320)
    assert c["free_draft_ceiling"] == pytest.approx(3 * 120 / 220)
    assert c["round_ms_for_1_4x"] == pytest.approx(3 * 120 / 1.4)


def test_identity_is_judged_against_target_only_greedy_of_the_same_prompt():
    duel = load_duel()
    ref = duel.DuelRun(duel.TARGET_HARNESS, 0, 0, (1, 2, 3, 4), 1.0)
    runs = {
        (ref.method, 0, 0): ref,
        ("a", 0, 0): duel.DuelRun("a", 0, 0, (1, 2, 3, 4), 1.0),
        ("hf", 0, 0): duel.DuelRun("hf", 0, 0, (1, 2), 1.0),  # stopped at EOS: a prefix is fine
        ("b", 0, 0): duel.DuelRun("b", 0, 0, (1, 2, 4, 3), 1.0),
        ("c", 0, 0): duel.DuelRun("c", 0, 0, (), 1.0),
    }
    assert duel.identical(runs, "a") and duel.identical(runs, "hf")
    assert not duel.identical(runs, "b") and not duel.identical(runs, "c") and not duel.identical(runs, "missing")


@pytest.mark.slow
def test_tiny_duel_runs_every_method_and_every_output_is_target_greedy(tmp_path, capsys):
    duel = load_duel()
    out = tmp_path / "duel.json"
    assert (
        duel.main(
            [
                "--shapes",
                "tiny",
                "--dtypes",
                "float32",
                "--prompts",
                "2",
                "--max-new-tokens",
                "8",
                "--repeats",
                "2",
                "--sweep-tokens",
                "4",
                "--calibration-tokens",
                "8",
                "--threads",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    rows = {r["method"]: r for r in result["dtypes"]["float32"]["duel"]}
    assert {duel.TARGET_HARNESS, duel.TARGET_HF, duel.hf_name(duel.HF_DEFAULT)} <= rows.keys()
    assert any(m.startswith("harness article") for m in rows)
    assert all(r["identical"] for r in rows.values())  # float32: every method decodes target greedy
    assert rows[duel.TARGET_HARNESS]["speedup_vs_target_only"]["median"] == pytest.approx(1.0)
    sweep = result["dtypes"]["float32"]["sweep"]
    assert all(
        s["mean_accepted_length"] > 0 for s in sweep if s["method"] != duel.TARGET_HARNESS
    )  # the tiny draft agrees with its target
    base = next(s for s in sweep if s["method"] == duel.TARGET_HARNESS)
    for s in sweep:  # one pass: the ratio is the two rates'
        assert s["speedup_vs_target_only"] == pytest.approx(s["tokens_per_s"] / base["tokens_per_s"])
    auto = result["dtypes"]["float32"]["auto"]
    assert auto["method"] in rows and rows[auto["method"]]["identical"]
    assert auto["measured_speedup_wall"] == pytest.approx(rows[auto["method"]]["speedup_vs_target_only"]["median"])
    predicted = {p["config"]: p["predicted_speedup"] for p in auto["predictions"] if p["candidate"]}
    assert auto["predicted_speedup"] == max(v for v in predicted.values() if v is not None)
    assert auto["ceiling"]["all_accepted_bound"] >= auto["ceiling"]["best_predicted"]
    capsys.readouterr()
    assert duel.main(["--render", str(out)]) == 0
    md = capsys.readouterr().out
    assert "### both models in float32" in md and f"auto: {auto['chosen']}" in md
    assert md.count("| harness ") == sum(m.startswith("harness ") for m in rows) and "| swept shape |" in md
    timing = result["dtypes"]["float32"]["timing"]
    assert timing["repeats"] == 2 and len(timing["methods"]) == len(rows)
    for r in rows.values():
        if "ceilings" in r:  # harness rows: the modelled speedup is the measured costs' arithmetic
            c = r["ceilings"]
            assert c["modelled_speedup"] == pytest.approx(
                r["committed_per_round"] * c["decode_ms_per_token"] / c["round_ms"]
            )


@pytest.mark.slow
def test_hf_assisted_settings_reach_the_assistant():
    """Assistant tokens per round are the assistant's generation config in transformers 5.x: with
    2 per round, 12 tokens take at least 4 target forwards; with 20 (the tiny draft agrees with
    its target), fewer."""
    from replay.testing.tiny import damped_pair, tiny_config

    duel = load_duel()
    draft, target = damped_pair(tiny_config("qwen2", vocab_size=512, layers=4, hidden=64), 2, 0.1)
    bench = duel.Bench(draft, target, [[5, 9, 2, 33, 61, 7, 11, 12]], 12)
    bench.hf("two", (2, 0.0))(0, 0)
    bench.hf("twenty", (20, 0.0))(0, 0)
    two, twenty = bench.runs[("two", 0, 0)], bench.runs[("twenty", 0, 0)]
    assert two.output_ids == twenty.output_ids and len(two.output_ids) == 12
    assert two.target_forwards >= 4 and all(r.accepted <= 2 * r.rounds for r in (two,))
    assert twenty.target_forwards < two.target_forwards
