"""The batch replay driver: split a RoundBatch by tree shape and into chunks, run the kernel on threads.

Rounds are processed in chunks of 16,384 so that every temporary stays in cache, on a small thread
pool (numpy releases the GIL).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.selection import repeated_row_note
from replay.core.vocab import CHUNK_ROUNDS, PAD_TOKEN
from replay.io.roundbatch import RoundBatch
from replay.util.parallel import default_workers, ordered_map

from .codes import ERR_TOO_MANY_STEPS
from .kernel import _columns, _rebuild_chunk, _replay_chunk, no_rows_faults, unfit_faults
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
    """Every round of ``batch`` has ``shape``; a draft step whose matrices cannot hold it rejects every round."""
    res = replace(
        _empty_result(batch, gamma), shapes=(shape,), expanded=np.full((shape.num_expanded, len(batch)), -1, np.int32)
    )
    res.shape_index[:] = 0
    fits = _steps_that_fit(batch, shape)
    if fits < shape.num_steps:

        def reject(lo: int, hi: int) -> None:
            res.error[lo:hi], res.error_at[:, lo:hi] = unfit_faults(batch, lo, hi, shape, fits, static)

        _run_chunks(len(batch), chunk, workers, reject)
        return res  # no tree was rebuilt: every round rejected, its slots -1
    notes: dict[int, list[str]] = {}
    _run_chunks(
        len(batch), chunk, workers, lambda lo, hi: _replay_chunk(batch, lo, hi, shape, static, res, notes, deeper)
    )
    if static:
        _repeated_rows(batch, shape, res.ok, notes)
    return replace(res, selection_notes={k: tuple(v) for k, v in notes.items()})


def _repeated_rows(batch: RoundBatch, shape: TreeShape, ok: np.ndarray, notes: dict[int, list[str]]) -> None:
    """Note the replayed rounds (ok: [R] bool) a draft step of which holds, beyond its topHead rows, a
    row that repeats one of them (replay.core.selection.repeated_row_note); a stack of no more rows
    than topHead (the usual dump) costs nothing."""
    for i, (st, h) in enumerate(zip(batch.steps, shape.heads)):
        if st.rows <= h:
            continue
        extra, kept = st.ids[h:], st.ids[:h]  # [E, cols, R], [h, cols, R]
        same = (extra[:, None] == kept[None]).all(axis=2)  # [E, h, R]
        hit = same.any(axis=1) & (extra != PAD_TOKEN).any(axis=1) & ok  # [E, R] a repeat, not padding
        for k in np.flatnonzero(hit.any(axis=0)).tolist():
            e = int(np.argmax(hit[:, k]))
            notes.setdefault(k, []).append(repeated_row_note(i, h + e, int(np.argmax(same[e, :, k])), h))


def _steps_that_fit(batch: RoundBatch, shape: TreeShape) -> int:
    """The leading draft steps whose stacked matrices have the rows and columns ``shape`` reads (a
    padded stack is as large as its largest round: the smaller rounds are checked one by one)."""
    for i, (st, h, w) in enumerate(zip(batch.steps, shape.heads, shape.widths)):
        if st.rows < h or st.cols < max(w):
            return i
    return shape.num_steps


def replay_batch(
    batch: RoundBatch,
    cfg: TreeConfig,
    workers: int | None = None,
    chunk_rounds: int = CHUNK_ROUNDS,
) -> BatchResult:
    """Replay every round of ``batch`` with the tree config ``cfg``.

    Rejected rounds come back with ``error != 0`` and its place in ``error_at``
    (their message: replay.engine.batch.rejections).
    """
    workers = default_workers() if workers is None else workers
    gamma = cfg.gamma
    if batch.num_steps > gamma:
        res = _empty_result(batch, gamma)
        res.error[:] = ERR_TOO_MANY_STEPS
        res.error_at[0] = batch.num_steps - 1  # the last step's file is named
        return res
    if cfg.tree_type != TREE_DYNAMIC:
        deeper = cfg.all_rows_of_deeper_trees(batch.num_steps)
        shape = config_tree_shape(cfg, batch.num_steps)
        return _replay_fixed(batch, shape, True, gamma, workers, chunk_rounds, deeper)
    return _replay_dynamic(batch, cfg, workers, chunk_rounds)


def _replay_dynamic(batch: RoundBatch, cfg: TreeConfig, workers: int, chunk_rounds: int) -> BatchResult:
    """Each round with its own shape (read from the dump), rounds of one shape replayed together."""
    index, shapes, _ = dynamic_shapes(batch, cfg)
    res = _empty_result(batch, cfg.gamma)
    parts = []
    for k, shape in enumerate(shapes):
        members = np.flatnonzero(index == k)
        if shape.num_steps < batch.num_steps:  # ERR_NO_ROWS at the step after the shape's last
            res.error[members], res.error_at[:, members] = no_rows_faults(batch.take(members), shape, False)
            res.shape_index[members] = k  # the tree as far as it was read: what its rejection's words read
        else:
            parts.append(
                (members, _replay_fixed(batch.take(members), shape, False, cfg.gamma, workers, chunk_rounds), k)
            )
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


def expanded_nodes(res: BatchResult, shape: TreeShape) -> list[np.ndarray]:
    """The selection replay_batch made, read from ``res.expanded`` (rounds of ``shape``): per draft
    step i, [h_i, R] int64 level-local index of the node expanded in each slot, in selection order
    (analysis needs the recorded trees, not only the accepted paths). Rejected rounds hold 0."""
    if res.expanded is None:
        raise ValueError("the batch result kept no expanded slots (BatchResult.expanded): its trees are unknown")
    return [
        np.maximum(res.expanded[o : o + h], 0).astype(np.int64)  # -1 (a rejected round): any in-range node
        for o, h in zip(shape.head_offsets, shape.heads)
    ]


@dataclass(frozen=True, eq=False)
class RebuiltLevels:
    """The recorded trees of R rounds of one shape, level by level (as replay_batch rebuilds them)."""

    tokens: list[np.ndarray]  # per draft step i: [L_{i+1}, R] int64 draft tokens of level i+1
    chosen: list[np.ndarray]  # per draft step i: [h_i, R] int64 level-local node expanded in each slot
    path_logprob: list[np.ndarray]  # per draft step i: [L_{i+1}, R] float64, NaN without scores


def rebuilt_levels(batch: RoundBatch, res: BatchResult, shape: TreeShape) -> RebuiltLevels:
    """Every level of every round of ``batch`` (all of ``shape``; ``res``: their replay, whose
    selection is taken as made). Rejected rounds hold meaningless values."""
    r = len(batch)
    chosen = expanded_nodes(res, shape)
    tokens = [np.empty((n, r), dtype=np.int64) for n in shape.level_sizes[1:]]
    logp = [np.full((n, r), np.nan) for n in shape.level_sizes[1:]]
    for lo, hi in _chunks(r, CHUNK_ROUNDS):
        tree = _rebuild_chunk(batch, lo, hi, shape, False, _columns(hi - lo), chosen)
        for i in range(shape.num_steps):
            tokens[i][:, lo:hi] = tree.tokens[i]
            if tree.level_lp[i] is not None:
                logp[i][:, lo:hi] = tree.level_lp[i]
    return RebuiltLevels(tokens, chosen, logp)
