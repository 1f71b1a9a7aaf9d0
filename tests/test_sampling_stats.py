"""``stats --temperature T``: every metric an expectation at T with bounds, through the CLI,
checked by hand on a hand-made dump and against ``replay --temperature --json`` on the synthetic sample."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.test_sampling_cli import sampling_json, tiny_dump
from tests.test_user_mistakes import SYNTH, assert_told, run, write_matrix

TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)


def stats_json(capsys, *argv):
    code, out, err = run(capsys, "stats", *argv, "--json", "--no-progress")
    return code, (json.loads(out) if out.strip() else None), err


def test_stats_at_t1_by_hand(capsys, tmp_path):
    """tiny_dump at T = 1: P(L >= 1) = 0.8, P(L >= 2) = 0.3, E[L] = 1.1, 3 nodes, 2 steps; exact."""
    code, body, err = stats_json(capsys, tiny_dump(tmp_path / "d"), "--temperature", "1")
    assert code == 0, err
    (s,) = body["summary"]
    assert s["rounds"] == 1 and s["exact_rounds"] == 1 and body["temperature"] == 1.0
    for side in ("lo", "hi"):
        assert s[f"mean_accepted_length_{side}"] == pytest.approx(1.1, abs=TOL)
        assert s[f"mean_acceptance_length_{side}"] == pytest.approx(2.1, abs=TOL)
        assert s[f"draft_acceptance_rate_{side}"] == pytest.approx(1.1 / 3, abs=TOL)
        assert s[f"full_depth_fraction_{side}"] == pytest.approx(0.3, abs=TOL)
    hist = {r["accepted_length"]: r for r in body["accepted_length"]}
    for d, p in ((0, 0.2), (1, 0.5), (2, 0.3)):
        assert hist[d]["fraction_lo"] == pytest.approx(p, abs=TOL) and hist[d]["fraction_hi"] == hist[d]["fraction_lo"]
    depth = {r["depth"]: r for r in body["depth_acceptance"]}
    assert depth[1]["per_position_acceptance_rate_lo"] == pytest.approx(0.8, abs=TOL)
    assert depth[2]["conditional_lo"] == pytest.approx(0.3 / 0.8, abs=TOL)
    assert depth[2]["conditional_hi"] == pytest.approx(0.3 / 0.8, abs=TOL)
    # the text output shows one number where exact, never a range
    code, out, err = run(capsys, "stats", tmp_path / "d", "--temperature", "1", "--no-progress")
    assert code == 0 and "1.1000" in out and "2.1000" in out and not re.search(r"\d\.\.\d", out)


def test_stats_bounds_are_the_sums_of_the_replays_per_round_bounds(capsys):
    """On the synthetic sample at T = 0.7 (bounded): each metric from replay --temperature --json's rounds."""
    code, rows, err = sampling_json(capsys, SYNTH, "--temperature", "0.7")
    assert code == 0, err
    smp = [r["sampling"] for r in rows]
    nodes = np.array([r["num_nodes"] for r in rows], dtype=float)
    steps = np.array([r["num_steps"] for r in rows])
    code, body, err = stats_json(capsys, SYNTH, "--temperature", "0.7")
    assert code == 0, err
    (s,) = body["summary"]
    assert s["rounds"] == len(rows) and s["exact_rounds"] == sum(x["exact"] for x in smp)
    depth = max(len(x["length_at_least_lo"]) for x in smp)
    for side in ("lo", "hi"):
        e = np.array([x[f"expected_accepted_length_{side}"] for x in smp])
        ge = np.zeros((len(smp), depth + 2))
        ge[:, 0] = 1.0
        for i, x in enumerate(smp):
            ge[i, 1 : 1 + len(x[f"length_at_least_{side}"])] = x[f"length_at_least_{side}"]
        assert s[f"mean_accepted_length_{side}"] == pytest.approx(e.mean(), abs=TOL)
        assert s[f"draft_acceptance_rate_{side}"] == pytest.approx(e.sum() / nodes.sum(), abs=TOL)
        assert s[f"full_depth_fraction_{side}"] == pytest.approx(ge[np.arange(len(smp)), steps].mean(), abs=TOL)
        for r in body["depth_acceptance"]:
            assert r[f"per_position_acceptance_rate_{side}"] == pytest.approx(ge[:, r["depth"]].mean(), abs=TOL)
    assert s["mean_accepted_length_lo"] < s["mean_accepted_length_hi"]  # bounded: the sample's top-4 rows
    ge_lo = np.zeros((len(smp), depth + 2))
    ge_hi = np.zeros((len(smp), depth + 2))
    ge_lo[:, 0] = ge_hi[:, 0] = 1.0
    for i, x in enumerate(smp):
        ge_lo[i, 1 : 1 + len(x["length_at_least_lo"])] = x["length_at_least_lo"]
        ge_hi[i, 1 : 1 + len(x["length_at_least_hi"])] = x["length_at_least_hi"]
    for r in body["accepted_length"]:
        d = r["accepted_length"]
        lo = np.maximum(ge_lo[:, d] - ge_hi[:, d + 1], 0.0).mean()
        hi = np.minimum(ge_hi[:, d] - ge_lo[:, d + 1], 1.0).mean()
        assert (r["fraction_lo"], r["fraction_hi"]) == pytest.approx((lo, hi), abs=TOL)
        assert r["fraction_lo"] <= r["fraction_hi"]
    # conditional: the ratio of expected counts, bounded by pairing the sides
    for r in body["depth_acceptance"]:
        d = r["depth"]
        assert r["conditional_lo"] == pytest.approx(ge_lo[:, d].sum() / ge_hi[:, d - 1].sum(), abs=TOL)
        assert r["conditional_hi"] == pytest.approx(min(1.0, ge_hi[:, d].sum() / ge_lo[:, d - 1].sum()), abs=TOL)


