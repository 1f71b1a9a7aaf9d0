"""Sampling-mode replay on the batch arrays: replay.core.sampling over a RoundBatch and its BatchResult.

The rule is replay.core.sampling.column_bounds; this module only hands it the batch's own
column-major arrays, shape by shape: the level tokens the greedy rebuild gives, each expanded
slot's node, and each slot's validate row (chunk by chunk, so the rows are read once, in cache).
Expanded slots are the rows of the rule's TreeLayout, the same for every round of a shape: slot
(i, j), step i's j-th expanded node, holds the distribution every child of that slot is drawn
from, whichever node the round expanded there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.sampling import (
    PROBLEM_NONE,
    RowNode,
    RowReader,
    TreeLayout,
    check_temperature,
    column_bounds,
    greedy_logp,
)
from replay.core.vocab import NO_PARENT
from replay.io.roundbatch import RoundBatch

from .codes import ERR_OK
from .driver import rebuilt_levels
from .result import BatchResult
from .shapes import TreeShape

NO_SCORES_CODE = -1  # BatchSampling.problem of a replayed round whose validate rows have no scores


@dataclass(frozen=True, eq=False)
class BatchSampling:
    """Per round of a BatchResult at one temperature; NaN where ``usable`` is False."""

    temperature: float
    usable: np.ndarray  # [R] bool: replayed, with scores, rows sound
    problem: np.ndarray  # [R] int8: replay.core.sampling PROBLEM_* or NO_SCORES_CODE (0 when usable)
    expected_lo: np.ndarray  # [R] float64
    expected_hi: np.ndarray  # [R]
    length_ge_lo: np.ndarray  # [R, G+1] P(accepted length >= d), d = 0..G
    length_ge_hi: np.ndarray  # [R, G+1]
    exact: np.ndarray  # [R] bool
    variance: np.ndarray  # [R] NaN unless exact
    needs_vocab: bool
    # [R] bool: the dump's node_logprobs at T decided it (replay.engine.batch.recorded); None: no round
    from_node_logprobs: np.ndarray | None = None


def shape_arrays(shape: TreeShape, chosen: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """parents [R, N+1] (tree order) and depths [N+1] of rounds of ``shape`` from their selection.

    Level i+1 in tree order is the children of step i's expanded nodes, slot by slot (selection
    order), each slot's children in rank order; chosen[i] is [h_i, R] level-local parents.
    """
    r = chosen[0].shape[1] if chosen else 0
    n1 = shape.num_nodes + 1
    parents = np.empty((r, n1), dtype=np.int64)
    parents[:, 0] = NO_PARENT
    depths = np.zeros(n1, dtype=np.int64)
    for i, widths in enumerate(shape.widths):
        slot = np.repeat(np.arange(len(widths)), widths)  # which expanded slot each level node hangs under
        lo = shape.starts[i + 1]
        parents[:, lo : lo + slot.shape[0]] = (shape.starts[i] + chosen[i][slot]).T
        depths[lo : lo + slot.shape[0]] = i + 1
    return parents, depths


@lru_cache(maxsize=256)
def shape_layout(shape: TreeShape) -> TreeLayout:
    """The rule's TreeLayout of a shape: node u of level i+1 hangs under slot (i, j), row head_offsets[i] + j."""
    edge_row = np.concatenate([shape.head_offsets[i] + shape.maps[i].slot_parent for i in range(shape.num_steps)])
    depths = np.repeat(np.arange(shape.num_steps + 1), shape.level_sizes)
    return TreeLayout(edge_row.astype(np.int64), depths.astype(np.int64))


@dataclass(frozen=True, eq=False)
class ShapeInputs:
    """column_bounds' inputs for R rounds of one shape, from the greedy rebuild."""

    tokens: np.ndarray  # [N+1, R] int64 (the root's entry unused)
    row_node: list[RowNode]  # per expanded slot: its node id (0 for the root, else [R] int64 per round)
    rows: RowReader  # rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C])


def shape_inputs(part: RoundBatch, shape: TreeShape, static: bool, layout_all: np.ndarray) -> ShapeInputs:
    """Tokens, slot nodes and the row reader of ``part`` (every round of ``shape``, replayed)."""
    levels = rebuilt_levels(part, shape, static)
    r = len(part)
    tokens = np.zeros((shape.num_nodes + 1, r), dtype=np.int64)
    for i, tok in enumerate(levels.tokens):
        tokens[shape.starts[i + 1] : shape.starts[i + 1] + tok.shape[0]] = tok
    row_node: list[RowNode] = [0]
    for i in range(1, shape.num_steps):
        row_node.extend(shape.starts[i] + levels.chosen[i][j] for j in range(shape.heads[i]))
    return ShapeInputs(tokens, row_node, _row_reader(part, row_node, layout_all))


