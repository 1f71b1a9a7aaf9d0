"""The vectorised sub-shape replay (analysis.compare.subtree_batch) decides exactly as the reference
(replay.testing.subtree_walk.replay_subconfig) on random dumps: same decided flag and bounds, every round,
every contained config tried. The dumps come from the batch property test's strategy (ties,
-inf scores, no scores, explicit parents, dynamic trees, early stops, defects)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis.compare import subtree_batch, subtree_select
from analysis.compare.subtree import contained_configs
from analysis.compare.subtree_batch import SubOutcomes, replay_contained_many
from replay.core.config import TreeConfig
from replay.engine.batch import ERR_OK, BatchResult, RoundBatch, TreeShape, expanded_nodes, replay_batch
from replay.engine.runs import open_run
from replay.io.rounds import Round
from replay.testing.in_memory import batch_from_rounds, round_at
from replay.testing.replayer import replay_round
from replay.testing.selection_ref import selection_order_ref
from replay.testing.subtree_walk import replay_subconfig
from tests.analysis_oracle import as_round, narrow_rows, random_oracle, record_round
from tests.test_batch_property import runs


def replay_contained(
    batch: RoundBatch,
    res: BatchResult,
    expanded: list[np.ndarray],
    shape: TreeShape,
    sub: TreeConfig,
    recorded_gamma: int,
    gamma_threshold: float = 0.0,
) -> SubOutcomes:
    """``sub`` replayed on every round of ``batch`` (all of recorded ``shape``; ``expanded``: per step
    [h_i, R] the recorded selection, replay.engine.batch.expanded_nodes). Rounds with ``res.error != 0``
    get meaningless values."""
    return replay_contained_many(batch, res, expanded, shape, [sub], recorded_gamma, gamma_threshold)[0]


def replayed_shapes(cfg: TreeConfig, batches):
    """(rounds, their greedy results, expanded nodes, tree shape) per batch and shape of replayed rounds."""
    for batch in batches:
        res = replay_batch(batch, cfg, workers=1)
        for k, shape in enumerate(res.shapes):
            members = np.flatnonzero((res.shape_index == k) & (res.error == ERR_OK))
            if members.shape[0]:
                r = res.take(members)
                yield batch.take(members), r, expanded_nodes(r, shape), shape


def check_contained(cfg: TreeConfig, batches, subs) -> int:
    """Compare on every replayed round; returns how many (round, config) pairs were compared."""
    compared = 0
    for b, r, exp, shape in replayed_shapes(cfg, batches):
        for sub in subs:
            got = replay_contained(b, r, exp, shape, sub, cfg.gamma)
            for i in range(len(b)):
                ref = replay_subconfig(replay_round(round_at(b, i), cfg), sub, 0.0, None, cfg.gamma)
                assert (bool(got.decided[i]), int(got.lower[i]), int(got.upper[i])) == (
                    ref.decided,
                    ref.lower,
                    ref.upper,
                ), (sub.short(), sub.top_head, i, ref.reason)
                compared += 1
    return compared


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.randoms(use_true_random=False))
def test_contained_replay_matches_reference(case, rnd):
    cfg, rounds = case
    subs = contained_configs(cfg, limit=400)
    picked = [cfg] + rnd.sample(subs, min(6, len(subs)))
    check_contained(cfg, batch_from_rounds(rounds), picked)


@pytest.mark.slow
def test_synthetic_article_every_contained_config():
    """Every contained config of the article tree on the 300 synthetic rounds (scores, path
    probability): undecidable rounds (a selection leaving the recording) included."""
    run = open_run("sample_dumps/synthetic_article")
    batches = [b for load in run.chunks(1) for b in load()[0]]
    subs = contained_configs(run.tree)
    assert check_contained(run.tree, batches, subs) == 300 * len(subs)


def test_accepted_node_of_unknown_slot_whose_narrower_width_drops_the_match_is_undecidable():
    """A node whose sub-config slot is 0 or 1 (no scores: the unrecorded sibling's key is unknown), its
    topKSpec row giving those slots widths 1 and 2, and the target matching exactly its rank-1 child
    (kept only at the wider slot): the walk is undecidable there (WHY_WIDTH), as the reference says.
    The random dumps never built it (the rank == w_lo boundary of subtree_batch's WHY_WIDTH check)."""
    cfg = TreeConfig.from_lists([(1,), (2,), (2, 2)], [1, 1, 2])
    # the root's child (5) keeps children 6, 7 (recorded order: 6 first); the sub-config keeps a third
    # child, not recorded, of unknown key, so 6 takes slot 0 or 1 among its 2 heads: width 1 or 2
    sub = TreeConfig.from_lists([(1,), (3,), (1, 2)], [1, 1, 2])
    rnd = Round.from_lists(
        [[[5]], [[6, 7, 8]], [[1, 2], [3, 4]]],
        [[5], [6], [2], [0], [0], [0], [0], [0]],  # the target takes 5, 6, then 6's rank-1 child 2
        key=(100, 116),
        step_parents=[[0], [1], [2, 3]],
        layout="all",
    )
    batches = batch_from_rounds([rnd])
    assert check_contained(cfg, batches, [sub]) == 1
    ((b, r, exp, shape),) = list(replayed_shapes(cfg, batches))
    got = replay_contained(b, r, exp, shape, sub, cfg.gamma)
    assert (bool(got.decided[0]), int(got.lower[0]), int(got.upper[0])) == (False, 2, 3)
    assert int(got.why[0]) == subtree_batch.WHY_WIDTH


# Levels are built only on the rounds still walking (subtree_batch._OnTheWalk); a level drops the columns
# of stopped rounds when they are more than COMPACT_SHARE of it. Never, the default, and always: the
# same outcomes, every field, configs replayed together (sharing the levels of a prefix) or one by one.
SHARES = (0.0, subtree_batch.COMPACT_SHARE, 1.01)


def check_many(cfg: TreeConfig, batches, subs, threshold: float = 0.0) -> np.ndarray:
    """replay_contained_many of ``subs`` at once under each share equals each config alone and the
    reference; returns every compared round's lower bound (depth where the walk stopped)."""
    lowers = []
    for b, r, exp, shape in replayed_shapes(cfg, batches):
        alone = [replay_contained(b, r, exp, shape, sub, cfg.gamma, threshold) for sub in subs]
        for share in SHARES:
            before, subtree_batch.COMPACT_SHARE = subtree_batch.COMPACT_SHARE, share
            try:
                together = replay_contained_many(b, r, exp, shape, subs, cfg.gamma, threshold)
            finally:
                subtree_batch.COMPACT_SHARE = before
            for sub, one, many in zip(subs, alone, together):
                for name in one.__dataclass_fields__:
                    assert np.array_equal(getattr(one, name), getattr(many, name)), (sub.short(), share, name)
        for sub, got in zip(subs, alone):
            for i in range(len(b)):
                ref = replay_subconfig(replay_round(round_at(b, i), cfg), sub, threshold, None, cfg.gamma)
                assert (bool(got.decided[i]), int(got.lower[i]), int(got.upper[i])) == (
                    ref.decided,
                    ref.lower,
                    ref.upper,
                ), (sub.short(), sub.top_head, i, ref.reason)
            lowers.append(got.lower)
    return np.concatenate(lowers) if lowers else np.zeros(0, dtype=np.int64)


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.randoms(use_true_random=False))
def test_configs_together_match_alone_and_reference(case, rnd):
    """Random dumps (few token values: walks stop at every depth; early-stopped rounds: shapes of
    fewer steps), configs of shared prefixes replayed together."""
    cfg, rounds = case
    subs = contained_configs(cfg, limit=400)
    check_many(cfg, batch_from_rounds(rounds), [cfg] + rnd.sample(subs, min(8, len(subs))))


@pytest.mark.slow
def test_synthetic_article_configs_together_most_rounds_stop_early():
    """Every contained config of the article tree at once on the 300 synthetic rounds: most walks
    stop by depth 1, so the deeper levels are built on a few rounds (and on none for some chunks)."""
    run = open_run("sample_dumps/synthetic_article")
    batches = [b for load in run.chunks(1) for b in load()[0]]
    subs = contained_configs(run.tree)
    lowers = check_many(run.tree, batches, subs)
    assert lowers.shape[0] == 300 * len(subs)
    assert (lowers <= 1).mean() > 0.5


def _level_of(valid, key, oslot, rank):
    """A level whose keys are all known and ordered (select_level's successive-maxima branch)."""
    true = np.ones(valid.shape, dtype=bool)
    none = np.full(valid.shape, -1, dtype=np.int64)
    return subtree_select.Level(valid, key, key, true, true, true, oslot, rank, none, none, none)


def _keys(rng, shape):
    """Few key values, so that keys tie, -inf among them (a valid node's -inf ties an invalid one's)."""
    return np.array([-np.inf, -2.0, -1.0, 0.0])[rng.integers(0, 4, shape)]


def _sorted_column(rng, valid, rank):
    """(key, oslot) of one column whose valid nodes are in selection order: keys non-increasing,
    (oslot, rank) non-decreasing within equal keys, equal ties included."""
    L = valid.shape[0]
    key = _keys(rng, L)
    oslot = rng.integers(0, 4, L)
    rows = np.flatnonzero(valid)
    key[rows] = np.sort(_keys(rng, rows.shape[0]))[::-1]
    for a, b in zip(rows[:-1], rows[1:]):
        if key[b] == key[a]:
            oslot[b] = oslot[a] + (rng.integers(0, 2) if rank[b] >= rank[a] else 1)
    return key, oslot


def slots_in_order(key: np.ndarray, pos: np.ndarray, valid: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """select_level's in-order check on columns of known, ordered keys: ([L, C] each node's slot, -1
    when not chosen; [C] bool the valid nodes already come in selection order, so that slot is right)."""
    true = np.ones(valid.shape, dtype=bool)
    known = tuple(np.ascontiguousarray(a) for a in (valid, true, true, true, np.asarray(key, dtype=np.float64)))
    _, in_order, place = subtree_select._places(known, np.ascontiguousarray(pos, dtype=np.int64))
    return np.where(place < heads, place, -1), in_order


def test_select_in_order_columns_match_successive_maxima():
    """select_level's slots on random levels with tied keys and tied (parent slot, rank): columns whose valid
    nodes come first in selection order (taken without the loop), the same with one pair of equal
    keys out of tie order or with invalid nodes between valid ones, and random columns (the loop) match a successive maxima by hand: the valid nodes sorted by
    (-key, parent slot, rank, row), the first ``heads`` taking slots 0, 1, ..."""
    rng = np.random.default_rng(22)
    kinds = np.zeros(3, dtype=np.int64)
    for _ in range(300):
        L, c, heads = int(rng.integers(1, 13)), 30, int(rng.integers(1, 9))
        valid = rng.random((L, c)) < 0.7
        rank = rng.integers(0, 3, (L, 1))
        key = _keys(rng, (L, c))
        oslot = rng.integers(0, 4, (L, c))
        for j in range(c):
            kind = j % 4  # 0: random; 1: in order; 2: in order, one tie broken; 3: in order, a gap in valid
            if kind in (1, 2):
                valid[:, j] = np.arange(L) < rng.integers(0, L + 1)  # the valid nodes first
            if kind:
                key[:, j], oslot[:, j] = _sorted_column(rng, valid[:, j], rank[:, 0])
            rows = np.flatnonzero(valid[:, j])
            runs_ = [(a, b) for a, b in zip(rows[:-1], rows[1:]) if key[a, j] == key[b, j]]
            if kind == 2 and runs_:
                a, b = runs_[rng.integers(len(runs_))]
                oslot[a, j] = oslot[b, j] + 1  # a's tie now above b's: the order check must fail
        lvl = _level_of(valid, key, oslot, rank)
        tie = oslot * (1 << 20) + rank
        ordered = slots_in_order(np.where(valid, key, -np.inf), tie, valid, heads)[1]
        kinds += [ordered.all() == False, ordered.any(), 1]  # noqa: E712
        subtree_select.select_level(lvl, heads)
        for j in range(c):
            live = np.flatnonzero(valid[:, j])
            ties = [(int(oslot[i, j]), int(rank[i, 0])) for i in live]
            rows = live[selection_order_ref(key[live, j].tolist(), ties)].tolist()
            want = np.full(L, -1)
            want[rows[:heads]] = np.arange(min(heads, len(rows)))
            assert (lvl.slot_lo[:, j] == want).all() and (lvl.slot_hi[:, j] == want).all(), (L, heads, j)
            assert (lvl.status[:, j] == np.where(want >= 0, subtree_select.IN, subtree_select.OUT)).all()
    assert kinds[0] > 100 and kinds[1] > 100  # both paths ran in most levels


def test_wider_configs_on_narrow_rows_match_reference():
    """Rows holding only the kept widths and configs wider than them at the root and below: the
    engine bounds each candidate a recorded row does not name as the reference does."""
    big = TreeConfig.from_lists([[3], [2, 1], [1, 1]], [1, 2, 2])
    draft, target = random_oracle(41, cols=6, hit=0.5)
    roots = range(400, 460)
    rounds = [as_round(narrow_rows(record_round(big, r, 3, draft, target, "path"), big), (r, r), r) for r in roots]
    subs = [
        TreeConfig.from_lists([[4], [2, 1], [1, 1]], [1, 2, 2]),
        TreeConfig.from_lists([[3], [4, 1], [1, 1]], [1, 2, 2]),
        TreeConfig.from_lists([[3], [3, 2], [1, 1, 1]], [1, 2, 3]),
        TreeConfig.from_lists([[5], [3, 3], [2, 2]], [1, 2, 2]),
    ]
    assert check_contained(big, batch_from_rounds(rounds), subs) == len(rounds) * len(subs)


def test_tied_path_probabilities_match_reference():
    """Draft probabilities on a 1/8 grid (as fp16 dumps round them): nodes of a level tie in path
    probability, siblings and cousins, and the tie rule (rank_ties) decides which a contained config
    expands, in the engine as in the reference walk (replay.testing.selection_ref)."""
    big = TreeConfig.from_lists([[3], [2, 2, 1], [1, 1, 1]], [1, 3, 3])
    draft, target = random_oracle(43, cols=4, hit=0.6, flat=2.0, grid=8)
    rounds = [as_round(record_round(big, r, 3, draft, target, "path"), (r, r), r) for r in range(500, 580)]
    subs = [big, *contained_configs(big, limit=400)[::7]]
    assert check_contained(big, batch_from_rounds(rounds), subs) == len(rounds) * len(subs)


def test_truncations_cut_from_the_deeper_walk_match_their_own_walks():
    """Without the gammaThreshold early stop, a config that is the first steps of another one replayed
    with it takes its outcomes from that walk (truncation_sources, truncated_walk): every field as
    its own walk's, on the synthetic article rounds."""
    run = open_run("sample_dumps/synthetic_article")
    batches = [b for load in run.chunks(1) for b in load()[0]]
    cfg = run.tree
    subs = [cfg] + [subtree_batch.truncated(cfg, g) for g in range(1, cfg.gamma)]
    assert subtree_batch.truncation_sources(subs) == [None] + [0] * (cfg.gamma - 1)
    for b, r, exp, shape in replayed_shapes(cfg, batches):
        together = replay_contained_many(b, r, exp, shape, subs, cfg.gamma)
        for sub, many in zip(subs, together):
            one = replay_contained(b, r, exp, shape, sub, cfg.gamma)
            for name in one.__dataclass_fields__:
                got, want = getattr(many, name), getattr(one, name)
                assert got.dtype == want.dtype and np.array_equal(got, want), (sub.short(), name)
