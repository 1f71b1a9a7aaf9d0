"""The round table of a batch as pyarrow columns built from the arrays, without pandas (report's
tables/, analysis.tables.stream): the Table that ``pa.Table.from_pandas(preserve_index=False)``
makes of analysis.tables.batch's round frame, the same types, values and pandas metadata.

A frame's types depend on its values only in its list columns (a list column whose lists are all
empty is Arrow's list<null>) and bonus_kind (None where there is no bonus: all None is null):
round_table types the joined rows once they are known (round_schema: from_pandas of one row of
the same dtypes and kinds of list, cached). Text cells are taken from their distinct values; list
cells are Arrow lists made from offsets (replay.engine.batch.frames.record_arrow's way).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import BatchResult, TreeShape
from replay.engine.batch.frames import (
    TEXT_COLUMNS,
    NullableInts,
    _lookup,
    _record_list_columns,
    arrow_round_names,
    frame_of,
    may_note,
    text_codes,
)

from .batch import _Nodes, _round_columns
from .build import ROUND_COLUMNS, finish_table
from .cells import Coded

LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens", "notes")
_ANALYSIS_TEXT = ("run", "config", "root_target_in", "accepted_names")  # cells.Coded from batch._round_columns
_TEXT_COLUMNS = ("round", *TEXT_COLUMNS, *_ANALYSIS_TEXT)
_NUMERIC = tuple(c for c in ROUND_COLUMNS if c not in LIST_COLUMNS and c not in _TEXT_COLUMNS)


def round_arrow(res: BatchResult, shape: TreeShape, f: _Nodes, cfg: TreeConfig, run: str) -> dict:
    """The round rows of the rounds of one shape (all replayed) as {column: numpy or Arrow array};
    list columns as list<int64> and list<large_string> (round_table types them)."""
    import pyarrow as pa

    lengths = res.accepted_length.astype(np.int64)
    out: dict = {}
    for c, v in _round_columns(res, shape, f, cfg, run, _NUMERIC + _ANALYSIS_TEXT).items():
        out[c] = pa.array(v.values, mask=v.missing if v.missing.any() else None) if isinstance(v, NullableInts) else v
    out |= {c: _lookup(*text_codes(res, c)) for c in TEXT_COLUMNS} | {"round": arrow_round_names(res.keys)}
    return out | _record_list_columns(res, lengths, res.bonus_token != PAD_TOKEN, may_note(res))


def round_table(columns: dict):
    """The pyarrow Table of the joined round columns (round_arrow's, rows in run order), typed as
    from_pandas types the round frame of those rows."""
    import pyarrow as pa

    kinds = tuple(bool(len(columns[c].flatten())) for c in LIST_COLUMNS) + (
        columns["bonus_kind"].null_count < len(columns["bonus_kind"]),
    )
    dtypes = {c: v.dtype.str for c, v in columns.items() if isinstance(v, np.ndarray)}
    schema = round_schema(kinds, tuple(sorted(dtypes.items())))
    n = len(columns["round"])
    arrays = []
    for field in schema:
        v = columns[field.name]
        if pa.types.is_list(field.type) and field.type.value_type == pa.null():
            v = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.nulls(0))  # all empty
        elif field.type == pa.null():  # a text column without a value (bonus_kind: no bonus anywhere)
            v = pa.nulls(n)
        elif isinstance(v, np.ndarray):
            v = pa.array(v)
        elif isinstance(v, Coded):
            v = v.values.take(pa.array(v.codes))
        arrays.append(v if v.type == field.type else v.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


@cache
def round_schema(kinds: tuple[bool, ...], dtypes: tuple[tuple[str, str], ...]):
    """from_pandas' schema of a round frame whose numeric columns have ``dtypes``, whose list
    columns (LIST_COLUMNS) hold some item and whose bonus_kind some text where ``kinds`` says
    (an object column of None only is Arrow's null): one such row, built as
    analysis.tables.batch builds the frame (types and pandas metadata depend on nothing else)."""
    import pyarrow as pa

    cells: dict = {c: NullableInts(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=bool)) for c in _NUMERIC}
    for c, dt in dtypes:  # the others are nullable integers (NullableInts)
        cells[c] = np.zeros(1, dtype=np.dtype(dt))
    for c in _TEXT_COLUMNS:
        cells[c] = np.asarray(["x"], dtype=object)
    for c, some in zip(LIST_COLUMNS, kinds):
        cells[c] = [(["x"] if c == "notes" else [0]) if some else []]
    cells["bonus_kind"] = np.asarray(["x" if kinds[-1] else None], dtype=object)
    frame = finish_table(frame_of(cells, ROUND_COLUMNS), ROUND_COLUMNS)
    return pa.Schema.from_pandas(frame, preserve_index=False)
