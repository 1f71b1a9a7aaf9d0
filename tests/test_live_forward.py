"""The tree forward: explicit positions + tree mask over a KV cache equals plain causal forwards."""

import numpy as np
import pytest

from replay.core.tree import Tree, tree_layout
from replay.live.forward import (
    ALL_ROWS,
    LAST_ROW,
    attention_bias,
    cache_length,
    causal_visible,
    crop_cache,
    forward_hidden,
    forward_tokens,
    keep_cache_entries,
    new_cache,
    output_logits,
    tree_visible,
)
from tests.live_fixtures import live_llama_pair, live_qwen_pair, torch  # noqa: F401

PREFIX = [3, 17, 42, 8, 5, 29]
# The article's shape in miniature: root, 3 children, 2 grandchildren under node 1, 1 under node 2,
# one great-grandchild; a token repeated on two branches (7) to show nodes are positions, not tokens.
TREE = Tree.from_lists([11, 7, 20, 33, 7, 9, 7, 50], [-1, 0, 0, 0, 1, 1, 2, 4])


def plain_logits(model, ids):
    """transformers' own forward, no cache, no custom mask: [len(ids), V] float32."""
    with torch.no_grad():
        return model.module(input_ids=torch.tensor([ids])).logits[0].float()


def tree_logits(model, prefix, tree, capacity=None):
    cache = new_cache(model, capacity)
    n = len(prefix)
    forward_tokens(model, cache, torch.tensor(prefix), torch.arange(n), causal_visible(0, n, model.device))
    mask, depth, _ = tree_layout(tree.parents, tree.depths)
    logits = forward_tokens(
        model, cache, torch.from_numpy(tree.tokens), torch.from_numpy(n + depth), tree_visible(n, mask, model.device)
    )
    return logits, cache


@pytest.mark.parametrize("pair", ["live_qwen_pair", "live_llama_pair"])
def test_tree_forward_equals_per_path_plain_forwards(pair, request):
    _, target = request.getfixturevalue(pair)
    logits, _ = tree_logits(target, PREFIX, TREE)
    worst = 0.0
    for u in range(TREE.tokens.shape[0]):
        path = [int(TREE.tokens[v]) for v in TREE.path_to(u)]
        ref = plain_logits(target, PREFIX + path)[-1]
        worst = max(worst, float((logits[u] - ref).abs().max()))
    assert worst < 1e-5, worst


@pytest.mark.parametrize("pair", ["live_qwen_pair", "live_llama_pair"])
def test_causal_forward_with_cache_matches_transformers(pair, request):
    _, target = request.getfixturevalue(pair)
    ids = PREFIX + [1, 2, 3]
    cache = new_cache(target)
    a = forward_tokens(target, cache, torch.tensor(ids[:4]), torch.arange(4), causal_visible(0, 4, target.device))
    b = forward_tokens(
        target, cache, torch.tensor(ids[4:]), torch.arange(4, len(ids)), causal_visible(4, len(ids) - 4, target.device)
    )
    ref = plain_logits(target, ids)
    assert torch.allclose(torch.cat([a, b]), ref, atol=1e-5)
    assert cache_length(cache) == len(ids)


def test_keeping_the_accepted_path_leaves_a_plain_prefix(live_qwen_pair):
    _, target = live_qwen_pair
    _, cache = tree_logits(target, PREFIX, TREE)
    path = TREE.path_to(7)  # root -> 1 -> 4 -> 7
    n = len(PREFIX)
    keep_cache_entries(cache, torch.tensor(list(range(n)) + [n + u for u in path]))
    assert cache_length(cache) == n + len(path)
    seq = PREFIX + [int(TREE.tokens[u]) for u in path]
    nxt = forward_tokens(
        target, cache, torch.tensor([13]), torch.tensor([len(seq)]), causal_visible(len(seq), 1, target.device)
    )
    assert torch.allclose(nxt[0], plain_logits(target, seq + [13])[-1], atol=1e-5)
    crop_cache(cache, 2)
    assert cache_length(cache) == 2


def test_attention_bias_is_zero_where_visible_and_min_elsewhere():
    vis = torch.tensor([[True, False], [True, True]])
    bias = attention_bias(vis, torch.float32)
    assert bias.shape == (1, 1, 2, 2)
    assert bias[0, 0, 0, 0] == 0 and bias[0, 0, 0, 1] == torch.finfo(torch.float32).min
    padded = attention_bias(vis, torch.bfloat16, width=4)  # a static cache's stale tail stays invisible
    assert padded.shape == (1, 1, 2, 4) and padded.dtype == torch.bfloat16
    assert padded[0, 0, 1, :2].tolist() == [0, 0] and (padded[0, 0, :, 2:] == torch.finfo(torch.bfloat16).min).all()


