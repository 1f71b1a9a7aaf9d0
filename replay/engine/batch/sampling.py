"""Sampling-mode replay on the batch arrays: replay.core.sampling over a RoundBatch and its BatchResult.

The rule is replay.core.sampling.sampling_bounds; this module only builds its per-node arrays
(tokens, parents, depths, each node's validate row) from the column-major stacks, shape by shape,
and scatters the bounds back to the run's rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.sampling import PROBLEM_NONE, check_temperature, greedy_logp, sampling_bounds
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


def _node_rows(batch: RoundBatch, shape: TreeShape, parents: np.ndarray, layout_all: np.ndarray):
    """Each node's validate row, round-major: ids, logp [R, N+1, K] and has_row [R, N+1]."""
    ids = batch.validate.ids  # [rows, K, R]
    logp = batch.validate.logp
    assert logp is not None  # batch_sampling checks it first
    rows = ids.shape[0]
    r, n1 = parents.shape
    k = ids.shape[1]
    out_ids = np.full((r, n1, k), -1, dtype=np.int64)
    out_lp = np.full((r, n1, k), -np.inf)
    has = np.zeros((r, n1), dtype=bool)
    lanes = np.arange(r)
    # all layout: row u is node u
    m = min(rows, n1)
    sel = np.flatnonzero(layout_all)
    if sel.shape[0]:
        out_ids[sel, :m] = np.transpose(ids[:m, :, sel], (2, 0, 1))
        out_lp[sel, :m] = np.transpose(logp[:m, :, sel], (2, 0, 1))
        has[sel, :m] = True
    # parents layout: row head_offsets[i] + j is step i's j-th expanded node (selection order)
    sel = np.flatnonzero(~layout_all)
    if sel.shape[0]:
        row = 0
        for i, h in enumerate(shape.heads):
            for j in range(h):
                if row >= rows:
                    break
                # the node expanded in slot j of step i: the parent of that slot's first child
                first_child = shape.starts[i + 1] + int(np.sum(shape.widths[i][:j]))
                node = parents[sel, first_child]
                out_ids[sel, node] = ids[row, :, sel]
                out_lp[sel, node] = logp[row, :, sel]
                has[sel, node] = True
                row += 1
    del lanes
    return out_ids, out_lp, has


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
    needs_vocab = False
    if batch.validate.logp is None:
        if t == 0.0:  # the greedy walk reads only the top-1 column: no scores needed
            ids = batch.validate.ids  # [rows, K, R]
            lp = greedy_logp(np.moveaxis(ids, 1, -1))  # [rows, R, K]
            batch = replace(batch, validate=replace(batch.validate, logp=np.moveaxis(lp, -1, 1)))
        else:
            problem[ok] = NO_SCORES_CODE
            ok = np.zeros(r, dtype=bool)
    static = cfg.tree_type != TREE_DYNAMIC
    for k, shape in enumerate(result.shapes):
        members = np.flatnonzero(ok & (result.shape_index == k))
        if not members.shape[0]:
            continue
        part = batch.take(members)
        levels = rebuilt_levels(part, shape, static)
        parents, depths = shape_arrays(shape, levels.chosen)
        tokens = np.zeros(parents.shape, dtype=np.int64)
        for i, tok in enumerate(levels.tokens):
            lo = shape.starts[i + 1]
            tokens[:, lo : lo + tok.shape[0]] = tok.T
        ids, lp, has = _node_rows(part, shape, parents, result.layout[members] == 1)
        b = sampling_bounds(tokens, parents, depths[None], ids, lp, has, t, vocab_size)
        needs_vocab |= b.needs_vocab
        d = b.length_ge_lo.shape[1]
        exp_lo[members], exp_hi[members] = b.expected_lo, b.expected_hi
        ge_lo[members] = 0.0
        ge_hi[members] = 0.0
        ge_lo[members, :d], ge_hi[members, :d] = b.length_ge_lo, b.length_ge_hi
        exact[members], variance[members], problem[members] = b.exact, b.variance, b.problem
    usable = ok & (problem == PROBLEM_NONE)
    return BatchSampling(t, usable, problem, exp_lo, exp_hi, ge_lo, ge_hi, exact, variance, needs_vocab)
