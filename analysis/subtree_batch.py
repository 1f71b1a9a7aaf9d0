"""analysis.subtree's exact replay of a contained config, for a whole RoundBatch at once.

The same decisions as ``analysis.subtree.replay_subconfig`` (the readable reference; the property
test tests/test_subtree_batch.py compares the two on random dumps), reduced to what ``recommend``
needs: per round, decided or not, and the lower / upper bound of the accepted length (equal when
decided). ``gammaThreshold`` is off and recorded early stops are inherited, as recommend does.

Arrays have the round axis last. A level of the simulated tree is a padded ``[L, C]`` set of slots
(``valid`` marks real nodes); children of level i's non-OUT nodes sit at ``k * W + r`` of level
i+1, k the parent's position among them and W the widest topKSpec entry of step i. Selection is
recomputed with a sort where every key of the level is known and ordered (the common case) and
with the reference's pairwise IN / OUT / MAYBE rule elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replay.batch import SEL_PARENTS, BatchResult, RoundBatch, TreeShape
from replay.config import TreeConfig
from replay.vocab import PAD_TOKEN

from .subtree import _FALLBACK_SCALE

OUT, IN, MAYBE = 0, 1, 2
RULE_PATH, RULE_RECORDED, RULE_FALLBACK = 0, 1, 2  # analysis.subtree.selection_rule, as codes
CHUNK_ROUNDS = 16384


@dataclass(frozen=True, eq=False)
class SubOutcomes:
    """Per round: whether the config's accepted length is decided, and its bounds."""

    decided: np.ndarray  # [R] bool
    lower: np.ndarray  # [R] int64
    upper: np.ndarray  # [R] int64


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


def selection_rules(batch: RoundBatch, res: BatchResult, shape: TreeShape) -> np.ndarray:
    """[R] int8 rule per round, as analysis.subtree.selection_rule decides it."""
    r = len(batch)
    path = np.full(r, all(st.logp is not None for st in batch.steps))
    if path.any():
        for i, st in enumerate(batch.steps):
            m = shape.maps[i]
            path &= ~np.isnan(st.logp[m.slot_parent, m.slot_rank]).any(axis=0)  # a NaN score: no path key
    parents = (res.selection[: shape.num_steps] == SEL_PARENTS).any(axis=0)
    return np.where(path, RULE_PATH, np.where(parents, RULE_RECORDED, RULE_FALLBACK)).astype(np.int8)


def replay_contained(
    batch: RoundBatch, res: BatchResult, expanded: list[np.ndarray], shape: TreeShape, sub: TreeConfig, recorded_gamma: int
) -> SubOutcomes:
    """``sub`` replayed on every round of ``batch`` (all of recorded ``shape``; ``expanded``: per step
    [h_i, R] the recorded selection, replay.batch.expanded_nodes). Rounds with ``res.error != 0``
    get meaningless values."""
    r = len(batch)
    out = SubOutcomes(np.zeros(r, dtype=bool), np.zeros(r, dtype=np.int64), np.zeros(r, dtype=np.int64))
    rules = selection_rules(batch, res, shape)
    steps = shape.num_steps
    cap = min(sub.gamma, steps) if steps < recorded_gamma else sub.gamma
    for lo in range(0, r, CHUNK_ROUNDS):
        hi = min(r, lo + CHUNK_ROUNDS)
        rec = _Recorded(batch, res, expanded, shape, lo, hi)
        d, lower, upper = _simulate(rec, sub, cap, rules[lo:hi])
        out.decided[lo:hi], out.lower[lo:hi], out.upper[lo:hi] = d, lower, upper
    return out


