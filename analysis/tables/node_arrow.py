"""The node table of a batch as a pyarrow Table built from the per-node arrays, without pandas: the
Table that ``pa.Table.from_pandas(preserve_index=False)`` makes of analysis.tables.batch's node frame
(the same types, values and pandas metadata), for report's tables/ (analysis.tables.stream), where a 10^6-round run has 13 million node rows.

Until a frame's Table is made (node_arrow_table), the rows are columns that numpy puts in run order:
numbers and flags as arrays, text as codes into its few distinct values (run label, round names,
node names, where the target's token is; round_arrow.Coded), made text once.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.tree import node_name
from replay.engine.batch import BatchResult, RoundBatch, TreeShape, replayed_by_shape
from replay.engine.batch.frames import NullableInts, frame_of, round_names

from .batch import _IN_NAMES, TableParts, _node_columns, _node_facts, _Nodes, _rows
from .build import NODE_COLUMNS, finish_table
from .round_arrow import Coded, round_arrow


def stream_parts(batch: RoundBatch, res: BatchResult, cfg: TreeConfig, run: str) -> TableParts:
    """analysis.tables.batch.batch_table_parts with each shape's node rows as node_cells' columns
    and its round rows as round_arrow's."""
    if len(res) != len(batch):
        raise ValueError(f"result of {len(res)} rounds for a batch of {len(batch)}")
    ordinals = (
        np.arange(len(batch), dtype=np.int64) if batch.ordinals is None else np.asarray(batch.ordinals, dtype=np.int64)
    )
    parts = TableParts([], [], [], [])
    for shape, members, sub, r in replayed_by_shape(batch, res):
        facts = _node_facts(sub, r, shape, cfg.tree_type != TREE_DYNAMIC)
        rounds = ordinals[members]
        parts.rounds.append(round_arrow(r, shape, facts, cfg, run))
        parts.nodes.append(node_cells(r, shape, facts, run))
        parts.round_ordinals.append(rounds)
        parts.node_ordinals.append(np.repeat(rounds, facts.parent.shape[0]))
    return parts


@cache
def node_schema():
    """The node frame's Arrow schema with its pandas metadata (pa.Schema.from_pandas of a one-row
    frame typed as every node frame is: the types and metadata depend on the dtypes only)."""
    import pyarrow as pa

    one = np.zeros(1, dtype=np.int64)
    cells = {
        "run": np.asarray(["r"], dtype=object),
        "round": np.asarray(["0_0"], dtype=object),
        "node": one,
        "name": np.asarray(["R"], dtype=object),
        "depth": one,
        "parent": one,
        "rank": one,
        "token": NullableInts(one, np.zeros(1, dtype=bool)),
        "path_logprob": np.zeros(1),
        "num_children": one,
        "expanded": np.zeros(1, dtype=bool),
        "expanded_slot": NullableInts(one, np.zeros(1, dtype=bool)),
        "level_rank": NullableInts(one, np.zeros(1, dtype=bool)),
        "on_path": np.zeros(1, dtype=bool),
        "target_token": NullableInts(one, np.zeros(1, dtype=bool)),
        "target_rank": NullableInts(one, np.zeros(1, dtype=bool)),
        "target_in": np.asarray(["kept"], dtype=object),
    }
    frame = finish_table(frame_of(cells, NODE_COLUMNS), NODE_COLUMNS)
    return pa.Schema.from_pandas(frame, preserve_index=False)


def node_cells(res: BatchResult, shape: TreeShape, f: _Nodes, run: str) -> dict:
    """The node rows of the rounds of one shape (res, f: analysis.tables.batch's facts) as {column:
    numpy array, NullableInts or Coded}: node_arrow_table makes them a pyarrow Table."""
    n, c = f.parent.shape
    cells = _node_columns(res, shape, f, run, [k for k in NODE_COLUMNS if k not in _CODED])
    return cells | {
        "run": _coded([run], np.zeros(n * c, dtype=np.int64)),
        "round": _coded(round_names(res), np.repeat(np.arange(c, dtype=np.int64), n)),
        "name": _coded([node_name(p) for p in f.ranked.paths], _rows(f.ranked.index).astype(np.int64)),
        "target_in": _coded(list(_IN_NAMES), _rows(f.target_in).astype(np.int64)),
    }


_CODED = ("run", "round", "name", "target_in")


def _coded(values, codes: np.ndarray) -> Coded:
    import pyarrow as pa

    return Coded(pa.array(values, type=pa.large_string()), codes.astype(np.int32))


def node_arrow_table(cells: dict):
    """The pyarrow Table of node_cells' columns (joined, rows in run order), typed as from_pandas
    types the node frame of those rows."""
    import pyarrow as pa

    arrays = []
    for field in node_schema():
        v = cells[field.name]
        if isinstance(v, Coded):
            v = v.values.take(pa.array(v.codes))
        elif isinstance(v, NullableInts):
            v = pa.array(v.values, mask=v.missing if v.missing.any() else None)
        else:
            v = pa.array(v, from_pandas=True)  # NaN is missing, as from_pandas makes it
        arrays.append(v if v.type == field.type else v.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=node_schema())