def test_stats_lists_rounds_without_scores_as_skipped(capsys, tmp_path):
    """A second round without scores: skipped with the reason, exit 1, the first round's numbers stand."""
    d = tiny_dump(tmp_path / "d")
    write_matrix(d / "draft_step_0_124_140", [[10, 11]])
    write_matrix(d / "draft_step_1_125_141", [[12]])
    write_matrix(d / "validate_125_141", [[10, 11, 13], [12, 14, 15]])
    code, body, err = stats_json(capsys, d, "--temperature", "1")
    assert code == 1
    assert_told(err, "skipped round 125_141", "no scores")
    assert body["summary"][0]["rounds"] == 1 and body["summary"][0]["mean_accepted_length_lo"] == pytest.approx(1.1)
    assert body["skipped"] and body["skipped"][0]["what"] == "round 125_141"
    code, out, err = run(capsys, "stats", SYNTH.parent / "article_round", "--temperature", "0.7", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "no scores", "article_round: no round could be replayed (1 round(s) skipped", "at T = 0.7")


@pytest.mark.parametrize("bad", ["-0.5", "nan", "inf", "abc", "1e-310", "1e-400"])
def test_stats_refuses_a_bad_temperature(capsys, bad):
    # 1e-310 would give NaN bounds with exit 0, 1e-400 (read as 0.0) the greedy replay
    code, out, err = run(capsys, "stats", SYNTH, f"--temperature={bad}", "--no-progress")
    assert code == 2 and out == "" and "--temperature" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and f"got '{bad}'" in err


def test_stats_at_t_refuses_a_greedy_only_table(capsys):
    code, out, err = run(capsys, "stats", SYNTH, "--temperature", "0.7", "--table", "hit_outcome")
    assert code == 2 and out == ""
    assert_told(err, "--table hit_outcome", "--temperature", "summary, accepted_length, depth_acceptance")
    code, out, err = run(capsys, "stats", SYNTH, "--temperature", "0.7", "--table", "depth_acceptance", "--csv")
    assert code == 0 and out.splitlines()[0].startswith("run,depth,rounds,expected_reached_lo")


@pytest.mark.slow
def test_stats_at_t0_is_the_greedy_stats(capsys):
    """T = 0: every expectation equals the greedy metric (exact), the histogram too."""
    code, greedy, _ = stats_json(capsys, SYNTH)
    code0, at0, err = stats_json(capsys, SYNTH, "--temperature", "0")
    assert code == code0 == 0, err
    g, s = greedy["summary"][0], at0["summary"][0]
    assert s["exact_rounds"] == s["rounds"] == g["rounds"]
    for m in ("mean_accepted_length", "draft_acceptance_rate", "full_depth_fraction"):
        assert s[f"{m}_lo"] == s[f"{m}_hi"] == pytest.approx(g[m], abs=1e-9)  # two walks, sums in two orders
    frac = {r["accepted_length"]: r["fraction"] for r in greedy["accepted_length"]}
    for r in at0["accepted_length"]:
        assert r["fraction_lo"] == r["fraction_hi"] == pytest.approx(frac.get(r["accepted_length"], 0.0), abs=1e-9)


