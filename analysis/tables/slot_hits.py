"""How often each slot of a config's static shape (depth, expanded parent in selection order, child
rank) and each named node lay on the accepted path, per run (the slot_hits and node_hits tables),
and the static shape itself (static_shape). As in analysis.tables.path_metrics, each table is
finished here from counts that add up over disjoint sets of rounds (analysis.tables.node_counts).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from replay.core.config import TreeConfig
from replay.core.tree import Tree, node_name
from replay.engine.batch import TreeShape, config_tree_shape, round_tree


def static_shape(cfg: TreeConfig) -> Tree:
    """The config's full tree (a replay.core.tree.Tree of nodes) with placeholder tokens: the node ids
    every static round shares, one round of replay.engine.batch's TreeShape of the config
    (round_tree).

    In a static round node u is always "rank r of the j-th expanded parent of step d"; which level
    node was expanded changes per round. The drawing puts the j-th expanded parent where the
    rank-major fallback would (A1, A2, then B11, B21: replay.core.selection.rank_major_keys, the
    shape's ``fallback`` map), so the names are those of that layout.
    """
    shape = config_tree_shape(cfg, cfg.gamma)  # every draft step run (a config's heads fit its levels)
    return round_tree(shape, [m.fallback for m in shape.maps])


def shape_signature(shape: TreeShape) -> list[tuple[int, int]]:
    """(slot of the parent among its step's expanded nodes, rank) per non-root node of a static
    shape (config_tree_shape), in tree order: what a round's nodes must match to be counted against
    the shape's slots, read from the shape's maps."""
    return [(j, r) for m in shape.maps for j, r in zip(m.slot_parent.tolist(), m.slot_rank.tolist())]


def slot_name(depth: int, parent_slot: int, rank: int) -> str:
    """A slot's short name: ``R``, then the depth's letter, ``p`` the 1-based position of the
    expanded parent in its step's selection order and ``c`` the 1-based child rank: ``B:p2c1`` is
    the draft top-1 child of the second node expanded at step 1, whichever level-1 node that was."""
    if depth == 0:
        return "R"
    letter = node_name([0] * depth).rstrip("1")  # the depth's letter(s): node_name of all-top-1 ranks is e.g. B11
    return f"{letter}:p{parent_slot + 1}c{rank + 1}"


def slot_hits_finish(counts: dict[str, tuple[np.ndarray, np.ndarray, int]], configs: dict) -> pd.DataFrame:
    """How often each *slot* of the static shape lay on the accepted path, per run.

    A slot is (depth d, parent_slot j, rank r): the rank-r child of the j-th node expanded at
    draft step d - 1 (selection order: path probability, parents or the fallback). Which level
    node fills slot j changes per round, so a slot is not a node: in a round that expanded A2 and
    A3, slot B:p1c1 holds A2's top-1 child. node_hits_finish counts the nodes themselves.

    frequency = #{rounds with the slot on the path} / #{rounds whose tree has the slot}, over rounds
    whose shape is a prefix of the config's static shape (early-stopped rounds count for their
    levels); rounds of another shape (dynamic trees) are left out and counted in
    ``rounds_other_shape``. configs: run label → TreeConfig.

    counts: run → (rounds with slot u present [n] int64, with u on the path [n] int64, rounds of
    another shape), n the static shape's nodes with the root.
    """
    rows = []
    for run, (present, hits, other) in counts.items():
        shape = config_tree_shape(configs[run], configs[run].gamma)
        canon = shape_signature(shape)
        for u in range(shape.num_nodes + 1):
            depth = int(shape.depths[u])
            parent_slot, rank = (-1, -1) if u == 0 else canon[u - 1]
            rows.append(
                {
                    "run": run,
                    "slot": u,
                    "slot_name": slot_name(depth, parent_slot, rank),
                    "depth": depth,
                    "parent_slot": parent_slot,
                    "rank": rank,
                    "rounds_present": int(present[u]),
                    "on_path": int(hits[u]),
                    "frequency": hits[u] / present[u] if present[u] else np.nan,
                    "rounds_other_shape": other,
                }
            )
    return pd.DataFrame(rows, columns=SLOT_HIT_COLUMNS)


SLOT_HIT_COLUMNS = [
    "run",
    "slot",
    "slot_name",
    "depth",
    "parent_slot",
    "rank",
    "rounds_present",
    "on_path",
    "frequency",
    "rounds_other_shape",
]


NODE_HIT_COLUMNS = ["run", "name", "depth", "parent_name", "rank", "rounds_present", "on_path", "frequency"]


def node_hits_finish(out: pd.DataFrame) -> pd.DataFrame:
    """How often each *node* lay on the accepted path, per run; a node is named by the draft ranks
    of its path from the root (the article's names: B21 is the top-1 child of A2, the level's
    second node), so it is the same node in every round, whatever the selection expanded.

    frequency = #{rounds with the node on the path} / #{rounds whose tree has the node}; a node
    is in a round's tree only when its parent was expanded there. Any shape (dynamic trees too).
    Rows by depth, then rank path (A1, A2, ..., B11, B12, B21, ...).

    out: one row per (run, name), runs in the order they first appear, with depth, rank,
    rounds_present, on_path and ``_path`` (the draft ranks from the root).
    """
    out = out.copy()
    out["parent_name"] = [node_name(list(p[:-1])) if p else "" for p in out["_path"]]
    order = {run: k for k, run in enumerate(out["run"].unique())}
    out["_run"] = out["run"].map(order)
    out = out.sort_values(["_run", "depth", "_path"], kind="stable")
    out["rank"] = out["rank"].astype(np.int64)
    out["rounds_present"] = out["rounds_present"].astype(np.int64)
    out["on_path"] = out["on_path"].astype(np.int64)
    out["frequency"] = out["on_path"] / out["rounds_present"]
    return out[NODE_HIT_COLUMNS].reset_index(drop=True)
