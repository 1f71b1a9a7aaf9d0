"""The round table as a pyarrow Table built from its columns (analysis.tables.batch's round
columns, rows in run order), without pandas (report's tables/, analysis.tables.stream): the Table
that ``pa.Table.from_pandas(preserve_index=False)`` makes of the round frame of the same rows, the
same types, values and pandas metadata; table_schema types the node table's too (node_arrow).
"""

from __future__ import annotations

from functools import cache

from replay.engine.batch.frames import arrow_table, column_kinds, frame_of, one_row

from .build import ROUND_COLUMNS, finish_table


def round_table(columns: dict):
    """The pyarrow Table of the joined round columns, typed as from_pandas types their round frame."""
    return arrow_table(columns, table_schema(column_kinds(columns), tuple(ROUND_COLUMNS)))


@cache
def table_schema(kinds: tuple, names: tuple[str, ...]):
    """from_pandas' schema of a table (its columns ``names``) whose columns are of ``kinds``
    (frames.column_kinds'): of one such row, built as analysis.tables.batch builds the frame."""
    import pyarrow as pa

    frame = finish_table(frame_of(one_row(kinds), names), names)
    return pa.Schema.from_pandas(frame, preserve_index=False)
