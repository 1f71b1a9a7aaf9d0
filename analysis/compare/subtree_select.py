"""One level of the simulated tree (Level: padded ``[L, C]`` slots, the round axis last) and the
selection on it: which rule each round's recording used (selection_rules), and a level's IN / OUT /
MAYBE status and slot range of each node choosing its top heads (select_level).

Selection is recomputed in rounds where every key of the level is known and ordered (the common
case) as each node's place in replay.core.selection.top_k_columns' order (equal keys by rank_ties
of their tree-order positions; taken as they come where the valid nodes already are in that
order), whatever the heads: configs choosing other heads of one level share it (selection_places).
The other rounds take the pairwise IN / OUT / MAYBE rule (exact, ordered keys by
replay.core.selection.precedes).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from replay.core import selection
from replay.core.selection import first_true, precedes, tree_position
from replay.engine.batch import SEL_PARENTS, BatchResult, RoundBatch, TreeShape

from .subtree import IN, MAYBE, OUT

CODE_PATH, CODE_RECORDED, CODE_FALLBACK = 0, 1, 2  # subtree's RULE_*, as codes


FIRST_TRUE_MAX = 128  # replay.core.selection.first_true's axis must be shorter


@dataclass(eq=False)
class Level:
    """Slots of one level of the simulated tree (round axis last)."""

    valid: np.ndarray  # [L, C] bool
    lo: np.ndarray  # [L, C] float64 selection key interval, higher first
    hi: np.ndarray  # [L, C] float64
    exact: np.ndarray  # [L, C] bool
    sure: np.ndarray  # [L, C] bool: certainly exists
    ordered: np.ndarray  # [L, C] bool: tree order (parent's slot, rank) known
    oslot: np.ndarray  # [L, C] int64 parent's slot
    rank: np.ndarray  # [L, 1] int64 draft rank
    rec: np.ndarray  # [L, C] int64 recorded level-local node, -1 when not in the recording
    row: np.ndarray  # [L, C] int64 recorded expanded position (row of draft_step), -1 when not expanded
    token: np.ndarray  # [L, C] int64, PAD_TOKEN when unknown
    status: np.ndarray | None = None  # [L, C] int8 OUT / IN / MAYBE
    slot_lo: np.ndarray | None = None  # [L, C] int64
    slot_hi: np.ndarray | None = None

    def on(self, cols: np.ndarray) -> Level:
        """The level on its columns ``cols`` only (a [L, 1] field stays as it is)."""
        c = self.valid.shape[1]
        pick = lambda a: a if a is None or a.shape[1] != c else np.take(a, cols, axis=1)  # noqa: E731  2x a[:, cols]
        return Level(**{f.name: pick(getattr(self, f.name)) for f in fields(self)})


def filled(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` (a level field: [L, C], or [L, 1] / [1, C] broadcast) as a contiguous ``shape`` array, as
    the compiled level loops read it (most fields already are: returned as they are, no broadcast made)."""
    if a.shape == shape and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(np.broadcast_to(a, shape))


def selection_rules(batch: RoundBatch, res: BatchResult, shape: TreeShape) -> np.ndarray:
    """[R] int8 the selection rule each round's recording used (CODE_*). Path probability where
    every step whose scores key a selection (each but the last: no step expands the last level)
    has them, as the batch replay selected (replay.core.selection.selection_method)."""
    r = len(batch)
    keyed = batch.steps[: max(shape.num_steps - 1, 1)]  # a one-step round: its scores, if any
    path = np.full(r, all(st.logp is not None for st in keyed))
    if path.any():
        for i, st in enumerate(keyed):
            m = shape.maps[i]
            path &= ~np.isnan(st.logp[m.slot_parent, m.slot_rank]).any(axis=0)  # a NaN score: no path key
    parents = (res.selection[: shape.num_steps] == SEL_PARENTS).any(axis=0)
    path &= ~res.parents_differ
    return np.where(path, CODE_PATH, np.where(parents, CODE_RECORDED, CODE_FALLBACK)).astype(np.int8)


def first_hit(hit: np.ndarray) -> np.ndarray:
    """[C] int64 np.argmax(hit, axis=0) of [L, C] bool: the first True, 0 where none."""
    if hit.shape[0] >= FIRST_TRUE_MAX:
        return hit.argmax(axis=0)
    first = first_true(hit)
    return np.where(first < hit.shape[0], first, 0)


def keys_by_rule(rules: np.ndarray, keys: dict, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, exact) [K * W, C]: each round's keys by its rule (``keys``: rule code → its keys, the
    rules present); a chunk of one rule takes that rule's keys as they are."""
    if len(keys) == 1:
        return next(iter(keys.values()))
    lo, hi, exact = np.full(shape, -np.inf), np.full(shape, np.inf), np.zeros(shape, dtype=bool)
    for code, (k_lo, k_hi, k_exact) in keys.items():
        mine = rules[None, :] == code
        lo, hi, exact = np.where(mine, k_lo, lo), np.where(mine, k_hi, hi), np.where(mine, k_exact, exact)
    return lo, hi, exact


