"""A BatchResult as the per-round record frame: replay.core.records' columns (docs/output-schema.md).

The same frame, dtypes included, as ``records_frame(records_of_batch(result))`` builds record by
record, with numpy over the rounds: Python runs per round only where a cell is a list (accepted and committed tokens, nodes, notes) or the key text.
pandas is imported when a frame is asked for, never by the replay itself.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from replay.core.records import COLUMNS, records_frame, records_of_batch, shape_text
from replay.core.vocab import LAYOUTS, PAD_TOKEN
from replay.util.words import round_name

from .codes import BONUS_NAMES, STOP_CODES


@dataclass(frozen=True, eq=False)
class NullableInts:
    """A column of ids with missing cells, until it becomes a pandas ``Int64`` column."""

    values: np.ndarray  # [R] int64
    missing: np.ndarray  # [R] bool


Columns = dict  # column name → [R] numpy array, list of R cells, or NullableInts


def record_frame(res):
    """One row per replayed round (``res.ok``) in ``res``'s order, the record's columns."""
    ok = np.flatnonzero(res.ok)
    if not ok.shape[0]:
        return records_frame([])
    return frame_of(record_columns(res if ok.shape[0] == len(res) else res.take(ok)), COLUMNS)


def record_columns(r, names: Collection[str] | None = None) -> Columns:
    """The record's columns of every round of ``r`` (all replayed: ``r.ok`` everywhere); only those
    of ``names`` when given (the others, list columns above all, cost time at a million rounds)."""
    lengths = r.accepted_length.astype(np.int64)
    known = r.bonus_token != PAD_TOKEN
    tokens = cache(lambda: leading(r.accepted_tokens, lengths))
    makers = {
        "round": lambda: round_names(r),
        "key_a": lambda: r.keys[0].astype(np.int64),
        "key_b": lambda: r.keys[1].astype(np.int64),
        "root_token": lambda: pad_as_na(r.root_tokens),
        "num_steps": lambda: r.num_steps,
        "num_nodes": lambda: r.num_nodes,
        "shape": lambda: object_texts(*text_codes(r, "shape")),
        "layout": lambda: object_texts(*text_codes(r, "layout")),
        "layout_source": lambda: object_texts(*text_codes(r, "layout_source")),
        "selection": lambda: object_texts(*text_codes(r, "selection")),
        "accepted_length": lambda: lengths,
        "accepted_tokens": tokens,
        "accepted_nodes": lambda: leading(r.accepted_nodes, lengths),
        "bonus_token": lambda: pad_as_na(r.bonus_token),
        "bonus_kind": lambda: object_texts(*text_codes(r, "bonus_kind")),
        "stop": lambda: object_texts(*text_codes(r, "stop")),
        "committed_tokens": lambda: [
            t + [b] if k else list(t) for t, b, k in zip(tokens(), r.bonus_token.tolist(), known.tolist())
        ],
        "num_committed": lambda: r.num_committed.astype(np.int64),
        "notes": lambda: notes_of(r),
    }
    return {c: make() for c, make in makers.items() if names is None or c in names}


def frame_of(columns: Columns, names: Sequence[str]):
    """The pandas frame, built at once (dtypes inferred over all rows, as a frame of records is)."""
    import pandas as pd

    data = {
        c: pd.arrays.IntegerArray(v.values, v.missing) if isinstance(v, NullableInts) else v for c, v in columns.items()
    }
    return pd.DataFrame(data, columns=list(names))


def notes_of(res) -> list[list[str]]:
    """BatchResult.notes of every round; asked only of rounds that can have one (most have none)."""
    return [res.notes(i) if m else [] for i, m in enumerate(may_note(res).tolist())]


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


TEXT_COLUMNS = ("shape", "layout", "layout_source", "selection", "bonus_kind", "stop")


def object_texts(texts: list, codes: np.ndarray) -> np.ndarray:
    """[R] object the text of each code (codes: [R] int64 into texts)."""
    return np.asarray(texts, dtype=object)[codes]


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


def leading(a: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    """[G, R] → per round its first ``lengths[r]`` entries as a list of ints."""
    return [row[:k] for row, k in zip(a.T.tolist(), lengths.tolist())]


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


def record_arrow(res):
    """``record_frame(res)`` as a pyarrow Table, built from the arrays (list columns from offsets):
    the Parquet and CSV writers of ``batch -o`` at millions of rounds, one Python object per
    distinct code tuple and per round with notes, not per round.

    The schema (Arrow types and the pandas metadata that ``pd.read_parquet`` reads back) is that
    of ``records_frame`` on one round per distinct code tuple, so it is what pandas infers over
    every row: each kind of cell (a missing bonus, a round with notes, ...) is in the sample.
    """
    import pyarrow as pa

    ok = np.flatnonzero(res.ok)
    if ok.shape[0] != len(res):
        res = res.take(ok)
    n = len(res)
    if not n:
        return pa.Table.from_pandas(records_frame([]), preserve_index=False)
    lengths = res.accepted_length.astype(np.int64)
    known = res.bonus_token != PAD_TOKEN
    noted = may_note(res)
    schema = _record_schema(res, lengths, known, noted)
    keys = res.keys.astype(np.int64)
    columns = {
        "round": arrow_round_names(keys),
        "key_a": keys[0],
        "key_b": keys[1],
        "root_token": pa.array(res.root_tokens.astype(np.int64), mask=res.root_tokens == PAD_TOKEN),
        "num_steps": res.num_steps.astype(np.int64),
        "num_nodes": res.num_nodes.astype(np.int64),
        "accepted_length": lengths,
        "bonus_token": pa.array(res.bonus_token.astype(np.int64), mask=~known),
        "num_committed": res.num_committed.astype(np.int64),
    }
    columns |= {c: _lookup(*text_codes(res, c)) for c in TEXT_COLUMNS} | _record_list_columns(
        res, lengths, known, noted
    )
    arrays = []
    for f in schema:
        col = columns[f.name]
        col = col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col)
        if f.type == pa.null():
            col = pa.nulls(n)
        elif pa.types.is_list(f.type) and f.type.value_type == pa.null():
            col = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.nulls(0))  # all empty
        arrays.append(col.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _record_schema(res, lengths: np.ndarray, known: np.ndarray, noted: np.ndarray):
    """record_arrow's schema: records_frame's on one round per distinct tuple of the codes that
    decide a cell's kind (shape, layout, selection, bonus, stop, notes, missing values)."""
    import pyarrow as pa

    codes = np.concatenate(
        (
            res.shape_index[None],
            res.layout[None],
            res.layout_stated[None],
            res.selection,
            res.bonus_kind[None],
            res.stop[None],
            noted[None],
            known[None],
            (res.root_tokens == PAD_TOKEN)[None],
            (lengths == 0)[None],
        )
    ).astype(np.int64)  # [codes, R]
    first, _ = distinct_columns(codes)
    sample = records_frame(records_of_batch(res.take(np.sort(first))))  # record by record
    return pa.Schema.from_pandas(sample, preserve_index=False)