def test_shapes_are_checked_on_entry(live_qwen_pair):
    _, target = live_qwen_pair
    cache = new_cache(target)
    with pytest.raises(ValueError, match="visible: expected shape"):
        forward_tokens(target, cache, torch.tensor([1, 2]), torch.arange(2), causal_visible(0, 3, target.device))
    with pytest.raises(ValueError, match="tokens: expected dtype"):
        forward_tokens(target, cache, torch.tensor([1.0, 2.0]), torch.arange(2), causal_visible(0, 2, target.device))
    with pytest.raises(ValueError, match="strictly increasing"):
        keep_cache_entries(cache, torch.tensor([2, 1]))
    with pytest.raises(ValueError, match="tree_mask"):
        tree_visible(0, np.ones((2, 3), dtype=bool), target.device)


def test_output_layer_on_selected_rows_equals_those_rows_of_all(live_qwen_pair):
    _, target = live_qwen_pair
    ids = PREFIX + [1, 2, 3]
    n = len(ids)

    def run(rows):
        return forward_tokens(
            target, new_cache(target), torch.tensor(ids), torch.arange(n), causal_visible(0, n, target.device), rows
        )

    full = run(ALL_ROWS)
    assert torch.allclose(full, plain_logits(target, ids), atol=1e-5)
    assert run(LAST_ROW).shape == (1, full.shape[1])
    assert torch.allclose(run(LAST_ROW), full[-1:], atol=1e-6)
    assert torch.allclose(run(torch.tensor([0, 4, 7])), full[[0, 4, 7]], atol=1e-6)
    cache = new_cache(target)
    hidden = forward_hidden(target, cache, torch.tensor(ids), torch.arange(n), causal_visible(0, n, target.device))
    assert hidden.shape == (n, target.module.config.hidden_size) and cache_length(cache) == n
    assert torch.allclose(output_logits(target, hidden[2:4]), full[2:4], atol=1e-6)


@pytest.mark.parametrize("capacity", [None, 40], ids=["dynamic", "static"])
def test_keep_copies_only_entries_after_the_kept_prefix(live_qwen_pair, capacity):
    _, target = live_qwen_pair
    cache = new_cache(target, capacity)
    n = 9
    forward_tokens(target, cache, torch.arange(n) + 3, torch.arange(n), causal_visible(0, n, target.device))
    before = [(layer.keys.clone(), layer.values.clone(), layer.keys.data_ptr()) for layer in cache.hf.layers]
    keep = [0, 1, 2, 5, 7]
    keep_cache_entries(cache, torch.tensor(keep))
    assert cache_length(cache) == len(keep)
    for layer, (keys, values, ptr) in zip(cache.hf.layers, before):
        got_k, got_v = layer.keys[..., : len(keep), :], layer.values[..., : len(keep), :]
        assert torch.equal(got_k, keys[..., keep, :]) and torch.equal(got_v, values[..., keep, :])
        assert layer.keys.data_ptr() == ptr  # compacted in place: the kept prefix was not copied elsewhere
    with pytest.raises(ValueError, match=r"lie in \[0, 5\)"):
        keep_cache_entries(cache, torch.tensor([0, 5]))


@pytest.mark.parametrize("pair", ["live_qwen_pair", "live_llama_pair"])
def test_static_cache_gives_the_dynamic_caches_logits(pair, request):
    """Same tree forward, accepted-path trim and next step on a static cache: stale entries past
    its length are masked, so the logits match the dynamic cache's and plain transformers'."""
    _, target = request.getfixturevalue(pair)
    dyn_logits, dyn = tree_logits(target, PREFIX, TREE)
    st_logits, st = tree_logits(target, PREFIX, TREE, capacity=32)
    assert st.static and not dyn.static
    assert torch.allclose(st_logits, dyn_logits, atol=1e-5)
    n = len(PREFIX)
    path = TREE.path_to(5)  # root -> 1 -> 5
    seq = PREFIX + [int(TREE.tokens[u]) for u in path]
    for cache in (dyn, st):
        keep_cache_entries(cache, torch.tensor(list(range(n)) + [n + u for u in path]))
        nxt = forward_tokens(
            target,
            cache,
            torch.tensor([13, 14]),
            torch.tensor([len(seq), len(seq) + 1]),
            causal_visible(len(seq), 2, target.device),
        )
        assert torch.allclose(nxt, plain_logits(target, seq + [13, 14])[-2:], atol=1e-5)


def test_static_cache_refuses_to_overflow(live_qwen_pair):
    _, target = live_qwen_pair
    cache = new_cache(target, capacity=4)
    forward_tokens(target, cache, torch.arange(3), torch.arange(3), causal_visible(0, 3, target.device))
    with pytest.raises(ValueError, match="capacity 4"):
        forward_tokens(target, cache, torch.arange(2), torch.arange(3, 5), causal_visible(3, 2, target.device))