@dataclass(frozen=True, eq=False)
class Places:
    """What a level's selection reads whatever its number of heads (selection_places)."""

    fast: np.ndarray  # [C] bool: every valid key of the column is known and ordered
    place: np.ndarray  # [L, C] int64: in those columns, each valid node's place in selection order (-1: never chosen)


def select_level(lvl: Level, heads: int, places: Places | None = None) -> None:
    """IN / OUT / MAYBE and slot ranges of a level choosing its top ``heads``. ``places``: the level's
    selection_places, when configs choosing other heads of the same level computed them."""
    L, c = lvl.valid.shape
    places = selection_places(lvl) if places is None else places
    # a column of known, ordered keys: a node is chosen where its place is below the heads, its slot that place
    chosen = (places.place >= 0) & (places.place < heads)
    status = np.where(chosen, np.int8(IN), np.int8(OUT))
    slot_lo = np.where(chosen, places.place, -1)
    slot_hi = slot_lo.copy()
    cols = np.flatnonzero(~places.fast)
    if cols.shape[0]:
        _select_pairwise(lvl, cols, heads, status, slot_lo, slot_hi)
    lvl.status, lvl.slot_lo, lvl.slot_hi = status, slot_lo, slot_hi


def selection_places(lvl: Level) -> Places:
    """The columns of known, ordered keys (most) and each valid node's place there: the selection rule
    on the key, equal keys by rank_ties of (parent slot, rank), the tree order (replay.core.selection.
    top_k_columns' order; replay.core.level_loops.selection_places_loop)."""
    shape = lvl.valid.shape
    full = lambda a: filled(a, shape)  # noqa: E731
    known = (full(lvl.valid), full(lvl.exact), full(lvl.sure), full(lvl.ordered), full(lvl.lo))
    fast, _, place = _places(known, full(tree_position(lvl.oslot, lvl.rank)))
    return Places(fast, place)


def _select_pairwise(lvl: Level, cols: np.ndarray, heads: int, status, slot_lo, slot_hi) -> None:
    """select_level's columns ``cols`` ([C'] int64) of unknown or unordered keys: the pairwise IN / OUT /
    MAYBE rule (exact, ordered keys by replay.core.selection.precedes), written into ``status``,
    ``slot_lo``, ``slot_hi`` ([L, C] out)."""
    L, c = lvl.valid.shape
    s = lambda a: a[:, cols] if a.shape[1] == c else np.broadcast_to(a, (a.shape[0], c))[:, cols]  # noqa: E731
    vv, lo, hi, ex, sure, od, os_, rk = (
        s(lvl.valid),
        s(lvl.lo),
        s(lvl.hi),
        s(lvl.exact),
        s(lvl.sure),
        s(lvl.ordered),
        s(lvl.oslot),
        s(lvl.rank),
    )
    a_, b_ = (slice(None), None), (None, slice(None))
    pos = tree_position(os_, rk)
    point = ex[a_] & ex[b_] & od[a_] & od[b_] & precedes(lo[a_], pos[a_], lo[b_], pos[b_])  # both keys exact
    ahead = (lo[a_] > hi[b_]) | point  # [a, b, C']
    pair = vv[a_] & vv[b_] & ~np.eye(L, dtype=bool)[:, :, None]
    surely = (pair & sure[a_] & ahead).sum(axis=0)  # v sure and ahead of u, summed over v (axis a)
    maybe = (pair & ~ahead.transpose(1, 0, 2)).sum(axis=0)  # not (u ahead of v), summed over v
    st = np.where(surely >= heads, OUT, np.where(sure & (maybe < heads), IN, MAYBE)).astype(np.int8)
    st = np.where(vv, st, OUT).astype(np.int8)
    status[:, cols] = st
    slot_lo[:, cols] = np.where(st != OUT, surely, -1)
    slot_hi[:, cols] = np.where(st != OUT, np.minimum(maybe, heads - 1), -1)


def _places(known: tuple, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """([C] bool every valid key known and ordered, [C] bool the valid nodes come first in selection
    order: no row preceded by the row below it, level 1's ranks of the root mostly; [L, C] int64 each
    valid node's place in selection order in the first columns, -1 for none), by
    replay.core.level_loops.selection_places_loop. known: contiguous [L, C] valid, exact, sure,
    ordered (bool), key (float64); pos: [L, C] int64 tree positions."""
    from replay.core.level_loops import selection_places_loop  # numba: imported at first use

    c = pos.shape[1]
    # the compiled loop only compares these numbers: the tie rule itself stays in rank_ties
    tie = np.ascontiguousarray(selection.rank_ties(pos), dtype=np.int64)
    fast, in_order = np.empty(c, dtype=bool), np.empty(c, dtype=bool)
    place = np.empty(pos.shape, dtype=np.int64)
    selection_places_loop(*known, tie, place, fast, in_order)
    return fast, in_order, place
