"""One config's possible sub-trees at temperature T on a chunk of the batch arrays: numpy over rounds.

The possible sub-tree comes from analysis.compare.subtree_batch.simulate_levels: a level is a padded
``[L, C]`` set of slots, and a node is in the possible tree ("indexed") when it is the root or a
child, of known token, of an indexed node that the walk can leave by a recorded edge (no doubt on
it). Its nodes are numbered level by level, slot by slot: tree order (sub_trees, T-independent). The
bounds are replay.core.sampling.sampling_bounds' rule on those arrays, on rounds of one sub-tree
size and validate width at a time, prepared once (prepare_sampling) for every T (at_temperature).
The doubts are taken in order (level, slot; per slot: its kept width, then its own expansion or its
children beyond the recorded columns, by rank); a round is undetermined by the first one the walk
can reach.
At a temperature with recorded node_logprobs, a round whose every sub-tree node is a recorded node
walks their recorded log-probs instead (recorded_edges: replay.core.sampling_recorded's rule, exact).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import numpy as np

from replay.core.acceptance import validate_row
from replay.core.config import TreeConfig
from replay.core.sampling import SamplingBounds, greedy_logp, prepare_sampling
from replay.core.sampling_problems import PROBLEM_WORDS
from replay.core.sampling_recorded import recorded_bounds
from replay.core.vocab import NO_PARENT, PAD_TOKEN
from replay.engine.batch import BatchResult, RoundBatch

from .subtree import IN, LEVEL_CODES
from .subtree_levels import RecordedChunk, last_built, level_prefix, simulate_levels
from .subtree_select import filled


@dataclass(frozen=True, eq=False)
class AtT:
    """One config at one T on C rounds (NaN / empty where undetermined)."""

    determined: np.ndarray  # [C] bool
    lo: np.ndarray  # [C] float64 expected accepted length bounds
    hi: np.ndarray
    ge_lo: np.ndarray  # [C, gamma] P(L >= d), d = 1 .. the config's gamma (zeros past the sub-tree)
    ge_hi: np.ndarray
    exact: np.ndarray  # [C] bool
    steps_hi: np.ndarray  # [C] int64 draft steps the config possibly runs
    why: np.ndarray  # [C] int8 subtree.WHY_* of the first reachable doubt (WHY_NONE when determined)
    depth: np.ndarray  # [C] int64 its depth
    rank: np.ndarray  # [C] int64 its candidate's rank (WHY_BEYOND), else -1
    needs_vocab: bool

    @staticmethod
    def concat(parts: Sequence[AtT]) -> AtT:
        f = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        fields = [f(n) for n in AtT.__dataclass_fields__ if n != "needs_vocab"]
        return AtT(*fields, any(p.needs_vocab for p in parts))  # type: ignore[arg-type]

    def take(self, index: np.ndarray) -> AtT:
        fields = [getattr(self, n)[index] for n in AtT.__dataclass_fields__ if n != "needs_vocab"]
        return AtT(*fields, self.needs_vocab)  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class SubTrees:
    """One config's possible sub-trees on C rounds, T-independent."""

    n: np.ndarray  # [C] nodes of each round's sub-tree
    k: np.ndarray  # [C] the round's validate columns
    tokens: np.ndarray  # [C, N] int64 (tree order; past n: unused)
    parents: np.ndarray  # [C, N]
    depths: np.ndarray  # [C, N]
    ids: np.ndarray  # [C, N, K] the recorded node's validate row (an expanded node's; a leaf's: PAD)
    logp: np.ndarray  # [C, N, K]
    has: np.ndarray  # [C, N] bool (a leaf: False, its row never read)
    recs: np.ndarray  # [C, N] int64 each node's recorded node (tree order), -1 for an extra node
    idx: list[np.ndarray]  # per level [L_d, C] each slot's sub-tree index, -1 when not in it
    doubts: list[tuple]  # per level (kind [L, 2+W, C] bool mask, why [L, 2+W, C], its _NodeRows: no_row)
    widths: list[int]  # W per level (0 for the last)
    kpos: list[np.ndarray]
    steps_hi: np.ndarray  # [C]
    gamma: int
    cache: dict = field(default_factory=dict)  # what every T reads: the prepared groups per mask, the doubts


