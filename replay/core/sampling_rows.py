"""What a recorded validate row gives the sampling rule, whatever T: its statistics (the tail mass m
= 1 - sum q and its rounding, q_K, the packed tail), its problem code, and at each T the bounds on
1/Z_T and on a missing child's probability (docs/analysis.md "What a row gives").

The rows are a chunk's [E, K, C] arrays, round axis last (replay.core.sampling_columns); every sum
and exponential is in float64, the per-cell passes compiled by numba (replay.core.loops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .sampling_problems import (
    PROBLEM_NAN,
    PROBLEM_NONE,
    PROBLEM_POSITIVE,
    PROBLEM_SUM,
    PROBLEM_VOCAB,
    PROBLEM_ZERO,
    ROW_SUM_TOLERANCE,
)
from .vocab import PAD_TOKEN

_NO_PAD = np.zeros((0, 0, 0), dtype=bool)  # row_sums_loop's pad argument for rows without a PAD cell


@dataclass(frozen=True, eq=False)
class RowStats:
    """What the rule reads from one chunk's rows at any T > 0 ([E, C] float64 unless said), found
    once: the report's temperature curve asks 16 T of the same rows. Log values are kept minus the
    row's largest log-prob lmax (the shifted form), so that the rule at T scales them by a = 1/T and
    takes one exponential each: q^a / q_max^a, which small T does not underflow at the top cells."""

    lp: np.ndarray  # [E, K, C] the log-probs as given (float32 or float64), -inf at PAD
    lmax: np.ndarray  # 0 in a dead row (below), whose cells are never read
    total: np.ndarray  # sum q: Z's recorded part at T = 1
    # (lo, hi) the tail mass m = 1 - total less and plus the rounding of the row's sum (sum_slack; 0 for
    # a row naming every token): the lower bounds of S take the least tail the row allows, the upper the most
    mass: tuple[np.ndarray, np.ndarray]
    logm: tuple[np.ndarray, np.ndarray]  # log of each
    x1: np.ndarray  # min(q_K, m_hi): at T = 1 the largest q a missing child can have
    # (lo, hi) the tail packed into few tokens: floor(m / q_K) at q_K (0 for an empty tail), one at r
    j: tuple[np.ndarray, np.ndarray]
    # [4, E, C] what the rule raises to the power a, shifted: log q_K - lmax, log r_hi - lmax (-inf for
    # an empty tail), log min(q_K, m_hi) - lmax (the largest q a missing child can have), log r_lo - lmax
    base: np.ndarray
    rest: np.ndarray | float | None  # V - n, the tokens a row does not name (one number when every
    # row has K cells); None without V
    log_rest: np.ndarray | float | None  # log(V - n)
    dead: np.ndarray | None  # [E, C] bool: no row, or an empty row (every cell PAD or -inf); None if none
    # [E, C] bool: a row whose tail is empty by its structure, not by a float coming out 0: it names
    # all V tokens, or holds a -inf cell (q_K = 0: no unnamed token has mass), or is empty; then Z_T
    # is its recorded cells' sum and a child missing from it has p = 0 (the exact flag, _exact_of)
    empty_tail: np.ndarray
    # [E, C] bool: Z_T is determined at every T: an empty tail, or one unnamed token (V - n = 1),
    # which holds the whole tail mass m (Z_T = R + m^a); a missing child's p is still only bounded
    z_known: np.ndarray
    has: np.ndarray  # [E, C] bool
    problem: np.ndarray  # [C] int8 PROBLEM_* of the round, from its rows that are there


def _row_problem(
    total: np.ndarray,
    lmax: np.ndarray,
    has: np.ndarray,
    room: np.ndarray | None = None,
    zero: np.ndarray | None = None,
) -> np.ndarray:
    """[C] problem code from each row's sum of q and largest log-prob (PAD cells already -inf).

    A NaN cell makes the sum NaN (exp(NaN) is NaN; no cell adds -inf), a positive (or +inf) cell
    makes the maximum > 0, and the order NaN, positive, sum, zero cell, vocabulary is the order of
    precedence. room: with a vocabulary size V, the most mass the V - n unnamed tokens can hold,
    (V - n) * q_min (inf for a row of ``zero``); a row whose tail mass 1 - total exceeds it (a row
    naming all V tokens summing below 1) has no distribution behind it, and no bound drawn from it
    would mean anything. zero: [E, C] the rows with a zero cell (q_min = 0; None: no such row): no
    unnamed token can hold anything, whatever V, so such a row must sum to 1.
    """
    if has.all():  # the usual chunk: one pass tells that no row has a problem (NaN fails every <=)
        fine = total <= 1.0 + ROW_SUM_TOLERANCE
        fine &= lmax <= 0
        if room is not None:
            fine &= 1.0 - total <= room + ROW_SUM_TOLERANCE
        if zero is not None:
            fine &= (1.0 - total <= ROW_SUM_TOLERANCE) | ~zero
        if fine.all():
            return np.zeros(total.shape[-1], dtype=np.int8)
    nan = (np.isnan(total) & has).any(axis=0)
    pos = ((lmax > 0) & has).any(axis=0)
    over = ((total > 1.0 + ROW_SUM_TOLERANCE) & has).any(axis=0)
    out: np.ndarray = np.where(over, np.int8(PROBLEM_SUM), np.int8(PROBLEM_NONE))
    if room is not None:
        short = ((1.0 - total > room + ROW_SUM_TOLERANCE) & has).any(axis=0)
        out[short & ~over] = PROBLEM_VOCAB
    if zero is not None:
        lost = ((1.0 - total > ROW_SUM_TOLERANCE) & zero & has).any(axis=0)
        out[lost & ~over] = PROBLEM_ZERO
    out[pos] = PROBLEM_POSITIVE
    out[nan] = PROBLEM_NAN
    return out


def row_problems(ids: np.ndarray, logp: np.ndarray, vocab_size: int | None = None) -> np.ndarray:
    """[M] PROBLEM_* code of each of M validate rows (ids, logp [M, K]) at a temperature > 0: the
    kernel's judgement (row_stats) row by row, so that a message can name the row it found."""
    ids, logp = np.asarray(ids), np.asarray(logp, dtype=np.float64)
    has = np.ones((1, ids.shape[0]), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return row_stats(ids.T[None], logp.T[None], has, vocab_size).problem


def row_stats(ids: np.ndarray, lp: np.ndarray, has: np.ndarray, vocab_size: int | None) -> RowStats:
    """The T-independent statistics of rows ids, lp [E, K, C] (lp float32 or float64; every sum and
    exp in float64) and has [E, C]: the one exponential per cell of the tail mass m = 1 - sum q, in
    one compiled pass (replay.core.loops.row_sums_loop)."""
    from .loops import row_sums_loop  # numba: imported at first use (about 0.35 s)

    k = ids.shape[1]
    # One pass tells most chunks they have no PAD cell (PAD_TOKEN is the only negative id: the replay
    # rejects a round holding any other, vocab.not_token_ids).
    pad = ids == PAD_TOKEN if ids.min(initial=0) < 0 else None
    if pad is not None and pad.any():  # a padded batch fills PAD cells with NaN: they are not cells of the row
        lp = np.where(pad, -np.inf, lp)
    else:
        pad = None
    lp_clean = lp
    shape = (lp.shape[0], lp.shape[2])
    lmax, lmin, total, all32 = np.empty(shape), np.empty(shape), np.empty(shape), np.empty(shape, dtype=bool)
    row_sums_loop(lp, _NO_PAD if pad is None else pad, lmax, lmin, total, all32, lp.dtype != np.float32)
    # per row, the V - n tokens it does not name (n: its non-PAD cells); one number without PAD
    named: int | np.ndarray = k if pad is None else (~pad).sum(axis=1)
    rest: np.ndarray | float | None = None if vocab_size is None else float(vocab_size) - named
    qk = np.exp(lmin)
    no_tail = lmin == -np.inf  # a row with a -inf cell has q_K = 0: its tail is empty (the reference's `if qk > 0`)
    any_no_tail = bool(no_tail.any())
    room = None  # the most mass the unnamed tokens can hold; a row with a zero cell has its own rule (PROBLEM_ZERO)
    if rest is not None:
        room = rest * qk
        if any_no_tail:
            room[no_tail] = np.inf
        room = np.where(rest > 0, room, 0.0) if isinstance(rest, np.ndarray) else room if rest > 0 else 0.0 * room
    problem = _row_problem(total, lmax, has, room, no_tail if any_no_tail else None)
    # a row naming every token has no tail: its m (within tolerance) is rounding, and no slack adds one
    m = _named_all_zeroed(np.maximum(1.0 - total, 0.0), rest)  # tail mass m at T = 1 (total >= 0: m <= 1)
    slack = sum_slack(named, all32)
    m_lo, m_hi = np.maximum(m - slack, 0.0), _named_all_zeroed(m + slack, rest)
    dead = (lmax == -np.inf) | ~has
    if not dead.any():
        dead_or_none = None
    else:  # a dead row's cells are never read (its children get weight 0, its 1/Z is 0): no inf - inf
        dead_or_none, lmax = dead, np.where(dead, 0.0, lmax)
    base = np.empty((4, *lmax.shape))  # written in place: no stack of temporaries
    j = _packed_tail(m_lo, qk, no_tail, lmax, base[3]), _packed_tail(m_hi, qk, no_tail, lmax, base[1])
    logm_lo, logm_hi = np.log(m_lo), np.log(m_hi)
    lmm = np.minimum(lmin, logm_hi)
    np.subtract(lmin, lmax, out=base[0])
    np.subtract(lmm, lmax, out=base[2])
    log_rest = (
        None
        if rest is None
        else _log_of(rest, total.shape)
        if isinstance(rest, float)
        else np.log(np.broadcast_to(rest, total.shape))  # element by element
    )
    x1 = np.exp(lmm)
    empty_tail, z_known = _tail_known(no_tail | dead, rest, has)
    rows = (lp_clean, lmax, total, (m_lo, m_hi), (logm_lo, logm_hi), x1, j, base, rest, log_rest, dead_or_none)
    return RowStats(*rows, empty_tail, z_known, has, problem)


def _named_all_zeroed(m: np.ndarray, rest: np.ndarray | float | None) -> np.ndarray:
    """m [E, C] with 0 in the rows that name every token (V - n <= 0: no tail at all)."""
    if isinstance(rest, np.ndarray):
        return np.where(rest > 0, m, 0.0)
    return 0.0 * m if rest is not None and rest <= 0 else m


def sum_slack(n: int | np.ndarray, float32: bool | np.ndarray) -> np.ndarray:
    """How far a recorded row's sum of q may be from the truth by rounding alone: n real cells, whose
    log-probs l are float32 values (``float32``: every one is exactly a float32) or float64.

    q = exp(l) carries a relative error of |l| times l's rounding (2^-24 in float32, 2^-53 in
    float64), and q |l| <= 1/e, so the sum is off by at most that unit times (1 + n / e) (the 1 for
    the float64 sum); doubled here for the producer's own rounding. The tail mass m = 1 - sum is
    taken in [m - slack, m + slack]: a row that sums to 1 but for rounding may have no tail at all,
    which matters at T > 1, where the tail's least share S >= m^a rises steeply from m = 0 (without
    the slack, a float32 row summing to 1 - 2e-8 puts the truth 7e-5 above the upper bound at T = 2).
    """
    out: np.ndarray = np.where(float32, 2.0**-23, 2.0**-52) * (1.0 + np.asarray(n, dtype=np.float64) / math.e)
    return out


def _packed_tail(m: np.ndarray, qk: np.ndarray, no_tail: np.ndarray, lmax: np.ndarray, logr: np.ndarray) -> np.ndarray:
    """The tail of mass m packed into as few tokens as it can (docs/analysis.md "What a row gives"):
    j = floor(m / q_K) tokens at q_K, returned, and one at the rest r, whose log r - lmax goes into
    ``logr``; a tail of mass 0 or of a row with q_K = 0 is empty (j = 0, r = 0)."""
    j: np.ndarray = np.floor(m / qk)
    r = np.minimum(np.maximum(m - j * qk, 0.0), qk)
    np.log(r, out=logr)
    logr -= lmax
    tail = ~no_tail & (m > 0)
    if not tail.all():
        j = np.where(tail, j, 0.0)
        np.copyto(logr, -np.inf, where=~tail)
    return j


def _tail_known(empty: np.ndarray, rest: np.ndarray | float | None, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(empty_tail, z_known) [E, C] of RowStats, from the structure alone: ``empty`` the rows with a
    q = 0 cell or none (dead & has: an empty row), ``rest`` the V - n unnamed tokens (None: no V)."""
    if isinstance(rest, float) and rest > 1:  # the usual: every row leaves 2 or more tokens unnamed
        empty = empty & has  # read only: the two fields may share it
        return empty, empty
    if rest is not None:
        empty = empty | np.asarray(rest <= 0)
    empty = empty & has
    return empty, empty if rest is None else empty | (np.asarray(rest == 1) & has)


def _spread_tail(rs: RowStats, a: float, logm: np.ndarray) -> np.ndarray:
    """The tail spread evenly over the V - n unnamed tokens: (V - n) (m / (V - n))^a, scaled by
    e^(-a lmax); 0 for a row naming every token (written as the scalar reference's code writes it)."""
    assert rs.rest is not None and rs.log_rest is not None
    lr, al = rs.log_rest, a * rs.lmax
    out = np.exp(lr + a * (logm - lr) - al) if a > 1.0 else np.exp((1.0 - a) * lr + a * logm - al)
    if isinstance(rs.rest, np.ndarray):
        return np.where(rs.rest > 0, out, 0.0)
    return out if rs.rest > 0 else np.zeros_like(out)


def row_scale(rs: RowStats, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1 / Z_lo, 1 / Z_hi, a missing child's p_hi) per row at T > 0, every q^a scaled by e^(-a lmax).

    Z_T = R + S: R = sum of the recorded cells' q^a, the only sum over cells at T (one exponential
    each, in one compiled pass); S, the tail's part, bounded from m and q_K
    (docs/analysis.md "What a row gives"): sum q^a over {0 <= q <= q_K, sum q = m} is convex for
    T < 1 (a maximum at a vertex: the packed tail) and concave for T > 1 (a minimum there); with V,
    the tail spread evenly over the V - n unnamed tokens is the other end (Jensen).
    """
    if t == 1.0:  # q itself: Z = 1 + rounding, nothing to rescale
        rec, x = rs.total, rs.x1
        s_lo, s_hi = np.fmax(rs.mass[0], 0.0), np.fmax(rs.mass[1], 0.0)
    else:
        from .loops import scaled_sums_loop

        a = 1.0 / t
        rec = np.empty(rs.lmax.shape)
        scaled_sums_loop(rs.lp, rs.lmax, a, rec)  # one pass over the cells: exp((l - lmax) a), summed
        e = np.multiply(rs.base, a)
        np.exp(e, out=e)
        x = e[2]
        # T < 1: the most tail (m_hi) packed is S's upper end, spread evenly (m_lo) its lower; T > 1 the reverse
        side = 1 if t < 1.0 else 0
        packed = e[0] * rs.j[side]
        packed += e[1 if side else 3]
        spread = None if rs.rest is None else _spread_tail(rs, a, rs.logm[1 - side])
        if t < 1.0:
            s_lo, s_hi = (np.zeros_like(packed) if spread is None else spread), packed
        else:  # without V, the tail could be spread over any number of tokens: no upper bound
            s_lo, s_hi = packed, (np.full_like(packed, np.inf) if spread is None else spread)
        np.fmax(s_hi, 0.0, out=s_hi)  # NaN (0 * inf in a degenerate row) -> 0; fmax keeps +inf
        np.fmax(s_lo, 0.0, out=s_lo)
        np.minimum(s_lo, s_hi, out=s_lo)
        if rs.empty_tail.any():  # no token outside the row has mass (a zero cell, or all V named): S = 0, V or not
            np.copyto(s_hi, 0.0, where=rs.empty_tail)
            np.copyto(s_lo, 0.0, where=rs.empty_tail)
    z_hi = rec + s_hi
    share = s_hi / z_hi
    if t > 1.0:
        np.copyto(share, 1.0, where=np.isinf(s_hi))
    # A missing child: its q <= min(q_K, m) and its q^a is part of S, so p <= x/(R + max(x, S_lo));
    # and p <= the tail's share S_hi / (R + S_hi).
    miss = np.maximum(x, s_lo)
    miss += rec
    np.divide(x, miss, out=miss)
    np.minimum(miss, share, out=miss)
    np.fmax(miss, 0.0, out=miss)  # NaN -> 0
    if t == 1.0:  # a recorded child's probability is its q exactly
        inv_zlo, inv_zhi = np.ones_like(rec), np.ones_like(rec)
    else:  # 1/inf = 0: no lower bound
        inv_zlo = rec + s_lo
        np.divide(1.0, inv_zlo, out=inv_zlo)
        inv_zhi = np.divide(1.0, z_hi, out=z_hi)
    if rs.dead is not None:
        # An empty row (every cell PAD or -inf) gives p = 0 (the reference's q_K = 0); no row, p in [0, 1].
        # Neither records anything: 1/Z (NaN there: no scale) is set to 0.
        np.copyto(miss, ~rs.has, where=rs.dead)
        np.copyto(inv_zlo, 0.0, where=rs.dead)
        np.copyto(inv_zhi, 0.0, where=rs.dead)
    return inv_zlo, inv_zhi, miss


@lru_cache(maxsize=64)
def _log_of(value: float, shape: tuple[int, ...]) -> np.ndarray:
    """np.log of an array of ``value`` (element by element, as the rows' own logs), once per
    chunk shape: every chunk of a run without PAD has the same V - n."""
    out: np.ndarray = np.log(np.broadcast_to(value, shape))  # the same call as for a row's own V - n
    out.flags.writeable = False
    return out
