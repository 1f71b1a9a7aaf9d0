"""replay.core.loops and replay.core.level_loops: the compiled per-cell loops, against plain oracles.

The rule's own tests (test_sampling*.py) check its results against the scalar reference; these
check each loop alone, so that a failure names the loop: the exponential against the C library's
(math.exp, one value at a time), the sums and lookups against numpy written the obvious way.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import replay.testing.subtree_walk
from replay.core.level_loops import (
    child_level_loop,
    child_slots_loop,
    level_doubts_loop,
    level_reach_loop,
    open_nodes_loop,
)
from replay.core.loops import (
    _exp as cell_exp,
    _loop,
    child_cells_loop,
    depth_bounds_loop,
    edge_probs_loop,
    exact_sum_loop,
    gather_rows_loop,
    node_rows_loop,
    row_sums_loop,
    scaled_sums_loop,
)
from replay.core.vocab import PAD_TOKEN


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between non-negative float64 values of the same sign."""
    return np.abs(a.view(np.int64) - b.view(np.int64))


@_loop
def exp_loop(x: np.ndarray, out: np.ndarray) -> None:  # x, out [n] float64
    """out = exp(x), element by element, by the loops' own exponential (each loop inlines it)."""
    for i in range(x.shape[0]):
        out[i] = cell_exp(x[i])


def _exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    exp_loop(np.ascontiguousarray(x, dtype=np.float64), out)
    return out


def test_exp_is_within_one_ulp_of_the_c_library_everywhere():
    # math.exp is glibc's, correctly rounded but in rare cases: 1 ulp is what the Taylor series to
    # r^13 gives (to r^12 it is 2, a bound the rule's 1e-12 agreement with the reference would hide)
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-746.0, 710.0, 40_000),  # the whole range, overflow and underflow included
            rng.uniform(-40.0, 0.0, 40_000),  # log-probs, and log-probs times 1/T
            rng.uniform(-1e-3, 1e-3, 5_000),  # around 0: exp(r) alone
            rng.uniform(-745.2, -700.0, 5_000),  # subnormal results: rounded once
            np.arange(-1076, 1025) * math.log(2.0),  # the k ln 2 boundaries of the range reduction
        ]
    )
    want = np.array([_libm_exp(v) for v in x])
    assert _ulps(_exp(x), want).max() <= 1


def _libm_exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def test_exp_edges_are_numpys():
    x = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, -1e30, 1e30, -745.2, -745.13, 709.78, 709.79, 1e-300, -5e-324])
    with np.errstate(over="ignore"):
        want = np.exp(x)
    got = _exp(x)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], want[1:])  # 0, inf, 1, subnormal and the last finite value, as numpy


def test_a_value_has_the_same_bits_in_a_vector_lane_and_alone():
    # The batch runs the loops on thousands of rounds (vector lanes), the round path on one (the
    # scalar remainder): the rule's outputs are equal bit for bit only if each value is.
    rng = np.random.default_rng(1)
    x = rng.uniform(-60.0, 0.0, 1_003)
    together = _exp(x)
    alone = np.array([_exp(x[i : i + 1])[0] for i in range(x.shape[0])])
    np.testing.assert_array_equal(together, alone)
    lp = rng.uniform(-20.0, 0.0, (2, 7, 301)).astype(np.float32)
    sums = _row_sums(lp, None)
    for j in (0, 5, 300):
        one = _row_sums(np.ascontiguousarray(lp[:, :, j : j + 1]), None)
        for a, b in zip(sums, one):
            np.testing.assert_array_equal(a[:, j : j + 1], b)


def _row_sums(lp: np.ndarray, pad: np.ndarray | None) -> tuple[np.ndarray, ...]:
    shape = (lp.shape[0], lp.shape[2])
    lmax, lmin, total, all32 = np.empty(shape), np.empty(shape), np.empty(shape), np.empty(shape, dtype=bool)
    no_pad = np.zeros((0, 0, 0), dtype=bool)
    row_sums_loop(lp, no_pad if pad is None else pad, lmax, lmin, total, all32, lp.dtype != np.float32)
    return lmax, lmin, total, all32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("padded", [False, True])
