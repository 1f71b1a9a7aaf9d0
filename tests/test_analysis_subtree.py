"""Exact offline replay of other tree configs (analysis.compare.subtree).

Hand cases first (outcomes worked out on paper from the article's round and tiny rounds), then
the independent check: a dump recorded with a smaller config must replay exactly as the offline
replay of that config on the big dump says, wherever the offline replay claims to decide, and
inside its bounds where it does not.
"""

from __future__ import annotations

import math

import pytest

from analysis.compare.subtree import (
    RULE_FALLBACK,
    RULE_PATH,
    RULE_RECORDED_ORDER,
    UNDECIDABLE,
    contained_configs,
    is_contained,
    truncated,
)
from replay.core.config import TreeConfig
from replay.core.vocab import BONUS_LEAF, STOP_LEAF, STOP_MISMATCH
from replay.io.rounds import Round
from replay.testing import subtree_walk
from replay.testing.replayer import replay_directory, replay_round
from replay.testing.subtree_walk import replay_subconfig
from replay.testing.synth import write_synthetic_run
from tests.analysis_oracle import (
    as_round,
    narrow_rows,
    random_oracle,
    record_round,
    synth_lookup_oracle,
    write_oracle_run,
)

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
ARTICLE_DIR = "sample_dumps/article_round"


def cfg(spec, heads=None):
    return TreeConfig.from_lists(spec, heads)


@pytest.fixture(scope="module")
def article():
    rep = replay_directory(ARTICLE_DIR)
    assert len(rep.results) == 1
    return rep.results[0]


# --- hand cases on the article's round (parents layout, no scores: rank-major fallback) ---------


def test_article_own_config_matches_replay(article):
    o = replay_subconfig(article, ARTICLE, recorded_gamma=3)
    assert o.rule == RULE_FALLBACK
    assert o.decided and o.lower == o.upper == 3
    assert o.accepted_tokens == (41824, 41760, 22870)
    assert o.bonus_token is None and o.stop == STOP_LEAF  # parents layout: no row for C111
    assert o.committed == 3 and o.nodes_lo == 12 and o.steps_lo == 3


def test_article_single_head_chain(article):
    # [6]|[2]|[1]: step 1 expands A1 (rank-major), keeps B11, B12; step 2 expands B11 → C111.
    o = replay_subconfig(article, cfg([[6], [2], [1]]), recorded_gamma=3)
    assert o.decided and o.lower == 3 and o.accepted_tokens == (41824, 41760, 22870)
    assert o.nodes_lo == 9


def test_article_two_levels_bonus_depends_on_layout(article):
    # [6]|[2,2]: R → A1 → B11, a leaf now. A parents-layout recording of this config has no row
    # for B11; an all-layout one has it, and the recording knows it (B11 was expanded): 22870.
    sub = cfg([[6], [2, 2]])
    o = replay_subconfig(article, sub, recorded_gamma=3)
    assert o.decided and o.lower == 2 and o.bonus_token is None and o.committed == 2
    o_all = replay_subconfig(article, sub, layout="all", recorded_gamma=3)
    assert o_all.bonus_token == 22870 and o_all.bonus_kind == BONUS_LEAF and o_all.committed == 3


def test_article_root_only(article):
    o = replay_subconfig(article, cfg([[3]]), recorded_gamma=3)
    assert o.decided and o.lower == 1 and o.accepted_tokens == (41824,) and o.nodes_lo == 3


def test_unrecorded_expansion_off_the_path_is_still_decided(article):
    # Three heads at step 1 expand A3, which the recording never expanded, but the path goes
    # R → A1 → B11 → C111 and never needs A3's children.
    sub = cfg([[6], [1, 1, 1], [1]])
    assert not is_contained(sub, ARTICLE)
    o = replay_subconfig(article, sub, recorded_gamma=3)
    assert o.decided and o.lower == 3


def test_deeper_config_is_undecidable_below_the_recording(article):
    # gamma 4: step 3 expands C111 (rank-major, first slot), whose draft row was never recorded.
    o = replay_subconfig(article, cfg([[6], [2, 2], [1, 1], [1]]), recorded_gamma=3)
    assert not o.decided and o.stop == UNDECIDABLE
    assert (o.lower, o.upper) == (3, 4)
    assert o.accepted_tokens == (41824, 41760, 22870)


