"""The official draft/target pair loads with transformers and shares one tokenizer.

Needs the GGUF files fetched by `specreplay models fetch` into $SPECREPLAY_MODELS (default
~/.cache/specreplay/models) and the `live` extras (torch, transformers, gguf, accelerate). Skips
with the reason otherwise. Loads one model at a time: the float32 target alone is ~7 GiB resident.
Greedy-lossless checks belong to the harness tests, not here.
"""

from __future__ import annotations

import gc

import pytest

from replay.live import fetch

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
        return fetch.resolve_pair(fetch.DEFAULT_PAIR.name)
    except fetch.ModelNotFetchedError as exc:
        pytest.skip(f"{exc} (or point ${fetch.ENV_CACHE_DIR} at the fetched files)")


def test_tokenizers_identical(pair_paths):
    from replay.live.gguf_load import compare_tokenizers, load_gguf_tokenizer

    draft, target = (load_gguf_tokenizer(path) for path in pair_paths)
    assert compare_tokenizers(draft, target) == []
    assert len(draft) == len(target) == VOCAB


@pytest.mark.parametrize("name", list(EXPECTED))
def test_model_loads_and_runs(pair_paths, name):
    import torch

    from replay.live.gguf_load import load_gguf_model

    model, tokenizer = load_gguf_model(fetch.resolve_model(name), "float32")
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
