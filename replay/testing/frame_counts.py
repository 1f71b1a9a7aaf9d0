"""The node metrics by way of a node table: the reference that the counts straight from the per-node
arrays (analysis.tables.batch.batch_metric_parts, analysis.tables.node_counts: what every loaded run
uses) are held equal to. Each metric's counts here are pandas group-bys over the node table's rows,
finished by the same analysis.tables.metrics.combine_node_counts; the metrics' definitions are on
their finishing functions (analysis.tables.path_metrics, analysis.tables.slot_hits).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from analysis.tables.batch import SLIM_ROUND_COLUMNS, TableParts, batch_table_parts, frame_in_run_order
from analysis.tables.build import IN_NO_ROW, NODE_COLUMNS, Tables, require_columns
from analysis.tables.metrics import all_metrics
from analysis.tables.path_metrics import OUTCOMES, RANK_KEYS, SLOT_KEYS
from analysis.tables.slot_hits import shape_signature
from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch, config_tree_shape

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


def metric_parts_by_frame(batch: RoundBatch, res: BatchResult, cfg: TreeConfig, run: str) -> TableParts:
    """batch_metric_parts by way of the block's node table (node_metric_counts).

    The ``round`` column of both tables is the round's position in its run (int64), not its text:
    what the metrics compare rounds by."""
    node_columns = [c for c in METRIC_NODE_COLUMNS if c != "round"]
    parts = batch_table_parts(batch, res, cfg, run, SLIM_ROUND_COLUMNS, node_columns)
    if not parts.rounds:
        return TableParts([], [], [], [])
    for cols, ords in zip(parts.rounds, parts.round_ordinals):
        cols["round"] = ords
    for cols, ords in zip(parts.nodes, parts.node_ordinals):
        cols["round"] = ords
    rounds = frame_in_run_order(
        parts.rounds, parts.round_ordinals, {"round": "", **{c: "" for c in SLIM_ROUND_COLUMNS}}
    )
    nodes = frame_in_run_order(parts.nodes, parts.node_ordinals, {c: NODE_COLUMNS[c] for c in METRIC_NODE_COLUMNS})
    slim = [{c: cols[c] for c in SLIM_ROUND_COLUMNS} for cols in parts.rounds]
    return TableParts(slim, [], parts.round_ordinals, [], node_metric_counts(nodes, rounds, {run: cfg}))


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


def metrics_by_frame(tables: Tables) -> dict[str, pd.DataFrame]:
    """analysis.tables.metrics.all_metrics of ``tables`` with its node metrics counted from the node
    table instead of the counts the tables bring."""
    counts = node_metric_counts(tables.nodes, tables.rounds, tables.configs)
    return all_metrics(replace(tables, node_counts=[counts]))


def _path_attempts(nodes: pd.DataFrame) -> pd.DataFrame:
    """Expanded nodes on the accepted path: one row per (round, depth the target tried to extend to)."""
    require_columns(nodes, ("run", "round", "depth", "on_path", "expanded", "target_in", "target_rank"), "nodes")
    sel = nodes[nodes["on_path"] & nodes["expanded"]].copy()
    sel["depth"] = sel["depth"] + 1  # the node at depth d-1 verifies its children at depth d
    return sel


def rank_of_hit_counts(nodes: pd.DataFrame) -> pd.DataFrame | None:
    """The rank_of_hit table's counts: one row per (run, depth, target_in, target_rank) with ``count``; None without attempts."""
    sel = _path_attempts(nodes)
    sel = sel[sel["target_in"] != IN_NO_ROW]
    if sel.empty:
        return None
    return sel.groupby(RANK_KEYS, sort=False, dropna=False).size().rename("count").reset_index()


def hit_outcome_counts(nodes: pd.DataFrame) -> list[dict]:
    """The hit_outcome table's counts: one dict per (run, depth), without the fractions."""
    sel = _path_attempts(nodes)
    rows = []
    for (run, depth), grp in sel.groupby(["run", "depth"], sort=False):
        counts = grp["target_in"].value_counts()
        known = int(len(grp) - counts.get(IN_NO_ROW, 0))
        row = {"run": run, "depth": int(depth), "attempts": int(len(grp)), "with_target_row": known}
        rows.append(row | {k: int(counts.get(k, 0)) for k in OUTCOMES})
    return rows


