"""The fast path: static KV caches, and the small forwards (decode, draft steps, verification)
run through ``torch.compile``.

A static cache keeps its tensors at fixed addresses, which is what CUDA graphs need: on a GPU the
default backend ``cudagraphs`` records each forward shape once and replays it, so a step costs one
graph launch instead of hundreds of kernel launches, with the same kernels as the eager path (so
the same numbers). Prefills (the first forward on a cache, and any forward over more than
``max_tokens``) stay eager. Every distinct token count is its own graph: a static tree has a fixed
count per draft step and per verification, so a run records a handful of them. Static caches come
from a pool per model (``kvcache.CachePool``, capacities rounded up to 256) so that later prompts
reuse the recorded graphs.

Without CUDA the default backend is ``eager``: dynamo traces the forward and runs what it traced
unchanged, which checks on a CPU that the fast path computes exactly what the eager path does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from .kvcache import CachePool
from .models import LiveModel

MAX_COMPILED_TOKENS = 64  # forwards over more tokens (prefills) run eagerly
GRAPH_LIMIT = 64  # distinct compiled shapes per model before dynamo falls back to eager


def fast_path(model: LiveModel, compile: bool = True, backend: str | None = None, max_tokens: int = MAX_COMPILED_TOKENS) -> LiveModel:
    """``model`` on static KV caches; with ``compile``, forwards over at most ``max_tokens`` tokens
    go through ``torch.compile(decoder, backend=...)`` (default: cudagraphs on CUDA, eager elsewhere)."""
    pool = CachePool()
    if not compile:
        return replace(model, static_kv=True, runner=None, cache_pool=pool)
    backend = backend or default_backend(model.device)
    _raise_recompile_limit(GRAPH_LIMIT)
    compiled = torch.compile(model.decoder, backend=backend, dynamic=False)

    def run_compiled(**kwargs: Any) -> Any:
        out = compiled(**kwargs)
        # A graph's outputs live in memory its next replay overwrites: hand out a copy.
        return type(out)(last_hidden_state=out.last_hidden_state.clone())

    def runner(n: int) -> Any:
        return run_compiled if n <= max_tokens else model.decoder

    return replace(model, static_kv=True, runner=runner, cache_pool=pool)


def default_backend(device: torch.device) -> str:
    return "cudagraphs" if device.type == "cuda" else "eager"


def _raise_recompile_limit(limit: int) -> None:
    import torch._dynamo

    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # renamed across torch releases
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), limit))


def cudagraph_skips() -> int:
    """How many compiled graphs fell back from CUDA graphs to plain launches (dynamo's counter)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["inductor"].get(k, 0) for k in ("cudagraph_skips",)))
