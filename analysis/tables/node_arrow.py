"""The node table of a batch as a pyarrow Table built from the per-node arrays, without pandas: the
Table that ``pa.Table.from_pandas(preserve_index=False)`` makes of analysis.tables.batch's node frame
(the same types, values and pandas metadata), for report's tables/ (analysis.tables.stream), where a 10^6-round run has 13 million node rows.

Until a frame's Table is made (node_arrow_table), the rows are columns that numpy puts in run order:
numbers and flags as arrays, text as codes into its few distinct values (run label, round names,
node names, where the target's token is; frames.Coded), made text once.
"""

from __future__ import annotations

from replay.engine.batch.frames import arrow_column, column_kinds

from .build import NODE_COLUMNS
from .cells import join_column
from .round_arrow import table_schema


def node_arrow_table(blocks: list[dict]):
    """The pyarrow Table of the node columns (batch.node_cells) of ``blocks`` (rows in run order, one block after
    the other), typed as from_pandas types the node frame of those rows; each column one chunk:
    the blocks' columns joined by numpy (one copy), numbers then wrapped by Arrow without another.
    The blocks are emptied column by column as the Table is made: the rows are never held twice."""
    import pyarrow as pa

    schema = table_schema(column_kinds(blocks[0]), tuple(NODE_COLUMNS))
    arrays = []
    for field in schema:
        pieces = [block.pop(field.name) for block in blocks]
        column = join_column(pieces) if len(pieces) > 1 else pieces[0]
        del pieces
        v = arrow_column(column)
        del column
        arrays.append(v if v.type == field.type else v.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
