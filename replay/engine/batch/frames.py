"""The per-round record as columns: each column of replay.core.records (docs/output-schema.md) made
once from a BatchResult's arrays (record_columns), and the forms every output takes of them: the
pandas frame (frame_of), the Arrow table (record_arrow, arrow_table), Python values (record_dicts:
BatchResult.round_json) and JSON Lines (replay.engine.batch.json_lines).

A column is one of four kinds: numbers ([R] numpy), ids with missing cells (NullableInts), texts as
codes into their distinct values (Coded: a text is made once, not per round) and lists (a pyarrow
list array built from offsets). Python runs per round only for the notes of rounds that can have
one. pandas and pyarrow are imported when a form is asked for, never by the replay itself.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from replay.core.records import COLUMNS, normalize_frame, shape_text
from replay.core.vocab import LAYOUTS, PAD_TOKEN
from replay.util.words import round_name

from .codes import BONUS_NAMES, STOP_CODES


@dataclass(frozen=True, eq=False)
class NullableInts:
    """A column of ids with missing cells, until it becomes a pandas ``Int64`` column."""

    values: np.ndarray  # [R] int64
    missing: np.ndarray  # [R] bool

    def __len__(self) -> int:
        return int(self.values.shape[0])


@dataclass(frozen=True, eq=False)
class Coded:
    """A text column as codes into its distinct values: rows are put in run order as numbers, and
    the text is made once per distinct value, not copied at every take."""

    values: Any  # [V] pyarrow large_string, null where the cell is None
    codes: np.ndarray  # [R] int32 into values (a chunk's distinct texts: far fewer than 2^31)

    def __len__(self) -> int:
        return int(self.codes.shape[0])


def coded(values, codes: np.ndarray) -> Coded:
    """A Coded column; ``values``: a sequence of texts (or None), or a pyarrow large_string array of them."""
    import pyarrow as pa

    if not isinstance(values, pa.Array):
        values = pa.array(values, type=pa.large_string())
    return Coded(values, codes.astype(np.int32))


Columns = dict  # column name → [R] numpy array, NullableInts, Coded or pyarrow list array


def replayed(res):
    """The rounds of ``res`` that were replayed (``res.ok``), in its order: the rounds with a record."""
    ok = np.flatnonzero(res.ok)
    return res if ok.shape[0] == len(res) else res.take(ok)


def record_columns(r, names: Collection[str] | None = None) -> Columns:
    """The record's columns of every round of ``r`` (all replayed: ``r.ok`` everywhere); only those
    of ``names`` when given (the others, list columns above all, cost time at a million rounds)."""
    lengths = r.accepted_length.astype(np.int64)
    known = r.bonus_token != PAD_TOKEN
    makers = {
        "round": lambda: coded(arrow_round_names(r.keys), np.arange(len(r))),
        "key_a": lambda: r.keys[0].astype(np.int64),
        "key_b": lambda: r.keys[1].astype(np.int64),
        "root_token": lambda: pad_as_na(r.root_tokens),
        "num_steps": lambda: r.num_steps,
        "num_nodes": lambda: r.num_nodes,
        "shape": lambda: coded(*text_codes(r, "shape")),
        "layout": lambda: coded(*text_codes(r, "layout")),
        "layout_source": lambda: coded(*text_codes(r, "layout_source")),
        "selection": lambda: coded(*text_codes(r, "selection")),
        "accepted_length": lambda: lengths,
        "accepted_tokens": lambda: leading(r.accepted_tokens, lengths),
        "accepted_nodes": lambda: leading(r.accepted_nodes, lengths),
        "bonus_token": lambda: pad_as_na(r.bonus_token),
        "bonus_kind": lambda: coded(*text_codes(r, "bonus_kind")),
        "stop": lambda: coded(*text_codes(r, "stop")),
        "committed_tokens": lambda: leading(committed_tokens(r, lengths, known), r.num_committed.astype(np.int64)),
        "num_committed": lambda: r.num_committed.astype(np.int64),
        "notes": lambda: notes_of(r),
    }
    return {c: make() for c, make in makers.items() if names is None or c in names}


def committed_tokens(r, lengths: np.ndarray, known: np.ndarray) -> np.ndarray:
    """[G + 1, R] int64 each round's accepted tokens, then its bonus token where known (lengths,
    known: [R] each round's accepted length and whether its bonus is known)."""
    g, n = r.accepted_tokens.shape
    out = np.zeros((g + 1, n), dtype=np.int64)
    out[:g] = r.accepted_tokens
    at = np.minimum(lengths, g)
    out[at, np.arange(n)] = np.where(known, r.bonus_token, out[at, np.arange(n)])
    return out


def leading(a: np.ndarray, counts: np.ndarray):
    """pyarrow list<int64>: per round (column of ``a`` [G, R]) its first ``counts[r]`` entries."""
    import pyarrow as pa

    mask = np.arange(a.shape[0])[None, :] < counts[:, None]  # [R, G]
    return pa.ListArray.from_arrays(pa.array(_offsets(counts)), pa.array(a.T[mask].astype(np.int64)))