def parent_slot_counts(nodes: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame | None:
    """The parent_slot table's counts: one row per (run, depth, expanded, expanded_slot, level_rank)
    with ``rounds``; None when no round qualifies."""
    require_columns(rounds, ("run", "round", "num_steps"), "rounds")
    sel = nodes[nodes["on_path"] & (nodes["depth"] >= 1)].merge(
        rounds[["run", "round", "num_steps"]], on=["run", "round"]
    )
    sel = sel[sel["depth"] < sel["num_steps"]]
    if sel.empty:
        return None
    return sel.groupby(SLOT_KEYS, dropna=False, sort=False).size().rename("rounds").reset_index()


def _signature(parents: np.ndarray, ranks: np.ndarray, slots: np.ndarray) -> list[tuple[int, int]]:
    """(slot of the parent among its step's expanded nodes, rank) per non-root node, in tree order.

    parents, ranks: [n] int64; slots: [n] int64 expanded slot (-1 when not expanded).
    """
    if not (parents.ndim == 1 and parents.shape == ranks.shape == slots.shape):
        raise ValueError(
            f"parents {parents.shape}, ranks {ranks.shape}, slots {slots.shape}: expected equal [n] shapes"
        )
    return [(int(slots[parents[u]]), int(ranks[u])) for u in range(1, parents.shape[0])]


def _hits_by_round(grp: pd.DataFrame, canon: list[tuple[int, int]], n_nodes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(rounds with node u present [n] int64, with u on the path [n] int64, rounds of another
    shape): one round at a time, for node rows in any order."""
    present = np.zeros(n_nodes, dtype=np.int64)
    hits = np.zeros(n_nodes, dtype=np.int64)
    other = 0
    for _, rnd in grp.groupby("round", sort=False):
        par = rnd["parent"].to_numpy(dtype=np.int64)
        rk = rnd["rank"].to_numpy(dtype=np.int64)
        sl = rnd["expanded_slot"].fillna(-1).to_numpy(dtype=np.int64)
        sig = _signature(par, rk, sl)
        if len(sig) > len(canon) or sig != canon[: len(sig)]:
            other += 1
            continue
        n = len(sig) + 1
        present[:n] += 1
        hits[:n] += rnd["on_path"].to_numpy(dtype=bool)
    return present, hits, other


def slot_hits_counts(nodes: pd.DataFrame, configs: dict) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """The slot_hits table's counts: run → (rounds with slot u present [n], with u on the path [n],
    rounds of another shape), runs in the order they first appear."""
    require_columns(nodes, ("run", "round", "node", "parent", "rank", "expanded_slot", "on_path"), "nodes")
    out = {}
    for run, grp in nodes.groupby("run", sort=False):
        shape = config_tree_shape(configs[run], configs[run].gamma)
        canon = shape_signature(shape)
        out[run] = _hits_by_round(grp, canon, shape.num_nodes + 1)
    return out


def node_hits_counts(nodes: pd.DataFrame) -> pd.DataFrame:
    """The node_hits table's counts: one row per (run, name), runs and names in the order they first
    appear, with depth, rank, rounds_present, on_path and ``_path`` (the draft ranks from the root)."""
    require_columns(nodes, ("run", "round", "node", "name", "depth", "parent", "rank", "on_path"), "nodes")
    g = nodes.groupby(["run", "name"], sort=False)
    out = pd.DataFrame(
        {
            "depth": g["depth"].first(),
            "rank": g["rank"].first(),
            "rounds_present": g.size(),
            "on_path": g["on_path"].sum(),
        }
    ).reset_index()
    path = _rank_paths(nodes, g)  # (run, name) -> draft ranks from the root
    out["_path"] = [path[(r, n)] for r, n in zip(out["run"], out["name"])]
    return out


def _rank_paths(nodes: pd.DataFrame, groups) -> dict[tuple, tuple[int, ...]]:
    """(run, name) -> the draft ranks from the root to the node, read from one round holding it
    (walking its parents there): only the rounds that first hold each name are looked at.

    A node table alone (no batch) has no selection for replay.engine.batch's rank_paths.
    """
    first = groups.head(1)  # one row per (run, name)
    want = pd.MultiIndex.from_arrays([first["run"], first["round"]]).unique()
    sub = nodes[pd.MultiIndex.from_arrays([nodes["run"], nodes["round"]]).isin(want)]
    table = {
        (r, k, int(u)): (int(p), int(q))
        for r, k, u, p, q in zip(sub["run"], sub["round"], sub["node"], sub["parent"], sub["rank"])
    }
    out = {}
    for run, rnd, u, name in zip(first["run"], first["round"], first["node"], first["name"]):
        ranks, v = [], int(u)
        while v > 0:
            parent, rank = table[(run, rnd, v)]
            ranks.append(rank)
            v = parent
        out[(run, name)] = tuple(reversed(ranks))
    return out
