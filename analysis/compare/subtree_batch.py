"""analysis.compare.subtree's exact replay of a contained config, for a whole RoundBatch at once.

The same decisions as ``analysis.compare.subtree.replay_subconfig`` (the readable reference; the property
tests tests/test_subtree_batch.py and tests/test_compare_batch.py compare the two on random dumps):
per round, decided or not, the lower / upper bound of the accepted length (equal when decided),
how the walk stopped, the draft steps run and, for an undecidable round, why (as codes; analysis.
compare_batch spells them). Recorded early stops are inherited; ``gamma_threshold`` > 0 simulates
the early stop as the reference does. Any config works, contained in the recording or not.

Arrays have the round axis last. A level of the simulated tree is a padded ``[L, C]`` set of slots
(``valid`` marks real nodes); children of level i's non-OUT nodes sit at ``k * W + r`` of level
i+1, k the parent's position among them and W the widest topKSpec entry of step i. Selection is
recomputed by successive maxima (ties by tree order) in rounds where every key of the level is
known and ordered (the common case; taken as they come where the valid nodes already are in that
order), and with the reference's pairwise IN / OUT / MAYBE rule in the others. Configs replayed
together share the levels of a common prefix, and the root's children (built at the widest root width). The greedy walk builds and selects each level only on the rounds still walking at its
depth (most walks stop by depth 1 or 2); under the gammaThreshold early stop every level is built on
every round first (simulate_levels, which the sampling walk reads too).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields, replace

import numpy as np

from replay.core.config import TreeConfig
from replay.core.selection import FALLBACK_RANK_WEIGHT, first_true
from replay.core.vocab import PAD_TOKEN, score_known
from replay.engine.batch import SEL_PARENTS, BatchResult, RoundBatch, StopCode, TreeShape

from .subtree import IN, MAYBE, OUT, WHY_BEYOND, WHY_MAYBE, WHY_NONE, WHY_THRESHOLD, WHY_UNEXPANDED, WHY_WIDTH

CODE_PATH, CODE_RECORDED, CODE_FALLBACK = 0, 1, 2  # analysis.compare.subtree.selection_rule's RULE_*, as codes


# how the walk ended (analysis.compare.subtree's SubOutcome.stop); why a round is undecidable: subtree.WHY_*
STOP_CODE_LEAF, STOP_CODE_MISMATCH, STOP_CODE_NO_ROW = StopCode.LEAF, StopCode.MISMATCH, StopCode.NO_ROW
STOP_CODE_UNDECIDABLE = max(StopCode) + 1  # the batch replay's stop codes, and one more
NO_CANDIDATE = -1  # why_rank where the reason names no candidate (not vocab.NO_RANK, the root's rank)
ROOT_WIDEST = "root widest"  # shared's key: the widest root width of the configs replayed together
FIRST_TRUE_MAX = 128  # replay.core.selection.first_true's axis must be shorter
# Rounds simulated at once. Each level op makes a [slots, rounds] temporary; at 4,096 rounds they stay in
# the CPU's cache and under malloc's mmap threshold. At vocab.CHUNK_ROUNDS (16,384) each was a fresh
# mmap whose pages fault in again: 2 million page faults, 5 s of system time, for recommend at 10^6
# rounds (docs/benchmarks.md, "compare and recommend at a million rounds"). Results do not depend on it.
SIM_CHUNK_ROUNDS = 4096
# A level is built (and selected) only on the rounds still walking (_OnTheWalk); the columns of the
# others are dropped from it when they are more than this share of it. Results do not depend on it.
COMPACT_SHARE = 0.85


@dataclass(frozen=True, eq=False)
class SubOutcomes:
    """Per round: whether the config's accepted length is decided, its bounds, and the rest of
    analysis.compare.subtree.SubOutcome that compare shows (bonus fields left out). The reason's depth is
    ``lower`` (the walk's depth when it stopped)."""

    decided: np.ndarray  # [R] bool
    lower: np.ndarray  # [R] int64
    upper: np.ndarray  # [R] int64
    stop: np.ndarray  # [R] int8 STOP_CODE_*
    steps_lo: np.ndarray  # [R] int64 draft steps surely run
    steps_hi: np.ndarray  # [R] int64 draft steps possibly run
    why: np.ndarray  # [R] int8 WHY_*, WHY_NONE when decided
    why_rank: np.ndarray  # [R] int64 the candidate's rank for WHY_BEYOND, else NO_CANDIDATE

    @staticmethod
    def empty(r: int) -> SubOutcomes:
        i64 = lambda: np.zeros(r, dtype=np.int64)  # noqa: E731
        return SubOutcomes(
            np.zeros(r, dtype=bool),
            i64(),
            i64(),
            np.zeros(r, dtype=np.int8),
            i64(),
            i64(),
            np.zeros(r, dtype=np.int8),
            i64(),
        )

    def put(self, at: slice, other: SubOutcomes) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name)[at] = getattr(other, name)


