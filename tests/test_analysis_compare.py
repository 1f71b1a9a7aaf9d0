"""Cost model, dynamic-gamma strategies and the config comparison table, checked by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.compare.configs import compare_display, format_bounds, generate_funnels, parse_config_arg
from analysis.compare.gamma_strategies import next_gamma
from analysis.compare.subtree import truncated
from analysis.cost.model import CostModel
from replay.core.config import TreeConfig
from replay.io.rounds import Round
from replay.testing.compare_reference import compare_configs, outcomes_by_gamma, simulate_strategies, simulate_strategy
from replay.testing.replayer import replay_directory, replay_round
from replay.util.errors import SpecReplayError
from tests.analysis_oracle import as_round, random_oracle, record_round

# t_verify(n) = 1 + 0.1 (n - 1) on [1, 17]; a draft step costs 0.1
COST = CostModel(np.array([1.0, 17.0]), np.array([1.0, 2.6]), 0.1, "test")
CHAIN = TreeConfig.from_lists([[1], [1], [1]])


def test_cost_model_interpolation_and_extrapolation():
    assert COST.t_verify(13) == pytest.approx(2.2)
    assert COST.t_verify(33) == pytest.approx(4.2)  # past the last point: same slope
    assert COST.t_verify([1, 9]).tolist() == pytest.approx([1.0, 1.8])
    # article config: 3 steps, 12 nodes → 0.3 + t(13) = 2.5 s; L = 3 every round → (3+1) * 1 / 2.5
    assert COST.round_cost(3, 12) == pytest.approx(2.5)
    assert COST.speedup(4.0, 2.5) == pytest.approx(1.6)


def test_cost_model_json(tmp_path):
    p = tmp_path / "cost.json"
    p.write_text(json.dumps({"tokens": [1, 2, 4], "verify_s": [0.38, 0.4, 0.5], "draft_step_s": 0.05}))
    cm = CostModel.load(p)
    assert cm.t_verify(3) == pytest.approx(0.45) and cm.draft_step_s == 0.05
    p.write_text(json.dumps({"tokens": [2, 1], "verify_s": [1, 1], "draft_step_s": 0}))
    with pytest.raises(SpecReplayError, match="strictly increasing"):
        CostModel.load(p)
    p.write_text(json.dumps({"tokens": [1], "verify_s": [1]}))
    with pytest.raises(SpecReplayError, match="draft_step_s"):
        CostModel.load(p)


def chain_rounds(full_lengths):
    """Chain [1]|[1]|[1] rounds whose untruncated accepted length is given (all layout)."""
    steps = [[[1, 91]], [[2, 92]], [[3, 93]]]
    table = {3: [[1], [2], [3], [7]], 0: [[5], [2], [3], [7]], 2: [[1], [2], [6], [7]], 1: [[1], [4], [3], [7]]}
    return [
        replay_round(Round.from_lists(steps, table[L], key=(k, k), layout="all"), CHAIN)
        for k, L in enumerate(full_lengths)
    ]


def test_next_gamma_rules():
    assert next_gamma(0, 2, 0, None, 3) == (3, None)
    assert next_gamma(2, 3, 0, None, 3) == (1, None)  # force fall: last accepted + 1
    assert next_gamma(2, 2, 2, None, 3) == (3, None)  # full: rise by one
    assert next_gamma(3, 3, 1, None, 3) == (2, None)  # stairway fall: one step down
    assert next_gamma(3, 3, 3, None, 3) == (3, None)  # capped at G
    g, e = next_gamma(1, 3, 0, 3.0, 3, ema_window=3)  # alpha = 0.5: E = 1.5, round half up → 2
    assert (g, e) == (3, 1.5)
    g, e = next_gamma(4, 3, 1, 1.0, 3, ema_window=1)  # window 1: E = L
    assert (g, e) == (2, 1.0)


@pytest.mark.parametrize(
    "strategy,window,gammas,accepted",
    [
        # full lengths 3,0,2,3,1; L_t = min(full_t, gamma_t)
        (0, 1, (3, 3, 3, 3, 3), 9),
        (2, 1, (3, 3, 1, 2, 3), 7),  # 3→3 (full), 0→1, min(2,1)=1 full→2, min(3,2)=2 full→3, 1
        (3, 1, (3, 3, 2, 3, 3), 9),  # 3→3, 0→2 (stair), 2 full→3, 3→3, 1
        (1, 2, (3, 3, 2, 3, 3), 9),  # alpha 2/3: E 3 → 1.0 → 1.667 → 2.556 (g = round(E) + 1)
        (4, 1, (3, 3, 1, 2, 3), 7),
    ],
)
def test_gamma_strategies_hand(strategy, window, gammas, accepted):
    res = chain_rounds([3, 0, 2, 3, 1])
    out = simulate_strategies(res, CHAIN, [strategy], COST, ema_window=window, recorded_gamma=3)[0]
    assert out.exact and out.trajectory == gammas
    assert out.accepted == (accepted, accepted)
    assert out.gamma == (sum(gammas), sum(gammas))
    # chain: nodes = gamma, cost = 0.1 g + t(g + 1) = 1 + 0.2 g
    cost = sum(1 + 0.2 * g for g in gammas)
    assert out.cost_s[0] == pytest.approx(cost)
    assert out.speedup(COST)[0] == pytest.approx((accepted + 5) / cost)


def test_gamma_strategy_matches_a_dynamic_gamma_recording():
    """Record each round with the gamma the strategy picks from the recording's own acceptance;
    the simulation on a full-gamma recording must agree round for round."""
    cfg = TreeConfig.from_lists([[4], [2, 1], [1, 1]], [1, 2, 2])
    draft, target = random_oracle(4, cols=6, hit=0.8)
    roots = list(range(500, 540))
    full = [replay_round(as_round(record_round(cfg, r, 3, draft, target, "path"), (r, r), r), cfg) for r in roots]
    outs = outcomes_by_gamma(full, cfg, recorded_gamma=3)
    moved = set()
    for strategy, window in ((1, 3), (2, 1), (3, 1), (4, 2)):
        g, ema, gammas, total = 3, None, [], 0
        for r in roots:
            sub = truncated(cfg, g)
            res = replay_round(as_round(record_round(sub, r, g, draft, target, "path"), (r, r), r), sub)
            gammas.append(g)
            total += res.acceptance.accepted_length
            g, ema = next_gamma(strategy, g, res.acceptance.accepted_length, ema, 3, window)
        sim = simulate_strategy(outs, cfg, strategy, COST, window)
        assert sim.exact and sim.trajectory == tuple(gammas) and sim.accepted == (total, total)
        moved |= set(gammas)
    assert len(moved) >= 2  # the strategies did move gamma


def test_gamma_strategy_bounds_with_undecidable_rounds():
    # A config expanding nodes the recording did not: strategy 0 equals the comparison's bounds.
    draft, target = random_oracle(12, cols=6)
    rec_cfg = TreeConfig.from_lists([[4], [1], [1]])
    roots = list(range(20))
    res = [
        replay_round(as_round(record_round(rec_cfg, r, 3, draft, target, "path"), (r, r), r), rec_cfg) for r in roots
    ]
    sub = TreeConfig.from_lists([[4], [1, 1], [1, 1]], [1, 2, 2])
    table, per_round = compare_configs(res, rec_cfg, [sub], COST)
    row = table.iloc[0]
    assert row["undecidable"] > 0
    s0 = simulate_strategies(res, sub, [0, 3], COST, recorded_gamma=3)
    assert not s0[0].exact
    assert s0[0].mean_accepted() == pytest.approx((row["mean_accepted_length_lo"], row["mean_accepted_length_hi"]))
    lo, hi = s0[1].mean_accepted()
    assert lo <= hi


def test_compare_configs_article_sample():
    rep = replay_directory("sample_dumps/article_round")
    configs = [rep.tree, TreeConfig.from_lists([[6], [2, 2]]), TreeConfig.from_lists([[1], [1], [1]])]
    table, per_round = compare_configs(rep.results, rep.tree, configs, COST)
    assert table["nodes"].tolist() == [12, 10, 3]
    assert table["mean_accepted_length_lo"].tolist() == [3, 2, 3]
    assert (table["undecidable"] == 0).all() and table["contained"].all()
    # speedups by hand: (L + 1) * t(1) / (steps * 0.1 + t(nodes + 1))
    assert table["modelled_speedup_lo"].tolist() == pytest.approx([4 / 2.5, 3 / (0.2 + 2.0), 4 / (0.3 + 1.3)])
    shown = compare_display(table)
    assert shown["mean_accepted_length"].tolist() == ["3.0000", "2.0000", "3.0000"]
    assert len(per_round) == 3


def test_format_bounds():
    assert format_bounds(1.5, 1.5) == "1.5000"
    assert format_bounds(1.5, 1.75) == "1.5000..1.7500"
    assert format_bounds(1.5, 1.75, 3) == "1.500..1.750"  # a speedup's (SPEEDUP_DIGITS)


def test_parse_config_arguments(tmp_path):
    [c] = parse_config_arg("[[6],[2,2],[1,1]]")
    assert c.top_head == (1, 2, 2) and c.num_nodes == 12
    [c] = parse_config_arg('{"topKSpec": [[4], [1]], "topHead": [1, 1], "gamma": 2}')
    assert c.short() == "[4]|[1]"
    f = tmp_path / "t.json"
    f.write_text(
        json.dumps(
            {
                "specTree": [
                    {"gamma": 1, "topKSpec": [[3]], "topHead": [1]},
                    {"gamma": 2, "topKSpec": [[2], [1]], "topHead": [1, 1]},
                ]
            }
        )
    )
    assert [c.short() for c in parse_config_arg(str(f))] == ["[3]", "[2]|[1]"]
    with pytest.raises(SpecReplayError, match="topHead"):
        parse_config_arg("[[2],[1,1,1]]")  # three parents at step 1, but level 1 has 2 nodes
    with pytest.raises(SpecReplayError):
        parse_config_arg("no-such-file.json")


def test_generate_funnels():
    got = [c.short() for c in generate_funnels("root=2,4 heads=1,2 width=1 gamma=2")]
    assert got == ["[2]|[1]", "[2]|[1,1]", "[4]|[1]", "[4]|[1,1]"]
    got = [c.short() for c in generate_funnels("root=1 heads=3 width=2 gamma=1:3")]
    assert got == ["[1]", "[1]|[2]", "[1]|[2]|[2,2]"]  # heads capped by the level size
    with pytest.raises(SpecReplayError, match="--generate"):
        generate_funnels("depth=3")
    with pytest.raises(SpecReplayError, match="--grid"):
        generate_funnels("depth=3", "--grid")  # compare --grid's old spelling names its option


def test_recorded_config_row_equals_replay_even_with_a_threshold_in_its_config():
    # The recording's config says gammaThreshold 0.9; without --gamma-threshold the comparison
    # inherits the recorded stops only, so the recorded config's row is the replay itself.
    cfg = TreeConfig.from_lists([[3], [1], [1]], gamma_threshold=0.9)
    draft, target = random_oracle(21, cols=5)
    roots = list(range(30))
    res = [replay_round(as_round(record_round(cfg, r, 3, draft, target, "path"), (r, r), r), cfg) for r in roots]
    table, _ = compare_configs(res, cfg, [cfg], COST)
    mean = sum(r.acceptance.accepted_length for r in res) / len(res)
    assert table["mean_accepted_length_lo"].iloc[0] == pytest.approx(mean) and table["undecidable"].iloc[0] == 0
    stopped, _ = compare_configs(res, cfg, [cfg], COST, gamma_threshold=0.9)  # asked for: rounds get shorter
    assert stopped["mean_accepted_length_hi"].iloc[0] <= mean
