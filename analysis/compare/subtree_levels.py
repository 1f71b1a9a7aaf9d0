"""The simulated tree's levels on a chunk of recorded rounds of one shape: lookups into the recording
(RecordedChunk), the root, each next level from the selected one (child_level: child k * W + r of the
k-th non-OUT node, W the widest topKSpec entry of the step) with its selection keys by each round's
rule, and the draft steps the gammaThreshold early stop surely and possibly runs (_steps).
simulate_levels builds every level on every round first, for the greedy walk under the early stop
and for the sampling walk (analysis.compare.sampling_subtrees).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from replay.core.acceptance import validate_row
from replay.core.config import TreeConfig
from replay.core.selection import rank_major_key_columns
from replay.core.vocab import PAD_TOKEN, score_known
from replay.engine.batch import BatchResult, RoundBatch, TreeShape

from .subtree import IN, OUT, smallest_named_score
from .subtree_select import (
    CODE_FALLBACK,
    CODE_PATH,
    CODE_RECORDED,
    Level,
    Places,
    filled,
    keys_by_rule,
    select_level,
    selection_places,
)


class RecordedChunk:
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
        self.stride = c  # columns of the recorded arrays below (the chunk)
        self._simulate(np.arange(c), rules)
        self.shape = shape
        self.steps = shape.num_steps
        # [chunk] int64 each recorded round's root token (PAD_TOKEN: unknown), read through col
        self.root_tokens = np.ascontiguousarray(batch.root_tokens[lo:hi], dtype=np.int64)
        self.ids = [np.ascontiguousarray(st.ids[:, :, lo:hi], dtype=np.int64) for st in batch.steps]  # [rows, cols, C]
        self.logp = [
            None if st.logp is None else np.ascontiguousarray(st.logp[:, :, lo:hi], dtype=np.float64)
            for st in batch.steps
        ]
        # [rows, C] per step: the bound on the log-prob of a candidate a recorded row does not name
        self.unnamed_lp = [
            None if lp is None or CODE_PATH not in self.present else smallest_named_score(ids, lp, axis=1)
            for ids, lp in zip(self.ids, self.logp)
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
            self.top1.append(self.gather(val0, validate_row(is_all, node_row, par_row)))
        self.width = [np.asarray(w, dtype=np.int64) for w in shape.widths]  # recorded kept width per position
        self.first_child = [m.child_offset for m in shape.maps]

    def on(self, cols: np.ndarray) -> RecordedChunk:
        """The chunk's columns ``cols`` (of this one's) only, as the simulated columns: the recorded
        arrays are shared, not copied (their lookups go through ``col``)."""
        view = copy.copy(self)
        view._simulate(self.col[cols], self.rules[cols])
        return view

    def _simulate(self, col: np.ndarray, rules: np.ndarray) -> None:
        """Simulate the recorded columns ``col`` ([c] int64), each round by its rule ([c] int8 CODE_*)."""
        self.c = col.shape[0]  # columns simulated: a level is [L, c]
        self.col = col  # each simulated column's column in the recorded arrays
        self.rules = rules
        self.present = set(np.flatnonzero(np.bincount(rules, minlength=3)).tolist())  # the CODE_* simulated

    def gather(self, arr: np.ndarray, index: np.ndarray) -> np.ndarray:
        """arr[index[k, c], c] for a contiguous recorded [L, chunk] arr; index: [K, C] (clipped into range)."""
        return gather_columns(arr, index, self.col)

    def take(self, arrays: list[np.ndarray], depth: int, row: np.ndarray, r: np.ndarray, fill) -> np.ndarray:
        """arrays[depth][row, r, c] where row >= 0 and r < cols, else ``fill``; row/r: [K, C]."""
        mat = arrays[depth]
        rows, cols = mat.shape[0], mat.shape[1]
        ok = (row >= 0) & (r < cols)
        idx = (np.clip(row, 0, rows - 1) * cols + np.minimum(r, cols - 1)) * self.stride + self.col
        return np.where(ok, np.take(mat.reshape(-1), idx, mode="clip"), fill)


def gather_columns(arr: np.ndarray, index: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """arr[index[k, j], cols[j]] for a contiguous [L, C] arr; index: [K, J] (clipped into range)."""
    return np.take(arr.reshape(-1), np.clip(index, 0, arr.shape[0] - 1) * arr.shape[1] + cols, mode="clip")


def root_level(rec: RecordedChunk) -> Level:
    """Level 0 of every simulated tree: the root, its one open node (IN), with the round's root token."""
    one = lambda v, dt: np.full((1, rec.c), v, dtype=dt)  # noqa: E731
    lvl = Level(
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
        rec.root_tokens[None, rec.col],
    )
    lvl.status, lvl.slot_lo, lvl.slot_hi = one(IN, np.int8), one(0, np.int64), one(0, np.int64)
    return lvl


