"""Sampling-mode acceptance: the expected accepted length of a recorded round at temperature T.

The harness's lossless rule (docs/live-harness.md): at the current node draw x from the target's
softmax(logits / T); if a child carries x, move there and draw again, else commit x and stop. So
the accepted path is a random walk whose edge probabilities are p_T(child | parent):

    P(reach n) = prod over root->n edges of p_T,   E[L] = sum_{n != root} P(reach n),
    P(L >= d) = sum_{depth(n) = d} P(reach n),     E[L^2] = sum_n P(reach n) * (2 depth(n) - 1).

The dump records, per expanded node, the target's top-K ids and log-probabilities at temperature 1
(full softmax). From them p_T is exact where the child's token is in its parent's row and Z_T is
known (T = 1: Z = 1), and bounded otherwise; docs/analysis.md "Sampling-mode replay" derives the
bounds. T = 0 is the greedy replay (the row's first column), exactly.

The rule is written once, here: ``column_bounds`` on column-major arrays of rounds that share one
tree layout (the round axis last, as in the greedy batch kernel, so every operation runs on
contiguous vectors over rounds; the batch replay calls it on its own arrays), and
``sampling_bounds`` on round-major arrays of R rounds (one round is R = 1), which groups the rounds
by tree and calls ``column_bounds``; the per-round replay and the API go through it. What a row
gives that does not depend on T (its statistics, each child's cell in it) is found once per chunk
of rounds; ``prepare_columns`` / ``prepare_sampling`` keep it for many T (the report's curve), so
that the rule at T takes one exponential per recorded cell and no lookup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from replay.util.errors import SpecReplayError
from replay.util.rows import unique_rows

from .tree import Tree
from .vocab import LAYOUT_ALL, LAYOUT_PARENTS, NO_PARENT, PAD_TOKEN

# Recorded probabilities are float32 log-softmax values: a row may sum to 1 + a few ulps.
ROW_SUM_TOLERANCE = 1e-5

# Per-round problem codes (0 = usable); callers skip such rounds with PROBLEM_WORDS[code].
PROBLEM_NONE, PROBLEM_NAN, PROBLEM_POSITIVE, PROBLEM_SUM, PROBLEM_VOCAB, PROBLEM_ZERO = 0, 1, 2, 3, 4, 5
PROBLEM_WORDS = {
    PROBLEM_NAN: "a validate row used by the walk holds a NaN log-probability",
    PROBLEM_POSITIVE: "a validate row used by the walk holds a log-probability > 0 (or +inf)",
    PROBLEM_SUM: f"a validate row's probabilities sum to more than 1 (+{ROW_SUM_TOLERANCE:g})",
    # m > (V - n) * q_min: the V - n unnamed tokens, each at most the row's smallest p, cannot hold m
    PROBLEM_VOCAB: "a validate row contradicts the vocabulary size: its unrecorded mass 1 - sum(p) is more than "
    "the V - n tokens it does not name can hold (each at most its smallest p; a row naming all V tokens must sum to 1)",
    # q_K = 0: no unnamed token can hold any mass, whatever V
    PROBLEM_ZERO: "a validate row holds a zero probability, so every token it does not name has p = 0 too, yet its "
    f"probabilities sum to less than 1 (by more than {ROW_SUM_TOLERANCE:g}): it is no top-K row of any distribution",
}


# The smallest T > 0 taken: at T = 1e-310 the rule's 1/T overflows and every bound would be NaN;
# T = 1e-300 gives the greedy answer, as T -> 0 must.
MIN_TEMPERATURE = 1e-300


class VocabSize(int):
    """A vocabulary size that remembers where it came from ("--vocab-size", "manifest.json vocab_size"):
    a message about a row that contradicts it names the source (the user fixes that one)."""

    source: str

    def __new__(cls, value: int, source: str) -> VocabSize:
        out = super().__new__(cls, value)
        out.source = source
        return out


class VocabTooSmall(SpecReplayError, ValueError):
    """A vocabulary size below a row's recorded candidates: the option (or manifest) is wrong for the
    dump, not one round: every path stops with one line and exit 2, naming the scores file where the
    dump has files (replay.engine.sampling.VocabBelowCandidates; on the batch arrays the widest row's)."""


def vocab_too_small(vocab_size: int | None, k: int) -> VocabTooSmall:
    return VocabTooSmall(
        f"{vocab_words(vocab_size)}: smaller than the {k} recorded candidates per row; "
        f"it must be at least {k} (the target's vocabulary size)"
    )


def vocab_words(vocab_size: int | None) -> str:
    """``vocab size V (from SOURCE)``, the source when the number carries one (VocabSize)."""
    source = getattr(vocab_size, "source", None)
    return f"vocab size {vocab_size}" + (f" (from {source})" if source else "")


def problem_words(code: int, vocab_size: int | None = None) -> str:
    """PROBLEM_WORDS[code], with the vocabulary size and its source for PROBLEM_VOCAB."""
    why = PROBLEM_WORDS[code]
    return f"{why}; {vocab_words(vocab_size)}" if code == PROBLEM_VOCAB else why


def check_temperature(value: Any) -> float:
    """T as a float: finite and >= 0 (0 means greedy). Raises ValueError with the words to show."""
    if isinstance(value, bool):
        raise ValueError(f"temperature: expected a number >= 0, got {str(value).lower()}")
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"temperature: expected a number >= 0, got {value!r}") from None
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"temperature: expected a finite number >= 0 (0 = greedy), got {value!r}")
    if 0.0 < t < MIN_TEMPERATURE or (t == 0.0 and isinstance(value, str) and _nonzero_text(value)):
        raise ValueError(
            f"temperature: expected 0 (greedy) or a number >= {MIN_TEMPERATURE:g}, got {value!r} "
            "(a smaller T reads as 0 or has no finite 1/T)"
        )
    return t + 0.0  # -0.0 is 0: shown as "T = 0", never "-0"


def format_temperature(t: float) -> str:
    """T as every message and label prints it: short (``0.7``, ``1e-09``), yet never a different
    number than the one used (``0.80000001`` is not shown as ``0.8``)."""
    short = f"{t:g}"
    return short if float(short) == t else repr(float(t))