class _Recorded:
    """Lookups into a chunk of recorded rounds of one shape."""

    def __init__(self, batch: RoundBatch, res: BatchResult, expanded: list[np.ndarray], shape: TreeShape, lo: int, hi: int):
        c = hi - lo
        self.c = c
        self.col = np.arange(c)
        self.shape = shape
        self.steps = shape.num_steps
        self.ids = [st.ids[:, :, lo:hi] for st in batch.steps]  # [rows, cols, C]
        self.logp = [None if st.logp is None else st.logp[:, :, lo:hi] for st in batch.steps]
        self.chosen = [e[:, lo:hi] for e in expanded]  # [h_i, C] level-local recorded nodes
        # position among step i's expanded nodes of each recorded level-i node, -1 when not expanded
        self.pos = []
        for i in range(self.steps):
            p = np.full((shape.level_sizes[i], c), -1, dtype=np.int64)
            for j in range(shape.heads[i]):
                np.put_along_axis(p, self.chosen[i][j : j + 1], j, axis=0)
            self.pos.append(p)
        val0 = batch.validate.ids[:, 0, lo:hi].astype(np.int64)  # [vrows, C]
        is_all = res.layout[lo:hi].astype(bool)
        # target top-1 at each recorded expanded node (step i, position j): [h_i, C]
        self.top1 = []
        for i in range(self.steps):
            node_row = shape.starts[i] + self.chosen[i]
            par_row = shape.head_offsets[i] + np.arange(shape.heads[i])[:, None]
            row = np.where(is_all, node_row, par_row)
            self.top1.append(np.take_along_axis(val0, np.clip(row, 0, val0.shape[0] - 1), axis=0))
        self.width = [np.asarray(w, dtype=np.int64) for w in shape.widths]  # recorded kept width per position
        self.first_child = [m.child_offset for m in shape.maps]

    def take(self, arrays: list[np.ndarray], depth: int, row: np.ndarray, r: int | np.ndarray, fill) -> np.ndarray:
        """arrays[depth][row, r, c] where row >= 0 and r < cols, else ``fill``; row/r: [K, C]."""
        mat = arrays[depth]
        rows, cols = mat.shape[0], mat.shape[1]
        r = np.broadcast_to(r, row.shape)
        ok = (row >= 0) & (r < cols)
        flat = mat.reshape(rows * cols, self.c)
        idx = np.clip(row, 0, rows - 1) * cols + np.clip(r, 0, cols - 1)
        got = np.take_along_axis(flat, idx, axis=0)
        return np.where(ok, got, fill)


def _root(rec: _Recorded) -> _Level:
    one = lambda v, dt: np.full((1, rec.c), v, dtype=dt)  # noqa: E731
    lvl = _Level(
        one(True, bool), one(0.0, np.float64), one(0.0, np.float64), one(True, bool), one(True, bool), one(True, bool),
        one(0, np.int64), np.zeros((1, 1), np.int64), one(0, np.int64), one(0, np.int64), one(PAD_TOKEN, np.int64),
    )
    lvl.status, lvl.slot_lo, lvl.slot_hi = one(IN, np.int8), one(0, np.int64), one(0, np.int64)
    return lvl


