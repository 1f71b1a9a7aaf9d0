"""``compare --temperature T``: other configs at T, checked against the scalar reference
walk (replay/testing/sampling_ref.py) on narrower trees built by hand, and against the greedy
counterfactual at T = 0."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from replay.core.vocab import PAD_TOKEN
from replay.testing.sampling_ref import reference_bounds
from tests.test_user_mistakes import ARTICLE, SYNTH, assert_told, run, write_config, write_matrix

ROOT_ROW = ([10, 11, 13], (0.5, 0.2, 0.1))  # the root's validate row: token 16 (rank 2) is not in it
NODE1_ROW = ([14, 12, 15], (0.4, 0.3, 0.1))  # node 1 (token 10): its child 12 is the target's second
TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)


def fan_dump(directory: Path, rounds: dict | None = None) -> Path:
    """Recorded [3]|[1]: the root's children 10, 11, 16, node 1 (token 10, rank 0: the rank-major
    fallback, no draft scores) expanded with child 12. Parents layout, probabilities as scores.
    ``rounds``: validate name -> (root probs, node 1 probs), default one round 124_140."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[3], [1]], [1, 1])
    for name, (p0, p1) in (rounds or {"124_140": (ROOT_ROW[1], NODE1_ROW[1])}).items():
        a, b = map(int, name.split("_"))
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[10, 11, 16]])
        write_matrix(directory / f"draft_step_1_{name}", [[12]])
        write_matrix(directory / f"validate_{name}", [ROOT_ROW[0], NODE1_ROW[0]])
        (directory / f"validate_{name}.scores").write_text(f"{' '.join(map(str, p0))}\n{' '.join(map(str, p1))}\n")
    return directory


# The narrower trees by hand, in tree order: (tokens, parents, the node whose row each node has).
ROOT, NODE1 = 0, 1
BY_HAND = {
    "[3]|[1]": ([0, 10, 11, 16, 12], [-1, 0, 0, 0, 1], [ROOT, NODE1, None, None, None]),  # the recording
    "[2]|[1]": ([0, 10, 11, 12], [-1, 0, 0, 1], [ROOT, NODE1, None, None]),
    "[1]|[1]": ([0, 10, 12], [-1, 0, 1], [ROOT, NODE1, None]),
    "[3]": ([0, 10, 11, 16], [-1, 0, 0, 0], [ROOT, None, None, None]),
}


def reference(config: str, t: float, vocab: int | None = None) -> tuple[float, float]:
    """E[L] bounds of the hand-built tree by the plain scalar walk."""
    tokens, parents, rows = BY_HAND[config]
    depths = [0]
    for p in parents[1:]:
        depths.append(depths[p] + 1)
    table = {ROOT: ROOT_ROW, NODE1: NODE1_ROW}
    ids = [table[r][0] if r is not None else [PAD_TOKEN] * 3 for r in rows]
    logp = [[math.log(q) for q in table[r][1]] if r is not None else [-math.inf] * 3 for r in rows]
    lo, hi, _, _ = reference_bounds(tokens, parents, depths, ids, logp, [r is not None for r in rows], t, vocab)
    return lo, hi


def compare_json(capsys, dump, *argv):
    code, out, err = run(capsys, "compare", dump, "--no-progress", "--json", *argv)
    return code, (json.loads(out) if out else None), err


@pytest.mark.parametrize(("t", "vocab"), [(0.5, None), (1.0, None), (0.7, 20), (1.3, 20), (1.3, None)])
def test_narrower_configs_equal_the_reference_walk_on_the_tree_by_hand(capsys, tmp_path, t, vocab):
    dump = fan_dump(tmp_path / "d")
    extra = ["--vocab-size", str(vocab)] if vocab else []
    code, body, err = compare_json(capsys, dump, "--temperature", str(t), "--configs", *BY_HAND, *extra)
    assert code == 0, err
    rows = {r["config"]: r for r in body["configs"]}
    assert set(rows) == set(BY_HAND)
    for config in BY_HAND:
        lo, hi = reference(config, t, vocab)
        row = rows[config]
        assert (row["rounds"], row["determined"], row["undetermined"]) == (1, 1, 0)
        assert row["expected_accepted_length_lo"] == pytest.approx(lo, abs=TOL)
        assert row["expected_accepted_length_hi"] == pytest.approx(hi, abs=TOL)
        assert row["expected_block_efficiency_lo"] == pytest.approx(lo + 1, abs=TOL)
        assert row["all_rounds_block_efficiency_hi"] == pytest.approx(hi + 1, abs=TOL)
    # at T = 1 the recorded probabilities are exact; token 16, missing from the root's row, is bounded
    if t == 1.0:
        assert rows["[2]|[1]"]["expected_accepted_length_lo"] == pytest.approx(0.5 + 0.2 + 0.5 * 0.3, abs=TOL)
        assert rows["[2]|[1]"]["exact"] == 1 and rows["[3]"]["exact"] == 0
    assert ("--vocab-size" in err) == (t > 1 and vocab is None)


