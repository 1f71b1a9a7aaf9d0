"""analysis.compare.sampling's configs at temperature T, on the batch arrays: numpy over rounds.

The same per-round outcomes as ``analysis.compare.sampling.compare_sampling`` over the RoundResults
(the readable reference and the fallback for runs not loaded in batches; tests/test_compare_sampling_batch.py
compares the two on random dumps): per config, T and round, determined or not (and why), the
bounds on the expected accepted length and on P(L >= d), exactness.

The possible sub-tree comes from analysis.compare.subtree_batch.simulate_levels, the batch form of
simulate_subconfig: a level is a padded ``[L, C]`` set of slots, and a node is in the possible
tree ("indexed") when it is the root or a child, of known token, of an indexed node that the walk
can leave by a recorded edge (no doubt on it). Its nodes are numbered level by level, slot by
slot: the round path's tree order. The bounds are replay.core.sampling.sampling_bounds' rule on
those arrays, on rounds of one sub-tree size and validate width at a time (as the round path
stacks them: the same sums in the same order), prepared once (prepare_sampling) for every T. The doubts are the round path's, in its order
(level, slot; per slot: its kept width, then its own expansion or its children beyond the
recorded columns, by rank); a round is undetermined by the first one the walk can reach.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.tables.runs import BatchReplay, LabelledRun
from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.sampling import greedy_logp, prepare_sampling
from replay.core.sampling_problems import PROBLEM_WORDS
from replay.core.sampling_recorded import recorded_column
from replay.core.vocab import CHUNK_ROUNDS, NO_PARENT, PAD_TOKEN
from replay.engine.batch import BatchResult, RoundBatch, TreeShape, expanded_nodes
from replay.engine.batch.frames import round_names
from replay.engine.batch.recorded import refusal_texts
from replay.engine.batch.sampling import BatchSampling, batch_sampling
from replay.engine.runs import iter_run_chunks, open_run
from replay.util.rows import unique_rows

from .batch import per_batch_parts, replayed_by_shape
from .configs import is_own_tree
from .sampling import (
    REACHED,
    SAMPLING_COLUMNS,
    SAMPLING_PER_ROUND_COLUMNS,
    ExactSum,
    SamplingComparison,
    compare_sampling,
    summarize_sampling_arrays,
    summarize_sampling_sums,
)
from .subtree import (
    IN,
    MAYBE,
    OUT,
    WHY_BEYOND,
    WHY_MAYBE,
    WHY_NONE,
    WHY_THRESHOLD,
    WHY_UNEXPANDED,
    WHY_WIDTH,
    reason_text,
)
from .subtree_batch import _Recorded, selection_rules, simulate_levels

NOT_REFUSED = 0  # SamplingPart.refused: the recorded round has a sampling replay at T


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
    """One config's possible sub-trees on C rounds, T-independent (SubTreeRound's fields, as arrays)."""

    n: np.ndarray  # [C] nodes of each round's sub-tree
    k: np.ndarray  # [C] the round's validate columns
    tokens: np.ndarray  # [C, N] int64 (tree order; past n: unused)
    parents: np.ndarray  # [C, N]
    depths: np.ndarray  # [C, N]
    ids: np.ndarray  # [C, N, K] the recorded node's validate row (an expanded node's; a leaf's: PAD)
    logp: np.ndarray  # [C, N, K]
    has: np.ndarray  # [C, N] bool (a leaf: False, its row never read)
    idx: list[np.ndarray]  # per level [L_d, C] each slot's sub-tree index, -1 when not in it
    doubts: list[tuple]  # per level (kind [L, 2+W, C] bool mask, why [L, 2+W, C], parent no_row [L, C])
    widths: list[int]  # W per level (0 for the last)
    kpos: list[np.ndarray]
    steps_hi: np.ndarray  # [C]
    gamma: int
    cache: dict = field(default_factory=dict)  # what every T reads: the prepared groups per mask, the doubts


def _rows(batch: RoundBatch, res: BatchResult, shape: TreeShape, lo: int, hi: int):
    """The chunk's validate ids / log-probs [rows, K, C] (greedy_logp without scores), rows and columns per round."""
    v = batch.validate
    ids = np.ascontiguousarray(v.ids[:, :, lo:hi], dtype=np.int64)
    if v.logp is None:
        lp = np.moveaxis(greedy_logp(np.moveaxis(ids, 1, -1)), -1, 1)  # T = 0 reads only the top-1 column
    else:
        lp = np.ascontiguousarray(v.logp[:, :, lo:hi], dtype=np.float64)
    return ids, np.ascontiguousarray(lp), v.own_rows()[lo:hi], v.own_cols()[lo:hi], res.layout[lo:hi] == 1


