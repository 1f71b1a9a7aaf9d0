"""Test-only builders for the shape search: a model of known acceptance, and every static config
within a budget (the brute force the branch and bound is checked against)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from analysis.shapes.model import ShapeModel
from replay.core.config import TreeConfig


def model_from_hits(hit: np.ndarray, cols: int | None = None, draft_probs: np.ndarray | None = None) -> ShapeModel:
    """A known model: hit [depths, cols] float64 → p[d, q, r] = hit[d, r].

    draft_probs: [depths, cols] the draft's fixed probability of each rank per depth (replay.testing.synth),
    None when the engine is taken to rank nodes as the acceptance model does.
    """
    hit = np.asarray(hit, dtype=np.float64)
    if hit.ndim != 2:
        raise ValueError(f"hit: expected [depths, cols], got {hit.shape}")
    cols = hit.shape[1] if cols is None else cols
    h = hit[:, :cols]
    p = np.repeat(h[:, None, :], cols, axis=1)
    order = None
    if draft_probs is not None:
        dp = np.log(np.asarray(draft_probs, dtype=np.float64)[:, :cols])
        order = np.repeat(dp[np.minimum(np.arange(hit.shape[0]), dp.shape[0] - 1)][:, None, :], cols, axis=1)
    z = np.zeros(hit.shape[0], dtype=bool)
    return ShapeModel(
        p,
        p.copy(),
        p.copy(),
        np.zeros((hit.shape[0], cols), np.int64),
        np.zeros((hit.shape[0], cols), bool),
        z,
        0,
        0,
        None,
        order,
    )


def enumerate_configs(budget: int, max_depth: int, max_width: int, limit: int = 200_000) -> Iterator[TreeConfig]:
    """Every static config with at most ``budget`` nodes, depth <= max_depth, widths <= max_width.

    For brute-force checks; raises ValueError past ``limit`` configs.
    """
    count = 0

    def compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
        if parts == 0:
            if total == 0:
                yield ()
            return
        for first in range(1, min(max_width, total - parts + 1) + 1):
            for rest in compositions(total - first, parts - 1):
                yield (first,) + rest

    def grow(heads: list[int], spec: list[tuple[int, ...]], level: int, left: int) -> Iterator[TreeConfig]:
        nonlocal count
        if spec:
            count += 1
            if count > limit:
                raise ValueError(f"more than {limit} configs: lower the budget or depth")
            yield TreeConfig.from_lists(spec, heads)
        if len(spec) == max_depth:
            return
        for h in range(1, level + 1):
            for used in range(h, left + 1):
                for widths in compositions(used, h):
                    yield from grow(heads + [h], spec + [widths], sum(widths), left - used)

    yield from grow([], [], 1, budget)