def test_early_stopped_round_is_inherited():
    # A recorded round with 1 of 2 steps: with recorded_gamma given, a 2-step config stops too.
    rnd = Round.from_lists([[[10, 20, 30]]], [[10], [11], [12]], layout="all")
    res = replay_round(rnd, cfg([[2], [1]]))
    o = replay_subconfig(res, cfg([[2], [1]]), recorded_gamma=2)
    assert o.decided and o.lower == 1 and o.steps_lo == 1 and o.bonus_token == 11
    o2 = replay_subconfig(res, cfg([[2], [1]]))  # unknown history: step 1 is simply not recorded
    assert not o2.decided and (o2.lower, o2.upper) == (1, 2)


# --- hand-built rounds for bounds and the three selection rules --------------------------------


def _two_level_rounds():
    """Config [2]|[1]: R → A1 (10), A2 (20); A1 expanded → B11 (11). All layout: R, A1, A2, B11."""
    steps = [[[10, 20, 30]], [[11, 12]]]
    to_a2 = Round.from_lists(steps, [[20], [11], [21], [5]], key=(1, 2), layout="all")
    to_b11 = Round.from_lists(steps, [[10], [11], [21], [5]], key=(3, 4), layout="all")
    return to_a2, to_b11


def test_bounds_when_path_enters_an_unrecorded_expansion():
    rec_cfg = cfg([[2], [1]])
    to_a2, to_b11 = (replay_round(r, rec_cfg) for r in _two_level_rounds())
    sub = cfg([[2], [1, 1]], [1, 2])  # expands A2 too, which the recording did not
    o = replay_subconfig(to_a2, sub, recorded_gamma=2)
    # The target picks A2 (20): accepted 1 for sure; A2's children are unknown, so 1 or 2.
    assert not o.decided and (o.lower, o.upper) == (1, 2) and o.accepted_tokens == (20,)
    assert "did not expand" in o.reason
    o = replay_subconfig(to_b11, sub, recorded_gamma=2)
    assert o.decided and o.lower == 2 and o.bonus_token == 5


def test_path_probability_rule_with_unknown_competitor():
    # Recorded [2]|[1]|[1] with scores. Sub [2]|[1,1]|[1] also expands A2 (unrecorded), so at
    # step 2 its child B21 competes with B11 with an unknown score, at most P(A2) = 0.3.
    rec_cfg = cfg([[2], [1], [1]])
    sub = cfg([[2], [1, 1], [1]], [1, 2, 1])
    val = [[10], [11], [21], [12], [7]]  # R → A1 → B11 → C111, then 7
    rows = [[[10, 20, 30]], [[11, 19]], [[12, 18]]]

    def make(p_b11):
        lp = [[[math.log(0.6), math.log(0.3), math.log(0.1)]], [[math.log(p_b11), math.log(0.05)]], [[0.0, -5.0]]]
        return replay_round(Round.from_lists(rows, val, step_logp=lp, layout="all"), rec_cfg)

    weak = make(0.4)  # P(B11) = 0.24 < 0.3: B21 may outrank it
    o = replay_subconfig(weak, sub, recorded_gamma=3)
    assert o.rule == RULE_PATH
    assert not o.decided and (o.lower, o.upper) == (2, 3) and "unrecorded scores" in o.reason
    strong = make(0.9)  # P(B11) = 0.54 > 0.3 >= P(B21): B11 is surely expanded
    o = replay_subconfig(strong, sub, recorded_gamma=3)
    assert o.decided and o.lower == 3 and o.bonus_token == 7


def test_recorded_order_rule_without_scores():
    # Parents given, no scores: the recording tells only that A2 outranked A1 (selection order).
    rec_cfg = cfg([[2], [1]])
    rnd = Round.from_lists([[[10, 20]], [[21, 22]]], [[20], [11], [21], [5]], step_parents=[[0], [2]], layout="all")
    res = replay_round(rnd, rec_cfg)
    o = replay_subconfig(res, cfg([[2], [2]]), recorded_gamma=2)
    assert o.rule == RULE_RECORDED_ORDER
    assert o.decided and o.lower == 2 and o.accepted_tokens == (20, 21)
    # One more head would expand A1 as well; the path does not go there.
    o = replay_subconfig(res, cfg([[2], [1, 1]], [1, 2]), recorded_gamma=2)
    assert o.decided and o.lower == 2


