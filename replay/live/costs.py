"""The verification cost curve: one forward's time against the number of tokens it verifies, on a
fixed committed prefix. The analysis cost model reads ``cost_curve.json`` instead of guessing."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..atomic import write_json_atomic
from .clock import timed_call
from .forward import causal_visible, crop_cache, forward_tokens, new_cache
from .models import LiveModel

DEFAULT_SIZES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class CostCurve:
    tokens: tuple[int, ...]
    verify_s: tuple[float, ...]  # target forward seconds (median) per entry of ``tokens``
    draft_s: tuple[float, ...] | None  # draft forward seconds per entry of ``tokens``
    draft_step_s: float | None  # draft forward over 1 token (a step with one expanded node)
    prefix_tokens: int
    repeats: int
    device: str
    target: str
    draft: str | None


def forward_seconds(model: LiveModel, sizes: Sequence[int], prefix_tokens: int, repeats: int, seed: int = 0) -> list[float]:
    """Median seconds of one forward over n new tokens after ``prefix_tokens`` cached ones, per n."""
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(0, model.vocab_size, prefix_tokens + max(sizes))).to(model.device)
    cache = new_cache(model)
    if prefix_tokens:
        pos = torch.arange(prefix_tokens, device=model.device)
        forward_tokens(model, cache, ids[:prefix_tokens], pos, causal_visible(0, prefix_tokens, model.device))

    def once(n: int) -> float:
        pos = torch.arange(prefix_tokens, prefix_tokens + n, device=model.device)
        vis = causal_visible(prefix_tokens, n, model.device)  # the mask's shape, not its pattern, sets the cost
        _, seconds = timed_call(model.device, lambda: forward_tokens(model, cache, ids[prefix_tokens : prefix_tokens + n], pos, vis))
        crop_cache(cache, prefix_tokens)
        return seconds

    for n in sizes:  # warm-up: first calls allocate and pick kernels
        once(n)
    return [statistics.median(once(n) for _ in range(repeats)) for n in sizes]


def measure_cost_curve(
    target: LiveModel,
    draft: LiveModel | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
    prefix_tokens: int = 64,
    repeats: int = 3,
) -> CostCurve:
    verify = forward_seconds(target, sizes, prefix_tokens, repeats)
    drafts = forward_seconds(draft, sizes, prefix_tokens, repeats) if draft is not None else None
    step = forward_seconds(draft, [1], prefix_tokens, repeats)[0] if draft is not None else None
    return CostCurve(
        tuple(int(n) for n in sizes), tuple(verify), tuple(drafts) if drafts else None, step,
        prefix_tokens, repeats, str(target.device), target.name, draft.name if draft else None,
    )


def write_cost_curve(path: str | Path, curve: CostCurve) -> Path:
    body: dict[str, Any] = asdict(curve)
    body = {k: list(v) if isinstance(v, tuple) else v for k, v in body.items()}
    write_json_atomic(path, body)
    return Path(path)