def width_tables(widths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) [h, h] int64 of widths[a..b]: the kept width of a node whose slot is a..b."""
    h = len(widths)
    wl = np.array([[min(widths[a : b + 1]) if b >= a else 0 for b in range(h)] for a in range(h)], dtype=np.int64)
    wh = np.array([[max(widths[a : b + 1]) if b >= a else 0 for b in range(h)] for a in range(h)], dtype=np.int64)
    return wl, wh


def child_level(rec: RecordedChunk, lvl: Level, depth: int, widths: tuple[int, ...]) -> tuple[Level, np.ndarray, int]:
    """Level depth+1 from the selected level ``depth``; also each node's position k among the
    non-OUT nodes ([L, C], -1 when OUT) and W. Child k * W + r is the parent at position k's rank-r
    child, kept as [K * W, C]; its slots, recorded cells and path keys are one compiled pass
    (replay.core.level_loops.child_level_loop)."""
    from replay.core.level_loops import child_level_loop, open_nodes_loop  # numba: imported at first use

    c = rec.c
    full = lambda a: filled(a, lvl.valid.shape)  # noqa: E731
    kpos, order = np.empty(lvl.valid.shape, dtype=np.int64), np.empty(lvl.valid.shape, dtype=np.int64)
    k_max = int(open_nodes_loop(full(lvl.valid), full(lvl.status), OUT, kpos, order))
    big_w = max(widths)
    n = k_max * big_w
    r2 = np.tile(np.arange(big_w), k_max)[:, None]  # [K * W, 1] rank
    valid, sure, ordered = np.empty((n, c), dtype=bool), np.empty((n, c), dtype=bool), np.empty((n, c), dtype=bool)
    oslot, child_rec, child_row = (np.empty((n, c), dtype=np.int64) for _ in range(3))
    token, lp = np.empty((n, c), dtype=np.int64), np.empty((n, c))
    path, path_exact = np.empty((2, n, c)), np.empty((n, c), dtype=bool)
    parents = (
        np.ascontiguousarray(order[:k_max]),
        full(lvl.valid),
        full(lvl.status),
        full(lvl.sure),
        full(lvl.slot_lo),
        full(lvl.slot_hi),
        np.stack(width_tables(widths)),
        full(lvl.row),
        full(lvl.exact),
        full(lvl.lo),
        full(lvl.hi),
        np.array([OUT, IN], dtype=np.int8),
    )
    outs = (valid, sure, ordered, oslot, child_rec, child_row, token, lp, path, path_exact)
    child_level_loop(*parents, *_recorded_cells(rec, depth), rec.col, PAD_TOKEN, *outs)
    nxt = depth + 1
    # selection keys by each round's rule; only the rules present are computed
    keys = {}
    if CODE_PATH in rec.present:
        keys[CODE_PATH] = (path[0], path[1], path_exact)
    if CODE_FALLBACK in rec.present:
        fb_lo = np.where(ordered, rank_major_key_columns(r2, oslot), -np.inf)
        keys[CODE_FALLBACK] = (fb_lo, np.where(ordered, fb_lo, np.inf), ordered)
    if CODE_RECORDED in rec.present:
        heads_next = rec.shape.heads[nxt] if nxt < rec.steps else 0
        ro_exact = child_row >= 0
        ro_lo = np.where(ro_exact, -child_row.astype(np.float64), -np.inf)
        ro_hi = np.where(ro_exact, ro_lo, np.where((child_rec >= 0) & (nxt < rec.steps), -float(heads_next), np.inf))
        keys[CODE_RECORDED] = (ro_lo, ro_hi, ro_exact)
    lo, hi, exact = keys_by_rule(rec.rules, keys, (n, c))
    child = Level(valid, lo, hi, exact & valid, sure, ordered, oslot, r2, child_rec, child_row, token)
    return child, kpos, big_w


def _recorded_cells(rec: RecordedChunk, depth: int) -> tuple[np.ndarray, ...]:
    """child_level_loop's recorded arrays of step ``depth``: each expanded position's kept width and first
    child, the draft's ids and log-probs, each row's smallest named score (the bound on a candidate it
    does not name: subtree.smallest_named_score), the next step's expanded positions; empty where the
    recording has no such step (or no scores, or no round of the path rule)."""
    none_i, none_f, no_bound = np.zeros((0, 1, 1), dtype=np.int64), np.zeros((0, 1, 1)), np.zeros((0, 1))
    if depth >= rec.steps:
        none = np.zeros(0, dtype=np.int64)
        return none, none, none_i, none_f, no_bound, np.zeros((0, 1), np.int64)
    logp, bound = rec.logp[depth], rec.unnamed_lp[depth]
    pos = rec.pos[depth + 1] if depth + 1 < rec.steps else np.zeros((0, 1), dtype=np.int64)
    first = np.asarray(rec.first_child[depth], dtype=np.int64)
    ids = rec.ids[depth]
    return rec.width[depth], first, ids, none_f if logp is None else logp, no_bound if bound is None else bound, pos


def _threshold_verdicts(rec: RecordedChunk, lvl: Level, depth: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """([C] go, [C] stop) after the step drafting level ``depth``: go when a surely selected node's top-1 draft probability reaches the threshold, stop when every
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