def _row_reader(part: RoundBatch, row_node: list[RowNode], layout_all: np.ndarray) -> RowReader:
    """rows(lo, hi) for column_bounds: slot e reads validate row e (parents layout) or its node's
    row (all layout); has is False where that row is past the stack's rows."""
    v = part.validate
    assert v.logp is not None  # batch_sampling checks it first
    vrows, k, r = v.ids.shape
    n_slots = len(row_node)
    if not layout_all.any() and n_slots <= vrows:  # parents layout throughout: views, no copy
        return lambda lo, hi: (v.ids[:n_slots, :, lo:hi], v.logp[:n_slots, :, lo:hi], np.ones((n_slots, hi - lo), bool))
    logp = v.logp
    flat = v.ids.flags.c_contiguous and logp.flags.c_contiguous  # as the readers give them

    def rows(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c = hi - lo
        cols = np.arange(lo, hi)
        cells = np.arange(k)[:, None] * r + cols[None, :]  # [K, C] offsets within one row
        ids = np.empty((n_slots, k, c), dtype=v.ids.dtype)
        lp = np.empty((n_slots, k, c), dtype=logp.dtype)
        has = np.empty((n_slots, c), dtype=bool)
        for e, node in enumerate(row_node):
            row = np.where(layout_all[lo:hi], node if isinstance(node, int) else node[lo:hi], e)
            has[e] = row < vrows
            row = np.minimum(row, vrows - 1)
            if (row == row[0]).all():  # one row for every round of the chunk (the root): a copy
                ids[e], lp[e] = v.ids[row[0], :, lo:hi], logp[row[0], :, lo:hi]
            elif flat:  # a gather: K cells per round from the row each round expanded
                idx = cells + row[None, :] * (k * r)
                np.take(v.ids.reshape(-1), idx, out=ids[e])
                np.take(logp.reshape(-1), idx, out=lp[e])
            else:  # the same gather on strided stacks, without copying them whole
                ids[e] = v.ids[row[None, :], np.arange(k)[:, None], cols[None, :]]
                lp[e] = logp[row[None, :], np.arange(k)[:, None], cols[None, :]]
        return ids, lp, has

    return rows


def batch_sampling(
    batch: RoundBatch, result: BatchResult, cfg: TreeConfig, temperature: float, vocab_size: int | None = None
) -> BatchSampling:
    """Bounds for every replayed round of ``batch`` (``result`` = replay_batch(batch, cfg))."""
    t = check_temperature(temperature)
    r = len(batch)
    g = result.accepted_nodes.shape[0]
    problem = np.zeros(r, dtype=np.int8)
    exp_lo, exp_hi = np.full(r, np.nan), np.full(r, np.nan)
    ge_lo, ge_hi = np.full((r, g + 1), np.nan), np.full((r, g + 1), np.nan)
    exact = np.zeros(r, dtype=bool)
    variance = np.full(r, np.nan)
    ok = result.error == ERR_OK
    if batch.validate.logp is None:
        if t == 0.0:  # the greedy walk reads only the top-1 column: no scores needed
            ids = batch.validate.ids  # [rows, K, R]
            lp = greedy_logp(np.moveaxis(ids, 1, -1))  # [rows, R, K]
            batch = replace(batch, validate=replace(batch.validate, logp=np.moveaxis(lp, -1, 1)))
        else:
            problem[ok] = NO_SCORES_CODE
            ok = np.zeros(r, dtype=bool)
    static = cfg.tree_type != TREE_DYNAMIC
    needs_vocab = False
    for k, shape in enumerate(result.shapes):
        members = np.flatnonzero(ok & (result.shape_index == k))
        if not members.shape[0]:
            continue
        part = batch if members.shape[0] == r else batch.take(members)  # every round: no copy
        inputs = shape_inputs(part, shape, static, result.layout[members] == 1)
        b = column_bounds(shape_layout(shape), inputs.rows, inputs.tokens, inputs.row_node, t, vocab_size)
        needs_vocab |= b.needs_vocab
        d = b.length_ge_lo.shape[0]
        exp_lo[members], exp_hi[members] = b.expected_lo, b.expected_hi
        ge_lo[members] = 0.0
        ge_hi[members] = 0.0
        ge_lo[members, :d], ge_hi[members, :d] = b.length_ge_lo.T, b.length_ge_hi.T
        exact[members], variance[members], problem[members] = b.exact, b.variance, b.problem
    usable = ok & (problem == PROBLEM_NONE)
    return BatchSampling(t, usable, problem, exp_lo, exp_hi, ge_lo, ge_hi, exact, variance, needs_vocab)
