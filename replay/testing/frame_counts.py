"""A block's node-metric counts by way of its node table: the reference the counts straight from the
per-node arrays (analysis.tables.batch.batch_metric_parts, analysis.tables.node_counts) are held
equal to."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables.batch import SLIM_ROUND_COLUMNS, SlimParts, batch_table_parts
from analysis.tables.build import NODE_COLUMNS, finish_table
from analysis.tables.path_metrics import hit_outcome_counts, parent_slot_counts, rank_of_hit_counts
from analysis.tables.slot_hits import node_hits_counts, slot_hits_counts
from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.batch.frames import Columns, concat_columns, frame_of, take_rows

# The node table's columns the node metrics read (node_metric_counts).
METRIC_NODE_COLUMNS = (
    "run",
    "round",
    "node",
    "name",
    "depth",
    "parent",
    "rank",
    "expanded",
    "expanded_slot",
    "level_rank",
    "on_path",
    "target_rank",
    "target_in",
)


def metric_parts_by_frame(batch: RoundBatch, res: BatchResult, cfg: TreeConfig, run: str) -> SlimParts:
    """batch_metric_parts by way of the block's node table (node_metric_counts).

    The ``round`` column of both tables is the round's position in its run (int64), not its text:
    what the metrics compare rounds by."""
    node_columns = [c for c in METRIC_NODE_COLUMNS if c != "round"]
    parts = batch_table_parts(batch, res, cfg, run, SLIM_ROUND_COLUMNS, node_columns)
    if not parts.rounds:
        return SlimParts([], [])
    for cols, ords in zip(parts.rounds, parts.round_ordinals):
        cols["round"] = ords
    for cols, ords in zip(parts.nodes, parts.node_ordinals):
        cols["round"] = ords
    rounds = _frame(parts.rounds, parts.round_ordinals, {"round": "", **{c: "" for c in SLIM_ROUND_COLUMNS}})
    nodes = _frame(parts.nodes, parts.node_ordinals, {c: NODE_COLUMNS[c] for c in METRIC_NODE_COLUMNS})
    slim = [{c: cols[c] for c in SLIM_ROUND_COLUMNS} for cols in parts.rounds]
    return SlimParts(slim, parts.round_ordinals, node_metric_counts(nodes, rounds, {run: cfg}))


def _frame(columns: list[Columns], ordinals: list[np.ndarray], names: dict) -> pd.DataFrame:
    """One table of ``columns`` (those of ``names``), rows in run order (stable: a round's nodes stay
    in tree order), typed as the tables are."""
    cols = concat_columns(columns)
    ords = np.concatenate(ordinals)
    if ords.shape[0] > 1 and (ords[1:] < ords[:-1]).any():
        cols = take_rows(cols, np.argsort(ords, kind="stable"))
    return finish_table(frame_of(cols, names), names)


def node_metric_counts(nodes: pd.DataFrame, rounds: pd.DataFrame, configs: dict) -> dict:
    """The node metrics' counts (what analysis.tables.metrics.combine_node_counts finishes) from a
    block's node table, the pandas form that analysis.tables.node_counts counts from the batch arrays."""
    return {
        "rank_of_hit": rank_of_hit_counts(nodes),
        "hit_outcome": hit_outcome_counts(nodes),
        "parent_slot": parent_slot_counts(nodes, rounds),
        "slot_hits": slot_hits_counts(nodes, configs),
        "node_hits": node_hits_counts(nodes),
    }