def _children(rec: _Recorded, lvl: _Level, depth: int, widths: tuple[int, ...], rules: np.ndarray) -> tuple[_Level, np.ndarray, int]:
    """Level depth+1 from the selected level ``depth``; also each node's position k among the
    non-OUT nodes ([L, C], -1 when OUT) and W."""
    c = rec.c
    alive = lvl.valid & (lvl.status != OUT)
    k_max = max(1, int(alive.sum(axis=0).max()))
    order = np.argsort(~alive, axis=0, kind="stable")[:k_max]  # the non-OUT nodes first: [K, C]
    kpos = np.full(lvl.valid.shape, -1, dtype=np.int64)
    np.put_along_axis(kpos, order, np.arange(k_max)[:, None].repeat(c, axis=1), axis=0)
    kpos = np.where(alive, kpos, -1)
    g = lambda a: np.take_along_axis(a, order, axis=0)  # noqa: E731  parent field per position k
    p_alive, p_status, p_sure, p_exact = g(alive), g(lvl.status), g(lvl.sure), g(lvl.exact)
    p_lo, p_hi, p_rec, p_row = g(lvl.lo), g(lvl.hi), g(lvl.rec), g(lvl.row)
    s_lo, s_hi = np.maximum(g(lvl.slot_lo), 0), np.maximum(g(lvl.slot_hi), 0)
    h = len(widths)
    wl = np.array([[min(widths[a : b + 1]) if b >= a else 0 for b in range(h)] for a in range(h)], dtype=np.int64)
    wh = np.array([[max(widths[a : b + 1]) if b >= a else 0 for b in range(h)] for a in range(h)], dtype=np.int64)
    s_lo_c, s_hi_c = np.minimum(s_lo, h - 1), np.minimum(s_hi, h - 1)
    w_lo, w_hi = wl[s_lo_c, s_hi_c], wh[s_lo_c, s_hi_c]  # [K, C]
    big_w = max(widths)
    rk = np.arange(big_w)[None, :, None]  # [1, W, 1]
    ex = lambda a: np.broadcast_to(a[:, None, :], (k_max, big_w, c)).reshape(k_max * big_w, c)  # noqa: E731
    r2 = np.broadcast_to(rk, (k_max, big_w, c)).reshape(k_max * big_w, c)
    valid = ex(p_alive) & (r2 < ex(w_hi))
    sure = ex((p_status == IN) & p_sure) & (r2 < ex(w_lo))
    ordered = ex(s_lo == s_hi) & valid
    oslot = ex(s_lo)
    # the recorded node at (parent, rank): parent recorded and expanded, rank within its kept width
    prow = ex(p_row)
    has_row = prow >= 0
    if depth < rec.steps:
        kept = rec.width[depth][np.clip(prow, 0, rec.width[depth].shape[0] - 1)]
        first = rec.first_child[depth][np.clip(prow, 0, rec.first_child[depth].shape[0] - 1)]
        child_rec = np.where(has_row & (r2 < kept), first + r2, -1)
        token = rec.take(rec.ids, depth, prow, r2, PAD_TOKEN).astype(np.int64)
        lp = rec.take(rec.logp, depth, prow, r2, np.nan).astype(np.float64) if rec.logp[depth] is not None else np.full(r2.shape, np.nan)
    else:
        child_rec = np.full(r2.shape, -1, dtype=np.int64)
        token = np.full(r2.shape, PAD_TOKEN, dtype=np.int64)
        lp = np.full(r2.shape, np.nan)
    nxt = depth + 1
    if nxt < rec.steps:
        child_row = np.where(child_rec >= 0, np.take_along_axis(rec.pos[nxt], np.clip(child_rec, 0, rec.pos[nxt].shape[0] - 1), axis=0), -1)
    else:
        child_row = np.full(r2.shape, -1, dtype=np.int64)
    # selection keys, by the round's rule (analysis.subtree._child)
    plo, phi, pexact = ex(p_lo), ex(p_hi), ex(p_exact)
    lp_ok = (token != PAD_TOKEN) & np.isfinite(lp)
    path_exact = lp_ok & pexact
    path_lo = np.where(path_exact, plo + np.where(lp_ok, lp, 0.0), -np.inf)
    path_hi = np.where(path_exact, path_lo, phi)
    fb_lo = np.where(ordered, -(r2 * _FALLBACK_SCALE + oslot).astype(np.float64), -np.inf)
    fb_hi = np.where(ordered, fb_lo, np.inf)
    heads_next = rec.shape.heads[nxt] if nxt < rec.steps else 0
    ro_exact = child_row >= 0
    ro_lo = np.where(ro_exact, -child_row.astype(np.float64), -np.inf)
    ro_hi = np.where(ro_exact, ro_lo, np.where((child_rec >= 0) & (nxt < rec.steps), -float(heads_next), np.inf))
    rule = rules[None, :]
    lo = np.select([rule == RULE_PATH, rule == RULE_RECORDED], [path_lo, ro_lo], fb_lo)
    hi = np.select([rule == RULE_PATH, rule == RULE_RECORDED], [path_hi, ro_hi], fb_hi)
    exact = np.select([rule == RULE_PATH, rule == RULE_RECORDED], [path_exact, ro_exact], ordered)
    child = _Level(valid, lo, hi, exact & valid, sure & valid, ordered, oslot, np.tile(np.arange(big_w), k_max)[:, None],
                   child_rec, child_row, token)
    return child, kpos, big_w


