"""How often each slot of a config's static shape (depth, expanded parent in selection order, child
rank) and each named node lay on the accepted path, per run (slot_hit_frequency,
node_hit_frequency), and the static shape itself (static_shape). As in
analysis.tables.path_metrics, each is finished from counts that add up over disjoint sets of rounds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from replay.core.config import TreeConfig
from replay.core.tree import Tree, node_name
from replay.engine.batch import TreeShape, config_tree_shape, round_tree

from .build import require_columns


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


def _signature(parents: np.ndarray, ranks: np.ndarray, slots: np.ndarray) -> list[tuple[int, int]]:
    """(slot of the parent among its step's expanded nodes, rank) per non-root node, in tree order.

    parents, ranks: [n] int64; slots: [n] int64 expanded slot (-1 when not expanded).
    """
    if not (parents.ndim == 1 and parents.shape == ranks.shape == slots.shape):
        raise ValueError(
            f"parents {parents.shape}, ranks {ranks.shape}, slots {slots.shape}: expected equal [n] shapes"
        )
    return [(int(slots[parents[u]]), int(ranks[u])) for u in range(1, parents.shape[0])]


def shape_signature(shape: TreeShape) -> list[tuple[int, int]]:
    """(slot of the parent among its step's expanded nodes, rank) per non-root node of a static
    shape (config_tree_shape), in tree order: what a round's nodes must match to be counted against
    the shape's slots, read from the shape's maps."""
    return [(j, r) for m in shape.maps for j, r in zip(m.slot_parent.tolist(), m.slot_rank.tolist())]


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


def _hits_vectorised(grp: pd.DataFrame, canon: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, int] | None:
    """_hits_by_round for the tables' own layout (each round's rows together, nodes 0, 1, ... in
    order), as array operations; None when the rows are laid out otherwise."""
    node = grp["node"].to_numpy(dtype=np.int64)
    first = np.flatnonzero(node == 0)  # each round's root row
    if not node.shape[0] or first.shape[0] == 0 or first[0] != 0:
        return None
    round_id = np.cumsum(node == 0) - 1  # [rows] which round a row belongs to
    start = first[round_id]
    if (node != np.arange(node.shape[0]) - start).any():
        return None
    if grp["round"].iloc[first].duplicated().any() or (grp["round"].to_numpy() != grp["round"].to_numpy()[start]).any():
        return None  # a round split over several runs of rows: the per-round loop decides
    parent = grp["parent"].to_numpy(dtype=np.int64)
    rank = grp["rank"].to_numpy(dtype=np.int64)
    slot = grp["expanded_slot"].fillna(-1).to_numpy(dtype=np.int64)
    canon_slot = np.asarray([-2] + [p for p, _ in canon], dtype=np.int64)  # indexed by node; the root always matches
    canon_rank = np.asarray([-2] + [r for _, r in canon], dtype=np.int64)
    known = node < canon_slot.shape[0]
    at = np.where(known, node, 0)
    parent_slot = slot[np.clip(start + parent, 0, node.shape[0] - 1)]
    differs = (node > 0) & (~known | (parent_slot != canon_slot[at]) | (rank != canon_rank[at]))
    bad = np.bincount(round_id, weights=differs, minlength=first.shape[0]) > 0
    keep = ~bad[round_id]
    n_nodes = canon_slot.shape[0]
    present = np.bincount(node[keep], minlength=n_nodes).astype(np.int64)
    hits = np.bincount(node[keep], weights=grp["on_path"].to_numpy(dtype=bool)[keep], minlength=n_nodes).astype(
        np.int64
    )
    return present, hits, int(bad.sum())


def slot_name(depth: int, parent_slot: int, rank: int) -> str:
    """A slot's short name: ``R``, then the depth's letter, ``p`` the 1-based position of the
    expanded parent in its step's selection order and ``c`` the 1-based child rank: ``B:p2c1`` is
    the draft top-1 child of the second node expanded at step 1, whichever level-1 node that was."""
    if depth == 0:
        return "R"
    letter = node_name([0] * depth).rstrip("1")  # the depth's letter(s): node_name of all-top-1 ranks is e.g. B11
    return f"{letter}:p{parent_slot + 1}c{rank + 1}"


def slot_hit_frequency(nodes: pd.DataFrame, rounds: pd.DataFrame, configs: dict) -> pd.DataFrame:
    """How often each *slot* of the static shape lay on the accepted path, per run.

    A slot is (depth d, parent_slot j, rank r): the rank-r child of the j-th node expanded at
    draft step d - 1 (selection order: path probability, parents or the fallback). Which level
    node fills slot j changes per round, so a slot is not a node: in a round that expanded A2 and
    A3, slot B:p1c1 holds A2's top-1 child. node_hit_frequency counts the nodes themselves.

    frequency = #{rounds with the slot on the path} / #{rounds whose tree has the slot}, over rounds
    whose shape is a prefix of the config's static shape (early-stopped rounds count for their
    levels); rounds of another shape (dynamic trees) are left out and counted in
    ``rounds_other_shape``. configs: run label → TreeConfig.
    """
    return slot_hits_finish(slot_hits_counts(nodes, configs), configs)


def slot_hits_counts(nodes: pd.DataFrame, configs: dict) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """slot_hit_frequency's counts: run → (rounds with slot u present [n], with u on the path [n],
    rounds of another shape), runs in the order they first appear."""
    require_columns(nodes, ("run", "round", "node", "parent", "rank", "expanded_slot", "on_path"), "nodes")
    out = {}
    for run, grp in nodes.groupby("run", sort=False):
        shape = config_tree_shape(configs[run], configs[run].gamma)
        canon = shape_signature(shape)
        counted = _hits_vectorised(grp, canon)
        out[run] = counted if counted is not None else _hits_by_round(grp, canon, shape.num_nodes + 1)
    return out


def slot_hits_finish(counts: dict[str, tuple[np.ndarray, np.ndarray, int]], configs: dict) -> pd.DataFrame:
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


def node_hit_frequency(nodes: pd.DataFrame) -> pd.DataFrame:
    """How often each *node* lay on the accepted path, per run; a node is named by the draft ranks
    of its path from the root (the article's names: B21 is the top-1 child of A2, the level's
    second node), so it is the same node in every round, whatever the selection expanded.

    frequency = #{rounds with the node on the path} / #{rounds whose tree has the node}; a node
    is in a round's tree only when its parent was expanded there. Any shape (dynamic trees too).
    Rows by depth, then rank path (A1, A2, ..., B11, B12, B21, ...).
    """
    return node_hits_finish(node_hits_counts(nodes))


def node_hits_counts(nodes: pd.DataFrame) -> pd.DataFrame:
    """node_hit_frequency's counts: one row per (run, name), runs and names in the order they first
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


def node_hits_finish(out: pd.DataFrame) -> pd.DataFrame:
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


def _rank_paths(nodes: pd.DataFrame, groups) -> dict[tuple, tuple[int, ...]]:
    """(run, name) -> the draft ranks from the root to the node, read from one round holding it
    (walking its parents there): only the rounds that first hold each name are looked at.

    A node table alone (node_hit_frequency without its batch) has no selection for replay.engine.batch's rank_paths.
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
