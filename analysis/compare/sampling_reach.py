"""Every config's outcome at each T on a chunk of rounds from one walk per T, the recorded config's
(what recommend --temperature folds for each candidate shape, compare at T and the report's
temperature curve for each compared config).

The walk at T moves from a node to the child that carries the target's draw there, so the edge into
a child has the probability bounds its parent's validate row gives it (replay.core.sampling), the
same in every sub-tree that holds the child; a node's reach bounds are the product along its path,
the same in every sub-tree that holds the node. A config's bounds are then its nodes' reach from the
recorded config's walk, summed per depth in the config's own tree order (as its own walk sums them:
adding a 0.0 changes no float) and tightened by replay.core.sampling_columns' rule: to the bit its
own walk's numbers. Its simulated levels (sampling_subtrees.sub_tree_levels) say which recorded
nodes it holds; they are not numbered, nor their rows prepared, nor walked.

A config's chunk goes this way only where each usable round is sure to match its own walk: every
node a node of the recorded config's sub-tree; no doubt on a child of unknown token, nor on a kept
width that the walk can reach (a reachable doubt on a node's expansion makes the round undetermined
there, as at_temperature's first doubt). Its exactness comes from the recorded config's walk too: a
round is exact where no edge of its sub-tree is blind (reachable and not determined by the rows,
replay.core.sampling_columns._blind_edges), each edge's flag the same in every sub-tree that holds it;
an exact round's upper bounds are its lower ones, as in its own walk. Otherwise the chunk takes the
config's own walk (walk_at_temperature).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.config import TreeConfig

from .sampling_subtrees import (
    AtT,
    SubTreeLevels,
    SubTrees,
    WalkAtT,
    blind_edges,
    numbered,
    prefix_order,
    sub_tree_levels,
    walk_at_temperature,
)
from .subtree_levels import RecordedChunk, last_built

# the most depths whose P(L >= d) a round sums in order: numpy adds 8 or more values of one round pairwise
MAX_SUMMED_DEPTHS = 7


def reach_chunk(
    rec: RecordedChunk,
    rows,
    configs: Sequence[TreeConfig],
    caps: Sequence[int],
    uses: Sequence[tuple[float, np.ndarray]],
    vocab_size: int | None,
    fold: Callable[[int, float, AtT, np.ndarray], None],
    ordinals: np.ndarray,
) -> None:
    """``fold(config position, T, AtT of the usable rounds, their ordinals)`` of every config on the
    chunk ``rec`` at each T of ``uses`` ((T, [C] bool its usable rounds); a T without any: no fold),
    configs[0] the recorded config: from its walk at T where that gives a config's outcome (module
    docstring), else from the config's own walk. Each config's levels are simulated once for every T;
    what a walk gives a level is kept per T (one walk per T)."""
    uses = [(t, use) for t, use in uses if use.any()]
    recorded: list[RecordedWalk | None] = [None] * len(uses)
    picks = [_usable_rounds(use, ordinals) for _, use in uses]  # per T, computed once for every config
    shared: dict = {}  # the simulated levels of one prefix, built once (simulate_levels)
    looked_up: list[dict] = [{} for _ in uses]  # per T: what its walk gives the levels of one prefix
    for c in prefix_order(configs, caps):  # the fold of each config is its own: any order gives its sums
        sub = configs[c]
        lv = sub_tree_levels(rec, rows, sub, caps[c], 0.0, shared)
        st: SubTrees | None = None  # the config's own sub-trees, numbered where a T needs its own walk
        for i, (t, use) in enumerate(uses):
            walk = recorded[i]
            at = None if walk is None else walk.outcome(lv, use, sub.gamma, looked_up[i])
            if at is None:
                st = numbered(rec, sub, lv, rows) if st is None else st
                walked = walk_at_temperature(st, use, t, vocab_size)
                at = walked.at
                if c == 0:
                    recorded[i] = RecordedWalk.of(st, walked, use, t, vocab_size)
            usable, ords = picks[i]
            fold(c, t, at if usable is None else at.take(usable), ords)


def _usable_rounds(use: np.ndarray, ordinals: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(the usable rounds' positions, None when every round is: most chunks, no copy of any field;
    their ordinals). use: [C] bool; ordinals: [C] int64."""
    usable = np.flatnonzero(use)
    if usable.shape[0] == use.shape[0]:
        return None, ordinals
    return usable, ordinals[usable]


@dataclass(frozen=True, eq=False)
class _Level:
    """What a candidate's level gives each round from the recorded walk (replay.core.loops.level_reach_loop)."""

    sums: np.ndarray  # [2, C] the reach lo, hi of the sub-tree's slots summed in slot order
    blind: np.ndarray  # [C] bool: a sub-tree slot holds a recorded node with a blind edge
    all_held: np.ndarray  # [C] bool: the walk holds every sub-tree slot's recorded node


