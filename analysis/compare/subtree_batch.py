"""The exact replay of another config on recorded rounds (docs/analysis.md, "Offline comparison"), for a
whole RoundBatch at once.

Per round, decided or not, the lower / upper bound of the accepted length (equal when decided),
how the walk stopped, the draft steps run and, for an undecidable round, why (as codes; analysis.
compare_batch spells them). Recorded early stops are inherited; ``gamma_threshold`` > 0 simulates
the early stop. Any config works, contained in the recording or not.

Arrays have the round axis last. The simulated tree's levels come from
analysis.compare.subtree_levels (a level is a padded ``[L, C]`` set of slots, children of level i's
non-OUT nodes at ``k * W + r`` of level i+1), each selected by analysis.compare.subtree_select.
Configs replayed together share the levels of a common prefix, and the root's children (built at
the widest root width). The greedy walk here builds and selects each level only on the rounds still
walking at its depth (most walks stop by depth 1 or 2); under the gammaThreshold early stop every
level is built on every round first (simulate_levels, which the sampling walk reads too).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from replay.core.config import TreeConfig
from replay.core.vocab import CHUNK_ROUNDS, PAD_TOKEN
from replay.engine.batch import BatchResult, RoundBatch, StopCode, TreeShape

from .subtree import LEVEL_CODES, NOT_OPENED, WHY_BEYOND, WHY_NONE, WHY_WIDTH, truncated
from .subtree_levels import (
    RecordedChunk,
    child_level,
    gather_columns,
    last_built,
    level_prefix,
    root_level,
    select_copy,
    simulate_levels,
    step_caps,
)
from .subtree_select import Level, first_hit, selection_rules

# how the walk ended; why a round is undecidable: subtree.WHY_*
STOP_CODE_LEAF, STOP_CODE_MISMATCH, STOP_CODE_NO_ROW = StopCode.LEAF, StopCode.MISMATCH, StopCode.NO_ROW
STOP_CODE_UNDECIDABLE = max(StopCode) + 1  # the batch replay's stop codes, and one more
NO_CANDIDATE = -1  # why_rank where the reason names no candidate (not vocab.NO_RANK, the root's rank)
ROOT_WIDEST = "root widest"  # shared's key: the widest root width of the configs replayed together
# Rounds simulated at once: a packed run's block (vocab.CHUNK_ROUNDS), whole. A walk makes some ten
# thousand small array operations per chunk whatever its width, so narrower chunks cost more: at 10^6
# article rounds the report's 7 configs took 5.0 user CPU s at 4,096 rounds, 4.0 at 8,192 and 3.4 at
# 16,384, and recommend --budget 12 (whole command) 6.9 / 6.1 / 5.6, its page faults and system time
# about the same (each level op's [slots, rounds] temporary grows with it). Results do not depend on it.
SIM_CHUNK_ROUNDS = CHUNK_ROUNDS
# A level is built (and selected) only on the rounds still walking (_OnTheWalk); the columns of the
# others are dropped from it when they are more than this share of it. Results do not depend on it.
COMPACT_SHARE = 0.85


@dataclass(frozen=True, eq=False)
class SubOutcomes:
    """Per round: whether the config's accepted length is decided, its bounds, and the rest that
    compare shows. The reason's depth is ``lower`` (the walk's depth when it stopped)."""

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


def replay_contained_many(
    batch: RoundBatch,
    res: BatchResult,
    expanded: list[np.ndarray],
    shape: TreeShape,
    subs: list[TreeConfig],
    recorded_gamma: int,
    gamma_threshold: float = 0.0,
) -> list[SubOutcomes]:
    """Each of ``subs`` replayed on every round of ``batch`` (all of recorded ``shape``; ``expanded``: per
    step [h_i, R] the recorded selection, replay.engine.batch.expanded_nodes), reading each chunk of
    the recording once; without the gammaThreshold early stop, a config that is the first steps of
    another one's is that walk cut short (truncation_sources). Rounds with ``res.error != 0`` get
    meaningless values."""
    r = len(batch)
    outs = [SubOutcomes.empty(r) for _ in subs]
    rules = selection_rules(batch, res, shape)
    caps = step_caps(subs, shape.num_steps, recorded_gamma)
    roots = [s.top_k_spec[0][0] for s in subs if s.top_k_spec and len(s.top_k_spec[0]) == 1]
    longer = [None] * len(subs) if gamma_threshold > 0 else truncation_sources(subs)
    walked = [k for k, src in enumerate(longer) if src is None]
    for lo in range(0, r, SIM_CHUNK_ROUNDS):
        hi = min(r, lo + SIM_CHUNK_ROUNDS)
        rec = RecordedChunk(batch, res, expanded, shape, lo, hi, rules[lo:hi])
        shared: dict = {}  # the chunk's levels by prefix (simulate_levels)
        if len(roots) > 1:
            shared[ROOT_WIDEST] = max(roots)
        for k in walked:
            outs[k].put(slice(lo, hi), _simulate(rec, subs[k], caps[k], float(gamma_threshold), shared))
    for k, src in enumerate(longer):
        if src is not None:
            outs[k] = truncated_walk(outs[src], caps[k])
    return outs


def truncation_sources(subs: list[TreeConfig]) -> list[int | None]:
    """Per config, the index of the deepest other one of ``subs`` whose first gamma steps it is
    (analysis.compare.subtree.truncated), None when there is none: its walk is that one's cut short
    (truncated_walk), not walked again. The deepest such one is itself walked."""
    out: list[int | None] = []
    for sub in subs:
        deeper = [k for k, other in enumerate(subs) if other.gamma > sub.gamma and truncated(other, sub.gamma) == sub]
        out.append(max(deeper, key=lambda k: subs[k].gamma) if deeper else None)
    return out


def truncated_walk(longer: SubOutcomes, cap: int) -> SubOutcomes:
    """The greedy walk (no gammaThreshold early stop) of the first steps of a config, from that of
    the config (``longer``, walked to a cap at least ``cap``): up to depth ``cap`` both walk the same
    levels, so a round whose walk ended before it ends the same way, and every other one reaches
    the leaves at depth ``cap``. Without the early stop each walk runs every step to its cap."""
    before = longer.lower < cap  # [R] bool: the walk ended above depth cap
    undecided = before & ~longer.decided
    steps = np.full(longer.lower.shape[0], cap, dtype=np.int64)
    return SubOutcomes(
        np.where(before, longer.decided, True),
        np.where(before, longer.lower, cap),
        np.where(before & ~undecided, longer.lower, cap),  # an undecided walk's upper bound: the steps run
        np.where(before, longer.stop, STOP_CODE_LEAF).astype(np.int8),
        steps,
        steps.copy(),
        np.where(before, longer.why, WHY_NONE).astype(np.int8),
        np.where(before, longer.why_rank, NO_CANDIDATE),
    )


class _OnTheWalk:
    """``sub``'s levels built during the walk, each only on the rounds still walking when it is read:
    level d is selected on the rounds that reach depth d, and level d+1 is built on those whose walk
    is at an expanded node with a target row at depth d (most rounds stop at a shallow depth). Each
    round is simulated alone, so a level on fewer rounds decides the same for those rounds. ``shared``:
    the levels already built on this chunk for configs of the same prefix, and on which rounds (the
    walk up to a level depends on that prefix only, so they are the same rounds)."""

    def __init__(self, rec: RecordedChunk, sub: TreeConfig, shared: dict | None):
        self.rec, self.sub, self.shared = rec, sub, shared
        self.level, self.cols = root_level(rec), np.arange(rec.c)  # level d (unselected but the root), on chunk columns

    def _cached(self, key: tuple, make):
        """make(), or what it gave for ``key`` (a config prefix) on the same rounds (last_built)."""
        return last_built(self.shared, key, self.cols.tobytes(), make)

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

    def selected(self, d: int, cols: np.ndarray) -> tuple[Level, np.ndarray]:
        sub = self.sub
        pos = self._narrow(cols)
        if d:
            key = ("selected", level_prefix(sub, d, selected=True))
            self.level = self._cached(key, lambda: select_copy(self.level, sub.top_head[d]))
        return self.level, pos

    def children(self, d: int, cols: np.ndarray) -> tuple[Level, Level, np.ndarray, int, np.ndarray]:
        pos = self._narrow(cols)
        lvl, spec, on = self.level, self.sub.top_k_spec, self.cols
        widest = self.shared.get(ROOT_WIDEST) if self.shared is not None and d == 0 else None
        if widest is not None and len(spec[0]) == 1 and spec[0][0] <= widest:
            # the root's children of width W are the first W of any wider: rank r's fields do not
            # depend on W (one parent, every rank below the width), so the configs share the widest
            w = spec[0][0]
            wide, kp, _ = self._cached(
                ("children", ((widest,),), ()), lambda: child_level(self.rec.on(on), lvl, 0, (widest,))
            )
            kids, big_w = Level(**{f.name: _rows(getattr(wide, f.name), w) for f in fields(Level)}), w
        else:
            key = ("children", level_prefix(self.sub, d + 1))
            kids, kp, big_w = self._cached(key, lambda: child_level(self.rec.on(on), lvl, d, spec[d]))
        self.level = kids
        return lvl, kids, kp, big_w, pos


def _rows(a: np.ndarray | None, n: int) -> np.ndarray | None:
    """A level field's first ``n`` rows (a view: contiguous like the field)."""
    return None if a is None else a[:n]


