"""Greedy speculative output equals the target's own greedy decoding, token for token."""

import pytest

from replay.core.config import TreeConfig
from replay.live.generate import DecodeOptions, speculative_generate, target_generate
from tests.live_fixtures import live_llama_pair, live_qwen_pair, make_pair, torch  # noqa: F401

PROMPTS = [[1, 2, 3, 4], [50, 7], [9, 9, 9, 9, 9, 9, 9, 30]]
CONFIGS = [
    TreeConfig.from_lists([[6], [2, 2], [1, 1]]),  # the article's funnel
    TreeConfig.from_lists([[1], [1], [1], [1]]),  # a chain
    TreeConfig.from_lists([[3], [3, 2, 1], [2, 1, 1], [1]]),  # uneven widths
    TreeConfig.from_lists([[4], [2, 1], [1, 1]], gamma_threshold=0.3),  # early stop in play
    TreeConfig.from_lists([[2]]),  # gamma 1
]


@pytest.mark.parametrize("pair", ["live_qwen_pair", "live_llama_pair"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.short())
def test_greedy_speculative_equals_target_greedy(pair, config, request):
    draft, target = request.getfixturevalue(pair)
    opts = DecodeOptions(max_new_tokens=40)
    for prompt in PROMPTS:
        spec = speculative_generate(draft, target, prompt, config, opts)
        base = target_generate(target, prompt, opts)
        assert spec.output_ids == base.output_ids
        assert len(spec.output_ids) == 40
        assert sum(len(r.committed_tokens) for r in spec.rounds) >= 40
        assert spec.target_forwards == len(spec.rounds) < 40  # the draft helps


def test_target_greedy_equals_transformers_generate(live_qwen_pair):
    """The reference loop itself agrees with transformers' generate (greedy)."""
    _, target = live_qwen_pair
    prompt = PROMPTS[0]
    with torch.no_grad():
        hf = target.module.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False, pad_token_id=0)
    assert target_generate(target, prompt, DecodeOptions(30)).output_ids == tuple(hf[0, len(prompt) :].tolist())


def test_identical_draft_accepts_whole_paths(live_qwen_pair):
    """Draft = target: the greedy path is always in the tree, so every round accepts gamma tokens.
    This exercises the cache trimming of both models on every round."""
    _, target = live_qwen_pair
    config = TreeConfig.from_lists([[3], [2, 1], [1, 1]])
    spec = speculative_generate(target, target, PROMPTS[0], config, DecodeOptions(40))
    assert spec.output_ids == target_generate(target, PROMPTS[0], DecodeOptions(40)).output_ids
    assert all(r.accepted_length == 3 for r in spec.rounds)


def test_unrelated_draft_is_still_lossless():
    draft, _ = make_pair("qwen2", seed=5)
    _, target = make_pair("qwen2", seed=0)
    config = TreeConfig.from_lists([[4], [2, 2], [1, 1]])
    opts = DecodeOptions(25)
    assert (
        speculative_generate(draft, target, PROMPTS[1], config, opts).output_ids
        == target_generate(target, PROMPTS[1], opts).output_ids
    )


def test_eos_stops_both_loops_at_the_same_place(live_qwen_pair):
    draft, target = live_qwen_pair
    base = target_generate(target, PROMPTS[0], DecodeOptions(30))
    eos = base.output_ids[7]
    opts = DecodeOptions(30, eos_token_id=eos)
    spec = speculative_generate(draft, target, PROMPTS[0], CONFIGS[0], opts)
    assert spec.output_ids == target_generate(target, PROMPTS[0], opts).output_ids
    assert spec.output_ids[-1] == eos and len(spec.output_ids) <= 8


def test_cheaper_truncated_draft_is_lossless():
    """A draft with fewer layers than the target (separate cache shapes) changes nothing in the output."""
    from replay.live.models.random_weights import build_model
    from replay.testing.tiny import damp_late_layers, tiny_config, truncated_draft

    target = damp_late_layers(build_model(tiny_config("qwen2", 64, layers=4, hidden=64), seed=2), keep=1, factor=0.2)
    draft = truncated_draft(target, layers=1)
    assert draft.module.config.num_hidden_layers == 1 and target.module.config.num_hidden_layers == 4
    opts = DecodeOptions(30)
    spec = speculative_generate(draft, target, PROMPTS[0], CONFIGS[0], opts)
    assert spec.output_ids == target_generate(target, PROMPTS[0], opts).output_ids
    assert sum(r.accepted_length for r in spec.rounds) > 0


class HeadRows:
    """Counts the rows each output-layer call of a model receives."""

    def __init__(self, model):
        self.calls: list[int] = []
        self._hook = model.head.register_forward_hook(lambda _m, args, _out: self.calls.append(args[0].shape[0]))

    def remove(self):
        self._hook.remove()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.short())
def test_unrecorded_rounds_compute_only_the_rows_acceptance_reads(live_qwen_pair, config):
    """Without a dump: no prompt logits, the draft's catch-up on its last row only, and the
    verification on first_rows(tree) plus at most one leaf; the rounds are the recorded run's."""
    from replay.live.verify import first_rows

    draft, target = live_qwen_pair
    prompt = PROMPTS[2]
    opts = DecodeOptions(max_new_tokens=30)
    recorded = speculative_generate(draft, target, prompt, config, opts)
    rounds = []
    t_rows, d_rows = HeadRows(target), HeadRows(draft)
    try:
        lean = speculative_generate(
            draft, target, prompt, config, opts, on_round=lambda r, d, v: rounds.append((d.tree, v)), record=False
        )
    finally:
        t_rows.remove(), d_rows.remove()
    assert lean.output_ids == recorded.output_ids == target_generate(target, prompt, opts).output_ids
    assert [r.accepted_nodes for r in lean.rounds] == [r.accepted_nodes for r in recorded.rounds]
    assert all(v.validate is None for _, v in rounds)
    # Target: the prefill computed no logits; each round one call on first_rows, maybe one more row.
    expected = []
    for tree, v in rounds:
        expected.append(len(first_rows(tree)))
        if v.target.output_calls == 2:
            expected.append(1)
    assert t_rows.calls == expected
    # Draft: step 0 of every round is one row (the root), the later steps one row per expanded head.
    assert d_rows.calls == [rows for tree, _ in rounds for rows in [1] + [len(e) for e in tree.expanded[1:]]]