def test_mismatch_gives_the_correction():
    rec_cfg = cfg([[2], [1]])
    rnd = Round.from_lists([[[10, 20, 30]], [[11, 12]]], [[30], [11], [21], [5]], layout="all")
    o = replay_subconfig(replay_round(rnd, rec_cfg), cfg([[2]]), recorded_gamma=2)
    assert o.decided and o.lower == 0 and o.bonus_token == 30 and o.stop == STOP_MISMATCH
    # Widening the root to 3 (inside the recorded columns) reaches the near miss 30: accepted 1.
    o = replay_subconfig(replay_round(rnd, rec_cfg), cfg([[3]]), recorded_gamma=2)
    assert o.decided and o.lower == 1 and o.accepted_tokens == (30,)
    assert o.bonus_token is None and o.bonus_exists  # a recording would hold it; this one does not


def test_contained_configs_enumeration():
    subs = contained_configs(ARTICLE)
    shorts = {c.short() for c in subs}
    assert ARTICLE.short() in shorts and "[1]" in shorts and "[1]|[1]|[1]" in shorts
    assert all(is_contained(c, ARTICLE) for c in subs)
    # gamma 1: 6 root widths; every config keeps non-increasing widths across slots
    assert sum(c.gamma == 1 for c in subs) == 6
    assert truncated(ARTICLE, 2).short() == "[6]|[2,2]"


# --- the independent check against genuine recordings ------------------------------------------


def _check(big_res, truth_res, sub, recorded_gamma, threshold=None):
    """Compare one round: offline replay of ``sub`` vs the replay of a round recorded with it."""
    o = replay_subconfig(big_res, sub, threshold, None, recorded_gamma)
    t = truth_res.acceptance
    if o.decided:
        assert o.accepted_tokens == t.accepted_tokens, (sub.short(), big_res.key, o)
        assert o.stop == t.stop, (sub.short(), big_res.key, o)
        assert o.bonus_exists == (t.bonus_token is not None), (sub.short(), big_res.key, o)
        if o.bonus_token is not None:
            assert o.bonus_token == t.bonus_token
        assert o.steps_lo == o.steps_hi == truth_res.tree.num_steps
    else:
        assert o.lower <= t.accepted_length <= o.upper, (sub.short(), big_res.key, o, t)
        assert t.accepted_tokens[: o.lower] == o.accepted_tokens
        assert o.steps_lo <= truth_res.tree.num_steps <= o.steps_hi
    return o.decided


NARROWER = [
    cfg([[4], [2, 2], [1, 1]], [1, 2, 2]),
    cfg([[6], [2], [1]]),
    cfg([[6], [2, 2]]),
    cfg([[3], [1, 1], [1]], [1, 2, 1]),
    cfg([[1], [1], [1]]),
]


@pytest.mark.slow
def test_synth_dump_subconfigs_equal_recordings_on_disk(tmp_path):
    """replay.testing.synth records the article's config; each narrower config is recorded again from the
    same per-path data (rows the big dump lacks come from a fill oracle) and written to disk."""
    rounds = write_synthetic_run(tmp_path / "big", ARTICLE, 40, seed=1234, early_stop_rate=0.1)
    big = replay_directory(tmp_path / "big")
    assert len(big.results) == 40 and not big.skipped
    draft, target = synth_lookup_oracle(rounds, ARTICLE, random_oracle(99, cols=8, tcols=4))
    decided = 0
    for k, sub in enumerate(NARROWER):
        steps = [min(sub.gamma, len(r.steps)) if len(r.steps) < ARTICLE.gamma else sub.gamma for r in rounds]
        write_oracle_run(tmp_path / f"small{k}", sub, [r.root_token for r in rounds], steps, draft, target)
        small = replay_directory(tmp_path / f"small{k}")
        assert not small.skipped
        by_key = {r.key: r for r in small.results}
        for res in big.results:
            decided += _check(res, by_key[res.key], sub, ARTICLE.gamma)
    assert decided >= 0.9 * 40 * len(NARROWER)