def validate_rows(batch: RoundBatch, res: BatchResult, lo: int, hi: int):
    """The chunk's validate ids / log-probs [rows, K, C] (greedy_logp without scores), rows and columns per round."""
    v = batch.validate
    ids = np.ascontiguousarray(v.ids[:, :, lo:hi], dtype=np.int64)
    if v.logp is None:
        lp = np.moveaxis(greedy_logp(np.moveaxis(ids, 1, -1)), -1, 1)  # T = 0 reads only the top-1 column
    else:
        lp = np.ascontiguousarray(v.logp[:, :, lo:hi], dtype=np.float64)
    return ids, np.ascontiguousarray(lp), v.own_rows()[lo:hi], v.own_cols()[lo:hi], res.layout[lo:hi] == 1


def sub_trees(rec: RecordedChunk, rows, sub: TreeConfig, cap: int, threshold: float) -> SubTrees:
    """``sub``'s possible sub-trees on the chunk ``rec`` (module docstring); ``rows``: validate_rows' output."""
    return numbered(rec, sub, sub_tree_levels(rec, rows, sub, cap, threshold), rows)


def numbered(rec: RecordedChunk, sub: TreeConfig, lv: SubTreeLevels, rows) -> SubTrees:
    """sub_trees from its levels ``lv`` (sub_tree_levels on the same chunk and rows)."""
    return _compact(rec, sub, lv.sim, lv.n, lv.nodes, lv.idx, lv.doubts, rows[0], rows[1], rows[3])


@dataclass(frozen=True, eq=False)
class SubTreeLevels:
    """One config's possible sub-trees on C rounds level by level, before they are numbered into
    tree-order arrays (sub_trees): what a walk of the recorded tree's own reach needs of them."""

    sim: object  # analysis.compare.subtree_levels.simulate_levels' levels
    n: np.ndarray  # [C] nodes of each round's sub-tree
    # per level (idx [L, C] sub-tree index or -1, token, parent index, depth, _NodeRows (validate row,
    # has row), recorded node id [L, C]: tree order of the recorded tree, -1 for an extra node)
    nodes: list[tuple]
    idx: list[np.ndarray]
    doubts: list[tuple]  # SubTrees.doubts
    # per level the key of the config prefix that determines levels 0..d (level_key), None when not shared
    keys: list[tuple | None]


@dataclass(frozen=True, eq=False)
class _SubTreeLevel:
    """One level of sub_tree_levels, and what the next level starts from."""

    node: tuple  # SubTreeLevels.nodes' entry
    doubt: tuple  # SubTreeLevels.doubts' entry
    n: np.ndarray  # [C] nodes numbered up to this level
    indexed: np.ndarray  # [L_next, C] bool the next level's indexed slots
    parent_idx: np.ndarray  # [L_next, C] int64 their parents' sub-tree indices


def level_key(sub: TreeConfig, d: int, cap: int) -> tuple:
    """What level ``d`` of sub_tree_levels depends on without an early stop (every round drafts ``cap``
    steps): the topKSpec rows and topHead entries its nodes and their children are chosen by (the
    last level, ``cap``, is not selected and has no children), and whether it is the last level."""
    return ("sub-tree level", level_prefix(sub, d + 1 if d < cap else d), d < cap)


def prefix_order(configs: Sequence[TreeConfig], caps: Sequence[int]) -> list[int]:
    """The positions of ``configs`` (each drafting ``caps[c]`` steps) with the first kept first and
    the others sorted by their levels' keys, so that configs of one prefix come one after another."""
    keys = {c: [level_key(configs[c], d, caps[c]) for d in range(caps[c] + 1)] for c in range(1, len(configs))}
    return [0, *sorted(keys, key=keys.__getitem__)] if configs else []


