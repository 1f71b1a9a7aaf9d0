"""Which nodes of a level a draft step expands: the selection rule, written once.

The rule (DESIGN.md, "The tree configuration"): draft step i >= 1 expands the ``topHead[i]``
nodes of level i with the highest *key*, equal keys in tree order. Step 0 expands the root.
Which key, per step (the words are in replay.core.vocab; ``selection_method`` decides):

* ``SELECT_PARENTS``: the dump names the expanded nodes; the rule is not applied, only checked
  (a static tree with scores: ``parents_mismatch_note`` when the dump differs from path probability);
* ``SELECT_PATH_PROB``: the key is the node's path log-probability (or probability: same order);
* ``SELECT_FALLBACK``: no scores, no parents: the key is ``rank_major_key`` (draft rank first, then
  the parent's selection slot: every rank-0 child before any rank-1 child, the article's A1, A2,
  then B11, B21). Every round where it chose among two or more nodes carries ``FALLBACK_WARNING``
  (``fallback_guesses``).

The tie rule ("equal keys in tree order") is written in ``rank_ties``: every form below orders
equal keys through it, and no module elsewhere sorts selection keys itself.

One function selects: ``top_k_columns`` (numpy, C rounds at once, round axis last). The one-round
forms ``select_top`` / ``selection_order`` call it on one column, ``selection_positions`` inverts
its order. ``precedes`` is the rule as a pairwise comparison, for the interval form of
analysis.compare.subtree_select, where keys are bounds rather than numbers; that module's compiled
places (replay.core.level_loops.selection_places_loop) compare keys and the ``rank_ties`` numbers
they are handed as ``precedes`` does (tests/test_tie_rule_once.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from replay.util.words import first_names

from .vocab import SELECT_FALLBACK, SELECT_PARENTS, SELECT_PATH_PROB, SELECT_ROOT, SELECTION_JOIN

# Rank weight of the rank-major key: a parent's selection slot (< topHead) never reaches it, and
# rank * weight stays an exact float64 integer for any rank a dump can hold.
FALLBACK_RANK_WEIGHT = 1 << 20

_POSITION_WEIGHT = 1 << 20  # tree_position's slot weight: above any draft rank

FALLBACK_WARNING = "WARNING: no scores and no parents in the dump: expanded nodes chosen by the rank-major fallback (docs/dump-format.md)"


def fallback_guesses(level_size: Any) -> Any:
    """Whether the rank-major fallback at a step guesses: only on a level of two or more nodes. A
    single node is expanded by any rule and orders nothing below it (a chain), so a round whose
    fallback steps all met one node carries no FALLBACK_WARNING. ``level_size``: an int, or an
    int64 array of them (then a bool array of the same shape)."""
    return level_size > 1


def fallback_run_warning(rounds: int, total: int, first: Sequence[str], informed: bool) -> str | None:
    """The run's one line about FALLBACK_WARNING rounds (on stderr; each round's record keeps its note).
    first: the first of those rounds' names; informed: some round of the run was chosen by scores or
    parents, so the guessed rounds more likely lost theirs (companion files, arrays) than never had any.
    (A round with scores or parents on some draft steps and a guess on another is rejected instead:
    replay.engine.batch.companions.)"""
    if not rounds:
        return None
    if not informed:
        return (
            f"WARNING: {rounds} of {total} round(s) have no scores and no parents in the dump: expanded nodes "
            "chosen by the rank-major fallback, a guess about the engine (docs/dump-format.md)"
        )
    which = f"round {first[0]}" if rounds == 1 else f"first: rounds {first_names(first, rounds)}"
    return (
        f"WARNING: {rounds} of {total} round(s) have no scores and no parents while other rounds have them "
        f"({which}): lost .scores or .parents companions, or matrices saved without their arrays? Their "
        "expanded nodes were chosen by the rank-major fallback, a guess about the engine (docs/dump-format.md)"
    )


def unused_scores_note(score_kind: str | None, by_option: bool, scored: int, total: int) -> str | None:
    """The run's note when the score kind (``prob``/``logprob``: ``--scores`` when ``by_option``, else
    the manifest's ``score_kind``) says how scores are stored but none of its ``total`` replayed
    rounds has any (``scored``: rounds with draft or validate scores)."""
    if score_kind not in ("prob", "logprob") or scored or not total:
        return None
    stated = f"--scores {score_kind}" if by_option else f"manifest.json score_kind '{score_kind}'"
    return (
        f"note: {stated} changes nothing here: none of the {total} replayed round(s) has scores "
        '(no .scores companion file, no scores array; docs/dump-format.md, "Scores and parents")'
    )


def selection_method(step: int, has_parents: bool, has_scores: bool) -> str:
    """SELECT_* for draft step ``step``: the root, else the dump's parents, else scores, else the fallback."""
    if step == 0:
        return SELECT_ROOT
    if has_parents:
        return SELECT_PARENTS
    return SELECT_PATH_PROB if has_scores else SELECT_FALLBACK