@dataclass(eq=False)
class _Level:
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

    def on(self, cols: np.ndarray) -> _Level:
        """The level on its columns ``cols`` only (a [L, 1] field stays as it is)."""
        c = self.valid.shape[1]
        pick = lambda a: a if a is None or a.shape[1] != c else np.take(a, cols, axis=1)  # noqa: E731  2x a[:, cols]
        return _Level(**{f.name: pick(getattr(self, f.name)) for f in fields(self)})


def selection_rules(batch: RoundBatch, res: BatchResult, shape: TreeShape) -> np.ndarray:
    """[R] int8 rule per round, as analysis.compare.subtree.selection_rule decides it."""
    r = len(batch)
    path = np.full(r, all(st.logp is not None for st in batch.steps))
    if path.any():
        for i, st in enumerate(batch.steps):
            m = shape.maps[i]
            path &= ~np.isnan(st.logp[m.slot_parent, m.slot_rank]).any(axis=0)  # a NaN score: no path key
    parents = (res.selection[: shape.num_steps] == SEL_PARENTS).any(axis=0)
    path &= ~res.parents_differ
    return np.where(path, CODE_PATH, np.where(parents, CODE_RECORDED, CODE_FALLBACK)).astype(np.int8)


def replay_contained(
    batch: RoundBatch,
    res: BatchResult,
    expanded: list[np.ndarray],
    shape: TreeShape,
    sub: TreeConfig,
    recorded_gamma: int,
    gamma_threshold: float = 0.0,
) -> SubOutcomes:
    """``sub`` replayed on every round of ``batch`` (all of recorded ``shape``; ``expanded``: per step
    [h_i, R] the recorded selection, replay.engine.batch.expanded_nodes). Rounds with ``res.error != 0``
    get meaningless values."""
    return replay_contained_many(batch, res, expanded, shape, [sub], recorded_gamma, gamma_threshold)[0]


def replay_contained_many(
    batch: RoundBatch,
    res: BatchResult,
    expanded: list[np.ndarray],
    shape: TreeShape,
    subs: list[TreeConfig],
    recorded_gamma: int,
    gamma_threshold: float = 0.0,
) -> list[SubOutcomes]:
    """replay_contained for several configs, reading each chunk of the recording once."""
    r = len(batch)
    outs = [SubOutcomes.empty(r) for _ in subs]
    rules = selection_rules(batch, res, shape)
    steps = shape.num_steps
    for lo in range(0, r, SIM_CHUNK_ROUNDS):
        hi = min(r, lo + SIM_CHUNK_ROUNDS)
        rec = _Recorded(batch, res, expanded, shape, lo, hi, rules[lo:hi])
        shared: dict = {}  # the chunk's levels by prefix (simulate_levels)
        roots = [s.top_k_spec[0][0] for s in subs if s.top_k_spec and len(s.top_k_spec[0]) == 1]
        if len(roots) > 1:
            shared[ROOT_WIDEST] = max(roots)
        for sub, out in zip(subs, outs):
            cap = min(sub.gamma, steps) if steps < recorded_gamma else sub.gamma
            out.put(slice(lo, hi), _simulate(rec, sub, cap, float(gamma_threshold), shared))
    return outs


