"""Compiled loops (numba) for the sampling rule's passes over every cell of a chunk's rows.

numpy runs one pass over memory per operation: a row's sum of q = exp(l) takes a conversion, an
exponential and a sum, each its own pass, and a lookup of each child's cell in its parent's row a
comparison, a select and a reduction per cell. These loops make one pass each: a row's max, min and
sum of q (row_sums_loop), its sum of q^a at T (scaled_sums_loop), each child's cell in its parent's
row (child_cells_loop), each edge's probability bounds (edge_probs_loop), and the all layout's rows
gathered round by round (gather_rows_loop), or node by node for a compared config's sub-trees
(node_rows_loop); a compared config's P(L >= d) from its per-depth reach (depth_bounds_loop; its
levels' loops are replay.core.level_loops); and, for the temperature table's exactly rounded sums (analysis.compare.sampling.ExactSum), each
value's integer parts added to its exponent's bin (exact_sum_loop). Every path of the rule (the batch's chunks, the round
path's single rounds, the prepared curve) calls the same loops, so their numbers agree bit for bit
whichever path ran.

The exponential of a cell is this module's own (``_exp``): numpy's is not callable from compiled
code, and numba's ``math.exp`` is the C library's, one value at a time (about 6 times slower here
than numpy's vectorised one). It is the textbook method: x = k ln 2 + r with |r| <= ln 2 / 2
(Cody and Waite's two-part ln 2, so that k ln 2 is exact), exp(r) by its Taylor series to r^13
(truncation below 2^-57), times 2^k built from its bits in two factors (each a normal number, so
that a result in the subnormal range is rounded once). Within 1 ulp of the C library's over the
float64 range (subnormal results and the range's edges included);
NaN, +-inf, overflow and underflow as numpy gives them. The one fast-math liberty is contraction
(a * b + c as one fused multiply-add where the CPU has it, about a fifth less time): the compiler
fuses the same operations in a vector lane and alone, so a value's bits do not depend on which ran
it; they may differ in the last bit between CPUs with and without FMA, as
numpy's own vectorised exp does.

Imported at first use, not with replay.core.sampling: numba's import costs about 0.35 s, and a
greedy replay never needs it. Compiled once per signature (about 1.5 s for a first sampling run)
and cached on disk (``_loop``), so that a later process loads them (about 0.1 s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2's leading 32 bits (21 trailing zeros: k * it is exact, |k| < 2^21)
_LN2_LO = 1.90821492927058770002e-10  # ln 2 - _LN2_HI
_SHIFT = 6755399441055744.0  # 1.5 * 2^52: x * log2(e) + it rounds to an integer k held in its low bits
_SHIFT_BITS = 0x4338000000000000  # its bits
# 1/n!, n = 13..2: exp(r) = 1 + r + r^2 (1/2 + r (1/6 + ...)), Horner's rule from the top
_C13, _C12, _C11, _C10 = 1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0
_C9, _C8, _C7, _C6 = 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0
_C5, _C4, _C3, _C2 = 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5
_X_MIN = -746.0  # exp(x) rounds to 0 below about -745.13: clamped here (k stays in range), still 0
_X_MAX = 710.0  # exp(x) overflows above about 709.78: clamped here, still +inf


def _loop(fn: Callable[..., Any]) -> Any:
    """A compiled loop: without the GIL (threads run chunks side by side), no bounds checks (every
    caller builds its arrays from one chunk's shapes), fused multiply-adds; cached on disk where
    numba finds a writable place (beside this file, or its per-user cache), else compiled once in
    each process (a read-only install with no writable home: numba refuses cache=True there)."""
    try:
        return njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})(fn)
    except RuntimeError:
        return njit(nogil=True, boundscheck=False, fastmath={"contract"})(fn)


@intrinsic
def _bits(typingctx: Any, x: Any) -> Any:
    """The int64 holding a float64's bits (a register move, no conversion)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _float(typingctx: Any, bits: Any) -> Any:
    """The float64 whose bits an int64 holds."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@njit(inline="always", fastmath={"contract"})
def _exp(x: float) -> float:
    if x < _X_MIN:  # NaN passes both tests: it stays NaN through r
        x = _X_MIN
    if x > _X_MAX:
        x = _X_MAX
    t = x * _LOG2E + _SHIFT
    # the integer k held in t's low bits, -1076..1024 (mypy reads an intrinsic's typing signature)
    k = _bits(t) - _SHIFT_BITS  # type: ignore[call-arg]
    kf = t - _SHIFT
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    p = _C13
    p = p * r + _C12
    p = p * r + _C11
    p = p * r + _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = 1.0 + (r + r * r * p)
    k1 = k >> 1  # 2^k = 2^k1 * 2^(k - k1), each a normal number
    return (p * _float((k1 + 1023) << 52)) * _float((k - k1 + 1023) << 52)


@_loop
def row_sums_loop(
    lp: np.ndarray,  # [E, K, C] float32 or float64: log-probs, PAD cells already -inf
    pad: np.ndarray,  # [E, K, C] bool, or [0, 0, 0] when no cell is PAD
    lmax: np.ndarray,  # out [E, C] float64: the largest cell (NaN if any is)
    lmin: np.ndarray,  # out [E, C] float64: the smallest non-PAD cell (NaN if any is; +inf for none)
    total: np.ndarray,  # out [E, C] float64: sum of exp(l), cell 0 to K-1 in order
    all32: np.ndarray,  # out [E, C] bool: every non-PAD cell is a float32 value (NaN is not)
    check32: bool,  # False for float32 rows: all32 stays True (a NaN row's slack is never read: it has a problem)
) -> None:
    """A row's T-independent sums, one pass over its cells."""
    n_rows, k, c = lp.shape
    has_pad = pad.shape[0] > 0
    for e in range(n_rows):
        for j in range(c):
            lmax[e, j] = -np.inf
            lmin[e, j] = np.inf
            total[e, j] = 0.0
            all32[e, j] = True
        for i in range(k):
            for j in range(c):
                x = np.float64(lp[e, i, j])
                lmax[e, j] = max(lmax[e, j], x)
                if not (has_pad and pad[e, i, j]):  # PAD cells (-inf here) count for the maximum only
                    lmin[e, j] = min(lmin[e, j], x)
                    if check32 and not np.float64(np.float32(x)) == x:
                        all32[e, j] = False
                total[e, j] += _exp(x)
        for j in range(c):
            if total[e, j] != total[e, j]:  # a NaN cell (exp never gives -inf: NaN nowhere else)
                lmax[e, j] = np.nan  # as numpy's max and min give it
                lmin[e, j] = np.nan
                all32[e, j] = False


@_loop
def scaled_sums_loop(
    lp: np.ndarray,  # [E, K, C] float32 or float64: log-probs, PAD cells -inf
    lmax: np.ndarray,  # [E, C] float64: the row's largest cell (0 in a dead row)
    a: float,  # 1 / T
    rec: np.ndarray,  # out [E, C] float64: sum of exp((l - lmax) a), cell 0 to K-1 in order
) -> None:
    """R of row_scale: the recorded cells' q^a, scaled by e^(-a lmax), summed."""
    n_rows, k, c = lp.shape
    for e in range(n_rows):
        for j in range(c):
            rec[e, j] = 0.0
        for i in range(k):
            for j in range(c):
                rec[e, j] += _exp((np.float64(lp[e, i, j]) - lmax[e, j]) * a)


@_loop
def edge_probs_loop(
    x: np.ndarray,  # [N+1, C] float64: each child's cell, shifted by its row's lmax (or not, at T = 1)
    a: float,  # 1 / T
    there: np.ndarray,  # [N+1, C] float64: 1.0 where the child is in its row, else 0.0
    node_row: np.ndarray,  # [N+1] int64: each node's parent row, the same in every round (a shared TreeLayout)
    at: np.ndarray,  # [N+1, C] int64: else each edge's parent row per round, as an offset into the
    # flat [E * C] per-row arrays (a TreeLayout per round); [0, 0] with a shared one
    inv_zlo: np.ndarray,  # [E * C] float64: each row's 1 / Z_lo (unread where scaled is False)
    inv_zhi: np.ndarray,  # [E * C] float64: 1 / Z_hi
    miss: np.ndarray,  # [E * C] float64: a missing child's upper bound
    repeat: np.ndarray,  # [N+1, C] float64: 0.0 for a child repeating a sibling's token, else 1.0; or [0, 0]
    scaled: bool,  # False at T = 1 (Z = 1: p is the weight itself)
    p_lo: np.ndarray,  # out [N+1, C] float64
    p_hi: np.ndarray,  # out [N+1, C] float64
) -> None:
    """Each edge's probability bounds at T: the child's q^a (scaled as its row's cells are in
    scaled_sums_loop) over its parent row's Z bounds, capped at 1; a missing child (weight 0) gets
    the row's missing-child bound above. NaN stays NaN (a round with a problem)."""
    n1, c = x.shape
    num = np.empty(c)
    for u in range(n1):
        # one input and one output a loop: with more, the compiler's checks that the arrays do not
        # overlap exceed its limit and the loop is not vectorised (measured: 3 times slower)
        xu, tu = x[u], there[u]
        for j in range(c):
            num[j] = _exp(xu[j] * a) * tu[j]
        lo_u, hi_u = p_lo[u], p_hi[u]
        if at.shape[0] > 0:  # a parent row per round: gathered
            at_u = at[u]
            for j in range(c):
                row = at_u[j]
                lo_u[j], hi_u[j] = _edge(num[j], inv_zlo[row], inv_zhi[row], miss[row], scaled)
        else:  # one parent row in every round: read in order
            first = node_row[u] * c
            zlo, zhi, m = inv_zlo[first : first + c], inv_zhi[first : first + c], miss[first : first + c]
            for j in range(c):
                lo_u[j], hi_u[j] = _edge(num[j], zlo[j], zhi[j], m[j], scaled)
        if repeat.shape[0] > 0:
            rep = repeat[u]
            for j in range(c):
                lo_u[j] *= rep[j]
                hi_u[j] *= rep[j]


@njit(inline="always", fastmath={"contract"})
def _edge(num: float, inv_zlo: float, inv_zhi: float, miss: float, scaled: bool) -> tuple[float, float]:
    """One edge's (p_lo, p_hi) from its weight num and its row's terms (np.minimum's NaN kept)."""
    missing = (1.0 if num <= 0.0 else 0.0) * miss
    if not scaled:
        lo = num if not num > 1.0 else 1.0
        return lo, lo + missing
    lo = num * inv_zhi
    hi = num * inv_zlo
    return (lo if not lo > 1.0 else 1.0), (hi if not hi > 1.0 else 1.0) + missing


# A cell value no sound row holds (log-probs are <= 0): a child found in no cell of its row keeps it.
_NOT_FOUND = 1.0
# Floor of a child's cell value: -inf (weight 0) becomes finite, so that 0 * it is 0.
_FLOOR = -1e300


@_loop
def child_cells_loop(
    ids: np.ndarray,  # [E, K, C] int: each expanded slot's validate row, round by round
    lp: np.ndarray,  # [E, K, C] float32 or float64: its log-probs
    tok: np.ndarray,  # [N+1, C] int, ids' type: each node's token (row 0, the root's, unused)
    node_row: np.ndarray,  # [N+1] int64: each node's parent slot (node 0: any row, unused)
    lmax: np.ndarray,  # [E, C] float64: each row's largest log-prob (0 in a dead row)
    dead: np.ndarray,  # [E, C] bool: a row that is not there or empty
    d: np.ndarray,  # out [N+1, C] float64: the child's cell minus its row's lmax, 0 where not there
    v: np.ndarray,  # out [N+1, C] float64: the child's cell, 0 where not there
    there: np.ndarray,  # out [N+1, C] float64: 1.0 where the child is at a finite cell of a live row
) -> None:
    """Each child's first cell carrying its token in its parent's row (the scalar reference's rule
    for a row naming a token twice): the columns are walked from the last to the first, so the
    first match is the one left. A cell that is NaN, > 0 or -inf is "not there" (weight 0)."""
    n1, c = tok.shape
    k = ids.shape[1]
    for u in range(n1):
        # few arrays a loop (as edge_probs_loop): each loop below is vectorised over rounds
        e = node_row[u]
        tok_u, v_u, d_u, there_u, lmax_e, dead_e = tok[u], v[u], d[u], there[u], lmax[e], dead[e]
        for j in range(c):
            v_u[j] = _NOT_FOUND
        for i in range(k - 1, -1, -1):
            ids_i, lp_i = ids[e, i], lp[e, i]
            for j in range(c):
                if ids_i[j] == tok_u[j]:
                    v_u[j] = lp_i[j]
        for j in range(c):
            x = v_u[j]
            ok = u > 0 and x <= 0.0 and x > _FLOOR and not dead_e[j]
            there_u[j] = 1.0 if ok else 0.0
        for j in range(c):
            x = v_u[j]
            x = min(x, 0.0) if x == x else 0.0  # NaN -> 0, as np.fmin(x, 0)
            v_u[j] = max(x, _FLOOR)
        for j in range(c):
            d_u[j] = (v_u[j] - lmax_e[j]) * there_u[j]
        for j in range(c):
            v_u[j] *= there_u[j]


@_loop
def gather_rows_loop(
    ids: np.ndarray,  # [M, K, R] int: a validate stack's ids
    lp: np.ndarray,  # [M, K, R] float32 or float64: its log-probs
    rows: np.ndarray,  # [C] int64: the row each round reads, in 0..M-1
    lo: int,  # the chunk's first round
    ids_out: np.ndarray,  # out [K, C], ids' dtype: ids_out[i, j] = ids[rows[j], i, lo + j]
    lp_out: np.ndarray,  # out [K, C], lp's dtype: the same cells of lp
) -> None:
    """One expanded slot's row, round by round: each round of the chunk reads the row its tree
    expanded there (the all layout's validate rows are per node)."""
    k, c = ids_out.shape
    for i in range(k):
        for j in range(c):
            ids_out[i, j] = ids[rows[j], i, lo + j]
            lp_out[i, j] = lp[rows[j], i, lo + j]


@_loop
def node_rows_loop(
    ids: np.ndarray,  # [M, K, C] int64: a chunk's validate ids, round axis last
    lp: np.ndarray,  # [M, K, C] float64: their log-probs
    src: np.ndarray,  # [C * N] int64: the row each node reads (node s is round s // N's), -1 for none
    nodes: int,  # N
    pad: int,  # ids_out's value for a node without a row
    ids_out: np.ndarray,  # out [C * N, K] int64: ids_out[s, i] = ids[src[s], i, s // N], else pad
    lp_out: np.ndarray,  # out [C * N, K] float64: the same cells of lp, else -inf
) -> None:
    """Each node's validate row, round-major (a sub-tree's nodes, tree order in each round): one
    pass that reads every row a node has and fills the others, where numpy's gather of [K] cells
    C apart and its fill before it are two passes and a strided index per cell."""
    k = ids_out.shape[1]
    for s in range(src.shape[0]):
        row = src[s]
        j = s // nodes
        if row >= 0:
            for i in range(k):
                ids_out[s, i] = ids[row, i, j]
                lp_out[s, i] = lp[row, i, j]
        else:
            for i in range(k):
                ids_out[s, i] = pad
                lp_out[s, i] = -np.inf


@njit(inline="always")
def _minimum(a: float, b: float) -> float:
    """np.minimum of two values: NaN when either is."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


@_loop
def depth_bounds_loop(
    sums_lo: np.ndarray,  # [D+1, C] float64: each depth's summed reach_lo (row 0: the root's 1.0)
    sums_hi: np.ndarray,  # [D+1, C] float64: reach_hi's (read only where the round is not exact)
    exact: np.ndarray,  # [C] bool: the round is exact (its upper sums are its lower ones)
    det: np.ndarray,  # [C] bool: the round is determined
    ge_lo: np.ndarray,  # out [C, G] float64: P(L >= d) lo, d = 1 .. G (0 past D, and where not determined)
    ge_hi: np.ndarray,  # out [C, G]
    e_lo: np.ndarray,  # out [C] float64: E[L] lo, the P(L >= d) added in depth order (NaN where not determined)
    e_hi: np.ndarray,  # out [C]
) -> None:
    """A round's P(L >= d) and E[L] bounds from its per-depth reach sums: replay.core.sampling_columns.
    _aggregate_chunk's tightening (capped at 1, the upper bound a running minimum over the depths,
    the lower one below it) and its sums over the depths, the same operations in the same order,
    one pass per round instead of one per operation and depth."""
    depths, c = sums_lo.shape
    g = ge_lo.shape[1]
    for j in range(c):
        acc_lo = 0.0
        acc_hi = 0.0
        run_hi = 0.0
        for d in range(depths):
            lo = sums_lo[d, j]
            hi = _minimum(lo if exact[j] else sums_hi[d, j], 1.0)
            run_hi = hi if d == 0 else _minimum(run_hi, hi)
            low = _minimum(_minimum(lo, 1.0), run_hi)
            if d == 0:
                continue
            acc_lo = acc_lo + low
            acc_hi = acc_hi + run_hi
            if d <= g:
                ge_lo[j, d - 1] = low if det[j] else 0.0
                ge_hi[j, d - 1] = run_hi if det[j] else 0.0
        for d in range(depths - 1, g):
            ge_lo[j, d] = 0.0
            ge_hi[j, d] = 0.0
        e_lo[j] = acc_lo if det[j] else np.nan
        e_hi[j] = acc_hi if det[j] else np.nan


_TWO_53 = 9007199254740992.0  # 2^53: a frexp mantissa times it is an integer
_SIGNIFICAND = (1 << 52) - 1  # a float64's stored significand bits
_HIDDEN_BIT = 1 << 52  # a normal number's leading 1


@njit(inline="always")
def _add_exact(x: float, b0: int, parts: np.ndarray) -> None:
    """Add a finite x to the bins of its column (``b0``: the column's first bin plus the offset): x =
    m * 2^e (frexp; read from a normal number's bits), m * 2^53 an integer split into a high part (>> 27)
    and a low part (< 2^27), each added exactly to the bin of e."""
    bits: int = _bits(x)  # type: ignore[call-arg]
    biased = (bits >> 52) & 0x7FF
    if biased != 0:  # a normal number: frexp's m * 2^53 is its 53-bit significand, e its exponent + 1
        mi = (bits & _SIGNIFICAND) | _HIDDEN_BIT
        if bits < 0:
            mi = -mi
        e = biased - 1022
    else:  # zero or subnormal (the library call, about twice as slow)
        m, e = math.frexp(x)
        mi = np.int64(m * _TWO_53)
    high = mi >> 27
    b = b0 + e
    parts[0, b] += high
    parts[1, b] += mi - (high << 27)


@_loop
def exact_sum_loop(
    v: np.ndarray,  # [n, k] float64, every value finite
    offset: int,  # added to frexp's exponent: a bin index >= 0
    bins: int,  # bins per column
    parts: np.ndarray,  # in/out [2, k * bins] int64: per (column, exponent) the sums of the high and low parts
) -> None:
    """ExactSum's pass over its values (_add_exact, each added exactly to the bin of its column and e)."""
    n, k = v.shape
    for i in range(n):
        for j in range(k):
            _add_exact(v[i, j], j * bins + offset, parts)


@_loop
def exact_sum_outcomes_loop(
    lo: np.ndarray,  # [n] float64: each round's expected length bounds
    hi: np.ndarray,
    ge_lo: np.ndarray,  # [n, G] float64: its P(L >= d) bounds, the first g columns read
    ge_hi: np.ndarray,
    rows: np.ndarray,  # [n] bool: the rounds added
    g: int,
    offset: int,
    bins: int,
    parts: np.ndarray,  # in/out [2, (2 + 2 g) * bins] int64: exact_sum_loop's bins of the columns lo, hi, ge_lo.., ge_hi..
    special: np.ndarray,  # in/out [2 + 2 g] float64: the sum of each column's non-finite values
) -> None:
    """exact_sum_loop over the [lo, hi, ge_lo, ge_hi] rows of the rounds ``rows`` (analysis.compare.
    sampling_sums' outcomes), read where they lie: no [n, 2 + 2 g] copy of them, no pass for the
    non-finite values, which go to ``special`` (their sum is NaN or +-inf in any order)."""
    for i in range(lo.shape[0]):
        if not rows[i]:
            continue
        x = lo[i]  # each column written out: through one more inlined helper this loop measured ten times slower
        if math.isfinite(x):
            _add_exact(x, offset, parts)
        else:
            special[0] += x
        x = hi[i]
        if math.isfinite(x):
            _add_exact(x, bins + offset, parts)
        else:
            special[1] += x
        for d in range(g):
            x = ge_lo[i, d]
            if math.isfinite(x):
                _add_exact(x, (2 + d) * bins + offset, parts)
            else:
                special[2 + d] += x
        for d in range(g):
            x = ge_hi[i, d]
            if math.isfinite(x):
                _add_exact(x, (2 + g + d) * bins + offset, parts)
            else:
                special[2 + g + d] += x