def sub_trees(rec: _Recorded, rows, root_tokens: np.ndarray, sub: TreeConfig, cap: int, threshold: float) -> SubTrees:
    """``sub``'s possible sub-trees on the chunk ``rec`` (module docstring); ``rows``: _rows' output."""
    sim = simulate_levels(rec, sub, cap, threshold)
    c, col = rec.c, rec.col
    v_ids, v_lp, own_rows, own_cols, is_all = rows
    n = np.zeros(c, dtype=np.int64)  # nodes numbered so far
    indexed = np.ones((1, c), dtype=bool)
    idx_levels, doubts, nodes = [], [], []
    parent_idx = np.full((1, c), NO_PARENT, dtype=np.int64)
    for d, lvl in enumerate(sim.levels):
        L = lvl.valid.shape[0]
        idx = np.where(indexed, n[None, :] + np.cumsum(indexed, axis=0) - 1, -1)
        n = n + indexed.sum(axis=0)
        idx_levels.append(idx)
        rec_node = np.broadcast_to(lvl.rec, (L, c))
        row = np.broadcast_to(lvl.row, (L, c))
        # the node's validate row (replay.core.sampling.node_rows): all layout, row = tree-order id;
        # parents layout, row = its position among the expanded nodes, step by step
        none = np.full((L, c), -1, dtype=np.int64)
        g = rec.shape.starts[d] + rec_node if d <= rec.steps else none
        has_all = (rec_node >= 0) & (g < own_rows[None, :])
        p_row = rec.shape.head_offsets[d] + row if d < rec.steps else none
        has_par = (row >= 0) & (p_row >= 0) & (p_row < own_rows[None, :])
        v_row = np.where(is_all[None, :], g, p_row)
        has = np.where(is_all[None, :], has_all, has_par)
        token = root_tokens[None, :].astype(np.int64) if d == 0 else np.broadcast_to(lvl.token, (L, c))
        nodes.append((idx, token, parent_idx, d, v_row, has))
        status = np.full((L, c), IN, dtype=np.int8) if d == 0 or lvl.status is None else lvl.status
        sure = np.broadcast_to(lvl.sure, (L, c))
        leaf = (d >= sim.max_steps)[None, :] | (status == OUT)
        open_ = indexed & ~leaf
        thr = open_ & (d >= sim.sure_steps)[None, :]
        maybe = open_ & ~thr & (status == MAYBE)
        unexp = open_ & ~thr & ~maybe & (row < 0)
        expands = open_ & ~thr & ~maybe & ~unexp
        node_why = np.where(thr, WHY_THRESHOLD, np.where(maybe, WHY_MAYBE, WHY_UNEXPANDED)).astype(np.int8)
        big_w = sim.widths[d] if d < len(sim.widths) else 0
        kind = np.zeros((L, 2 + big_w, c), dtype=bool)
        why = np.zeros((L, 2 + big_w, c), dtype=np.int8)
        kind[:, 0], why[:, 0] = indexed & ~sure, WHY_WIDTH
        kind[:, 1], why[:, 1] = thr | maybe | unexp, node_why
        if big_w:
            kids = sim.levels[d + 1]
            kp = sim.kpos[d]
            slot = np.maximum(kp, 0)[:, None, :] * big_w + np.arange(big_w)[None, :, None]  # [L, W, C]
            flat = lambda a: np.take(  # noqa: E731  a[slot[j, r, c], c] of a child-level [n, C] array
                np.ascontiguousarray(np.broadcast_to(a, kids.valid.shape)).reshape(-1), slot * c + col, mode="clip"
            )
            k_valid, k_tok = flat(kids.valid), flat(kids.token)
            parent_open = expands[:, None, :] & (kp >= 0)[:, None, :] & k_valid
            kind[:, 2:], why[:, 2:] = parent_open & (k_tok == PAD_TOKEN), WHY_BEYOND
            # the next level's indexed slots and their parents' sub-tree indices
            nk = kids.valid.shape[0]
            indexed = np.zeros((nk, c), dtype=bool)
            parent_idx = np.full((nk, c), NO_PARENT, dtype=np.int64)
            known = parent_open & (k_tok != PAD_TOKEN)
            jj, rr, cc = np.nonzero(known)
            indexed[slot[jj, rr, cc], cc] = True
            parent_idx[slot[jj, rr, cc], cc] = idx[jj, cc]
        doubts.append((kind, why, has))
    return _compact(rec, sub, sim, n, nodes, idx_levels, doubts, v_ids, v_lp, own_cols)


