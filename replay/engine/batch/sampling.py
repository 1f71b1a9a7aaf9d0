"""Sampling-mode replay on the batch arrays: replay.core.sampling over a RoundBatch and its BatchResult.

The rule is replay.core.sampling's (chunk_bounds); this module only hands it the batch's own
column-major arrays, shape by shape and chunk by chunk: the level tokens the greedy rebuild gives,
each expanded slot's node, and each slot's validate row (rebuilt and read just before the rule
uses them, so both are in cache).
Expanded slots are the rows of the rule's TreeLayout, the same for every round of a shape: slot
(i, j), step i's j-th expanded node, holds the distribution every child of that slot is drawn
from, whichever node the round expanded there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from replay.core.acceptance import validate_row
from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.sampling import greedy_logp
from replay.core.sampling_columns import (
    CHUNK_ROUNDS,
    ChunkInput,
    RowNode,
    TreeLayout,
    chunk_bounds,
    chunk_problems,
)
from replay.core.sampling_problems import PROBLEM_NONE, VocabTooSmall
from replay.core.temperature import check_temperature
from replay.io.roundbatch import RoundBatch

from .codes import ERR_OK
from .kernel import _columns, _rebuild_chunk, level_tokens
from .result import BatchResult
from .shapes import TreeShape

NO_SCORES_CODE = -1  # BatchSampling.problem of a replayed round whose validate rows have no scores


@dataclass(frozen=True, eq=False)
class BatchSampling:
    """Per round of a BatchResult at one temperature; NaN where ``usable`` is False."""

    temperature: float
    usable: np.ndarray  # [R] bool: replayed, with scores, rows sound
    problem: np.ndarray  # [R] int8: replay.core.sampling_problems PROBLEM_* or NO_SCORES_CODE (0 when usable)
    expected_lo: np.ndarray  # [R] float64
    expected_hi: np.ndarray  # [R]
    length_ge_lo: np.ndarray  # [R, G+1] P(accepted length >= d), d = 0..G
    length_ge_hi: np.ndarray  # [R, G+1]
    exact: np.ndarray  # [R] bool
    variance: np.ndarray  # [R] NaN unless exact
    needs_vocab: bool
    # [R] bool: the dump's node_logprobs at T decided it (replay.engine.batch.recorded); None: no round
    from_node_logprobs: np.ndarray | None = None


@lru_cache(maxsize=256)
def shape_layout(shape: TreeShape) -> TreeLayout:
    """The rule's shared TreeLayout of a shape: node u of level i+1 hangs under slot (i, j), row
    head_offsets[i] + j; the depths are the shape's own."""
    rows = [shape.head_offsets[i] + shape.maps[i].slot_parent for i in range(shape.num_steps)]
    return TreeLayout(np.concatenate([[0], *rows]).astype(np.int64), shape.depths)


def _chunk_rows(
    part: RoundBatch, nodes: list[RowNode], layout_all: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids [E, K, C], logp [E, K, C], has [E, C]) of rounds lo..hi: slot e reads validate row e
    (parents layout) or its node's row (all layout; nodes[e]: an int, or [C] per round of the
    chunk); has is False where that row is past the stack's rows."""
    v = part.validate
    assert v.logp is not None  # batch_sampling checks it first
    vrows, k, _ = v.ids.shape
    n_slots, c = len(nodes), hi - lo
    every, none = bool(layout_all.all()), not layout_all.any()
    if none and n_slots <= vrows:  # parents layout throughout: views, no copy
        return v.ids[:n_slots, :, lo:hi], v.logp[:n_slots, :, lo:hi], np.ones((n_slots, c), bool)
    from replay.core.loops import gather_rows_loop  # numba: imported at first use (about 0.35 s)

    logp = v.logp
    ids = np.empty((n_slots, k, c), dtype=v.ids.dtype)
    lp = np.empty((n_slots, k, c), dtype=logp.dtype)
    has = np.empty((n_slots, c), dtype=bool)
    for e, node in enumerate(nodes):
        row = node if every else e if none else validate_row(layout_all, node, e)
        if isinstance(row, int) or (row == row[0]).all():  # one row for every round of the chunk (the root): a copy
            one = int(row if isinstance(row, int) else row[0])
            has[e] = one < vrows
            one = min(one, vrows - 1)
            ids[e], lp[e] = v.ids[one, :, lo:hi], logp[one, :, lo:hi]
            continue
        has[e] = row < vrows
        row = np.minimum(row, vrows - 1)
        gather_rows_loop(v.ids, logp, row, lo, ids[e], lp[e])  # K cells per round from the row each round expanded
    return ids, lp, has


def shape_chunks(
    part: RoundBatch,
    shape: TreeShape,
    static: bool,
    layout_all: np.ndarray,
    expanded: np.ndarray | None = None,
    chunk_rounds: int = CHUNK_ROUNDS,
) -> Iterator[ChunkInput]:
    """chunk_bounds' chunks of ``part`` (every round of ``shape``, replayed), one at a time: each
    chunk's trees (the expanded slots replay_batch kept, [H, R] as BatchResult.expanded, else rebuilt
    as it rebuilds them, its kernel's _rebuild_chunk), then its rows read, so that the rule finds
    both in cache; nothing is kept for the whole part."""
    r, n1 = len(part), shape.num_nodes + 1
    for lo in range(0, r, chunk_rounds):
        hi = min(lo + chunk_rounds, r)
        levels, chosen = _chunk_tree(part, shape, static, expanded, lo, hi)
        tok = np.empty((n1, hi - lo), dtype=np.result_type(*levels))
        tok[0] = 0  # the root's entry, unused
        for i, level in enumerate(levels):
            tok[shape.starts[i + 1] : shape.starts[i + 1] + level.shape[0]] = level
        nodes: list[RowNode] = [0]
        for i in range(1, shape.num_steps):
            nodes.extend(shape.starts[i] + chosen[i][j].astype(np.int64) for j in range(shape.heads[i]))
        yield lo, hi, _chunk_rows(part, nodes, layout_all[lo:hi], lo, hi), tok, nodes