def _nonzero_text(text: str) -> bool:
    """A number written with a non-zero digit before its exponent ("1e-400", which float() reads as 0)."""
    mantissa = text.strip().lower().split("e")[0]
    return any(ch in "123456789" for ch in mantissa)


@dataclass(frozen=True)
class SamplingBounds:
    """Bounds for R rounds at one temperature; lo == hi where the dump determines the value."""

    temperature: float
    reach_lo: np.ndarray  # [R, N+1] float64, P(reach node) lower bound (1 at the root)
    reach_hi: np.ndarray  # [R, N+1]
    expected_lo: np.ndarray  # [R] E[accepted length] lower bound
    expected_hi: np.ndarray  # [R]
    length_ge_lo: np.ndarray  # [R, D+1] P(accepted length >= d), d = 0..D (column 0 is 1)
    length_ge_hi: np.ndarray  # [R, D+1]
    exact: np.ndarray  # [R] bool: every edge the walk can take has its probability determined by the dump
    variance: np.ndarray  # [R] Var[accepted length] where exact, NaN elsewhere
    problem: np.ndarray  # [R] int8 PROBLEM_* code; rounds with a problem hold NaN everywhere
    needs_vocab: bool  # T > 1 without a vocabulary size: the lower bounds are 0 (refused)

    @property
    def block_efficiency_lo(self) -> np.ndarray:
        return self.expected_lo + 1.0

    @property
    def block_efficiency_hi(self) -> np.ndarray:
        return self.expected_hi + 1.0


def greedy_logp(ids: np.ndarray) -> np.ndarray:
    """Log-probs for validate rows without scores, good for T = 0 only: all mass on column 0.

    ids: [..., K] int token ids (any layout of rows). At T = 0 the walk reads only each row's
    first column (the target's top-1), so a dump without scores still answers the greedy question;
    every other T needs the recorded scores.
    """
    lp = np.full(ids.shape, -np.inf)
    lp[..., 0] = 0.0
    return lp


# Rounds per chunk of the kernel: one chunk's rows ([E, K, C] float64: 5 x 16 x 4096 x 8 B = 2.6 MB
# for the article tree) stay in cache across the kernel's passes; far fewer rounds and numpy's
# per-call cost dominates (about 300 calls per chunk).
CHUNK_ROUNDS = 4096

_NO_PAD = np.zeros((0, 0, 0), dtype=bool)  # row_sums_loop's pad argument for rows without a PAD cell
_NO_REPEAT = np.zeros((0, 0))  # edge_probs_loop's repeat argument for a chunk where no child repeats
_NO_ROWS, _NO_OFFSETS = np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int64)  # its unused tree form

# Below this many rounds (one round of the per-round replay) numpy's per-call cost dominates:
# the child lookup then takes one [g, K, C] comparison instead of one call per column.
SMALL_CHUNK = 64

# One row's node id: the same for every round (an int), or per round ([R] int).
RowNode = int | np.ndarray
# rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C]) of rounds lo..hi: column_bounds' row reader.
RowReader = Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]

_NAN_UNLESS = np.array([np.nan, 0.0])  # indexed by a bool: NaN for False, 0 for True

# A row's top-1 where the row cannot be read (no row, PAD): no token equals it.
_NO_TOKEN = np.iinfo(np.int64).min


@dataclass(frozen=True, eq=False)
class TreeLayout:
    """The structure shared by rounds of one tree shape, as the column-major kernel reads it.

    Rows are the expanded nodes' validate rows, E of them: row 0 is the root's, and every other
    row's node is a child of an earlier row (tree order of the expanded nodes, or the batch's
    step-by-step slots), so the kernel visits the rows in order and knows each one's reach by then.
    Only expanded nodes have rows here: Z_T is computed for them alone (5 of the article tree's 13).
    """

    edge_row: np.ndarray  # [N] int64: the row holding the distribution at node u's parent, u = 1..N
    depths: np.ndarray  # [N+1] int64

    @property
    def num_rows(self) -> int:
        return int(self.edge_row.max()) + 1 if self.edge_row.shape[0] else 0

    @cached_property
    def children(self) -> tuple[np.ndarray | slice, ...]:
        """Per row, its children's node ids in tree order (a slice where they are contiguous, as in a batch)."""
        out: list[np.ndarray | slice] = []
        for e in range(self.num_rows):
            kids = np.flatnonzero(self.edge_row == e) + 1
            contiguous = kids.shape[0] and kids[-1] - kids[0] + 1 == kids.shape[0]
            out.append(slice(int(kids[0]), int(kids[-1]) + 1) if contiguous else kids)
        return tuple(out)

    @cached_property
    def node_row(self) -> np.ndarray:
        """[N+1] each node's parent row (node 0: row 0, unused): the per-row terms gathered per edge."""
        return np.concatenate([np.zeros(1, dtype=np.int64), self.edge_row])

    @cached_property
    def at_depth(self) -> tuple[np.ndarray, ...]:
        return tuple(np.flatnonzero(self.depths == d) for d in range(int(self.depths.max()) + 1))

    @cached_property
    def depth_slices(self) -> tuple[np.ndarray | slice, ...]:
        """at_depth, as slices where the nodes are contiguous (tree order: a view, no copy)."""
        return tuple(slice(int(i[0]), int(i[-1]) + 1) if i[-1] - i[0] + 1 == i.shape[0] else i for i in self.at_depth)


@dataclass(frozen=True, eq=False)
class TreeColumns:
    """Trees that differ from round to round, for the kernel: every node has a row (row u is node u;
    has False where a node is not expanded), and each edge's parent row is gathered per round."""

    parents: np.ndarray  # [N+1, R] int64 (parents[0] = NO_PARENT, parents[u] < u)
    depths: np.ndarray  # [N+1, R] int64

    @cached_property
    def num_depths(self) -> int:
        return int(self.depths.max()) + 1 if self.depths.size else 1


