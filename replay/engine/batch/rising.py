"""Validate and draft rows whose scores rise along the row, on the batch arrays: the run's WARNING
line per kind.

docs/dump-format.md writes a row in descending probability. Numbers stay as they are, so the replay
says it once per kind for the run and names the first such row: a validate row's column 0 is read as
the target's top-1 (the sampling bounds read each row's smallest p, valid in any order); a draft
row's columns are its candidates' ranks (the names A1, A2, ... and the rank statistics) while the
selection by path probability reads the scores. Two equal neighbours do not rise (a tie is in
descending order either way), nor does a NaN.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from replay.core.vocab import LAYOUT_ALL, LAYOUTS, PAD_TOKEN
from replay.io.roundbatch import MatrixStack, RoundBatch
from replay.util.words import row_words

from .result import BatchResult

_ALL = LAYOUTS.index(LAYOUT_ALL)  # BatchResult.layout's code of the all layout
RISING_KINDS = ("validate", "draft")  # the kinds of rows checked, in the order of their lines

# what the replay makes of a rising row of each kind, after "descending probability: "
_MEANING = {
    "validate": "the greedy replay takes column 0 as the target's top-1 all the same (the sampling bounds "
    "read each row's smallest p, valid in any order)",
    "draft": "the candidates' names and rank statistics (A1, A2, ...; rank_of_hit) follow the column order "
    "all the same, while the selection by path probability reads the scores",
}


@dataclass(frozen=True)
class RisingRows:
    """The rising rows of one kind in one batch's replayed rounds."""

    kind: str  # one of RISING_KINDS
    count: int  # rows whose scores rise somewhere along the row, among the rows each round uses
    first: tuple[int, str] | None  # (position in the run, "scores file, row k") of the first such round


def rising_rows(batch: RoundBatch, result: BatchResult) -> tuple[RisingRows, ...]:
    """The replayed rounds' rising rows, one RisingRows per kind of RISING_KINDS: the validate rows
    their layout uses, the draft rows each step expands."""
    ok = result.ok
    validate = _rising(batch.validate, _used_rows(result), ok)
    drafts = [_rising(st, _step_heads(result, s), ok) for s, st in enumerate(batch.steps)]
    return _found(batch, "validate", [validate]), _found(batch, "draft", drafts)


def _rising(stack: MatrixStack, used: np.ndarray, ok: np.ndarray) -> np.ndarray | None:
    """[rows, R] bool the rows among each round's ``used`` ([R] int64) first ones, in the rounds ``ok``
    ([R] bool), whose scores rise between two real cells (padding cells, PAD_TOKEN, are not compared);
    None where no row can rise (no scores, or one column)."""
    lp = stack.logp  # [rows, K, R] or None
    if lp is None or lp.shape[1] < 2:
        return None
    real = stack.ids != PAD_TOKEN  # [rows, K, R]
    up = ((lp[:, 1:] > lp[:, :-1]) & real[:, 1:] & real[:, :-1]).any(axis=1)  # [rows, R]
    up &= np.arange(lp.shape[0])[:, None] < used[None, :]
    up[:, ~ok] = False
    return up


def _found(batch: RoundBatch, kind: str, ups: list[np.ndarray | None]) -> RisingRows:
    """RisingRows of ``kind`` from its matrices' rising rows (ups: per matrix [rows, R] bool or None
    (_rising), the draft steps in order or the validate alone); the first is the first round's first
    matrix's first row."""
    scored = [(m, u) for m, u in enumerate(ups) if u is not None]  # the matrices whose rows can rise
    if not any(u.any() for _, u in scored):
        return RisingRows(kind, 0, None)
    hit = np.flatnonzero(np.any([u.any(axis=0) for _, u in scored], axis=0))  # rounds with a rising row
    place = np.arange(len(batch)) if batch.ordinals is None else batch.ordinals
    i = int(hit[np.argmin(place[hit])])
    m, up = next((m, u) for m, u in scored if u[:, i].any())
    row = int(np.argmax(up[:, i]))
    key, ordinal = batch.key(i), int(place[i])
    step = m if kind == "draft" else None
    if batch.names is None:
        scores = batch.paths_of(i)[-1 if step is None else step]
    else:
        scores = batch.names.scores_path(key, ordinal, step)
    return RisingRows(kind, int(sum(int(u.sum()) for _, u in scored)), (ordinal, f"{scores}, {row_words(row)}"))


def _used_rows(result: BatchResult) -> np.ndarray:
    """[R] int64 the validate rows each round's layout uses: one per expanded node (parents) or per node (all)."""
    expanded = np.asarray([s.num_expanded for s in result.shapes] + [0], dtype=np.int64)[result.shape_index]
    return np.where(result.layout == _ALL, result.num_nodes + 1, expanded)


def _step_heads(result: BatchResult, step: int) -> np.ndarray:
    """[R] int64 the rows of draft step ``step`` each round expands (0 where it stopped before that step)."""
    heads = [s.heads[step] if step < s.num_steps else 0 for s in result.shapes]
    return np.asarray(heads + [0], dtype=np.int64)[result.shape_index]


def rising_rows_warnings(parts: Iterable[RisingRows]) -> tuple[str, ...]:
    """The run's lines from its batches' RisingRows, one per kind whose rows rise, in RISING_KINDS order."""
    parts = list(parts)
    lines = []
    for kind in RISING_KINDS:
        mine = [p for p in parts if p.kind == kind]
        firsts = [p.first for p in mine if p.first is not None]
        if firsts:
            lines.append(rising_rows_words(kind, sum(p.count for p in mine), min(firsts)[1]))
    return tuple(lines)


def rising_rows_words(kind: str, count: int, first: str) -> str:
    """The WARNING line of ``kind`` (one of RISING_KINDS): ``count`` rising rows, the first named as
    "scores file, row k"."""
    return (
        f"WARNING: {count} {kind} row(s) have scores that rise along the row (first: {first}); "
        f"docs/dump-format.md writes a row in descending probability: {_MEANING[kind]}"
    )
