"""Replay another tree config exactly from a recorded round, or say the dump cannot decide it: the
round-by-round reference of the sub-tree walk (a test oracle; the commands walk the batch arrays in
analysis.compare.subtree_batch, tests/test_subtree_batch.py holds the two equal).

The draft's candidate row and the target's top-1 at a node depend only on the node's token path,
not on the rest of the tree. So a round recorded with one config also holds, node for node, what
another config's tree would have seen wherever that tree coincides with the recorded one. A node
of the simulated tree *maps* to a recorded node when its parent maps to the recorded parent and it
has the same draft rank; a child past the recorded kept width but inside the recorded columns is
an *extra* node (token and score known, no target row, never expanded in the recording).

The simulation rebuilds the other config's tree step by step with the SAME selection rule the
recording used (docs/analysis.md, "Offline comparison"):

* path probability when the dump has scores and its parents (if any) agree with them: the sub-tree
  ranks its own level nodes;
* recorded order when the dump has explicit parents but no scores, or parents that differ from the
  path-probability selection (the engine did not select by path probability): the recording tells
  the order of its expanded nodes and that they outrank the level's other nodes, nothing more;
* the rank-major fallback otherwise: (rank, parent's slot), structural, always known.

Each node carries its selection key (replay.core.selection: path log-probability or rank_major_key)
as an interval; with every key exact, a level is ranked by replay.testing.selection_ref (the rule by a sort). An
unknown path key is at most the parent's, and for a candidate its parent's recorded row does not
name, at most the parent's plus the row's smallest score (unnamed_key_bound; at run time in replay.core.level_loops.child_level_loop).

Nothing is guessed. A node's selection is IN, OUT or MAYBE (when unknown scores could reorder
it); a node selected without a recorded row has unknown children. Greedy acceptance then walks
the simulated tree; the round is *decided* when the walk never needs unknown information, and
*undecidable* otherwise, with bounds: lower = the depth the walk had safely reached, upper = the
deepest level the tree could have.

``gammaThreshold`` early stop (our model, see docs): after draft step i, drafting stops when
every row drafted at step i has a top-1 draft probability below the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.compare.subtree import (
    IN,
    MAYBE,
    OUT,
    RULE_FALLBACK,
    RULE_PATH,
    RULE_RECORDED_ORDER,
    UNDECIDABLE,
    WHY_BEYOND,
    WHY_MAYBE,
    WHY_THRESHOLD,
    WHY_UNEXPANDED,
    WHY_WIDTH,
    NodeStatus,
    reason_text,
    smallest_named_score,
)
from replay.core.config import TreeConfig
from replay.core.selection import rank_major_key
from replay.core.vocab import (
    BONUS_CORRECTION,
    BONUS_LEAF,
    LAYOUT_ALL,
    LAYOUT_PARENTS,
    PAD_TOKEN,
    SELECT_PARENTS,
    STOP_LEAF,
    STOP_MISMATCH,
    STOP_NO_ROW,
    score_known,
)
from replay.testing.replayer import RoundResult
from replay.testing.selection_ref import ranks_before, selection_order_ref


@dataclass(frozen=True)
class SubOutcome:
    """One round replayed with another config. Bounds are on the accepted length."""

    key: tuple[int, int]
    decided: bool
    lower: int  # smallest possible accepted length (= the value when decided)
    upper: int  # largest possible accepted length (= the value when decided)
    accepted_tokens: tuple[int, ...]  # decided: the path; undecidable: the prefix surely accepted
    bonus_token: int | None  # the bonus when decided and known to this dump, else None
    bonus_kind: str | None
    bonus_exists: bool  # a dump recorded with the config would hold a bonus token (see committed)
    stop: str  # STOP_LEAF / STOP_MISMATCH / STOP_NO_ROW, or UNDECIDABLE
    steps_lo: int  # draft steps the config runs this round (a range only when a gammaThreshold
    steps_hi: int  # decision depends on unrecorded rows)
    nodes_lo: int  # draft nodes of the tree (root excluded) for steps_lo / steps_hi
    nodes_hi: int
    rule: str  # RULE_* used to recompute selection
    reason: str = ""  # why it is undecidable

    @property
    def accepted_length(self) -> int | None:
        return self.lower if self.decided else None

    @property
    def committed(self) -> int | None:
        """Committed tokens as a dump recorded with this config would show them (None: undecidable)."""
        if not self.decided:
            return None
        return self.lower + int(self.bonus_exists)


@dataclass(eq=False)
class _Node:
    depth: int
    rank: int
    rec: int  # recorded node id, -1 when the node is not in the recorded tree
    token: int  # PAD_TOKEN when unknown
    lo: float  # selection key interval, higher is chosen first
    hi: float
    exact: bool
    sure: bool  # certainly exists (parent certainly selected with a slot giving it this rank)
    order: tuple[int, int] | None  # (parent's slot, rank): tree order in the level, None if unknown
    status: NodeStatus = OUT
    slot_lo: int = -1
    slot_hi: int = -1
    row: int = -1  # row of the recorded candidates, -1 when the recording did not expand it
    children: list[_Node] = field(default_factory=list)


def unnamed_key_bound(parent_hi: Any, smallest: Any) -> Any:
    """The upper end of the path-probability key (the path's summed log-probability) of a candidate
    its parent's recorded row does not name: the parent's upper end plus the row's smallest named
    score (smallest_named_score), or the parent's upper end alone where that is NaN (no row, or no
    score in it: a path probability never exceeds its parent's). Floats or arrays alike."""
    bounded = score_known(smallest)
    return np.where(bounded, parent_hi + np.where(bounded, smallest, 0.0), parent_hi)


def selection_rule(res: RoundResult) -> str:
    """The rule the recorded round's selection must be recomputed with (module docstring)."""
    tree = res.rebuilt.tree
    scored = res.rebuilt.candidate_logp is not None and not np.isnan(tree.logprobs).any()
    if scored and not res.rebuilt.parents_differ:
        return RULE_PATH
    if SELECT_PARENTS in res.rebuilt.selection:
        return RULE_RECORDED_ORDER
    return RULE_FALLBACK  # also for one-step rounds, where no selection happened


def _ahead(a: _Node, b: _Node) -> bool:
    """a certainly ranks before b (ties of exact keys: rank_ties (replay/core/selection.py))."""
    if a.lo > b.hi:
        return True
    if a.exact and b.exact and a.lo == b.lo and a.order is not None and b.order is not None:
        return ranks_before(a.order, b.order)
    return False


def _select(level: list[_Node], heads: int) -> None:
    """Set status and slot range of every node of a level choosing its top ``heads``."""
    if all(u.exact and u.sure and u.order is not None for u in level):
        ranked = [level[j] for j in selection_order_ref([u.lo for u in level], [u.order for u in level])]
        for k, u in enumerate(ranked):
            u.status = IN if k < heads else OUT
            u.slot_lo = u.slot_hi = k if k < heads else -1
        return
    for u in level:
        surely = sum(1 for v in level if v is not u and v.sure and _ahead(v, u))
        maybe = sum(1 for v in level if v is not u and not _ahead(u, v))
        if surely >= heads:
            u.status = OUT
        elif u.sure and maybe < heads:
            u.status = IN
        else:
            u.status = MAYBE
        if u.status != OUT:
            u.slot_lo, u.slot_hi = surely, min(maybe, heads - 1)


class _Recording:
    """Lookups into one recorded round."""

    def __init__(self, res: RoundResult):
        tree = res.tree
        self.res = res
        self.tree = tree
        self.row_of = {int(u): k for k, u in enumerate(tree.expanded_order)}
        self.kids = [tree.children(u) for u in range(tree.num_nodes + 1)]
        self.cand = res.rebuilt.candidates  # [num_expanded, cols] int64
        self.cand_lp = res.rebuilt.candidate_logp  # [num_expanded, cols] float64 or None
        # per row, the bound on the log-probability of a candidate it does not name (NaN: none)
        self.unnamed_lp = None if self.cand_lp is None else smallest_named_score(self.cand, self.cand_lp, axis=1)
        self.top1 = res.target_top1  # [num_nodes + 1] int64
        self.order_at = {}  # recorded node → position among its step's expanded nodes
        for step in tree.expanded:
            for j, u in enumerate(step.tolist()):
                self.order_at[u] = j
        self.heads_at = [int(e.shape[0]) for e in tree.expanded]


def _child(rec: _Recording, parent: _Node, r: int, rule: str, sure: bool, order) -> _Node:
    """The rank-r child of ``parent`` in the simulated tree."""
    rec_id = -1
    if parent.rec >= 0 and r < rec.kids[parent.rec].shape[0]:
        rec_id = int(rec.kids[parent.rec][r])
    token = PAD_TOKEN
    lp = None
    if parent.row >= 0 and r < rec.cand.shape[1]:
        token = int(rec.cand[parent.row, r])
        if rec.cand_lp is not None and token != PAD_TOKEN and score_known(rec.cand_lp[parent.row, r]):
            lp = float(rec.cand_lp[parent.row, r])
    depth = parent.depth + 1
    if rule == RULE_PATH:
        if lp is not None and parent.exact:
            lo = hi = parent.lo + lp  # same sum, same order as replay.testing.rebuild: bitwise equal keys
            exact = True
        elif parent.row >= 0 and token == PAD_TOKEN and rec.unnamed_lp is not None:
            # a candidate the parent's recorded row does not name: below the row's smallest score
            lo, hi, exact = -math.inf, float(unnamed_key_bound(parent.hi, rec.unnamed_lp[parent.row])), False
        else:
            lo, hi, exact = -math.inf, parent.hi, False  # a path probability never exceeds its parent's
    elif rule == RULE_RECORDED_ORDER:
        if rec_id >= 0 and rec_id in rec.order_at:
            lo = hi = -float(rec.order_at[rec_id])
            exact = True
        elif rec_id >= 0 and depth < len(rec.heads_at):
            # recorded but not expanded: ranks below every expanded node of its level
            lo, hi, exact = -math.inf, -float(rec.heads_at[depth]), False
        else:
            lo, hi, exact = -math.inf, math.inf, False
    else:
        if order is not None:
            lo = hi = rank_major_key(r, order[0])
            exact = True
        else:
            lo, hi, exact = -math.inf, math.inf, False
    node = _Node(depth, r, rec_id, token, lo, hi, exact, sure, order)
    if rec_id >= 0 and rec_id in rec.row_of:
        node.row = rec.row_of[rec_id]
    return node


def _widths(spec_row: Sequence[int], u: _Node) -> tuple[int, int]:
    ws = spec_row[u.slot_lo : u.slot_hi + 1]
    return min(ws), max(ws)


def _threshold_stop(level: list[_Node], rec: _Recording, threshold: float) -> str:
    """'stop', 'go' or 'unknown' after a step that drafted the level's IN/MAYBE nodes."""
    drafted = [u for u in level if u.status != OUT]
    confs = []
    for u in drafted:
        if u.row >= 0 and rec.cand_lp is not None and score_known(rec.cand_lp[u.row, 0]):
            confs.append(math.exp(rec.cand_lp[u.row, 0]))
        else:
            confs.append(None)
    if any(c is not None and c >= threshold and u.status == IN and u.sure for c, u in zip(confs, drafted)):
        return "go"
    if all(c is not None and c < threshold for c in confs):
        return "stop"
    return "unknown"


def replay_subconfig(
    res: RoundResult,
    sub: TreeConfig,
    gamma_threshold: float | None = None,
    layout: str | None = None,
    recorded_gamma: int | None = None,
) -> SubOutcome:
    """Replay ``sub`` on the recorded round ``res`` (see the module docstring).

    gamma_threshold: early-stop threshold to simulate (default ``sub.gamma_threshold``; 0 = off).
    layout: the validate layout a dump recorded with ``sub`` would have, which decides whether a
    leaf's bonus token is known (default: the recorded round's layout).
    recorded_gamma: the recording config's gamma. A round with fewer steps stopped early, and the
    stop is inherited: ``sub`` runs at most that many steps too (the dump cannot show more).
    Without it every round is taken as complete, so levels below the recording stay unknown.
    """
    layout = layout or res.layout
    if layout not in (LAYOUT_ALL, LAYOUT_PARENTS):
        raise ValueError(f"layout must be {LAYOUT_ALL!r} or {LAYOUT_PARENTS!r}, got {layout!r}")
    t = simulate_subconfig(res, sub, gamma_threshold, recorded_gamma)
    return _walk(res, sub, t.rec, t.root, t.rule, layout, t.sure_steps, t.max_steps)


@dataclass(eq=False)
class SimulatedTree:
    """``sub``'s tree rebuilt on a recorded round, before any walk: levels of nodes (level 0 is the
    root; a node's ``children`` are the rank-ordered nodes of the next level it may have), each node
    with its selection status, whether it surely exists, its recorded node (``rec``, -1: not in the
    recording) and its token (PAD_TOKEN: unknown). The greedy walk (replay_subconfig) and the
    sampling walk (replay.testing.compare_at_t) both read it."""

    rec: _Recording
    root: _Node
    rule: str
    levels: list[list[_Node]]
    sure_steps: int  # draft steps surely run (gammaThreshold)
    max_steps: int  # draft steps possibly run


def simulate_subconfig(
    res: RoundResult, sub: TreeConfig, gamma_threshold: float | None = None, recorded_gamma: int | None = None
) -> SimulatedTree:
    """``sub``'s tree on the recorded round ``res`` (replay_subconfig's arguments of the same names)."""
    rec = _Recording(res)
    rule = selection_rule(res)
    threshold = sub.gamma_threshold if gamma_threshold is None else float(gamma_threshold)
    rec_steps = rec.tree.num_steps
    stopped_early = recorded_gamma is not None and rec_steps < recorded_gamma
    cap = min(sub.gamma, rec_steps) if stopped_early else sub.gamma
    root = _Node(0, -1, 0, int(rec.tree.tokens[0]), 0.0, 0.0, True, True, (0, 0))
    root.row = rec.row_of.get(0, -1)
    levels = [[root]]
    sure_steps = max_steps = cap
    for i in range(cap):
        level = levels[i]
        if i == 0:
            root.status, root.slot_lo, root.slot_hi = IN, 0, 0
        else:
            _select(level, sub.top_head[i])
        new_level: list[_Node] = []
        for u in level:
            if u.status == OUT:
                continue
            w_lo, w_hi = _widths(sub.top_k_spec[i], u)
            order_slot = u.slot_lo if u.slot_lo == u.slot_hi else None
            for r in range(w_hi):
                sure = u.status == IN and u.sure and r < w_lo
                child = _child(rec, u, r, rule, sure, None if order_slot is None else (order_slot, r))
                u.children.append(child)
                new_level.append(child)
        levels.append(new_level)
        if threshold > 0 and i + 1 < cap:
            verdict = _threshold_stop(level, rec, threshold)
            if verdict == "stop" and sure_steps == max_steps:
                sure_steps = max_steps = i + 1
                break
            if verdict == "stop":
                max_steps = i + 1
                break
            if verdict == "unknown" and sure_steps == max_steps:
                sure_steps = i + 1
    return SimulatedTree(rec, root, rule, levels, sure_steps, max_steps)


def _nodes(sub: TreeConfig, steps: int) -> int:
    return sum(sum(row) for row in sub.top_k_spec[:steps])


def _walk(res, sub, rec, root, rule, layout, sure_steps, max_steps) -> SubOutcome:
    """Greedy acceptance on the simulated tree, stopping as soon as it needs unknown information."""
    path: list[_Node] = []
    u = root
    base = dict(
        key=res.key,
        steps_lo=sure_steps,
        steps_hi=max_steps,
        nodes_lo=_nodes(sub, sure_steps),
        nodes_hi=_nodes(sub, max_steps),
        rule=rule,
    )

    def undecidable(why: str) -> SubOutcome:
        tokens = tuple(v.token for v in path)
        return SubOutcome(
            decided=False,
            lower=len(path),
            upper=max_steps,
            accepted_tokens=tokens,
            bonus_token=None,
            bonus_kind=None,
            bonus_exists=False,
            stop=UNDECIDABLE,
            reason=why,
            **base,
        )

    def decided(bonus: int | None, kind: str | None, stop: str, exists: bool) -> SubOutcome:
        tokens = tuple(v.token for v in path)
        return SubOutcome(
            decided=True,
            lower=len(path),
            upper=len(path),
            accepted_tokens=tokens,
            bonus_token=bonus,
            bonus_kind=kind,
            bonus_exists=exists,
            stop=stop,
            **base,
        )

    while True:
        d = u.depth
        if d >= max_steps or u.status == OUT:
            # A leaf of the simulated tree: a dump recorded with the config holds its bonus only in
            # the all layout; an extra node (never in the recording) has it there but unknown to us.
            if layout != LAYOUT_ALL:
                return decided(None, None, STOP_LEAF, False)
            t = int(rec.top1[u.rec]) if u.rec >= 0 else PAD_TOKEN
            if t == PAD_TOKEN:
                return decided(None, None, STOP_LEAF, u.rec < 0)
            return decided(t, BONUS_LEAF, STOP_LEAF, True)
        if d >= sure_steps:
            return undecidable(reason_text(WHY_THRESHOLD, d))
        if u.status == MAYBE:
            return undecidable(reason_text(WHY_MAYBE, d))
        if u.row < 0:
            return undecidable(reason_text(WHY_UNEXPANDED, d))
        t = int(rec.top1[u.rec])
        if t == PAD_TOKEN:
            return decided(None, None, STOP_NO_ROW, False)
        w_lo, w_hi = _widths(sub.top_k_spec[d], u)
        nxt = None
        for child in u.children[:w_hi]:
            if child.token == PAD_TOKEN:
                return undecidable(reason_text(WHY_BEYOND, d, child.rank))
            if child.token == t:
                if child.rank >= w_lo:
                    return undecidable(reason_text(WHY_WIDTH, d))
                nxt = child
                break
        if nxt is None:
            return decided(t, BONUS_CORRECTION, STOP_MISMATCH, True)
        path.append(nxt)
        u = nxt


def replay_subconfig_all(
    results: Iterable[RoundResult],
    sub: TreeConfig,
    gamma_threshold: float | None = None,
    layout: str | None = None,
    recorded_gamma: int | None = None,
) -> list[SubOutcome]:
    return [replay_subconfig(r, sub, gamma_threshold, layout, recorded_gamma) for r in results]