def rank_ties(position: Any) -> Any:
    """The tie rule, the only place it is written: of nodes with equal keys, the one of lower
    ``rank_ties`` is expanded first. position: a node's tree-order position (lower: earlier; an int
    or an int64 array of them). Equal keys go in tree order, so the rank is the position itself.
    Every form of the rule orders equal keys through this function. analysis.shapes.search's
    subtree_bounds also relies on it: a lower-ranked sibling of equal key is expanded first, so the
    expanded children of a node are a rank prefix; a rule breaking ties otherwise must revisit that bound."""
    return position


def tree_position(parent_slot: Any, rank: Any) -> Any:
    """A level node's tree-order position as one int: its parent's selection slot, then its draft
    rank (ints or int64 arrays; rank < 2**20)."""
    return parent_slot * _POSITION_WEIGHT + rank


def selection_order(keys: Sequence[float], ties: Sequence[Any] | None = None) -> list[int]:
    """Level-local indices in selection order: highest key first, equal keys by rank_ties.

    keys: [l] one per level node (path log-probability or ``rank_major_key``), no NaN.
    ties: [l] comparable tree-order positions; default the index (the level is in tree order).
    """
    return select_top(keys, len(keys), ties)


def _positions(ties: Sequence[Any]) -> list[int]:
    """[l] each entry's place (0, 1, ..) when ``ties`` are sorted: comparable positions as ints."""
    out = [0] * len(ties)
    for place, j in enumerate(sorted(range(len(ties)), key=ties.__getitem__)):
        out[j] = place
    return out


def select_top(keys: Sequence[float], heads: int, ties: Sequence[Any] | None = None) -> list[int]:
    """The ``heads`` level-local indices a step expands, in selection order (see selection_order):
    top_k_columns on one column (one round)."""
    if not 0 <= heads <= len(keys):
        raise ValueError(f"cannot pick {heads} heads from a level of {len(keys)} nodes")
    if ties is not None and len(ties) != len(keys):
        raise ValueError(f"ties: expected {len(keys)} entries, got {len(ties)}")
    if not heads:
        return []
    column = np.asarray(keys, dtype=np.float64).reshape(-1, 1)
    pos = None if ties is None else np.asarray(_positions(ties), dtype=np.int64).reshape(-1, 1)
    top: list[int] = top_k_columns(column, heads, positions=pos)[:, 0].tolist()
    return top


def rank_major_key(rank: int, parent_slot: int) -> float:
    """The fallback's key of a node: higher first, so rank 0 under any parent beats rank 1."""
    if not 0 <= parent_slot < FALLBACK_RANK_WEIGHT or rank < 0:
        raise ValueError(
            f"rank_major_key: rank {rank} must be >= 0 and parent slot {parent_slot} in [0, {FALLBACK_RANK_WEIGHT})"
        )
    return -float(_rank_major(rank, parent_slot))