def _compact(rec, sub, sim, n, nodes, idx_levels, doubts, v_ids, v_lp, own_cols) -> SubTrees:
    """Scatter the indexed slots into tree-order arrays [C, N] and their validate rows [C, N, K]."""
    c = rec.c
    big_n = int(n.max())
    k = v_ids.shape[1]
    tokens = np.zeros((c, big_n), dtype=np.int64)
    parents = np.zeros((c, big_n), dtype=np.int64)
    depths = np.zeros((c, big_n), dtype=np.int64)
    ids = np.full((c, big_n, k), PAD_TOKEN, dtype=np.int64)
    lp = np.full((c, big_n, k), -np.inf)
    has = np.zeros((c, big_n), dtype=bool)
    # only a node with a child in the sub-tree has its row read (replay.core.sampling._tree_groups
    # takes the expanded nodes' rows): a leaf's stays PAD, without a row (about half the nodes)
    expanded = np.zeros((c, big_n), dtype=bool)
    for idx, _, par, _, _, _ in nodes[1:]:
        jj, cc = np.nonzero(idx >= 0)
        expanded[cc, par[jj, cc]] = True
    for idx, token, par, d, v_row, h in nodes:
        jj, cc = np.nonzero(idx >= 0)
        at = idx[jj, cc]
        tokens[cc, at] = token[jj, cc]
        parents[cc, at] = par[jj, cc]
        depths[cc, at] = d
        ok = h[jj, cc] & expanded[cc, at]
        jj, cc, at = jj[ok], cc[ok], at[ok]
        vr = v_row[jj, cc]
        has[cc, at] = True
        ids[cc, at] = v_ids[vr, :, cc]
        lp[cc, at] = v_lp[vr, :, cc]
    return SubTrees(
        n,
        own_cols,
        tokens,
        parents,
        depths,
        ids,
        lp,
        has,
        idx_levels,
        doubts,
        sim.widths,
        sim.kpos,
        sim.max_steps,
        sub.gamma,
    )


def at_temperature(st: SubTrees, use: np.ndarray, t: float, vocab_size: int | None = None) -> AtT:
    """The sub-trees ``st`` at T on the rounds ``use`` ([C] bool; the others: undetermined, unread):
    the rule on rounds of one (size, validate width) at a time, then the first reachable doubt."""
    c, big_n = st.tokens.shape
    reach_lo, reach_hi = np.zeros((c, big_n)), np.zeros((c, big_n))
    lo, hi = np.full(c, np.nan), np.full(c, np.nan)
    ge_lo, ge_hi = np.zeros((c, st.gamma)), np.zeros((c, st.gamma))
    exact = np.zeros(c, dtype=bool)
    needs_vocab = False
    for m, nn, prepared in _groups(st, use, vocab_size):
        b = prepared.bounds(t)
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
    return AtT(det, lo, hi, ge_lo, ge_hi, exact & det, st.steps_hi, why, depth, rank, needs_vocab)


