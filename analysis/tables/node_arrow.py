"""The node table of a batch as a pyarrow Table built from the per-node arrays, without pandas: the
Table that ``pa.Table.from_pandas(preserve_index=False)`` makes of analysis.tables.batch's node frame
(the same types, values and pandas metadata), for report's tables/ (analysis.tables.stream), where a 10^6-round run has 13 million node rows.

Until a frame's Table is made (node_arrow_table), the rows are columns that numpy puts in run order:
numbers and flags as arrays, text as codes into its few distinct values (run label, round names,
node names, where the target's token is; cells.Coded), made text once.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.batch.frames import NullableInts, frame_of

from .batch import TableParts, facts_by_shape, node_cells
from .build import NODE_COLUMNS, finish_table
from .cells import Coded, join_column
from .round_arrow import round_arrow


def stream_parts(batch: RoundBatch, res: BatchResult, cfg: TreeConfig, run: str) -> TableParts:
    """analysis.tables.batch.batch_table_parts with each shape's node rows as cells (Coded text)
    and its round rows as round_arrow's."""
    parts = TableParts([], [], [], [])
    for shape, facts, r, rounds in facts_by_shape(batch, res):
        round_cells = round_arrow(r, shape, facts, cfg, run)
        parts.rounds.append(round_cells)
        parts.nodes.append(node_cells(r, shape, facts, run, rounds=round_cells["round"]))
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


def node_arrow_table(blocks: list[dict]):
    """The pyarrow Table of the node columns (batch.node_cells) of ``blocks`` (rows in run order, one block after
    the other), typed as from_pandas types the node frame of those rows; each column one chunk:
    the blocks' columns joined by numpy (one copy), numbers then wrapped by Arrow without another.
    The blocks are emptied column by column as the Table is made: the rows are never held twice."""
    import pyarrow as pa

    arrays = []
    for field in node_schema():
        pieces = [block.pop(field.name) for block in blocks]
        column = join_column(pieces) if len(pieces) > 1 else pieces[0]
        del pieces
        v = column.values.take(pa.array(column.codes)) if isinstance(column, Coded) else _arrow(column)
        del column
        arrays.append(v if v.type == field.type else v.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=node_schema())


def _arrow(column):
    """One numpy column or NullableInts as Arrow, as from_pandas converts it."""
    import pyarrow as pa

    if isinstance(column, NullableInts):
        return pa.array(column.values, mask=column.missing if column.missing.any() else None)
    return pa.array(column, from_pandas=True)  # NaN is missing, as from_pandas makes it