@pytest.mark.slow
def test_the_recorded_config_is_the_replay_at_t(capsys):
    code, body, err = compare_json(capsys, SYNTH, "--temperature", "0.7", "--configs", "[6]|[2,2]|[1,1]")
    assert code == 0, err
    code, out, err = run(capsys, "replay", SYNTH, "--json", "--no-progress", "--temperature", "0.7")
    rows = [json.loads(line)["sampling"] for line in out.splitlines()]
    row = body["configs"][0]
    assert row["rounds"] == row["determined"] == 300
    for side in ("lo", "hi"):
        mean = sum(r[f"expected_accepted_length_{side}"] for r in rows) / len(rows)
        assert row[f"expected_accepted_length_{side}"] == pytest.approx(mean, abs=TOL)


MAYBE_CONFIGS = ["[6]|[1,1]|[1,1]", "[6]|[1,1,1]|[1]", "[2]|[2]|[1,1]", "[3]|[1,1]|[1]", "[6]|[2]|[1]"]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_zero_is_the_greedy_counterfactual_round_by_round(capsys, tmp_path):
    greedy, smp = tmp_path / "greedy.csv", tmp_path / "t0.csv"
    code, _, err = run(capsys, "compare", SYNTH, "--no-progress", "--configs", *MAYBE_CONFIGS, "--per-round", greedy)
    assert code == 0, err
    code, body, err = compare_json(capsys, SYNTH, "--temperature", "0", "--configs", *MAYBE_CONFIGS, "--per-round", smp)
    assert code == 0, err
    g, s = read_csv(greedy), read_csv(smp)
    assert [(r["config"], r["round"]) for r in g] == [(r["config"], r["round"]) for r in s]
    for a, b in zip(g, s):
        assert a["decided"] == b["determined"]
        if a["decided"] == "True":
            assert float(b["expected_accepted_length_lo"]) == float(b["expected_accepted_length_hi"]) == int(a["lower"])
    undecided = {r["config"]: r["undetermined"] for r in body["configs"]}
    assert undecided["[6]|[1,1]|[1,1]"] == 21 and undecided["[6]|[1,1,1]|[1]"] == 86  # docs/analysis.md's table


def test_a_tree_below_the_recording_is_undetermined_at_t_but_not_where_greedy_stops(capsys, tmp_path):
    # [2]|[1]|[1] expands node 12 at step 2, which the recording never ran: the walk reaches 12 with
    # probability 0.5 * 0.3 at T = 1, so the round is undetermined; greedy stops at node 1 (its top-1
    # is 14, no child): determined, L = 1.
    dump = fan_dump(tmp_path / "d")
    out_csv = tmp_path / "r.csv"
    code, body, err = compare_json(
        capsys, dump, "--temperature", "1", "--configs", "[2]|[1]|[1]", "--per-round", out_csv
    )
    assert code == 0, err
    recorded, row = body["configs"]  # the recorded config always comes first
    assert recorded["config"] == "[3]|[1]" and recorded["determined"] == 1
    assert (row["determined"], row["undetermined"]) == (0, 1) and row["expected_accepted_length_lo"] is None
    assert row["all_rounds_block_efficiency_lo"] == 1.0 and row["all_rounds_block_efficiency_hi"] == 4.0
    per = read_csv(out_csv)[1]
    assert per["config"] == "[2]|[1]|[1]" and per["determined"] == "False"
    assert "depth 2" in per["reason"] and "recording did not expand it" in per["reason"]
    code, body, err = compare_json(capsys, dump, "--temperature", "0", "--configs", "[2]|[1]|[1]")
    assert code == 0, err
    assert body["configs"][1]["determined"] == 1 and body["configs"][1]["expected_accepted_length_lo"] == 1.0


@pytest.mark.slow
def test_text_output_names_the_undetermined_and_why(capsys):
    code, out, err = run(
        capsys, "compare", SYNTH, "--no-progress", "--temperature", "0.7", "--configs", "[6]|[1,1]|[1,1]"
    )
    assert code == 0, err
    assert "300 rounds with scores at T = 0.7" in out
    assert "expected_block_efficiency" in out and "all_rounds_block_efficiency" in out
    assert "[6]|[1,1]|[1,1]: 146 undetermined, most often" in out


@pytest.mark.slow
def test_top_ranks_by_the_all_rounds_lower_bound(capsys):
    code, body, err = compare_json(capsys, SYNTH, "--temperature", "0.7", "--configs", *MAYBE_CONFIGS, "--top", "2")
    assert code == 0, err
    rows = body["configs"]
    assert len(rows) == 3 and rows[0]["config"] == "[6]|[2,2]|[1,1]"  # the recorded config first
    los = [r["all_rounds_block_efficiency_lo"] for r in rows[1:]]
    assert los == sorted(los, reverse=True)


