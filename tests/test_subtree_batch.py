"""The vectorised sub-shape replay (analysis.compare.subtree_batch) decides exactly as the reference
(analysis.compare.subtree.replay_subconfig) on random dumps: same decided flag and bounds, every round,
every contained config tried. The dumps come from the batch property test's strategy (ties,
-inf scores, no scores, explicit parents, dynamic trees, early stops, defects)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis.compare.subtree import contained_configs, replay_subconfig
from analysis.compare.subtree_batch import replay_contained
from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.engine.batch import ERR_OK, batch_from_rounds, expanded_nodes, replay_batch
from replay.engine.replayer import replay_round
from replay.engine.runs import open_run
from tests.test_batch_property import runs


def check_contained(cfg: TreeConfig, batches, subs) -> int:
    """Compare on every replayed round; returns how many (round, config) pairs were compared."""
    compared = 0
    for batch in batches:
        res = replay_batch(batch, cfg, workers=1)
        for k, shape in enumerate(res.shapes):
            members = np.flatnonzero((res.shape_index == k) & (res.error == ERR_OK))
            if not members.shape[0]:
                continue
            b, r = batch.take(members), res.take(members)
            exp = expanded_nodes(b, shape, cfg.tree_type != TREE_DYNAMIC)
            for sub in subs:
                got = replay_contained(b, r, exp, shape, sub, cfg.gamma)
                for i in range(len(b)):
                    ref = replay_subconfig(replay_round(b.round_at(i), cfg), sub, 0.0, None, cfg.gamma)
                    assert (bool(got.decided[i]), int(got.lower[i]), int(got.upper[i])) == (
                        ref.decided,
                        ref.lower,
                        ref.upper,
                    ), (sub.short(), sub.top_head, i, ref.reason)
                    compared += 1
    return compared


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.randoms(use_true_random=False))
def test_contained_replay_matches_reference(case, rnd):
    cfg, rounds = case
    subs = contained_configs(cfg, limit=400)
    picked = [cfg] + rnd.sample(subs, min(6, len(subs)))
    check_contained(cfg, batch_from_rounds(rounds), picked)


def test_synthetic_article_every_contained_config():
    """Every contained config of the article tree on the 300 synthetic rounds (scores, path
    probability): undecidable rounds (a selection leaving the recording) included."""
    run = open_run("sample_dumps/synthetic_article")
    batches = [b for load in run.chunks(1) for b in load()[0]]
    subs = contained_configs(run.tree)
    assert check_contained(run.tree, batches, subs) == 300 * len(subs)