def _simulate(
    rec: RecordedChunk, sub: TreeConfig, cap: int, threshold: float = 0.0, shared: dict | None = None
) -> SubOutcomes:
    """Walk greedy acceptance on the simulated levels 0..cap: built
    during the walk for the rounds still walking (_OnTheWalk), or all first under the gammaThreshold
    early stop (whether a step runs reads every level of every round)."""
    if threshold > 0:
        sim = simulate_levels(rec, sub, cap, threshold, shared)
        return _walk(rec, cap, sim, sim.sure_steps, sim.max_steps)
    steps = np.full(rec.c, cap, dtype=np.int64)
    return _walk(rec, cap, _OnTheWalk(rec, sub, shared), steps, steps)


def _walk(rec: RecordedChunk, cap: int, src, sure_steps: np.ndarray, max_steps: np.ndarray) -> SubOutcomes:
    """The greedy walk depth by depth on the rounds still walking (``idx``, chunk columns), the
    levels read from ``src`` (SimulatedLevels or _OnTheWalk). How it leaves a node is the rule the
    walk at T reads (analysis.compare.sampling_subtrees): its expansion by replay.core.level_loops.
    _expansion, its children those the level holds (valid), of known token or beyond the recorded
    columns, its kept width known where the child surely exists (sure)."""
    from replay.core.level_loops import expansion_loop  # numba: imported at first use

    out = SubOutcomes.empty(rec.c)
    out.steps_lo[:], out.steps_hi[:] = sure_steps, max_steps
    out.why_rank[:] = NO_CANDIDATE
    idx = np.arange(rec.c)  # the rounds still walking
    cur = np.zeros(rec.c, dtype=np.int64)  # each one's node in level d
    sure, most = sure_steps, max_steps
    alive = np.ones(rec.c, dtype=bool)

    def finish(mask: np.ndarray, d: int, stop: int, why=WHY_NONE, rank: np.ndarray | None = None) -> None:
        """End the walks of ``mask`` at depth ``d``; ``why``: a WHY_* code, or one per walk ([A] int8)."""
        nonlocal alive
        mask = mask & alive
        if not mask.any():
            return
        at, ok = idx[mask], stop != STOP_CODE_UNDECIDABLE
        out.decided[at], out.lower[at], out.stop[at] = ok, d, stop
        out.why[at] = np.broadcast_to(why, mask.shape)[mask]
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
        status = at(lvl.status)  # level 0: the root, its one open node (root_level)
        row = at(lvl.row)
        how = np.empty(idx.shape[0], dtype=np.int8)
        expansion_loop(d, status, row, np.stack([most, sure]), LEVEL_CODES, how)
        finish(how == NOT_OPENED, d, STOP_CODE_LEAF)
        finish(how != WHY_NONE, d, STOP_CODE_UNDECIDABLE, how)  # whether (and how) the node expands is unknown
        t = (
            gather_columns(rec.top1[d], row[None, :], rec.col[idx])[0]
            if d < rec.steps
            else np.full(idx.shape[0], PAD_TOKEN)
        )
        finish(t == PAD_TOKEN, d, STOP_CODE_NO_ROW)  # no target row: the walk ends here
        if not alive.any():
            break
        (t,) = compact(t)
        lvl, kids, kpos, big_w, pos = src.children(d, idx)
        here = np.clip(cur, 0, lvl.valid.shape[0] - 1) * lvl.valid.shape[1] + pos  # lvl may have fewer columns now
        k = np.maximum(at(kpos), 0)
        slots = k[None, :] * big_w + np.arange(big_w)[:, None]  # [W, A] the node's children by rank
        tok = gather_columns(kids.token, slots, pos)
        hit = gather_columns(kids.valid, slots, pos) & ((tok == PAD_TOKEN) | (tok == t[None, :]))
        first, lanes = first_hit(hit), np.arange(idx.shape[0])
        finish(~hit.any(axis=0), d, STOP_CODE_MISMATCH)  # no child matches: the walk stops here
        beyond = tok[first, lanes] == PAD_TOKEN  # a candidate beyond the recorded columns
        finish(beyond, d, STOP_CODE_UNDECIDABLE, WHY_BEYOND, first)
        unsure = ~gather_columns(kids.sure, slots[first, lanes][None, :], pos)[0]  # its kept width's slot unknown
        finish(unsure, d, STOP_CODE_UNDECIDABLE, WHY_WIDTH)
        cur = k * big_w + first
    return out