class _Recorded:
    """Lookups into a chunk of recorded rounds of one shape (contiguous copies, flat gathers)."""

    def __init__(
        self,
        batch: RoundBatch,
        res: BatchResult,
        expanded: list[np.ndarray],
        shape: TreeShape,
        lo: int,
        hi: int,
        rules: np.ndarray,
    ):
        c = hi - lo
        self.c = c  # columns simulated: a level is [L, c]
        self.stride = c  # columns of the recorded arrays below (the chunk)
        self.col = np.arange(c)  # each simulated column's column in the recorded arrays
        self.shape = shape
        self.steps = shape.num_steps
        self.rules = rules  # [C] int8
        self.present = set(np.flatnonzero(np.bincount(rules, minlength=3)).tolist())  # the CODE_* in the chunk
        self.ids = [np.ascontiguousarray(st.ids[:, :, lo:hi], dtype=np.int64) for st in batch.steps]  # [rows, cols, C]
        self.logp = [
            None if st.logp is None else np.ascontiguousarray(st.logp[:, :, lo:hi], dtype=np.float64)
            for st in batch.steps
        ]
        self.chosen = [np.ascontiguousarray(e[:, lo:hi]) for e in expanded]  # [h_i, C] level-local recorded nodes
        # position among step i's expanded nodes of each recorded level-i node, -1 when not expanded
        self.pos = []
        for i in range(self.steps):
            p = np.full((shape.level_sizes[i], c), -1, dtype=np.int64)
            for j in range(shape.heads[i]):
                np.put_along_axis(p, self.chosen[i][j : j + 1], j, axis=0)
            self.pos.append(p)
        val0 = np.ascontiguousarray(batch.validate.ids[:, 0, lo:hi], dtype=np.int64)  # [vrows, C]
        is_all = res.layout[lo:hi].astype(bool)
        # target top-1 at each recorded expanded node (step i, position j): [h_i, C]
        self.top1 = []
        for i in range(self.steps):
            node_row = shape.starts[i] + self.chosen[i]
            par_row = shape.head_offsets[i] + np.arange(shape.heads[i])[:, None]
            self.top1.append(self.gather(val0, np.where(is_all, node_row, par_row)))
        self.width = [np.asarray(w, dtype=np.int64) for w in shape.widths]  # recorded kept width per position
        self.first_child = [m.child_offset for m in shape.maps]

    def on(self, cols: np.ndarray) -> _Recorded:
        """The chunk's columns ``cols`` (of this one's) only, as the simulated columns: the recorded
        arrays are shared, not copied (their lookups go through ``col``)."""
        view = copy.copy(self)
        view.c, view.col, view.rules = cols.shape[0], self.col[cols], self.rules[cols]
        view.present = set(np.flatnonzero(np.bincount(view.rules, minlength=3)).tolist())
        return view

    def gather(self, arr: np.ndarray, index: np.ndarray) -> np.ndarray:
        """arr[index[k, c], c] for a contiguous recorded [L, chunk] arr; index: [K, C] (clipped into range)."""
        return _gather(arr, index, self.col)

    def recorded_children(self, depth: int, p_row: np.ndarray, rr: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(token, log-prob) [K, W, C] of step ``depth``'s recorded draft at (parent row p_row [K, C],
        rank rr [1, W, 1]): PAD_TOKEN / NaN where p_row < 0 or the rank is past the recorded
        columns; log-prob None without scores. One flat index serves both (RoundBatch checks that a
        step's logp has its ids' shape)."""
        ids, logp = self.ids[depth], self.logp[depth]
        rows, cols = ids.shape[0], ids.shape[1]
        ok = (p_row >= 0)[:, None, :] & (rr < cols)
        idx = ((np.clip(p_row, 0, rows - 1) * cols)[:, None, :] + np.minimum(rr, cols - 1)) * self.stride + self.col
        token = np.where(ok, np.take(ids.reshape(-1), idx, mode="clip"), PAD_TOKEN)
        if logp is None:
            return token, None
        return token, np.where(ok, np.take(logp.reshape(-1), idx, mode="clip"), np.nan)

    def take(self, arrays: list[np.ndarray], depth: int, row: np.ndarray, r: np.ndarray, fill) -> np.ndarray:
        """arrays[depth][row, r, c] where row >= 0 and r < cols, else ``fill``; row/r: [K, C]."""
        mat = arrays[depth]
        rows, cols = mat.shape[0], mat.shape[1]
        ok = (row >= 0) & (r < cols)
        idx = (np.clip(row, 0, rows - 1) * cols + np.minimum(r, cols - 1)) * self.stride + self.col
        return np.where(ok, np.take(mat.reshape(-1), idx, mode="clip"), fill)


def _gather(arr: np.ndarray, index: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """arr[index[k, j], cols[j]] for a contiguous [L, C] arr; index: [K, J] (clipped into range)."""
    return np.take(arr.reshape(-1), np.clip(index, 0, arr.shape[0] - 1) * arr.shape[1] + cols, mode="clip")


def _root(rec: _Recorded) -> _Level:
    one = lambda v, dt: np.full((1, rec.c), v, dtype=dt)  # noqa: E731
    lvl = _Level(
        one(True, bool),
        one(0.0, np.float64),
        one(0.0, np.float64),
        one(True, bool),
        one(True, bool),
        one(True, bool),
        one(0, np.int64),
        np.zeros((1, 1), np.int64),
        one(0, np.int64),
        one(0, np.int64),
        one(PAD_TOKEN, np.int64),
    )
    lvl.status, lvl.slot_lo, lvl.slot_hi = one(IN, np.int8), one(0, np.int64), one(0, np.int64)
    return lvl


def _width_tables(widths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) [h, h] int64 of widths[a..b]: the kept width of a node whose slot is a..b."""
    h = len(widths)
    wl = np.array([[min(widths[a : b + 1]) if b >= a else 0 for b in range(h)] for a in range(h)], dtype=np.int64)
    wh = np.array([[max(widths[a : b + 1]) if b >= a else 0 for b in range(h)] for a in range(h)], dtype=np.int64)
    return wl, wh