def test_without_scores_every_round_is_skipped_exit_2(capsys):
    code, out, err = run(capsys, "compare", ARTICLE, "--no-progress", "--temperature", "0.7")
    assert code == 2 and out == ""
    assert_told(err, "round 124_140", "no scores", "no round could be replayed")


def test_a_bad_row_skips_that_round_exit_1(capsys, tmp_path):
    dump = fan_dump(
        tmp_path / "d", {"124_140": (ROOT_ROW[1], NODE1_ROW[1]), "130_146": ((0.5, 0.4, 0.3), NODE1_ROW[1])}
    )
    code, body, err = compare_json(capsys, dump, "--temperature", "0.7", "--configs", "[2]|[1]")
    assert code == 1
    assert [r["rounds"] for r in body["configs"]] == [1, 1]
    assert_told(err, "skipped round 130_146", "sum to more than 1")


@pytest.mark.parametrize("flag", [["--cost", '{"tokens": [1, 16], "verify_s": [1, 2]}'], ["--gamma-strategies"]])
def test_greedy_only_options_are_refused_with_temperature(capsys, flag):
    code, out, err = run(capsys, "compare", SYNTH, "--temperature", "0.7", *flag)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert_told(err, flag[0], "--temperature")


def test_bad_temperature_is_one_line_exit_2(capsys):
    code, out, err = run(capsys, "compare", SYNTH, "--temperature", "-1")
    assert code == 2 and out == ""
    assert_told(err, "--temperature", ">= 0")


# --- recommend --temperature: the same function, every contained shape within the budget ---


def test_recommend_ranks_every_contained_shape_by_the_lower_bound(capsys, tmp_path):
    dump = fan_dump(tmp_path / "d")
    code, out, err = run(capsys, "recommend", dump, "--budget", "3", "--temperature", "0.5", "--json", "--no-progress")
    assert code == 0, err
    (d,) = json.loads(out)["dumps"]
    shapes = {s["config"]: s for s in d["shapes"]}
    # contained in [3]|[1] with at most 3 nodes: [1], [2], [3], [1]|[1], [2]|[1]; --top 5 shows them all
    assert set(shapes) == {"[1]", "[2]", "[3]", "[1]|[1]", "[2]|[1]"} and d["candidates"] == 5
    for config in ("[3]", "[1]|[1]", "[2]|[1]"):
        lo, hi = reference(config, 0.5)
        assert shapes[config]["all_rounds_block_efficiency_lo"] == pytest.approx(lo + 1, abs=TOL)
        assert shapes[config]["expected_accepted_length_hi"] == pytest.approx(hi, abs=TOL)
    los = [s["all_rounds_block_efficiency_lo"] for s in d["shapes"]]
    assert los == sorted(los, reverse=True) and [s["rank"] for s in d["shapes"]] == [1, 2, 3, 4, 5]
    assert d["recorded"]["config"] == "[3]|[1]" and d["recorded"]["rank"] is None  # 4 nodes: outside the budget
    code, out, err = run(capsys, "recommend", dump, "--budget", "3", "--temperature", "0.5", "--no-progress")
    assert code == 0 and "ranked by the LOWER bound" in out and "1 [2]|[1]" in " ".join(out.split())


def test_recommend_refuses_the_greedy_models_options_at_t(capsys, tmp_path):
    dump = fan_dump(tmp_path / "d")
    code, out, err = run(capsys, "recommend", dump, "--budget", "3", "--temperature", "0.5", "--verify-cost", "1,0.1")
    assert code == 2 and out == ""
    assert_told(err, "--verify-cost", "--temperature")


# --- report: the temperature curve, from the same function ---


@pytest.mark.slow
def test_report_curve_is_compare_at_each_t(capsys, tmp_path):
    out = tmp_path / "r"
    code, _, err = run(capsys, "report", SYNTH, "-o", out, "--configs", "[6]|[2]|[1]", "--no-progress")
    assert code == 0, err
    page = (out / "index.html").read_text(encoding="utf-8")
    section = page[page.index("<h2>Sampling at temperature T</h2>") : page.index("<h2>Tree-shape recommendation</h2>")]
    assert section.count("<figure>") == 1 and 'src="http' not in section
    # the page's table names code's and chat's temperatures, not only the grid's round numbers
    assert all(f"<td>{t}</td>" in section for t in (0.2, 0.5, 0.7, 1.5)), section
    curve = read_csv(out / "tables/sampling_curve.csv")
    assert sorted({float(r["temperature"]) for r in curve}) == [round(0.1 * k, 1) for k in range(16)]
    assert {r["config"] for r in curve} == {"[6]|[2,2]|[1,1]", "[6]|[2]|[1]"}
    code, body, err = compare_json(capsys, SYNTH, "--temperature", "0.7", "--configs", "[6]|[2]|[1]")
    for want in body["configs"]:
        (got,) = [r for r in curve if r["config"] == want["config"] and float(r["temperature"]) == 0.7]
        for name in ("determined", "undetermined"):
            assert int(got[name]) == want[name]
        for name in ("all_rounds_block_efficiency_lo", "all_rounds_block_efficiency_hi"):
            assert float(got[name]) == pytest.approx(want[name], abs=TOL)
    (greedy,) = [r for r in curve if r["config"] == "[6]|[2,2]|[1,1]" and float(r["temperature"]) == 0.0]
    assert float(greedy["expected_block_efficiency_lo"]) == pytest.approx(2.66, abs=1e-12)  # the replay's mean


