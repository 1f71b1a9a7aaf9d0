"""compare --temperature T at a temperature the dump records node_logprobs for: every
config's sub-tree walks the recorded edges, so the comparison is exact there, as replay --temperature
is for the recorded tree.

On a tiny live dump (tests/test_live_sampling_dump.py's fixture): the recorded config's mean equals
replay --temperature's, a narrower config's equals the walk written by hand from the recorded
node log-probabilities of its nodes, and a packed copy (which carries node_logprobs) gives the
same exact numbers.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest

from analysis.compare.sampling_batch import compare_sampling_run
from analysis.tables.runs import load_run
from replay.cli import main
from replay.core.config_grammar import parse_config_text
from replay.testing.compare_at_t import compare_sampling
from tests.reference_runs import load_reference
from tests.test_live_sampling_dump import RUN_T, recorded_rounds, run_07, tiny_dir  # noqa: F401  fixtures

RECORDED = "[4]|[2,2]|[1,1]"  # tests/test_live_sampling_dump.py's TREE
NARROW = "[2]|[1,1]"  # the root's first two children, each with its first child
TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)


def compare_json(capsys, run, *argv: str) -> tuple[int, list[dict], str]:
    code = main(["compare", str(run), "--temperature", str(RUN_T), "--json", "--no-progress", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out)["configs"] if out.strip() else []), err


def children(tree, u: int) -> list[int]:
    return [v for v in range(1, tree.tokens.shape[0]) if int(tree.parents[v]) == u]  # tree order = draft rank


def narrow_by_hand(tree, own: np.ndarray) -> float:
    """E[L] of NARROW on a recorded round: P(reach n) = product of exp(node_logprobs) root -> n."""
    total = 0.0
    for c in children(tree, 0)[:2]:
        p = math.exp(own[c])
        total += p
        total += sum(p * math.exp(own[g]) for g in children(tree, c)[:1])
    return total


def test_compare_at_the_run_temperature_is_exact_from_the_node_logprobs(run_07, capsys):
    _, rounds = recorded_rounds(run_07)
    code, rows, err = compare_json(capsys, run_07, "--configs", NARROW)
    assert code == 0, err
    assert [r["config"] for r in rows] == [RECORDED, NARROW]
    for r in rows:
        assert r["rounds"] == r["determined"] == r["exact"] == len(rounds) > 1
        assert r["expected_accepted_length_lo"] == r["expected_accepted_length_hi"]
    # the recorded config: replay --temperature's mean (exact from node_logprobs there too)
    assert main(["replay", str(run_07), "--temperature", str(RUN_T), "--json", "--no-progress"]) == 0
    replayed = [json.loads(line)["sampling"] for line in capsys.readouterr()[0].splitlines() if line.strip()]
    assert all(s["from_node_logprobs"] for s in replayed)
    want = np.mean([s["expected_accepted_length"] for s in replayed])
    assert rows[0]["expected_accepted_length_lo"] == pytest.approx(want, abs=TOL)
    # the narrower config: the walk by hand on its nodes, from the run-T column (0)
    by_hand = np.mean([narrow_by_hand(tree, v.node_logp[:, 0]) for tree, v, _ in rounds])
    assert rows[1]["expected_accepted_length_lo"] == pytest.approx(by_hand, abs=TOL)
    assert rows[1]["expected_block_efficiency_lo"] == pytest.approx(by_hand + 1.0, abs=TOL)


def test_a_packed_copy_is_exact_from_its_node_logprobs_too(run_07, tmp_path, capsys):
    """Packed runs carry node_logprobs (v_node_logp): compare on a packed copy is the dump's, exact."""
    code, exact, _ = compare_json(capsys, run_07, "--configs", NARROW)
    assert code == 0
    assert main(["pack", str(run_07), "-o", str(tmp_path / "p"), "--no-progress"]) == 0
    capsys.readouterr()
    code, rows, err = compare_json(capsys, tmp_path / "p", "--configs", NARROW)
    assert code == 0, err
    assert "node_logprobs" not in err

    def numbers(rs: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "run"} for r in rs]  # the run's label is its directory's name

    assert numbers(rows) == numbers(exact) and rows[0]["exact"] == rows[0]["rounds"] > 1


def test_batch_and_round_paths_agree_on_a_grid_of_recorded_and_other_temperatures(run_07):
    """compare_sampling_run on the batch-loaded run (every T on the batch arrays, the recorded ones from
    node_logprobs) equals the round path on every T at once, bit for bit."""
    run = load_run(str(run_07), "run", progress=False)
    ref = load_reference(str(run_07), "run", progress=False)
    configs = [run.config, parse_config_text(NARROW)]
    temps = [0.3, RUN_T, 1.0, 1.3]
    got = compare_sampling_run(run, configs, temps, 16)
    want = compare_sampling(list(ref.results), ref.config, configs, temps, 16, None, None, (RUN_T, 1.0))
    pd.testing.assert_frame_equal(got.table, want.table, check_exact=True)
    pd.testing.assert_frame_equal(got.per_round, want.per_round, check_exact=True)
    assert got.skipped == want.skipped
    exact = got.table.set_index(["config", "temperature"])["exact"]
    assert exact[(NARROW, RUN_T)] == exact[(NARROW, 1.0)] == got.table["rounds"].max()


def test_report_takes_the_manifest_vocab_size_for_its_curve(run_07, tmp_path, capsys):
    """The curve's lower bounds above T = 1 need V: a live dump records it (manifest vocab_size), so
    report draws them without --vocab-size, as replay/stats/compare do; a --vocab-size that
    disagrees with the manifest is one line and exit 2."""
    out = tmp_path / "rep"
    code = main(["report", str(run_07), "-o", str(out), "--no-progress"])
    _, err = capsys.readouterr()
    assert code == 0, err
    curve = pd.read_csv(out / "tables" / "sampling_curve.csv")
    above = curve[curve["temperature"] > 1.0]
    assert len(above) and above["expected_block_efficiency_lo"].notna().all()
    recorded = json.loads((run_07 / "manifest.json").read_text())["vocab_size"]
    code = main(
        ["report", str(run_07), "-o", str(tmp_path / "rep2"), "--vocab-size", str(recorded + 1), "--no-progress"]
    )
    _, err = capsys.readouterr()
    assert code == 2 and "disagrees with" in err and "vocab_size" in err and "Traceback" not in err
