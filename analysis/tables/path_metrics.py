"""What the accepted path met at each depth, from the node table (analysis.tables.build), per run:
where the target's token sat among the path node's candidates (rank_of_hit, hit_outcome_by_depth:
the signal for topKSpec) and which expanded parent the path went through (parent_slot_usage: the
signal for topHead). Each metric is finished from counts that add up over disjoint sets of rounds
(the *_counts / *_finish pairs), so a run's blocks can be counted one at a time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .build import IN_BEYOND, IN_KEPT, IN_NO_ROW, IN_NOWHERE, require_columns


def _path_attempts(nodes: pd.DataFrame) -> pd.DataFrame:
    """Expanded nodes on the accepted path: one row per (round, depth the target tried to extend to)."""
    require_columns(nodes, ("run", "round", "depth", "on_path", "expanded", "target_in", "target_rank"), "nodes")
    sel = nodes[nodes["on_path"] & nodes["expanded"]].copy()
    sel["depth"] = sel["depth"] + 1  # the node at depth d-1 verifies its children at depth d
    return sel


def rank_of_hit(nodes: pd.DataFrame) -> pd.DataFrame:
    """Where the target's choice sat, per run and depth d, over the rounds that attempted depth d.

    For the path's expanded node at depth d-1 with a target row: ``target_rank`` is the draft rank
    of the target's token among that node's recorded candidates (NA: nowhere) and ``target_in``
    says kept (a hit: the path continued to that rank), beyond (a near miss in recorded columns
    past the kept width: the signal for widening topKSpec) or nowhere.
    fraction = count / attempts with a target row at that depth.
    """
    return rank_of_hit_finish(rank_of_hit_counts(nodes))


RANK_KEYS = ["run", "depth", "target_in", "target_rank"]


def in_run_order(table: pd.DataFrame, by: list[str], ascending: bool | list[bool] = True) -> pd.DataFrame:
    """``table`` sorted by ``by`` (its first key the run): the runs in the order they first appear,
    which is the order they were named, as every other table has them; the other keys by value."""
    first_seen = lambda col: pd.Series(pd.factorize(col)[0], index=col.index) if col.name == "run" else col  # noqa: E731
    return table.sort_values(by, ascending=ascending, kind="stable", key=first_seen)


def rank_of_hit_counts(nodes: pd.DataFrame) -> pd.DataFrame | None:
    """rank_of_hit's counts: one row per (run, depth, target_in, target_rank) with ``count``; None without attempts."""
    sel = _path_attempts(nodes)
    sel = sel[sel["target_in"] != IN_NO_ROW]
    if sel.empty:
        return None
    return sel.groupby(RANK_KEYS, sort=False, dropna=False).size().rename("count").reset_index()


def rank_of_hit_finish(g: pd.DataFrame | None) -> pd.DataFrame:
    if g is None:
        return pd.DataFrame(columns=["run", "depth", "target_in", "target_rank", "count", "fraction"])
    totals = g.groupby(["run", "depth"])["count"].sum().rename("attempts")
    g = g.join(totals, on=["run", "depth"])
    g["fraction"] = g["count"] / g["attempts"]
    order = {IN_KEPT: 0, IN_BEYOND: 1, IN_NOWHERE: 2}
    g["_o"] = g["target_in"].map(order)
    g = in_run_order(g, ["run", "depth", "_o", "target_rank"]).drop(columns=["_o", "attempts"])
    return g.reset_index(drop=True)


def hit_outcome_by_depth(nodes: pd.DataFrame) -> pd.DataFrame:
    """Per run and depth: attempts and the shares kept / beyond / nowhere (see rank_of_hit).

    beyond_fraction_d = #{near misses at d} / #{attempts at d with a target row}: the accepted
    length a wider topKSpec at step d-1 could have added is bounded by it.
    """
    return hit_outcome_finish(hit_outcome_counts(nodes))


_OUTCOMES = (IN_KEPT, IN_BEYOND, IN_NOWHERE)


def hit_outcome_counts(nodes: pd.DataFrame) -> list[dict]:
    """hit_outcome_by_depth's counts: one dict per (run, depth), without the fractions."""
    sel = _path_attempts(nodes)
    rows = []
    for (run, depth), grp in sel.groupby(["run", "depth"], sort=False):
        counts = grp["target_in"].value_counts()
        known = int(len(grp) - counts.get(IN_NO_ROW, 0))
        row = {"run": run, "depth": int(depth), "attempts": int(len(grp)), "with_target_row": known}
        rows.append(row | {k: int(counts.get(k, 0)) for k in _OUTCOMES})
    return rows


def hit_outcome_finish(counts: list[dict]) -> pd.DataFrame:
    """The table from counts, by (run, depth): each share over the attempts with a target row."""
    rows = []
    for c in counts:
        row = {k: c[k] for k in ("run", "depth", "attempts", "with_target_row")}
        known = c["with_target_row"]
        for k in _OUTCOMES:
            row[k] = c[k]
            row[f"{k}_fraction"] = c[k] / known if known else np.nan
        rows.append(row)
    cols = ["run", "depth", "attempts", "with_target_row"] + [c for k in _OUTCOMES for c in (k, f"{k}_fraction")]
    return in_run_order(pd.DataFrame(rows, columns=cols), ["run", "depth"]).reset_index(drop=True)


def parent_slot_usage(nodes: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    """Which expanded parent the accepted path went through: the signal for topHead.

    For every round and depth d >= 1 with d < num_steps (a draft step d ran and could have
    expanded the path's node there): was the path's node at depth d expanded, and at which slot
    (position in selection order)? When it was not, ``level_rank`` k says topHead[d] >= k+1
    would have expanded it. fraction = rounds / rounds whose path reached depth d with d < steps.
    """
    return parent_slot_finish(parent_slot_counts(nodes, rounds))


SLOT_KEYS = ["run", "depth", "expanded", "expanded_slot", "level_rank"]


def parent_slot_counts(nodes: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame | None:
    """parent_slot_usage's counts: one row per (run, depth, expanded, expanded_slot, level_rank)
    with ``rounds``; None when no round qualifies."""
    require_columns(rounds, ("run", "round", "num_steps"), "rounds")
    sel = nodes[nodes["on_path"] & (nodes["depth"] >= 1)].merge(
        rounds[["run", "round", "num_steps"]], on=["run", "round"]
    )
    sel = sel[sel["depth"] < sel["num_steps"]]
    if sel.empty:
        return None
    return sel.groupby(SLOT_KEYS, dropna=False, sort=False).size().rename("rounds").reset_index()


def parent_slot_finish(g: pd.DataFrame | None) -> pd.DataFrame:
    cols = ["run", "depth", "expanded", "expanded_slot", "level_rank", "rounds", "fraction"]
    if g is None:
        return pd.DataFrame(columns=cols)
    totals = g.groupby(["run", "depth"])["rounds"].sum().rename("total")
    g = g.join(totals, on=["run", "depth"])
    g["fraction"] = g["rounds"] / g["total"]
    g = in_run_order(g, ["run", "depth", "expanded", "expanded_slot", "level_rank"], [True, True, False, True, True])
    return g[cols].reset_index(drop=True)
