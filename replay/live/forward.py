"""One model forward over new tokens on top of a KV cache, with explicit positions and visibility:
a prefill or catch-up (causal visibility), a draft step over one level's expanded nodes, or the
target's verification of ``[root] + nodes`` (tree visibility). The output layer runs only on the
rows a caller uses (docs/live-harness.md, "Logits only where they are used").
"""

from __future__ import annotations

import numpy as np
import torch

from .checks import check_shape
from .kvcache import KVCache, cache_length, crop_cache, keep_cache_entries, new_cache  # noqa: F401 - re-exported
from .models.load import LiveModel

ALL_ROWS = slice(None)
LAST_ROW = slice(-1, None)


def causal_visible(past: int, n: int, device: torch.device) -> torch.Tensor:
    """[n, past + n] bool: every new token sees the whole past and the new tokens up to itself."""
    vis = torch.ones(n, past + n, dtype=torch.bool, device=device)  # [n, past + n] bool
    vis[:, past:] = torch.ones(n, n, dtype=torch.bool, device=device).tril()  # [n, n] bool, lower triangle
    return vis


def tree_visible(past: int, tree_mask: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    """[n, past + n] bool from a tree mask ([n, n] bool, ancestors-or-self, from tree_layout)."""
    check_shape("tree_mask", tree_mask, (tree_mask.shape[0], tree_mask.shape[0]))
    if tree_mask.dtype not in (np.dtype(bool), torch.bool):
        raise ValueError(f"tree_mask: expected dtype bool, got {tree_mask.dtype}")
    n = tree_mask.shape[0]
    vis = torch.ones(n, past + n, dtype=torch.bool, device=device)  # [n, past + n] bool
    vis[:, past:] = to_device(tree_mask, device)  # [n, n] bool
    return vis


def to_device(array: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host array on ``device`` without making the host wait for queued GPU work."""
    # array's shape, dtype
    t = torch.from_numpy(np.ascontiguousarray(array)) if isinstance(array, np.ndarray) else array
    return t.to(device, non_blocking=True)


def attention_bias(visible: torch.Tensor, dtype: torch.dtype, width: int | None = None) -> torch.Tensor:
    """[1, 1, n, width] additive bias: 0 where visible, the dtype's minimum elsewhere.

    visible: [n, k] bool; ``width`` >= k pads with invisible keys (a static cache's stale tail).
    A float bias (not a bool mask) so that eager and SDPA attention read it the same way.
    """
    check_shape("visible", visible, (None, None), torch.bool)
    width = visible.shape[1] if width is None else width
    if width < visible.shape[1]:
        raise ValueError(f"attention width {width} is below the {visible.shape[1]} visible columns")
    # [n, width]
    bias = torch.full((visible.shape[0], width), torch.finfo(dtype).min, dtype=dtype, device=visible.device)
    bias[:, : visible.shape[1]].masked_fill_(visible, 0.0)
    return bias[None, None]


@torch.no_grad()
def forward_hidden(
    model: LiveModel,
    cache: KVCache,
    tokens: torch.Tensor,  # [n] int64 on model.device
    positions: torch.Tensor,  # [n] int64 absolute positions (rotary embedding)
    visible: torch.Tensor,  # [n, past + n] bool, past = cache_length(cache)
) -> torch.Tensor:
    """Run the decoder on ``tokens``, append their KV entries to ``cache``; [n, H] last hidden states
    (final norm applied) in the model's dtype."""
    n = tokens.shape[0]
    check_shape("tokens", tokens, (n,), torch.int64)
    check_shape("positions", positions, (n,), torch.int64)
    check_shape("visible", visible, (n, cache.length + n), torch.bool)
    if cache.capacity is not None and cache.length + n > cache.capacity:
        raise ValueError(f"static KV cache full: {cache.length} + {n} entries exceed its capacity {cache.capacity}")
    # The first forward on a cache (a prefill) runs eagerly: it also allocates a static cache's
    # tensors, which must exist before a CUDA graph records their addresses.
    run = model.runner(n) if model.runner is not None and cache.length > 0 else model.decoder
    out = run(
        input_ids=tokens[None],
        position_ids=positions[None],
        attention_mask=attention_bias(visible, model.dtype, cache.key_width(n)),
        use_cache=True,
        **{model.cache_kwarg: cache.hf},
    )
    cache.appended(n)
    return out.last_hidden_state[0]  # [n, H] model.dtype


@torch.no_grad()
def output_logits(model: LiveModel, hidden: torch.Tensor) -> torch.Tensor:
    """The output layer on the given rows: hidden [m, H] -> [m, V] float32 logits."""
    check_shape("hidden", hidden, (None, None))
    return model.head(hidden).float()


def forward_tokens(
    model: LiveModel,
    cache: KVCache,
    tokens: torch.Tensor,  # [n] int64 on model.device
    positions: torch.Tensor,  # [n] int64
    visible: torch.Tensor,  # [n, past + n] bool
    rows: slice | torch.Tensor = ALL_ROWS,  # which of the n rows get logits (slice, or [m] int64 on the device)
) -> torch.Tensor:
    """``forward_hidden`` then the output layer on ``rows``: [m, V] float32 logits."""
    return output_logits(model, forward_hidden(model, cache, tokens, positions, visible)[rows])
