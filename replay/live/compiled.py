"""The fast path: static KV caches, and the small forwards (decode, draft steps, verification)
replayed as CUDA graphs or run through ``torch.compile``; the three modes (MODES):
docs/live-harness.md, "The fast path".

``"graphs"``: each decoder forward shape (tokens, cache width, cache) is recorded once. The
forward's inputs are copied into the graph's own buffers before each replay, and its output is
copied out (the next replay overwrites it). Recording needs one real forward first (a warm-up on a
side stream); it writes the same cache entries the call itself then writes, and the cache's write
position is put back. ``"compile"`` with ``inductor`` and ``mode="reduce-overhead"`` on a GPU
compiles kernels and graphs, at minutes of compile time.

Prefills (the first forward on a cache, and any forward over more than ``max_tokens``) stay eager.
A static tree has a fixed token count per draft step and per verification, so a run records a
handful of graphs. Static caches come from a pool per model (``kvcache.CachePool``, capacities
rounded up to 256), so later prompts replay the graphs recorded for earlier ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from .kvcache import CachePool
from .models.load import LiveModel

MAX_FAST_TOKENS = 64  # forwards over more tokens (prefills) run eagerly
GRAPH_LIMIT = 64  # distinct compiled shapes per model before dynamo falls back to eager
MODES = ("graphs", "compile", "static")


def fast_path(
    model: LiveModel,
    mode: str | None = None,
    backend: str = "eager",
    compile_mode: str | None = None,
    max_tokens: int = MAX_FAST_TOKENS,
) -> LiveModel:
    """``model`` on pooled static KV caches, its forwards over at most ``max_tokens`` tokens run by
    ``mode`` (default: "graphs" on CUDA, "compile" elsewhere); ``backend``/``compile_mode`` are
    torch.compile's for mode "compile"."""
    mode = mode or ("graphs" if model.device.type == "cuda" else "compile")
    if mode not in MODES:
        raise ValueError(f"fast path mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "static":
        return replace(model, static_kv=True, runner=None, cache_pool=CachePool())
    if mode == "graphs":
        if model.device.type != "cuda":
            raise ValueError("fast path mode 'graphs' needs a CUDA device (use 'compile' or 'static' elsewhere)")
        return with_runner(model, GraphRunner(model, CudaGraphs()), max_tokens)
    return with_runner(model, _compiled(model, backend, compile_mode), max_tokens)


def with_runner(model: LiveModel, fast: Callable[..., Any], max_tokens: int = MAX_FAST_TOKENS) -> LiveModel:
    """``model`` on pooled static caches, its forwards over at most ``max_tokens`` tokens run by ``fast``."""

    def runner(n: int) -> Any:
        return fast if n <= max_tokens else model.decoder

    return replace(model, static_kv=True, runner=runner, cache_pool=CachePool())


def _compiled(model: LiveModel, backend: str, compile_mode: str | None) -> Callable[..., Any]:
    _raise_recompile_limit(GRAPH_LIMIT)
    compiled = torch.compile(model.decoder, backend=backend, mode=compile_mode, dynamic=False)

    def run(**kwargs: Any) -> Any:
        out = compiled(**kwargs)
        # Compiled graphs may hand out memory their next run overwrites: keep a copy.
        return Hidden(out.last_hidden_state.clone())

    return run


def _raise_recompile_limit(limit: int) -> None:
    import torch._dynamo

    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # renamed across torch releases
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), limit))


@dataclass(frozen=True)
class Hidden:
    """What a fast forward returns: the decoder output's ``last_hidden_state`` only."""

    last_hidden_state: torch.Tensor  # [1, n, H]


# ---------------------------------------------------------------------------------- CUDA graphs


class CudaGraphs:
    """Records ``fn`` as a CUDA graph; ``record`` returns the replay function and the graph's output."""

    def record(self, fn: Callable[[], torch.Tensor]) -> tuple[Callable[[], None], torch.Tensor]:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
        return graph.replay, out

    def warm_up(self, fn: Callable[[], torch.Tensor]) -> None:
        """One real run on a side stream before recording (lazy allocations, library handles)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)


@dataclass
class _Graph:
    replay: Callable[[], None]
    input_ids: torch.Tensor  # [1, n] the graph's own input buffers
    position_ids: torch.Tensor
    attention_mask: torch.Tensor  # [1, 1, n, width]
    out: torch.Tensor  # [1, n, H] the graph's output buffer


class GraphRunner:
    """Decoder forwards replayed from graphs recorded per (tokens, width, cache) on first use.

    ``graphs`` records and warms up (``CudaGraphs`` on a GPU; tests pass one that re-runs the
    function at each replay, to check the buffers and the cache bookkeeping on a CPU).
    """

    def __init__(self, model: LiveModel, graphs: Any) -> None:
        self.model = model
        self.graphs = graphs
        self._recorded: dict[tuple[int, int, int], _Graph] = {}

    @property
    def recorded(self) -> int:
        return len(self._recorded)

    def __call__(
        self,
        *,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        use_cache: bool = True,
        **kw: Any,
    ) -> Hidden:
        hf = kw[self.model.cache_kwarg]
        key = (int(input_ids.shape[1]), int(attention_mask.shape[-1]), id(hf))
        graph = self._recorded.get(key)
        if graph is None:
            graph = self._record(hf, input_ids, position_ids, attention_mask)
            self._recorded[key] = graph
        graph.input_ids.copy_(input_ids)
        graph.position_ids.copy_(position_ids)
        graph.attention_mask.copy_(attention_mask)
        graph.replay()
        return Hidden(graph.out.clone())

    def _record(
        self, hf: Any, input_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> _Graph:
        ids, pos, mask = input_ids.clone(), position_ids.clone(), attention_mask.clone()

        def forward() -> torch.Tensor:
            kwargs = {self.model.cache_kwarg: hf}
            return self.model.decoder(
                input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=True, **kwargs
            ).last_hidden_state

        written = [layer.cumulative_length.clone() for layer in hf.layers]
        # The warm-up writes this forward's cache entries (the replay rewrites the same values)
        # and moves the write position on: put it back before recording and before the replay.
        self.graphs.warm_up(forward)
        _restore(hf, written)
        replay, out = self.graphs.record(forward)
        _restore(hf, written)
        return _Graph(replay, ids, pos, mask, out)


def _restore(hf: Any, written: list[torch.Tensor]) -> None:
    for layer, length in zip(hf.layers, written):
        layer.cumulative_length.copy_(length)
