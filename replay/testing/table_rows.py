"""The round and node tables built round by round from reference RoundResults: the oracle of the
batch path (analysis.tables.batch, which stats, plot, compare and report use).

One row per round (``round_table``) and one row per tree node (``node_table``), with the columns,
dtypes and values of analysis.tables.build's ``ROUND_COLUMNS`` / ``NODE_COLUMNS``, derived from each
replayed round (replay.testing.replayer.RoundResult) the plain way; tests/test_batch_tables.py holds
the batch tables equal to these. No run-time module imports this (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.tables.build import (
    IN_BEYOND,
    IN_KEPT,
    IN_NO_ROW,
    IN_NOWHERE,
    IN_UNEXPANDED,
    NODE_COLUMNS,
    ROUND_COLUMNS,
    _typed,
    empty_round_table,
)
from replay.core.selection import rank_major_keys
from replay.core.vocab import PAD_TOKEN, SELECT_FALLBACK
from replay.testing.replayer import RoundResult, record_of
from replay.testing.selection_ref import selection_order_ref


@dataclass(frozen=True, eq=False)
class NodeFacts:
    """Per-node facts of one round, arrays of length num_nodes + 1 in tree order."""

    num_children: np.ndarray  # [n] int64
    expanded_slot: np.ndarray  # [n] int64, -1 when not expanded
    level_rank: np.ndarray  # [n] int64, -1 when unknown
    on_path: np.ndarray  # [n] bool
    target_rank: np.ndarray  # [n] int64, -1 when absent or unknown
    target_in: tuple[str, ...]  # [n] one of TARGET_IN


def node_facts(res: RoundResult) -> NodeFacts:
    """Derive what the tables need from one replayed round."""
    tree = res.tree
    n = tree.num_nodes + 1
    num_children = np.bincount(tree.parents[1:], minlength=n).astype(np.int64)
    expanded_slot = np.full(n, -1, dtype=np.int64)
    for step in tree.expanded:
        expanded_slot[step] = np.arange(step.shape[0])
    on_path = np.zeros(n, dtype=bool)
    on_path[0] = True
    on_path[list(res.acceptance.accepted_nodes)] = True
    row_of = {int(u): k for k, u in enumerate(tree.expanded_order)}
    target_rank = np.full(n, -1, dtype=np.int64)
    target_in: list[str] = []
    for u in range(n):
        t = int(res.target_top1[u])
        if u not in row_of:
            target_in.append(IN_UNEXPANDED)
            continue
        if t == PAD_TOKEN:
            target_in.append(IN_NO_ROW)
            continue
        hits = np.flatnonzero(res.rebuilt.candidates[row_of[u]] == t)
        if hits.shape[0] == 0:
            target_in.append(IN_NOWHERE)
            continue
        target_rank[u] = int(hits[0])
        target_in.append(IN_KEPT if hits[0] < num_children[u] else IN_BEYOND)
    return NodeFacts(
        num_children, expanded_slot, level_ranks(res, expanded_slot), on_path, target_rank, tuple(target_in)
    )


def level_ranks(res: RoundResult, expanded_slot: np.ndarray) -> np.ndarray:
    """[n] int64: each node's position in its level under the rule the recorded round used.

    expanded_slot: [n] int64 from node_facts. With path probabilities the order is by descending
    path log-probability (ties: rank_ties (replay/core/selection.py)); with the rank-major
    fallback by (rank, parent's slot). A dump with explicit parents but no scores only tells
    the order of the expanded nodes (their slot); the others stay -1.
    """
    tree = res.tree
    n = tree.num_nodes + 1
    if expanded_slot.shape != (n,):
        raise ValueError(f"expanded_slot: expected shape ({n},), got {expanded_slot.shape}")
    out = np.full(n, -1, dtype=np.int64)
    out[0] = 0
    selection = res.rebuilt.selection
    for d in range(1, int(tree.depths.max()) + 1 if n > 1 else 1):
        level = np.flatnonzero(tree.depths == d)
        lp = tree.logprobs[level]
        if not np.isnan(lp).any():
            order = level[selection_order_ref(lp.tolist())]
        elif d < len(selection) and selection[d] != SELECT_FALLBACK:
            # explicit parents without scores: only the expanded nodes' order is known
            exp = [u for u in level.tolist() if expanded_slot[u] >= 0]
            out[exp] = expanded_slot[exp]
            continue
        else:
            order = level[selection_order_ref(rank_major_keys(tree.ranks[level], expanded_slot[tree.parents[level]]))]
        out[order] = np.arange(len(order))
    return out


def _na_int(value: int) -> object:
    return pd.NA if value < 0 else int(value)


def round_rows(res: RoundResult, run: str, config: str, tree_type: int = 0) -> dict:
    """One round table row: the round's record, then the analysis columns (see ROUND_COLUMNS)."""
    tree, acc = res.tree, res.acceptance
    facts = node_facts(res)
    names = tree.names()
    first = acc.accepted_nodes[0] if acc.accepted_nodes else -1
    return record_of(res).to_json() | {
        "run": run,
        "config": config,
        "tree_type": int(tree_type),
        "num_expanded": int(tree.expanded_order.shape[0]),
        "bonus_known": acc.bonus_token is not None,
        "root_child_rank": _na_int(int(tree.ranks[first]) if first >= 0 else -1),
        "root_target_rank": _na_int(int(facts.target_rank[0])),
        "root_target_in": facts.target_in[0],
        "accepted_names": ">".join(names[u] for u in acc.accepted_nodes),
    }


def node_rows(res: RoundResult, run: str) -> dict[str, list]:
    """Column lists of one round's node table rows (see NODE_COLUMNS)."""
    tree = res.tree
    f = node_facts(res)
    n = tree.num_nodes + 1
    top1 = res.target_top1
    return {
        "run": [run] * n,
        "round": [res.name] * n,
        "node": list(range(n)),
        "name": tree.names(),
        "depth": tree.depths.tolist(),
        "parent": tree.parents.tolist(),
        "rank": tree.ranks.tolist(),
        "token": [_na_int(int(v)) for v in tree.tokens],  # an unknown root is NA, as root_token (never PAD_TOKEN)
        "path_logprob": tree.logprobs.tolist(),
        "num_children": f.num_children.tolist(),
        "expanded": (f.expanded_slot >= 0).tolist(),
        "expanded_slot": [_na_int(v) for v in f.expanded_slot],
        "level_rank": [_na_int(v) for v in f.level_rank],
        "on_path": f.on_path.tolist(),
        "target_token": [_na_int(int(v)) for v in top1],
        "target_rank": [_na_int(v) for v in f.target_rank],
        "target_in": list(f.target_in),
    }


def round_table(results: Iterable[RoundResult], run: str = "run", config=None) -> pd.DataFrame:
    """One row per round. ``config``: the TreeConfig the rounds were replayed with (for labels)."""
    short = config.short() if config is not None else ""
    tree_type = int(config.tree_type) if config is not None else 0
    rows = [round_rows(res, run, short, tree_type) for res in results]
    if not rows:
        return empty_round_table()
    return _typed(pd.DataFrame(rows, columns=list(ROUND_COLUMNS)))


def node_table(results: Iterable[RoundResult], run: str = "run") -> pd.DataFrame:
    """One row per tree node of every round (root included, ``node == 0``)."""
    cols: dict[str, list] = {c: [] for c in NODE_COLUMNS}
    for res in results:
        for c, values in node_rows(res, run).items():
            cols[c].extend(values)
    return _typed(pd.DataFrame(cols, columns=list(NODE_COLUMNS)))