@dataclass(frozen=True, eq=False)
class ColumnBounds:
    """SamplingBounds' numbers with the round axis last ([..., R]), as the kernel writes them."""

    reach_lo: np.ndarray | None  # [N+1, R], only when asked for (keep_reach)
    reach_hi: np.ndarray | None
    length_ge_lo: np.ndarray  # [D+1, R]
    length_ge_hi: np.ndarray
    expected_lo: np.ndarray  # [R]
    expected_hi: np.ndarray
    exact: np.ndarray  # [R] bool
    variance: np.ndarray  # [R]
    problem: np.ndarray  # [R] int8
    needs_vocab: bool


@dataclass(frozen=True, eq=False)
class _RowStats:
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
    qk: np.ndarray  # q_K, the smallest recorded q
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
    kernel's judgement (_row_stats) row by row, so that a message can name the row it found."""
    ids, logp = np.asarray(ids), np.asarray(logp, dtype=np.float64)
    has = np.ones((1, ids.shape[0]), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return _row_stats(ids.T[None], logp.T[None], has, vocab_size).problem


def _row_stats(ids: np.ndarray, lp: np.ndarray, has: np.ndarray, vocab_size: int | None) -> _RowStats:
    """The T-independent statistics of rows ids, lp [E, K, C] (lp float32 or float64; every sum and
    exp in float64) and has [E, C]: the one exponential per cell of the tail mass m = 1 - sum q, in
    one compiled pass (replay.core.loops.row_sums_loop)."""
    from .loops import row_sums_loop  # numba: imported at first use (about 0.35 s)

    k = ids.shape[1]
    # One pass tells most chunks they have no PAD cell (PAD_TOKEN is the only negative id).
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
    rows = (lp_clean, lmax, total, (m_lo, m_hi), (logm_lo, logm_hi), x1, qk, j, base, rest, log_rest, dead_or_none)
    return _RowStats(*rows, empty_tail, z_known, has, problem)


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
    """(empty_tail, z_known) [E, C] of _RowStats, from the structure alone: ``empty`` the rows with a
    q = 0 cell or none (dead & has: an empty row), ``rest`` the V - n unnamed tokens (None: no V)."""
    if isinstance(rest, float) and rest > 1:  # the usual: every row leaves 2 or more tokens unnamed
        empty = empty & has  # read only: the two fields may share it
        return empty, empty
    if rest is not None:
        empty = empty | np.asarray(rest <= 0)
    empty = empty & has
    return empty, empty if rest is None else empty | (np.asarray(rest == 1) & has)


def _spread_tail(rs: _RowStats, a: float, logm: np.ndarray) -> np.ndarray:
    """The tail spread evenly over the V - n unnamed tokens: (V - n) (m / (V - n))^a, scaled by
    e^(-a lmax); 0 for a row naming every token (written as the scalar reference's code writes it)."""
    assert rs.rest is not None and rs.log_rest is not None
    lr, al = rs.log_rest, a * rs.lmax
    out = np.exp(lr + a * (logm - lr) - al) if a > 1.0 else np.exp((1.0 - a) * lr + a * logm - al)
    if isinstance(rs.rest, np.ndarray):
        return np.where(rs.rest > 0, out, 0.0)
    return out if rs.rest > 0 else np.zeros_like(out)


def _row_scale(rs: _RowStats, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _first_cells(ids: np.ndarray, d: np.ndarray, tok: np.ndarray) -> np.ndarray:
    """[g, C] the value d of the first cell of a row (ids, d [K, C]) carrying each child's token,
    else 1.0 (no sound cell has a log-prob > 0: the caller tells the missing ones by it).

    One comparison per (column, child) on vectors over rounds; walking the columns from the last
    to the first leaves the first match (the scalar reference's rule for a row naming a token twice).
    """
    if tok.shape[1] < SMALL_CHUNK:  # few rounds: one broadcast comparison, fewer numpy calls
        hit = tok[:, None, :] == ids[None]  # [g, K, C]
        first = np.argmax(hit, axis=1)[:, None, :]  # the first True, 0 when none
        cell = np.take_along_axis(np.broadcast_to(d[None], hit.shape), first, axis=1)[:, 0]
        # float64 whatever d's dtype: a float32 result would take its exponential in float32 at T = 1
        return np.where(hit.any(axis=1), cell.astype(np.float64), 1.0)
    out = np.ones(tok.shape)
    hit = np.empty(tok.shape, dtype=bool)
    for c in range(ids.shape[0] - 1, -1, -1):
        np.equal(tok, ids[c], out=hit)
        np.copyto(out, d[c], where=hit)
    return out


def _as_ids_type(tokens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The tokens in the rows' integer type when they fit: comparing int32 with int32 runs about a
    third faster than int64 with int32 (measured), and an int32 dump's rows are int32."""
    if ids.dtype == tokens.dtype or ids.dtype.kind not in "iu" or not tokens.size:
        return tokens
    info = np.iinfo(ids.dtype)
    if tokens.min() < info.min or tokens.max() > info.max:  # would wrap: compare in int64
        return tokens
    return tokens.astype(ids.dtype)


class _Chunk:
    """One chunk of rounds of one tree layout: its rows and node tokens, and what the rule needs from
    them at any T, found on first use and kept (the temperature curve reads the same rows at 16 T;
    T = 0 reads only each row's top-1): the rows' statistics and each child's cell in its parent's row."""

    def __init__(
        self,
        tree: TreeLayout | TreeColumns,
        lo: int,
        hi: int,
        rows: tuple[np.ndarray, np.ndarray, np.ndarray],
        tokens: np.ndarray,
        nodes: list[RowNode],
        vocab: int | None,
    ) -> None:
        """tokens [N+1, C] and nodes (an int, or [C] per round): the chunk's own, rounds lo..hi."""
        self.tree, self.lo, self.hi = tree, lo, hi
        # contiguous rows (a copy of the parents layout's views): the compiled loops run vectorised
        # over rounds only on unit strides (replay.core.loops)
        self.ids, self.lp, self.has = np.ascontiguousarray(rows[0]), np.ascontiguousarray(rows[1]), rows[2]
        self.tok = _as_ids_type(np.ascontiguousarray(tokens), self.ids)
        self.nodes: list[RowNode] = [int(v) if isinstance(v, (int, np.integer)) else v for v in nodes]
        self.vocab_size = vocab
        if isinstance(tree, TreeColumns):  # each node's parent row, per round: offsets into [E, C] arrays
            c = hi - lo
            self.parents = tree.parents[:, lo:hi]
            self.pidx = (np.maximum(self.parents, 0) * c + np.arange(c)).astype(np.int64, copy=False)

    def per_edge(self, x: np.ndarray) -> np.ndarray:
        """[N+1, C] a per-row array ([E, C]) at each node's parent row (node 0: row 0, unused)."""
        if isinstance(self.tree, TreeLayout):
            out: np.ndarray = np.take(x, self.tree.node_row, axis=0)
        else:
            out = np.take(np.ascontiguousarray(x).reshape(-1), self.pidx)
        return out

    @cached_property
    def stats(self) -> _RowStats:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            return _row_stats(self.ids, self.lp, self.has, self.vocab_size)

    @cached_property
    def child_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[N+1, C] each node's log-prob in its parent's row minus the row's lmax, the log-prob itself
        (T = 1), and 1.0 where the child is there, else 0.0.

        A child missing from the row, in a dead row, or at a cell of log-prob -inf (weight 0: the
        same [0, 0] or missing-child bound) is "not there" with value 0: the rule multiplies exp(a
        * value) by the mask (arithmetic, no select: replay.core.loops.edge_probs_loop).
        """
        rs, tok = self.stats, self.tok
        if isinstance(self.tree, TreeLayout):
            return self._compiled_child_cells(rs)
        out = np.ones(tok.shape)  # TreeColumns: the parent's row gathered per round, [K, C]
        k, c = self.ids.shape[1], tok.shape[1]
        ids, lp = self.ids.reshape(-1), rs.lp.reshape(-1)
        for u in range(1, tok.shape[0]):
            cells = (self.pidx[u] // c * k)[None, :] * c + np.arange(k)[:, None] * c + np.arange(c)[None, :]
            out[u] = _first_cells(np.take(ids, cells), np.take(lp, cells), tok[u : u + 1])[0]
        if rs.dead is not None:
            out[self.per_edge(rs.dead)] = 1.0
        np.maximum(out, -1e300, out=out)  # -inf -> finite, so that 0 * it is 0
        d = out - self.per_edge(rs.lmax)  # the cell's l - lmax, to the bit (the same subtraction)
        there = (out <= 0.0) & (out > -1e300)
        d *= there
        out *= there
        return d, out, there.astype(np.float64)

    def _compiled_child_cells(self, rs: _RowStats) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """child_cells for a TreeLayout (one parent row per node in every round), in one compiled
        pass over the chunk's contiguous rows (replay.core.loops.child_cells_loop).

        The values are those of the per-round lookup above, bit for bit (copies of cells, the same
        subtraction): a lane that is not there (no match, a dead row, a cell NaN, > 0 or -inf) gets
        a finite value and weight 0.
        """
        from .loops import child_cells_loop

        assert isinstance(self.tree, TreeLayout)
        n1, c = self.tok.shape
        d, v, there = np.empty((n1, c)), np.empty((n1, c)), np.empty((n1, c))
        dead = rs.dead if rs.dead is not None else np.zeros(rs.lmax.shape, dtype=bool)
        child_cells_loop(self.ids, rs.lp, self.tok, self.tree.node_row, rs.lmax, dead, d, v, there)
        return d, v, there

    @cached_property
    def repeat(self) -> np.ndarray | None:
        """[N+1, C] 0.0 for a child with an earlier sibling's token, never reached (the walk moves to
        the first), 1.0 elsewhere: the edges' p are multiplied by it; None where no child repeats."""
        tok = self.tok
        out = np.zeros(tok.shape, dtype=bool)
        if isinstance(self.tree, TreeLayout):
            for kids in self.tree.children:
                kt = tok[kids]
                if kt.shape[0] > 1:  # every pair of siblings at once; child j repeats one of 0..j-1
                    same = kt[:, None, :] == kt[None, :, :]
                    same &= _earlier(kt.shape[0])
                    out[kids] = same.any(axis=0)
        else:
            par = self.parents
            for u in range(1, tok.shape[0]):
                out[u] = ((par[1:u] == par[u]) & (tok[1:u] == tok[u])).any(axis=0)
        return (~out).astype(np.float64) if out.any() else None

    @cached_property
    def reach_index(self) -> list[int | np.ndarray]:
        """Per row of a TreeLayout, its node: an id, or [C] offsets into the chunk's [N+1, C] reach."""
        c = self.tok.shape[1]
        return [int(v) if isinstance(v, (int, np.integer)) else v * c + np.arange(c) for v in self.nodes]

    def top1(self) -> np.ndarray:
        """[E, C] each row's first column (T = 0); _NO_TOKEN without a row or for PAD."""
        first = self.ids[:, 0]
        return np.where(self.has & (first != PAD_TOKEN), first.astype(np.int64), _NO_TOKEN)


@lru_cache(maxsize=64)
def _earlier(n: int) -> np.ndarray:
    """[n, n, 1] bool: sibling i comes before sibling j."""
    out = np.triu(np.ones((n, n), dtype=bool), 1)[:, :, None]
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _log_of(value: float, shape: tuple[int, ...]) -> np.ndarray:
    """np.log of an array of ``value`` (element by element, as the rows' own logs), once per
    chunk shape: every chunk of a run without PAD has the same V - n."""
    out: np.ndarray = np.log(np.broadcast_to(value, shape))  # the same call as for a row's own V - n
    out.flags.writeable = False
    return out


_Terms = tuple[np.ndarray, np.ndarray, np.ndarray]  # _row_scale's (1 / Z_lo, 1 / Z_hi, missing p_hi) [E, C]


def _edge_probs(ch: _Chunk, t: float, terms: _Terms | None) -> tuple[np.ndarray, np.ndarray]:
    """(p_lo, p_hi) [N+1, C] of every edge into node u (row 0: unused) at T, all edges at once, each
    with its parent row's 1/Z and missing-child bound (replay.core.loops.edge_probs_loop).

    A recorded child has weight > 0 or is recorded with q^a = 0; in the second case x_max <= its
    weight is 0 as well, so taking it for missing gives the same [0, 0]: "weight > 0" is the test.
    """
    if terms is None:  # T = 0: the child carrying the row's top-1
        p_lo = (ch.tok == ch.per_edge(ch.top1())).astype(np.float64)
        return (p_lo, p_lo) if ch.repeat is None else (p_lo * ch.repeat, p_lo * ch.repeat)
    from .loops import edge_probs_loop

    cells, logp, there = ch.child_cells
    inv_zlo, inv_zhi, miss = (np.ascontiguousarray(v).reshape(-1) for v in terms)
    p_lo, p_hi = np.empty(cells.shape), np.empty(cells.shape)
    repeat = _NO_REPEAT if ch.repeat is None else ch.repeat
    # at T = 1 the cell itself (its row's sum is of exp(l) too), else shifted as the row's cells are
    x, a = (logp, 1.0) if t == 1.0 else (cells, 1.0 / t)
    node_row, at = (ch.tree.node_row, _NO_OFFSETS) if isinstance(ch.tree, TreeLayout) else (_NO_ROWS, ch.pidx)
    edge_probs_loop(x, a, there, node_row, at, inv_zlo, inv_zhi, miss, repeat, t != 1.0, p_lo, p_hi)
    return p_lo, p_hi


def _walk(ch: _Chunk, p_lo: np.ndarray, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reach_lo, reach_hi [N+1, C]) of one chunk: rows in order (a TreeLayout: each row's children
    at once) or nodes in order (TreeColumns: each node's parent reach gathered per round)."""
    n1, c = p_lo.shape
    reach_lo, reach_hi = np.empty((n1, c)), np.empty((n1, c))
    reach_lo[0] = reach_hi[0] = 1.0
    if isinstance(ch.tree, TreeLayout):
        for e, kids in enumerate(ch.tree.children):
            at = ch.reach_index[e]
            lo, hi = (
                (reach_lo[at], reach_hi[at]) if isinstance(at, int) else (np.take(reach_lo, at), np.take(reach_hi, at))
            )
            if isinstance(kids, slice):  # views: no temporaries
                np.multiply(p_lo[kids], lo, out=reach_lo[kids])
                np.multiply(p_hi[kids], hi, out=reach_hi[kids])
            else:
                reach_lo[kids], reach_hi[kids] = p_lo[kids] * lo, p_hi[kids] * hi
    else:
        for u in range(1, n1):
            reach_lo[u] = np.take(reach_lo, ch.pidx[u]) * p_lo[u]
            reach_hi[u] = np.take(reach_hi, ch.pidx[u]) * p_hi[u]
    return reach_lo, reach_hi


def _exact_of(ch: _Chunk, t: float) -> np.ndarray:
    """[C] bool: the round is exact, decided by the dump's structure, never by lo == hi (docs/analysis.md
    "exact"): every edge out of a node the walk can reach has its probability determined by the rows.

    T = 0: always (the greedy replay reads each row's top-1). T > 0, an edge u is known when u repeats
    an earlier sibling's token (p = 0), when its parent's row has an empty tail (empty_tail: Z_T is the
    recorded sum, a missing child has p = 0), or when u's token is in the row and Z_T is known: at
    T = 1 (the recorded log-probs are a full softmax's, Z = 1: p = q), or where z_known. The walk can reach a node when every edge to it is
    known with p > 0 (a recorded child at a finite log-prob: p > 0 even where float64 underflows).
    The masks are child_cells' and repeat's, which the bounds use: a walk of booleans, no arithmetic.
    """
    n1, c = ch.tok.shape
    if t == 0.0 or n1 < 2:
        return np.ones(c, dtype=bool)
    if t != 1.0 and not ch.stats.z_known.any():  # top-K rows of a larger vocabulary: the usual case
        return np.zeros(c, dtype=bool)  # the root's first child (never a repeat) is not known
    there = ch.child_cells[2] > 0.0  # [N+1, C]: the child's token at a finite cell of its parent's row
    known = ch.per_edge(ch.stats.empty_tail)
    known |= there if t == 1.0 else there & ch.per_edge(ch.stats.z_known)
    if ch.repeat is not None:
        rep = ch.repeat == 0.0
        known |= rep
        there &= ~rep
    if known[1:].all():  # every edge known (T = 1, every child recorded): no walk needed
        return np.ones(c, dtype=bool)
    reach = np.empty(there.shape, dtype=bool)  # the walk can reach the node (row 0: the root)
    reach[0] = True
    blind = np.zeros(c, dtype=bool)  # some edge out of a reachable node is not known
    if isinstance(ch.tree, TreeLayout):
        for e, kids in enumerate(ch.tree.children):
            at = ch.reach_index[e]
            par = reach[at] if isinstance(at, int) else np.take(reach, at)
            blind |= (par & ~known[kids]).any(axis=0)
            reach[kids] = par & there[kids]
    else:
        for u in range(1, there.shape[0]):
            par = np.take(reach, ch.pidx[u])
            blind |= par & ~known[u]
            reach[u] = par & there[u]
    out: np.ndarray = ~blind
    return out


def _depth_sums(tree: TreeLayout | TreeColumns, lo: int, hi: int, reach: np.ndarray) -> np.ndarray:
    """[D+1, C] sum of the reach bounds at each depth: P(L >= d) before the tightening."""
    if isinstance(tree, TreeLayout):
        return np.stack([reach[idx].sum(axis=0) for idx in tree.depth_slices])
    depths = tree.depths[:, lo:hi]
    return np.stack([(reach * (depths == d)).sum(axis=0) for d in range(tree.num_depths)])


def _aggregate_chunk(sums_lo: np.ndarray, sums_hi: np.ndarray, exact: np.ndarray, out: tuple[np.ndarray, ...]) -> None:
    """Into out = (ge_lo, ge_hi [D+1, C], E lo, E hi, variance [C]), the chunk's columns of the
    outputs, from the per-depth sums of the reach bounds."""
    ge_lo, ge_hi, exp_lo, exp_hi, variance = out
    weights = 2.0 * np.arange(sums_lo.shape[0]) - 1.0  # E[L^2] = sum_n P(reach n) (2 depth(n) - 1)
    second = (sums_lo[1:] * weights[1:, None]).sum(axis=0)
    # Valid tightening: a probability is <= 1 and P(L >= d) does not grow with d.
    np.minimum(sums_hi, 1.0, out=sums_hi)
    ge_hi[0] = sums_hi[0]  # a running minimum over the few depths (minimum.accumulate on axis 0 runs slower)
    for d in range(1, sums_hi.shape[0]):
        np.minimum(ge_hi[d - 1], sums_hi[d], out=ge_hi[d])
    np.minimum(sums_lo, 1.0, out=sums_lo)
    np.minimum(sums_lo, ge_hi, out=ge_lo)
    np.sum(ge_lo[1:], axis=0, out=exp_lo)
    np.sum(ge_hi[1:], axis=0, out=exp_hi)
    second -= exp_lo**2
    np.maximum(second, 0.0, out=variance)
    variance += _NAN_UNLESS.take(exact.view(np.uint8))  # NaN where not exact, without a branch per round


def _chunks(
    tree: TreeLayout | TreeColumns,
    rows: RowReader,
    tokens: np.ndarray,
    row_node: list[RowNode],
    vocab_size: int | None,
    chunk_rounds: int,
) -> Iterator[_Chunk]:
    for lo in range(0, tokens.shape[1], chunk_rounds):
        hi = min(lo + chunk_rounds, tokens.shape[1])
        nodes = [v if isinstance(v, (int, np.integer)) else v[lo:hi] for v in row_node]
        yield _Chunk(tree, lo, hi, rows(lo, hi), tokens[:, lo:hi], nodes, vocab_size)


def _bounds_of(
    tree: TreeLayout | TreeColumns,
    chunks: Iterable[_Chunk],
    shape: tuple[int, int],
    t: float,
    vocab_size: int | None,
    keep_reach: bool,
) -> ColumnBounds:
    """ColumnBounds of R rounds at T from their chunks (prepared, or read one at a time)."""
    n1, r = shape
    dplus = len(tree.at_depth) if isinstance(tree, TreeLayout) else tree.num_depths
    out = {name: np.empty((n1, r)) for name in ("reach_lo", "reach_hi")} if keep_reach else {}
    ge_lo, ge_hi = np.empty((dplus, r)), np.empty((dplus, r))
    exp_lo, exp_hi, variance = np.empty(r), np.empty(r), np.empty(r)
    exact, problem = np.empty(r, dtype=bool), np.empty(r, dtype=np.int8)
    for ch in chunks:
        lo, hi = ch.lo, ch.hi
        if t > 0.0 and vocab_size is not None and int(vocab_size) < ch.ids.shape[1]:
            raise vocab_too_small(vocab_size, ch.ids.shape[1])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            terms = None if t == 0.0 else _row_scale(ch.stats, t)
            reach_lo, reach_hi = _walk(ch, *_edge_probs(ch, t, terms))
            ex = _exact_of(ch, t)
            if ex.any():  # one number: the two bounds' sums of the same terms differ only by rounding
                reach_hi[:, ex] = reach_lo[:, ex]
            sums = _depth_sums(tree, lo, hi, reach_lo), _depth_sums(tree, lo, hi, reach_hi)
            _aggregate_chunk(
                *sums, ex, (ge_lo[:, lo:hi], ge_hi[:, lo:hi], exp_lo[lo:hi], exp_hi[lo:hi], variance[lo:hi])
            )
        code = (
            ch.stats.problem if t > 0.0 else np.zeros(hi - lo, dtype=np.int8)
        )  # T = 0: scores not judged (docs/sampling.md)
        bad = code != PROBLEM_NONE  # rounds with a problem hold NaN everywhere
        exact[lo:hi], problem[lo:hi] = ex & ~bad, code
        if keep_reach:
            out["reach_lo"][:, lo:hi], out["reach_hi"][:, lo:hi] = reach_lo, reach_hi
        if bad.any():
            for arr in (ge_lo, ge_hi, exp_lo, exp_hi, variance, *out.values()):
                arr[..., lo:hi][..., bad] = np.nan
    needs_vocab = _lower_bounds_refused(t, vocab_size, exact, problem)
    return ColumnBounds(
        out.get("reach_lo"), out.get("reach_hi"), ge_lo, ge_hi, exp_lo, exp_hi, exact, variance, problem, needs_vocab
    )


def _lower_bounds_refused(t: float, vocab_size: int | None, exact: np.ndarray, problem: np.ndarray) -> bool:
    """Whether some usable round's lower bound at T > 1 was refused for want of the vocabulary size:
    a round whose walk reads no tail mass (every row names its whole distribution) is exact without it."""
    return t > 1.0 and vocab_size is None and bool((~exact & (problem == PROBLEM_NONE)).any())


@dataclass(frozen=True, eq=False)
class PreparedColumns:
    """R rounds of one tree layout read and prepared for ``bounds(T)`` at any number of T: the rows,
    chunk by chunk, with their T-independent statistics and each child's cell, found at the first T
    that needs them and kept (about 2.5 KB a round for the article tree at K = 16, the rows read included;
    column_bounds keeps nothing)."""

    tree: TreeLayout | TreeColumns
    shape: tuple[int, int]  # (N+1, R)
    chunks: tuple[_Chunk, ...]
    vocab_size: int | None

    def bounds(self, temperature: float, keep_reach: bool = False) -> ColumnBounds:
        t = check_temperature(temperature)
        return _bounds_of(self.tree, self.chunks, self.shape, t, self.vocab_size, keep_reach)


def prepare_columns(
    tree: TreeLayout | TreeColumns,
    rows: RowReader,
    tokens: np.ndarray,
    row_node: list[RowNode],
    vocab_size: int | None = None,
    chunk_rounds: int = CHUNK_ROUNDS,
) -> PreparedColumns:
    """column_bounds' rounds, read once for many temperatures (column_bounds' arguments)."""
    chunks = tuple(_chunks(tree, rows, tokens, row_node, vocab_size, chunk_rounds))
    return PreparedColumns(tree, (tokens.shape[0], tokens.shape[1]), chunks, vocab_size)


def column_bounds(
    tree: TreeLayout | TreeColumns,
    rows: RowReader,
    tokens: np.ndarray,
    row_node: list[RowNode],
    temperature: float,
    vocab_size: int | None = None,
    keep_reach: bool = False,
    chunk_rounds: int = CHUNK_ROUNDS,
) -> ColumnBounds:
    """The rule on column-major arrays of R rounds of one tree layout at one T, chunk by chunk (a
    chunk is read, used and dropped; prepare_columns keeps them for many T).

    rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C]): the expanded nodes' validate rows
      of rounds lo..hi, in the layout's row order (natural-log probabilities at T = 1)
    tokens: [N+1, R] int node tokens; row_node: per row, its node id (an int, or [R] per round)
    """
    t = check_temperature(temperature)
    chunks = _chunks(tree, rows, tokens, row_node, vocab_size, chunk_rounds)
    return _bounds_of(tree, chunks, (tokens.shape[0], tokens.shape[1]), t, vocab_size, keep_reach)


# One chunk of rounds lo..hi of one tree layout, as its maker has it: (lo, hi, (ids [E, K, C], logp
# [E, K, C], has [E, C]), tokens [N+1, C], per row its node: an int, or [C]).
ChunkInput = tuple[int, int, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, list[RowNode]]


def chunk_bounds(
    tree: TreeLayout,
    chunks: Iterable[ChunkInput],
    n1: int,
    rounds: int,
    temperature: float,
    vocab_size: int | None = None,
) -> ColumnBounds:
    """column_bounds on chunks its caller makes one at a time (the batch replay rebuilds each
    chunk's trees and reads its rows just before the rule needs them, in cache); chunks cover rounds
    0..rounds in order. Each chunk is used and dropped, as in column_bounds."""
    t = check_temperature(temperature)
    made = (_Chunk(tree, lo, hi, rows, tok, nodes, vocab_size) for lo, hi, rows, tok, nodes in chunks)
    return _bounds_of(tree, made, (n1, rounds), t, vocab_size, False)


@dataclass(frozen=True, eq=False)
class PreparedSampling:
    """sampling_bounds' R rounds grouped by tree and prepared once: ``bounds(T)`` at any number of T."""

    rounds: int
    n1: int
    dplus: int
    k: int
    vocab_size: int | None
    groups: tuple[tuple[np.ndarray, PreparedColumns], ...]  # (members, their prepared columns)

    def bounds(self, temperature: float) -> SamplingBounds:
        t = check_temperature(temperature)
        if t > 0.0 and self.vocab_size is not None and int(self.vocab_size) < self.k:
            raise vocab_too_small(self.vocab_size, self.k)
        r, n1, dplus = self.rounds, self.n1, self.dplus
        out = SamplingBounds(
            t,
            np.empty((r, n1)),
            np.empty((r, n1)),
            np.empty(r),
            np.empty(r),
            np.zeros((r, dplus)),  # deeper than a round's tree: 0
            np.zeros((r, dplus)),
            np.empty(r, dtype=bool),
            np.empty(r),
            np.empty(r, dtype=np.int8),
            False,  # set below, once every group's rounds are known
        )
        for members, prepared in self.groups:
            cb = prepared.bounds(t, keep_reach=True)
            assert cb.reach_lo is not None and cb.reach_hi is not None
            out.reach_lo[members], out.reach_hi[members] = cb.reach_lo.T, cb.reach_hi.T
            d = cb.length_ge_lo.shape[0]
            out.length_ge_lo[members, :d], out.length_ge_hi[members, :d] = cb.length_ge_lo.T, cb.length_ge_hi.T
            out.expected_lo[members], out.expected_hi[members] = cb.expected_lo, cb.expected_hi
            out.exact[members], out.variance[members], out.problem[members] = cb.exact, cb.variance, cb.problem
        bad = out.problem != PROBLEM_NONE
        out.length_ge_lo[bad] = out.length_ge_hi[bad] = np.nan
        return replace(out, needs_vocab=_lower_bounds_refused(t, self.vocab_size, out.exact, out.problem))


def prepare_sampling(
    tokens: np.ndarray,
    parents: np.ndarray,
    depths: np.ndarray,
    row_ids: np.ndarray,
    row_logp: np.ndarray,
    has_row: np.ndarray,
    vocab_size: int | None = None,
) -> PreparedSampling:
    """sampling_bounds' rounds (its arguments but T), grouped and laid out once for many T."""
    tokens = np.asarray(tokens, dtype=np.int64)
    r, n1 = tokens.shape
    parents = np.broadcast_to(np.asarray(parents, dtype=np.int64), (r, n1))
    depths = np.broadcast_to(np.asarray(depths, dtype=np.int64), (r, n1))
    row_ids, row_logp = np.asarray(row_ids), np.asarray(row_logp, dtype=np.float64)
    has_row = np.asarray(has_row, dtype=bool)
    dplus = int(depths.max()) + 1 if depths.size else 1
    groups = []
    for members, tree, ids, lp, has, row_node in _tree_groups(parents, depths, row_ids, row_logp, has_row):
        rows = lambda lo, hi, ids=ids, lp=lp, has=has: (ids[..., lo:hi], lp[..., lo:hi], has[:, lo:hi])  # noqa: E731
        tok = np.ascontiguousarray(tokens[members].T)
        groups.append((members, prepare_columns(tree, rows, tok, row_node, vocab_size)))
    return PreparedSampling(r, n1, dplus, row_ids.shape[2], vocab_size, tuple(groups))


def sampling_bounds(
    tokens: np.ndarray,
    parents: np.ndarray,
    depths: np.ndarray,
    row_ids: np.ndarray,
    row_logp: np.ndarray,
    has_row: np.ndarray,
    temperature: float,
    vocab_size: int | None = None,
) -> SamplingBounds:
    """Bounds on the walk's reach probabilities and accepted length for R rounds at temperature T.

    tokens, parents, depths: [R, N+1] int (tree order; parents[:, 0] = NO_PARENT, parents[:, u] < u)
    row_ids, row_logp: [R, N+1, K] the target's recorded top-K ids / natural-log probabilities at
      temperature 1 at each node (any values where has_row is False); PAD_TOKEN ids are ignored
    has_row: [R, N+1] bool, the dump holds the node's validate row (with scores)
    temperature: >= 0 (check_temperature); 0 is the greedy replay
    vocab_size: the target's vocabulary size; needed for the lower bounds at T > 1

    Round-major in, round-major out, through column_bounds' rule (which the batch replay calls
    directly on its column-major arrays): rounds of one tree together, or all rounds in one call
    that gathers each parent's row per round when the trees are many (_tree_groups). Many T of the
    same rounds: prepare_sampling once, then its bounds(T).
    """
    t = check_temperature(temperature)
    return prepare_sampling(tokens, parents, depths, row_ids, row_logp, has_row, vocab_size).bounds(t)


# sampling_bounds runs rounds of one tree together while a tree has this many rounds on average;
# with more distinct trees (sub-trees of a run, random trees) the fixed cost of a kernel call per
# tree would dominate, and every round goes through one call that gathers each parent's row.
ROUNDS_PER_TREE = 256


def _tree_groups(
    parents: np.ndarray, depths: np.ndarray, row_ids: np.ndarray, row_logp: np.ndarray, has_row: np.ndarray
) -> Iterator[tuple[np.ndarray, TreeLayout | TreeColumns, np.ndarray, np.ndarray, np.ndarray, list[RowNode]]]:
    """(members, layout, ids [E, K, M], logp, has [E, M], row nodes) per group of rounds, column-major."""
    r, n1 = parents.shape
    if not r or (parents == parents[0]).all():  # one tree (one round, or a batch of one shape)
        trees, which = parents[:1], np.zeros(r, dtype=np.int64)
    else:
        trees, which = unique_rows(parents)
    if trees.shape[0] > 1 and trees.shape[0] * ROUNDS_PER_TREE > r:
        expanded = np.zeros((r, n1), dtype=bool)  # only the expanded nodes' rows are judged and read
        expanded[np.repeat(np.arange(r), n1 - 1), parents[:, 1:].reshape(-1)] = True
        cols = TreeColumns(np.ascontiguousarray(parents.T), np.ascontiguousarray(depths.T))
        ids, lp = (
            np.ascontiguousarray(np.transpose(row_ids, (1, 2, 0))),
            np.ascontiguousarray(np.transpose(row_logp, (1, 2, 0))),
        )
        yield np.arange(r), cols, ids, lp, np.ascontiguousarray((has_row & expanded).T), []
        return
    for g, par in enumerate(trees):
        members = np.arange(r) if trees.shape[0] == 1 else np.flatnonzero(which == g)
        layout, expanded = _layout_of(tuple(int(v) for v in par), tuple(int(v) for v in depths[members[0]]))
        ids = np.ascontiguousarray(np.transpose(row_ids[members][:, expanded], (1, 2, 0)))
        lp = np.ascontiguousarray(np.transpose(row_logp[members][:, expanded], (1, 2, 0)))
        has = np.ascontiguousarray(has_row[members][:, expanded].T)
        yield members, layout, ids, lp, has, [int(v) for v in expanded]


@lru_cache(maxsize=4096)
def _layout_of(parents: tuple[int, ...], depths: tuple[int, ...]) -> tuple[TreeLayout, np.ndarray]:
    """The TreeLayout of one tree and its expanded nodes (its rows), once per tree: the per-round
    replay asks for the same few trees round after round."""
    par = np.asarray(parents, dtype=np.int64)
    expanded = np.unique(par[1:])  # tree order; each one's parent is expanded and earlier
    pos = np.zeros(par.shape[0], dtype=np.int64)
    pos[expanded] = np.arange(expanded.shape[0])
    return TreeLayout(pos[par[1:]], np.asarray(depths, dtype=np.int64)), expanded


def node_rows(
    tree_tokens_len: int, validate_ids: np.ndarray, validate_logp: np.ndarray, layout: str, expanded_order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map a round's validate rows onto its nodes: ids, log-probs [N+1, K] and has_row [N+1].

    layout "all": row u is node u; "parents": row i is the i-th expanded node (tree.expanded_order).
    """
    n1 = tree_tokens_len
    k = validate_ids.shape[1]
    ids = np.full((n1, k), PAD_TOKEN, dtype=np.int64)
    logp = np.full((n1, k), -np.inf)
    has = np.zeros(n1, dtype=bool)
    if layout == LAYOUT_ALL:
        m = min(n1, validate_ids.shape[0])
        ids[:m], logp[:m], has[:m] = validate_ids[:m], validate_logp[:m], True
    elif layout == LAYOUT_PARENTS:
        order = np.asarray(expanded_order, dtype=np.int64)[: validate_ids.shape[0]]
        ids[order], logp[order], has[order] = validate_ids[: order.shape[0]], validate_logp[: order.shape[0]], True
    else:
        raise ValueError(f"unknown validate layout {layout!r}: expected 'parents' or 'all'")
    return ids, logp, has


def round_bounds(
    tree: Tree,
    validate_ids: np.ndarray,
    validate_logp: np.ndarray,
    layout: str,
    temperature: float,
    vocab_size: int | None = None,
) -> SamplingBounds:
    """One round (a replay.core.tree.Tree and its validate rows with scores): SamplingBounds with R = 1."""
    ids, logp, has = node_rows(tree.tokens.shape[0], validate_ids, validate_logp, layout, tree.expanded_order)
    return sampling_bounds(
        tree.tokens[None],
        tree.parents[None],
        tree.depths[None],
        ids[None],
        logp[None],
        has[None],
        temperature,
        vocab_size,
    )


__all__ = [
    "NO_PARENT",
    "PROBLEM_WORDS",
    "PreparedSampling",
    "SamplingBounds",
    "VocabSize",
    "check_temperature",
    "node_rows",
    "prepare_sampling",
    "problem_words",
    "round_bounds",
    "row_problems",
    "sampling_bounds",
    "vocab_words",
]