def _steps(rec: RecordedChunk, levels: list[Level], cap: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """([C] steps surely run, [C] steps possibly run) under the gammaThreshold early stop."""
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


def step_caps(subs: Sequence[TreeConfig], steps: int, recorded_gamma: int) -> list[int]:
    """The draft steps each of ``subs`` simulates on rounds of a recorded shape of ``steps`` draft steps:
    its gamma, but no more than ``steps`` when the recording stopped early (steps < the recorded
    gamma): a simulated tree inherits the recorded early stop."""
    return [min(sub.gamma, steps) if steps < recorded_gamma else sub.gamma for sub in subs]


@dataclass(eq=False)
class SimulatedLevels:
    """``sub``'s simulated levels 0..cap on a chunk of recorded rounds, before any walk: the greedy walk (_simulate) and the sampling
    walk (analysis.compare.sampling_subtrees) both read it. kpos[d]: [L_d, C] each level-d node's
    position among its level's non-OUT nodes (-1 when OUT); its rank-r child is slot
    kpos * widths[d] + r of level d+1."""

    levels: list[Level]
    kpos: list[np.ndarray]
    widths: list[int]
    sure_steps: np.ndarray  # [C] draft steps surely run (gammaThreshold)
    max_steps: np.ndarray  # [C] draft steps possibly run
    steps: np.ndarray  # [2, C] int64 max_steps, sure_steps: what each sub-tree level at T reads

    def selected(self, d: int, cols: np.ndarray) -> tuple[Level, np.ndarray]:
        """(level d selected, where ``cols`` of the chunk are among its columns): the greedy walk's
        read (analysis.compare.subtree_batch._walk), as of the levels it builds on the way."""
        return self.levels[d], cols

    def children(self, d: int, cols: np.ndarray) -> tuple[Level, Level, np.ndarray, int, np.ndarray]:
        """(level d selected, level d+1, kpos of level d, W, where ``cols`` are among their columns)."""
        return self.levels[d], self.levels[d + 1], self.kpos[d], self.widths[d], cols


def level_prefix(sub: TreeConfig, d: int, selected: bool = False) -> tuple:
    """What level ``d`` of ``sub``'s simulated tree depends on: the topKSpec rows and topHead entries
    that chose its nodes (rows 0..d-1, topHead 1..d-1), and with ``selected`` the topHead[d] that
    selects it. Configs that agree on it share the level (simulate_levels, the greedy walk's levels,
    the sub-tree levels at T)."""
    return (sub.top_k_spec[:d], sub.top_head[1 : d + 1 if selected else d])


def simulate_levels(
    rec: RecordedChunk, sub: TreeConfig, cap: int, threshold: float = 0.0, shared: dict | None = None
) -> SimulatedLevels:
    """Build the simulated levels 0..cap of ``sub`` (each level but the last selected). ``shared``:
    the unselected levels already built on this chunk for other configs, by the prefix they depend on
    (topKSpec rows 0..i, topHead 1..i): configs of one prefix build it once."""
    # the root is the same for every config: built once per chunk (nothing writes to a built level)
    root = None if shared is None else shared.get(("root level",))
    if root is None:
        root = root_level(rec)
        if shared is not None:
            shared[("root level",)] = root
    levels = [root]
    kpos, widths = [], []
    for i in range(cap):
        if i:
            levels[i] = _selected(levels[i], sub, i, shared)
        key = level_prefix(sub, i + 1)
        built = shared.get(key) if shared is not None else None
        if built is None:
            built = child_level(rec, levels[i], i, sub.top_k_spec[i])
            if shared is not None:
                shared[key] = built
        child, kp, big_w = built
        levels.append(child)
        kpos.append(kp)
        widths.append(big_w)
    sure_steps, max_steps, steps = _draft_steps(rec, levels, cap, threshold, shared)
    return SimulatedLevels(levels, kpos, widths, sure_steps, max_steps, steps)


def _draft_steps(
    rec: RecordedChunk, levels: list[Level], cap: int, threshold: float, shared: dict | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_steps' (sure, most) and [2, C] int64 (most, sure). Without an early stop they depend on ``cap``
    only: made once per chunk for every config of that cap (``shared``; nothing writes to them)."""
    key = ("draft steps", cap)
    if threshold <= 0 and shared is not None and key in shared:
        done: tuple[np.ndarray, np.ndarray, np.ndarray] = shared[key]
        return done
    sure, most = _steps(rec, levels, cap, threshold)
    done = (sure, most, np.stack([most, sure]).astype(np.int64, copy=False))
    if threshold <= 0 and shared is not None:
        shared[key] = done
    return done


_Built = TypeVar("_Built")


def last_built(shared: dict | None, slot: tuple, key: tuple | None, build: Callable[[], _Built]) -> _Built:
    """``build()``, or what it gave when it last ran in ``slot`` (what, depth) on this chunk for the
    same ``key`` (the config prefix it depends on); ``shared`` None or ``key`` None: built anew.
    Configs taken in prefix order (prefix_order) build each level once, and ``shared`` holds one
    per slot: one chain of levels in memory."""
    if shared is None or key is None:
        return build()
    last = shared.get(slot)
    if last is not None and last[0] == key:
        return last[1]
    done = build()
    shared[slot] = (key, done)
    return done


def _selected(lvl: Level, sub: TreeConfig, i: int, shared: dict | None) -> Level:
    """Level ``i`` of ``sub`` selected (its topHead[i]); ``shared``: the level last selected at depth
    ``i`` on this chunk, with the prefix it depends on (topKSpec rows 0..i-1, topHead 1..i), and the
    unselected level's selection places, which configs choosing other heads there share."""
    key = level_prefix(sub, i, selected=True)

    def select() -> Level:
        places = last_built(shared, ("selection places at", i), level_prefix(sub, i), lambda: selection_places(lvl))
        return select_copy(lvl, sub.top_head[i], places)

    return last_built(shared, ("selected level at", i), key, select)


def select_copy(lvl: Level, heads: int, places: Places | None = None) -> Level:
    """A copy of ``lvl`` selected to ``heads``: a shared level stays unselected (select_level sets new
    arrays on the copy); ``places``: its selection_places, where already made."""
    done = replace(lvl)
    select_level(done, heads, places)
    return done
