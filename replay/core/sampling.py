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
by tree and calls ``column_bounds``; the per-round replay and the API go through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from .tree import Tree
from .vocab import LAYOUT_ALL, LAYOUT_PARENTS, NO_PARENT, PAD_TOKEN

# Recorded probabilities are float32 log-softmax values: a row may sum to 1 + a few ulps.
ROW_SUM_TOLERANCE = 1e-5

# Per-round problem codes (0 = usable); callers skip such rounds with PROBLEM_WORDS[code].
PROBLEM_NONE, PROBLEM_NAN, PROBLEM_POSITIVE, PROBLEM_SUM, PROBLEM_VOCAB = 0, 1, 2, 3, 4
PROBLEM_WORDS = {
    PROBLEM_NAN: "a validate row used by the walk holds a NaN log-probability",
    PROBLEM_POSITIVE: "a validate row used by the walk holds a log-probability > 0 (or +inf)",
    PROBLEM_SUM: f"a validate row's probabilities sum to more than 1 (+{ROW_SUM_TOLERANCE:g})",
    # m > (V - n) * q_min: the V - n unnamed tokens, each at most the row's smallest p, cannot hold m
    PROBLEM_VOCAB: "a validate row contradicts the vocabulary size: its unrecorded mass 1 - sum(p) is more than "
    "the V - n tokens it does not name can hold (each at most its smallest p; a row naming all V tokens must sum to 1)",
}


class VocabSize(int):
    """A vocabulary size that remembers where it came from ("--vocab-size", "manifest.json vocab_size"):
    a message about a row that contradicts it names the source (the user fixes that one)."""

    source: str

    def __new__(cls, value: int, source: str) -> VocabSize:
        out = super().__new__(cls, value)
        out.source = source
        return out


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
        raise ValueError(f"temperature: expected a number >= 0, got {value!r}")
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"temperature: expected a number >= 0, got {value!r}") from None
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"temperature: expected a finite number >= 0 (0 = greedy), got {value!r}")
    return t


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
    exact: np.ndarray  # [R] bool: every edge the walk can take has an exact probability
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

# Below this many rounds (one round of the per-round replay) numpy's per-call cost dominates:
# the child lookup then takes one [g, K, C] comparison instead of one call per column.
SMALL_CHUNK = 64

# One row's node id: the same for every round (an int), or per round ([R] int).
RowNode = int | np.ndarray
# rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C]) of rounds lo..hi: column_bounds' row reader.
RowReader = Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]

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
    def at_depth(self) -> tuple[np.ndarray, ...]:
        return tuple(np.flatnonzero(self.depths == d) for d in range(int(self.depths.max()) + 1))


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
class _RowTerms:
    """What an edge needs from its parent's row, per row and round ([E, C]; w is [E, K, C])."""

    w: np.ndarray | None  # each cell's q^a scaled by the row's e^(-a * shift), 0 at PAD and without a row
    inv_zlo: np.ndarray  # a recorded child's p_hi = w * inv_zlo (1 / (R + S_lo))
    inv_zhi: np.ndarray  # its p_lo = w * inv_zhi (1 / (R + S_hi); 0 when S_hi is unbounded)
    miss_hi: np.ndarray  # p_hi of a child missing from the row; 1 without a row, 0 for an empty row
    top1: np.ndarray  # the row's first column (T = 0); _NO_TOKEN without a row or for PAD
    problem: np.ndarray  # [C] int8 PROBLEM_* of the round, from its rows that are there
    needs_vocab: bool


def _row_problem(total: np.ndarray, lmax: np.ndarray, has: np.ndarray, room: np.ndarray | None = None) -> np.ndarray:
    """[C] problem code from each row's sum of q and largest log-prob (PAD cells already -inf).

    A NaN cell makes the sum NaN (exp(NaN) is NaN; no cell adds -inf), a positive (or +inf) cell
    makes the maximum > 0, and the order NaN, positive, sum, vocabulary is the order of precedence.
    room: with a vocabulary size V, the most mass the V - n unnamed tokens can hold, (V - n) * q_min;
    a row whose tail mass 1 - total exceeds it (a row naming all V tokens summing below 1) has no
    distribution behind it, and no bound drawn from it would mean anything.
    """
    nan = (np.isnan(total) & has).any(axis=0)
    pos = ((lmax > 0) & has).any(axis=0)
    over = ((total > 1.0 + ROW_SUM_TOLERANCE) & has).any(axis=0)
    out: np.ndarray = np.where(over, np.int8(PROBLEM_SUM), np.int8(PROBLEM_NONE))
    if room is not None:
        short = ((1.0 - total > room + ROW_SUM_TOLERANCE) & has).any(axis=0)
        out[short & ~over] = PROBLEM_VOCAB
    out[pos] = PROBLEM_POSITIVE
    out[nan] = PROBLEM_NAN
    return out