def test_stats_header_at_t_counts_the_rounds_the_reading_refused(capsys, tmp_path):
    # A round whose scores hold a NaN is refused when read, before any T: the header at T counts it,
    # as the greedy header's "skipped: 1 round(s)" does, not "skipped: 0".
    d = tiny_dump(tmp_path / "d")
    write_matrix(d / "draft_step_0_124_140", [[10, 11]])
    write_matrix(d / "draft_step_1_125_141", [[12]])
    write_matrix(d / "validate_125_141", [[10, 11, 13], [12, 14, 15]])
    (d / "validate_125_141.scores").write_text("0.5 nan 0.2\n0.6 0.3 0.1\n")
    code, out, err = run(capsys, "stats", d, "--temperature", "1", "--no-progress")
    assert code == 1
    assert_told(err, "skipped round 125_141", "NaN")
    header = out.splitlines()[0]
    assert "1 of 1 replayed rounds usable" in header and header.endswith("skipped: 0 at T, 1 round(s) when read")


def test_every_summary_metric_says_what_it_is_at_t(capsys):
    """Each metric of the greedy summary (SUMMARY_METRICS) says what it is at T: bounded (EXPECTED),
    the same at any T (SAME_AT_ANY_T) or greedy only (GREEDY_ONLY); `stats --temperature --json` prints
    exactly that placement, each by the greedy metric's own formula."""
    from replay.core.headline import EXPECTED, GREEDY_ONLY, SAME_AT_ANY_T, SUMMARY_METRICS

    kinds = {m.name: m.at_t for m in SUMMARY_METRICS}
    assert set(kinds.values()) <= {EXPECTED, SAME_AT_ANY_T, GREEDY_ONLY}, kinds
    code, body, err = stats_json(capsys, SYNTH, "--temperature", "0.7")
    assert code == 0, err
    (row,) = body["summary"]
    for name, kind in kinds.items():
        if kind == EXPECTED:
            assert row[f"{name}_lo"] <= row[f"{name}_hi"] and name not in row
        elif kind == SAME_AT_ANY_T:
            assert name in row
        else:
            assert not any(key.startswith(name) for key in row)


def _span(lo: float, hi: float) -> str:
    """A value as replay's sampling summary prints it: one number when exact, else its bounds and width
    (4 decimals, as every command prints an acceptance figure)."""
    if lo == hi:
        return f"{lo:.4f}"
    return f"[{lo:.4f}, {hi:.4f}] (width {hi - lo:.4f})"


@pytest.mark.parametrize("t", ["0", "0.7", "1.3"])
def test_replay_batch_and_stats_state_the_same_sampling_summary(capsys, t):
    """The means at T that replay --temperature --summary and batch --temperature print are stats
    --temperature's summary row (one rule: replay.engine.sampling_runs.sampling_means), and the
    distribution they print is its accepted_length table."""
    code, body, err = stats_json(capsys, SYNTH, "--temperature", t)
    assert code == 0, err
    (s,) = body["summary"]
    want = [
        f"{s['rounds']} rounds" + (" with scores" if t != "0" else "") + f", {s['exact_rounds']} exact",
        "  expected accepted length per round: " + _span(s["mean_accepted_length_lo"], s["mean_accepted_length_hi"]),
        "  expected block efficiency:          "
        + _span(s["mean_acceptance_length_lo"], s["mean_acceptance_length_hi"]),
    ]
    dist = [
        f"    L = {r['accepted_length']}: {_span(r['fraction_lo'], r['fraction_hi'])}" for r in body["accepted_length"]
    ]
    for argv in (("replay", SYNTH, "--summary"), ("batch", SYNTH, "--workers", "1")):
        code, out, err = run(capsys, *argv, "--temperature", t, "--no-progress")
        assert code == 0, err
        lines = out[out.index("sampling at T") :].splitlines()
        assert want[0] in lines[0] and lines[1:3] == want[1:], argv
        got = [line for line in lines if line.startswith("    L = ")]
        assert got[: len(dist)] == dist and all(line.endswith(": 0.0000") for line in got[len(dist) :]), argv


def test_one_rule_for_a_run_without_rounds():
    """runs_with_rounds, which stats, stats --temperature and compare/recommend --temperature ask: a lone
    run without a round is refused, one beside others left out, and none with a round refuses them all."""
    from analysis.tables.runs import REFUSED_ALONE, REFUSED_EVERY, RunsWithRounds, runs_with_rounds

    assert runs_with_rounds([0]) == RunsWithRounds((), (), REFUSED_ALONE)
    assert runs_with_rounds([4]) == RunsWithRounds((0,), (), None)
    assert runs_with_rounds([0, 2, 0]) == RunsWithRounds((1,), (0, 2), None)
    assert runs_with_rounds([0, 0]) == RunsWithRounds((), (0, 1), REFUSED_EVERY)
