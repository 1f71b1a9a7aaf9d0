"""Greedy speculative output equals the target's own greedy decoding, token for token."""

import pytest
from tests.live_fixtures import live_llama_pair, live_qwen_pair, make_pair, torch  # noqa: F401

from replay.config import TreeConfig
from replay.live.generate import DecodeOptions, speculative_generate, target_generate

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
    assert speculative_generate(draft, target, PROMPTS[1], config, opts).output_ids == target_generate(target, PROMPTS[1], opts).output_ids


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
    from replay.live.tiny import build_model, damp_late_layers, tiny_config, truncated_draft

    target = damp_late_layers(build_model(tiny_config("qwen2", 64, layers=4, hidden=64), seed=2), keep=1, factor=0.2)
    draft = truncated_draft(target, layers=1)
    assert draft.module.config.num_hidden_layers == 1 and target.module.config.num_hidden_layers == 4
    opts = DecodeOptions(30)
    spec = speculative_generate(draft, target, PROMPTS[0], CONFIGS[0], opts)
    assert spec.output_ids == target_generate(target, PROMPTS[0], opts).output_ids
    assert sum(r.accepted_length for r in spec.rounds) > 0
