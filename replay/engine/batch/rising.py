"""Validate rows whose scores rise along the row, on the batch arrays: the run's one WARNING line.

docs/dump-format.md writes a row in descending probability. Numbers stay as they are (the greedy
replay reads column 0 as the top-1, as the format says; the sampling bounds read each row's smallest
p, valid in any order), so the replay says it once for the run and names the first such row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from replay.core.vocab import LAYOUT_ALL, LAYOUTS, PAD_TOKEN
from replay.io.roundbatch import RoundBatch
from replay.util.words import row_words

from .result import BatchResult

_ALL = LAYOUTS.index(LAYOUT_ALL)  # BatchResult.layout's code of the all layout


@dataclass(frozen=True)
class RisingRows:
    """The rising rows of one batch's replayed rounds."""

    count: int  # rows whose scores rise somewhere along the row, among the rows each round's layout uses
    first: tuple[int, str] | None  # (position in the run, "scores file, row k") of the first such round


def rising_rows(batch: RoundBatch, result: BatchResult) -> RisingRows:
    """The replayed rounds' validate rows (those their layout uses) whose scores rise along the row
    between two real cells (padding cells, PAD_TOKEN, are not compared)."""
    lp = batch.validate.logp  # [rows, K, R] or None
    if lp is None or lp.shape[1] < 2:
        return RisingRows(0, None)
    ids = batch.validate.ids  # [rows, K, R]
    real = ids != PAD_TOKEN
    up = ((lp[:, 1:] > lp[:, :-1]) & real[:, 1:] & real[:, :-1]).any(axis=1)  # [rows, R]
    up &= np.arange(ids.shape[0])[:, None] < _used_rows(result)[None, :]
    up[:, ~result.ok] = False
    hit = np.flatnonzero(up.any(axis=0))  # rounds with a rising row
    if not hit.shape[0]:
        return RisingRows(0, None)
    place = np.arange(len(batch)) if batch.ordinals is None else batch.ordinals
    i = int(hit[np.argmin(place[hit])])
    row = int(np.argmax(up[:, i]))
    key, ordinal = batch.key(i), int(place[i])
    scores = "validate" if batch.names is None else batch.names.scores_path(key, ordinal)
    return RisingRows(int(up.sum()), (ordinal, f"{scores}, {row_words(row)}"))


def _used_rows(result: BatchResult) -> np.ndarray:
    """[R] int64 the validate rows each round's layout uses: one per expanded node (parents) or per node (all)."""
    expanded = np.asarray([s.num_expanded for s in result.shapes] + [0], dtype=np.int64)[result.shape_index]
    return np.where(result.layout == _ALL, result.num_nodes + 1, expanded)


def rising_rows_warning(parts: Iterable[RisingRows]) -> str | None:
    """The run's line from its batches' RisingRows (None when no row rises)."""
    parts = list(parts)
    firsts = [p.first for p in parts if p.first is not None]
    if not firsts:
        return None
    return rising_rows_words(sum(p.count for p in parts), min(firsts)[1])


def rising_rows_words(count: int, first: str) -> str:
    """The WARNING line: ``count`` rising rows, the first named as "scores file, row k"."""
    return (
        f"WARNING: {count} validate row(s) have scores that rise along the row (first: {first}); "
        "docs/dump-format.md writes a row in descending probability: the greedy replay takes column 0 as "
        "the target's top-1 all the same (the sampling bounds read each row's smallest p, valid in any order)"
    )
