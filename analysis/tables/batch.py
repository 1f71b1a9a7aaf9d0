"""The analysis tables of a batch replay (a RoundBatch and its BatchResult), vectorised.

numpy works on ``[nodes, rounds]`` arrays of the rounds of one tree shape; Python loops run over
levels, over the few distinct node names and selection summaries, and over rounds only where a
cell is a list or a joined string.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from replay.core.acceptance import node_validate_rows
from replay.core.config import TreeConfig
from replay.core.selection import rank_major_keys, selection_order, selection_positions
from replay.core.tree import node_name
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import (
    SEL_FALLBACK,
    BatchResult,
    RankPaths,
    RoundBatch,
    TreeShape,
    node_parents,
    rank_paths,
    rebuilt_levels,
    replayed_by_shape,
)
from replay.engine.batch.frames import Columns, NullableInts, arrow_round_names, coded, frame_of, record_columns

from .build import (
    IN_BEYOND,
    IN_KEPT,
    IN_NO_ROW,
    IN_NOWHERE,
    IN_UNEXPANDED,
    NODE_COLUMNS,
    ROUND_COLUMNS,
    TARGET_IN,
    finish_table,
)
from .cells import in_run_order
from .definitions import ROUND_COLUMNS_READ

_IN = {name: np.int8(k) for k, name in enumerate(TARGET_IN)}


@dataclass(frozen=True, eq=False)
class TableParts:
    """Rows of some rounds of one run as columns (replay.engine.batch.frames.Columns); frames are built
    once per run by join_parts, not per batch (a frame costs ~10 ms whatever its size)."""

    rounds: list[Columns]  # one per shape of the batch
    nodes: list[Columns]  # none where the node rows were not asked for (batch_metric_parts, batch_key_parts)
    round_ordinals: list[np.ndarray]  # [C] int64 position of each round in its run
    node_ordinals: list[np.ndarray]  # [C * n] int64 the same, per node row
    node_counts: dict | None = None  # asked for (batch_table_parts' counts): the node metrics' counts


@dataclass(frozen=True, eq=False)
class _Nodes:
    """Per-node facts of C rounds of one shape, ``[n, C]`` arrays in tree order (n = nodes + root)."""

    parent: np.ndarray  # [n, C] int64, NO_PARENT for the root
    token: np.ndarray  # [n, C] int64
    logp: np.ndarray  # [n, C] float64
    num_children: np.ndarray  # [n, C] int64
    expanded_slot: np.ndarray  # [n, C] int64, -1 when not expanded
    level_rank: np.ndarray  # [n, C] int64, -1 when unknown
    on_path: np.ndarray  # [n, C] bool
    target_token: np.ndarray  # [n, C] int64, PAD_TOKEN without a target row
    target_rank: np.ndarray  # [n, C] int64, -1 when absent
    target_in: np.ndarray  # [n, C] int8 index into TARGET_IN
    ranked: RankPaths  # each node's rank path from the root


def batch_table_parts(
    batch: RoundBatch,
    res: BatchResult,
    cfg: TreeConfig,
    run: str,
    round_columns: Collection[str] | None = None,
    node_columns: Collection[str] | None = None,
    counts: bool = False,
) -> TableParts:
    """Round and node rows of the rounds ``res`` replayed (``res.ok``), one shape at a time; only
    the columns named when given (no node rows for ``node_columns=()``). ``counts``: with the node
    metrics' counts of those rounds, from the same per-node arrays (analysis.tables.node_counts)."""
    parts = TableParts([], [], [], [])
    shapes = []
    for shape, facts, r, rounds in facts_by_shape(batch, res):
        if counts:
            shapes.append((facts, shape, r))
        cells = _round_columns(r, shape, facts, cfg, run, round_columns)
        parts.rounds.append(cells)
        parts.round_ordinals.append(rounds)
        if node_columns != ():
            names = cells["round"].values if "round" in cells else None
            parts.nodes.append(node_cells(r, shape, facts, run, node_columns, rounds=names))
            parts.node_ordinals.append(np.repeat(rounds, facts.parent.shape[0]))
    if shapes:
        from .node_counts import block_counts

        return replace(parts, node_counts=block_counts(shapes, cfg, run))
    return parts


