"""The KV caches the harness drives (dynamic or static), with their length counted on the host:
docs/live-harness.md, "KV caches".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .models.load import LiveModel


class KVCache:
    """A transformers cache (``hf``) plus its length; ``capacity`` None = dynamic."""

    def __init__(self, hf: Any, capacity: int | None, pool: CachePool | None = None) -> None:
        self.hf = hf
        self.capacity = capacity
        self.length = 0
        self.pool = pool  # a static cache goes back there when its generation ends

    @property
    def static(self) -> bool:
        return self.capacity is not None

    def key_width(self, n: int) -> int:
        """Keys a forward over ``n`` new tokens attends to (the attention bias's last dimension)."""
        return self.capacity if self.capacity is not None else self.length + n

    def appended(self, n: int) -> None:
        """Record that a forward wrote ``n`` entries after ``length``."""
        self.length += n


class CachePool:
    """Static caches of one model, reused from generation to generation: a CUDA graph reads its
    cache at the addresses it was recorded with, so a new cache per prompt would mean recording
    every graph again. ``acquire`` hands out a free cache of that capacity (emptied) or a new one."""

    def __init__(self) -> None:
        self._free: dict[int, list[KVCache]] = {}

    def acquire(self, model: LiveModel, capacity: int) -> KVCache:
        free = self._free.get(capacity)
        if free:
            cache = free.pop()
            crop_cache(cache, 0)
            return cache
        return KVCache(_static_cache(model, capacity), capacity, self)

    def release(self, cache: KVCache) -> None:
        self._free.setdefault(cache.capacity, []).append(cache)

    def held(self) -> int:
        """Caches waiting for reuse."""
        return sum(len(v) for v in self._free.values())


CAPACITY_STEP = 256  # static capacities are rounded up to this: prompts of similar length share graphs


def new_cache(model: LiveModel, capacity: int | None = None) -> KVCache:
    """An empty cache laid out for ``model`` (full-attention layers only); static when ``capacity``
    (from the model's pool on the fast path, see ``release_cache``)."""
    if capacity is not None:
        if model.cache_pool is not None:
            return model.cache_pool.acquire(model, capacity)
        return KVCache(_static_cache(model, capacity), capacity)
    from transformers import DynamicCache

    try:
        hf = DynamicCache(config=model.module.config)
    except TypeError:  # an older 5.x DynamicCache without the config argument
        hf = DynamicCache()
    _check_layers(hf, static=False)
    return KVCache(hf, None)


def _static_cache(model: LiveModel, capacity: int) -> Any:
    from transformers import StaticCache

    if capacity < 1:
        raise ValueError(f"static cache capacity must be at least 1, got {capacity}")
    hf = StaticCache(config=model.module.config, max_cache_len=capacity)
    _check_layers(hf, static=True)
    for layer in hf.layers:
        # The harness moves entries itself and resets the write position after each round.
        if not isinstance(getattr(layer, "cumulative_length", None), torch.Tensor):
            raise ValueError("static KV cache: this transformers version's StaticLayer has no cumulative_length tensor")
    return hf


def _check_layers(hf: Any, static: bool) -> None:
    from transformers.cache_utils import DynamicLayer, StaticLayer

    want = StaticLayer if static else DynamicLayer
    for layer in getattr(hf, "layers", []):
        # Sliding-window layers drop old entries themselves; selecting positions by index there
        # would silently keep the wrong ones.
        if type(layer) is not want:
            raise ValueError(f"unsupported KV cache layer {type(layer).__name__}: only full attention is supported")


def release_cache(cache: KVCache) -> None:
    """Hand a pooled static cache back for the next generation (no-op for other caches)."""
    if cache.pool is not None:
        cache.pool.release(cache)


def static_capacity(tokens: int) -> int:
    """``tokens`` rounded up to a multiple of CAPACITY_STEP."""
    return -(-tokens // CAPACITY_STEP) * CAPACITY_STEP


def cache_length(cache: KVCache) -> int:
    """Entries (token positions) held by the cache."""
    return cache.length


def keep_cache_entries(cache: KVCache, keep: torch.Tensor | Sequence[int] | np.ndarray) -> None:
    """Keep only the entries at ``keep`` ([m] int64 on the host, strictly increasing), in that order.

    After verification this drops rejected branches: the committed prefix plus the accepted
    path's positions remain, contiguous again, so the next round appends after them. Entries
    already in place (the prefix ``keep[:s] == 0..s-1``) are not touched; only the later ones are
    copied, once per layer, with one host-to-device copy of their indices for all layers.
    """
    keep = _host_indices(keep)
    if keep.shape[0] > 1 and not bool((keep[1:] > keep[:-1]).all()):
        raise ValueError("keep: indices must be strictly increasing")
    if keep.shape[0] and (keep[0] < 0 or keep[-1] >= cache.length):
        raise ValueError(f"keep: indices must lie in [0, {cache.length}), got {keep[0]}..{keep[-1]}")
    start = _in_place_prefix(keep)
    moved = keep[start:]
    new_length = keep.shape[0]
    layers = [layer for layer in cache.hf.layers if layer.keys is not None and layer.keys.numel() > 0]
    if moved.shape[0] and layers:
        idx = torch.from_numpy(moved).to(layers[0].keys.device, non_blocking=True)  # [m - start] int64
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name)  # [1, kv_heads, entries, head_dim]
                t.narrow(-2, start, moved.shape[0]).copy_(t.index_select(-2, idx))
    for layer in layers:
        if cache.static:
            layer.cumulative_length.fill_(new_length)  # the next update writes here
        else:
            layer.keys = layer.keys[..., :new_length, :]
            layer.values = layer.values[..., :new_length, :]
    cache.length = new_length


def _host_indices(keep: torch.Tensor | Sequence[int] | np.ndarray) -> np.ndarray:
    if isinstance(keep, torch.Tensor):
        if keep.dtype != torch.int64 or keep.dim() != 1:
            raise ValueError(f"keep: expected a [m] int64 tensor, got {list(keep.shape)} {keep.dtype}")
        return keep.cpu().numpy()
    arr = np.asarray(keep, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"keep: expected shape [m], got {list(arr.shape)}")
    return arr


def _in_place_prefix(keep: np.ndarray) -> int:
    """Length of the leading run keep[i] == i (entries that stay where they are)."""
    off = np.flatnonzero(keep != np.arange(keep.shape[0]))
    return int(off[0]) if off.shape[0] else keep.shape[0]


def crop_cache(cache: KVCache, length: int) -> None:
    """Drop every entry at or after ``length``."""
    keep_cache_entries(cache, np.arange(length, dtype=np.int64))