def rank_major_key_columns(ranks: Any, parent_slots: Any) -> Any:
    """float64 rank_major_key of int64 arrays (broadcast; ranks >= 0, slots in range: unchecked)."""
    return -np.asarray(_rank_major(ranks, parent_slots), dtype=np.float64)


def _rank_major(rank: Any, parent_slot: Any) -> Any:
    """The fallback's order, lower first: draft rank first, then the parent's selection slot."""
    return rank * FALLBACK_RANK_WEIGHT + parent_slot


def rank_major_keys(ranks: Sequence[int], parent_slots: Sequence[int]) -> list[float]:
    """[l] rank_major_key of each level node (ranks, parent_slots: [l] ints)."""
    if len(ranks) != len(parent_slots):
        raise ValueError(f"ranks ({len(ranks)}) and parent_slots ({len(parent_slots)}) must have equal lengths")
    return [rank_major_key(int(r), int(s)) for r, s in zip(ranks, parent_slots)]


_MISMATCH = "step {step}: dump's parents "


def parents_mismatch_note(step: int, recorded: Sequence[int], expected: Sequence[int]) -> str:
    """The note for a static round whose explicit parents differ from path probability."""
    return f"{_MISMATCH.format(step=step)}{list(recorded)} differ from path-probability selection {list(expected)}"


def is_parents_mismatch_note(note: str) -> bool:
    """A round's note is parents_mismatch_note's (its other notes say nothing about its selection)."""
    return note.startswith("step ") and _MISMATCH.split("}", 1)[1] in note


def repeated_row_note(step: int, row: int, same: int, heads: int) -> str:
    """The note for a static round whose draft step ``step`` holds, beyond its ``heads`` rows (topHead),
    a row that repeats expanded row ``same``: not read, as every row beyond topHead; a repeated row
    is not the -1 padding docs/dump-format.md describes, so the round says so (rows 0-based)."""
    return (
        f"draft_step_{step}: row {row} (0-based), beyond topHead[{step}] = {heads}, repeats row {same}: "
        "not read (rows beyond topHead are padding)"
    )


# --------------------------------------------------------------------------------------------
# Vectorised forms (replay.engine.batch): one level of C rounds as [slots, C], the round axis last.


@lru_cache(maxsize=64)
def _descending(k: int) -> np.ndarray:
    """[K, 1] int8 K, K-1, .., 1: weights that make a max-reduce find the first True."""
    out = np.arange(k, 0, -1, dtype=np.int8)[:, None]
    out.flags.writeable = False
    return out


def first_true(mask: np.ndarray) -> np.ndarray:
    """[C] int64 index of the first True along axis 0 of [K, C] bool (K when none).

    A weighted max-reduce over the short leading axis: argmax or accumulate along it run a
    per-column inner loop and cost ~10x more.
    """
    k = mask.shape[0]
    if k >= 128:  # beyond int8 weights: argmax's inner loop
        long: np.ndarray = np.where(mask.any(axis=0), mask.argmax(axis=0), k)
        return long
    if k == 1:
        first: np.ndarray = (~mask[0]).astype(np.int64)
        return first
    first = k - (mask * _descending(k)).max(axis=0).astype(np.int64)
    return first


def precedes(key_a: Any, pos_a: Any, key_b: Any, pos_b: Any) -> Any:
    """Whether node a is expanded before node b: the higher key, equal keys by rank_ties of their
    tree-order positions. Numbers or numpy arrays (broadcast); a NaN key precedes nothing."""
    return (key_a > key_b) | ((key_a == key_b) & (rank_ties(pos_a) < rank_ties(pos_b)))