def _select(lvl: _Level, heads: int) -> None:
    """IN / OUT / MAYBE and slot ranges of a level choosing its top ``heads`` (analysis.subtree._select)."""
    L, c = lvl.valid.shape
    v = lvl.valid
    fast = (~v | (lvl.exact & lvl.sure & lvl.ordered)).all(axis=0)  # every key known and ordered
    status = np.zeros((L, c), dtype=np.int8)
    slot_lo = np.full((L, c), -1, dtype=np.int64)
    slot_hi = np.full((L, c), -1, dtype=np.int64)
    cols = np.flatnonzero(fast)
    if cols.shape[0]:
        rank = np.broadcast_to(lvl.rank, (L, c))[:, cols]
        key_lo = np.where(v[:, cols], -lvl.lo[:, cols], np.inf)
        order = np.lexsort((rank, lvl.oslot[:, cols], key_lo, ~v[:, cols]), axis=0)
        pos = np.empty_like(order)
        np.put_along_axis(pos, order, np.arange(L)[:, None].repeat(cols.shape[0], axis=1), axis=0)
        chosen = v[:, cols] & (pos < heads)
        status[:, cols] = np.where(chosen, IN, OUT)
        slot_lo[:, cols] = np.where(chosen, pos, -1)
        slot_hi[:, cols] = slot_lo[:, cols]
    cols = np.flatnonzero(~fast)
    if cols.shape[0]:
        s = lambda a: a[:, cols] if a.shape[1] == c else np.broadcast_to(a, (a.shape[0], c))[:, cols]  # noqa: E731
        vv, lo, hi, ex, sure, od, os_, rk = s(v), s(lvl.lo), s(lvl.hi), s(lvl.exact), s(lvl.sure), s(lvl.ordered), s(lvl.oslot), s(lvl.rank)
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


def _simulate(rec: _Recorded, sub: TreeConfig, cap: int, rules: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build the simulated levels 0..cap and walk greedy acceptance (analysis.subtree._walk)."""
    levels = [_root(rec)]
    kpos, widths = [], []
    for i in range(cap):
        if i:
            _select(levels[i], sub.top_head[i])
        child, kp, big_w = _children(rec, levels[i], i, sub.top_k_spec[i], rules)
        levels.append(child)
        kpos.append(kp)
        widths.append(big_w)
    c = rec.c
    col = rec.col
    decided = np.zeros(c, dtype=bool)
    lower = np.zeros(c, dtype=np.int64)
    upper = np.zeros(c, dtype=np.int64)
    alive = np.ones(c, dtype=bool)
    cur = np.zeros(c, dtype=np.int64)

    def finish(mask: np.ndarray, d: int, ok: bool) -> None:
        nonlocal alive
        mask = mask & alive
        decided[mask] = ok
        lower[mask] = d
        upper[mask] = d if ok else cap
        alive = alive & ~mask

    for d in range(cap + 1):
        if not alive.any():
            break
        lvl = levels[d]
        at = lambda a: a[cur, col] if a.shape[1] == c else a[cur, 0]  # noqa: E731
        if d == cap:
            finish(alive, d, True)
            break
        status = at(lvl.status) if d else np.full(c, IN, dtype=np.int8)
        finish(status == OUT, d, True)
        finish(status == MAYBE, d, False)
        row = at(lvl.row)
        finish(row < 0, d, False)
        h = rec.shape.heads[d] if d < rec.steps else 1
        t = rec.top1[d][np.clip(row, 0, h - 1), col] if d < rec.steps else np.full(c, PAD_TOKEN)
        finish(t == PAD_TOKEN, d, True)
        spec = sub.top_k_spec[d]
        s_lo, s_hi = np.clip(at(lvl.slot_lo), 0, len(spec) - 1), np.clip(at(lvl.slot_hi), 0, len(spec) - 1)
        wl = np.array([[min(spec[a : b + 1]) if b >= a else 0 for b in range(len(spec))] for a in range(len(spec))])
        wh = np.array([[max(spec[a : b + 1]) if b >= a else 0 for b in range(len(spec))] for a in range(len(spec))])
        w_lo, w_hi = wl[s_lo, s_hi], wh[s_lo, s_hi]
        k = np.maximum(kpos[d][cur, col], 0)
        kids = levels[d + 1]
        big_w = widths[d]
        idx = k[None, :] * big_w + np.arange(big_w)[:, None]  # [W, C]
        tok = np.take_along_axis(kids.token, np.clip(idx, 0, kids.token.shape[0] - 1), axis=0)
        within = np.arange(big_w)[:, None] < w_hi[None, :]
        hit = within & ((tok == PAD_TOKEN) | (tok == t[None, :]))
        any_hit = hit.any(axis=0)
        first = np.argmax(hit, axis=0)
        finish(~any_hit, d, True)  # no child matches: the walk stops here
        tok_first = tok[first, col]
        finish(tok_first == PAD_TOKEN, d, False)  # a candidate beyond the recorded columns
        finish(first >= w_lo, d, False)  # the kept width depends on an unknown slot
        cur = np.where(alive, k * big_w + first, 0)
    return decided, lower, upper