def sub_tree_levels(
    rec: RecordedChunk,
    rows,
    sub: TreeConfig,
    cap: int,
    threshold: float,
    shared: dict | None = None,
) -> SubTreeLevels:
    """sub_trees' levels: its indexed slots and doubts per level (module docstring), not numbered.
    ``shared``: simulate_levels' levels and (without an early stop) the level last built at each depth
    on this chunk: configs of one prefix taken one after another (prefix_order) build it once, and
    memory holds one chain of levels."""
    sim = simulate_levels(rec, sub, cap, threshold, shared)
    c = rec.c
    share = shared is not None and threshold <= 0
    level = _SubTreeLevel(
        (), (), np.zeros(c, dtype=np.int64), np.ones((1, c), dtype=bool), np.full((1, c), NO_PARENT, dtype=np.int64)
    )
    done: list[_SubTreeLevel] = []
    keys: list[tuple | None] = []
    for d in range(len(sim.levels)):
        key = level_key(sub, d, cap) if share else None
        prev = level
        level = last_built(shared, ("sub-tree level at", d), key, lambda: _sub_tree_level(rec, rows, sim, d, prev))
        done.append(level)
        keys.append(key)
    nodes = [lv.node for lv in done]
    return SubTreeLevels(sim, level.n, nodes, [nd[0] for nd in nodes], [lv.doubt for lv in done], keys)


def _sub_tree_level(rec: RecordedChunk, rows, sim, d: int, prev: _SubTreeLevel) -> _SubTreeLevel:
    """Level ``d`` of sub_tree_levels from the previous level's numbering ``prev``."""
    from replay.core.level_loops import child_slots_loop, level_doubts_loop  # numba: imported at first use

    c, col = rec.c, rec.col
    _, _, own_rows, _, is_all = rows
    indexed = prev.indexed
    lvl = sim.levels[d]
    L = lvl.valid.shape[0]
    full = lambda a: filled(a, (L, c))  # noqa: E731
    # the first tree-order node and expanded row of the recorded level d, -1 past the recorded steps
    first = np.array(
        [rec.shape.starts[d] if d <= rec.steps else -1, rec.shape.head_offsets[d] if d < rec.steps else -1]
    )
    status = np.full((L, c), IN, dtype=np.int8) if lvl.status is None else full(lvl.status)  # None: not selected
    big_w = sim.widths[d] if d < len(sim.widths) else 0
    idx, n, recs = np.empty((L, c), dtype=np.int64), np.empty(c, dtype=np.int64), np.empty((L, c), dtype=np.int64)
    expands = np.empty((L, c), dtype=bool)
    kind, why = np.empty((L, 2 + big_w, c), dtype=bool), np.empty((L, 2 + big_w, c), dtype=np.int8)
    steps = sim.steps
    rec_node, row = full(lvl.rec), full(lvl.row)
    level_args = (indexed, prev.n, rec_node, row, status, full(lvl.sure), int(first[0]))
    level_doubts_loop(*level_args, steps, d, LEVEL_CODES, idx, n, recs, kind, why, expands)
    node_rows = _NodeRows(rec_node, row, first, own_rows, is_all)
    token = np.broadcast_to(lvl.token, (L, c))  # level 0: the root's (root_level)
    nodes = (idx, token, prev.parent_idx, d, node_rows, recs)
    if not big_w:
        return _SubTreeLevel(nodes, (kind, why, node_rows), n, prev.indexed, prev.parent_idx)
    kids = sim.levels[d + 1]
    # the next level's indexed slots (known children of expanded nodes) and their parents' sub-tree indices
    nk = kids.valid.shape[0]
    indexed = np.zeros((nk, c), dtype=bool)
    parent_idx = np.full((nk, c), NO_PARENT, dtype=np.int64)
    flat = lambda a: _flat(a, kids.valid.shape)  # noqa: E731
    tok = flat(kids.token).astype(np.int64, copy=False)
    args = (sim.kpos[d], expands, flat(kids.valid), tok, col, idx, PAD_TOKEN, kind[:, 2:], indexed.reshape(-1))
    child_slots_loop(*args, parent_idx.reshape(-1))  # kind[:, 2:]: the children of unknown token
    return _SubTreeLevel(nodes, (kind, why, node_rows), n, indexed, parent_idx)


