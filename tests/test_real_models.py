"""The official draft/target pair loads with transformers and shares one tokenizer.

Needs the GGUF files fetched by `specreplay models fetch` into $SPECREPLAY_MODELS (default
~/.cache/specreplay/models) and the `live` extras (torch, transformers, gguf, accelerate). Skips
with the reason otherwise. Loads one model at a time: the float32 target alone is ~7 GiB resident.
The last test loads the pair together (~10 GiB resident in float32) and checks greedy
losslessness of the harness on real weights: speculative output == target-only greedy.
"""

from __future__ import annotations

import gc

import pytest

from replay.live.errors import ModelNotFetchedError
from replay.live.models.cache import ENV_CACHE_DIR
from replay.live.models.catalogue import DEFAULT_PAIR
from replay.live.models.names import resolve_model, resolve_pair

pytestmark = [pytest.mark.real_models, pytest.mark.slow]

VOCAB = 151_936
# (short name, layers, hidden size): catches a swapped or wrong file, not just a loadable one.
EXPECTED = {
    "qwen2.5-coder-0.5b": (24, 896),
    "qwen2.5-coder-1.5b": (28, 1536),
}


def require_live_extras() -> None:
    for module in ("torch", "transformers", "gguf", "accelerate"):
        pytest.importorskip(module, reason=f"real-model tests need the `live` extras ({module} missing)")


@pytest.fixture(scope="module")
def pair_paths():
    require_live_extras()
    try:
        return resolve_pair(DEFAULT_PAIR.name)
    except ModelNotFetchedError as exc:
        pytest.skip(f"{exc} (or point ${ENV_CACHE_DIR} at the fetched files)")


def test_tokenizers_identical(pair_paths):
    from replay.live.models.gguf_load import compare_tokenizers, load_gguf_tokenizer

    draft, target = (load_gguf_tokenizer(path) for path in pair_paths)
    assert compare_tokenizers(draft, target) == []
    assert len(draft) == len(target) == VOCAB


@pytest.mark.parametrize("name", list(EXPECTED))
def test_model_loads_and_runs(pair_paths, name):
    import torch

    from replay.live.models.gguf_load import load_gguf_model

    model, tokenizer = load_gguf_model(resolve_model(name), "float32")
    try:
        layers, hidden = EXPECTED[name]
        assert model.config.model_type == "qwen2"
        assert (model.config.num_hidden_layers, model.config.hidden_size) == (layers, hidden)
        assert model.config.vocab_size == VOCAB
        assert next(model.parameters()).dtype == torch.float32
        ids = tokenizer("def add(a, b):\n    return", return_tensors="pt").input_ids
        with torch.inference_mode():
            logits = model(input_ids=ids).logits
        assert logits.shape == (1, ids.shape[1], VOCAB)
        assert torch.isfinite(logits).all()
        # A code model that loaded correctly continues `return` with ` a` as its top choice.
        assert tokenizer.decode(logits[0, -1].argmax()) == " a"
    finally:
        del model
        gc.collect()


# Short: the check is token identity, not speed; 12 tokens keep the test near two minutes on CPU.
LOSSLESS_TOKENS = 12
LOSSLESS_CONFIGS = {
    "article": ([[6], [2, 2], [1, 1]], [1, 2, 2]),
    "chain": ([[1], [1], [1]], [1, 1, 1]),
}


def test_greedy_speculation_is_lossless_on_the_real_pair(pair_paths):
    """In the recommended dtypes (docs/live-harness.md): a float32 target, the draft in the default
    draft dtype of this machine (bfloat16 where it is fast), then the same draft cast to bfloat16.
    Dump-recording rounds (every output row) and lean rounds (only the rows acceptance reads) alike."""
    import torch

    from replay.core.config import TreeConfig
    from replay.live.generate import DecodeOptions, speculative_generate, target_generate
    from replay.live.models.load import load_pair, wrap_model
    from replay.live.stdprompts import std_prompts

    draft, target = load_pair(*pair_paths)
    try:
        assert draft.tokenizer is target.tokenizer  # loaded once, shared
        assert target.dtype == torch.float32
        options = DecodeOptions(LOSSLESS_TOKENS)
        prompts = [list(target.tokenizer.encode(p.text)) for p in std_prompts()[:2]]  # one code, one prose
        expected = [target_generate(target, ids, options).output_ids for ids in prompts]
        assert all(len(e) == LOSSLESS_TOKENS for e in expected)
        drafts = [draft]
        if draft.dtype != torch.bfloat16:
            drafts.append(wrap_model(draft.module.to(torch.bfloat16), draft.name, draft.tokenizer))
        for d in drafts:
            for ids, want in zip(prompts, expected):
                for name, (spec, head) in LOSSLESS_CONFIGS.items():
                    config = TreeConfig(gamma=len(head), top_k_spec=tuple(map(tuple, spec)), top_head=tuple(head))
                    for record in (True, False):
                        got = speculative_generate(d, target, ids, config, options, record=record)
                        assert got.output_ids == want, (
                            f"{d.dtype_name} draft / {name} / record={record}: {got.output_ids} != {want}"
                        )
                        assert got.target_forwards <= LOSSLESS_TOKENS
    finally:
        del draft, target
        gc.collect()
