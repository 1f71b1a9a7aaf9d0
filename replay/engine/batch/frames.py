"""A BatchResult as the per-round record frame: replay.core.records' columns (docs/output-schema.md).

The same frame, dtypes included, as ``records_frame(records_of_batch(result))`` builds record by
record (tests/test_batch_tables.py compares them), with numpy over the rounds: Python runs per
round only where a cell is a list (accepted and committed tokens, nodes, notes) or the key text.
pandas is imported when a frame is asked for, never by the replay itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.records import COLUMNS, records_frame, shape_text
from replay.core.vocab import PAD_TOKEN
from replay.io.roundbatch import LAYOUT_NAMES

from .codes import BONUS_NAMES, SEL_FALLBACK, STOP_CODES


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


def record_columns(r) -> Columns:
    """The record's columns of every round of ``r`` (all replayed: ``r.ok`` everywhere)."""
    lengths = r.accepted_length.astype(np.int64)
    tokens = leading(r.accepted_tokens, lengths)
    known = r.bonus_token != PAD_TOKEN
    return {
        "round": round_names(r),
        "key_a": r.keys[0].astype(np.int64),
        "key_b": r.keys[1].astype(np.int64),
        "root_token": pad_as_na(r.root_tokens),
        "num_steps": r.num_steps,
        "num_nodes": r.num_nodes,
        "shape": np.asarray([shape_text(s.widths) for s in r.shapes] + [""], dtype=object)[r.shape_index],
        "layout": np.asarray(LAYOUT_NAMES, dtype=object)[r.layout],
        "layout_source": np.where(r.layout_stated, "stated", "detected").astype(object),
        "selection": selection_summaries(r),
        "accepted_length": lengths,
        "accepted_tokens": tokens,
        "accepted_nodes": leading(r.accepted_nodes, lengths),
        "bonus_token": pad_as_na(r.bonus_token),
        "bonus_kind": np.asarray([BONUS_NAMES[k] for k in range(len(BONUS_NAMES))], dtype=object)[r.bonus_kind],
        "stop": np.asarray(STOP_CODES, dtype=object)[r.stop],
        "committed_tokens": [
            t + [b] if k else list(t) for t, b, k in zip(tokens, r.bonus_token.tolist(), known.tolist())
        ],
        "num_committed": r.num_committed.astype(np.int64),
        "notes": notes_of(r),
    }


def concat_columns(parts: Sequence[Columns]) -> Columns:
    """Columns of several row sets, one after the other (every part has the same columns)."""
    out = {}
    for c, first in parts[0].items():
        cells = [p[c] for p in parts]
        if isinstance(first, NullableInts):
            out[c] = NullableInts(np.concatenate([v.values for v in cells]), np.concatenate([v.missing for v in cells]))
        elif isinstance(first, list):
            out[c] = [x for v in cells for x in v]
        else:
            out[c] = np.concatenate(cells)
    return out


def take_rows(columns: Columns, index: np.ndarray) -> Columns:
    """Rows ``index`` ([k] int64) of every column."""
    out = {}
    for c, v in columns.items():
        if isinstance(v, NullableInts):
            out[c] = NullableInts(v.values[index], v.missing[index])
        elif isinstance(v, list):
            out[c] = [v[i] for i in index.tolist()]
        else:
            out[c] = v[index]
    return out


def frame_of(columns: Columns, names: Sequence[str]):
    """The pandas frame, built at once (dtypes inferred over all rows, as a frame of records is)."""
    import pandas as pd

    data = {
        c: pd.arrays.IntegerArray(v.values, v.missing) if isinstance(v, NullableInts) else v for c, v in columns.items()
    }
    return pd.DataFrame(data, columns=list(names))


def notes_of(res) -> list[list[str]]:
    """BatchResult.notes of every round; asked only of rounds that can have one (most have none)."""
    may = (res.selection == SEL_FALLBACK).any(axis=0) | (res.validate_extra_rows > 0)
    may[[k for k in res.selection_notes if k < len(res)]] = True
    return [res.notes(i) if m else [] for i, m in enumerate(may.tolist())]


def round_names(res) -> np.ndarray:
    """[R] object round keys ``a_b``."""
    return np.asarray([f"{a}_{b}" for a, b in zip(res.keys[0].tolist(), res.keys[1].tolist())], dtype=object)


def pad_as_na(values: np.ndarray) -> NullableInts:
    """[R] ids, missing where PAD_TOKEN (the record's None)."""
    values = np.asarray(values, dtype=np.int64)
    return NullableInts(values, values == PAD_TOKEN)


def leading(a: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    """[G, R] → per round its first ``lengths[r]`` entries as a list of ints."""
    return [row[:k] for row, k in zip(a.T.tolist(), lengths.tolist())]


def selection_summaries(res) -> np.ndarray:
    """[R] object BatchResult.selection_summary of each round, computed once per distinct column."""
    _, first, inverse = np.unique(res.selection.T, axis=0, return_index=True, return_inverse=True)
    return np.asarray([res.selection_summary(int(i)) for i in first], dtype=object)[inverse.reshape(-1)]
