"""Measured timings, measured speedup and the choice of cost model, on hand-written manifests.

Hand manifest: 2 rounds of 3 nodes and 2 draft steps; draft 0.2 s and 0.4 s, verify 0.9 s and 1.1 s.
Speculative totals: 10 tokens, 7 s in all, 1 s prefill; target-only baseline: 10 tokens in 10 forwards,
10 s in all, 2 s prefill; both timed together in one interleaved session of one pass (totals.timing).
By hand:
  draft step        = (0.2 + 0.4) / (2 + 2)          = 0.15 s
  t_verify(4)       = (0.9 + 1.1) / 2                = 1.0 s      (3 nodes + the root)
  t_verify(1)       = (10 − 2) / 10 forwards          = 0.8 s      (the baseline's decode per forward)
  measured_speedup  = ((10 − 2) / 10) / ((7 − 1) / 10) = 0.8 / 0.6 = 4/3
  measured wall     = (10 / 7) / (10 / 10)            = 10/7     (the one pass's ratio)
Without totals.timing (an older harness: the baseline ran apart) there is no measured speedup, and
t_verify(1) is not taken from that baseline.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.compare.configs import modelled_speedup, speed_row, with_speed
from analysis.cost.model import SOURCE_DEFAULT, CostModel
from analysis.cost.source import SOURCE_CURVE, SOURCE_MANIFEST, cost_warning, given_cost, run_cost
from analysis.cost.timings import NotComparable, measured_speedup, read_timings
from replay.io.manifest import read_manifest
from replay.testing.compare_reference import round_sizes
from replay.util.errors import DumpError, SpecReplayError
from tests.test_analysis_metrics import CFG, hand_results

ROUNDS = [
    {"key": [1, 1], "draft_steps": 2, "num_nodes": 3, "draft_time_s": 0.2, "verify_time_s": 0.9},
    {"key": [2, 2], "draft_steps": 2, "num_nodes": 3, "draft_time_s": 0.4, "verify_time_s": 1.1},
]
SESSION = {
    "repeats": 1,
    "methods": {"speculative": {"seconds": [7.0], "tokens": [10]}, "target-only": {"seconds": [10.0], "tokens": [10]}},
}
TOTALS = {
    "new_tokens": 10,
    "total_s": 7.0,
    "prefill_s": 1.0,
    "rounds": 2,
    "timing": SESSION,
    "baseline": {"new_tokens": 10, "total_s": 10.0, "prefill_s": 2.0, "rounds": 10},
}
APART = {k: v for k, v in TOTALS.items() if k != "timing"}  # an older manifest: baseline timed apart


def dump(path, rounds=ROUNDS, totals=TOTALS):
    path.mkdir(parents=True, exist_ok=True)
    body = {"rounds": rounds}
    if totals is not None:
        body["totals"] = totals
    (path / "manifest.json").write_text(json.dumps(body))
    return path


def cost_of(path, given=None):
    return run_cost(path, read_manifest(path), given)


def test_manifest_timings_give_the_cost_model_and_the_measured_speedup(tmp_path):
    d = dump(tmp_path / "run")
    cost = cost_of(d)
    assert cost.source == SOURCE_MANIFEST and cost_warning(cost, "run") is None
    assert cost.draft_step_s == pytest.approx(0.15)
    assert cost.tokens.tolist() == [1, 4] and cost.verify_s.tolist() == pytest.approx([0.8, 1.0])
    m = measured_speedup(read_timings(d, read_manifest(d)))
    assert m.decode == pytest.approx(4 / 3) and m.wall == pytest.approx(10 / 7)


def test_speed_row_puts_modelled_and_measured_side_by_side(tmp_path):
    d = dump(tmp_path / "run")
    cost = cost_of(d)
    res = round_sizes(hand_results())  # L = 2, 1, 0, 1; each round 2 steps and 3 nodes
    # Σ (L + 1) · t_verify(1) / Σ (2 · 0.15 + t_verify(4)) = 8 · 0.8 / (4 · 1.3)
    assert modelled_speedup(res, cost) == pytest.approx(6.4 / 5.2)
    row = speed_row("hand", res, cost, measured_speedup(read_timings(d, read_manifest(d))))
    assert row["modelled_speedup"] == pytest.approx(6.4 / 5.2) and row["measured_speedup"] == pytest.approx(4 / 3)
    assert row["measured_speedup_wall"] == pytest.approx(10 / 7) and row["cost_source"] == SOURCE_MANIFEST


def test_measured_speedup_only_on_the_recorded_configs_row(tmp_path):
    import pandas as pd

    d = dump(tmp_path / "run")
    m = measured_speedup(read_timings(d, read_manifest(d)))
    table = pd.DataFrame({"config": [CFG.short(), "[1]|[1]", CFG.short()], "top_head": [[1, 1], [1, 1], [1, 2]]})
    out = with_speed(table, CFG, cost_of(d), m)
    assert out["measured_speedup"].iloc[0] == pytest.approx(4 / 3)
    assert out["measured_speedup"].iloc[1:].isna().all()  # another config; same widths but other topHead
    assert (out["cost_source"] == SOURCE_MANIFEST).all()


def test_without_a_baseline_no_measured_speedup_and_the_source_says_how_t1_was_got(tmp_path):
    d = dump(tmp_path / "run", totals={k: v for k, v in TOTALS.items() if k != "baseline"})
    cost = cost_of(d)
    assert cost.source.startswith(SOURCE_MANIFEST) and "no target-only baseline" in cost.source
    assert float(cost.t_verify(1)) == pytest.approx(1.0)  # one measured point: flat
    m = measured_speedup(read_timings(d, read_manifest(d)))
    assert isinstance(m, NotComparable) and "no target-only baseline" in m.reason and np.isnan(m.decode)


def test_a_baseline_timed_apart_is_not_comparable_and_gives_no_t_verify_1(tmp_path):
    for name, totals in (("null", dict(APART, timing=None)), ("absent", APART)):
        d = dump(tmp_path / name, totals=totals)
        m = measured_speedup(read_timings(d, read_manifest(d)))
        assert (
            isinstance(m, NotComparable)
            and "totals.timing is null or absent" in m.reason
            and "generate --baseline" in m.reason
        )
        assert np.isnan(m.decode) and np.isnan(m.wall) and m.to_json()["measured_speedup"] is None
        cost = cost_of(d)
        assert "target-only baseline not timed together with these rounds" in cost.source
        assert float(cost.t_verify(1)) == pytest.approx(1.0)  # flat at the 4-token time, not the baseline's 0.8
    only_spec = {"repeats": 1, "methods": {"speculative": SESSION["methods"]["speculative"]}}
    d = dump(tmp_path / "spec_only", totals=dict(TOTALS, timing=only_spec))
    m = measured_speedup(read_timings(d, read_manifest(d)))
    assert isinstance(m, NotComparable) and "did not time 'target-only'" in m.reason


def test_a_session_of_several_passes_gives_the_median_ratio(tmp_path):
    passes = {
        "speculative": {"seconds": [7.0, 14.0, 8.0], "tokens": [10, 10, 10]},
        "target-only": {"seconds": [10.0, 10.0, 16.0], "tokens": [10, 10, 10]},
    }
    d = dump(tmp_path / "run", totals=dict(TOTALS, timing={"repeats": 3, "methods": passes}))
    m = measured_speedup(read_timings(d, read_manifest(d)))
    # per pass (10/7)/(10/10) = 1.4286, (10/14)/(10/10) = 0.7143, (10/8)/(10/16) = 2.0: median 10/7
    assert m.comparable and m.wall == pytest.approx(10 / 7) and m.passes == pytest.approx((10 / 7, 10 / 14, 2.0))
    bad = dict(TOTALS, timing={"methods": {**passes, "target-only": {"seconds": [10.0], "tokens": [10]}}})
    with pytest.raises(DumpError, match=r"totals\.timing\.methods.*3 pass\(es\)"):
        read_timings(d, read_manifest(dump(tmp_path / "bad", totals=bad)))
    bad = dict(TOTALS, timing={"methods": {**passes, "speculative": {"seconds": ["x"], "tokens": [10]}}})
    with pytest.raises(DumpError, match=r"totals\.timing\.methods\.speculative\.seconds\[0\]"):
        read_timings(d, read_manifest(dump(tmp_path / "bad2", totals=bad)))


def test_a_falling_curve_is_held_flat_beyond_its_last_point(tmp_path):
    fast = [dict(r, verify_time_s=0.5) for r in ROUNDS]  # 4 tokens in 0.5 s, the baseline's 1 token in 0.8 s
    cost = cost_of(dump(tmp_path / "run", rounds=fast))
    assert "held flat beyond 4 tokens" in cost.source
    assert float(cost.t_verify(4)) == pytest.approx(0.5) and float(cost.t_verify(40)) == pytest.approx(0.5)


def test_a_sweep_dump_finds_the_sweeps_baseline_and_cost_curve(tmp_path):
    out = tmp_path / "sweep"
    d = dump(out / "dumps" / "2,1", totals={k: v for k, v in APART.items() if k != "baseline"})
    (out / "baseline.json").write_text(json.dumps({"summary": TOTALS["baseline"], "outputs": []}))
    m = measured_speedup(read_timings(d, read_manifest(d)))  # an old sweep's one baseline run: timed apart
    assert isinstance(m, NotComparable) and "baseline.json" in m.reason and "re-run the sweep" in m.reason
    (out / "cost_curve.json").write_text(
        json.dumps({"tokens": [1, 8], "verify_s": [0.5, 0.9], "draft_s": None, "draft_step_s": None})
    )
    cost = cost_of(d)
    # the curve beats the manifest; its missing draft step comes from the manifest's timings
    assert cost.source == SOURCE_CURVE + " + manifest draft step" and cost.draft_step_s == pytest.approx(0.15)
    assert cost.verify_s.tolist() == [0.5, 0.9]


def test_order_given_curve_manifest_default(tmp_path):
    d = dump(tmp_path / "run")
    (d / "cost_curve.json").write_text(json.dumps({"tokens": [1, 2], "verify_s": [0.3, 0.4], "draft_step_s": 0.05}))
    assert cost_of(d).source == SOURCE_CURVE and cost_of(d).draft_step_s == 0.05
    (tmp_path / "mine.json").write_text(json.dumps({"tokens": [1], "verify_s": [1.0], "draft_step_s": 0.2}))
    given = given_cost(tmp_path / "mine.json")
    assert cost_of(d, given) is given and given.source == f"given: {tmp_path / 'mine.json'}"
    bare = tmp_path / "bare"
    bare.mkdir()
    cost = cost_of(bare)
    assert cost.source == SOURCE_DEFAULT and np.allclose(
        cost.to_json()["verify_s"], CostModel.default().to_json()["verify_s"]
    )
    assert "MODELLED" in cost_warning(cost, "bare") and "bare" in cost_warning(cost, "bare")


def test_a_curve_without_draft_step_and_no_timings_is_a_clear_error(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "cost_curve.json").write_text(json.dumps({"tokens": [1, 2], "verify_s": [0.3, 0.4], "draft_step_s": None}))
    with pytest.raises(SpecReplayError, match="cost_curve.json: draft_step_s is null"):
        cost_of(d)


def test_bad_timing_fields_name_the_file_and_field(tmp_path):
    bad = [ROUNDS[0], dict(ROUNDS[1], verify_time_s="slow")]
    d = dump(tmp_path / "run", rounds=bad)
    with pytest.raises(DumpError, match=r"manifest.json \(rounds\[1\]\.verify_time_s\): expected a number"):
        cost_of(d)
    d = dump(tmp_path / "run2", rounds=[ROUNDS[0], {"key": [2, 2]}])
    with pytest.raises(DumpError, match=r"rounds\[1\]\.draft_time_s"):
        cost_of(d)
    d = dump(tmp_path / "run3", totals=dict(TOTALS, prefill_s=9.0))
    with pytest.raises(DumpError, match=r"totals\.total_s"):
        cost_of(d)


def test_round_costs_are_each_rounds_round_cost():
    """CostModel.round_costs (compare's and the gamma strategies' per-round costs) gives each round
    the float round_cost gives its (steps, nodes) alone, curves extrapolated at both ends included."""
    rng = np.random.default_rng(5)
    steps, nodes = rng.integers(0, 6, 500), rng.integers(0, 90, 500)
    models = (
        CostModel.default(),
        CostModel(np.array([2.0, 8.0, 40.0]), np.array([1.0, 1.1, 1.7]), 0.07, "curve", np.array([0.05, 0.06, 0.1])),
    )
    for cost in models:
        want = [float(cost.round_cost(int(s), int(n))) for s, n in zip(steps, nodes)]
        assert cost.round_costs(steps, nodes).tolist() == want
        assert np.array_equal(cost.round_costs(steps, nodes), np.asarray(cost.round_cost(steps, nodes)))
    assert cost.round_costs(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).shape == (0,)
    with pytest.raises(ValueError):
        cost.round_costs(np.array([1]), np.array([-1]))