@dataclass(frozen=True, eq=False)
class RecordedWalk:
    """The recorded config's walk on a chunk, by recorded node (tree order of the recorded tree)."""

    reach_lo: np.ndarray  # [C, M] each recorded node's reach bounds (as WalkAtT keeps them)
    reach_hi: np.ndarray
    held: np.ndarray  # [C, M] bool: the node is in the round's sub-tree
    blind: np.ndarray  # [C, M] bool: the edge into the node is reachable and not determined (blind_edges)
    exact: np.ndarray  # [C] bool: the round is exact
    t: float
    vocab_size: int | None
    any_blind: bool  # blind.any(): read by every candidate, computed once

    @staticmethod
    def of(st: SubTrees, walked: WalkAtT, use: np.ndarray, t: float, vocab_size: int | None) -> RecordedWalk:
        c, big_n = st.recs.shape
        inside = (np.arange(big_n)[None, :] < st.n[:, None]) & (st.recs >= 0)
        m = int(st.recs.max(initial=-1)) + 1
        reach_lo, reach_hi, held = np.zeros((c, m)), np.zeros((c, m)), np.zeros((c, m), dtype=bool)
        blind = np.zeros((c, m), dtype=bool)
        f = np.flatnonzero(inside)  # flat [C, N] positions: one index per scatter, no tuples
        at = f // big_n * m + st.recs.reshape(-1)[f]
        for out, x in ((reach_lo, walked.reach_lo), (reach_hi, walked.reach_hi)):
            out.reshape(-1)[at] = x.reshape(-1)[f]
        held.reshape(-1)[at] = True
        if (use & ~walked.exact).any():  # an exact round has no blind edge
            blind.reshape(-1)[at] = blind_edges(st, use, t, vocab_size).reshape(-1)[f]
        return RecordedWalk(reach_lo, reach_hi, held, blind, walked.exact, t, vocab_size, bool(blind.any()))

    def outcome(self, lv: SubTreeLevels, use: np.ndarray, gamma: int, shared: dict | None = None) -> AtT | None:
        """at_temperature's AtT of a candidate with levels ``lv`` from this walk, or None where some
        usable round is not sure to match its own walk (module docstring). ``shared``: the chunk's
        levels (sub_tree_levels'), where what each level gives this walk on ``use`` is kept for the
        next configs of its prefix (last_built)."""
        c = use.shape[0]
        gathered: dict[int, _Level] = {}  # per level, what the sums, _exact and _doubts_through read of it
        if len(lv.nodes) - 1 > MAX_SUMMED_DEPTHS:
            return None
        exact = self._exact(lv, gathered, shared)
        doubts = self._first_doubts(lv, use, exact, gathered, shared)
        if doubts is None:
            return None
        why, depth = doubts
        det = use & (why == 0)
        # each depth's reach summed in its slot order (a slot not in the sub-tree: 0.0), the root's 1.0 first
        sums = np.empty((2, len(lv.nodes), c))  # [lo/hi, depth, C]
        sums[:, 0] = 1.0
        for d in range(1, len(lv.nodes)):
            sums[:, d] = self._gathered(lv, d, gathered, shared).sums
        from replay.core.loops import depth_bounds_loop  # numba: imported at first use (replay.core.loops)

        ge_lo, ge_hi, e_lo, e_hi = np.empty((c, gamma)), np.empty((c, gamma)), np.empty(c), np.empty(c)
        depth_bounds_loop(sums[0], sums[1], exact, det, ge_lo, ge_hi, e_lo, e_hi)
        needs_vocab = self.t > 1.0 and self.vocab_size is None and bool((use & ~exact).any())
        rank = np.full(c, -1, dtype=np.int64)
        return AtT(det, e_lo, e_hi, ge_lo, ge_hi, exact & det, lv.sim.max_steps, why, depth, rank, needs_vocab)

    def _gathered(self, lv: SubTreeLevels, d: int, gathered: dict[int, _Level], shared: dict | None) -> _Level:
        """Level ``d`` of the candidate looked up in this walk (_Level), kept in ``gathered`` for the
        config's other readers and in ``shared`` for the next configs of its prefix (last_built)."""
        if d not in gathered:
            # a level's slots and their recorded nodes, all that is looked up, come from the levels
            # before it: the key of the level above (configs that differ in this level's heads and
            # widths only share it), the root's for every config
            key = lv.keys[d - 1] if d else None if lv.keys[0] is None else ("the sub-tree's root",)
            gathered[d] = last_built(shared, ("recorded walk's level at", d), key, lambda: self._looked_up(lv, d))
        return gathered[d]

    def _looked_up(self, lv: SubTreeLevels, d: int) -> _Level:
        from replay.core.level_loops import level_reach_loop  # numba: imported at first use

        idx, recs = np.ascontiguousarray(lv.nodes[d][0]), np.ascontiguousarray(lv.nodes[d][5])
        c = recs.shape[1]
        sums, blind, all_held = np.empty((2, c)), np.empty(c, dtype=bool), np.empty(c, dtype=bool)
        level_reach_loop(idx, recs, self.held, self.reach_lo, self.reach_hi, self.blind, sums, blind, all_held)
        return _Level(sums, blind, all_held)

    def _reach_at(self, recs: np.ndarray, side: str) -> np.ndarray:
        """[L, C] the reach bound ``side`` ("hi" or "lo") of each slot's recorded node (clipped into range
        where it has none)."""
        reach = self.reach_hi if side == "hi" else self.reach_lo
        c, m = reach.shape
        out: np.ndarray = reach.reshape(-1)[np.arange(c)[None, :] * m + np.clip(recs, 0, m - 1)]
        return out

    def _exact(self, lv: SubTreeLevels, gathered: dict[int, _Level], shared: dict | None) -> np.ndarray:
        """[C] bool: the candidate's round is exact, where no node of its sub-tree has a blind edge (an
        edge's flag is the same in every sub-tree holding it; a slot not held by the walk sends the
        round to the candidate's own walk, _first_doubts). The recorded config's exact rounds: all."""
        c = self.exact.shape[0]
        exact = np.ones(c, dtype=bool)
        if not self.any_blind:
            return exact
        for d in range(1, len(lv.nodes)):
            exact &= ~self._gathered(lv, d, gathered, shared).blind
        return exact

    def _first_doubts(
        self, lv: SubTreeLevels, use: np.ndarray, exact: np.ndarray, gathered: dict[int, _Level], shared: dict | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """([C] why, depth) of each round's first doubt the walk can reach (why 0: none; at_temperature's
        first doubt), or None where some usable round is not sure to match the candidate's own walk
        (module docstring). A doubt is reached where the node's reach_hi is > 0: the recorded walk's, or
        its reach_lo on a round ``exact`` for the candidate (its own walk's reach_hi there) and not for
        the recorded config; each bound's levels are kept for the configs of one prefix."""
        c = use.shape[0]
        flip = use & exact & ~self.exact
        states = []
        for side in ("hi", "lo") if flip.any() else ("hi",):
            state = (use, np.zeros(c, dtype=np.int8), np.zeros(c, dtype=np.int64))
            for d in range(len(lv.nodes)):
                before = state
                state = last_built(
                    shared,
                    ("recorded walk's doubts at", d, side),
                    lv.keys[d],
                    lambda: self._doubts_through(lv, d, self._gathered(lv, d, gathered, shared), before, side),
                )
            states.append(state)
        sure, why, depth = states[0]
        if len(states) > 1:
            sure, why, depth = (np.where(flip, lo, hi) for hi, lo in zip(states[0], states[1]))
        return None if (use & ~sure).any() else (why, depth)

    def _doubts_through(self, lv: SubTreeLevels, d: int, level: _Level, before: tuple, side: str) -> tuple:
        """_first_doubts' (sure, why, depth) [C] after level ``d`` of ``lv`` from theirs ``before`` it;
        ``level``: _gathered's; the recorded nodes' reach bound ``side`` ("hi" or "lo") tells whether the
        walk reaches a doubt."""
        sure, why, depth = before
        kind, whys = lv.doubts[d][0], lv.doubts[d][1]
        c = kind.shape[2]
        sure = sure & level.all_held
        if not kind.any():  # most levels of most chunks
            return sure, why, depth
        reach = self._reach_at(lv.nodes[d][5], side)
        # a doubt on a node's expansion is reached where the node's reach bound > 0; one on its kept
        # width (never met on the random dumps) or on a child of unknown token: not looked into
        reached = kind & (reach > 0.0)[:, None, :]
        sure = sure & ~reached[:, 0].any(axis=0) & ~kind[:, 2:].any(axis=(0, 1))
        new = reached[:, 1].any(axis=0) & (why == 0)
        first = np.argmax(reached[:, 1], axis=0)  # the first slot, in the round path's order
        why = np.where(new, whys[first, 1, np.arange(c)], why).astype(np.int8)
        depth = np.where(new, d, depth)
        return sure, why, depth
