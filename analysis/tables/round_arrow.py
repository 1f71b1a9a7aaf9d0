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

from dataclasses import dataclass
from functools import cache
from typing import Any

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

from .batch import _Nodes, _round_columns, accepted_name_codes
from .build import ROUND_COLUMNS, TARGET_IN, finish_table

LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens", "notes")
_TEXT_COLUMNS = (
    "round",
    "shape",
    "layout",
    "layout_source",
    "selection",
    "bonus_kind",
    "stop",
    "run",
    "config",
    "root_target_in",
    "accepted_names",
)
_NUMERIC = tuple(c for c in ROUND_COLUMNS if c not in LIST_COLUMNS and c not in _TEXT_COLUMNS)


def round_arrow(res: BatchResult, shape: TreeShape, f: _Nodes, cfg: TreeConfig, run: str) -> dict:
    """The round rows of the rounds of one shape (all replayed) as {column: numpy or Arrow array};
    list columns as list<int64> and list<large_string> (round_table types them)."""
    import pyarrow as pa

    n = len(res)
    lengths = res.accepted_length.astype(np.int64)
    out: dict = {}
    for c, v in _round_columns(res, shape, f, cfg, run, _NUMERIC).items():
        out[c] = pa.array(v.values, mask=v.missing if v.missing.any() else None) if isinstance(v, NullableInts) else v
    out |= {c: _lookup(*text_codes(res, c)) for c in TEXT_COLUMNS} | {
        "round": arrow_round_names(res.keys),
        "run": _lookup([run], np.zeros(n, dtype=np.int64)),
        "config": _lookup([cfg.short()], np.zeros(n, dtype=np.int64)),
        "root_target_in": _lookup(list(TARGET_IN), f.target_in[0]),
        "accepted_names": _lookup(*accepted_name_codes(res, f)),
    }
    return out | _record_list_columns(res, lengths, res.bonus_token != PAD_TOKEN, may_note(res))


@dataclass(frozen=True, eq=False)
class Coded:
    """A text column as codes into its distinct values: rows are put in run order as numbers, and
    the text is made once (node_arrow.node_arrow_table), not copied at every take."""

    values: Any  # [V] pyarrow large_string
    codes: np.ndarray  # [R] int32 into values (a chunk's distinct texts: far fewer than 2^31)


def concat_cells(parts: list[dict]) -> dict:
    """round_arrow's (or node_arrow's) columns of several row sets, one after the other."""
    return {c: join_column([p[c] for p in parts]) for c in parts[0]}


def join_column(columns: list):
    """One column of several row sets, one after the other (numpy, NullableInts, Coded or Arrow)."""
    import pyarrow as pa

    first = columns[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(columns)
    if isinstance(first, NullableInts):
        return NullableInts(np.concatenate([v.values for v in columns]), np.concatenate([v.missing for v in columns]))
    if isinstance(first, Coded):
        starts = np.cumsum([0] + [len(v.values) for v in columns[:-1]])
        codes = np.concatenate([v.codes + start for v, start in zip(columns, starts.tolist())])
        return Coded(pa.concat_arrays([v.values for v in columns]), codes)
    return pa.concat_arrays(columns)


def placed_cells(parts: list[dict], sizes: list[int], order: np.ndarray) -> dict:
    """``take_cells(concat_cells(parts), order)`` (parts of ``sizes`` rows; order: [k] int64, a
    permutation of their rows), each numpy column written to its rows' places at once: one copy of
    the rows, not a join and then a take."""
    if sum(sizes) != order.shape[0] or len(sizes) != len(parts):
        raise ValueError(f"placed_cells: {len(parts)} parts of {sum(sizes)} rows, an order of {order.shape[0]}")
    place = np.empty_like(order)
    place[order] = np.arange(order.shape[0])
    at = [place[lo:hi] for lo, hi in zip(np.cumsum([0, *sizes[:-1]]).tolist(), np.cumsum(sizes).tolist())]
    return {c: _placed([p[c] for p in parts], at, order) for c in parts[0]}


def _placed(columns: list, at: list[np.ndarray], order: np.ndarray):
    """One column of several row sets, each row written at its place ``at`` (numpy, NullableInts,
    Coded); an Arrow column is joined and taken."""
    first = columns[0]
    if isinstance(first, np.ndarray):
        return _scattered(columns, at)
    if isinstance(first, NullableInts):
        return NullableInts(_scattered([v.values for v in columns], at), _scattered([v.missing for v in columns], at))
    if isinstance(first, Coded):
        joined = join_column(columns)
        starts = np.cumsum([0] + [len(v.values) for v in columns[:-1]]).tolist()
        return Coded(joined.values, _scattered([v.codes + start for v, start in zip(columns, starts)], at))
    return join_column(columns).take(order)


def _scattered(pieces: list[np.ndarray], at: list[np.ndarray]) -> np.ndarray:
    """[sum of the pieces' rows] the pieces' rows, piece k's at rows ``at[k]`` ([rows of piece k] int64)."""
    out = np.empty(sum(piece.shape[0] for piece in pieces), dtype=np.result_type(*pieces))
    for piece, places in zip(pieces, at):
        out[places] = piece
    return out


def take_cells(columns: dict, index: np.ndarray | slice) -> dict:
    """Rows ``index`` ([k] int64, or a slice: views) of every column of round_arrow's or node_arrow's."""
    return {c: _rows_of(v, index) for c, v in columns.items()}


def _rows_of(column, index: np.ndarray | slice):
    if isinstance(column, NullableInts):
        return NullableInts(column.values[index], column.missing[index])
    if isinstance(column, Coded):
        return Coded(column.values, column.codes[index])
    if isinstance(column, np.ndarray) or isinstance(index, slice):
        return column[index]
    return column.take(index)


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
