"""Models with random weights built from an architecture config: real-shaped Qwen2.5 ones for
``cost-curve --shape`` on a GPU (real weights never reach the test machines), and the builder the
test models of replay.testing.tiny use.
"""

from __future__ import annotations

from typing import Any

import torch

from .load import LiveModel, parse_dtype, wrap_model

# Architecture shapes of the public Qwen2.5 configs (config.json), for cost curves on a GPU.
QWEN25_05B = {
    "architecture": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
QWEN25_15B = dict(
    QWEN25_05B,
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
)
REAL_SHAPES = {"qwen2.5-0.5b": QWEN25_05B, "qwen2.5-1.5b": QWEN25_15B}


def _classes(architecture: str):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    table = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}
    if architecture not in table:
        raise ValueError(f"architecture {architecture!r}: expected one of {sorted(table)}")
    return table[architecture]


def build_model(
    config: dict[str, Any], seed: int = 0, dtype: str = "float32", device: str = "cpu", name: str | None = None
) -> LiveModel:
    """Random-weight model from a config dict (key ``architecture``: qwen2 or llama)."""
    cfg = dict(config)
    config_cls, model_cls = _classes(cfg.pop("architecture"))
    hf_config = config_cls(**cfg, attn_implementation="sdpa")
    torch.manual_seed(seed)
    with torch.device(device):
        module = model_cls(hf_config)
    module.to(parse_dtype(dtype))
    return wrap_model(module, name or f"random-{config['architecture']}-seed{seed}")
