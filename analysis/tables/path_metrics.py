"""What the accepted path met at each depth, per run: where the target's token sat among the path
node's candidates (rank_of_hit, hit_outcome: the signal for topKSpec) and which expanded parent the
path went through (parent_slot: the signal for topHead). Each table is finished here from counts
that add up over disjoint sets of rounds (analysis.tables.node_counts counts them from a block's
batch arrays; analysis.tables.metrics.combine_node_counts adds the blocks up), so a run's blocks
can be counted one at a time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .build import IN_BEYOND, IN_KEPT, IN_NOWHERE

RANK_KEYS = ["run", "depth", "target_in", "target_rank"]


def in_run_order(table: pd.DataFrame, by: list[str], ascending: bool | list[bool] = True) -> pd.DataFrame:
    """``table`` sorted by ``by`` (its first key the run): the runs in the order they first appear,
    which is the order they were named, as every other table has them; the other keys by value."""
    first_seen = lambda col: pd.Series(pd.factorize(col)[0], index=col.index) if col.name == "run" else col  # noqa: E731
    return table.sort_values(by, ascending=ascending, kind="stable", key=first_seen)


def rank_of_hit_finish(g: pd.DataFrame | None) -> pd.DataFrame:
    """Where the target's choice sat, per run and depth d, over the rounds that attempted depth d.

    For the path's expanded node at depth d-1 with a target row: ``target_rank`` is the draft rank
    of the target's token among that node's recorded candidates (NA: nowhere) and ``target_in``
    says kept (a hit: the path continued to that rank), beyond (a near miss in recorded columns
    past the kept width: the signal for widening topKSpec) or nowhere.
    fraction = count / attempts with a target row at that depth.

    g: one row per RANK_KEYS with ``count``; None without attempts.
    """
    if g is None:
        return pd.DataFrame(columns=["run", "depth", "target_in", "target_rank", "count", "fraction"])
    totals = g.groupby(["run", "depth"])["count"].sum().rename("attempts")
    g = g.join(totals, on=["run", "depth"])
    g["fraction"] = g["count"] / g["attempts"]
    order = {IN_KEPT: 0, IN_BEYOND: 1, IN_NOWHERE: 2}
    g["_o"] = g["target_in"].map(order)
    g = in_run_order(g, ["run", "depth", "_o", "target_rank"]).drop(columns=["_o", "attempts"])
    return g.reset_index(drop=True)


# What a path's attempt at depth d found: the hit_outcome table's count columns, in order.
OUTCOMES = (IN_KEPT, IN_BEYOND, IN_NOWHERE)


def hit_outcome_finish(counts: list[dict]) -> pd.DataFrame:
    """Per run and depth: attempts and the shares kept / beyond / nowhere (see rank_of_hit_finish).

    beyond_fraction_d = #{near misses at d} / #{attempts at d with a target row}: the accepted
    length a wider topKSpec at step d-1 could have added is bounded by it.

    counts: one dict per (run, depth), the runs in the order named: run, depth, attempts,
    with_target_row and each of OUTCOMES.
    """
    rows = []
    for c in counts:
        row = {k: c[k] for k in ("run", "depth", "attempts", "with_target_row")}
        known = c["with_target_row"]
        for k in OUTCOMES:
            row[k] = c[k]
            row[f"{k}_fraction"] = c[k] / known if known else np.nan
        rows.append(row)
    cols = ["run", "depth", "attempts", "with_target_row"] + [c for k in OUTCOMES for c in (k, f"{k}_fraction")]
    return in_run_order(pd.DataFrame(rows, columns=cols), ["run", "depth"]).reset_index(drop=True)


SLOT_KEYS = ["run", "depth", "expanded", "expanded_slot", "level_rank"]


def parent_slot_finish(g: pd.DataFrame | None) -> pd.DataFrame:
    """Which expanded parent the accepted path went through: the signal for topHead.

    For every round and depth d >= 1 with d < num_steps (a draft step d ran and could have
    expanded the path's node there): was the path's node at depth d expanded, and at which slot
    (position in selection order)? When it was not, ``level_rank`` k says topHead[d] >= k+1
    would have expanded it. fraction = rounds / rounds whose path reached depth d with d < steps.

    g: one row per SLOT_KEYS with ``rounds``; None when no round qualifies.
    """
    cols = ["run", "depth", "expanded", "expanded_slot", "level_rank", "rounds", "fraction"]
    if g is None:
        return pd.DataFrame(columns=cols)
    totals = g.groupby(["run", "depth"])["rounds"].sum().rename("total")
    g = g.join(totals, on=["run", "depth"])
    g["fraction"] = g["rounds"] / g["total"]
    g = in_run_order(g, ["run", "depth", "expanded", "expanded_slot", "level_rank"], [True, True, False, True, True])
    return g[cols].reset_index(drop=True)
