"""The same harness on a CUDA GPU (run by scripts/gpu_check.sh; skipped without CUDA)."""

import pytest

from replay.core.config import TreeConfig
from replay.core.tree import Tree, tree_layout
from replay.live.costs import measure_cost_curve
from replay.live.forward import causal_visible, forward_tokens, new_cache, tree_visible
from replay.live.generate import DecodeOptions, speculative_generate, target_generate
from replay.live.models.random_weights import build_model
from replay.testing.tiny import tiny_config
from tests.live_fixtures import make_pair, torch

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run scripts/gpu_check.sh on one)"),
]


def on_cuda(model):
    from replay.live.models.load import wrap_model

    return wrap_model(model.module.to("cuda"), model.name + "@cuda")


@pytest.fixture(scope="module")
def cuda_pair():
    draft, target = make_pair("qwen2")
    return on_cuda(draft), on_cuda(target)


def test_cuda_tree_forward_equals_per_path_forwards(cuda_pair):
    _, target = cuda_pair
    prefix = [3, 17, 42, 8]
    tree = Tree.from_lists([11, 7, 20, 7, 9], [-1, 0, 0, 1, 1])
    cache = new_cache(target)
    dev = target.device
    forward_tokens(
        target, cache, torch.tensor(prefix, device=dev), torch.arange(4, device=dev), causal_visible(0, 4, dev)
    )
    mask, depth, _ = tree_layout(tree.parents, tree.depths)
    logits = forward_tokens(
        target,
        cache,
        torch.from_numpy(tree.tokens).to(dev),
        torch.from_numpy(4 + depth).to(dev),
        tree_visible(4, mask, dev),
    )
    for u in range(tree.tokens.shape[0]):
        ids = prefix + [int(tree.tokens[v]) for v in tree.path_to(u)]
        with torch.no_grad():
            ref = target.module(input_ids=torch.tensor([ids], device=dev)).logits[0, -1].float()
        assert float((logits[u] - ref).abs().max()) < 1e-4


@pytest.mark.parametrize("draft_dtype", [torch.float32, torch.bfloat16])
def test_cuda_greedy_lossless(cuda_pair, draft_dtype):
    draft, target = cuda_pair
    if draft_dtype != torch.float32:
        import copy

        from replay.live.models.load import wrap_model

        draft = wrap_model(copy.deepcopy(draft.module).to(draft_dtype), draft.name + "-bf16")
    opts = DecodeOptions(40)
    for config in (TreeConfig.from_lists([[6], [2, 2], [1, 1]]), TreeConfig.from_lists([[1], [1], [1], [1]])):
        for prompt in ([1, 2, 3, 4], [50, 7]):
            assert (
                speculative_generate(draft, target, prompt, config, opts).output_ids
                == target_generate(target, prompt, opts).output_ids
            )


def test_cuda_cost_curve_is_measured_with_synchronisation(cuda_pair):
    draft, target = cuda_pair
    curve = measure_cost_curve(target, draft, sizes=(1, 8, 32), prefix_tokens=16, repeats=2)
    assert curve.device.startswith("cuda") and len(curve.verify_s) == 3 and all(s > 0 for s in curve.verify_s)


def test_cuda_real_architecture_builds_and_runs():
    cfg = dict(tiny_config("qwen2"), hidden_size=64, num_hidden_layers=2)
    model = build_model(cfg, dtype="bfloat16", device="cuda")
    logits = forward_tokens(
        model,
        new_cache(model),
        torch.tensor([1, 2], device="cuda"),
        torch.arange(2, device="cuda"),
        causal_visible(0, 2, model.device),
    )
    assert logits.shape == (2, cfg["vocab_size"]) and logits.dtype == torch.float32


def test_cuda_unrecorded_rounds_equal_recorded(cuda_pair):
    """Without a dump the output layer runs on fewer rows; the rounds are the same."""
    draft, target = cuda_pair
    opts = DecodeOptions(40)
    config = TreeConfig.from_lists([[6], [2, 2], [1, 1]])
    for prompt in ([1, 2, 3, 4], [50, 7]):
        full = speculative_generate(draft, target, prompt, config, opts)
        lean = speculative_generate(draft, target, prompt, config, opts, record=False)
        assert lean.output_ids == full.output_ids == target_generate(target, prompt, opts).output_ids
        assert [r.accepted_nodes for r in lean.rounds] == [r.accepted_nodes for r in full.rounds]


def recorded_graphs(model) -> int:
    """Graphs recorded so far by a "graphs" fast path (0 otherwise)."""
    from replay.live.compiled import GraphRunner

    fast = model.runner(1) if model.runner is not None else None
    return fast.recorded if isinstance(fast, GraphRunner) else 0


def test_cuda_fast_path_equals_eager(cuda_pair):
    """Static caches, then static caches + CUDA graphs (the default on CUDA), give the eager path's rounds."""
    from replay.live.compiled import fast_path

    draft, target = cuda_pair
    opts = DecodeOptions(40)
    config = TreeConfig.from_lists([[6], [2, 2], [1, 1]])
    for fd, ft in ((fast_path(draft, "static"), fast_path(target, "static")), (fast_path(draft), fast_path(target))):
        for prompt in ([1, 2, 3, 4], [50, 7]):
            eager = speculative_generate(draft, target, prompt, config, opts, record=False)
            fast = speculative_generate(fd, ft, prompt, config, opts, record=False)
            assert fast.output_ids == eager.output_ids
            assert [r.accepted_nodes for r in fast.rounds] == [r.accepted_nodes for r in eager.rounds]
            assert target_generate(ft, prompt, opts).output_ids == target_generate(target, prompt, opts).output_ids
    print("CUDA graphs recorded: draft", recorded_graphs(fd), "target", recorded_graphs(ft))
    assert recorded_graphs(ft) > 0


def test_cuda_sampling_is_lossless_end_to_end():
    """The first two sampled tokens over 1,200 seeds follow the target's own distribution
    (tests/live_stats.py: total-variation bound, false-alarm rate 1e-4), on the GPU."""
    from tests.live_stats import tv_check

    vocab, temperature, prompt = 16, 0.8, [3, 1, 4, 1, 5]
    draft, target = (on_cuda(m) for m in make_pair("qwen2", vocab_size=vocab, seed=3, noise=0.2))
    config = TreeConfig.from_lists([[4], [2, 2], [1, 1]])
    draws = [
        speculative_generate(
            draft, target, prompt, config, DecodeOptions(2, temperature=temperature, seed=s), record=False
        ).output_ids
        for s in range(1200)
    ]
    with torch.no_grad():
        p1 = torch.softmax(
            target.module(input_ids=torch.tensor([prompt], device="cuda")).logits[0, -1].double() / temperature, -1
        )
        seqs = torch.tensor([prompt + [x] for x in range(vocab)], device="cuda")
        p2 = torch.softmax(target.module(input_ids=seqs).logits[:, -1].double() / temperature, -1)
    exact = {(a, b): float(p1[a] * p2[a, b]) for a in range(vocab) for b in range(vocab)}
    check = tv_check(draws, exact, 1e-4)
    print(check)
    assert check.passed, check