def _groups(st: SubTrees, use: np.ndarray, vocab_size: int | None) -> list:
    """[(rounds, n, their PreparedSampling)] per (sub-tree size, validate width) of the rounds ``use``:
    cut, grouped by tree and prepared once per mask (a mask depends only on T > 0), read at every T."""
    cache_key = (use.tobytes(), vocab_size)
    if cache_key not in st.cache:
        key = st.n * (int(st.k.max(initial=0)) + 1) + st.k
        out = []
        for kv in np.unique(key[use]):
            m = np.flatnonzero(use & (key == kv))
            nn, kk = int(st.n[m[0]]), int(st.k[m[0]])
            arrays = (st.tokens[m, :nn], st.parents[m, :nn], st.depths[m, :nn])
            arrays += (st.ids[m, :nn, :kk], st.logp[m, :nn, :kk], st.has[m, :nn])
            out.append((m, nn, prepare_sampling(*arrays, vocab_size)))
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
    for d, (kind, why, has) in enumerate(st.doubts):
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
    is reached when the upper bound of its reach is > 0 (analysis.compare.sampling._doubt_reach)."""
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


@dataclass(frozen=True, eq=False)
class SamplingPart:
    """The replayed rounds of one tree shape of one batch, every config at every T."""

    ordinals: np.ndarray  # [C] position of each round in its run
    names: np.ndarray  # [C] object round names a_b
    refused: dict[bool, np.ndarray]  # T > 0 or not -> [C] NOT_REFUSED, NO_SCORES_CODE or PROBLEM_*
    outcomes: dict[tuple[int, float], AtT]  # (config position, T)
    why: dict[bool, np.ndarray]  # T > 0 or not -> [C] object: a refused round's reason (the engine's words), else ""


def sampling_parts(
    batch: RoundBatch,
    res: BatchResult,
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None = None,
    gamma_threshold: float = 0.0,
    fold: Callable[[int, float, AtT, np.ndarray], None] | None = None,
) -> list[SamplingPart]:
    """Every config at every T on the rounds of ``batch`` that ``res`` replayed, one shape at a time.
    Whether a round is refused (no scores, a bad row) is the recorded replay at T's verdict
    (replay.engine.batch.sampling.batch_sampling), which depends only on T > 0.
    ``fold(config position, T, AtT of the chunk's usable rounds, their ordinals)``: called instead, the
    parts' outcomes left empty (compare's table, report's curve and recommend at T sum each chunk as it
    is made: nothing per round waits)."""
    ordinals = np.arange(len(batch)) if batch.ordinals is None else np.asarray(batch.ordinals, dtype=np.int64)
    static = recorded.tree_type != TREE_DYNAMIC
    parts = []
    for shape, members, b, r in replayed_by_shape(batch, res):
        refused: dict[bool, np.ndarray] = {}
        why: dict[bool, np.ndarray] = {}
        for t in temperatures:
            if (t > 0.0) not in refused:
                bs = batch_sampling(b, r, recorded, t, vocab_size)
                refused[t > 0.0] = np.where(bs.usable, NOT_REFUSED, bs.problem).astype(np.int8)
                why[t > 0.0] = _reasons(refusal_texts(b, r, bs, vocab_size), len(b))
        outcomes = _part_outcomes(
            b,
            r,
            shape,
            static,
            recorded,
            configs,
            temperatures,
            vocab_size,
            gamma_threshold,
            refused,
            fold,
            ordinals[members],
        )
        parts.append(SamplingPart(ordinals[members], round_names(r), refused, outcomes, why))
    return parts


def _reasons(texts: dict[int, str], c: int) -> np.ndarray:
    """[C] object: texts[i] at each refused round i, "" elsewhere (a run refused throughout shares one string)."""
    out = np.full(c, "", dtype=object)
    for i, text in texts.items():
        out[i] = text
    return out


def _part_outcomes(
    b, r, shape, static, recorded, configs, temperatures, vocab_size, threshold, refused, fold=None, ords=None
):
    """{(config, T): AtT} on rounds of one shape, chunk by chunk (analysis.compare.subtree_batch's chunks)."""
    expanded = expanded_nodes(b, shape, static)
    rules = selection_rules(b, r, shape)
    steps = shape.num_steps
    chunks: dict[tuple[int, float], list[AtT]] = {}
    own = (
        {t: batch_sampling(b, r, recorded, t, vocab_size) for t in temperatures}
        if any(is_own_tree(c, recorded, threshold) for c in configs)
        else {}
    )
    for lo in range(0, len(b), CHUNK_ROUNDS):
        hi = min(len(b), lo + CHUNK_ROUNDS)
        uses = {pos: codes[lo:hi] == NOT_REFUSED for pos, codes in refused.items()}
        if not any(u.any() for u in uses.values()):  # every T refuses every round (no scores, T > 0 only)
            for c, sub in enumerate(configs):
                if fold is not None:
                    continue  # no usable round to fold
                for t in temperatures:
                    at = _refused_at(hi - lo, sub.gamma)
                    chunks.setdefault((c, t), []).append(at)
            continue
        rec = _Recorded(b, r, expanded, shape, lo, hi, rules[lo:hi])
        rows = _rows(b, r, shape, lo, hi)
        for c, sub in enumerate(configs):
            cap = min(sub.gamma, steps) if steps < recorded.gamma else sub.gamma
            mine = is_own_tree(sub, recorded, threshold)
            st = None if mine else sub_trees(rec, rows, b.root_tokens[lo:hi], sub, cap, float(threshold))
            for t in temperatures:
                use = uses[t > 0.0]
                if not use.any():  # a refused round's outcome is never read (every reader takes the usable rounds)
                    if fold is None:
                        chunks.setdefault((c, t), []).append(_refused_at(hi - lo, sub.gamma))
                    continue
                at = (
                    _replayed_at(own[t], r, lo, hi, sub.gamma) if st is None else at_temperature(st, use, t, vocab_size)
                )
                if fold is not None:
                    fold(c, t, at.take(np.flatnonzero(use)), ords[lo:hi][use])
                else:
                    chunks.setdefault((c, t), []).append(at)
    return {key: AtT.concat(v) for key, v in chunks.items()}


def _replayed_at(bs: BatchSampling, res: BatchResult, lo: int, hi: int, gamma: int) -> AtT:
    """The recorded replay's own sampling at T of rounds lo..hi (a dynamic recording's own config,
    analysis.compare.configs.is_own_tree), as at_temperature's AtT; a refused round's values are never read."""
    c = hi - lo
    ge = [np.zeros((c, gamma)), np.zeros((c, gamma))]
    for g, full in zip(ge, (bs.length_ge_lo[lo:hi], bs.length_ge_hi[lo:hi])):
        w = min(gamma, full.shape[1] - 1)
        g[:, :w] = full[:, 1 : 1 + w]  # P(L >= d), d = 1.. (column 0 is d = 0)
    z = np.zeros(c, dtype=np.int64)
    return AtT(
        bs.usable[lo:hi].copy(),
        bs.expected_lo[lo:hi],
        bs.expected_hi[lo:hi],
        ge[0],
        ge[1],
        bs.exact[lo:hi],
        res.num_steps[lo:hi].astype(np.int64),
        np.full(c, WHY_NONE, dtype=np.int8),
        z,
        z - 1,
        bs.needs_vocab,
    )


def _refused_at(c: int, gamma: int) -> AtT:
    """at_temperature's AtT on C rounds none of which is used (each refused at this T), not computed:
    undetermined, as at_temperature leaves the rounds it does not read (why 0: never read)."""
    f, z = np.full(c, np.nan), np.zeros(c, dtype=np.int64)
    no = np.zeros(c, dtype=bool)
    return AtT(no, f, f, np.zeros((c, gamma)), np.zeros((c, gamma)), no, z, np.zeros(c, np.int8), z, z - 1, False)


def join_sampling(
    parts: Sequence[SamplingPart],
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    per_round: bool = True,
) -> SamplingComparison:
    """compare_sampling's SamplingComparison from the parts of one run, rounds in run order.
    ``per_round`` False leaves the per-round frame empty (the report reads only the table)."""
    order = np.argsort(np.concatenate([p.ordinals for p in parts] or [np.zeros(0, np.int64)]), kind="stable")
    names = np.concatenate([p.names for p in parts] or [np.zeros(0, dtype=object)])[order]
    refused = {
        pos: np.concatenate([p.refused[pos] for p in parts])[order] for pos in {t > 0.0 for t in temperatures} if parts
    }
    why = {pos: np.concatenate([p.why[pos] for p in parts])[order] for pos in {t > 0.0 for t in temperatures} if parts}
    skipped = []
    for t in temperatures:
        codes = refused[t > 0.0] if parts else np.zeros(0, np.int8)
        skipped.extend((str(names[i]), t, str(why[t > 0.0][i])) for i in np.flatnonzero(codes != NOT_REFUSED))
    rows, frames, needs_vocab = [], [], False
    for c, cfg in enumerate(configs):
        for t in temperatures:
            use = refused[t > 0.0] == NOT_REFUSED if parts else np.zeros(0, bool)
            at = AtT.concat([p.outcomes[(c, t)] for p in parts]).take(order[use]) if parts else None
            if at is None:
                rows.append(summarize_sampling_arrays(cfg, recorded, t, *_empty(cfg.gamma)))
                continue
            needs_vocab |= at.needs_vocab
            rows.append(
                summarize_sampling_arrays(
                    cfg, recorded, t, at.determined, at.lo, at.hi, at.ge_lo, at.ge_hi, at.exact, at.steps_hi
                )
            )
            if per_round and at.determined.shape[0]:
                frames.append(_frame(cfg, t, names[use], at))
    table = pd.DataFrame(rows, columns=SAMPLING_COLUMNS)
    if frames:
        rounds = pd.DataFrame({k: np.concatenate([f[k] for f in frames]) for k in SAMPLING_PER_ROUND_COLUMNS})
    else:
        rounds = pd.DataFrame([], columns=SAMPLING_PER_ROUND_COLUMNS)
    return SamplingComparison(table, rounds, skipped, needs_vocab)


def _empty(gamma: int) -> tuple:
    f, b, i = np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    return b, f, f, np.zeros((0, gamma)), np.zeros((0, gamma)), b, i


def _frame(cfg: TreeConfig, t: float, names: np.ndarray, at: AtT) -> dict[str, np.ndarray]:
    n = names.shape[0]
    codes = np.stack([at.why.astype(np.int64), at.depth, at.rank], axis=1)
    uniq, inverse = unique_rows(codes)
    texts = np.asarray(
        [reason_text(int(w), int(d), int(r), REACHED) if w else "" for w, d, r in uniq.tolist()] or [""], dtype=object
    )
    return {
        "config": np.full(n, cfg.short(), dtype=object),
        "temperature": np.full(n, float(t)),
        "round": names.astype(object),
        "determined": at.determined,
        "expected_accepted_length_lo": at.lo,
        "expected_accepted_length_hi": at.hi,
        "exact": at.exact,
        "reason": texts[inverse],
    }


def compare_sampling_run(
    run: LabelledRun,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None = None,
    gamma_threshold: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    per_round: bool = True,
) -> SamplingComparison:
    """compare_sampling for a loaded run: from the batch arrays when the run was loaded by the batch
    path (analysis.tables.runs.load_run), round by round by the reference otherwise. ``progress(rounds
    done, rounds)`` (the reference's: configs done, configs).

    At a temperature whose node_logprobs the manifest lists, a dump directory is compared round by
    round (the reference reads each round's node_logprobs: exact, analysis.compare.sampling.recorded_edges);
    the batch arrays of the comparison do not read them. A packed run carries them too (its rounds
    read back with their node_logprobs), so it is compared the same way."""
    nodes = run.replay.manifest.node_logprob_temperatures
    if not isinstance(run.replay, BatchReplay):
        return compare_sampling(
            list(run.results), run.config, configs, temperatures, vocab_size, gamma_threshold, progress, nodes
        )
    exact_at = [t for t in temperatures if recorded_column(t, nodes) is not None]
    if exact_at:
        rest = [t for t in temperatures if t not in exact_at]
        tick = None if rest else progress  # the reference's progress counts configs, not rounds
        own = compare_sampling(
            list(run.results), run.config, configs, exact_at, vocab_size, gamma_threshold, tick, nodes
        )
        if not rest:
            return own
        top_k = _batch_sampling_run(run, configs, rest, vocab_size, gamma_threshold, progress, per_round)
        return merge_temperatures(temperatures, [(exact_at, own), (rest, top_k)])
    return _batch_sampling_run(run, configs, temperatures, vocab_size, gamma_threshold, progress, per_round)


def merge_temperatures(
    temperatures: Sequence[float], parts: Sequence[tuple[Sequence[float], SamplingComparison]]
) -> SamplingComparison:
    """One SamplingComparison of ``temperatures`` from comparisons of disjoint subsets of them, in
    compare_sampling's order: per config, per T (a table row, then that row's ``rounds`` per-round rows)."""
    order = {t: i for i, t in enumerate(temperatures)}
    rows: list[tuple[int, int, pd.DataFrame, pd.DataFrame]] = []
    for temps, done in parts:
        start = 0
        for i in range(len(done.table)):
            c, t = divmod(i, len(temps))
            n = int(done.table["rounds"].iloc[i]) if len(done.per_round) else 0
            block = done.per_round.iloc[start : start + n]
            start += n
            rows.append((c, order[temps[t]], done.table.iloc[[i]], block))
    rows.sort(key=lambda r: (r[0], r[1]))
    table = pd.concat([r[2] for r in rows], ignore_index=True)
    per_round = pd.concat([r[3] for r in rows], ignore_index=True)
    skipped = sorted((s for _, d in parts for s in d.skipped), key=lambda s: order[s[1]])
    return SamplingComparison(table, per_round, skipped, any(d.needs_vocab for _, d in parts))


def _batch_sampling_run(run, configs, temperatures, vocab_size, gamma_threshold, progress, per_round):
    """compare_sampling_run on the batch arrays (the top-K rows); without ``per_round``, block by block
    (_curve_sums): the table only."""
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)
    if not per_round:
        return _curve_sums(run, configs, temperatures, vocab_size, threshold, progress)

    def parts_of(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> list[SamplingPart]:
        return sampling_parts(batch, res, run.config, configs, temperatures, vocab_size, threshold)

    parts = per_batch_parts(run, parts_of, progress)
    return join_sampling(parts, run.config, configs, temperatures, per_round)


def _curve_sums(run, configs, temperatures, vocab_size, threshold, progress) -> SamplingComparison:
    """join_sampling's table without its per-round arrays: the run read again block by block (as
    analysis.tables.stream reads it), every config at every T on a block, the block's rounds folded
    into _Sums as it comes (the sums are exactly rounded: order-independent), then dropped. What
    stays per round is the refused rounds' ordinal, name and code (the skipped list)."""
    opened = open_run(run.replay.directory, run.replay.options)
    sums = _Sums(configs, temperatures)
    done, total = 0, len(run.results)

    def parts_of(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> list[SamplingPart]:
        return sampling_parts(batch, res, run.config, configs, temperatures, vocab_size, threshold, fold=sums.fold)

    for _, batches in iter_run_chunks(opened, None, per_batch=parts_of, in_run_order=True):
        parts = [p for _, _, ps in batches for p in ps or ()]
        del batches
        sums.add(parts)
        done += sum(p.ordinals.shape[0] for p in parts)
        del parts
        if progress:
            progress(done, total)
    if done != total:
        raise RuntimeError(
            f"compare replayed {done} rounds of {run.label}, the run has {total}: a bug in the batch path"
        )
    return sums.comparison(run.config)


class _Sums:
    """Per (config, T) what summarize_sampling_sums reads, from rounds added in any order: counts and
    the determined rounds' bounds' exactly rounded sums (ExactSum); the refused rounds, put in run
    order at the end (the skipped list)."""

    def __init__(self, configs: Sequence[TreeConfig], temperatures: Sequence[float]) -> None:
        self.configs, self.temperatures = list(configs), list(temperatures)
        self.acc = {(c, t): _Acc(configs[c].gamma) for c in range(len(configs)) for t in temperatures}
        # per T > 0 or not: the refused rounds' (ordinals, names, reasons) of each add, kept as arrays
        self.refused: dict[bool, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.needs_vocab = False
        self.lock = threading.Lock()

    def add(self, parts: Sequence[SamplingPart]) -> None:
        """The refused rounds of ``parts`` (their outcomes were folded as they were made)."""
        if not parts:
            return
        ords = np.concatenate([p.ordinals for p in parts])
        order = np.argsort(ords, kind="stable")
        names = np.concatenate([p.names for p in parts])[order]
        refused = {pos: np.concatenate([p.refused[pos] for p in parts])[order] for pos in parts[0].refused}
        for pos, codes in refused.items():
            bad = np.flatnonzero(codes != NOT_REFUSED)
            why = np.concatenate([p.why[pos] for p in parts])[order]
            self.refused.setdefault(pos, []).append((ords[order[bad]], names[bad], why[bad]))

    def fold(self, c: int, t: float, at: AtT, ordinals: np.ndarray) -> None:
        """Config ``c`` at ``t`` on some usable rounds (sampling_parts' fold; from the replay's threads)."""
        with self.lock:
            self.needs_vocab |= at.needs_vocab
            self.acc[(c, t)].add(at, ordinals)

    def comparison(self, recorded: TreeConfig) -> SamplingComparison:
        by_pos = {}
        for pos, adds in self.refused.items():
            ords = np.concatenate([a[0] for a in adds])
            order = np.argsort(ords, kind="stable")
            by_pos[pos] = (np.concatenate([a[1] for a in adds])[order], np.concatenate([a[2] for a in adds])[order])
        skipped = SkippedRounds(self.temperatures, by_pos)
        rows = [self.acc[(c, t)].row(cfg, recorded, t) for c, cfg in enumerate(self.configs) for t in self.temperatures]
        table = pd.DataFrame(rows, columns=SAMPLING_COLUMNS)
        undetermined: dict[str, Counter] = {}
        for c, cfg in enumerate(self.configs):  # the per-round frame's order: config, T, then run order
            for t in self.temperatures:
                texts = undetermined.setdefault(cfg.short(), Counter())
                for text, k in self.acc[(c, t)].reasons():
                    texts[text] += k
        return SamplingComparison(
            table, pd.DataFrame([], columns=SAMPLING_PER_ROUND_COLUMNS), skipped, self.needs_vocab, undetermined
        )


class SkippedRounds(Sequence):
    """SamplingComparison.skipped, the (round, T, reason) of every refused round at every T (T by T,
    rounds in run order), made as read from the refused rounds' arrays: a run without scores is
    refused at every T > 0, 15 tuples a round on the default grid (1.5 GB at 10^6 rounds as a list)."""

    def __init__(self, temperatures: Sequence[float], by_pos: dict[bool, tuple[np.ndarray, np.ndarray]]):
        self.temperatures, self.by_pos = list(temperatures), by_pos  # T > 0 or not -> (names, reasons)
        self.sizes = [len(by_pos[t > 0.0][0]) if (t > 0.0) in by_pos else 0 for t in self.temperatures]

    def __len__(self) -> int:
        return sum(self.sizes)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = i + len(self) if i < 0 else i
        for t, size in zip(self.temperatures, self.sizes):
            if 0 <= i < size:
                names, why = self.by_pos[t > 0.0]
                return (str(names[i]), t, str(why[i]))
            i -= size
        raise IndexError("skipped round index out of range")

    def __iter__(self):
        for t, size in zip(self.temperatures, self.sizes):
            if size:
                names, why = self.by_pos[t > 0.0]
                for name, text in zip(names.tolist(), why.tolist()):
                    yield (str(name), t, str(text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class _Acc:
    """One (config, T)'s sums (_Sums): counts, and one ExactSum of [lo, hi, P(L >= d) lo.., hi..]."""

    def __init__(self, gamma: int) -> None:
        self.gamma = gamma
        self.n = self.nd = self.exact = self.undet_hi = 0
        self.sums = ExactSum(2 + 2 * gamma)
        self.why: dict[tuple[int, int, int], list[int]] = {}  # (why, depth, rank) -> [rounds, first ordinal]

    def add(self, at: AtT, ordinals: np.ndarray) -> None:
        det = at.determined
        self._count_reasons(at, ordinals)
        self.n += int(det.shape[0])
        self.nd += int(det.sum())
        self.exact += int(at.exact[det].sum())
        self.undet_hi += int(at.steps_hi[~det].sum())
        g = self.gamma
        self.sums.add(
            np.concatenate([at.lo[det, None], at.hi[det, None], at.ge_lo[det, :g], at.ge_hi[det, :g]], axis=1)
        )

    def _count_reasons(self, at: AtT, ordinals: np.ndarray) -> None:
        """The undetermined rounds' (why, depth, rank), counted, with the first round of each: folds come
        in any order, and a tie between two reasons goes to the one met first in run order (the per-round
        frame's Counter keeps that order)."""
        und = np.flatnonzero(~at.determined)
        if not und.shape[0]:
            return
        codes, which = unique_rows(np.stack([at.why[und].astype(np.int64), at.depth[und], at.rank[und]], axis=1))
        counts = np.bincount(which, minlength=codes.shape[0])
        first = np.full(codes.shape[0], np.iinfo(np.int64).max)
        np.minimum.at(first, which, ordinals[und])
        for code, k, f in zip(map(tuple, codes.tolist()), counts.tolist(), first.tolist()):
            seen = self.why.setdefault(code, [0, f])
            seen[0] += k
            seen[1] = min(seen[1], f)

    def reasons(self) -> list[tuple[str, int]]:
        """(reason text, rounds) of the undetermined rounds, in the order each was first met in the run."""
        out = sorted(self.why.items(), key=lambda item: item[1][1])
        return [(reason_text(w, d, r, REACHED) if w else "", k) for (w, d, r), (k, _) in out]

    def row(self, cfg: TreeConfig, recorded: TreeConfig, t: float) -> dict:
        s = self.sums.sums()
        ge_sums = s[2:].reshape(2, cfg.gamma)
        return summarize_sampling_sums(
            cfg, recorded, t, self.n, self.nd, self.exact, s[0], s[1], ge_sums, float(self.undet_hi)
        )
