"""One level of the simulated tree (Level: padded ``[L, C]`` slots, the round axis last) and the
selection on it: which rule each round's recording used (selection_rules), and a level's IN / OUT /
MAYBE status and slot range of each node choosing its top heads (select_level).

Selection is recomputed by replay.core.selection.top_k_columns (equal keys by rank_ties of their
tree-order positions) in rounds where every key of the level is known and ordered (the common
case; taken as they come where the valid nodes already are in that order), and with the
pairwise IN / OUT / MAYBE rule in the others (exact, ordered keys by replay.core.selection.precedes).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from replay.core.selection import first_true, precedes, top_k_columns, tree_position
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
    the compiled level loops read it."""
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


def select_level(lvl: Level, heads: int) -> None:
    """IN / OUT / MAYBE and slot ranges of a level choosing its top ``heads``."""
    L, c = lvl.valid.shape
    v = lvl.valid
    fast = (~v | (lvl.exact & lvl.sure & lvl.ordered)).all(axis=0)  # every key known and ordered
    cols = np.flatnonzero(fast)
    every = 0 < cols.shape[0] == c  # most levels: the fast rule's arrays are the level's, nothing filled first
    if not every:
        status = np.zeros((L, c), dtype=np.int8)
        slot_lo = np.full((L, c), -1, dtype=np.int64)
        slot_hi = np.full((L, c), -1, dtype=np.int64)
    if cols.shape[0]:
        # the selection rule on the key, equal keys by rank_ties of (parent slot, rank): the tree order
        vf = v if every else v[:, cols]
        key = np.where(vf, lvl.lo if every else lvl.lo[:, cols], -np.inf)
        pos = tree_position(lvl.oslot if every else lvl.oslot[:, cols], lvl.rank)  # [L, C']
        slot, in_order = _slots_in_order(key, pos, vf, heads)
        loop = np.flatnonzero(~in_order)
        if loop.shape[0]:
            slot[:, loop] = _selected_slots(key[:, loop], pos[:, loop], vf[:, loop], heads)
        chosen = slot >= 0
        st = np.where(chosen, IN, OUT).astype(np.int8)
        if every:
            status, slot_lo, slot_hi = st, slot, slot.copy()
        else:
            status[:, cols], slot_lo[:, cols], slot_hi[:, cols] = st, slot, slot
    cols = np.flatnonzero(~fast)
    if cols.shape[0]:
        s = lambda a: a[:, cols] if a.shape[1] == c else np.broadcast_to(a, (a.shape[0], c))[:, cols]  # noqa: E731
        vv, lo, hi, ex, sure, od, os_, rk = (
            s(v),
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
    lvl.status, lvl.slot_lo, lvl.slot_hi = status, slot_lo, slot_hi


def _slots_in_order(key: np.ndarray, pos: np.ndarray, valid: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """([L, C] slot of each node, -1 when not chosen; [C] bool: that slot is right) without the
    selection, for the columns whose valid nodes come first and are already in selection order (no
    row preceded by the row below it: level 1's ranks of the root, mostly): there the selection
    takes the valid nodes in row order, so a node's slot is its row, kept below ``heads``. A check
    of adjacent rows only; other columns are left to _selected_slots. pos: [L, C] tree positions."""
    rows = np.arange(key.shape[0])[:, None]
    slot = np.where(valid & (rows < heads), rows, -1)
    if key.shape[0] == 1:
        return slot, np.ones(key.shape[1], dtype=bool)
    v1, k0, k1 = valid[1:], key[:-1], key[1:]
    ok = (v1 <= valid[:-1]) & (~v1 | ((k0 >= k1) & ~precedes(k1, pos[1:], k0, pos[:-1])))
    return slot, ok.all(axis=0)


def _selected_slots(key: np.ndarray, pos: np.ndarray, valid: np.ndarray, heads: int) -> np.ndarray:
    """[L, C] the slot of each node (-1 when not chosen) as replay.core.selection.top_k_columns
    chooses ``heads`` of the valid nodes (pos: [L, C] int64 tree positions)."""
    L, c = key.shape
    order = top_k_columns(np.where(valid, key, np.nan), min(heads, L), positions=pos)  # [k, C], L: none
    slot = np.full((L + 1, c), -1, dtype=np.int64)  # row L takes the "none left" slots
    lanes = np.arange(c)
    for t in range(order.shape[0]):
        slot[order[t], lanes] = t
    return slot[:L]
