"""Tables and metrics against values worked out by hand.

The hand set (config [2]|[1], topHead [1,1], all layout, no scores → rank-major fallback):
root row [10, 20, 30] keeps A1 = 10, A2 = 20 (30 is a recorded column beyond the kept width);
A1 is expanded with row [11, 12] and keeps B11 = 11 (12 lies beyond). Validate rows: R, A1, A2, B11.

  r1: R→10, A1→11          path A1, B11 (leaf)      L = 2, leaf bonus 5         committed 3
  r2: R→20                 path A2 (leaf)           L = 1, leaf bonus 22        committed 2
  r3: R→30                 nothing (30 beyond)      L = 0, correction 30        committed 1
  r4: R→10, A1→12          path A1, 12 beyond       L = 1, correction 12        committed 2
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.compare.configs import runs_side_by_side
from analysis.tables.build import Tables, build_tables, export_tables
from analysis.tables.metrics import accepted_length_distribution, all_metrics, depth_acceptance, summary
from analysis.tables.runs import load_runs
from analysis.tables.slot_hits import shape_signature, static_shape
from replay.core.config import TreeConfig
from replay.engine.batch import config_tree_shape
from replay.io.rounds import Round
from replay.testing.frame_counts import metrics_by_frame
from replay.testing.replayer import replay_round
from replay.testing.table_rows import node_table, round_table

CFG = TreeConfig.from_lists([[2], [1]], [1, 1])
STEPS = [[[10, 20, 30]], [[11, 12]]]
VALIDATE = {
    "r1": [[10], [11], [21], [5]],
    "r2": [[20], [11], [22], [5]],
    "r3": [[30], [11], [21], [5]],
    "r4": [[10], [12], [21], [5]],
}


def hand_results():
    out = []
    for k, val in enumerate(VALIDATE.values()):
        out.append(replay_round(Round.from_lists(STEPS, val, key=(k, k + 16), root_token=7, layout="all"), CFG))
    return out


@pytest.fixture(scope="module")
def hand():
    res = hand_results()
    return round_table(res, "hand", CFG), node_table(res, "hand")


@pytest.fixture(scope="module")
def hand_metrics(hand):
    """The hand rounds' metrics, the node metrics counted from the reference node table's rows."""
    return metrics_by_frame(Tables(hand[0], hand[1], {"hand": CFG}))


@pytest.fixture(scope="module")
def article_tables():
    return build_tables(load_runs(["sample_dumps/article_round"], progress=False))


def test_round_table_hand(hand):
    rounds, _ = hand
    assert rounds["accepted_length"].tolist() == [2, 1, 0, 1]
    assert rounds["num_committed"].tolist() == [3, 2, 1, 2]
    assert rounds["bonus_token"].tolist() == [5, 22, 30, 12]
    assert rounds["bonus_kind"].tolist() == ["leaf_bonus", "leaf_bonus", "correction", "correction"]
    assert rounds["root_child_rank"].tolist() == [0, 1, pd.NA, 0]
    assert rounds["root_target_rank"].tolist() == [0, 1, 2, 0]
    assert rounds["root_target_in"].tolist() == ["kept", "kept", "beyond", "kept"]
    assert rounds["accepted_names"].tolist() == ["A1>B11", "A2", "", "A1"]
    assert rounds["config"].iloc[0] == "[2]|[1]" and rounds["num_nodes"].iloc[0] == 3


def test_node_table_hand(hand):
    _, nodes = hand
    r4 = nodes[nodes["round"] == "3_19"].set_index("name")
    assert (
        r4.loc["A1", "target_token"] == 12
        and r4.loc["A1", "target_rank"] == 1
        and r4.loc["A1", "target_in"] == "beyond"
    )
    assert r4.loc["R", "target_in"] == "kept" and r4.loc["A2", "target_in"] == "unexpanded"
    assert r4.loc["A2", "level_rank"] == 1 and r4.loc["A1", "expanded_slot"] == 0
    assert r4["on_path"].tolist() == [True, True, False, False]
    assert r4.loc["B11", "parent"] == 1 and r4.loc["B11", "depth"] == 2 and r4.loc["B11", "token"] == 11
    assert nodes["path_logprob"].iloc[1:4].isna().all()  # no scores in the dump


def test_summary_hand(hand):
    s = summary(hand[0]).iloc[0]
    assert s["rounds"] == 4
    assert s["mean_accepted_length"] == pytest.approx(1.0)  # (2+1+0+1)/4
    assert (
        "block_efficiency" not in s and "engine_block_efficiency" not in s
    )  # one name per number: mean_acceptance_length
    assert s["bonus_known_fraction"] == pytest.approx(1.0)
    assert s["full_depth_fraction"] == pytest.approx(0.25)  # only r1 reached level 2
    # engine names: vLLM's mean acceptance length counts the target's token, (3+2+1+2)/4;
    # draft acceptance rate = accepted / drafted tokens = (2+1+0+1) / (4 rounds x 3 nodes)
    assert s["mean_acceptance_length"] == pytest.approx(2.0)
    assert s["draft_acceptance_rate"] == pytest.approx(4 / 12)


def test_draft_acceptance_rate_is_a_ratio_of_sums():
    # r1 (3 nodes, L = 2) and an early-stopped round with step 0 only (A1, A2: 2 nodes), where the
    # target picks A2 = 20, a leaf there: L = 1. Accepted over drafted = (2 + 1) / (3 + 2) = 3/5,
    # not the mean of the per-round ratios (2/3 + 1/2) / 2.
    full = replay_round(Round.from_lists(STEPS, VALIDATE["r1"], key=(0, 16), root_token=7, layout="all"), CFG)
    early = replay_round(Round.from_lists(STEPS[:1], [[20], [11], [22]], key=(1, 17), root_token=7, layout="all"), CFG)
    assert early.tree.num_nodes == 2 and early.acceptance.accepted_length == 1
    s = summary(round_table([full, early], "mixed", CFG)).iloc[0]
    assert s["draft_acceptance_rate"] == pytest.approx(3 / 5)
    assert s["mean_acceptance_length"] == pytest.approx((3 + 2) / 2)
    assert s["mean_num_nodes"] == pytest.approx(2.5)


def test_accepted_length_distribution_hand(hand):
    d = accepted_length_distribution(hand[0])
    assert d["rounds"].tolist() == [1, 2, 1]
    assert d["fraction"].tolist() == pytest.approx([0.25, 0.5, 0.25])


def test_conditional_and_per_position_differ_hand(hand):
    d = depth_acceptance(hand[0]).set_index("depth")
    # depth 1: 3 of 4 rounds accepted a level-1 node
    assert d.loc[1, "per_position_acceptance_rate"] == pytest.approx(3 / 4) and d.loc[
        1, "conditional"
    ] == pytest.approx(3 / 4)
    # depth 2: 1 of 4 rounds overall, 1 of the 3 that reached depth 1,
    # 1 of the 2 whose depth-1 node had children (r2 ended on the leaf A2)
    assert d.loc[2, "per_position_acceptance_rate"] == pytest.approx(1 / 4)
    assert d.loc[2, "conditional"] == pytest.approx(1 / 3)
    assert d.loc[2, "attempts"] == 2 and d.loc[2, "conditional_when_expanded"] == pytest.approx(1 / 2)
    prod = d["conditional"].cumprod()
    assert prod.tolist() == pytest.approx(d["per_position_acceptance_rate"].tolist())


# Wilson 95% bounds worked by hand: z = 1.959964, z² = 3.841459;
#   k = 2, n = 3: den = 1 + z²/3 = 2.280486, centre = (2/3 + z²/6) / den = 0.573084,
#                 half = z · sqrt((2/9)/3 + z²/36) / den = 0.365424  ->  [0.207660, 0.938508]
#   k = 5, n = 10: centre 0.5, half = z · sqrt(0.025 + z²/400) / 1.384146 = 0.263407 -> [0.236593, 0.763407]
#   k = 0, n = 10: centre = (z²/20) / 1.384146 = 0.138766 = half -> [0, 0.277533]
#   k = 1, n = 1: centre = (1 + z²/2) / (1 + z²) = 0.603275, half = z · sqrt(z²/4) / (1 + z²) = 0.396725 -> [0.206549, 1]
WILSON_BY_HAND = [
    (2, 3, 0.207660, 0.938508),
    (5, 10, 0.236593, 0.763407),
    (0, 10, 0.0, 0.277533),
    (1, 1, 0.206549, 1.0),
]


def test_wilson_interval_against_hand_computed_values():
    from analysis.tables.intervals import wilson

    k, n, lo, hi = (np.array(c, dtype=float) for c in zip(*WILSON_BY_HAND))
    got_lo, got_hi = wilson(k, n)
    assert got_lo == pytest.approx(lo, abs=1e-6) and got_hi == pytest.approx(hi, abs=1e-6)
    assert [float(v) for v in wilson(0, 0)] == [0.0, 1.0]  # no trial: nothing known


def test_wilson_interval_holds_the_rate_exactly_at_zero_and_all():
    # 0 of 3: mid - half cancels to 5.6e-17, not 0; the report's error bar (rate - lo) would then be
    # negative, which matplotlib refuses (report and plot would stop on a small dump)
    from analysis.tables.intervals import wilson

    n = np.repeat(np.arange(1, 301), np.arange(2, 302))
    k = np.concatenate([np.arange(m + 1) for m in range(1, 301)])
    lo, hi = wilson(k, n)
    rate = k / n
    assert (lo <= rate).all() and (rate <= hi).all()
    assert (lo[k == 0] == 0.0).all() and (hi[k == n] == 1.0).all()


def test_depth_acceptance_carries_wilson_intervals_over_its_denominators(hand):
    from analysis.tables.intervals import wilson

    d = depth_acceptance(hand[0]).set_index("depth")
    # depth 2: conditional 1/3 (reached_prev 3), per-position 1/4 (rounds 4), when expanded 1/2 (attempts 2)
    for rate, n in (("conditional", 3), ("per_position_acceptance_rate", 4), ("conditional_when_expanded", 2)):
        lo, hi = wilson(1, n)
        assert d.loc[2, f"{rate}_ci95_lo"] == pytest.approx(float(lo)) and d.loc[2, f"{rate}_ci95_hi"] == pytest.approx(
            float(hi)
        )
        assert d.loc[2, f"{rate}_ci95_lo"] < d.loc[2, rate] < d.loc[2, f"{rate}_ci95_hi"]


def test_rank_of_hit_hand(hand_metrics):
    r = hand_metrics["rank_of_hit"]
    d1 = r[r["depth"] == 1]
    assert list(zip(d1["target_in"], d1["target_rank"], d1["count"])) == [
        ("kept", 0, 2),
        ("kept", 1, 1),
        ("beyond", 2, 1),
    ]
    d2 = r[r["depth"] == 2]
    assert list(zip(d2["target_in"], d2["target_rank"], d2["count"])) == [("kept", 0, 1), ("beyond", 1, 1)]
    assert d2["fraction"].tolist() == pytest.approx([0.5, 0.5])
    h = hand_metrics["hit_outcome"].set_index("depth")
    assert h.loc[1, ["attempts", "kept", "beyond", "nowhere"]].tolist() == [4, 3, 1, 0]
    assert h.loc[2, ["attempts", "kept", "beyond", "nowhere"]].tolist() == [2, 1, 1, 0]
    assert h.loc[2, "beyond_fraction"] == pytest.approx(0.5)


def test_parent_slot_hand(hand_metrics):
    p = hand_metrics["parent_slot"]
    assert p["depth"].tolist() == [1, 1]
    assert p["expanded"].tolist() == [True, False]
    assert p["level_rank"].tolist() == [0, 1]  # r2's A2 was second in its level: topHead 2 expands it
    assert p["rounds"].tolist() == [2, 1] and p["fraction"].tolist() == pytest.approx([2 / 3, 1 / 3])


def test_slot_and_node_hit_frequency_hand(hand_metrics):
    # rank-major fallback, topHead [1, 1]: slot B:p1c1 is A1's child in every round, so slots and nodes agree here
    f = hand_metrics["slot_hits"].set_index("slot_name")
    assert f["frequency"].to_dict() == pytest.approx({"R": 1.0, "A:p1c1": 0.5, "A:p1c2": 0.25, "B:p1c1": 0.25})
    assert (f["rounds_present"] == 4).all()
    assert f["parent_slot"].tolist() == [-1, 0, 0, 0] and f["rank"].tolist() == [-1, 0, 1, 0]
    n = hand_metrics["node_hits"].set_index("name")
    assert n["frequency"].to_dict() == pytest.approx({"R": 1.0, "A1": 0.5, "A2": 0.25, "B11": 0.25})
    assert n["parent_name"].tolist() == ["", "R", "R", "A1"] and (n["rounds_present"] == 4).all()


def test_article_metrics(article_tables):
    m = all_metrics(article_tables)
    s = m["summary"].iloc[0]
    assert (
        s["mean_accepted_length"] == 3 and s["mean_acceptance_length"] == 4
    )  # derived: the leaf bonus is not in the dump
    assert s["bonus_known_fraction"] == 0  # parents layout: no row for the leaf C111
    d = m["depth_acceptance"]
    assert d["conditional"].tolist() == [1, 1, 1] and d["per_position_acceptance_rate"].tolist() == [1, 1, 1]
    r = m["rank_of_hit"]
    assert r["target_rank"].tolist() == [0, 0, 0] and r["target_in"].tolist() == ["kept"] * 3
    hits = m["node_hits"].set_index("name")["frequency"]
    assert m["slot_hits"].set_index("slot_name")["frequency"][["R", "A:p1c1", "B:p1c1", "C:p1c1"]].tolist() == [
        1,
        1,
        1,
        1,
    ]
    assert hits[["R", "A1", "B11", "C111"]].tolist() == [1, 1, 1, 1]
    assert hits.drop(["R", "A1", "B11", "C111"]).sum() == 0  # A2 → B21 → C211 matched too, but off-path
    p = m["parent_slot"]
    assert p["expanded_slot"].tolist() == [0, 0]  # A1 and B11 were the first expanded at their steps
    nodes = article_tables.nodes.set_index("name")
    assert nodes.loc["A2", "target_token"] == 45315 and nodes.loc["B21", "target_in"] == "kept"


def test_two_runs_side_by_side(hand, article_tables):
    rounds = pd.concat([hand[0], article_tables.rounds], ignore_index=True)
    side = runs_side_by_side(rounds)
    assert list(side.columns) == ["hand", "article_round"]
    assert side.loc["mean_accepted_length"].tolist() == pytest.approx([1.0, 3.0])
    assert side.loc["per_position_acceptance_rate_depth_2"].tolist() == pytest.approx([0.25, 1.0])
    assert side.loc["conditional_acceptance_depth_2"].tolist() == pytest.approx([1 / 3, 1.0])
    assert math.isnan(side.loc["conditional_acceptance_depth_3", "hand"])  # hand trees have 2 levels


def test_static_shape_names():
    shape = static_shape(TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2]))
    assert shape.names() == ["R", "A1", "A2", "A3", "A4", "A5", "A6", "B11", "B12", "B21", "B22", "C111", "C211"]
    assert shape.parents.tolist() == [-1, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 7, 9]


@pytest.mark.parametrize(
    "spec, heads", [([[6], [2, 2], [1, 1]], [1, 2, 2]), ([[4], [3, 1, 2], [2, 1]], [1, 3, 2]), ([[3], [1]], [1, 1])]
)
def test_slots_counted_are_the_slots_drawn(spec, heads):
    # The slot counts read the shape's maps; the drawing reads static_shape's Tree: node u is the
    # same slot (expanded parent's position in its step, rank) in both.
    cfg = TreeConfig.from_lists(spec, heads)
    drawn = static_shape(cfg)
    slot = np.full(drawn.num_nodes + 1, -1)
    for step in drawn.expanded:
        slot[step] = np.arange(step.shape[0])
    want = [(int(slot[drawn.parents[u]]), int(drawn.ranks[u])) for u in range(1, drawn.num_nodes + 1)]
    assert shape_signature(config_tree_shape(cfg, cfg.gamma)) == want


def test_export_csv_parquet_roundtrip(hand, tmp_path):
    rounds, nodes = hand
    paths = export_tables({"rounds": rounds, "nodes": nodes}, tmp_path)
    assert sorted(p.name for p in paths) == ["nodes.csv", "nodes.parquet", "rounds.csv", "rounds.parquet"]
    back = pd.read_parquet(tmp_path / "nodes.parquet")
    assert (
        str(back["target_rank"].dtype) == "Int64"
        and back["target_rank"].isna().sum() == nodes["target_rank"].isna().sum()
    )
    csv = pd.read_csv(tmp_path / "rounds.csv")
    assert csv["accepted_length"].tolist() == [2, 1, 0, 1]


def test_path_probability_level_rank():
    # With scores, level order is by path probability: A2 (0.5 * 0.9) outranks A1's child order.
    lp = [[[math.log(0.5), math.log(0.4), math.log(0.1)]], [[math.log(0.9), math.log(0.05)]]]
    rnd = Round.from_lists(STEPS, VALIDATE["r2"], step_logp=lp, layout="all")
    res = replay_round(rnd, CFG)
    nodes = node_table([res], "scored").set_index("name")
    assert nodes.loc["A1", "level_rank"] == 0 and nodes.loc["A2", "level_rank"] == 1
    assert nodes.loc["B11", "path_logprob"] == pytest.approx(math.log(0.45))