def _chunk_tree(
    part: RoundBatch, shape: TreeShape, static: bool, expanded: np.ndarray | None, lo: int, hi: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(level tokens [L_{i+1}, C], expanded slots [h_i, C]) per draft step of rounds lo..hi: the
    slots from ``expanded`` where the greedy replay kept them (the selection is made once, by it),
    the level tokens read as its rebuild reads them."""
    if expanded is None:
        tree = _rebuild_chunk(part, lo, hi, shape, static, _columns(hi - lo))
        return tree.tokens, tree.chosen
    levels = [level_tokens(st, m, lo, hi) for st, m in zip(part.steps, shape.maps)]
    chosen = [expanded[o : o + h, lo:hi] for o, h in zip(shape.head_offsets, shape.heads)]
    return levels, chosen


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
    needs_vocab = False
    for members, part, shape, chunks in _shape_parts(batch, result, cfg, t, problem):
        try:
            b = chunk_bounds(shape_layout(shape), chunks, shape.num_nodes + 1, members.shape[0], t, vocab_size)
        except VocabTooSmall as exc:
            raise _vocab_error_naming(part, exc) from None
        needs_vocab |= b.needs_vocab
        d = b.length_ge_lo.shape[0]
        at: np.ndarray | slice = slice(None) if members.shape[0] == r else members  # every round: no gather
        exp_lo[at], exp_hi[at] = b.expected_lo, b.expected_hi
        ge_lo[at, d:] = 0.0
        ge_hi[at, d:] = 0.0
        ge_lo[at, :d], ge_hi[at, :d] = b.length_ge_lo.T, b.length_ge_hi.T
        exact[at], variance[at], problem[at] = b.exact, b.variance, b.problem
    usable = usable_rounds(result, problem)
    return BatchSampling(t, usable, problem, exp_lo, exp_hi, ge_lo, ge_hi, exact, variance, needs_vocab)


def batch_problems(
    batch: RoundBatch, result: BatchResult, cfg: TreeConfig, temperature: float, vocab_size: int | None = None
) -> np.ndarray:
    """[R] int8 batch_sampling's ``problem`` without its bounds (what a refusal at T reads): the
    rows' statistics of each chunk, not the walk (replay.core.sampling_columns.chunk_problems)."""
    t = check_temperature(temperature)
    problem = np.zeros(len(batch), dtype=np.int8)
    for members, part, shape, chunks in _shape_parts(batch, result, cfg, t, problem):
        try:
            problem[members] = chunk_problems(shape_layout(shape), chunks, members.shape[0], t, vocab_size)
        except VocabTooSmall as exc:
            raise _vocab_error_naming(part, exc) from None
    return problem


def usable_rounds(result: BatchResult, problem: np.ndarray) -> np.ndarray:
    """[R] bool BatchSampling.usable: replayed, with scores, rows sound (``problem`` [R] int8: 0)."""
    out: np.ndarray = (result.error == ERR_OK) & (problem == PROBLEM_NONE)
    return out


def _shape_parts(
    batch: RoundBatch, result: BatchResult, cfg: TreeConfig, t: float, problem: np.ndarray
) -> Iterator[tuple[np.ndarray, RoundBatch, TreeShape, Iterator[ChunkInput]]]:
    """(members [M] their rounds, the batch on them, their shape, their chunks: shape_chunks) per shape
    of the replayed rounds; none where the rows have no scores at T > 0 (``problem`` [R] int8: those
    rounds' NO_SCORES_CODE written). T = 0 reads only each row's top-1: no scores needed."""
    r = len(batch)
    ok = result.error == ERR_OK
    if batch.validate.logp is None:
        if t > 0.0:
            problem[ok] = NO_SCORES_CODE
            return
        ids = batch.validate.ids  # [rows, K, R]
        lp = greedy_logp(np.moveaxis(ids, 1, -1))  # [rows, R, K]
        batch = replace(batch, validate=replace(batch.validate, logp=np.moveaxis(lp, -1, 1)))
    static = cfg.tree_type != TREE_DYNAMIC
    for k, shape in enumerate(result.shapes):
        members = np.flatnonzero(ok & (result.shape_index == k))
        if not members.shape[0]:
            continue
        part = batch if members.shape[0] == r else batch.take(members)  # every round: no copy
        kept = result.expanded
        if kept is not None and members.shape[0] != r:
            kept = kept[:, members]
        yield members, part, shape, shape_chunks(part, shape, static, result.layout[members] == 1, kept)


def _vocab_error_naming(part: RoundBatch, exc: VocabTooSmall) -> Exception:
    """VocabBelowCandidates for a batch: the file of its widest validate row (the
    rows are padded to it, so that round holds the candidates counted), as ``replay`` names it. A run
    packed from memory has no files to name: the message stays the option's own."""
    from ..sampling import VocabBelowCandidates

    if part.names is None:
        return exc
    i = int(np.argmax(part.validate.own_cols()))
    path = part.names.scores_path(part.key(i), None if part.ordinals is None else int(part.ordinals[i]))
    return VocabBelowCandidates.naming(path, exc)