def join_parts(parts: list[TableParts]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(round table, node table) of one run from its parts, rounds in run order."""
    nodes, node_ords = [c for p in parts for c in p.nodes], [o for p in parts for o in p.node_ordinals]
    return join_slim(parts, ROUND_COLUMNS), frame_in_run_order(nodes, node_ords, NODE_COLUMNS)


# What a run keeps of its round table when its node metrics are counted block by block: LabelledRun's
# keys, stats' selection counts and the columns the round metrics read (ROUND_COLUMNS_READ, named
# beside their definitions: a new metric's columns come along with no edit here).
SLIM_ROUND_COLUMNS = tuple(
    dict.fromkeys(("run", "key_a", "key_b", "selection", *(c for cols in ROUND_COLUMNS_READ.values() for c in cols)))
)
# What compare keeps (it reads no table: LabelledRun's keys and the example round's choice only).
KEY_ROUND_COLUMNS = ("run", "key_a", "key_b", "accepted_length", "stop")


def batch_metric_parts(batch: RoundBatch, res: BatchResult, cfg: TreeConfig, run: str) -> TableParts:
    """SLIM_ROUND_COLUMNS of the rounds ``res`` replayed and their node metrics' counts, counted from
    the per-node arrays of this batch only (analysis.tables.node_counts: no node rows are built), so
    memory does not grow with the run."""
    return batch_table_parts(batch, res, cfg, run, SLIM_ROUND_COLUMNS, (), counts=True)


def frame_in_run_order(columns: list[Columns], ordinals: list[np.ndarray], names: dict) -> pd.DataFrame:
    """One table of ``columns`` (those of ``names``; per row set, ``ordinals`` [rows] int64 each row's
    round's position in its run), rows in run order, typed as the tables are (without rows: every
    column of dtype object)."""
    if not columns:
        return finish_table(pd.DataFrame({c: pd.Series(dtype="object") for c in names}), names)
    return finish_table(frame_of(in_run_order(columns, ordinals)[0], names), names)


def batch_key_parts(
    batch: RoundBatch, res: BatchResult, cfg: TreeConfig, run: str, names: Sequence[str] = KEY_ROUND_COLUMNS
) -> TableParts:
    """The round columns ``names`` (KEY_ROUND_COLUMNS, or others that result_columns gives, and
    "run") of the rounds ``res`` replayed: no node facts are derived."""
    ordinals = run_ordinals(batch, res)
    ok = np.flatnonzero(res.ok)
    if not ok.shape[0]:
        return TableParts([], [], [], [])
    cols = result_columns(res.take(ok), names) | {"run": np.full(ok.shape[0], run, dtype=object)}
    return TableParts([cols], [], [ordinals[ok]], [])


def join_slim(parts: list[TableParts], names: Sequence[str]) -> pd.DataFrame:
    """The round table of one run, only the columns ``names``, rounds in run order."""
    rounds, ordinals = [c for p in parts for c in p.rounds], [o for p in parts for o in p.round_ordinals]
    return frame_in_run_order(rounds, ordinals, {c: ROUND_COLUMNS[c] for c in names})


# --------------------------------------------------------------------------------------------
# Per-node facts


def facts_by_shape(batch: RoundBatch, res: BatchResult) -> Iterator[tuple[TreeShape, _Nodes, BatchResult, np.ndarray]]:
    """(shape, its rounds' per-node facts, their result, [C] int64 their positions in the run) of
    each tree shape of the rounds ``res`` replayed (``res.ok``)."""
    ordinals = run_ordinals(batch, res)
    for shape, members, sub, r in replayed_by_shape(batch, res):
        yield shape, _node_facts(sub, r, shape), r, ordinals[members]


def run_ordinals(batch: RoundBatch, res: BatchResult) -> np.ndarray:
    """[B] int64 each round's position in its run (the batch's ordinals, else 0 .. B - 1); raises
    where ``res`` is not a result of the batch's B rounds."""
    if len(res) != len(batch):
        raise ValueError(f"result of {len(res)} rounds for a batch of {len(batch)}")
    return (
        np.arange(len(batch), dtype=np.int64) if batch.ordinals is None else np.asarray(batch.ordinals, dtype=np.int64)
    )


def _node_facts(batch: RoundBatch, res: BatchResult, shape: TreeShape) -> _Nodes:
    levels = rebuilt_levels(batch, res, shape)
    c = len(batch)
    n = shape.num_nodes + 1
    starts = shape.starts
    token = np.empty((n, c), dtype=np.int64)
    logp = np.zeros((n, c), dtype=np.float64)  # the root's path log-probability is 0
    token[0] = batch.root_tokens
    expanded_slot = np.full((n, c), -1, dtype=np.int64)
    num_children = np.zeros((n, c), dtype=np.int64)
    expanded_rows = []  # per step i: [h_i, C] tree-order ids of the expanded nodes, in slot order
    for i in range(shape.num_steps):
        m = shape.maps[i]
        lo, hi = starts[i + 1], starts[i + 1] + shape.level_sizes[i + 1]
        token[lo:hi] = levels.tokens[i]
        logp[lo:hi] = levels.path_logprob[i]
        rows = starts[i] + levels.chosen[i]
        expanded_rows.append(rows)
        np.put_along_axis(expanded_slot, rows, np.broadcast_to(np.arange(shape.heads[i])[:, None], rows.shape), axis=0)
        np.put_along_axis(num_children, rows, np.broadcast_to(m.width[:, None], rows.shape), axis=0)
    on_path = np.zeros((n, c), dtype=bool)
    on_path[0] = True
    for d in range(res.gamma):
        walked = np.flatnonzero(res.accepted_nodes[d] != PAD_TOKEN)
        on_path[res.accepted_nodes[d, walked], walked] = True
    target_token = _target_tokens(batch, res, shape, np.concatenate(expanded_rows, axis=0))
    target_rank, target_in = _target_positions(batch, shape, expanded_rows, target_token)
    return _Nodes(
        node_parents(shape, levels.chosen),
        token,
        logp,
        num_children,
        expanded_slot,
        _level_ranks(shape, levels.path_logprob, expanded_slot, res.selection),
        on_path,
        target_token,
        target_rank,
        target_in,
        rank_paths(shape, levels.chosen),
    )


def _target_tokens(batch: RoundBatch, res: BatchResult, shape: TreeShape, expanded_order: np.ndarray) -> np.ndarray:
    """[n, C] the target's top-1 at each node (acceptance.target_top1_per_node, per round's layout):
    column 0 of each node's validate row (acceptance.node_validate_rows), PAD_TOKEN without one.

    expanded_order: [num_expanded, C] int64 tree-order ids in validate-row order (parents layout).
    """
    val0 = np.asarray(batch.validate.ids[:, 0, :], dtype=np.int64)  # [vrows, C]
    rows = node_validate_rows(res.layout.astype(bool)[None, :], shape.num_nodes, expanded_order)  # [n, C]
    has = (rows >= 0) & (rows < val0.shape[0])
    return np.where(has, np.take_along_axis(val0, np.where(has, rows, 0), axis=0), PAD_TOKEN)


def _target_positions(batch: RoundBatch, shape: TreeShape, expanded_rows: list[np.ndarray], target: np.ndarray):
    """([n, C] rank of the target's token among the node's recorded candidates, -1 when absent;
    [n, C] int8 where it sits, index into TARGET_IN)."""
    n, c = target.shape
    rank = np.full((n, c), -1, dtype=np.int64)
    where = np.full((n, c), _IN[IN_UNEXPANDED], dtype=np.int8)
    for i, rows in enumerate(expanded_rows):
        t = np.take_along_axis(target, rows, axis=0)  # [h, C]
        cand = np.asarray(batch.steps[i].ids[: shape.heads[i]])  # [h, cols, C] the expanded nodes' rows
        eq = cand == t[:, None, :]
        hit = eq.any(axis=1)
        first = eq.argmax(axis=1)
        width = shape.maps[i].width[:, None]
        code = np.where(first < width, _IN[IN_KEPT], _IN[IN_BEYOND])
        code = np.where(hit, code, _IN[IN_NOWHERE])
        no_row = t == PAD_TOKEN
        code = np.where(no_row, _IN[IN_NO_ROW], code).astype(np.int8)
        np.put_along_axis(where, rows, code, axis=0)
        np.put_along_axis(rank, rows, np.where(hit & ~no_row, first, -1), axis=0)
    return rank, where


def _level_ranks(
    shape: TreeShape, level_lp: list[np.ndarray], expanded_slot: np.ndarray, selection: np.ndarray
) -> np.ndarray:
    """[n, C] each node's rank in its level, every round: by path log-probability where
    the level has scores, else the expanded nodes' slots where the step chose by parents, else the
    rank-major fallback order (a constant of the shape)."""
    n, c = expanded_slot.shape
    out = np.full((n, c), -1, dtype=np.int64)
    out[0] = 0
    for d in range(1, shape.num_steps + 1):
        lo, hi = shape.starts[d], shape.starts[d] + shape.level_sizes[d]
        lp = level_lp[d - 1]  # [L, C]
        have = ~np.isnan(lp).any(axis=0)
        by_score = selection_positions(lp)
        m = shape.maps[d - 1]
        by_fallback = _fallback_positions(m.slot_rank, m.slot_parent)[:, None]
        parents_only = selection[d] != SEL_FALLBACK if d < shape.num_steps else np.zeros(c, dtype=bool)
        level = np.where(parents_only[None, :], expanded_slot[lo:hi], by_fallback)
        out[lo:hi] = np.where(have[None, :], by_score, level)
    return out


def _fallback_positions(ranks: np.ndarray, parent_slots: np.ndarray) -> np.ndarray:
    """[L] int64 each slot's place in the rank-major fallback's selection order (a constant of the shape)."""
    out = np.empty(ranks.shape[0], dtype=np.int64)
    out[selection_order(rank_major_keys(ranks.tolist(), parent_slots.tolist()))] = np.arange(ranks.shape[0])
    return out


# --------------------------------------------------------------------------------------------
# Frames


def _int_na(values: np.ndarray) -> NullableInts:
    """Missing where the value is negative."""
    values = np.asarray(values, dtype=np.int64)
    return NullableInts(values, values < 0)


def node_cells(
    res: BatchResult, shape: TreeShape, f: _Nodes, run: str, names: Collection[str] | None = None, rounds=None
) -> Columns:
    """The node table's columns (those of ``names`` when given), text as frames.Coded; ``rounds``:
    the [C] pyarrow round names when made already (the round columns' "round" values), else made here."""
    n, c = f.parent.shape
    makers = {
        "run": lambda: coded([run], np.zeros(n * c, dtype=np.int64)),
        "round": lambda: coded(arrow_round_names(res.keys) if rounds is None else rounds, np.repeat(np.arange(c), n)),
        "node": lambda: np.tile(np.arange(n, dtype=np.int64), c),
        "name": lambda: coded([node_name(p) for p in f.ranked.paths], _rows(f.ranked.index)),
        "depth": lambda: np.tile(shape.depths, c),
        "parent": lambda: _rows(f.parent),
        "rank": lambda: np.tile(shape.ranks, c),
        "token": lambda: _int_na(_rows(f.token)),  # an unknown root (PAD_TOKEN) is NA, as root_token
        "path_logprob": lambda: _rows(f.logp),
        "num_children": lambda: _rows(f.num_children),
        "expanded": lambda: _rows(f.expanded_slot >= 0),
        "expanded_slot": lambda: _int_na(_rows(f.expanded_slot)),
        "level_rank": lambda: _int_na(_rows(f.level_rank)),
        "on_path": lambda: _rows(f.on_path),
        "target_token": lambda: _int_na(_rows(f.target_token)),
        "target_rank": lambda: _int_na(_rows(f.target_rank)),
        "target_in": lambda: coded(TARGET_IN, _rows(f.target_in)),
    }
    return {k: make() for k, make in makers.items() if names is None or k in names}


def _rows(a: np.ndarray) -> np.ndarray:
    """[n, C] → [C * n]: round-major, tree order within a round (the tables' row order)."""
    return np.ascontiguousarray(a.T).reshape(-1)


def _round_columns(
    res: BatchResult, shape: TreeShape, f: _Nodes, cfg: TreeConfig, run: str, names: Collection[str] | None = None
) -> Columns:
    """The record's columns (replay.engine.batch.frames), then the analysis columns
    (tables.ANALYSIS_COLUMNS, text as frames.Coded); those of ``names`` when given."""
    c = len(res)
    lengths = res.accepted_length.astype(np.int64)
    makers = {
        "run": lambda: coded([run], np.zeros(c, dtype=np.int64)),
        "config": lambda: coded([cfg.short()], np.zeros(c, dtype=np.int64)),
        "tree_type": lambda: np.full(c, int(cfg.tree_type), dtype=np.int64),
        "num_expanded": lambda: np.full(c, shape.num_expanded, dtype=np.int64),
        "root_child_rank": lambda: NullableInts(res.accepted_ranks[0].astype(np.int64), lengths == 0),
        "root_target_rank": lambda: _int_na(f.target_rank[0]),
        "root_target_in": lambda: coded(TARGET_IN, f.target_in[0]),
        "accepted_names": lambda: coded(*accepted_name_codes(res, f)),
    }
    extra = {k: make() for k, make in makers.items() if names is None or k in names}
    return result_columns(res, names) | extra


def result_columns(res: BatchResult, names: Collection[str] | None = None) -> Columns:
    """The round columns a replayed result gives alone, without its tree's nodes: the record's
    (replay.engine.batch.frames) and bonus_known; those of ``names`` when given."""
    known = {"bonus_known": lambda: res.bonus_token != PAD_TOKEN}
    return record_columns(res, names) | {k: make() for k, make in known.items() if names is None or k in names}


def accepted_name_codes(res: BatchResult, f: _Nodes) -> tuple[list[str], np.ndarray]:
    """The rounds' accepted_names (the accepted nodes' names joined by '>') as (texts, [C] int64 each
    round's index into them): the accepted nodes are a path from the root, so a round's text is
    made of the prefixes of its deepest accepted node's rank path, once per distinct path."""
    c = len(res)
    lengths = res.accepted_length.astype(np.int64)
    deepest = res.accepted_nodes[np.maximum(lengths - 1, 0), np.arange(c)]
    path = np.where(lengths > 0, f.ranked.index[np.clip(deepest, 0, None), np.arange(c)], -1)
    distinct, inverse = np.unique(path, return_inverse=True)
    texts = [
        ">".join(node_name(f.ranked.paths[p][:k]) for k in range(1, len(f.ranked.paths[p]) + 1)) if p >= 0 else ""
        for p in distinct.tolist()
    ]
    return texts, inverse.reshape(-1).astype(np.int64)
