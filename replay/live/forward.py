"""One model forward over new tokens on top of a KV cache, with explicit positions and visibility.

The same call serves every case: a prefill or catch-up (causal visibility), a draft step over the
expanded nodes of one level, and the target's verification of ``[root] + nodes`` (tree visibility
from ``replay.tree.tree_layout``). Caches are transformers ``DynamicCache`` objects; keeping only
the accepted path is an index-select along the sequence dimension of every layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .checks import check_shape
from .models import LiveModel


def new_cache(model: LiveModel) -> Any:
    """An empty DynamicCache laid out for ``model`` (full-attention layers only)."""
    from transformers import DynamicCache

    try:
        cache = DynamicCache(config=model.module.config)
    except TypeError:  # an older 5.x DynamicCache without the config argument
        cache = DynamicCache()
    _check_layers(cache)
    return cache


def _check_layers(cache: Any) -> None:
    from transformers.cache_utils import DynamicLayer

    for layer in getattr(cache, "layers", []):
        # Sliding-window layers drop old entries themselves; selecting positions by index there
        # would silently keep the wrong ones.
        if type(layer) is not DynamicLayer:
            raise ValueError(f"unsupported KV cache layer {type(layer).__name__}: only full attention is supported")


def cache_length(cache: Any) -> int:
    """Entries (token positions) held by the cache."""
    return int(cache.get_seq_length())


def causal_visible(past: int, n: int, device: torch.device) -> torch.Tensor:
    """[n, past + n] bool: every new token sees the whole past and the new tokens up to itself."""
    vis = torch.ones(n, past + n, dtype=torch.bool, device=device)
    vis[:, past:] = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    return vis


def tree_visible(past: int, tree_mask: np.ndarray, device: torch.device) -> torch.Tensor:
    """[n, past + n] bool from a tree mask ([n, n] bool, ancestors-or-self, from tree_layout)."""
    check_shape("tree_mask", tree_mask, (tree_mask.shape[0], tree_mask.shape[0]), np.dtype(bool))
    n = tree_mask.shape[0]
    vis = torch.ones(n, past + n, dtype=torch.bool, device=device)
    vis[:, past:] = torch.from_numpy(tree_mask).to(device)
    return vis


def attention_bias(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[1, 1, n, k] additive bias: 0 where visible, the dtype's minimum elsewhere.

    visible: [n, k] bool
    A float bias (not a bool mask) so that eager and SDPA attention read it the same way.
    """
    check_shape("visible", visible, (None, None), torch.bool)
    bias = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    bias.masked_fill_(~visible, torch.finfo(dtype).min)
    return bias[None, None]


@torch.no_grad()
def forward_tokens(
    model: LiveModel,
    cache: Any,
    tokens: torch.Tensor,  # [n] int64 on model.device
    positions: torch.Tensor,  # [n] int64 absolute positions (rotary embedding)
    visible: torch.Tensor,  # [n, past + n] bool, past = cache_length(cache)
) -> torch.Tensor:
    """Run the model on ``tokens``, append their KV entries to ``cache``, return [n, V] float32 logits."""
    n = tokens.shape[0]
    check_shape("tokens", tokens, (n,), torch.int64)
    check_shape("positions", positions, (n,), torch.int64)
    check_shape("visible", visible, (n, cache_length(cache) + n), torch.bool)
    out = model.module(
        input_ids=tokens[None],
        position_ids=positions[None],
        attention_mask=attention_bias(visible, model.dtype),
        use_cache=True,
        **{model.cache_kwarg: cache},
    )
    return out.logits[0].float()


def keep_cache_entries(cache: Any, keep: torch.Tensor) -> None:
    """Keep only the entries at ``keep`` ([m] int64, increasing), in that order, in every layer.

    After verification this drops rejected branches: the committed prefix plus the accepted
    path's positions remain, contiguous again, so the next round appends after them.
    """
    check_shape("keep", keep, (None,), torch.int64)
    if keep.numel() > 1 and not bool((keep[1:] > keep[:-1]).all()):
        raise ValueError("keep: indices must be strictly increasing")
    _check_layers(cache)
    for layer in cache.layers:
        if layer.keys is None or layer.keys.numel() == 0:
            continue
        idx = keep.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, idx)
        layer.values = layer.values.index_select(-2, idx)


def crop_cache(cache: Any, length: int) -> None:
    """Drop every entry at or after ``length``."""
    keep_cache_entries(cache, torch.arange(length, dtype=torch.int64))
