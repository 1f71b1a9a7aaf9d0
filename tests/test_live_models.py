"""Loading: Hugging Face directory and GGUF, offline; logits equal transformers' forward on the
same weights; the installed transformers is one the package declares it supports."""

import re
from pathlib import Path

import pytest

from replay.live.errors import ModelLoadError
from replay.live.forward import causal_visible, forward_tokens, new_cache
from replay.live.models.load import load_model, parse_dtype
from replay.testing.tiny import build_word_tokenizer, save_gguf_qwen2, save_hf_dir
from tests.live_fixtures import live_llama_pair, live_qwen_pair, torch  # noqa: F401

IDS = [5, 9, 2, 33, 61, 7]


def plain(model):
    with torch.no_grad():
        return model.module(input_ids=torch.tensor([IDS])).logits[0].float()


def harness(model):
    n = len(IDS)
    return forward_tokens(
        model, new_cache(model), torch.tensor(IDS), torch.arange(n), causal_visible(0, n, model.device)
    )


@pytest.mark.parametrize("pair", ["live_qwen_pair", "live_llama_pair"])
def test_hf_directory_round_trip(pair, request, tmp_path):
    _, target = request.getfixturevalue(pair)
    save_hf_dir(target, tmp_path / "m", build_word_tokenizer(64))
    loaded = load_model(tmp_path / "m")
    assert loaded.dtype == torch.float32 and loaded.cache_kwarg in ("cache", "past_key_values")
    assert torch.equal(plain(loaded), plain(target))
    assert torch.allclose(harness(loaded), plain(target), atol=1e-5)
    assert loaded.tokenizer.encode("t1 t5 t9") == [1, 5, 9]


def test_gguf_file_loads_to_the_same_logits(live_qwen_pair, tmp_path):
    _, target = live_qwen_pair
    path = save_gguf_qwen2(target, tmp_path / "tiny.gguf")
    loaded = load_model(path)
    assert loaded.tokenizer is None  # no tokenizer metadata in this file: prompts come as ids
    assert torch.allclose(harness(loaded), plain(target), atol=1e-5)


def test_bfloat16_load(live_qwen_pair, tmp_path):
    _, target = live_qwen_pair
    save_hf_dir(target, tmp_path / "m")
    loaded = load_model(tmp_path / "m", dtype="bfloat16")
    assert loaded.dtype == torch.bfloat16
    assert harness(loaded).dtype == torch.float32


def test_bad_paths_and_dtypes_are_user_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="not a Hugging Face model directory"):
        load_model(tmp_path)
    (tmp_path / "x.gguf").write_bytes(b"not gguf")
    with pytest.raises(ModelLoadError):
        load_model(tmp_path / "x.gguf")
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        parse_dtype("float8")


def _version(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def test_installed_transformers_is_within_the_declared_range():
    """CI runs the suite on whatever the pin resolves to; the pin must name versions we test."""
    import transformers

    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    spec = re.search(r'"transformers>=([\d.]+),<([\d.]+)"', pyproject)
    assert spec, "pyproject.toml must pin transformers as >=X,<Y in the live extra"
    low, high = _version(spec.group(1)), _version(spec.group(2))
    assert low <= _version(transformers.__version__) < high


@pytest.mark.parametrize(
    "device, flags, dtype, expected",
    [
        ("cpu", {"avx512f", "avx512_bf16"}, "float32", "bfloat16"),
        ("cpu", {"avx2", "amx_bf16"}, "float32", "bfloat16"),
        ("cpu", {"avx512f", "avx512_vnni"}, "float32", "float32"),  # bf16 would be converted in every matmul
        ("cuda", set(), "float32", "bfloat16"),
        ("cpu", {"avx512_bf16"}, "bfloat16", "bfloat16"),
        ("cuda", set(), "float16", "float16"),  # already a cheap dtype: the draft follows it
    ],
)
def test_default_draft_dtype_is_bfloat16_only_where_it_is_fast(monkeypatch, device, flags, dtype, expected):
    from replay.live.models import load as models

    monkeypatch.setattr(models, "cpu_flags", lambda: flags)
    assert models.default_draft_dtype(device, dtype) == expected


def test_models_whose_logits_are_more_than_the_output_layer_are_refused(live_qwen_pair):
    import copy

    from replay.live.models.load import wrap_model

    _, target = live_qwen_pair
    module = copy.deepcopy(target.module)
    module.config.final_logit_softcapping = 30.0
    with pytest.raises(ModelLoadError, match="soft-capped"):
        wrap_model(module, "capped")
