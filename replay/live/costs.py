"""The verification cost curve: one forward's time against the number of tokens it verifies, on a
fixed committed prefix. The analysis cost model reads ``cost_curve.json`` instead of guessing.
Timed like every live measurement (``timing.time_methods``): docs/live-harness.md, "Cost curve"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from replay.util.atomic import write_json_atomic

from .clock import device_clock
from .forward import causal_visible, crop_cache, forward_tokens, new_cache
from .models.load import LiveModel
from .timing import Clock, Method, Timing, time_methods

DEFAULT_SIZES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class CostCurve:
    tokens: tuple[int, ...]
    verify_s: tuple[float, ...]  # target forward seconds (median pass) per entry of ``tokens``
    draft_s: tuple[float, ...] | None  # draft forward seconds per entry of ``tokens``
    draft_step_s: float | None  # draft forward over 1 token (a step with one expanded node)
    prefix_tokens: int
    repeats: int
    device: str
    target: str
    draft: str | None
    verify_s_min: tuple[float, ...] = ()  # the fastest and slowest pass per entry of ``tokens``
    verify_s_max: tuple[float, ...] = ()
    timing: dict[str, Any] | None = None  # the session: every pass, the order, the machine's load


def forward_method(model: LiveModel, n: int, prefix_tokens: int, ids: torch.Tensor, cache: Any) -> Method:
    """One forward over ``n`` new tokens after the ``prefix_tokens`` cached in ``cache``, which is
    cropped back afterwards (``ids`` [>= prefix + n] int64 on the model's device)."""
    pos = torch.arange(prefix_tokens, prefix_tokens + n, device=model.device)  # [n] int64
    # [n, prefix + n] bool; the mask's shape, not its pattern, sets the cost
    vis = causal_visible(prefix_tokens, n, model.device)

    def run(_prompt: int, _repeat: int) -> int:
        forward_tokens(model, cache, ids[prefix_tokens : prefix_tokens + n], pos, vis)
        crop_cache(cache, prefix_tokens)
        return n

    return run


def prefilled(model: LiveModel, prefix_tokens: int, max_new: int, seed: int = 0) -> tuple[torch.Tensor, Any]:
    """Random ids ([prefix + max_new] int64) and a cache holding the first ``prefix_tokens`` of them."""
    rng = np.random.default_rng(seed)
    # [prefix + max_new] int64
    ids = torch.from_numpy(rng.integers(0, model.vocab_size, prefix_tokens + max_new)).to(model.device)
    cache = new_cache(model)
    if prefix_tokens:
        pos = torch.arange(prefix_tokens, device=model.device)  # [prefix] int64
        forward_tokens(model, cache, ids[:prefix_tokens], pos, causal_visible(0, prefix_tokens, model.device))
    return ids, cache


def measure_cost_curve(
    target: LiveModel,
    draft: LiveModel | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
    prefix_tokens: int = 64,
    repeats: int = 3,
    clock: Clock | None = None,
) -> CostCurve:
    sizes = [int(n) for n in sizes]
    methods: dict[str, Method] = {}
    ids, cache = prefilled(target, prefix_tokens, max(sizes))
    methods.update({f"target:{n}": forward_method(target, n, prefix_tokens, ids, cache) for n in sizes})
    if draft is not None:
        dids, dcache = prefilled(draft, prefix_tokens, max(sizes))
        methods.update(
            {f"draft:{n}": forward_method(draft, n, prefix_tokens, dids, dcache) for n in sorted({*sizes, 1})}
        )
    devices = [target.device] + ([draft.device] if draft is not None else [])
    timing = time_methods(methods, 1, repeats, clock or device_clock(*devices))
    verify = [timing.method(f"target:{n}").time for n in sizes]
    drafts = tuple(timing.method(f"draft:{n}").time.median for n in sizes) if draft is not None else None
    return CostCurve(
        tuple(sizes),
        tuple(s.median for s in verify),
        drafts,
        timing.method("draft:1").time.median if draft is not None else None,
        prefix_tokens,
        repeats,
        str(target.device),
        target.name,
        draft.name if draft else None,
        tuple(s.min for s in verify),
        tuple(s.max for s in verify),
        _session(timing),
    )


def _session(timing: Timing) -> dict[str, Any]:
    body = timing.to_json()
    body.pop("methods")  # the curve's own columns say it per size
    return body


def write_cost_curve(path: str | Path, curve: CostCurve, extra: dict[str, Any] | None = None) -> Path:
    """Write ``cost_curve.json``; ``extra`` adds fields (a sweep's worker and device)."""
    body: dict[str, Any] = asdict(curve)
    body = {k: list(v) if isinstance(v, tuple) else v for k, v in body.items()}
    write_json_atomic(path, {**body, **(extra or {})})
    return Path(path)