def selection_positions(keys: np.ndarray) -> np.ndarray:
    """[L, C] int64 each row's place (0 first) in its column's selection order: keys [L, C] float64
    of a level in tree order (columns with NaN: any value). The inverse of top_k_columns' order."""
    n, c = keys.shape
    col = np.arange(c, dtype=np.int64)
    order = np.minimum(top_k_columns(keys, n, col), n - 1)  # n: a NaN column ran out of nodes
    out = np.zeros(keys.shape, dtype=np.int64)
    flat = out.reshape(-1)
    for t in range(n):
        flat[order[t] * c + col] = t
    return out


def top_k_columns(
    keys: np.ndarray, k: int, col: np.ndarray | None = None, positions: np.ndarray | None = None
) -> np.ndarray:
    """[k, C] int64 the selection rule on C rounds at once: row t holds, in every column, the node
    that slot t expands (its row in ``keys``), L when the column has no node left. The one place
    that selects: every other form (select_top, selection_order, selection_positions, the
    sub-tree walk's slots) reads it.

    keys: [L, C] float64 a level of C rounds; a NaN key is never chosen (the sub-tree walk's absent
    nodes; the replay's rounds without scores, which use the fallback). col: [C] int64 0..C-1.
    positions: [L, C] int64 tree-order positions (tree_position) when the rows are not in tree order;
    None: the row is the position. Equal keys go by rank_ties of the positions (equal ranks: row order).
    Successive maxima rather than argsort: a sort per round costs ~100 ns, one pass ~15 ns.
    """
    n, c = keys.shape
    col = np.arange(c, dtype=np.int64) if col is None else col
    if not 0 <= k <= n or col.shape != (c,) or (positions is not None and positions.shape != keys.shape):
        raise ValueError(f"top_k_columns: k = {k} of {n} slots, col {col.shape} for {c} columns")
    out = np.empty((k, c), dtype=np.int64)
    work = keys.copy() if k > 1 else keys
    flat = work.reshape(-1)
    rows = np.arange(n, dtype=np.int64)[:, None]
    tie = rank_ties(rows if positions is None else positions)
    if positions is None and (n < 2 or (tie[1:] > tie[:-1]).all()):
        tie = None  # rows already rank in tree order: the first equal maximum wins
    for t in range(k):  # k = heads of one step: a constant of the shape
        best = np.fmax.reduce(work, axis=0)  # fmax skips the NaN that marks already-taken slots
        idx = _tie_break(work == best, tie)  # of equal maxima, the one rank_ties puts first
        out[t] = idx
        if t + 1 < k:
            flat[np.minimum(idx, n - 1) * c + col] = np.nan  # n: nothing left, every key NaN already
    return out


def _tie_break(mask: np.ndarray, tie: np.ndarray | None) -> np.ndarray:
    """[C] int64 the row of [K, C] bool ``mask`` that goes first (K when none): the lowest ``tie``
    ([K, C] or [K, 1] int64 rank_ties of the rows' positions; None: rows in rank order), equal
    ties in row order."""
    if tie is None:
        return first_true(mask)
    ranked = np.where(mask, tie, np.iinfo(np.int64).max)
    return first_true(mask & (ranked == ranked.min(axis=0)))


def invalid_parents_columns(local: np.ndarray, level: int) -> np.ndarray:
    """[C] bool: a round's explicit parents are not distinct nodes of the level they expand (given level-locally).

    local: [h, C] int64 each round's parents minus the level's first node id; level: its size.
    """
    h = local.shape[0]
    bad: np.ndarray = np.asarray(((local < 0) | (local >= level)).any(axis=0))
    if h > 1:
        upper = np.triu(np.ones((h, h), dtype=bool), 1)[:, :, None]
        bad |= ((local[:, None, :] == local[None, :, :]) & upper).any(axis=(0, 1))
    return bad


def selection_summary(methods: Sequence[str]) -> str:
    """A round's ``selection`` column: the methods of draft steps 1.. in first-use order (SELECT_ROOT alone)."""
    return SELECTION_JOIN.join(dict.fromkeys(methods)) if len(methods) else SELECT_ROOT
