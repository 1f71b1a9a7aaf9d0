"""The cost model takes manifest round timings only from rounds the replay accepted, and drops a
round whose record disagrees with its replay (docs/analysis.md, "Where the costs come from").

Hand dump: 4 synthetic rounds of [2]|[1,1] (every round 4 draft nodes, 2 steps: 5 tokens verified),
timed by a manifest that also records a round with no files and falsifies one round's node count:

    round      nodes  draft_s  verify_s
    100_116      4     0.2      1.0
    (2nd)        3     0.2      3.0      recorded 3 nodes, replays 4: left out
    (3rd)        4     0.4      1.2
    (4th)        4     0.2      1.4
    9999_10015   4     0.1      0.1      no files: left out

Baseline timed with the rounds: (10 − 2) / 10 forwards = 0.8 s per target-only decode. By hand from
the three kept rounds: t_verify(5) = (1.0 + 1.2 + 1.4) / 3 = 1.2 s, draft step = 0.8 / 6 s, and
the recorded config's modelled speedup = mean_acceptance_length · 0.8 / (2 · 0.8 / 6 + 1.2).
"""

from __future__ import annotations

import json

import pytest

from replay.cli import main
from replay.core.config import TreeConfig
from replay.testing.synth import write_synthetic_run
from tests.test_analysis_costsource import TOTALS as COSTSOURCE_TOTALS

CFG = TreeConfig.from_lists([[2], [1, 1]], [1, 2])
TIMES = [(4, 0.2, 1.0), (3, 0.2, 3.0), (4, 0.4, 1.2), (4, 0.2, 1.4)]
TOTALS = {**COSTSOURCE_TOTALS, "rounds": 4}


def timed_dump(path):
    rounds = write_synthetic_run(path, CFG, 4, seed=3)
    body = json.loads((path / "manifest.json").read_text())
    records = [
        {"key": list(r.key), "num_nodes": n, "draft_steps": 2, "draft_time_s": d, "verify_time_s": v}
        for r, (n, d, v) in zip(rounds, TIMES)
    ]
    records.append({"key": [9999, 10015], "num_nodes": 4, "draft_steps": 2, "draft_time_s": 0.1, "verify_time_s": 0.1})
    body.update(rounds=records, totals=TOTALS)
    (path / "manifest.json").write_text(json.dumps(body))
    return path


def test_timings_come_only_from_replayed_rounds_that_agree_with_their_record(capsys, tmp_path):
    dump = timed_dump(tmp_path / "run")
    code = main(["compare", str(dump), "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and "skipped round 9999_10015" in captured.err, captured.err  # a listed round is missing
    out = json.loads(captured.out)
    cost = out["cost_models"]["run"]
    assert cost["tokens"] == [1.0, 5.0]
    assert cost["verify_s"] == pytest.approx([0.8, 1.2])
    assert cost["draft_step_s"] == pytest.approx(0.8 / 6)
    assert "timings of 3 of 5 recorded rounds" in cost["source"]
    assert "1 not replayed (9999_10015)" in cost["source"]
    assert "1 whose replay disagrees with the record" in cost["source"]
    row = out["configs"][0]
    assert row["config"] == CFG.short()
    expected = row["mean_acceptance_length_lo"] * 0.8 / (2 * 0.8 / 6 + 1.2)
    assert row["modelled_speedup_lo"] == pytest.approx(expected)


def test_the_cost_note_and_the_warning_name_the_same_disagreeing_rounds(capsys, tmp_path):
    """One rule (replay.io.manifest: checks_recorded_rounds, named_rounds) says which records must agree
    with their replay and how many disagreeing rounds are named: the cost model's note and the
    recorded-rounds WARNING name the same first three and count the rest."""
    path = tmp_path / "run"
    rounds = write_synthetic_run(path, CFG, 5, seed=3)
    body = json.loads((path / "manifest.json").read_text())
    body.update(
        rounds=[
            {
                "key": list(r.key),
                "num_nodes": 4 if k == 0 else 3,
                "draft_steps": 2,
                "draft_time_s": 0.2,
                "verify_time_s": 1.0,
            }
            for k, r in enumerate(rounds)
        ],
        totals={**COSTSOURCE_TOTALS, "rounds": 5},
    )
    (path / "manifest.json").write_text(json.dumps(body))
    code = main(["compare", str(path), "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    names = [f"{r.key[0]}_{r.key[1]}" for r in rounds[1:4]]
    source = json.loads(captured.out)["cost_models"]["run"]["source"]
    assert f"4 whose replay disagrees with the record ({', '.join(names)}, 1 more)" in source, source
    warned = "; ".join(f"round {n}: draft nodes 4 replayed, 3 recorded (num_nodes)" for n in names)
    assert "4 of 5 round(s) replay differently" in captured.err and f"{warned}; 1 more)" in captured.err, captured.err
    other = main(["compare", str(path), "--config", "[2]|[1,1]|[1]", "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert other in (0, 1) and "replay differently" not in captured.err  # another tree: records not checked
    assert "disagrees" not in json.loads(captured.out)["cost_models"]["run"]["source"]