def test_first_rows_of_the_article_tree():
    """The article's round (DESIGN.md): nodes with children R, A1, A2, B11, B21 and the deepest
    leaves C111, C211; the depth-1 leaves A3..A6 and B12, B22 wait for a second call."""
    from replay.core.tree import Tree
    from replay.live.verify import first_rows

    tokens = [43107, 41824, 43744, 44298, 34051, 28380, 37539, 41760, 35740, 45315, 41760, 22870, 22870]
    parents = [-1, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 7, 9]
    assert first_rows(Tree.from_lists(tokens, parents)).tolist() == [0, 1, 2, 7, 9, 11, 12]
    chain = Tree.from_lists([5, 6, 7, 8], [-1, 0, 1, 2])
    assert first_rows(chain).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("config", CONFIGS[:2], ids=lambda c: c.short())
def test_static_cache_path_is_lossless(live_qwen_pair, config):
    from replay.live.compiled import fast_path

    draft, target = live_qwen_pair
    fd, ft = fast_path(draft, mode="static"), fast_path(target, mode="static")
    opts = DecodeOptions(max_new_tokens=40)
    for prompt in PROMPTS:
        base = target_generate(target, prompt, opts).output_ids
        assert target_generate(ft, prompt, opts).output_ids == base
        assert speculative_generate(fd, ft, prompt, config, opts, record=False).output_ids == base
    # One static cache per model served every generation (the graphs' addresses stay valid).
    assert ft.cache_pool.held() == 1 and fd.cache_pool.held() == 1


class ReplayingGraphs:
    """Stands in for CUDA graphs on a CPU: recording runs the function once for its output buffer,
    each replay runs it again into that buffer (reading the graph's input buffers, as a real
    replay does)."""

    def __init__(self):
        self.warm_ups = self.records = 0

    def warm_up(self, fn):
        self.warm_ups += 1
        fn()

    def record(self, fn):
        self.records += 1
        out = fn()
        return (lambda: out.copy_(fn())), out


@pytest.mark.slow
def test_graph_runner_replays_the_eager_path(live_qwen_pair):
    """The CUDA-graph runner's bookkeeping (input buffers, the cache's write position around the
    warm-up and the recording, one graph per shape and cache, pooled caches across prompts) checked
    on a CPU with replaying stand-ins: every round and token equals the eager path's."""
    from replay.live.compiled import GraphRunner, with_runner

    draft, target = live_qwen_pair
    graphs = ReplayingGraphs()
    td, tt = GraphRunner(draft, graphs), GraphRunner(target, graphs)
    fd, ft = with_runner(draft, td), with_runner(target, tt)
    opts = DecodeOptions(max_new_tokens=30)
    for prompt in PROMPTS:
        eager = speculative_generate(draft, target, prompt, CONFIGS[0], opts, record=False)
        fast = speculative_generate(fd, ft, prompt, CONFIGS[0], opts, record=False)
        assert fast.output_ids == eager.output_ids
        assert [r.accepted_nodes for r in fast.rounds] == [r.accepted_nodes for r in eager.rounds]
        assert target_generate(ft, prompt, opts).output_ids == target_generate(target, prompt, opts).output_ids
    # One recording per (tokens, width, cache): the verification (13 tokens), the one-token decode,
    # and the draft's catch-up (1 or 2 tokens) and steps (2 heads); the pool kept one cache each.
    assert graphs.records == graphs.warm_ups == td.recorded + tt.recorded
    assert tt.recorded <= 3 and td.recorded <= 3
    assert ft.cache_pool.held() == 1 and fd.cache_pool.held() == 1


@pytest.mark.slow
def test_compiled_fast_path_equals_the_eager_path(live_qwen_pair):
    """torch.compile over static caches (the eager backend on a CPU: dynamo traces the forwards
    and runs what it traced) gives the eager path's rounds and output exactly."""
    from replay.live.compiled import fast_path

    draft, target = live_qwen_pair
    fd, ft = fast_path(draft), fast_path(target)
    opts = DecodeOptions(max_new_tokens=24)
    eager = speculative_generate(draft, target, PROMPTS[0], CONFIGS[0], opts)
    fast = speculative_generate(fd, ft, PROMPTS[0], CONFIGS[0], opts)
    assert fast.output_ids == eager.output_ids
    assert [r.accepted_nodes for r in fast.rounds] == [r.accepted_nodes for r in eager.rounds]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.short())
def test_bfloat16_draft_under_float32_target_is_lossless(live_qwen_pair, config):
    """The recommended dtypes (docs/live-harness.md): float32 target, bfloat16 draft where bfloat16
    is fast. The target decides every token, so the output is the float32 target's own."""
    import copy

    from replay.live.models.load import wrap_model

    draft, target = live_qwen_pair
    bf16 = wrap_model(copy.deepcopy(draft.module).to(torch.bfloat16), draft.name + "-bf16")
    opts = DecodeOptions(max_new_tokens=40)
    for prompt in PROMPTS:
        assert (
            speculative_generate(bf16, target, prompt, config, opts, record=False).output_ids
            == target_generate(target, prompt, opts).output_ids
        )
