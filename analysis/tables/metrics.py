"""Acceptance metrics, each computed from the round/node tables (analysis.tables.build), per run.

Every metric's name, formula and engine name live in analysis.tables.definitions (docs/vocabulary.md
and docs/analysis.md repeat them); the docstrings repeat the formula in short. Notation: R rounds,
L_r the accepted length of round r (bonus excluded), b_r = 1 when the dump holds round r's bonus
token, else 0, nodes_r its draft nodes (root excluded).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from replay.core.config import TreeConfig
from replay.core.headline import headline
from replay.core.tree import Tree, node_name
from replay.core.vocab import DEPTH_RULE, PAD_TOKEN, STOP_MISMATCH, STOP_NO_ROW
from replay.engine.rebuild import rebuild_tree
from replay.io.rounds import Round

from .build import IN_BEYOND, IN_KEPT, IN_NO_ROW, IN_NOWHERE, IN_UNEXPANDED
from .definitions import SUMMARY_NAMES
from .intervals import wilson


def _require(df: pd.DataFrame, cols: tuple[str, ...], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; build it with analysis.tables.build")


def summary(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per run, the headline figures first (replay.core.headline computes them).

    mean_acceptance_length  = (1/R) Σ (L_r + 1)        the target's token counted (vLLM's); derived
                                                       where bonus_known_fraction < 1
    draft_acceptance_rate   = Σ L_r / Σ nodes_r        accepted over drafted (verified) draft tokens
    mean_accepted_length    = (1/R) Σ L_r
    bonus_known_fraction    = (1/R) Σ b_r
    full_depth_fraction     = share of rounds whose path reached the tree's last level
    """
    _require(rounds, ("run", "accepted_length", "bonus_known", "num_nodes", "num_steps"), "rounds")
    rows = []
    for run, g in rounds.groupby("run", sort=False):
        known = int(g["bonus_known"].sum())
        h = headline(g["accepted_length"].to_numpy(), g["num_nodes"].to_numpy(), g["num_steps"].to_numpy(), known)
        rows.append(
            {
                "run": run,
                "rounds": h.rounds,
                "mean_acceptance_length": h.mean_acceptance_length,
                "draft_acceptance_rate": h.draft_acceptance_rate,
                "mean_accepted_length": h.mean_accepted_length,
                "bonus_known_fraction": known / h.rounds,
                "full_depth_fraction": float((g["accepted_length"] >= g["num_steps"]).mean()),
                "mean_num_nodes": float(g["num_nodes"].mean()),
                "mean_num_steps": float(g["num_steps"].mean()),
            }
        )
    return pd.DataFrame(rows, columns=["run", "rounds", *SUMMARY_NAMES])


def derived_notes(summary_table: pd.DataFrame) -> list[str]:
    """One line per run whose mean acceptance length is derived (some bonus token not in the dump)."""
    out = []
    for _, row in summary_table.iterrows():
        if row["bonus_known_fraction"] < 1:
            known = round(row["bonus_known_fraction"] * row["rounds"])
            out.append(
                f"{row['run']}: mean_acceptance_length {row['mean_acceptance_length']:.4f} is derived (accepted + 1): "
                f"the dump holds the bonus token of {known} of {int(row['rounds'])} round(s)"
            )
    return out


def accepted_length_distribution(rounds: pd.DataFrame) -> pd.DataFrame:
    """P(L = k) per run for k = 0..max L over all runs: columns run, accepted_length, rounds, fraction."""
    _require(rounds, ("run", "accepted_length"), "rounds")
    top = int(rounds["accepted_length"].max()) if len(rounds) else 0
    rows = []
    for run, grp in rounds.groupby("run", sort=False):
        counts = np.bincount(grp["accepted_length"].to_numpy(dtype=np.int64), minlength=top + 1)
        for k, c in enumerate(counts):
            rows.append({"run": run, "accepted_length": k, "rounds": int(c), "fraction": c / len(grp)})
    return pd.DataFrame(rows, columns=["run", "accepted_length", "rounds", "fraction"])


