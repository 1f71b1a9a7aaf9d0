"""``batch --temperature T --json`` and ``-o rounds.parquet/.csv``: per round the columns of
``replay --temperature --json`` (the round-by-round reference), from the batch arrays."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from replay.engine.sampling import SAMPLING_KEYS
from tests.test_sampling_cli import sampling_json, tiny_dump
from tests.test_user_mistakes import SYNTH, assert_told, run, write_matrix

T = "0.7"


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def assert_same_records(batch: list[dict], scalar: list[dict]) -> None:
    assert len(batch) == len(scalar) > 0
    for b, s in zip(batch, scalar):
        bs, ss = b.pop("sampling"), s.pop("sampling")
        assert b == s  # the greedy record, field by field
        assert list(bs) == list(ss) == list(SAMPLING_KEYS)
        for k in SAMPLING_KEYS:
            assert bs[k] == pytest.approx(ss[k], abs=1e-12), (b["round"], k)


@pytest.mark.slow
def test_batch_json_at_t_is_the_replay_json(capsys):
    code, scalar, err = sampling_json(capsys, SYNTH, "--temperature", T)
    assert code == 0, err
    code, out, err = run(capsys, "batch", SYNTH, "--temperature", T, "--json", "--no-progress")
    assert code == 0, err
    assert_same_records(lines(out), scalar)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_batch_table_at_t_has_the_replay_numbers(capsys, tmp_path, suffix):
    """One row per round: the greedy columns, then the sampling keys; each length_at_least list as
    one column per depth (length_at_least_lo_1, ...), 0 beyond the round's tree."""
    code, scalar, err = sampling_json(capsys, SYNTH, "--temperature", T)
    path = tmp_path / f"rounds{suffix}"
    code, out, err = run(capsys, "batch", SYNTH, "--temperature", T, "-o", path, "--no-progress")
    assert code == 0 and f"wrote {len(scalar)} rows" in err, err
    frame = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
    assert list(frame["round"].astype(str)) == [r["round"] for r in scalar]
    depth = max(len(r["sampling"]["length_at_least_lo"]) for r in scalar)
    for i, rec in enumerate(scalar):
        s = rec["sampling"]
        row = frame.iloc[i]
        for k in ("expected_accepted_length_lo", "expected_accepted_length_hi", "expected_block_efficiency_hi"):
            assert row[k] == pytest.approx(s[k], abs=1e-12)
        assert bool(row["exact"]) == s["exact"] and row["temperature"] == pytest.approx(0.7)
        assert np.isnan(row["expected_accepted_length"]) == (s["expected_accepted_length"] is None)
        for side in ("lo", "hi"):
            want = s[f"length_at_least_{side}"] + [0.0] * (depth - len(s[f"length_at_least_{side}"]))
            got = [row[f"length_at_least_{side}_{d}"] for d in range(1, depth + 1)]
            assert got == pytest.approx(want, abs=1e-12)


def test_batch_outputs_at_t_are_exact_where_the_rows_decide_it(capsys, tmp_path):
    """tiny_dump at T = 1 by hand: E[L] = 1.1, P(L >= 1) = 0.8, P(L >= 2) = 0.3, exact, variance by hand."""
    d = tiny_dump(tmp_path / "d")
    code, out, err = run(capsys, "batch", d, "--temperature", "1", "--json", "--no-progress")
    assert code == 0, err
    (s,) = [r["sampling"] for r in lines(out)]
    # E[L^2] = sum P(reach n) (2 depth - 1) = 0.5 + 0.3 + 0.3 * 3 = 1.7
    assert s["exact"] and s["expected_accepted_length"] == pytest.approx(1.1, abs=1e-12)
    assert s["length_at_least_lo"] == pytest.approx([0.8, 0.3], abs=1e-12)
    assert s["accepted_length_variance"] == pytest.approx(1.7 - 1.1**2, abs=1e-12)


def test_batch_outputs_at_t_skip_rounds_without_scores(capsys, tmp_path):
    d = tiny_dump(tmp_path / "d")
    write_matrix(d / "draft_step_0_124_140", [[10, 11]])
    write_matrix(d / "draft_step_1_125_141", [[12]])
    write_matrix(d / "validate_125_141", [[10, 11, 13], [12, 14, 15]])
    path = tmp_path / "rounds.csv"
    code, out, err = run(capsys, "batch", d, "--temperature", "1", "--json", "-o", path, "--no-progress")
    assert code == 1
    assert_told(err, "skipped round 125_141", "no scores")
    assert [r["round"] for r in lines(out)] == ["124_140"] and len(pd.read_csv(path)) == 1


def test_batch_at_t_takes_the_manifest_vocab_size_and_refuses_a_different_one(capsys, tmp_path):
    d = tiny_dump(tmp_path / "d")
    (d / "manifest.json").write_text(json.dumps({"vocab_size": 8}))
    code, out, err = run(capsys, "batch", d, "--temperature", "1.5", "--json", "--no-progress")
    assert code == 0 and "refused" not in err, err
    code, stated, _ = run(capsys, "batch", d, "--temperature", "1.5", "--json", "--vocab-size", "8", "--no-progress")
    assert stated == out and lines(out)[0]["sampling"]["expected_accepted_length_lo"] > 0
    code, out, err = run(capsys, "batch", d, "--temperature", "1.5", "--vocab-size", "9", "--no-progress")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert_told(err, "--vocab-size 9", "vocab_size 8", "manifest.json")
    (d / "manifest.json").write_text(json.dumps({"vocab_size": "many"}))
    code, out, err = run(capsys, "batch", d, "--temperature", "1.5", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "vocab_size", "positive integer")


@pytest.mark.parametrize("bad", ["-1", "nan", "+inf", "x"])
def test_batch_at_a_bad_temperature_is_one_line(capsys, tmp_path, bad):
    code, out, err = run(capsys, "batch", SYNTH, f"--temperature={bad}", "--json", "--no-progress")
    assert code == 2 and out == "" and "--temperature" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["compare"], ["recommend", "--budget", "3"]])
def test_compare_and_recommend_at_t_take_the_manifest_vocab_size_too(capsys, tmp_path, command):
    """The same default and the same refusal in every command at T (replay.cli.options.sampling_vocab)."""
    d = tiny_dump(tmp_path / "d")
    (d / "manifest.json").write_text(json.dumps({"vocab_size": 8}))
    code, out, err = run(capsys, command[0], d, *command[1:], "--temperature", "1.5", "--json", "--no-progress")
    assert code == 0 and "refused" not in err, err
    body = json.loads(out)
    assert body["vocab_size"] == 8
    code, stated, _ = run(capsys, command[0], d, *command[1:], "--temperature", "1.5", "--json", "--vocab-size", "8")
    assert json.loads(stated) == body
    code, out, err = run(capsys, command[0], d, *command[1:], "--temperature", "1.5", "--vocab-size", "9")
    assert code == 2 and out == ""
    assert_told(err, "--vocab-size 9", "vocab_size 8")