def row_problems(ids: np.ndarray, logp: np.ndarray, vocab_size: int | None = None) -> np.ndarray:
    """[M] PROBLEM_* code of each of M validate rows (ids, logp [M, K]) at a temperature > 0: the
    kernel's judgement (_row_terms) row by row, so that a message can name the row it found."""
    ids, logp = np.asarray(ids), np.asarray(logp, dtype=np.float64)
    has = np.ones((1, ids.shape[0]), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return _row_terms(ids.T[None], logp.T[None], has, 1.0, vocab_size).problem


def _tail_bounds(
    t: float, rest: np.ndarray | None, logm: np.ndarray, lmin: np.ndarray, shift: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """(S_lo, S_hi): the unrecorded tokens' part of Z_T, scaled by e^(-a * shift) like the row's cells.

    docs/analysis.md "What a row gives": the tail holds mass m, each of its tokens q <= q_K.
    rest: per row, V - n, the number of tokens the row does not name (None without V).
    """
    a = 1.0 / t
    if t == 1.0:
        s = np.exp(logm - shift)
        return s, s
    # The tail packed into as few tokens as it can: j = floor(m / q_K) tokens at q_K and one at the
    # rest r. sum q^a over {0 <= q <= q_K, sum q = m} is convex for T < 1 (a maximum, at a vertex:
    # this one) and concave for T > 1 (a minimum, there too); it is at most m * q_K^(a-1) for T < 1
    # and equals m^a for a tail of one token (V - n = 1: Z known). A row with a -inf cell has
    # q_K = 0: its tail is empty (the scalar reference's `if qk > 0`).
    qk, m = np.exp(lmin), np.exp(logm)
    j = np.floor(m / qk)
    r = np.clip(m - j * qk, 0.0, qk)
    packed = j * np.exp(a * (lmin - shift)) + np.exp(a * (np.log(r) - shift))
    edge = np.where(lmin == -np.inf, 0.0, np.where(m > 0, packed, 0.0))
    if t < 1.0:
        if rest is None:
            return np.zeros_like(edge), edge
        # at least the tail spread evenly over the V-n unrecorded tokens (Jensen), else 0
        lr = np.log(rest)
        return np.where(rest > 0, np.exp(lr + a * (logm - lr) - a * shift), 0.0), edge
    if rest is None:  # T > 1 without V: the tail could be spread over any number of tokens
        return edge, np.full_like(edge, np.inf)
    s_hi = np.where(rest > 0, np.exp((1.0 - a) * np.log(rest) + a * logm - a * shift), 0.0)
    return np.where(rest > 0, edge, 0.0), s_hi  # at most the power mean over V-n tokens


def _row_terms(ids: np.ndarray, lp: np.ndarray, has: np.ndarray, t: float, vocab_size: int | None) -> _RowTerms:
    """Per-row statistics, once per row and round: the edges then need one lookup each.

    ids, lp: [E, K, C] (lp float32 or float64; every sum and exp in float64); has: [E, C].
    """
    k = ids.shape[1]
    # One pass tells most chunks they have no PAD cell (PAD_TOKEN is the only negative id).
    pad = ids == PAD_TOKEN if ids.min(initial=0) < 0 else np.zeros((1, 1, 1), dtype=bool)
    any_pad = bool(pad.any())
    if any_pad:  # a padded batch fills PAD cells with NaN: they are not cells of the row
        lp = np.where(pad, -np.inf, lp)
    top1 = np.where(has & (ids[:, 0] != PAD_TOKEN), ids[:, 0].astype(np.int64), _NO_TOKEN)
    if t == 0.0:  # the greedy walk reads only each row's top-1: the scores are not judged (README)
        ones = np.ones(top1.shape)
        return _RowTerms(None, ones, ones, ones, top1, np.zeros(top1.shape[1], dtype=np.int8), False)
    lmax = lp.max(axis=1).astype(np.float64)  # max/min are exact in float32: convert after
    q = np.exp(lp, dtype=np.float64)
    total = q.sum(axis=1)
    a = 1.0 / t
    lmin = (np.where(pad, np.inf, lp) if any_pad else lp).min(axis=1).astype(np.float64)
    rest = None  # per row, the V - n tokens it does not name (n: its non-PAD cells)
    if vocab_size is not None:
        rest = (float(vocab_size) - ((~pad).sum(axis=1) if any_pad else k)) * np.ones_like(total)
    room = None  # the most mass the unnamed tokens can hold; a zero cell means an empty tail (below), not judged
    if rest is not None:
        room = np.where(rest > 0, np.where(lmin == -np.inf, np.inf, rest * np.exp(lmin)), 0.0)
    problem = _row_problem(total, lmax, has, room)
    mass = np.maximum(1.0 - total, 0.0)  # tail mass m at T = 1 (total >= 0: m <= 1)
    if rest is not None:  # a row naming every token has no tail: its m (within tolerance) is rounding
        mass = np.where(rest > 0, mass, 0.0)
    logm = np.log(mass)
    if t == 1.0:  # q itself: Z = 1, nothing to rescale
        w, shift, rec = q, 0.0, total
    else:  # q^a / q_max^a: small T does not underflow the top cells
        w = np.subtract(lp, lmax[:, None, :], dtype=np.float64)
        w *= a
        np.exp(w, out=w)
        shift, rec = lmax, w.sum(axis=1)
    s_lo, s_hi = _tail_bounds(t, rest, logm, lmin, shift)
    s_hi = np.fmax(s_hi, 0.0)  # NaN (0 * inf in a degenerate row) -> 0; fmax keeps +inf
    s_lo = np.minimum(np.fmax(s_lo, 0.0), s_hi)
    if t == 1.0:  # a recorded child's probability is its q exactly
        inv_zlo = inv_zhi = np.ones_like(rec)
    else:
        inv_zlo, inv_zhi = 1.0 / (rec + s_lo), 1.0 / (rec + s_hi)  # 1/inf = 0: no lower bound
    # A missing child: its q <= min(q_K, m) and its q^a is part of S, so p <= x/(R + max(x, S_lo));
    # and p <= the tail's share S_hi / (R + S_hi).
    x = np.exp(a * (np.minimum(lmin, logm) - shift))
    share = np.where(np.isinf(s_hi), 1.0, s_hi / (rec + s_hi))
    miss = np.fmax(np.minimum(x / (rec + np.maximum(x, s_lo)), share), 0.0)  # NaN -> 0
    # An empty row (every cell PAD or -inf) gives p = 0 (the reference's q_K = 0); no row, p in [0, 1].
    # Neither records anything: weights and 1/Z (NaN there: no scale) are set to 0.
    empty = lmax == -np.inf
    miss = np.where(has, np.where(empty, 0.0, miss), 1.0)
    dead = empty | ~has
    if dead.any():
        w = np.where(dead[:, None, :], 0.0, w)
        inv_zlo, inv_zhi = np.where(dead, 0.0, inv_zlo), np.where(dead, 0.0, inv_zhi)
    return _RowTerms(w, inv_zlo, inv_zhi, miss, top1, problem, t > 1.0 and vocab_size is None)


def _first_weights(ids: np.ndarray, w: np.ndarray, tok: np.ndarray) -> np.ndarray:
    """[g, C] the weight of the first cell of a row ([K, C]) carrying each child's token, else 0.

    One comparison per (column, child) on vectors over rounds; walking the columns from the last
    to the first leaves the first match (the scalar reference's rule for a row naming a token twice).
    """
    if tok.shape[1] < SMALL_CHUNK:  # few rounds: one broadcast comparison, fewer numpy calls
        hit = tok[:, None, :] == ids[None]  # [g, K, C]
        first = np.argmax(hit, axis=1)[:, None, :]  # the first True, 0 when none
        cell = np.take_along_axis(np.broadcast_to(w[None], hit.shape), first, axis=1)[:, 0]
        return np.where(hit.any(axis=1), cell, 0.0)
    num = np.zeros(tok.shape)
    hit = np.empty(tok.shape, dtype=bool)
    for c in range(ids.shape[0] - 1, -1, -1):
        np.equal(tok, ids[c], out=hit)
        np.copyto(num, w[c], where=hit)
    return num


def _edge_bounds(
    rt: _RowTerms, row: int | tuple[np.ndarray, ...], ids: np.ndarray, tok: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(p_lo, p_hi) [g, C] of the edges from one row to children with tokens tok [g, C].

    row: the row's index e (every round), or per round the index arrays of its cells ([K, C] each,
    built by _walk_trees). A recorded child has weight > 0 or is recorded with q^a = 0; in the second
    case x_max <= its weight is 0 as well, so taking it for missing gives the same [0, 0]: "weight
    > 0" is the test.
    """
    at = row if isinstance(row, int) else (row[0][0], row[2][0])  # the row's [C] terms
    if rt.w is None:  # T = 0: the child carrying the row's top-1
        p_lo = (tok == rt.top1[at]).astype(np.float64)
        return p_lo, p_lo
    num = _first_weights(ids[row], rt.w[row], tok)
    p_lo = np.minimum(num * rt.inv_zhi[at], 1.0)
    p_hi = np.where(num > 0.0, np.minimum(num * rt.inv_zlo[at], 1.0), rt.miss_hi[at])
    return p_lo, p_hi


def _without_repeats(p_lo: np.ndarray, p_hi: np.ndarray, repeat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A child with an earlier sibling's token is never reached (the walk moves to the first): p = 0."""
    if not repeat.any():
        return p_lo, p_hi
    return np.where(repeat, 0.0, p_lo), np.where(repeat, 0.0, p_hi)


def _as_ids_type(tokens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The tokens in the rows' integer type when they fit: comparing int32 with int32 runs about a
    third faster than int64 with int32 (measured), and an int32 dump's rows are int32."""
    if ids.dtype == tokens.dtype or ids.dtype.kind not in "iu" or not tokens.size:
        return tokens
    info = np.iinfo(ids.dtype)
    if tokens.min() < info.min or tokens.max() > info.max:  # would wrap: compare in int64
        return tokens
    return tokens.astype(ids.dtype)


def _reach_of(reach: np.ndarray, node: RowNode) -> np.ndarray:
    """[C] reach of one node per round (node: one id for all rounds, or [C] ids)."""
    if isinstance(node, (int, np.integer)):
        one: np.ndarray = reach[int(node)]
        return one
    c = reach.shape[1]
    return np.asarray(np.take(reach.reshape(-1), node * c + np.arange(c)))


def _walk_chunk(
    tree: TreeLayout, ids: np.ndarray, rt: _RowTerms, tokens: np.ndarray, row_node: list[RowNode]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reach_lo, reach_hi [N+1, C], exact [C]) of one chunk: rows in order, each row's children at once."""
    n1, c = tree.depths.shape[0], tokens.shape[1]
    reach_lo, reach_hi = np.ones((n1, c)), np.ones((n1, c))
    inexact = np.zeros(c, dtype=bool)
    for e, kids in enumerate(tree.children):
        tok = tokens[kids]
        p_lo, p_hi = _edge_bounds(rt, e, ids, tok)
        repeat = np.zeros(tok.shape, dtype=bool)
        for j in range(1, tok.shape[0]):
            repeat[j] = (tok[:j] == tok[j]).any(axis=0)
        p_lo, p_hi = _without_repeats(p_lo, p_hi, repeat)
        par_lo, par_hi = _reach_of(reach_lo, row_node[e]), _reach_of(reach_hi, row_node[e])
        reach_lo[kids] = par_lo * p_lo
        reach_hi[kids] = par_hi * p_hi
        # exact when every edge out of a node the walk can reach has lo == hi
        inexact |= ((p_hi > p_lo) & (par_hi > 0)).any(axis=0)
    return reach_lo, reach_hi, ~inexact


def _walk_trees(
    tree: TreeColumns, lo: int, hi: int, ids: np.ndarray, rt: _RowTerms, tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_walk_chunk for trees that differ per round: node by node, each edge's parent row gathered."""
    parents = tree.parents[:, lo:hi]
    n1, c = parents.shape
    k = ids.shape[1]
    reach_lo, reach_hi = np.ones((n1, c)), np.ones((n1, c))
    inexact = np.zeros(c, dtype=bool)
    cell, col = np.arange(k)[:, None], np.arange(c)[None, :]
    for u in range(1, n1):
        par = parents[u]
        row = (np.broadcast_to(par[None, :], (k, c)), np.broadcast_to(cell, (k, c)), np.broadcast_to(col, (k, c)))
        p_lo, p_hi = _edge_bounds(rt, row, ids, tokens[u : u + 1])
        repeat = ((parents[1:u] == par) & (tokens[1:u] == tokens[u])).any(axis=0)
        p_lo, p_hi = _without_repeats(p_lo[0], p_hi[0], repeat)
        par_lo, par_hi = _reach_of(reach_lo, par), _reach_of(reach_hi, par)
        reach_lo[u], reach_hi[u] = par_lo * p_lo, par_hi * p_hi
        inexact |= (p_hi > p_lo) & (par_hi > 0)
    return reach_lo, reach_hi, ~inexact


def _depth_sums(tree: TreeLayout | TreeColumns, lo: int, hi: int, reach: np.ndarray) -> np.ndarray:
    """[D+1, C] sum of the reach bounds at each depth: P(L >= d) before the tightening."""
    if isinstance(tree, TreeLayout):
        return np.stack([reach[idx].sum(axis=0) for idx in tree.at_depth])
    depths = tree.depths[:, lo:hi]
    return np.stack([np.where(depths == d, reach, 0.0).sum(axis=0) for d in range(tree.num_depths)])


def _aggregate_chunk(ge_lo: np.ndarray, ge_hi: np.ndarray, exact: np.ndarray) -> tuple[np.ndarray, ...]:
    """(ge_lo, ge_hi [D+1, C], E lo, E hi, variance [C]) from the per-depth sums of the reach bounds."""
    weights = 2.0 * np.arange(ge_lo.shape[0]) - 1.0  # E[L^2] = sum_n P(reach n) (2 depth(n) - 1)
    second = (ge_lo[1:] * weights[1:, None]).sum(axis=0)
    # Valid tightening: a probability is <= 1 and P(L >= d) does not grow with d.
    ge_lo = np.minimum(ge_lo, 1.0)
    ge_hi = np.minimum.accumulate(np.minimum(ge_hi, 1.0), axis=0)
    ge_lo = np.minimum(ge_lo, ge_hi)
    exp_lo, exp_hi = ge_lo[1:].sum(axis=0), ge_hi[1:].sum(axis=0)
    variance = np.where(exact, np.maximum(second - exp_lo**2, 0.0), np.nan)
    return ge_lo, ge_hi, exp_lo, exp_hi, variance


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
    """The rule on column-major arrays of R rounds of one tree layout, chunk by chunk.

    rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C]): the expanded nodes' validate rows
      of rounds lo..hi, in the layout's row order (natural-log probabilities at T = 1)
    tokens: [N+1, R] int node tokens; row_node: per row, its node id (an int, or [R] per round)
    """
    t = check_temperature(temperature)
    n1, r = tokens.shape
    dplus = len(tree.at_depth) if isinstance(tree, TreeLayout) else tree.num_depths
    out = {name: np.empty((n1, r)) for name in ("reach_lo", "reach_hi")} if keep_reach else {}
    ge_lo, ge_hi = np.empty((dplus, r)), np.empty((dplus, r))
    exp_lo, exp_hi, variance = np.empty(r), np.empty(r), np.empty(r)
    exact, problem = np.empty(r, dtype=bool), np.empty(r, dtype=np.int8)
    needs_vocab = t > 1.0 and vocab_size is None
    for lo in range(0, r, chunk_rounds):
        hi = min(lo + chunk_rounds, r)
        ids, lp, has = rows(lo, hi)
        if t > 0.0 and vocab_size is not None and int(vocab_size) < ids.shape[1]:
            raise ValueError(f"{vocab_words(vocab_size)}: smaller than the {ids.shape[1]} recorded candidates per row")
        nodes = [v if isinstance(v, (int, np.integer)) else v[lo:hi] for v in row_node]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            rt = _row_terms(ids, lp, has, t, vocab_size)
            tok = _as_ids_type(tokens[:, lo:hi], ids)
            if isinstance(tree, TreeLayout):
                reach_lo, reach_hi, ex = _walk_chunk(tree, ids, rt, tok, nodes)
            else:
                reach_lo, reach_hi, ex = _walk_trees(tree, lo, hi, ids, rt, tok)
            sums = _depth_sums(tree, lo, hi, reach_lo), _depth_sums(tree, lo, hi, reach_hi)
            parts = _aggregate_chunk(*sums, ex)
        bad = rt.problem != PROBLEM_NONE  # rounds with a problem hold NaN everywhere
        ge_lo[:, lo:hi], ge_hi[:, lo:hi], exp_lo[lo:hi], exp_hi[lo:hi], variance[lo:hi] = parts
        exact[lo:hi], problem[lo:hi] = ex & ~bad, rt.problem
        if keep_reach:
            out["reach_lo"][:, lo:hi], out["reach_hi"][:, lo:hi] = reach_lo, reach_hi
        if bad.any():
            for arr in (ge_lo, ge_hi, exp_lo, exp_hi, variance, *out.values()):
                arr[..., lo:hi][..., bad] = np.nan
    return ColumnBounds(
        out.get("reach_lo"), out.get("reach_hi"), ge_lo, ge_hi, exp_lo, exp_hi, exact, variance, problem, needs_vocab
    )


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

    Round-major in, round-major out, through column_bounds (which the batch replay calls directly
    on its column-major arrays): rounds of one tree together, or all rounds in one call that
    gathers each parent's row per round when the trees are many (_tree_groups).
    """
    t = check_temperature(temperature)
    tokens = np.asarray(tokens, dtype=np.int64)
    r, n1 = tokens.shape
    parents = np.broadcast_to(np.asarray(parents, dtype=np.int64), (r, n1))
    depths = np.broadcast_to(np.asarray(depths, dtype=np.int64), (r, n1))
    row_ids, row_logp = np.asarray(row_ids), np.asarray(row_logp, dtype=np.float64)
    has_row = np.asarray(has_row, dtype=bool)
    k = row_ids.shape[2]
    if t > 0.0 and vocab_size is not None and int(vocab_size) < k:
        raise ValueError(f"{vocab_words(vocab_size)}: smaller than the {k} recorded candidates per row")
    dplus = int(depths.max()) + 1 if depths.size else 1
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
        t > 1.0 and vocab_size is None,
    )
    for members, tree, ids, lp, has, row_node in _tree_groups(parents, depths, row_ids, row_logp, has_row):
        cb = column_bounds(
            tree,
            lambda lo, hi: (ids[..., lo:hi], lp[..., lo:hi], has[:, lo:hi]),
            np.ascontiguousarray(tokens[members].T),
            row_node,
            t,
            vocab_size,
            keep_reach=True,
        )
        assert cb.reach_lo is not None and cb.reach_hi is not None
        out.reach_lo[members], out.reach_hi[members] = cb.reach_lo.T, cb.reach_hi.T
        d = cb.length_ge_lo.shape[0]
        out.length_ge_lo[members, :d], out.length_ge_hi[members, :d] = cb.length_ge_lo.T, cb.length_ge_hi.T
        out.expected_lo[members], out.expected_hi[members] = cb.expected_lo, cb.expected_hi
        out.exact[members], out.variance[members], out.problem[members] = cb.exact, cb.variance, cb.problem
    bad = out.problem != PROBLEM_NONE
    out.length_ge_lo[bad] = out.length_ge_hi[bad] = np.nan
    return out


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
        trees, which = np.unique(parents, axis=0, return_inverse=True)
        which = which.reshape(-1)
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
    "SamplingBounds",
    "VocabSize",
    "check_temperature",
    "node_rows",
    "problem_words",
    "round_bounds",
    "row_problems",
    "sampling_bounds",
    "vocab_words",
]
