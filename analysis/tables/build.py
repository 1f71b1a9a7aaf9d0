"""Per-round and per-node tables (pandas) from replay results; CSV and Parquet export.

One row per round (``round_table``) and one row per tree node (``node_table``). Column meanings
are listed in ``ROUND_COLUMNS`` / ``NODE_COLUMNS`` and in docs/analysis.md. Every metric in
analysis.tables.metrics is computed from these two tables only, so several runs side by side are just
more rows with another ``run`` label.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from replay.core.records import COLUMN_MEANINGS as RECORD_COLUMNS, csv_frame, record_of
from replay.core.selection import rank_major_keys, selection_order
from replay.core.vocab import PAD_TOKEN, SELECT_FALLBACK
from replay.engine.replayer import RoundResult

# Where the target's top-1 token at a node sits among that node's recorded draft candidates.
IN_KEPT = "kept"  # one of the children the tree kept (a hit when the node is on the path)
IN_BEYOND = "beyond"  # in a recorded column past the kept width: a wider topKSpec would have hit
IN_NOWHERE = "nowhere"  # not among the recorded candidates at all
IN_UNEXPANDED = "unexpanded"  # the draft never ran on this node: no candidates to compare with
IN_NO_ROW = "no_row"  # the draft ran here but the dump has no target row for the node
TARGET_IN = (IN_KEPT, IN_BEYOND, IN_NOWHERE, IN_UNEXPANDED, IN_NO_ROW)

# The per-round record's columns (replay.core.records, docs/output-schema.md) first, then what the
# analysis adds; a column of the record keeps its name and meaning here.
ANALYSIS_COLUMNS = {
    "run": "run label (directory name unless given)",
    "config": "tree config, short form ([6]|[2,2]|[1,1])",
    "tree_type": "0 static, 1 dynamic",
    "num_expanded": "nodes the draft ran on (= target rows in the parents layout)",
    "bonus_known": "the dump holds the target's token at the last accepted node",
    "root_child_rank": "draft rank of the accepted level-1 child (NA when nothing was accepted)",
    "root_target_rank": "rank of the target's top-1 at the root among the root's recorded candidates (NA: nowhere)",
    "root_target_in": "kept / beyond / nowhere: where the target's root choice sat",
    "accepted_names": "accepted node names, e.g. A1>B11>C111",
}
ROUND_COLUMNS = {**RECORD_COLUMNS, **ANALYSIS_COLUMNS}

NODE_COLUMNS = {
    "run": "run label",
    "round": "round key a_b",
    "node": "node id in tree order (0 = root)",
    "name": "the article's name: R, A1..A6, B11, ... (letter = depth, digits = 1-based ranks)",
    "depth": "0 for the root",
    "parent": "parent node id (-1 for the root)",
    "rank": "draft rank among the parent's candidates (0 = draft top-1; -1 for the root)",
    "token": "draft token id (root: the last committed token; NA when unknown, as the round table's root_token)",
    "path_logprob": "sum of draft log-probabilities from the root (NaN without scores)",
    "num_children": "children kept in the tree (the node's kept width)",
    "expanded": "the draft ran on this node",
    "expanded_slot": "position among the nodes expanded at its step, in selection order (NA if not expanded)",
    "level_rank": "position in its level by the selection rule (path probability, or the rank-major fallback); NA when the dump cannot say",
    "on_path": "on the accepted path (the root always is)",
    "target_token": "target's top-1 token at this node (NA when the dump has no row)",
    "target_rank": "rank of target_token among this node's recorded draft candidates (NA when absent)",
    "target_in": "kept / beyond / nowhere / unexpanded / no_row (see analysis.tables.build)",
}


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
    path log-probability, ties by tree order (the engine's static rule); with the rank-major
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
            order = level[selection_order(lp)]
        elif d < len(selection) and selection[d] != SELECT_FALLBACK:
            # explicit parents without scores: only the expanded nodes' order is known
            exp = [u for u in level.tolist() if expanded_slot[u] >= 0]
            out[exp] = expanded_slot[exp]
            continue
        else:
            order = level[selection_order(rank_major_keys(tree.ranks[level], expanded_slot[tree.parents[level]]))]
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


_INT_NA = (
    "root_token",
    "bonus_token",
    "root_child_rank",
    "root_target_rank",
    "token",
    "expanded_slot",
    "level_rank",
    "target_token",
    "target_rank",
)


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Nullable integers for NA-able id/rank columns, so CSV and Parquet keep them integral."""
    for col in _INT_NA:
        if col in df.columns:
            df[col] = df[col].astype("Int64")
    return df


