"""Table rows as columns, before they are a pandas frame (analysis.tables.batch) or an Arrow Table
(round_arrow, node_arrow): one way to join the rows of several blocks, take some of them, and put
them in run order, whatever each column holds.

A column is a numpy array, a replay.engine.batch.frames.NullableInts, a list of cells (a frame's
list column), a Coded text column, or a pyarrow array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from replay.engine.batch.frames import NullableInts


@dataclass(frozen=True, eq=False)
class Coded:
    """A text column as codes into its distinct values: rows are put in run order as numbers, and
    the text is made once (node_arrow.node_arrow_table), not copied at every take."""

    values: Any  # [V] pyarrow large_string
    codes: np.ndarray  # [R] int32 into values (a chunk's distinct texts: far fewer than 2^31)


def coded(values, codes: np.ndarray) -> Coded:
    """A Coded column; ``values``: a sequence of texts, or a pyarrow large_string array of them."""
    import pyarrow as pa

    if not isinstance(values, pa.Array):
        values = pa.array(values, type=pa.large_string())
    return Coded(values, codes.astype(np.int32))


def object_cells(columns: dict) -> dict:
    """``columns`` with each Coded column as [R] object texts, as a pandas frame's text column is."""
    return {
        c: v.values.to_numpy(zero_copy_only=False)[v.codes] if isinstance(v, Coded) else v for c, v in columns.items()
    }


def concat_cells(parts: list[dict]) -> dict:
    """The columns of several row sets (each with the same columns), one after the other."""
    return {c: join_column([p[c] for p in parts]) for c in parts[0]}


def join_column(columns: list):
    """One column of several row sets, one after the other."""
    first = columns[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(columns)
    if isinstance(first, NullableInts):
        return NullableInts(np.concatenate([v.values for v in columns]), np.concatenate([v.missing for v in columns]))
    if isinstance(first, list):
        return [x for v in columns for x in v]
    import pyarrow as pa

    if isinstance(first, Coded):
        starts = np.cumsum([0] + [len(v.values) for v in columns[:-1]])
        codes = np.concatenate([v.codes + start for v, start in zip(columns, starts.tolist())])
        return Coded(pa.concat_arrays([v.values for v in columns]), codes)
    return pa.concat_arrays(columns)


def take_cells(columns: dict, index: np.ndarray | slice) -> dict:
    """Rows ``index`` ([k] int64, or a slice: views) of every column."""
    return {c: _rows_of(v, index) for c, v in columns.items()}


def _rows_of(column, index: np.ndarray | slice):
    if isinstance(column, NullableInts):
        return NullableInts(column.values[index], column.missing[index])
    if isinstance(column, Coded):
        return Coded(column.values, column.codes[index])
    if isinstance(column, np.ndarray) or isinstance(index, slice):
        return column[index]
    if isinstance(column, list):
        return [column[i] for i in index.tolist()]
    return column.take(index)


def in_run_order(cells: list[dict], ordinals: list[np.ndarray]) -> tuple[dict, np.ndarray]:
    """(the rows of ``cells`` one after the other, put in run order; their ordinals, sorted).
    ``ordinals``: per row set, [rows] int64 each row's round's position in its run. The sort is
    stable, so each round's nodes stay in tree order."""
    ords = np.concatenate(ordinals)
    if ords.shape[0] > 1 and (ords[1:] < ords[:-1]).any():
        order = np.argsort(ords, kind="stable")
        return placed_cells(cells, [o.shape[0] for o in ordinals], order), ords[order]
    return concat_cells(cells), ords


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
    Coded); a list or Arrow column is joined and taken."""
    first = columns[0]
    if isinstance(first, np.ndarray):
        return _scattered(columns, at)
    if isinstance(first, NullableInts):
        return NullableInts(_scattered([v.values for v in columns], at), _scattered([v.missing for v in columns], at))
    if isinstance(first, Coded):
        joined = join_column(columns)
        starts = np.cumsum([0] + [len(v.values) for v in columns[:-1]]).tolist()
        return Coded(joined.values, _scattered([v.codes + start for v, start in zip(columns, starts)], at))
    return _rows_of(join_column(columns), order)


def _scattered(pieces: list[np.ndarray], at: list[np.ndarray]) -> np.ndarray:
    """[sum of the pieces' rows] the pieces' rows, piece k's at rows ``at[k]`` ([rows of piece k] int64)."""
    out = np.empty(sum(piece.shape[0] for piece in pieces), dtype=np.result_type(*pieces))
    for piece, places in zip(pieces, at):
        out[places] = piece
    return out