def test_row_sums_are_numpys(dtype, padded):
    rng = np.random.default_rng(2)
    e, k, c = 3, 6, 500
    lp = np.log(rng.dirichlet(np.ones(12), size=(e, c))[:, :, :k]).transpose(0, 2, 1).astype(dtype)
    lp = np.ascontiguousarray(lp)
    hostile = rng.random(lp.shape)
    lp[hostile < 0.01] = np.nan
    lp[(hostile >= 0.01) & (hostile < 0.03)] = -np.inf
    lp[(hostile >= 0.03) & (hostile < 0.04)] = np.inf
    if dtype == np.float64:
        off = (hostile >= 0.04) & (hostile < 0.06)
        lp[off] += 1e-12  # no longer float32 values
    pad = rng.random(lp.shape) < (0.2 if padded else 0.0)
    lp[pad] = -np.inf  # as row_stats hands PAD cells over
    lmax, lmin, total, all32 = _row_sums(lp, pad if padded else None)

    wide = lp.astype(np.float64)
    np.testing.assert_array_equal(lmax, wide.max(axis=1))
    np.testing.assert_array_equal(lmin, np.where(pad, np.inf, wide).min(axis=1))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(total, np.exp(wide).sum(axis=1), rtol=1e-15 * k, equal_nan=True)
    nan_row = np.isnan(wide).any(axis=1)
    if dtype == np.float64:
        want32 = ((wide.astype(np.float32) == wide) | pad).all(axis=1)
        np.testing.assert_array_equal(all32, want32)
    else:
        np.testing.assert_array_equal(all32, ~nan_row)  # float32 rows are float32 values, but a NaN row
    assert nan_row.any() and (np.isinf(lmax) & (lmax > 0)).any()  # the hostile cells were there


def test_scaled_sums_are_numpys():
    rng = np.random.default_rng(3)
    lp = np.log(rng.dirichlet(np.ones(9), size=(2, 300))[:, :, :5]).transpose(0, 2, 1).astype(np.float32)
    lp = np.ascontiguousarray(lp)
    lp[0, 4, :10] = -np.inf
    lmax = lp.max(axis=1).astype(np.float64)
    for a in (1.0 / 0.3, 1.0, 1.0 / 1.7):
        rec = np.empty(lmax.shape)
        scaled_sums_loop(lp, lmax, a, rec)
        want = np.exp((lp.astype(np.float64) - lmax[:, None, :]) * a).sum(axis=1)
        np.testing.assert_allclose(rec, want, rtol=1e-14)


def test_child_cells_are_each_childs_first_cell_in_its_parents_row():
    rng = np.random.default_rng(4)
    e, k, c = 3, 5, 200
    node_row = np.array([0, 0, 0, 1, 1, 2], dtype=np.int64)
    ids = rng.integers(0, 6, (e, k, c)).astype(np.int32)  # a small alphabet: repeats and misses
    ids[rng.random(ids.shape) < 0.1] = PAD_TOKEN
    lp = rng.uniform(-9.0, 0.0, (e, k, c))
    lp[rng.random(lp.shape) < 0.05] = -np.inf
    lp[rng.random(lp.shape) < 0.03] = np.nan
    lp[rng.random(lp.shape) < 0.03] = 0.5
    tok = rng.integers(0, 6, (node_row.shape[0], c)).astype(np.int32)
    lmax = rng.uniform(-1.0, 0.0, (e, c))
    dead = rng.random((e, c)) < 0.1
    d, v, there = (np.empty(tok.shape) for _ in range(3))
    child_cells_loop(ids, lp, tok, node_row, lmax, dead, d, v, there)
    for u in range(1, tok.shape[0]):
        row = node_row[u]
        for j in range(c):
            hits = np.flatnonzero(ids[row, :, j] == tok[u, j])
            cell = lp[row, hits[0], j] if hits.shape[0] else None
            ok = cell is not None and -1e300 < cell <= 0.0 and not dead[row, j]
            assert there[u, j] == (1.0 if ok else 0.0), (u, j)
            assert v[u, j] == (cell if ok else 0.0)
            assert d[u, j] == ((cell - lmax[row, j]) if ok else 0.0)
    assert not there[0].any()  # the root is no child
    assert there[1:].mean() > 0.3 and (there[1:] == 0).mean() > 0.2