def _children(rec: _Recorded, lvl: _Level, depth: int, widths: tuple[int, ...]) -> tuple[_Level, np.ndarray, int]:
    """Level depth+1 from the selected level ``depth``; also each node's position k among the
    non-OUT nodes ([L, C], -1 when OUT) and W. Child k * W + r is computed as [K, W, C] (parent
    fields broadcast over the ranks, not repeated) and kept as [K * W, C]."""
    c = rec.c
    alive = lvl.valid & (lvl.status != OUT)
    k_max = max(1, int(alive.sum(axis=0).max()))
    before = _count_down(alive)  # [L, C] non-OUT nodes up to each node
    kpos = np.where(alive, before - 1, -1)  # a non-OUT node's k: the non-OUT nodes before it
    if lvl.valid.shape[0] == 1:  # the root (k_max is 1): position k = 0 is row 0, no gather
        g = lambda a: a  # noqa: E731
    else:
        order = _non_out_first(alive, before, k_max)  # [K, C] the nodes at k = 0 .. K-1
        flat = order * c + np.arange(c)  # one flat index for every parent field (order is in range)
        g = lambda a: np.take(np.ascontiguousarray(a).reshape(-1), flat)  # noqa: E731  parent field per position k
    p_alive, p_status, p_sure, p_row = g(alive), g(lvl.status), g(lvl.sure), g(lvl.row)
    h = len(widths)
    s_lo, s_hi = np.clip(g(lvl.slot_lo), 0, h - 1), np.clip(g(lvl.slot_hi), 0, h - 1)
    wl, wh = _width_tables(widths)
    w_lo, w_hi = wl[s_lo, s_hi], wh[s_lo, s_hi]  # [K, C]
    big_w = max(widths)
    n = k_max * big_w
    b = lambda a: a[:, None, :]  # noqa: E731  [K, C] → [K, 1, C], broadcast over the ranks
    rr = np.arange(big_w)[None, :, None]  # [1, W, 1] rank
    r2 = np.tile(np.arange(big_w), k_max)[:, None]  # [K * W, 1] rank
    kw = lambda a: np.ascontiguousarray(np.broadcast_to(a, (k_max, big_w, c))).reshape(n, c)  # noqa: E731
    valid = kw(b(p_alive) & (rr < b(w_hi)))
    sure = kw(b((p_status == IN) & p_sure) & (rr < b(w_lo)))
    ordered = kw(b(s_lo == s_hi)) & valid
    oslot = kw(b(s_lo))
    if depth < rec.steps:
        # the recorded child at (parent, rank): parent recorded and expanded, rank within its kept width
        jj = np.clip(p_row, 0, rec.width[depth].shape[0] - 1)
        child_rec = kw(np.where(b(p_row >= 0) & (rr < b(rec.width[depth][jj])), b(rec.first_child[depth][jj]) + rr, -1))
        token, lp = (
            kw(a) if a is not None else np.full((n, c), np.nan) for a in rec.recorded_children(depth, p_row, rr)
        )
    else:
        child_rec = np.full((n, c), -1, dtype=np.int64)
        token = np.full((n, c), PAD_TOKEN, dtype=np.int64)
        lp = np.full((n, c), np.nan)
    nxt = depth + 1
    if nxt < rec.steps:
        child_row = np.where(child_rec >= 0, rec.gather(rec.pos[nxt], child_rec), -1)
    else:
        child_row = np.full((n, c), -1, dtype=np.int64)
    # selection keys by each round's rule (analysis.compare.subtree._child); only the rules present are computed
    keys = {}
    if CODE_PATH in rec.present:
        path_exact = (token != PAD_TOKEN) & score_known(lp) & kw(b(g(lvl.exact)))
        path_lo = np.where(path_exact, kw(b(g(lvl.lo))) + np.where(path_exact, lp, 0.0), -np.inf)
        keys[CODE_PATH] = (path_lo, np.where(path_exact, path_lo, kw(b(g(lvl.hi)))), path_exact)
    if CODE_FALLBACK in rec.present:
        fb_lo = np.where(ordered, -(r2 * FALLBACK_RANK_WEIGHT + oslot).astype(np.float64), -np.inf)
        keys[CODE_FALLBACK] = (fb_lo, np.where(ordered, fb_lo, np.inf), ordered)
    if CODE_RECORDED in rec.present:
        heads_next = rec.shape.heads[nxt] if nxt < rec.steps else 0
        ro_exact = child_row >= 0
        ro_lo = np.where(ro_exact, -child_row.astype(np.float64), -np.inf)
        ro_hi = np.where(ro_exact, ro_lo, np.where((child_rec >= 0) & (nxt < rec.steps), -float(heads_next), np.inf))
        keys[CODE_RECORDED] = (ro_lo, ro_hi, ro_exact)
    lo, hi, exact = _by_rule(rec.rules, keys, (n, c))
    child = _Level(valid, lo, hi, exact & valid, sure & valid, ordered, oslot, r2, child_rec, child_row, token)
    return child, kpos, big_w


def _count_down(mask: np.ndarray) -> np.ndarray:
    """[L, C] int64 np.cumsum(mask, axis=0) of [L, C] bool, one row added at a time: numpy's
    accumulate along the short leading axis (a cast and a per-column inner loop) costs 3-10x more."""
    out = np.empty(mask.shape, dtype=np.int64)
    out[0] = mask[0]
    for i in range(1, mask.shape[0]):
        np.add(out[i - 1], mask[i], out=out[i])
    return out


