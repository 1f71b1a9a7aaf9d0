"""Drafting builds each round's tree exactly by the config."""

import numpy as np
import pytest

from replay.core.config import TreeConfig
from replay.live.draft import draft_keep_indices, draft_tree, select_heads
from replay.live.forward import cache_length, keep_cache_entries, new_cache
from replay.testing.selection_ref import select_ref
from tests.live_fixtures import live_qwen_pair, torch  # noqa: F401

COMMITTED = [4, 8, 15, 16, 23, 42]
ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]])


def plain_logprobs(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model.module(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)


def test_tree_shape_order_and_selection_follow_the_config(live_qwen_pair):
    draft, _ = live_qwen_pair
    config = TreeConfig.from_lists([[5], [3, 2, 1], [2, 1], [1]])
    d = draft_tree(draft, new_cache(draft), COMMITTED, config, record_k=8)
    tree = d.tree
    assert tree.level_sizes() == [5, 6, 3, 1]
    assert [len(e) for e in tree.expanded] == [1, 3, 2, 1]
    assert [s.ids.shape for s in d.steps] == [(1, 8), (3, 8), (2, 8), (1, 8)]
    for step, heads in enumerate(tree.expanded):
        level = np.flatnonzero(tree.depths == step)
        # heads = the most probable nodes of their level, most probable first (ties: rank_ties)
        order = level[select_ref(tree.logprobs[level].tolist(), config.top_head[step])]
        assert heads.tolist() == order.tolist()
        # tree order: children grouped by head in selection order, then by rank
        kids = [u for h in heads for u in tree.children(int(h))]
        assert kids == sorted(kids)
        for j, h in enumerate(heads):
            assert tree.children(int(h)).shape[0] == config.top_k_spec[step][j]
    assert not d.stopped_early


def test_children_are_the_drafts_own_top_k_on_each_path(live_qwen_pair):
    """The batched tree-masked draft step equals a plain forward of the path (mask + positions right)."""
    draft, _ = live_qwen_pair
    d = draft_tree(draft, new_cache(draft), COMMITTED, ARTICLE, record_k=6)
    tree = d.tree
    for step, rec in enumerate(d.steps):
        for row, head in enumerate(rec.parents):
            path = [int(tree.tokens[v]) for v in tree.path_to(int(head))]
            ref = plain_logprobs(draft, COMMITTED[:-1] + path)
            top = torch.topk(ref, 6).indices.numpy()
            assert rec.ids[row].tolist() == top.tolist()
            assert np.allclose(rec.scores[row], ref[top].numpy(), atol=1e-5)
            kids = tree.children(int(head))
            assert tree.tokens[kids].tolist() == rec.ids[row, : kids.shape[0]].tolist()
            assert np.allclose(
                tree.logprobs[kids], tree.logprobs[head] + rec.scores[row, : kids.shape[0]].astype(np.float64)
            )


def test_gamma_threshold_stops_drafting_early(live_qwen_pair):
    draft, _ = live_qwen_pair
    stop = TreeConfig.from_lists([[3], [1], [1]], gamma_threshold=1.0)  # no path reaches probability 1
    d = draft_tree(draft, new_cache(draft), COMMITTED, stop, record_k=3)
    assert d.stopped_early and len(d.steps) == 1 and d.tree.level_sizes() == [3]
    go = TreeConfig.from_lists([[3], [1], [1]], gamma_threshold=1e-12)
    d = draft_tree(draft, new_cache(draft), COMMITTED, go, record_k=3)
    assert not d.stopped_early and d.tree.level_sizes() == [3, 1, 1]


def test_select_heads_breaks_ties_by_tree_order():
    lp = np.array([0.0, -1.0, -0.5, -1.0, -0.5])
    assert select_heads(lp, np.array([1, 2, 3, 4]), 3).tolist() == [2, 4, 1]
    with pytest.raises(ValueError, match="cannot pick"):
        select_heads(lp, np.array([1, 2]), 3)


def test_draft_cache_keeps_committed_tokens_and_the_expanded_accepted_prefix(live_qwen_pair):
    draft, _ = live_qwen_pair
    cache = new_cache(draft)
    d = draft_tree(draft, cache, COMMITTED, ARTICLE, record_k=6)
    root_pos = len(COMMITTED) - 1
    assert cache_length(cache) == root_pos + 1 + 2 + 2  # committed + steps 1 and 2 heads
    a1, a2 = (int(u) for u in d.tree.expanded[1])
    b = int(d.tree.children(a1)[0])
    leaf = int(d.tree.children(b)[0]) if d.tree.children(b).shape[0] else None
    path = [a1, b] + ([leaf] if leaf is not None else [])
    keep = draft_keep_indices(d, root_pos, path)
    # a1 and b were expanded (they have draft KV); a leaf never ran through the draft
    expect_b = [root_pos + d.cached_nodes.index(b)] if b in d.cached_nodes else []
    assert keep.tolist() == list(range(root_pos + 1)) + [root_pos + d.cached_nodes.index(a1)] + expect_b
    keep_cache_entries(cache, keep)
    assert cache_length(cache) == keep.shape[0]


def test_record_k_below_the_widest_entry_is_refused(live_qwen_pair):
    draft, _ = live_qwen_pair
    with pytest.raises(ValueError, match="record_k"):
        draft_tree(draft, new_cache(draft), COMMITTED, ARTICLE, record_k=4)