def test_gather_rows_reads_each_rounds_row():
    rng = np.random.default_rng(5)
    m, k, r = 7, 4, 90
    ids = rng.integers(0, 1000, (m, k, r)).astype(np.int64)
    lp = rng.uniform(-5.0, 0.0, (m, k, r)).astype(np.float32)
    lo, c = 13, 50
    rows = rng.integers(0, m, c).astype(np.int64)
    ids_out, lp_out = np.empty((k, c), dtype=ids.dtype), np.empty((k, c), dtype=lp.dtype)
    gather_rows_loop(ids, lp, rows, lo, ids_out, lp_out)
    cols = np.arange(lo, lo + c)
    np.testing.assert_array_equal(ids_out, ids[rows[None, :], np.arange(k)[:, None], cols[None, :]])
    np.testing.assert_array_equal(lp_out, lp[rows[None, :], np.arange(k)[:, None], cols[None, :]])


def test_node_rows_reads_each_nodes_row_and_fills_the_others():
    rng = np.random.default_rng(6)
    m, k, c, n = 9, 5, 40, 7
    ids = rng.integers(0, 1000, (m, k, c)).astype(np.int64)
    lp = rng.uniform(-5.0, 0.0, (m, k, c))
    src = np.where(rng.random(c * n) < 0.4, -1, rng.integers(0, m, c * n)).astype(np.int64)
    ids_out, lp_out = np.empty((c * n, k), dtype=np.int64), np.empty((c * n, k))
    node_rows_loop(ids, lp, src, n, PAD_TOKEN, ids_out, lp_out)
    # the plain way: a fill, then numpy's gather of each node's row at its round's column
    want_ids, want_lp = np.full((c * n, k), PAD_TOKEN, dtype=np.int64), np.full((c * n, k), -np.inf)
    at = np.flatnonzero(src >= 0)
    want_ids[at], want_lp[at] = ids[src[at], :, at // n], lp[src[at], :, at // n]
    np.testing.assert_array_equal(ids_out, want_ids)
    np.testing.assert_array_equal(lp_out, want_lp)
    assert 0 < at.shape[0] < c * n


def test_child_slots_are_the_expanded_nodes_children_by_rank():
    rng = np.random.default_rng(7)
    n_nodes, w, c = 6, 3, 50
    k_max = 4
    kpos = np.where(rng.random((n_nodes, c)) < 0.3, -1, rng.integers(0, k_max, (n_nodes, c)))
    kpos[:, 0] = np.arange(n_nodes)  # a position past the child level: its cells are clipped into range
    expands = rng.random((n_nodes, c)) < 0.7
    valid = rng.random((k_max * w, c)) < 0.8
    token = np.where(rng.random((k_max * w, c)) < 0.3, PAD_TOKEN, rng.integers(0, 100, (k_max * w, c)))
    col = np.arange(c)
    idx = rng.integers(0, 20, (n_nodes, c))
    expands[kpos[:, 0] * w >= k_max * w, 0] = False  # an expanded node's children are in the level
    unknown = np.empty((n_nodes, w, c), dtype=bool)
    indexed, parent = np.zeros(k_max * w * c, dtype=bool), np.full(k_max * w * c, -1, dtype=np.int64)
    child_slots_loop(kpos, expands, valid.reshape(-1), token.reshape(-1), col, idx, PAD_TOKEN, unknown, indexed, parent)
    # the plain way: each node's rank-r child at slot kpos * W + r, cells clipped as np.take's mode="clip"
    slot = np.maximum(kpos, 0)[:, None, :] * w + np.arange(w)[None, :, None]
    cells = slot * c + col
    k_valid, k_tok = np.take(valid, cells, mode="clip"), np.take(token, cells, mode="clip")
    opened = expands[:, None, :] & (kpos >= 0)[:, None, :] & k_valid
    np.testing.assert_array_equal(unknown, opened & (k_tok == PAD_TOKEN))
    want_indexed, want_parent = np.zeros((k_max * w, c), dtype=bool), np.full((k_max * w, c), -1, dtype=np.int64)
    ll, rr, jj = np.nonzero(opened & (k_tok != PAD_TOKEN))
    want_indexed[slot[ll, rr, jj], jj] = True
    want_parent[slot[ll, rr, jj], jj] = idx[ll, jj]
    np.testing.assert_array_equal(indexed.reshape(-1, c), want_indexed)
    np.testing.assert_array_equal(parent.reshape(-1, c), want_parent)
    assert unknown.any() and want_indexed.any() and not want_indexed.all()


def test_level_reach_sums_each_rounds_slots_in_order():
    rng = np.random.default_rng(8)
    n_slots, c, m = 5, 400, 7
    recs = rng.integers(-1, m, (n_slots, c))
    idx = np.where(rng.random((n_slots, c)) < 0.7, rng.integers(0, 30, (n_slots, c)), -1)
    held_in, blind_in = rng.random((c, m)) < 0.8, rng.random((c, m)) < 0.05
    lo_in = rng.random((c, m)) * 10.0 ** rng.integers(-20, 1, (c, m))  # magnitudes whose sum order shows
    hi_in = lo_in + rng.random((c, m))
    sums, blind, all_held = np.empty((2, c)), np.empty(c, dtype=bool), np.empty(c, dtype=bool)
    level_reach_loop(idx, recs, held_in, lo_in, hi_in, blind_in, sums, blind, all_held)
    # the plain way: each slot's node clipped into range, the sub-tree's slots added row after row from 0.0
    node, cols, on = np.clip(recs, 0, m - 1), np.arange(c)[None, :], idx >= 0
    for k, x in enumerate((lo_in, hi_in)):
        want = np.zeros(c)
        for row in np.where(on, x[cols, node], 0.0):
            want = want + row
        np.testing.assert_array_equal(sums[k].view(np.uint64), want.view(np.uint64))  # to the bit
    np.testing.assert_array_equal(blind, (on & (recs >= 0) & blind_in[cols, node]).any(axis=0))
    np.testing.assert_array_equal(all_held, (~on | ((recs >= 0) & held_in[cols, node])).all(axis=0))
    assert blind.any() and not blind.all() and all_held.any() and not all_held.all()


def _level_doubts(indexed, before, rec_node, row, status, sure, first, steps, d, codes, w):
    """level_doubts_loop the numpy way (its outputs in its order, kind and why with W rank rows; kind's
    are child_slots_loop's to write)."""
    count = np.cumsum(indexed, axis=0)
    idx = np.where(indexed, before[None, :] + count - 1, -1)
    n = before + indexed.sum(axis=0)
    g = first + rec_node if first >= 0 else np.full(rec_node.shape, -1)
    recs = np.where(rec_node >= 0, g, -1)
    open_ = indexed & ~((d >= steps[0])[None, :] | (status == codes[0]))
    thr = open_ & (d >= steps[1])[None, :]
    maybe = open_ & ~thr & (status == codes[1])
    unexp = open_ & ~thr & ~maybe & (row < 0)
    expands = open_ & ~thr & ~maybe & ~unexp
    cells = (row.shape[0], 2 + w, row.shape[1])
    kind, why = np.zeros(cells, dtype=bool), np.full(cells, codes[6], dtype=np.int8)
    kind[:, 0], why[:, 0] = indexed & ~sure, codes[2]
    kind[:, 1], why[:, 1] = thr | maybe | unexp, np.where(thr, codes[3], np.where(maybe, codes[4], codes[5]))
    return idx, n, recs, kind, why, expands


@pytest.mark.parametrize("recorded", [True, False])
def test_level_doubts_are_the_rule_written_with_numpy(recorded):
    rng = np.random.default_rng(12)
    n_slots, c, w, d = 6, 300, 2, 2
    indexed = rng.random((n_slots, c)) < 0.7
    before = rng.integers(0, 9, c)
    rec_node, row = rng.integers(-1, 8, (n_slots, c)), rng.integers(-1, 4, (n_slots, c))
    status, sure = rng.integers(0, 3, (n_slots, c)).astype(np.int8), rng.random((n_slots, c)) < 0.9
    first = 5 if recorded else -1
    steps = np.stack([rng.integers(1, 4, c), rng.integers(1, 4, c)])
    codes = np.array([0, 2, 5, 1, 2, 3, 4, 0, -1], dtype=np.int8)
    got = [np.empty((n_slots, c), dtype=np.int64), np.empty(c, dtype=np.int64), np.empty((n_slots, c), dtype=np.int64)]
    got += [np.empty((n_slots, 2 + w, c), dtype=bool), np.empty((n_slots, 2 + w, c), dtype=np.int8)]
    got += [np.empty((n_slots, c), dtype=bool)]
    args = (indexed, before, rec_node, row, status, sure, first, steps, d, codes)
    level_doubts_loop(*args, *got)
    want = list(_level_doubts(*args, w))
    got[3], want[3] = got[3][:, :2], want[3][:, :2]  # kind's rank rows: child_slots_loop writes them
    for g, x in zip(got, want):
        np.testing.assert_array_equal(g, x)
    assert got[3][:, 1].any() and got[5].any() and not got[5].all()


def _child_level(parents, width, first_child, ids, logp, unnamed, pos, col, w):
    """child_level_loop the numpy way: each parent field gathered by position and broadcast over the
    ranks, each lookup a gather, the path keys by replay.testing.subtree_walk.unnamed_key_bound."""
    order, valid_in, status, sure_in, slot_lo, slot_hi, wide, row, exact_in, key_lo, key_hi, codes = parents
    k_max, c = order.shape
    g = lambda a: np.take_along_axis(a, order, axis=0)  # noqa: E731  the parent at position k
    alive, in_sure = g(valid_in & (status != codes[0])), g((status == codes[1]) & sure_in)
    s_lo, s_hi = (np.clip(g(x), 0, wide.shape[1] - 1) for x in (slot_lo, slot_hi))
    p_row = g(row)
    rr = np.arange(w)[None, :, None]
    kw = lambda a: np.broadcast_to(a, (k_max, w, c)).reshape(k_max * w, c)  # noqa: E731  [K, W, C] -> [K * W, C]
    w_lo, w_hi = wide[0][s_lo, s_hi][:, None, :], wide[1][s_lo, s_hi][:, None, :]
    valid = kw(alive[:, None, :] & (rr < w_hi))
    sure = kw(in_sure[:, None, :] & (rr < w_lo)) & valid
    ordered, oslot = kw((s_lo == s_hi)[:, None, :]) & valid, kw(s_lo[:, None, :])
    none = np.full((k_max * w, c), -1)
    token, lp = np.full((k_max * w, c), PAD_TOKEN), np.full((k_max * w, c), np.nan)
    child_rec = none
    if width.shape[0]:
        jj = np.clip(p_row, 0, width.shape[0] - 1)[:, None, :]
        child_rec = kw(np.where((p_row >= 0)[:, None, :] & (rr < width[jj]), first_child[jj] + rr, -1))
        rows, cols = ids.shape[:2]
        ok = (p_row >= 0)[:, None, :] & (rr < cols)
        cell = (np.clip(p_row, 0, rows - 1)[:, None, :], np.minimum(rr, cols - 1), col[None, None, :])
        token = kw(np.where(ok, ids[cell], PAD_TOKEN))
        lp = kw(np.where(ok, logp[cell], np.nan)) if logp.shape[0] else lp
    child_row = none
    if pos.shape[0]:
        child_row = np.where(child_rec >= 0, pos[np.clip(child_rec, 0, pos.shape[0] - 1), col[None, :]], -1)
    exact = (token != PAD_TOKEN) & ~np.isnan(lp) & kw(g(exact_in)[:, None, :])
    key_lo, key_hi = (kw(g(x)[:, None, :]) for x in (key_lo, key_hi))
    path_lo = np.where(exact, key_lo + np.where(exact, lp, 0.0), -np.inf)
    smallest = np.full((k_max, c), np.nan)
    if unnamed.shape[0]:
        smallest = np.where(p_row >= 0, unnamed[np.clip(p_row, 0, unnamed.shape[0] - 1), col[None, :]], np.nan)
    bound = replay.testing.subtree_walk.unnamed_key_bound(
        key_hi, np.where(token == PAD_TOKEN, kw(smallest[:, None, :]), np.nan)
    )
    path = np.stack([path_lo, np.where(exact, path_lo, bound)])
    return valid, sure, ordered, oslot, child_rec, child_row, token, lp, path, exact


@pytest.mark.parametrize("step", ["scores", "no scores", "last step", "past the recording", "no bound"])
def test_child_level_is_each_parents_ranks_looked_up_with_numpy(step):
    rng = np.random.default_rng(13)
    levels, w, c, s, h = 5, 4, 200, 260, 5
    valid_in, sure_in = rng.random((levels, c)) < 0.8, rng.random((levels, c)) < 0.7
    status = rng.integers(0, 3, (levels, c)).astype(np.int8)
    codes = np.array([0, 1], dtype=np.int8)  # OUT, IN
    kpos, order = np.empty((levels, c), dtype=np.int64), np.empty((levels, c), dtype=np.int64)
    k_max = open_nodes_loop(valid_in, status, 0, kpos, order)
    slot = rng.integers(-1, 4, (2, levels, c))  # a slot past the widths' entries: clipped
    wide = np.sort(rng.integers(0, w + 1, (2, 3, 3)), axis=0)  # min <= max
    row = rng.integers(-1, h + 1, (levels, c))  # a row past the widths' entries: clipped, as np.take's
    exact_in = rng.random((levels, c)) < 0.8
    key_in = np.log(rng.random((2, levels, c)))
    parents = (
        np.ascontiguousarray(order[:k_max]),
        valid_in,
        status,
        sure_in,
        *slot,
        wide,
        row,
        exact_in,
        *key_in,
        codes,
    )
    width, first_child = rng.integers(0, w + 1, h), rng.integers(0, 20, h)
    ids = np.where(rng.random((h + 1, 3, s)) < 0.2, PAD_TOKEN, rng.integers(0, 100, (h + 1, 3, s)))
    logp, pos = np.log(rng.random((h + 1, 3, s))), rng.integers(-1, 6, (24, s))
    logp[rng.random(logp.shape) < 0.1] = np.nan  # unrecorded scores
    unnamed = np.where(rng.random((h + 1, s)) < 0.2, np.nan, np.log(rng.random((h + 1, s))))
    if step == "no scores":
        logp = np.zeros((0, 1, 1))
    if step == "last step":
        pos = np.zeros((0, 1), dtype=np.int64)
    if step == "no bound":
        unnamed = np.zeros((0, 1))
    if step == "past the recording":
        width, first_child = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        ids, logp, pos = np.zeros((0, 1, 1), dtype=np.int64), np.zeros((0, 1, 1)), np.zeros((0, 1), dtype=np.int64)
        unnamed = np.zeros((0, 1))
    col = rng.permutation(s)[:c]
    n = k_max * w
    got = [np.empty((n, c), dtype=bool) for _ in range(3)] + [np.empty((n, c), dtype=np.int64) for _ in range(4)]
    got += [np.empty((n, c)), np.empty((2, n, c)), np.empty((n, c), dtype=bool)]
    recorded = (width, first_child, ids, logp, unnamed, pos)
    child_level_loop(*parents, *recorded, col, PAD_TOKEN, *got)
    want = _child_level(parents, *recorded, col, w)
    for g, x in zip(got, want):
        np.testing.assert_array_equal(g, x)
    assert got[0].any() and not got[0].all() and (got[4] >= 0).any() == (step != "past the recording")
    assert got[9].any() == (step not in ("no scores", "past the recording"))
    inexact = ~got[9] & (got[6] == PAD_TOKEN) & np.isfinite(got[8][1])
    assert (got[8][1][inexact] != np.take_along_axis(key_in[1], order[:k_max], 0).repeat(w, 0)[inexact]).any() == (
        step in ("scores", "no scores", "last step")
    )


def test_exact_sum_bins_each_values_frexp_parts():
    # normal numbers are read from their bits, zeros and subnormals through math.frexp: both as frexp bins them
    rng = np.random.default_rng(9)
    v = np.concatenate([rng.standard_normal((200, 2)) * 10.0 ** rng.integers(-300, 300, (200, 2)), [[0.0, -0.0]]])
    v = np.concatenate([v, [[5e-324, -3e-310], [2.0**-1022, -(2.0**1023)]]])
    offset, bins = 1100, 2200
    parts = np.zeros((2, 2 * bins), dtype=np.int64)
    exact_sum_loop(v, offset, bins, parts)
    want = np.zeros((2, 2 * bins), dtype=np.int64)
    for (i, j), x in np.ndenumerate(v):
        m, e = math.frexp(float(x))
        mi = int(m * 2.0**53)
        want[0, j * bins + e + offset] += mi >> 27
        want[1, j * bins + e + offset] += mi - ((mi >> 27) << 27)
    np.testing.assert_array_equal(parts, want)


def _depth_bounds(sums_lo, sums_hi, exact, det, gamma):
    """depth_bounds_loop the numpy way (replay.core.sampling_columns._aggregate_chunk's tightening)."""
    sums_hi = np.minimum(np.where(exact[None, :], sums_lo, sums_hi), 1.0)
    ge_hi = np.empty(sums_hi.shape)
    ge_hi[0] = sums_hi[0]
    for d in range(1, sums_hi.shape[0]):
        ge_hi[d] = np.minimum(ge_hi[d - 1], sums_hi[d])
    ge_lo = np.minimum(np.minimum(sums_lo, 1.0), ge_hi)
    g = min(gamma, ge_lo.shape[0] - 1)
    out = []
    for x in (ge_lo, ge_hi):
        ge = np.zeros((x.shape[1], gamma))
        ge[:, :g] = np.where(det[:, None], x[1 : 1 + g].T, 0.0)
        out.append(ge)
    for x in (ge_lo, ge_hi):
        total = np.zeros(x.shape[1])
        for row in x[1:]:
            total = total + row
        out.append(np.where(det, total, np.nan))
    return out


@pytest.mark.parametrize("gamma", [2, 4, 6])
def test_depth_bounds_are_the_tightened_sums_numpy_gives(gamma):
    rng = np.random.default_rng(10 + gamma)
    depths, c = 5, 300
    sums_lo = np.concatenate([np.ones((1, c)), rng.uniform(0.0, 1.3, (depths - 1, c))])
    sums_hi = sums_lo + rng.uniform(0.0, 0.6, (depths, c))
    sums_lo[2, 7], sums_hi[3, 9] = np.nan, np.nan
    exact, det = rng.random(c) < 0.3, rng.random(c) < 0.8
    got = [np.empty((c, gamma)), np.empty((c, gamma)), np.empty(c), np.empty(c)]
    depth_bounds_loop(sums_lo, sums_hi, exact, det, *got)
    for g, w in zip(got, _depth_bounds(sums_lo, sums_hi, exact, det, gamma)):
        np.testing.assert_array_equal(g.view(np.uint64), w.view(np.uint64))  # to the bit
    assert not np.array_equal(got[2], got[3], equal_nan=True)


def test_the_modules_that_call_the_loops_import_numba_at_first_use_only():
    # numba's import costs about 0.35 s, and a greedy command never needs it
    code = (
        "import sys, analysis.compare.sampling_batch, analysis.compare.sampling_reach, replay.core.sampling; "
        "print('numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_loop_compiles_without_the_disk_cache_where_numba_finds_no_place_for_it(monkeypatch):
    # A read-only install run by a user without a writable home: numba refuses cache=True when it
    # decorates (RuntimeError "no locator available"); the loop must still compile, per process.
    import replay.core.loops as loops

    asked = []

    def njit(**options):
        asked.append(options.get("cache", False))
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'loops.py'")
        return lambda fn: fn

    monkeypatch.setattr(loops, "njit", njit)
    assert loops._loop(len) is len
    assert asked == [True, False]


def _edge_probs(x, a, there, at, terms, repeat, scaled, node_row=None):
    """edge_probs_loop's (p_lo, p_hi): per-round parent rows ``at``, or one row per node (node_row)."""
    p_lo, p_hi = np.empty(x.shape), np.empty(x.shape)
    rows, offsets = (np.zeros(0, np.int64), at) if node_row is None else (node_row, np.zeros((0, 0), np.int64))
    edge_probs_loop(x, a, there, rows, offsets, *terms, repeat, scaled, p_lo, p_hi)
    return p_lo, p_hi


@pytest.mark.parametrize("t", [1.0, 0.6, 1.4])
@pytest.mark.parametrize("repeats", [False, True])
def test_edge_probs_are_the_rule_written_with_numpy(t, repeats):
    rng = np.random.default_rng(6)
    n1, e, c = 7, 3, 120
    x = rng.uniform(-8.0, 0.0, (n1, c))
    there = (rng.random((n1, c)) < 0.7).astype(np.float64)
    x[there == 0] = 0.0
    x[1:, :10], there[1:, :10] = 0.0, 1.0  # the row's top cell: q^a / q_max^a = 1
    x[0, :3] = np.nan  # a round with a problem: NaN stays NaN
    at = (rng.integers(0, e, (n1, c)) * c + np.arange(c)).astype(np.int64)
    inv_zlo, inv_zhi, miss = rng.uniform(0.5, 3.0, e * c), rng.uniform(0.2, 2.0, e * c), rng.uniform(0.0, 0.3, e * c)
    repeat = (rng.random((n1, c)) < 0.9).astype(np.float64) if repeats else np.zeros((0, 0))
    a = 1.0 / t
    p_lo, p_hi = _edge_probs(x, a, there, at, (inv_zlo, inv_zhi, miss), repeat, t != 1.0)

    num = _exp((x * a).reshape(-1)).reshape(x.shape) * there
    missing = (num <= 0.0) * miss[at]
    if t == 1.0:
        want_lo = np.minimum(num, 1.0)
        want_hi = want_lo + missing
    else:
        want_lo = np.minimum(num * inv_zhi[at], 1.0)
        want_hi = np.minimum(num * inv_zlo[at], 1.0) + missing
    if repeats:
        want_lo, want_hi = want_lo * repeat, want_hi * repeat
    np.testing.assert_array_equal(p_lo, want_lo)
    np.testing.assert_array_equal(p_hi, want_hi)
    assert (want_lo == 1.0).any() and np.isnan(p_lo[0, :3]).all()  # the cap at 1 was exercised, NaN kept

    # A shared TreeLayout (one parent row per node in every round, read in order) gives what the same
    # rows given as per-round offsets give.
    node_row = np.arange(n1, dtype=np.int64) % e
    fixed = _edge_probs(x, a, there, None, (inv_zlo, inv_zhi, miss), repeat, t != 1.0, node_row)
    as_offsets = _edge_probs(
        x, a, there, node_row[:, None] * c + np.arange(c), (inv_zlo, inv_zhi, miss), repeat, t != 1.0
    )
    np.testing.assert_array_equal(fixed[0], as_offsets[0])
    np.testing.assert_array_equal(fixed[1], as_offsets[1])