def _offsets(counts: np.ndarray) -> np.ndarray:
    """[R + 1] int32 Arrow list offsets of rows of ``counts`` items."""
    offsets = np.zeros(counts.shape[0] + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def notes_of(res):
    """pyarrow list<large_string>: BatchResult.notes of every round, asked only of rounds that can
    have one (most have none)."""
    import pyarrow as pa

    rows = np.flatnonzero(may_note(res))
    notes = [res.notes(int(i)) for i in rows]
    counts = np.zeros(len(res), dtype=np.int64)
    counts[rows] = [len(v) for v in notes]
    texts = pa.array([t for v in notes for t in v], type=pa.large_string())
    return pa.ListArray.from_arrays(pa.array(_offsets(counts)), texts)


def may_note(res) -> np.ndarray:
    """[R] bool the rounds that can have a note (BatchResult.notes): the others have none, and
    asking each of them costs Python time per round."""
    may = res.fallback_guessed.copy() | (res.validate_extra_rows > 0)
    may[[k for k in res.selection_notes if k < len(res)]] = True
    return may


def text_codes(res, column: str) -> tuple[list, np.ndarray]:
    """The record's text column ``column`` (shape, layout, layout_source, selection, bonus_kind,
    stop) as (its texts, [R] int64 each round's index into them): a text is made once, not per round."""
    if column == "selection":
        first, inverse = distinct_columns(res.selection)
        return [res.selection_summary(int(i)) for i in first], inverse
    texts, codes = {
        "shape": lambda: ([shape_text(s.widths) for s in res.shapes] + [""], res.shape_index),
        "layout": lambda: (list(LAYOUTS), res.layout),
        "layout_source": lambda: (["detected", "stated"], res.layout_stated),
        "bonus_kind": lambda: ([BONUS_NAMES[k] for k in range(len(BONUS_NAMES))], res.bonus_kind),
        "stop": lambda: (list(STOP_CODES), res.stop),
    }[column]()
    return texts, np.asarray(codes, dtype=np.int64)


def arrow_round_names(keys: np.ndarray):
    """[R] pyarrow large_string round names ``a_b`` of [2, R] round keys (key_names, made by Arrow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    keys = keys.astype(np.int64)
    return pc.binary_join_element_wise(pc.cast(keys[0], text), pc.cast(keys[1], text), pa.scalar("_", text))


def round_names(res) -> np.ndarray:
    """[R] object round keys ``a_b``."""
    return key_names(res.keys)


def key_names(keys: np.ndarray) -> np.ndarray:
    """[R] object round names ``a_b`` of [2, R] round keys."""
    return np.asarray([round_name(key) for key in zip(keys[0].tolist(), keys[1].tolist())], dtype=object)


def pad_as_na(values: np.ndarray) -> NullableInts:
    """[R] ids, missing where PAD_TOKEN (the record's None)."""
    values = np.asarray(values, dtype=np.int64)
    return NullableInts(values, values == PAD_TOKEN)


def distinct_columns(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first: [U] the first round of each distinct column of ``codes`` [C, R] (small ints), in
    the order of their sorted columns; inverse: [R] each round's index into ``first``).

    As np.unique(codes, axis=1, return_index=True, return_inverse=True), whose sort of row
    records takes seconds at 10^6 rounds: here the rows are folded into one int64 key.
    """
    key = np.zeros(codes.shape[1], dtype=np.int64)
    for row in np.asarray(codes, dtype=np.int64):
        low = int(row.min()) if row.size else 0
        base = int(row.max()) - low + 1 if row.size else 1
        if key.size and int(key.max()) >= (1 << 62) // base:  # renumber the key before it overflows
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
        key = key * base + (row - low)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def rows_of(column, index: np.ndarray | slice):
    """Rows ``index`` ([k] int64, or a slice: views) of a column of any kind."""
    if isinstance(column, NullableInts):
        return NullableInts(column.values[index], column.missing[index])
    if isinstance(column, Coded):
        return Coded(column.values, column.codes[index])
    if isinstance(column, np.ndarray) or isinstance(index, slice):
        return column[index]
    return column.take(index)


# --------------------------------------------------------------------------------------------
# The forms of the columns


def list_cells(lists) -> list[list]:
    """The Python lists of a pyarrow list array (its cells as a frame's list column holds them)."""
    offsets = np.asarray(lists.offsets).tolist()
    items = lists.values.slice(offsets[0], offsets[-1] - offsets[0])
    flat = items.to_numpy(zero_copy_only=False).tolist() if len(items) else []
    start = offsets[0]
    return [flat[a - start : b - start] for a, b in zip(offsets[:-1], offsets[1:])]


def pandas_column(column):
    """One column as pandas takes it: texts as [R] object, lists as Python lists, NullableInts as ``Int64``."""
    import pandas as pd
    import pyarrow as pa

    if isinstance(column, NullableInts):
        return pd.arrays.IntegerArray(column.values, column.missing)
    if isinstance(column, Coded):
        return column.values.to_numpy(zero_copy_only=False)[column.codes]
    if isinstance(column, pa.Array):
        return list_cells(column)
    return column


def frame_of(columns: Columns, names: Sequence[str]):
    """The pandas frame, built at once (dtypes inferred over all rows, as a frame of records is)."""
    import pandas as pd

    return pd.DataFrame({c: pandas_column(v) for c, v in columns.items()}, columns=list(names))


def python_cells(column) -> list:
    """One column's cells as Python values (None where missing), as a record holds them."""
    if isinstance(column, NullableInts):
        return [None if m else v for v, m in zip(column.values.tolist(), column.missing.tolist())]
    cells = pandas_column(column)
    return cells if isinstance(cells, list) else cells.tolist()


def record_dicts(res) -> list[dict]:
    """The record of every round of ``res`` (all replayed) as a dict in COLUMNS order
    (the reference replayer's records, replay.testing.records_reference.RoundRecord.to_json)."""
    columns = record_columns(res)
    return [dict(zip(COLUMNS, row)) for row in zip(*(python_cells(columns[c]) for c in COLUMNS))]


def record_frame(res):
    """One row per replayed round (``res.ok``) in ``res``'s order, the record's columns."""
    res = replayed(res)
    if not len(res):
        return _no_records()
    return frame_of(record_columns(res), COLUMNS)


def _no_records():
    """The record frame of no rounds: every column of dtype object, the nullable ids ``Int64``."""
    import pandas as pd

    return normalize_frame(pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS}))


def arrow_column(column):
    """One column as an Arrow array, as ``pa.Table.from_pandas`` converts the frame's column."""
    import pyarrow as pa

    if isinstance(column, NullableInts):
        return pa.array(column.values, mask=column.missing if column.missing.any() else None)
    if isinstance(column, Coded):
        return column.values.take(pa.array(column.codes))
    if isinstance(column, np.ndarray):
        return pa.array(column, from_pandas=True)  # NaN is missing, as from_pandas makes it
    return column


def arrow_table(columns: Columns, schema):
    """The pyarrow Table of ``columns`` typed by ``schema`` (from_pandas' of a frame of the same
    rows): a list column whose lists are all empty is list<null> there, a text column of None only null."""
    import pyarrow as pa

    n = len(columns[schema[0].name])
    arrays = []
    for field in schema:
        if pa.types.is_list(field.type) and field.type.value_type == pa.null():
            v = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.nulls(0))  # all empty
        elif field.type == pa.null():
            v = pa.nulls(n)
        else:
            v = arrow_column(columns[field.name])
        arrays.append(v if v.type == field.type else v.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def record_arrow(res):
    """``record_frame(res)`` as a pyarrow Table, built from the columns (list columns from offsets):
    the Parquet and CSV writers of ``batch -o`` at millions of rounds, one Python object per
    distinct text and per round with notes, not per round; typed as from_pandas types the frame."""
    import pyarrow as pa

    res = replayed(res)
    if not len(res):
        return pa.Table.from_pandas(_no_records(), preserve_index=False)
    columns = record_columns(res)
    return arrow_table(columns, _record_schema(column_kinds(columns)))


@cache
def _record_schema(kinds: tuple):
    """from_pandas' schema of a record frame whose columns are of ``kinds`` (column_kinds')."""
    import pyarrow as pa

    return pa.Schema.from_pandas(frame_of(one_row(kinds), COLUMNS), preserve_index=False)


def column_kinds(columns: Columns) -> tuple:
    """(name, kind) of each column: what decides its type in a frame's Arrow table and pandas
    metadata (numbers: their dtype; a text column: whether some cell is not None; a list column:
    its items' type and whether some list holds one; an Arrow list<null> or null column else)."""
    out = []
    for c, v in columns.items():
        if isinstance(v, np.ndarray):
            kind: tuple = ("numbers", v.dtype.str)
        elif isinstance(v, NullableInts):
            kind = ("ids",)
        elif isinstance(v, Coded):
            valid = np.asarray(v.values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            kind = ("texts", bool(valid[v.codes].any()))
        else:
            offsets = np.asarray(v.offsets)
            kind = ("lists", str(v.type.value_type), bool(offsets[-1] > offsets[0]))
        out.append((c, kind))
    return tuple(out)


def one_row(kinds: tuple) -> Columns:
    """One row of columns of ``kinds`` (column_kinds'): a frame of it has the types of every frame
    of columns of those kinds."""
    cells: Columns = {}
    for c, kind in kinds:
        if kind[0] == "numbers":
            cells[c] = np.zeros(1, dtype=np.dtype(kind[1]))
        elif kind[0] == "ids":
            cells[c] = NullableInts(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=bool))
        elif kind[0] == "texts":
            cells[c] = np.asarray(["x" if kind[1] else None], dtype=object)
        else:
            cells[c] = [[0 if "int" in kind[1] else "x"] if kind[2] else []]
    return cells
