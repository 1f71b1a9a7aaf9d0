"""The round and node tables (pandas): their columns, the tables of several runs, CSV and Parquet export.

One row per round (``ROUND_COLUMNS``) and one row per tree node (``NODE_COLUMNS``); column meanings
are listed there and in docs/analysis.md. analysis.tables.batch builds the rows from the batch
arrays as a run is read. Every metric in analysis.tables.metrics is computed from these two tables only, so several
runs side by side are just more rows with another ``run`` label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from replay.core.records import COLUMN_MEANINGS as RECORD_COLUMNS
from replay.io.table_files import write_frame_csv, write_frame_parquet
from replay.util.file_formats import require_formats

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


def empty_round_table() -> pd.DataFrame:
    """The round table of no rounds: every ROUND_COLUMNS column, of dtype object."""
    return pd.DataFrame({c: pd.Series(dtype="object") for c in ROUND_COLUMNS})


def empty_node_table() -> pd.DataFrame:
    """The node table of no rounds: every NODE_COLUMNS column, the NA-able id/rank ones typed."""
    return _typed(pd.DataFrame({c: [] for c in NODE_COLUMNS}, columns=list(NODE_COLUMNS)))


@dataclass(frozen=True, eq=False)
class Tables:
    """The two tables of one or more runs; ``configs`` maps run label → TreeConfig.

    ``node_counts``: the node metrics' counts of the runs' blocks, counted from the batch arrays as
    the runs were read (analysis.tables.node_counts), what all_metrics finishes the node metrics
    from; None in tables made from a node table alone, which all_metrics refuses
    (replay.testing.frame_counts.metrics_by_frame counts such a table's rows, as the reference).
    ``nodes`` is None when the runs were loaded without it (analysis.tables.runs.load_run,
    ``tables=TABLES_METRICS``): ``rounds`` then has only the columns the metrics read."""

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
    counted = all(r.node_counts is not None for r in runs)  # no runs: none lacks its counts
    counts = [c for r in runs for c in r.node_counts] if counted else None
    whole = [r.tables[1] is not None for r in runs]
    if runs and counted and not any(whole):
        return Tables(
            _typed(pd.concat([r.tables[0] for r in runs], ignore_index=True)),
            None,
            {r.label: r.config for r in runs},
            counts,
        )
    if not all(whole):
        raise ValueError("build_tables: runs loaded without their node table; load them with tables=TABLES_FULL")
    rounds = [r.tables[0] for r in runs]
    nodes = [r.tables[1] for r in runs]
    return Tables(
        _typed(pd.concat(rounds, ignore_index=True)) if rounds else empty_round_table(),
        _typed(pd.concat(nodes, ignore_index=True)) if nodes else empty_node_table(),
        {r.label: r.config for r in runs},
        counts,
    )


EXPORT_FORMATS = ("csv", "parquet")


def export_tables(
    tables: dict[str, pd.DataFrame], out_dir: str | Path, formats: Sequence[str] = EXPORT_FORMATS
) -> list[Path]:
    """Write each table as ``NAME.csv`` and/or ``NAME.parquet`` under ``out_dir``; returns the paths."""
    require_formats(formats, EXPORT_FORMATS, "table")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, df in tables.items():
        if "csv" in formats:
            path = out_dir / f"{name}.csv"
            with open(path, "wb") as out:
                write_frame_csv(df, out)  # list columns as text (replay.io.table_files)
            written.append(path)
        if "parquet" in formats:
            path = out_dir / f"{name}.parquet"
            write_frame_parquet(df, path)
            written.append(path)
    return written


def require_columns(df: pd.DataFrame, cols: tuple[str, ...], what: str) -> None:
    """Raise ValueError naming the columns ``df`` lacks of ``cols`` (a table this module did not build)."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; build it with analysis.tables.build")