def _non_out_first(alive: np.ndarray, before: np.ndarray, k_max: int) -> np.ndarray:
    """[K, C] the first ``k_max`` nodes of each column when the non-OUT nodes come first, each group in
    tree order: np.argsort(~alive, axis=0, kind="stable")[:k_max]. Node i's place is before[i] - 1 if
    it is non-OUT, else the non-OUT count plus the OUT nodes before it; the node at place k is the one
    place == k (replay.core.selection.first_true: a sort along the short axis costs ~10x more)."""
    levels = alive.shape[0]
    if levels == 1:
        return np.zeros((1, alive.shape[1]), dtype=np.int64)
    if levels >= FIRST_TRUE_MAX:
        return np.argsort(~alive, axis=0, kind="stable")[:k_max]
    place = np.where(alive, before - 1, before[-1][None, :] + np.arange(levels)[:, None] - before)
    return np.stack([first_true(place == k) for k in range(k_max)])


def _first_min(a: np.ndarray) -> np.ndarray:
    """[C] int64 a.argmin(axis=0) of [L, C] ints: the first of the minima (first_true of the min-reduce)."""
    if a.shape[0] >= FIRST_TRUE_MAX:
        return a.argmin(axis=0)
    return first_true(a == a.min(axis=0))


def _first_hit(hit: np.ndarray) -> np.ndarray:
    """[C] int64 np.argmax(hit, axis=0) of [L, C] bool: the first True, 0 where none."""
    if hit.shape[0] >= FIRST_TRUE_MAX:
        return hit.argmax(axis=0)
    first = first_true(hit)
    return np.where(first < hit.shape[0], first, 0)


def _by_rule(rules: np.ndarray, keys: dict, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, exact) [K * W, C]: each round's keys by its rule (``keys``: rule code → its keys, the
    rules present); a chunk of one rule takes that rule's keys as they are."""
    if len(keys) == 1:
        return next(iter(keys.values()))
    lo, hi, exact = np.full(shape, -np.inf), np.full(shape, np.inf), np.zeros(shape, dtype=bool)
    for code, (k_lo, k_hi, k_exact) in keys.items():
        mine = rules[None, :] == code
        lo, hi, exact = np.where(mine, k_lo, lo), np.where(mine, k_hi, hi), np.where(mine, k_exact, exact)
    return lo, hi, exact


def _select(lvl: _Level, heads: int) -> None:
    """IN / OUT / MAYBE and slot ranges of a level choosing its top ``heads`` (analysis.compare.subtree._select)."""
    L, c = lvl.valid.shape
    v = lvl.valid
    fast = (~v | (lvl.exact & lvl.sure & lvl.ordered)).all(axis=0)  # every key known and ordered
    status = np.zeros((L, c), dtype=np.int8)
    slot_lo = np.full((L, c), -1, dtype=np.int64)
    slot_hi = np.full((L, c), -1, dtype=np.int64)
    cols = np.flatnonzero(fast)
    if cols.shape[0]:
        # successive maxima of the key, ties to the smallest (parent slot, rank): the engine's tree order
        every = cols.shape[0] == c
        vf = v if every else v[:, cols]
        key = np.where(vf, lvl.lo if every else lvl.lo[:, cols], -np.inf)
        tie = (lvl.oslot if every else lvl.oslot[:, cols]) * (1 << 20) + lvl.rank  # [L, C']
        slot, in_order = _slots_in_order(key, tie, vf, heads)
        loop = np.flatnonzero(~in_order)
        if loop.shape[0]:
            slot[:, loop] = _successive_maxima(key[:, loop], tie[:, loop], vf[:, loop], heads)
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
        before = (os_[a_] < os_[b_]) | ((os_[a_] == os_[b_]) & (rk[a_] < rk[b_]))
        ahead = (lo[a_] > hi[b_]) | (ex[a_] & ex[b_] & (lo[a_] == lo[b_]) & od[a_] & od[b_] & before)  # [a, b, C']
        pair = vv[a_] & vv[b_] & ~np.eye(L, dtype=bool)[:, :, None]
        surely = (pair & sure[a_] & ahead).sum(axis=0)  # v sure and ahead of u, summed over v (axis a)
        maybe = (pair & ~ahead.transpose(1, 0, 2)).sum(axis=0)  # not (u ahead of v), summed over v
        st = np.where(surely >= heads, OUT, np.where(sure & (maybe < heads), IN, MAYBE)).astype(np.int8)
        st = np.where(vv, st, OUT).astype(np.int8)
        status[:, cols] = st
        slot_lo[:, cols] = np.where(st != OUT, surely, -1)
        slot_hi[:, cols] = np.where(st != OUT, np.minimum(maybe, heads - 1), -1)
    lvl.status, lvl.slot_lo, lvl.slot_hi = status, slot_lo, slot_hi