@pytest.mark.parametrize("fill_seed", [5, 6])
def test_synth_subconfig_decisions_do_not_depend_on_unrecorded_rows(fill_seed):
    """Every contained config plus wider/deeper ones; two different fills of the rows the big dump
    lacks must both agree with every decided outcome (and lie within every bound)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rounds = write_synthetic_run(tmp, ARTICLE, 16, seed=77 + fill_seed)
        big = replay_directory(tmp)
    draft, target = synth_lookup_oracle(rounds, ARTICLE, random_oracle(fill_seed, cols=8, tcols=4))
    subs = contained_configs(ARTICLE) + [
        cfg([[6], [1, 1, 1], [1]]),
        cfg([[8], [2, 2], [1, 1]], [1, 2, 2]),
        cfg([[6], [2, 2], [1, 1], [1]], [1, 2, 2, 1]),
        cfg([[6], [3, 1], [1, 1]], [1, 2, 2]),
    ]
    undecided = 0
    for sub in subs:
        for res, rnd in zip(big.results, rounds):
            rec = record_round(sub, rnd.root_token, sub.gamma, draft, target, "path")
            truth = replay_round(as_round(rec, res.key, rnd.root_token), sub)
            undecided += not _check(res, truth, sub, ARTICLE.gamma)
    assert undecided > 0  # the wider/deeper configs exercise the bounds


@pytest.mark.parametrize(
    "rule,layout,scores,parents",
    [
        ("path", "parents", True, False),
        ("fallback", "all", False, False),
        ("fallback", "parents", False, False),
        ("path", "all", False, True),  # engine ranks by path probability, dump keeps only parents
    ],
)
def test_oracle_recordings_all_rules_and_layouts(rule, layout, scores, parents):
    draft, target = random_oracle(31, cols=7)
    big_cfg = ARTICLE
    roots = list(range(1, 26))
    bigs = [record_round(big_cfg, r, 3, draft, target, rule) for r in roots]
    big_res = [replay_round(as_round(b, (r, r), r, layout, scores, parents), big_cfg) for b, r in zip(bigs, roots)]
    expect_rule = {("path", True): RULE_PATH, ("fallback", False): RULE_FALLBACK, ("path", False): RULE_RECORDED_ORDER}
    assert replay_subconfig(big_res[0], big_cfg).rule == expect_rule[(rule, scores)]
    subs = contained_configs(big_cfg)[::3] + [cfg([[6], [1, 1, 1], [1]]), cfg([[7], [2, 2], [1, 1]], [1, 2, 2])]
    decided = total = 0
    for sub in subs:
        for res, r in zip(big_res, roots):
            rec = record_round(sub, r, sub.gamma, draft, target, rule)
            truth = replay_round(as_round(rec, (r, r), r, layout, scores, parents), sub)
            decided += _check(res, truth, sub, 3)
            total += 1
    assert decided >= 0.5 * total


@pytest.mark.parametrize("threshold", [0.25, 0.45])
def test_gamma_threshold_matches_a_recording_with_the_threshold(threshold):
    draft, target = random_oracle(8, cols=6)
    roots = list(range(200, 240))
    for sub in (ARTICLE, cfg([[4], [2], [1]])):
        stopped = 0
        for r in roots:
            big = replay_round(as_round(record_round(ARTICLE, r, 3, draft, target, "path"), (r, r), r), ARTICLE)
            rec = record_round(sub, r, sub.gamma, draft, target, "path", threshold=threshold)
            truth = replay_round(as_round(rec, (r, r), r), sub)
            stopped += truth.tree.num_steps < sub.gamma
            _check(big, truth, sub, 3, threshold)
        assert stopped > 0  # the threshold did stop some rounds early


@pytest.mark.parametrize(
    "big_cfg,rule",
    [
        (cfg([[4], [1], [1]]), "path"),
        (cfg([[3], [2], [1, 1]], [1, 1, 2]), "path"),
        (cfg([[4], [1], [1]]), "fallback"),
    ],
)
def test_unrecorded_competitors_never_decide_wrongly(big_cfg, rule):
    """Narrow recordings, bushy configs and flat draft rows: many expansions the recording lacks,
    whose unknown children compete for the next step's heads. Decided outcomes must still be
    exact, and undecidable ones bounded."""
    draft, target = random_oracle(17, cols=5, hit=0.8, flat=3.0)
    subs = [
        cfg([[4], [1, 1, 1], [1]], [1, 3, 1]),
        cfg([[4], [1, 1], [1, 1]], [1, 2, 2]),
        cfg([[3], [2, 1], [1]], [1, 2, 1]),
        cfg([[4], [1, 1, 1, 1], [2, 1]], [1, 4, 2]),
        cfg([[2], [1, 1], [1]], [1, 2, 1]),
    ]
    scores = rule == "path"
    roots = list(range(300, 360))
    bigs = [
        replay_round(as_round(record_round(big_cfg, r, 3, draft, target, rule), (r, r), r, scores=scores), big_cfg)
        for r in roots
    ]
    decided = total = 0
    for sub in subs:
        for res, r in zip(bigs, roots):
            rec = record_round(sub, r, sub.gamma, draft, target, rule)
            truth = replay_round(as_round(rec, (r, r), r, scores=scores), sub)
            decided += _check(res, truth, sub, 3)
            total += 1
    assert 0 < decided < total


def test_uncertain_slot_widths_four_levels():
    """Four levels, per-slot widths that differ, unknown competitors: a node whose selection slot
    is uncertain may keep 2 or 1 children; deciding as if the slot were known is wrong here."""
    draft, target = random_oracle(2, cols=5, hit=0.9, flat=6.0)
    subs = [cfg([[3], [1, 1, 1], [2, 1, 1], [1, 1]], [1, 3, 3, 2]), cfg([[3], [2, 1], [2, 1], [1, 1]], [1, 2, 2, 2])]
    undecided = 0
    for big_cfg in (cfg([[3], [1], [1], [1]]), cfg([[4], [1], [1], [1]])):
        for r in range(1, 13):
            big = replay_round(as_round(record_round(big_cfg, r, 4, draft, target, "path"), (r, r), r), big_cfg)
            for sub in subs:
                truth = replay_round(as_round(record_round(sub, r, sub.gamma, draft, target, "path"), (r, r), r), sub)
                undecided += not _check(big, truth, sub, 4)
    assert undecided > 0


@pytest.mark.parametrize(
    "big_cfg,subs",
    [
        (cfg([[3], [2, 2]]), [cfg([[4], [2, 2]]), cfg([[6], [2, 2]]), cfg([[3], [3, 2]]), cfg([[5], [3, 3]])]),
        (
            cfg([[3], [2, 1], [1, 1]], [1, 2, 2]),
            [
                cfg([[4], [2, 1], [1, 1]], [1, 2, 2]),
                cfg([[3], [4, 1], [1, 1]], [1, 2, 2]),
                cfg([[3], [3, 2], [1, 1, 1]], [1, 2, 3]),
                cfg([[3], [2, 1], [2, 2]], [1, 2, 2]),
            ],
        ),
    ],
)
def test_narrow_rows_bound_the_candidates_they_do_not_name(big_cfg, subs, monkeypatch):
    """Recordings whose rows hold only the kept widths; configs wider at the root or below have
    candidates no row names, each no more probable than its row's smallest named one. Every decided
    outcome equals the round recorded with the wider config, and the bound decides rounds that the
    parent's probability alone (the bound of a child of an unexpanded node) leaves undecidable."""
    draft, target = random_oracle(41, cols=6, hit=0.5)
    roots = list(range(400, 460))
    bigs = [
        replay_round(
            as_round(narrow_rows(record_round(big_cfg, r, big_cfg.gamma, draft, target, "path"), big_cfg), (r, r), r),
            big_cfg,
        )
        for r in roots
    ]

    def decided() -> int:
        count = 0
        for sub in subs:
            for res, r in zip(bigs, roots):
                truth = replay_round(as_round(record_round(sub, r, sub.gamma, draft, target, "path"), (r, r), r), sub)
                count += _check(res, truth, sub, big_cfg.gamma)
        return count

    with_bound = decided()
    monkeypatch.setattr(subtree_walk, "unnamed_key_bound", lambda parent_hi, smallest: parent_hi)
    assert decided() < with_bound < len(subs) * len(roots)  # some stay undecidable, and are bounded