def depth_acceptance(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per run and depth d = 1..the run's max steps, two rates the field often mixes up:

    per_position_acceptance_rate_d = #{r : L_r >= d} / R      reached depth d, over all rounds
                                                              (vLLM's name; "cumulative" acceptance)
    conditional_d = #{r : L_r >= d} / #{r : L_r >= d-1}       accepted at d given d-1 was reached
    conditional_when_expanded_d = #{r : L_r >= d} / attempts_d, where attempts_d counts rounds
        whose path reached depth d-1 at a node that had children (a leaf at d-1 is no attempt).
    per_position_acceptance_rate_d = Π_{k<=d} conditional_k.

    Depth d is the d-th draft token (1 = the root's children; DESIGN.md's level d). Each rate has
    its 95% Wilson interval (analysis.tables.intervals) in ``RATE_ci95_lo`` / ``RATE_ci95_hi``; its n is
    the rate's denominator column (DEPTH_RATE_N): a 0.667 from 3 rounds shows as [0.208, 0.939].
    """
    _require(rounds, ("run", "accepted_length", "stop", "num_steps"), "rounds")
    rows = []
    for run, grp in rounds.groupby("run", sort=False):
        max_depth = int(grp["num_steps"].max())  # a run's own depth: others may be deeper
        L = grp["accepted_length"].to_numpy(dtype=np.int64)
        had_children = grp["stop"].isin([STOP_MISMATCH, STOP_NO_ROW]).to_numpy()
        total = L.shape[0]
        for d in range(1, max_depth + 1):
            reached = int(np.count_nonzero(L >= d))
            prev = int(np.count_nonzero(L >= d - 1))
            attempts = reached + int(np.count_nonzero((L == d - 1) & had_children))
            rows.append(
                {
                    "run": run,
                    "depth": d,
                    "rounds": total,
                    "reached_prev": prev,
                    "attempts": attempts,
                    "reached": reached,
                    "conditional": reached / prev if prev else np.nan,
                    "per_position_acceptance_rate": reached / total if total else np.nan,
                    "conditional_when_expanded": reached / attempts if attempts else np.nan,
                }
            )
    cols = [
        "run",
        "depth",
        "rounds",
        "reached_prev",
        "attempts",
        "reached",
        "conditional",
        "per_position_acceptance_rate",
        "conditional_when_expanded",
    ]
    out = pd.DataFrame(rows, columns=cols)
    for rate, n in DEPTH_RATE_N.items():
        lo, hi = wilson(out["reached"].to_numpy(dtype=np.float64), out[n].to_numpy(dtype=np.float64))
        nan = out[n].to_numpy() == 0  # no trial: the rate is NaN, so is its interval
        out.insert(out.columns.get_loc(rate) + 1, f"{rate}_ci95_lo", np.where(nan, np.nan, lo))
        out.insert(out.columns.get_loc(rate) + 2, f"{rate}_ci95_hi", np.where(nan, np.nan, hi))
    return out


# Each per-depth rate's denominator: the n of its Wilson interval (the numerator is ``reached``).
DEPTH_RATE_N = {
    "conditional": "reached_prev",
    "per_position_acceptance_rate": "rounds",
    "conditional_when_expanded": "attempts",
}
DEPTH_HEADER = f"{DEPTH_RULE}; each rate [95% Wilson interval] n = its denominator"


def depth_display(depth: pd.DataFrame) -> pd.DataFrame:
    """The depth table as people read it: each rate one cell ``0.667 [0.208,0.939] n=3``.

    For the text of ``stats`` and the report; files and JSON keep the separate columns."""
    out = depth.drop(columns=[c for c in depth.columns if c.endswith(("_ci95_lo", "_ci95_hi"))])
    for rate, n in DEPTH_RATE_N.items():
        out[rate] = [
            "–" if k == 0 else f"{p:.4f} [{lo:.4f},{hi:.4f}] n={k}"
            for p, lo, hi, k in zip(depth[rate], depth[f"{rate}_ci95_lo"], depth[f"{rate}_ci95_hi"], depth[n])
        ]
    return out


def _path_attempts(nodes: pd.DataFrame) -> pd.DataFrame:
    """Expanded nodes on the accepted path: one row per (round, depth the target tried to extend to)."""
    _require(nodes, ("run", "round", "depth", "on_path", "expanded", "target_in", "target_rank"), "nodes")
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
    return _rank_of_hit_finish(_rank_of_hit_counts(nodes))


_RANK_KEYS = ["run", "depth", "target_in", "target_rank"]


def _rank_of_hit_counts(nodes: pd.DataFrame) -> pd.DataFrame | None:
    """rank_of_hit's counts: one row per (run, depth, target_in, target_rank) with ``count``; None without attempts."""
    sel = _path_attempts(nodes)
    sel = sel[sel["target_in"] != IN_NO_ROW]
    if sel.empty:
        return None
    return sel.groupby(_RANK_KEYS, sort=True, dropna=False).size().rename("count").reset_index()


def _rank_of_hit_finish(g: pd.DataFrame | None) -> pd.DataFrame:
    if g is None:
        return pd.DataFrame(columns=["run", "depth", "target_in", "target_rank", "count", "fraction"])
    totals = g.groupby(["run", "depth"])["count"].sum().rename("attempts")
    g = g.join(totals, on=["run", "depth"])
    g["fraction"] = g["count"] / g["attempts"]
    order = {IN_KEPT: 0, IN_BEYOND: 1, IN_NOWHERE: 2}
    g["_o"] = g["target_in"].map(order)
    g = g.sort_values(["run", "depth", "_o", "target_rank"], kind="stable").drop(columns=["_o", "attempts"])
    return g.reset_index(drop=True)


def hit_outcome_by_depth(nodes: pd.DataFrame) -> pd.DataFrame:
    """Per run and depth: attempts and the shares kept / beyond / nowhere (see rank_of_hit).

    beyond_fraction_d = #{near misses at d} / #{attempts at d with a target row}: the accepted
    length a wider topKSpec at step d-1 could have added is bounded by it.
    """
    return _hit_outcome_finish(_hit_outcome_counts(nodes))


_OUTCOMES = (IN_KEPT, IN_BEYOND, IN_NOWHERE)


def _hit_outcome_counts(nodes: pd.DataFrame) -> list[dict]:
    """hit_outcome_by_depth's counts: one dict per (run, depth), without the fractions."""
    sel = _path_attempts(nodes)
    rows = []
    for (run, depth), grp in sel.groupby(["run", "depth"], sort=True):
        counts = grp["target_in"].value_counts()
        known = int(len(grp) - counts.get(IN_NO_ROW, 0))
        row = {"run": run, "depth": int(depth), "attempts": int(len(grp)), "with_target_row": known}
        rows.append(row | {k: int(counts.get(k, 0)) for k in _OUTCOMES})
    return rows


def _hit_outcome_finish(counts: list[dict]) -> pd.DataFrame:
    """The table from counts sorted by (run, depth): each share over the attempts with a target row."""
    rows = []
    for c in counts:
        row = {k: c[k] for k in ("run", "depth", "attempts", "with_target_row")}
        known = c["with_target_row"]
        for k in _OUTCOMES:
            row[k] = c[k]
            row[f"{k}_fraction"] = c[k] / known if known else np.nan
        rows.append(row)
    cols = ["run", "depth", "attempts", "with_target_row"] + [c for k in _OUTCOMES for c in (k, f"{k}_fraction")]
    return pd.DataFrame(rows, columns=cols)


def parent_slot_usage(nodes: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    """Which expanded parent the accepted path went through: the signal for topHead.

    For every round and depth d >= 1 with d < num_steps (a draft step d ran and could have
    expanded the path's node there): was the path's node at depth d expanded, and at which slot
    (position in selection order)? When it was not, ``level_rank`` k says topHead[d] >= k+1
    would have expanded it. fraction = rounds / rounds whose path reached depth d with d < steps.
    """
    return _parent_slot_finish(_parent_slot_counts(nodes, rounds))


_SLOT_KEYS = ["run", "depth", "expanded", "expanded_slot", "level_rank"]


def _parent_slot_counts(nodes: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame | None:
    """parent_slot_usage's counts: one row per (run, depth, expanded, expanded_slot, level_rank)
    with ``rounds``; None when no round qualifies."""
    _require(rounds, ("run", "round", "num_steps"), "rounds")
    sel = nodes[nodes["on_path"] & (nodes["depth"] >= 1)].merge(
        rounds[["run", "round", "num_steps"]], on=["run", "round"]
    )
    sel = sel[sel["depth"] < sel["num_steps"]]
    if sel.empty:
        return None
    return sel.groupby(_SLOT_KEYS, dropna=False, sort=True).size().rename("rounds").reset_index()


def _parent_slot_finish(g: pd.DataFrame | None) -> pd.DataFrame:
    cols = ["run", "depth", "expanded", "expanded_slot", "level_rank", "rounds", "fraction"]
    if g is None:
        return pd.DataFrame(columns=cols)
    totals = g.groupby(["run", "depth"])["rounds"].sum().rename("total")
    g = g.join(totals, on=["run", "depth"])
    g["fraction"] = g["rounds"] / g["total"]
    g = g.sort_values(
        ["run", "depth", "expanded", "expanded_slot", "level_rank"], ascending=[True, True, False, True, True]
    )
    return g[cols].reset_index(drop=True)


def static_shape(cfg: TreeConfig) -> Tree:
    """The config's full tree (a replay.core.tree.Tree of nodes) with placeholder tokens: the node ids
    every static round shares. Not replay.engine.batch.config_tree_shape, which gives only heads and widths.

    In a static round node u is always "rank r of the j-th expanded parent of step d"; which level
    node was expanded changes per round. The drawing puts the j-th expanded parent where the
    rank-major fallback would (A1, A2, then B11, B21), so the names are those of that layout.
    """
    steps, fake = [], 1
    for i in range(cfg.gamma):
        cols = cfg.max_width
        rows = []
        for _ in range(cfg.top_head[i]):
            rows.append(list(range(fake, fake + cols)))
            fake += cols
        steps.append(rows)
    tree = rebuild_tree(Round.from_lists(steps, [[0]]), cfg).tree
    tokens = np.full(tree.tokens.shape, PAD_TOKEN, dtype=np.int64)
    return Tree(tokens, tree.parents, tree.depths, tree.ranks, tree.logprobs, tree.expanded)


def _signature(parents: np.ndarray, ranks: np.ndarray, slots: np.ndarray) -> list[tuple[int, int]]:
    """(slot of the parent among its step's expanded nodes, rank) per non-root node, in tree order.

    parents, ranks: [n] int64; slots: [n] int64 expanded slot (-1 when not expanded).
    """
    if not (parents.ndim == 1 and parents.shape == ranks.shape == slots.shape):
        raise ValueError(
            f"parents {parents.shape}, ranks {ranks.shape}, slots {slots.shape}: expected equal [n] shapes"
        )
    return [(int(slots[parents[u]]), int(ranks[u])) for u in range(1, parents.shape[0])]


def shape_signature(shape) -> list[tuple[int, int]]:
    """_signature of a static Tree (static_shape): what a round's nodes must match to be counted
    against that shape's nodes."""
    slots = np.full(shape.num_nodes + 1, -1, dtype=np.int64)
    for step in shape.expanded:
        slots[step] = np.arange(step.shape[0])
    return _signature(shape.parents, shape.ranks, slots)


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
    return _slot_hits_finish(_slot_hits_counts(nodes, configs), configs)


def _slot_hits_counts(nodes: pd.DataFrame, configs: dict) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """slot_hit_frequency's counts: run → (rounds with slot u present [n], with u on the path [n],
    rounds of another shape), runs in the order they first appear."""
    _require(nodes, ("run", "round", "node", "parent", "rank", "expanded_slot", "on_path"), "nodes")
    out = {}
    for run, grp in nodes.groupby("run", sort=False):
        shape = static_shape(configs[run])
        canon = shape_signature(shape)
        counted = _hits_vectorised(grp, canon)
        out[run] = counted if counted is not None else _hits_by_round(grp, canon, shape.num_nodes + 1)
    return out


def _slot_hits_finish(counts: dict[str, tuple[np.ndarray, np.ndarray, int]], configs: dict) -> pd.DataFrame:
    rows = []
    for run, (present, hits, other) in counts.items():
        shape = static_shape(configs[run])
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
    return _node_hits_finish(_node_hits_counts(nodes))


def _node_hits_counts(nodes: pd.DataFrame) -> pd.DataFrame:
    """node_hit_frequency's counts: one row per (run, name), runs and names in the order they first
    appear, with depth, rank, rounds_present, on_path and ``_path`` (the draft ranks from the root)."""
    _require(nodes, ("run", "round", "node", "name", "depth", "parent", "rank", "on_path"), "nodes")
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


def _node_hits_finish(out: pd.DataFrame) -> pd.DataFrame:
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
    (walking its parents there): only the rounds that first hold each name are looked at."""
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


def all_metrics(tables) -> dict[str, pd.DataFrame]:
    """Every metric table of analysis.tables.build.Tables, by name (what stats/report print and export).

    Tables without a node table (``nodes`` None: the runs were loaded with their node metrics
    counted block by block, analysis.tables.runs.load_run) bring those counts instead."""
    nodes = tables.nodes
    return {
        "summary": summary(tables.rounds),
        "accepted_length": accepted_length_distribution(tables.rounds),
        "depth_acceptance": depth_acceptance(tables.rounds),
        **(
            combine_node_counts(tables.node_counts, tables.configs)
            if nodes is None
            else {
                "rank_of_hit": rank_of_hit(nodes),
                "hit_outcome": hit_outcome_by_depth(nodes),
                "parent_slot": parent_slot_usage(nodes, tables.rounds),
                "slot_hits": slot_hit_frequency(nodes, tables.rounds, tables.configs),
                "node_hits": node_hit_frequency(nodes),
            }
        ),
    }


def node_metric_counts(nodes: pd.DataFrame, rounds: pd.DataFrame, configs: dict) -> dict:
    """What the node metrics (rank_of_hit ... node_hit_frequency) are finished from, for the rounds of
    these tables. Every count is a sum over rounds, so the counts of disjoint sets of rounds (the
    blocks of a run, whole runs) add up (combine_node_counts) to the counts of all of them: a run's
    metrics need only one block's node rows at a time."""
    return {
        "rank_of_hit": _rank_of_hit_counts(nodes),
        "hit_outcome": _hit_outcome_counts(nodes),
        "parent_slot": _parent_slot_counts(nodes, rounds),
        "slot_hits": _slot_hits_counts(nodes, configs),
        "node_hits": _node_hits_counts(nodes),
    }


def combine_node_counts(parts: list[dict], configs: dict) -> dict[str, pd.DataFrame]:
    """The node metrics of all the rounds of ``parts`` (node_metric_counts of disjoint sets of rounds,
    in run order): the same tables as the metric functions give on those rounds' node table."""

    def added(name: str, keys: list[str], total: str) -> pd.DataFrame | None:
        got = [p[name] for p in parts if p[name] is not None]
        if not got:
            return None
        return pd.concat(got, ignore_index=True).groupby(keys, sort=True, dropna=False)[total].sum().reset_index()

    outcomes: dict[tuple, dict] = {}
    for p in parts:
        for row in p["hit_outcome"]:
            key = (row["run"], row["depth"])
            if key in outcomes:
                kept = outcomes[key]
                outcomes[key] = {k: v if k in ("run", "depth") else v + row[k] for k, v in kept.items()}
            else:
                outcomes[key] = dict(row)
    slots: dict[str, tuple] = {}
    for p in parts:
        for run, counts in p["slot_hits"].items():
            slots[run] = counts if run not in slots else tuple(a + b for a, b in zip(slots[run], counts))
    named = pd.concat([p["node_hits"] for p in parts], ignore_index=True) if parts else None
    if named is None or named.empty:
        from .build import node_table

        named = _node_hits_counts(node_table([]))
    else:
        g = named.groupby(["run", "name"], sort=False)
        named = pd.DataFrame(
            {
                "depth": g["depth"].first(),
                "rank": g["rank"].first(),
                "rounds_present": g["rounds_present"].sum(),
                "on_path": g["on_path"].sum(),
                "_path": g["_path"].first(),
            }
        ).reset_index()
    return {
        "rank_of_hit": _rank_of_hit_finish(added("rank_of_hit", _RANK_KEYS, "count")),
        "hit_outcome": _hit_outcome_finish([outcomes[k] for k in sorted(outcomes)]),
        "parent_slot": _parent_slot_finish(added("parent_slot", _SLOT_KEYS, "rounds")),
        "slot_hits": _slot_hits_finish(slots, configs),
        "node_hits": _node_hits_finish(named),
    }


__all__ = [
    "summary",
    "accepted_length_distribution",
    "depth_acceptance",
    "rank_of_hit",
    "hit_outcome_by_depth",
    "parent_slot_usage",
    "static_shape",
    "slot_hit_frequency",
    "node_hit_frequency",
    "all_metrics",
    "node_metric_counts",
    "combine_node_counts",
    "IN_UNEXPANDED",
]