def finish_table(df: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """``df`` with ``columns`` in order and the NA-able id/rank columns typed, as every table is."""
    return _typed(df[list(columns)].copy())


def round_table(results: Iterable[RoundResult], run: str = "run", config=None) -> pd.DataFrame:
    """One row per round. ``config``: the TreeConfig the rounds were replayed with (for labels)."""
    short = config.short() if config is not None else ""
    tree_type = int(config.tree_type) if config is not None else 0
    rows = [round_rows(res, run, short, tree_type) for res in results]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in ROUND_COLUMNS})
    return _typed(pd.DataFrame(rows, columns=list(ROUND_COLUMNS)))


def node_table(results: Iterable[RoundResult], run: str = "run") -> pd.DataFrame:
    """One row per tree node of every round (root included, ``node == 0``)."""
    cols: dict[str, list] = {c: [] for c in NODE_COLUMNS}
    for res in results:
        for c, values in node_rows(res, run).items():
            cols[c].extend(values)
    return _typed(pd.DataFrame(cols, columns=list(NODE_COLUMNS)))


@dataclass(frozen=True, eq=False)
class Tables:
    """The two tables of one or more runs; ``configs`` maps run label → TreeConfig.

    ``nodes`` is None when the runs were loaded with their node metrics counted block by block
    (analysis.tables.runs.load_run, ``tables=TABLES_METRICS``): ``node_counts`` holds those counts
    (analysis.tables.metrics.node_metric_counts) and ``rounds`` only the columns the metrics read."""

    rounds: pd.DataFrame
    nodes: pd.DataFrame | None
    configs: dict
    node_counts: list | None = None

    @property
    def runs(self) -> list[str]:
        return list(self.configs)


def build_tables(runs: Sequence) -> Tables:
    """Tables of several runs (analysis.tables.runs.LabelledRun), concatenated with their ``run`` label.

    Each run brings its tables, built from the batch arrays as it was read (analysis.tables.batch).

    Runs without rounds are left out: they have nothing to tabulate.
    """
    runs = [r for r in runs if r.rounds]
    slim = [r.node_counts is not None for r in runs]
    if runs and all(slim):
        return Tables(
            _typed(pd.concat([r.tables[0] for r in runs], ignore_index=True)),
            None,
            {r.label: r.config for r in runs},
            [c for r in runs for c in r.node_counts],
        )
    if any(slim) or any(r.tables[1] is None for r in runs):
        raise ValueError("build_tables: runs loaded without their node table; load them with tables=TABLES_FULL")
    rounds = [r.tables[0] for r in runs]
    nodes = [r.tables[1] for r in runs]
    return Tables(
        _typed(pd.concat(rounds, ignore_index=True)) if rounds else round_table([]),
        _typed(pd.concat(nodes, ignore_index=True)) if nodes else node_table([]),
        {r.label: r.config for r in runs},
    )


EXPORT_FORMATS = ("csv", "parquet")


def export_tables(
    tables: dict[str, pd.DataFrame], out_dir: str | Path, formats: Sequence[str] = EXPORT_FORMATS
) -> list[Path]:
    """Write each table as ``NAME.csv`` and/or ``NAME.parquet`` under ``out_dir``; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        if fmt not in EXPORT_FORMATS:
            raise ValueError(f"unknown table format {fmt!r}: expected one of {EXPORT_FORMATS}")
    for name, df in tables.items():
        if "csv" in formats:
            path = out_dir / f"{name}.csv"
            csv_frame(df).to_csv(path, index=False)  # list columns as text (replay.core.records)
            written.append(path)
        if "parquet" in formats:
            path = out_dir / f"{name}.parquet"
            df.to_parquet(path, index=False)
            written.append(path)
    return written


def require_columns(df: pd.DataFrame, cols: tuple[str, ...], what: str) -> None:
    """Raise ValueError naming the columns ``df`` lacks of ``cols`` (a table this module did not build)."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; build it with analysis.tables.build")
