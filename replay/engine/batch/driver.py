"""The batch replay driver: split a RoundBatch by tree shape and into chunks, run the kernel on threads.

Rounds are processed in chunks of 16,384 so that every temporary stays in cache, on a small thread
pool (numpy releases the GIL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.io.roundbatch import RoundBatch
from replay.util.parallel import default_workers, ordered_map  # noqa: F401  (default_workers re-exported)

from .codes import DEFAULT_CHUNK_ROUNDS, ERR_MATRIX_SHAPE, ERR_OK, ERR_TOO_MANY_STEPS
from .kernel import _columns, _rebuild_chunk, _replay_chunk
from .result import _ROUND_ARRAYS, BatchResult, _empty_result
from .shapes import TreeShape, config_tree_shape, dynamic_shapes


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


def _run_chunks(n: int, chunk: int, workers: int, fn: Callable[[int, int], None]) -> None:
    spans = _chunks(n, chunk)
    for _ in ordered_map(lambda span: fn(*span), spans, min(workers, len(spans))):
        pass


def _replay_fixed(
    batch: RoundBatch, shape: TreeShape, static: bool, gamma: int, workers: int, chunk: int, deeper: tuple = ()
) -> BatchResult:
    """Every round of ``batch`` has ``shape``; structural mismatches reject the whole batch."""
    res = replace(
        _empty_result(batch, gamma), shapes=(shape,), expanded=np.full((shape.num_expanded, len(batch)), -1, np.int32)
    )
    res.shape_index[:] = 0
    small = np.zeros(len(batch), dtype=bool)  # the round's own matrix is smaller than the shape needs
    for st, h, w in zip(batch.steps, shape.heads, shape.widths):
        if st.rows < h or st.cols < max(w):
            res.error[:] = ERR_MATRIX_SHAPE  # every round of the batch has these matrix sizes
            return replace(res, expanded=None)  # no tree was rebuilt
        if st.padded:  # padded rounds (replay.io.roundbatch): each round's own sizes decide
            small |= (st.own_rows() < h) | (st.own_cols() < max(w))
    notes: dict[int, list[str]] = {}
    pre = small if small.any() else None
    _run_chunks(
        len(batch), chunk, workers, lambda lo, hi: _replay_chunk(batch, lo, hi, shape, static, res, notes, pre, deeper)
    )
    return replace(res, selection_notes={k: tuple(v) for k, v in notes.items()})


def replay_batch(
    batch: RoundBatch,
    cfg: TreeConfig,
    workers: int | None = None,
    chunk_rounds: int = DEFAULT_CHUNK_ROUNDS,
) -> BatchResult:
    """Replay every round of ``batch`` with the tree config ``cfg``; same outcomes as replay_round.

    Rounds the reference would reject come back with ``error != 0`` (their message: replay.engine.runs).
    """
    workers = default_workers() if workers is None else workers
    gamma = cfg.gamma
    if batch.num_steps > gamma:
        res = _empty_result(batch, gamma)
        res.error[:] = ERR_TOO_MANY_STEPS
        return res
    if cfg.tree_type != TREE_DYNAMIC:
        deeper = cfg.all_rows_of_deeper_trees(batch.num_steps)
        shape = config_tree_shape(cfg, batch.num_steps)
        return _replay_fixed(batch, shape, True, gamma, workers, chunk_rounds, deeper)
    index, shapes, err = dynamic_shapes(batch, cfg)
    res = _empty_result(batch, gamma)
    res.error[:] = err
    parts = []
    for k, shape in enumerate(shapes):
        members = np.flatnonzero((index == k) & (err == ERR_OK))
        if members.shape[0]:
            part = _replay_fixed(batch.take(members), shape, False, gamma, workers, chunk_rounds)
            parts.append((members, part, k))
    slots = max((p.expanded.shape[0] for _, p, _ in parts if p.expanded is not None), default=0)
    out = replace(res, shapes=tuple(shapes), expanded=np.full((slots, len(batch)), -1, np.int32))
    notes = {}
    for members, part, k in parts:
        for name in _ROUND_ARRAYS:
            if name not in ("keys", "root_tokens", "layout_stated"):
                getattr(out, name)[..., members] = getattr(part, name)
        if part.expanded is not None:
            out.expanded[: part.expanded.shape[0], members] = part.expanded
        out.shape_index[members] = np.where(part.shape_index >= 0, k, -1)
        notes.update({int(members[i]): v for i, v in part.selection_notes.items()})
    return replace(out, selection_notes=notes)


def expanded_nodes(
    batch: RoundBatch, shape: TreeShape, static: bool, chunk_rounds: int = DEFAULT_CHUNK_ROUNDS
) -> list[np.ndarray]:
    """The selection replay_batch makes for rounds of ``shape``: per draft step i, [h_i, R] int64
    level-local index of the node expanded in each slot, in selection order (analysis needs the
    recorded trees, not only the accepted paths). Rounds replay_batch rejects hold meaningless values.
    """
    out = [np.empty((h, len(batch)), dtype=np.int64) for h in shape.heads]
    for lo, hi in _chunks(len(batch), chunk_rounds):
        for i, ch in enumerate(_rebuild_chunk(batch, lo, hi, shape, static, _columns(hi - lo)).chosen):
            out[i][:, lo:hi] = ch
    return out


@dataclass(frozen=True, eq=False)
class RebuiltLevels:
    """The recorded trees of R rounds of one shape, level by level (as replay_batch rebuilds them)."""

    tokens: list[np.ndarray]  # per draft step i: [L_{i+1}, R] int64 draft tokens of level i+1
    chosen: list[np.ndarray]  # per draft step i: [h_i, R] int64 level-local node expanded in each slot
    path_logprob: list[np.ndarray]  # per draft step i: [L_{i+1}, R] float64, NaN without scores


def rebuilt_levels(
    batch: RoundBatch, shape: TreeShape, static: bool, chunk_rounds: int = DEFAULT_CHUNK_ROUNDS
) -> RebuiltLevels:
    """Every level of every round of ``batch`` (all of ``shape``). Rejected rounds hold meaningless values."""
    r = len(batch)
    tokens = [np.empty((n, r), dtype=np.int64) for n in shape.level_sizes[1:]]
    chosen = [np.empty((h, r), dtype=np.int64) for h in shape.heads]
    logp = [np.full((n, r), np.nan) for n in shape.level_sizes[1:]]
    for lo, hi in _chunks(r, chunk_rounds):
        tree = _rebuild_chunk(batch, lo, hi, shape, static, _columns(hi - lo))
        for i in range(shape.num_steps):
            tokens[i][:, lo:hi] = tree.tokens[i]
            chosen[i][:, lo:hi] = tree.chosen[i]
            if tree.level_lp[i] is not None:
                logp[i][:, lo:hi] = tree.level_lp[i]
    return RebuiltLevels(tokens, chosen, logp)


def replay_batches(
    batches: Iterable[RoundBatch], cfg: TreeConfig, workers: int | None = None, chunk_rounds: int = DEFAULT_CHUNK_ROUNDS
) -> BatchResult:
    """Several batches (one run's groups) → one result in run order when ordinals are known."""
    parts = [replay_batch(b, cfg, workers, chunk_rounds) for b in batches]
    if not parts:
        raise ValueError("no rounds to replay")
    return BatchResult.concat(parts).sorted_by_ordinal()