@pytest.mark.slow
def test_report_without_scores_says_why_there_is_no_curve(capsys, tmp_path):
    out = tmp_path / "r"
    code, _, err = run(capsys, "report", ARTICLE, "-o", out, "--no-progress")
    assert code == 0, err
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Sampling at temperature T" in page and "no scores: no temperature curve" in page
    assert not (out / "tables/sampling_curve.csv").exists()


def cut_dump(directory: Path, top_k_spec, top_head, steps: int, rows: int) -> Path:
    """synthetic_article as a dump recorded with a config whose tree is the recording's first
    ``steps`` levels (every node of them, so the selection is the recording's): draft steps beyond
    dropped, validate rows (all layout: row n is node n) cut to the first ``rows``."""
    import numpy as np

    directory.mkdir()
    manifest = json.loads((SYNTH / "manifest.json").read_text())
    manifest.pop("rounds")
    manifest["config"] = {"gamma": steps, "topKSpec": top_k_spec, "topHead": top_head, "treeType": 0}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    for f in SYNTH.glob("*.npz"):
        if f.name.startswith("draft_step_") and int(f.name.split("_")[2]) >= steps:
            continue
        if f.name.startswith("validate_"):
            np.savez(directory / f.name, **{k: v[:rows] for k, v in np.load(f).items()})
        else:
            (directory / f.name).write_bytes(f.read_bytes())
    return directory


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "heads", "steps", "rows"), [([[6]], [1], 1, 7), ([[6], [2, 2]], [1, 2], 2, 11)])
def test_a_config_at_t_is_the_replay_of_the_dump_it_would_record(capsys, tmp_path, spec, heads, steps, rows):
    """The first levels of the recording, cut out as their own dump and replayed at T, give the
    numbers compare --temperature gives that config on the whole dump."""
    name = "|".join("[" + ",".join(map(str, r)) + "]" for r in spec)
    code, body, err = compare_json(capsys, SYNTH, "--temperature", "0.7", "--configs", name)
    assert code == 0, err
    (row,) = [r for r in body["configs"] if r["config"] == name]
    code, out, err = run(
        capsys,
        "replay",
        cut_dump(tmp_path / "cut", spec, heads, steps, rows),
        "--json",
        "--no-progress",
        "--temperature",
        "0.7",
    )
    assert code == 0, err
    smp = [json.loads(line)["sampling"] for line in out.splitlines()]
    assert row["determined"] == len(smp) == 300
    for side in ("lo", "hi"):
        mean = sum(s[f"expected_accepted_length_{side}"] for s in smp) / len(smp)
        assert row[f"expected_accepted_length_{side}"] == pytest.approx(mean, abs=TOL)


@pytest.mark.parametrize("temperature", [None, "0.7"])
def test_top_keeps_the_runs_in_the_order_given(capsys, tmp_path, temperature):
    """--top (greedy and at T, one rule: analysis.compare.configs.top_rows): per run, in the order the
    runs were named, the recorded config and the N best of that run's own rows."""
    import shutil

    dumps = [tmp_path / "zeta", tmp_path / "alpha"]  # not in alphabetical order
    for d in dumps:
        shutil.copytree(SYNTH, d)
    at_t = ["--temperature", temperature] if temperature else []
    key = "all_rounds_block_efficiency_lo" if temperature else "modelled_speedup_lo"
    argv = ["compare", *dumps, "--no-progress", "--json", *at_t, "--configs", *MAYBE_CONFIGS]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    whole = json.loads(out)
    code, out, err = run(capsys, *argv, "--top", "2")
    assert code == 0, err
    top = json.loads(out)
    assert [r["run"] for r in top["configs"]] == ["zeta"] * 3 + ["alpha"] * 3
    for label in ("zeta", "alpha"):
        rows = [r for r in whole["configs"] if r["run"] == label]
        best = sorted(rows[1:], key=lambda r: -r[key])[:2]
        assert [r for r in top["configs"] if r["run"] == label] == [rows[0], *best]