@dataclass(frozen=True, eq=False)
class _NodeRows:
    """A sub-tree level's validate rows and whether each slot has its row, made when first read
    (numbered, a config's own walk): the outcomes from the recorded config's walk
    (analysis.compare.sampling_reach) never read them."""

    rec_node: np.ndarray  # [L, C] int64 the slot's recorded level-local node, -1 for none
    row: np.ndarray  # [L, C] int64 its recorded expanded position, -1 when not expanded
    first: np.ndarray  # [2] int64 the level's first tree-order node and expanded row, -1 for none
    own_rows: np.ndarray  # [C] int64 the round's validate rows
    is_all: np.ndarray  # [C] bool the round's layout is "all"

    @cached_property
    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """([L, C] each slot's validate row, replay.core.acceptance.validate_row; [L, C] bool: it has one):
        the row of its tree-order node in the all layout, of its expanded position in the parents layout,
        where the round has that row."""
        rn, rw, own = self.rec_node, self.row, self.own_rows[None, :]
        node = self.first[0] + rn if self.first[0] >= 0 else np.full(rn.shape, -1, dtype=np.int64)
        par = self.first[1] + rw if self.first[1] >= 0 else np.full(rw.shape, -1, dtype=np.int64)
        has_all, has_par = (rn >= 0) & (node < own), (rw >= 0) & (par >= 0) & (par < own)
        is_all = self.is_all
        return validate_row(is_all[None, :], node, par), np.where(is_all[None, :], has_all, has_par)


def _compact(rec, sub, sim, n, nodes, idx_levels, doubts, v_ids, v_lp, own_cols) -> SubTrees:
    """Scatter the indexed slots into tree-order arrays [C, N] and their validate rows [C, N, K]."""
    c = rec.c
    big_n = int(n.max())
    k = v_ids.shape[1]
    # built flat ([C * N], a node at round * N + index): one index array serves every scatter
    tokens = np.zeros(c * big_n, dtype=np.int64)
    parents = np.zeros(c * big_n, dtype=np.int64)
    depths = np.zeros(c * big_n, dtype=np.int64)
    src = np.full(c * big_n, -1, dtype=np.int64)  # each node's validate row, -1 for none (ids PAD, lp -inf)
    recs = np.full(c * big_n, -1, dtype=np.int64)
    slots = [_indexed_slots(lv[0], big_n) for lv in nodes]
    # only a node with a child in the sub-tree has its row read (replay.core.sampling._tree_groups
    # takes the expanded nodes' rows): a leaf's stays PAD, without a row (about half the nodes)
    expanded = np.zeros(c * big_n, dtype=bool)
    for (idx, _, par, *_), (f, cc, _) in zip(nodes[1:], slots[1:]):
        expanded[cc * big_n + _flat(par, idx.shape)[f]] = True
    for (idx, token, par, d, node_rows, rec_of), (f, cc, at) in zip(nodes, slots):
        v_row, h = node_rows.rows
        recs[at] = _flat(rec_of, idx.shape)[f]
        tokens[at] = _flat(token, idx.shape)[f]
        parents[at] = _flat(par, idx.shape)[f]
        depths[at] = d
        ok = _flat(h, idx.shape)[f] & expanded[at]
        src[at[ok]] = _flat(v_row, idx.shape)[f[ok]]  # a row the node has is one of the chunk's (>= 0)
    from replay.core.loops import node_rows_loop  # numba: imported at first use (replay.core.loops)

    ids, lp = np.empty((c * big_n, k), dtype=np.int64), np.empty((c * big_n, k))
    node_rows_loop(v_ids, v_lp, src, big_n, PAD_TOKEN, ids, lp)
    has = src >= 0
    tokens, parents, depths, has, recs = (a.reshape(c, big_n) for a in (tokens, parents, depths, has, recs))
    ids, lp = ids.reshape(c, big_n, k), lp.reshape(c, big_n, k)
    return SubTrees(
        n,
        own_cols,
        tokens,
        parents,
        depths,
        ids,
        lp,
        has,
        recs,
        idx_levels,
        doubts,
        sim.widths,
        sim.kpos,
        sim.max_steps,
        sub.gamma,
    )