def _slots_in_order(key: np.ndarray, tie: np.ndarray, valid: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """([L, C] slot of each node, -1 when not chosen; [C] bool: that slot is right) without the
    successive maxima, for the columns whose valid nodes come first and are already in selection
    order (each key <= the one before, equal keys with tie >= the one before: level 1's ranks of
    the root, mostly): there the maxima take the valid nodes in row order, so a node's slot is its
    row, kept below ``heads``. A check of adjacent rows only; other columns are left to the loop."""
    rows = np.arange(key.shape[0])[:, None]
    slot = np.where(valid & (rows < heads), rows, -1)
    if key.shape[0] == 1:
        return slot, np.ones(key.shape[1], dtype=bool)
    v1, k0, k1 = valid[1:], key[:-1], key[1:]
    ok = (v1 <= valid[:-1]) & (~v1 | (k0 > k1) | ((k0 == k1) & (tie[:-1] <= tie[1:])))
    return slot, ok.all(axis=0)


def _successive_maxima(key: np.ndarray, tie: np.ndarray, valid: np.ndarray, heads: int) -> np.ndarray:
    """[L, C] the slot of each node (-1 when not chosen): the valid node of the largest key takes slot
    0, ties to the smallest tie (the first in row order among equal ties), then the next, ``heads`` times."""
    L = key.shape[0]
    slot = np.full(key.shape, -1, dtype=np.int64)
    left = valid.copy()
    lanes = np.arange(key.shape[1])
    for t in range(min(heads, L)):
        cand = np.where(left, key, -np.inf)
        best = cand.max(axis=0)
        pick = _first_min(np.where(left & (cand == best), tie, np.iinfo(np.int64).max))  # [C']
        exists = left[pick, lanes]
        slot[pick[exists], lanes[exists]] = t
        left[pick[exists], lanes[exists]] = False
    return slot


def _threshold_verdicts(rec: _Recorded, lvl: _Level, depth: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """([C] go, [C] stop) after the step drafting level ``depth`` (analysis.compare.subtree._threshold_stop):
    go when a surely selected node's top-1 draft probability reaches the threshold, stop when every
    drafted node's is known and below it, neither when unknown."""
    drafted = lvl.valid & (lvl.status != OUT)
    row = np.broadcast_to(lvl.row, drafted.shape)
    if depth >= rec.steps or rec.logp[depth] is None:  # the recording drafted no such step / no scores
        lp = np.full(drafted.shape, np.nan)
    else:
        lp = rec.take(rec.logp, depth, np.where(drafted, row, -1), np.zeros_like(row), np.nan)
    known = score_known(lp)
    conf = np.exp(np.where(known, lp, 0.0))
    go = (drafted & known & (conf >= threshold) & (lvl.status == IN) & lvl.sure).any(axis=0)
    stop = (~drafted | (known & (conf < threshold))).all(axis=0)
    return go, stop & ~go


def _steps(rec: _Recorded, levels: list[_Level], cap: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """([C] steps surely run, [C] steps possibly run) under the gammaThreshold early stop, as
    analysis.compare.subtree.replay_subconfig's loop decides them step by step."""
    sure = np.full(rec.c, cap, dtype=np.int64)
    most = np.full(rec.c, cap, dtype=np.int64)
    if threshold <= 0:
        return sure, most
    going = np.ones(rec.c, dtype=bool)
    for i in range(cap - 1):  # a stop after the last step changes nothing
        go, stop = _threshold_verdicts(rec, levels[i], i, threshold)
        stopped = going & stop
        both = stopped & (sure == most)
        sure = np.where(both, i + 1, sure)
        most = np.where(stopped, i + 1, most)
        unknown = going & ~go & ~stop & (sure == most)
        sure = np.where(unknown, i + 1, sure)
        going &= ~stopped
    return sure, most


@dataclass(eq=False)
class SimulatedLevels:
    """``sub``'s simulated levels 0..cap on a chunk of recorded rounds, before any walk (the batch
    form of analysis.compare.subtree.SimulatedTree): the greedy walk (_simulate) and the sampling
    walk (analysis.compare.sampling_subtrees) both read it. kpos[d]: [L_d, C] each level-d node's
    position among its level's non-OUT nodes (-1 when OUT); its rank-r child is slot
    kpos * widths[d] + r of level d+1."""

    levels: list[_Level]
    kpos: list[np.ndarray]
    widths: list[int]
    sure_steps: np.ndarray  # [C] draft steps surely run (gammaThreshold)
    max_steps: np.ndarray  # [C] draft steps possibly run


def simulate_levels(
    rec: _Recorded, sub: TreeConfig, cap: int, threshold: float = 0.0, shared: dict | None = None
) -> SimulatedLevels:
    """Build the simulated levels 0..cap of ``sub`` (each level but the last selected). ``shared``:
    the unselected levels already built on this chunk for other configs, by the prefix they depend on
    (topKSpec rows 0..i, topHead 1..i): configs of one prefix build it once."""
    levels = [_root(rec)]
    kpos, widths = [], []
    for i in range(cap):
        if i:
            levels[i] = replace(levels[i])  # a shared level stays unselected: _select sets new arrays on a copy
            _select(levels[i], sub.top_head[i])
        key = (sub.top_k_spec[: i + 1], sub.top_head[1 : i + 1])
        built = shared.get(key) if shared is not None else None
        if built is None:
            built = _children(rec, levels[i], i, sub.top_k_spec[i])
            if shared is not None:
                shared[key] = built
        child, kp, big_w = built
        levels.append(child)
        kpos.append(kp)
        widths.append(big_w)
    sure_steps, max_steps = _steps(rec, levels, cap, threshold)
    return SimulatedLevels(levels, kpos, widths, sure_steps, max_steps)


class _Built:
    """The levels of ``simulate_levels`` (every level on every round of the chunk) as the walk reads them."""

    def __init__(self, sim: SimulatedLevels):
        self.sim = sim

    def selected(self, d: int, cols: np.ndarray) -> tuple[_Level, np.ndarray]:
        """(level d selected, where ``cols`` of the chunk are among its columns)."""
        return self.sim.levels[d], cols

    def children(self, d: int, cols: np.ndarray) -> tuple[_Level, _Level, np.ndarray, int, np.ndarray]:
        """(level d selected, level d+1, kpos of level d, W, where ``cols`` are among their columns)."""
        sim = self.sim
        return sim.levels[d], sim.levels[d + 1], sim.kpos[d], sim.widths[d], cols


class _OnTheWalk:
    """``sub``'s levels built during the walk, each only on the rounds still walking when it is read:
    level d is selected on the rounds that reach depth d, and level d+1 is built on those whose walk
    is at an expanded node with a target row at depth d (most rounds stop at a shallow depth). Each
    round is simulated alone, so a level on fewer rounds decides the same for those rounds. ``shared``:
    the levels already built on this chunk for configs of the same prefix, and on which rounds (the
    walk up to a level depends on that prefix only, so they are the same rounds)."""

    def __init__(self, rec: _Recorded, sub: TreeConfig, shared: dict | None):
        self.rec, self.sub, self.shared = rec, sub, shared
        self.level, self.cols = _root(rec), np.arange(rec.c)  # level d (unselected but the root), on chunk columns

    def _cached(self, key: tuple, cols: np.ndarray, make):
        hit = self.shared.get(key) if self.shared is not None else None
        if hit is not None and np.array_equal(hit[0], cols):
            return hit[1]
        value = make()
        if self.shared is not None:
            self.shared[key] = (cols, value)
        return value

    def _narrow(self, cols: np.ndarray) -> np.ndarray:
        """Where ``cols`` (chunk columns) are among the current level's, after dropping the other
        columns from it when they are many (a copy of the level costs about a sixth of building one)."""
        if cols.shape[0] == self.cols.shape[0]:
            return np.arange(cols.shape[0])
        place = np.empty(self.rec.c, dtype=np.int64)
        place[self.cols] = np.arange(self.cols.shape[0])
        pos = place[cols]  # cols are among self.cols (np.searchsorted, ~5x slower)
        if cols.shape[0] >= COMPACT_SHARE * self.cols.shape[0]:
            return pos
        self.level, self.cols = self.level.on(pos), cols
        return np.arange(cols.shape[0])

    def selected(self, d: int, cols: np.ndarray) -> tuple[_Level, np.ndarray]:
        sub = self.sub
        pos = self._narrow(cols)
        if d:

            def select() -> _Level:
                lvl = replace(self.level)  # a shared level stays unselected: _select sets new arrays on a copy
                _select(lvl, sub.top_head[d])
                return lvl

            self.level = self._cached(("selected", sub.top_k_spec[:d], sub.top_head[1 : d + 1]), self.cols, select)
        return self.level, pos

    def children(self, d: int, cols: np.ndarray) -> tuple[_Level, _Level, np.ndarray, int, np.ndarray]:
        pos = self._narrow(cols)
        lvl, spec, on = self.level, self.sub.top_k_spec, self.cols
        widest = self.shared.get(ROOT_WIDEST) if self.shared is not None and d == 0 else None
        if widest is not None and len(spec[0]) == 1 and spec[0][0] <= widest:
            # the root's children of width W are the first W of any wider: rank r's fields do not
            # depend on W (one parent, every rank below the width), so the configs share the widest
            w = spec[0][0]
            wide, kp, _ = self._cached(
                ("children", ((widest,),), ()), on, lambda: _children(self.rec.on(on), lvl, 0, (widest,))
            )
            kids, big_w = _Level(**{f.name: _rows(getattr(wide, f.name), w) for f in fields(_Level)}), w
        else:
            key = ("children", spec[: d + 1], self.sub.top_head[1 : d + 1])
            kids, kp, big_w = self._cached(key, on, lambda: _children(self.rec.on(on), lvl, d, spec[d]))
        self.level = kids
        return lvl, kids, kp, big_w, pos


def _rows(a: np.ndarray | None, n: int) -> np.ndarray | None:
    """A level field's first ``n`` rows (a view: contiguous like the field)."""
    return None if a is None else a[:n]


def _simulate(
    rec: _Recorded, sub: TreeConfig, cap: int, threshold: float = 0.0, shared: dict | None = None
) -> SubOutcomes:
    """Walk greedy acceptance (analysis.compare.subtree._walk) on the simulated levels 0..cap: built
    during the walk for the rounds still walking (_OnTheWalk), or all first under the gammaThreshold
    early stop (whether a step runs reads every level of every round)."""
    if threshold > 0:
        sim = simulate_levels(rec, sub, cap, threshold, shared)
        return _walk(rec, sub, cap, _Built(sim), sim.sure_steps, sim.max_steps)
    steps = np.full(rec.c, cap, dtype=np.int64)
    return _walk(rec, sub, cap, _OnTheWalk(rec, sub, shared), steps, steps)


def _walk(rec: _Recorded, sub: TreeConfig, cap: int, src, sure_steps: np.ndarray, max_steps: np.ndarray) -> SubOutcomes:
    """The greedy walk depth by depth on the rounds still walking (``idx``, chunk columns), the
    levels read from ``src`` (_Built or _OnTheWalk)."""
    out = SubOutcomes.empty(rec.c)
    out.steps_lo[:], out.steps_hi[:] = sure_steps, max_steps
    out.why_rank[:] = NO_CANDIDATE
    idx = np.arange(rec.c)  # the rounds still walking
    cur = np.zeros(rec.c, dtype=np.int64)  # each one's node in level d
    sure, most = sure_steps, max_steps
    alive = np.ones(rec.c, dtype=bool)

    def finish(mask: np.ndarray, d: int, stop: int, why: int = WHY_NONE, rank: np.ndarray | None = None) -> None:
        nonlocal alive
        mask = mask & alive
        if not mask.any():
            return
        at, ok = idx[mask], stop != STOP_CODE_UNDECIDABLE
        out.decided[at], out.lower[at], out.stop[at], out.why[at] = ok, d, stop, why
        out.upper[at] = d if ok else most[mask]
        if rank is not None:
            out.why_rank[at] = rank[mask]
        alive = alive & ~mask

    def compact(*arrays: np.ndarray) -> list[np.ndarray]:
        nonlocal idx, cur, sure, most, alive
        if alive.all():
            return list(arrays)
        idx, cur, sure, most, *rest = (a[alive] for a in (idx, cur, sure, most, *arrays))
        alive = np.ones(idx.shape[0], dtype=bool)
        return rest

    for d in range(cap + 1):
        finish(d >= most, d, STOP_CODE_LEAF)  # a leaf of the simulated tree
        if not alive.any():
            break
        compact()
        lvl, pos = src.selected(d, idx)
        here = np.clip(cur, 0, lvl.valid.shape[0] - 1) * lvl.valid.shape[1] + pos  # the walk's node, flat
        at = lambda a: np.take(a.reshape(-1), here)  # noqa: E731  its field in a level's [L, C] a
        status = at(lvl.status) if d else np.full(idx.shape[0], IN, dtype=np.int8)
        finish(status == OUT, d, STOP_CODE_LEAF)
        finish(d >= sure, d, STOP_CODE_UNDECIDABLE, WHY_THRESHOLD)  # whether step d runs is unknown
        finish(status == MAYBE, d, STOP_CODE_UNDECIDABLE, WHY_MAYBE)
        row = at(lvl.row)
        finish(row < 0, d, STOP_CODE_UNDECIDABLE, WHY_UNEXPANDED)  # expanded by the config, not by the recording
        t = _gather(rec.top1[d], row[None, :], rec.col[idx])[0] if d < rec.steps else np.full(idx.shape[0], PAD_TOKEN)
        finish(t == PAD_TOKEN, d, STOP_CODE_NO_ROW)  # no target row: the walk ends here
        if not alive.any():
            break
        (t,) = compact(t)
        lvl, kids, kpos, big_w, pos = src.children(d, idx)
        spec = sub.top_k_spec[d]
        wl, wh = _width_tables(spec)
        here = np.clip(cur, 0, lvl.valid.shape[0] - 1) * lvl.valid.shape[1] + pos  # lvl may have fewer columns now
        s_lo, s_hi = np.clip(at(lvl.slot_lo), 0, len(spec) - 1), np.clip(at(lvl.slot_hi), 0, len(spec) - 1)
        w_lo, w_hi = wl[s_lo, s_hi], wh[s_lo, s_hi]
        k = np.maximum(at(kpos), 0)
        tok = _gather(kids.token, k[None, :] * big_w + np.arange(big_w)[:, None], pos)  # [W, A]
        within = np.arange(big_w)[:, None] < w_hi[None, :]
        hit = within & ((tok == PAD_TOKEN) | (tok == t[None, :]))
        first = _first_hit(hit)
        finish(~hit.any(axis=0), d, STOP_CODE_MISMATCH)  # no child matches: the walk stops here
        finish(
            tok[first, np.arange(idx.shape[0])] == PAD_TOKEN, d, STOP_CODE_UNDECIDABLE, WHY_BEYOND, first
        )  # a candidate beyond the recorded columns
        finish(first >= w_lo, d, STOP_CODE_UNDECIDABLE, WHY_WIDTH)  # the kept width depends on an unknown slot
        cur = k * big_w + first
    return out
