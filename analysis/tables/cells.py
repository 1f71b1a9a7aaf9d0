"""Table rows as columns, before they are a pandas frame (analysis.tables.batch) or an Arrow Table
(round_arrow, node_arrow): one way to join the rows of several blocks, take some of them, and put
them in run order, whatever each column holds.

A column is any kind of replay.engine.batch.frames' columns: a numpy array, NullableInts, Coded
text, or a pyarrow array (list columns).
"""

from __future__ import annotations

import numpy as np

from replay.engine.batch.frames import Coded, NullableInts, rows_of


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
    import pyarrow as pa

    if isinstance(first, Coded):
        starts = np.cumsum([0] + [len(v.values) for v in columns[:-1]])
        codes = np.concatenate([v.codes + start for v, start in zip(columns, starts.tolist())])
        return Coded(pa.concat_arrays([v.values for v in columns]), codes)
    return pa.concat_arrays(columns)


def take_cells(columns: dict, index: np.ndarray | slice) -> dict:
    """Rows ``index`` ([k] int64, or a slice: views) of every column."""
    return {c: rows_of(v, index) for c, v in columns.items()}


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
    return rows_of(join_column(columns), order)


def _scattered(pieces: list[np.ndarray], at: list[np.ndarray]) -> np.ndarray:
    """[sum of the pieces' rows] the pieces' rows, piece k's at rows ``at[k]`` ([rows of piece k] int64)."""
    out = np.empty(sum(piece.shape[0] for piece in pieces), dtype=np.result_type(*pieces))
    for piece, places in zip(pieces, at):
        out[places] = piece
    return out