def _indexed_slots(idx: np.ndarray, big_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat slot j * C + round, round, round * N + sub-tree index) of a level's indexed slots ([L, C] idx)."""
    f = np.flatnonzero(idx >= 0)
    cc = f % idx.shape[1]
    return f, cc, cc * big_n + idx.reshape(-1)[f]


def _flat(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` ([L, C], or broadcast to it) as one C-order row, to index by flat slot."""
    return filled(a, shape).reshape(-1)


@dataclass(frozen=True, eq=False)
class RecordedEdges:
    """Where a chunk's sub-trees walk the recording's node_logprobs at T instead of the top-K rows."""

    rounds: np.ndarray  # [C] bool: every edge of the round's sub-tree is a recorded edge with its value at T
    logp: np.ndarray  # [C, N] float64 each sub-tree node's log-prob under its parent at T (0 at the root)


def recorded_edges(st: SubTrees, node_logp: np.ndarray, walks: np.ndarray) -> RecordedEdges:
    """The edges of a chunk's sub-trees from the recorded node_logprobs. node_logp: [rows, C] the validate rows'
    node_logprobs column at T; walks: [C] bool the rounds whose recorded walk at T reads that column
    (replay.engine.batch.recorded.node_rounds: the all layout, where row u is node u). A round whose
    sub-tree holds an extra node (a candidate the recording never kept, so no recorded value) keeps
    the top-K rows."""
    c, big_n = st.recs.shape
    inside = np.arange(big_n)[None, :] < st.n[:, None]
    extra = (inside[:, 1:] & (st.recs[:, 1:] < 0)).any(axis=1)
    rows = np.clip(st.recs, 0, node_logp.shape[0] - 1)
    logp = np.asarray(node_logp, dtype=np.float64)[rows, np.arange(c)[:, None]]
    logp[:, 0] = 0.0  # the root: no edge
    return RecordedEdges(walks & ~extra, np.where(inside, logp, 0.0))


def at_temperature(
    st: SubTrees, use: np.ndarray, t: float, vocab_size: int | None = None, edges: RecordedEdges | None = None
) -> AtT:
    """The sub-trees ``st`` at T on the rounds ``use`` ([C] bool; the others: undetermined, unread):
    the rule on rounds of one (size, validate width) at a time, then the first reachable doubt.
    ``edges``: the rounds whose walk takes the recorded node_logprobs at T (recorded_bounds, exact)."""
    return walk_at_temperature(st, use, t, vocab_size, edges).at


@dataclass(frozen=True, eq=False)
class WalkAtT:
    """at_temperature's outcome with the walk behind it: each node's reach bounds, as the rule kept
    them (reach_hi = reach_lo where the round is exact), and whether the round is exact."""

    at: AtT
    reach_lo: np.ndarray  # [C, N] (0 past a round's sub-tree and on rounds not used)
    reach_hi: np.ndarray
    exact: np.ndarray  # [C] bool, determined or not


def walk_at_temperature(
    st: SubTrees, use: np.ndarray, t: float, vocab_size: int | None = None, edges: RecordedEdges | None = None
) -> WalkAtT:
    """at_temperature, with its walk (WalkAtT)."""
    c, big_n = st.tokens.shape
    reach_lo, reach_hi = np.zeros((c, big_n)), np.zeros((c, big_n))
    lo, hi = np.full(c, np.nan), np.full(c, np.nan)
    ge_lo, ge_hi = np.zeros((c, st.gamma)), np.zeros((c, st.gamma))
    exact = np.zeros(c, dtype=bool)
    needs_vocab = False
    own = np.zeros(c, dtype=bool) if edges is None else use & edges.rounds
    top_k = ((m, nn, prepared.bounds(t)) for m, nn, prepared in _groups(st, use & ~own, vocab_size))
    for m, nn, b in chain(top_k, _recorded_groups(st, own, t, edges)):  # one group's bounds held at a time
        if b.problem.any():  # the sub-tree reads the recorded tree's rows: its check comes first
            word = PROBLEM_WORDS[int(b.problem[b.problem != 0][0])]
            raise RuntimeError(f"a sub-tree round: {word}, yet its recorded replay passed")
        needs_vocab |= b.needs_vocab
        reach_lo[m, :nn], reach_hi[m, :nn] = b.reach_lo, b.reach_hi
        lo[m], hi[m], exact[m] = b.expected_lo, b.expected_hi, b.exact
        g = min(st.gamma, b.length_ge_lo.shape[1] - 1)
        ge_lo[m, :g], ge_hi[m, :g] = b.length_ge_lo[:, 1 : 1 + g], b.length_ge_hi[:, 1 : 1 + g]
    why, depth, rank = _first_doubt(_doubts(st), t, reach_lo, reach_hi)
    det = use & (why == 0)
    lo, hi = np.where(det, lo, np.nan), np.where(det, hi, np.nan)
    ge_lo, ge_hi = np.where(det[:, None], ge_lo, 0.0), np.where(det[:, None], ge_hi, 0.0)
    at = AtT(det, lo, hi, ge_lo, ge_hi, exact & det, st.steps_hi, why, depth, rank, needs_vocab)
    return WalkAtT(at, reach_lo, reach_hi, exact)


def blind_edges(st: SubTrees, use: np.ndarray, t: float, vocab_size: int | None = None) -> np.ndarray:
    """[C, N] bool on the rounds ``use`` (walk_at_temperature's, without recorded edges): the sub-tree's
    edges into node u that the walk at T can reach and the rows do not determine (a round is exact
    where it has none), from the groups the walk prepared (PreparedSampling.blind_edges)."""
    out = np.zeros(st.tokens.shape, dtype=bool)
    for m, nn, prepared in _groups(st, use, vocab_size):
        out[m, :nn] = prepared.blind_edges(t)
    return out


def _recorded_groups(
    st: SubTrees, own: np.ndarray, t: float, edges: RecordedEdges | None
) -> Iterator[tuple[np.ndarray, int, SamplingBounds]]:
    """(rounds, n, SamplingBounds) of the rounds ``own`` ([C] bool) from their recorded edges, per
    sub-tree size: the walk on recorded log-probs is exact, so nothing is prepared for other T. A
    round's numbers do not depend on the rounds stacked with it (the round path stacks others)."""
    if edges is None:
        return
    for nn in np.unique(st.n[own]).tolist():
        m = np.flatnonzero(own & (st.n == nn))
        arrays = (st.tokens[m, :nn], st.parents[m, :nn], st.depths[m, :nn], edges.logp[m, :nn])
        yield m, nn, recorded_bounds(*arrays, t)


def _groups(st: SubTrees, use: np.ndarray, vocab_size: int | None) -> list:
    """[(rounds, n, their PreparedSampling)] per (sub-tree size, validate width) of the rounds ``use``:
    cut, grouped by tree and prepared once per mask (a mask depends only on T > 0), read at every T.
    rounds: their positions, or a slice of every round (where one group holds them all)."""
    cache_key = (use.tobytes(), vocab_size)
    if cache_key not in st.cache:
        key = st.n * (int(st.k.max(initial=0)) + 1) + st.k
        out = []
        for kv in np.unique(key[use]):
            m = np.flatnonzero(use & (key == kv))
            nn, kk = int(st.n[m[0]]), int(st.k[m[0]])
            rounds = slice(None) if m.shape[0] == key.shape[0] else m  # every round: views, nothing copied
            arrays = (st.tokens[rounds, :nn], st.parents[rounds, :nn], st.depths[rounds, :nn])
            arrays += (st.ids[rounds, :nn, :kk], st.logp[rounds, :nn, :kk], st.has[rounds, :nn])
            out.append((rounds, nn, prepare_sampling(*arrays, vocab_size)))
        st.cache[cache_key] = out
    return st.cache[cache_key]


@dataclass(frozen=True, eq=False)
class _Doubts:
    """Every doubt of every round, sorted by (round, the round path's order): T-independent."""

    round: np.ndarray  # [E] its round
    node: np.ndarray  # [E] the sub-tree node whose reach_hi bounds it (a beyond candidate's parent)
    kids: np.ndarray  # [E, W] a beyond candidate's earlier known siblings (-1 past them)
    beyond: np.ndarray  # [E] bool: a candidate of unknown token
    no_row: np.ndarray  # [E] bool: its parent has no validate row (T = 0: never reached)
    why: np.ndarray  # [E] int8
    depth: np.ndarray  # [E] int64
    rank: np.ndarray  # [E] int64


def _doubts(st: SubTrees) -> _Doubts:
    """The sparse list of st.doubts (cached): per level, per slot: width, own expansion, children by rank."""
    if "doubts" in st.cache:
        return st.cache["doubts"]
    c = st.tokens.shape[0]
    col = np.arange(c)[None, :]
    big = max([kind.shape[1] - 2 for kind, _, _ in st.doubts] + [1])
    cols: list[list[np.ndarray]] = [[] for _ in range(9)]
    for d, (kind, why, node_rows) in enumerate(st.doubts):
        if d and not kind.any():  # a level without a doubt adds no row (the root's gives the dtypes)
            continue
        has = node_rows.rows[1]
        L, width = kind.shape[0], kind.shape[1] - 2
        idx = st.idx[d]
        kid = np.full((L, big, c), -1, dtype=np.int64)
        if width:
            slot = np.maximum(st.kpos[d], 0)[:, None, :] * width + np.arange(width)[None, :, None]  # [L, W, C]
            k = np.take(np.ascontiguousarray(st.idx[d + 1]).reshape(-1), slot * c + col[None], mode="clip")
            kid[:, :width] = np.where((st.kpos[d] >= 0)[:, None, :], k, -1)
        jj, pos, cc = np.nonzero(kind)
        r = pos - 2
        order = (jj * (2 + width) + pos).astype(np.int64)  # the round path's order within the level
        earlier = np.where(np.arange(big)[None, :] < r[:, None], kid[jj, :, cc], -1)  # [E_d, big]
        per_depth = np.where(pos == 0, d - 1, d)
        key = d * (1 << 40) + order  # level first, then the order within it
        fields = (cc, key, idx[jj, cc], earlier, pos >= 2, ~has[jj, cc], why[jj, pos, cc], per_depth, r)
        for out, v in zip(cols, fields):
            out.append(v)
    cc, key, node, kids, beyond, no_row, why, depth, r = (np.concatenate(v) for v in cols)
    srt = np.lexsort((key, cc))
    out = _Doubts(
        cc[srt], node[srt], kids[srt], beyond[srt], no_row[srt], why[srt].astype(np.int8), depth[srt],
        np.where(beyond[srt], r[srt], -1),
    )  # fmt: skip
    st.cache["doubts"] = out
    return out


def _first_doubt(dt: _Doubts, t: float, reach_lo: np.ndarray, reach_hi: np.ndarray):
    """([C] why, depth, rank) of each round's first doubt the walk can reach (why 0: none); a doubt
    is reached when the upper bound of its reach is > 0."""
    c = reach_lo.shape[0]
    why = np.zeros(c, dtype=np.int8)
    depth = np.zeros(c, dtype=np.int64)
    rank = np.full(c, -1, dtype=np.int64)
    if not dt.round.shape[0]:
        return why, depth, rank
    value = reach_hi[dt.round, dt.node]
    # the earlier known siblings' reach, summed in rank order as the round path sums it
    before = np.zeros(value.shape)
    for w in range(dt.kids.shape[1]):
        k = dt.kids[:, w]
        before = before + np.where(k >= 0, reach_lo[dt.round, np.maximum(k, 0)], 0.0)
    value = np.where(dt.beyond, value - before, value)
    if t == 0.0:  # no row at the parent: the greedy walk stops there
        value = np.where(dt.beyond & dt.no_row, 0.0, value)
    hit = np.flatnonzero(value > 0.0)
    rounds, first = np.unique(dt.round[hit], return_index=True)
    sel = hit[first]
    why[rounds], depth[rounds], rank[rounds] = dt.why[sel], dt.depth[sel], dt.rank[sel]
    return why, depth, rank