def _record_list_columns(res, lengths: np.ndarray, known: np.ndarray, noted: np.ndarray) -> dict:
    """record_arrow's list columns, Arrow list arrays from offsets: accepted tokens and nodes,
    committed tokens (the accepted ones, then the bonus where known) and notes."""
    import pyarrow as pa

    n, g = len(res), res.gamma
    tokens = res.accepted_tokens.T.astype(np.int64)  # [R, G]
    committed = np.zeros((n, g + 1), dtype=np.int64)
    committed[:, :g] = tokens
    bonus_at = np.minimum(lengths, g)
    committed[np.arange(n), bonus_at] = np.where(known, res.bonus_token, committed[np.arange(n), bonus_at])
    note_rows = np.flatnonzero(noted)
    notes = [res.notes(int(i)) for i in note_rows]
    note_counts = np.zeros(n, dtype=np.int64)
    note_counts[note_rows] = [len(v) for v in notes]
    return {
        "accepted_tokens": _listed(tokens, lengths),
        "accepted_nodes": _listed(res.accepted_nodes.T, lengths),
        "committed_tokens": _listed(committed, lengths + known),
        "notes": pa.ListArray.from_arrays(
            pa.array(_offsets(note_counts)), pa.array([t for v in notes for t in v], type=pa.large_string())
        ),
    }


def _offsets(counts: np.ndarray) -> np.ndarray:
    """[R + 1] int32 Arrow list offsets of rows of ``counts`` items."""
    offsets = np.zeros(counts.shape[0] + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def _listed(values2d: np.ndarray, counts: np.ndarray):
    """An Arrow list per row of ``values2d`` ([R, W] row-major): its first counts[r] values."""
    import pyarrow as pa

    mask = np.arange(values2d.shape[1])[None, :] < counts[:, None]
    return pa.ListArray.from_arrays(pa.array(_offsets(counts)), pa.array(values2d[mask].astype(np.int64)))


def _lookup(texts: list, index: np.ndarray):
    """A string per code (``texts``), taken per round."""
    import pyarrow as pa

    return pa.array(texts, type=pa.large_string()).take(pa.array(index.astype(np.int64)))
