"""Tiny random-weight models for tests and benches (built by replay.live.models.random_weights),
drafts made from them (noisy, damped, truncated), writers that save them the way ``load_model``
reads them (Hugging Face directory, GGUF file) and a word-level test tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from replay.live.models.load import LiveModel, wrap_model
from replay.live.models.random_weights import build_model


def tiny_config(architecture: str = "qwen2", vocab_size: int = 64, layers: int = 2, hidden: int = 32) -> dict[str, Any]:
    """A few-kilobyte decoder; ``initializer_range`` is large so next-token distributions are peaked
    (random init at 0.02 gives near-uniform logits whose argmax flips on rounding noise)."""
    return {
        "architecture": architecture,
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "initializer_range": 0.3,
    }


def noisy_copy(model: LiveModel, noise: float, seed: int = 1, name: str | None = None) -> LiveModel:
    """A draft that mostly agrees with ``model``: same architecture, weights + relative Gaussian noise."""
    import copy

    module = copy.deepcopy(model.module)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            jitter = torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p.device, p.dtype)
            p.add_(jitter * noise * p.detach().float().std().clamp_min(1e-3).to(p.dtype))
    return wrap_model(module, name or f"{model.name}+noise{noise}")


def save_hf_dir(model: LiveModel, out_dir: str | Path, tokenizer: Any | None = None) -> Path:
    """Save as a Hugging Face directory (config.json + model.safetensors [+ tokenizer files])."""
    out_dir = Path(out_dir)
    model.module.save_pretrained(out_dir, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(out_dir)
    return out_dir


def save_gguf_qwen2(model: LiveModel, path: str | Path) -> Path:
    """Write a Qwen2 model as an unquantized (F32) GGUF file, the layout llama.cpp's converter uses.

    Only Qwen2: Llama GGUF files carry permuted Q/K weights, which this test writer does not do.
    """
    import gguf

    cfg = model.module.config
    if cfg.model_type != "qwen2":
        raise ValueError(f"save_gguf_qwen2: model type {cfg.model_type!r} is not qwen2")
    path = Path(path)
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("specreplay-tiny-qwen2")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(float(_rope_theta(cfg)))
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, cfg.num_hidden_layers)
    for hf_name, tensor in model.module.state_dict().items():
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ValueError(f"no GGUF name for tensor {hf_name}")
        writer.add_tensor(gguf_name, tensor.detach().float().cpu().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _rope_theta(cfg: Any) -> float:
    params = getattr(cfg, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(cfg, "rope_theta", 10000.0)))


def build_word_tokenizer(vocab_size: int):
    """A word-level tokenizer whose tokens are ``t0 .. t{V-1}`` split on spaces (no hub needed)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0")


def damp_late_layers(model: LiveModel, keep: int, factor: float) -> LiveModel:
    """Scale the residual outputs of every decoder layer after the first ``keep`` by ``factor``:
    the late layers then only nudge the prediction, so a truncated copy (``truncated_draft``) agrees
    with the model most of the time while costing a fraction of it. In place; returns ``model``."""
    with torch.no_grad():
        for layer in model.module.model.layers[keep:]:
            layer.self_attn.o_proj.weight.mul_(factor)
            layer.mlp.down_proj.weight.mul_(factor)
    return model


def truncated_draft(model: LiveModel, layers: int, name: str | None = None) -> LiveModel:
    """A cheaper draft: the first ``layers`` decoder layers of ``model`` with its embeddings, final
    norm and head (a copy; ``model`` is untouched)."""
    import copy

    module = copy.deepcopy(model.module)
    module.model.layers = module.model.layers[:layers]
    module.config.num_hidden_layers = layers
    if getattr(module.config, "layer_types", None):
        module.config.layer_types = module.config.layer_types[:layers]
    return wrap_model(module, name or f"{model.name}[:{layers} layers]")


def damped_pair(
    config: dict[str, Any],
    draft_layers: int,
    factor: float,
    seed: int = 0,
    dtype: str = "float32",
    device: str = "cpu",
    name: str = "random",
) -> tuple[LiveModel, LiveModel]:
    """(draft, target) for timing a real architecture without its weights: a random-weight target
    whose decoder layers after the first ``draft_layers`` are damped by ``factor``, and as draft its
    first ``draft_layers`` layers (``truncated_draft``). The draft then agrees with the target often
    enough for speculation to be timed with real shapes; acceptance is whatever the weights give."""
    target = damp_late_layers(
        build_model(config, seed=seed, dtype=dtype, device=device, name=f"{name}-target"),
        keep=draft_layers,
        factor=factor,
    )
    return truncated_draft(target, draft_layers, name=f"{name}-draft[:{draft_layers} layers]"), target
