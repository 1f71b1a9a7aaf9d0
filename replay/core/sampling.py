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

The rule is written once, here, on arrays of R rounds (one round is R = 1); the per-round replay,
the batch replay and the API call ``sampling_bounds``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .tree import Tree
from .vocab import LAYOUT_ALL, LAYOUT_PARENTS, NO_PARENT, PAD_TOKEN

# Recorded probabilities are float32 log-softmax values: a row may sum to 1 + a few ulps.
ROW_SUM_TOLERANCE = 1e-5

# Per-round problem codes (0 = usable); callers skip such rounds with PROBLEM_WORDS[code].
PROBLEM_NONE, PROBLEM_NAN, PROBLEM_POSITIVE, PROBLEM_SUM = 0, 1, 2, 3
PROBLEM_WORDS = {
    PROBLEM_NAN: "a validate row used by the walk holds a NaN log-probability",
    PROBLEM_POSITIVE: "a validate row used by the walk holds a log-probability > 0 (or +inf)",
    PROBLEM_SUM: f"a validate row's probabilities sum to more than 1 (+{ROW_SUM_TOLERANCE:g})",
}


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


def _problems(row_logp: np.ndarray, used: np.ndarray) -> np.ndarray:
    """[R] problem code from the rows the walk reads (used: [R, N+1] bool)."""
    r = row_logp.shape[0]
    out = np.zeros(r, dtype=np.int8)
    lp = np.where(used[..., None], row_logp, -np.inf)
    with np.errstate(invalid="ignore"):
        total = np.exp(lp).sum(axis=2)  # NaN propagates; +inf gives inf
    nan = np.isnan(lp).any(axis=(1, 2))
    pos = (np.nan_to_num(lp, nan=-np.inf) > 0).any(axis=(1, 2))
    over = (np.nan_to_num(total, nan=0.0) > 1.0 + ROW_SUM_TOLERANCE).any(axis=1)
    out[over] = PROBLEM_SUM
    out[pos] = PROBLEM_POSITIVE
    out[nan] = PROBLEM_NAN
    return out


def _first_among_siblings(tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """[R, N+1] bool: no earlier sibling carries the same token (the walk moves to the first one)."""
    n1 = tokens.shape[1]
    first = np.ones(tokens.shape, dtype=bool)
    for u in range(2, n1):
        same = (parents[:, :u] == parents[:, u : u + 1]) & (tokens[:, :u] == tokens[:, u : u + 1])
        first[:, u] = ~same.any(axis=1)
    return first


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
    """
    t = check_temperature(temperature)
    tokens = np.asarray(tokens, dtype=np.int64)
    parents = np.asarray(parents, dtype=np.int64)
    depths = np.asarray(depths, dtype=np.int64)
    row_ids = np.asarray(row_ids, dtype=np.int64)
    row_logp = np.asarray(row_logp, dtype=np.float64)
    has_row = np.asarray(has_row, dtype=bool)
    r, n1 = tokens.shape
    parents = np.broadcast_to(parents, (r, n1))
    depths = np.broadcast_to(depths, (r, n1))
    k = row_ids.shape[2]
    if vocab_size is not None and int(vocab_size) < k:
        raise ValueError(f"vocab size {vocab_size}: smaller than the {k} recorded candidates per row")

    expanded = np.zeros((r, n1), dtype=bool)
    rows_idx = np.repeat(np.arange(r), n1 - 1)
    expanded[rows_idx, parents[:, 1:].reshape(-1)] = True
    # Only the expanded nodes' rows are read: keep those (E per round, expanded first), and index
    # them by each edge's parent position; a leaf's row is neither judged nor used.
    ri = np.arange(r)[:, None]
    n_exp = expanded.sum(axis=1)
    e = max(int(n_exp.max()) if r else 1, 1)
    order = np.argsort(~expanded, axis=1, kind="stable")[:, :e]  # [R, E] node ids
    slot_ok = np.arange(e)[None, :] < n_exp[:, None]
    row_ids, row_logp = row_ids[ri, order], row_logp[ri, order]  # [R, E, K]
    has_row = has_row[ri, order] & slot_ok
    pos_of = np.zeros((r, n1), dtype=np.int64)
    pos_of[ri, order] = np.arange(e)[None, :]

    valid = row_ids != PAD_TOKEN  # [R, E, K]
    lp = np.where(valid, row_logp, -np.inf)
    problem = _problems(lp, has_row)  # PAD_TOKEN cells are ignored: a padded batch fills them with NaN
    ok_edge = _first_among_siblings(tokens, parents)
    par = pos_of[ri, parents[:, 1:]]  # [R, N] each edge's parent row
    par_ids = row_ids[ri, par]  # [R, N, K]
    par_lp = lp[ri, par]
    par_has = has_row[ri, par]
    match = (par_ids == tokens[:, 1:, None]) & valid[ri, par]
    recorded = match.any(axis=2) & par_has
    child_lp = np.where(recorded, np.max(np.where(match, par_lp, -np.inf), axis=2), -np.inf)

    needs_vocab = False
    if t == 0.0:
        # Greedy: the child whose token is the row's first column (docs/analysis.md: T -> 0).
        top1 = np.where(par_has, par_ids[:, :, 0], PAD_TOKEN)
        p = ((top1 == tokens[:, 1:]) & (top1 != PAD_TOKEN)).astype(np.float64)
        p_lo = p_hi = p
    else:
        a = 1.0 / t
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lmax = np.max(lp, axis=2)  # [R, N+1]; -inf for an empty row
            lmin = np.min(np.where(valid, lp, np.inf), axis=2)
            mass = np.clip(1.0 - np.exp(lp).sum(axis=2), 0.0, 1.0)  # tail mass m at T = 1
            if vocab_size is not None:  # a row naming every token has no tail: m is rounding
                mass = np.where(valid.sum(axis=2) >= vocab_size, 0.0, mass)
            logm = np.log(mass)
            # Scaled by exp(-a * lmax) so that small T does not underflow.
            rec = np.exp(a * (lp - lmax[..., None])).sum(axis=2)  # recorded part of Z_T
            cap_lq = np.minimum(lmin, logm)  # a missing token's T=1 prob <= min(p_K, m)
            x_max = np.exp(a * (cap_lq - lmax))  # its scaled q^a
            if t == 1.0:
                s_lo = s_hi = np.exp(logm - lmax)
            elif t < 1.0:
                # q^a convex: sum over the tail of q^a <= m * p_K^(a-1); >= spread over V-K tokens.
                s_hi = np.exp(logm + (a - 1.0) * lmin - a * lmax)
                if vocab_size is not None and vocab_size > k:
                    rest = float(vocab_size - k)
                    s_lo = np.exp(math.log(rest) + a * (logm - math.log(rest)) - a * lmax)
                else:
                    s_lo = np.zeros_like(s_hi)
            else:
                # q^a concave (a < 1): sum >= m * p_K^(a-1) (each q <= p_K); <= spread over V-K.
                s_lo = np.exp(logm + (a - 1.0) * lmin - a * lmax)
                if vocab_size is not None:
                    rest = float(vocab_size - k)
                    s_hi = np.exp((1.0 - a) * math.log(rest) + a * logm - a * lmax) if rest > 0 else np.zeros_like(s_lo)
                else:
                    s_hi = np.full_like(s_lo, np.inf)
                    needs_vocab = True
            s_hi = np.nan_to_num(s_hi, nan=0.0, posinf=np.inf)
            # A row covering the whole vocabulary has no tail: its float residue m is rounding.
            s_lo = np.minimum(np.nan_to_num(s_lo, nan=0.0), s_hi)
            z_lo = rec + s_lo
            z_hi = rec + s_hi
            num = np.exp(a * (child_lp - lmax[ri, par]))  # [R, N], 0 when not recorded
            if t == 1.0:
                exact_p = np.exp(child_lp)  # Z = 1: the recorded probability itself
                rec_lo = rec_hi = exact_p
            else:
                rec_hi = num / z_lo[ri, par]
                rec_lo = np.where(np.isinf(z_hi[ri, par]), 0.0, num / z_hi[ri, par])
            # A missing child: p <= x/(R + max(x, S_lo)) and <= the tail's share S_hi/(R + S_hi).
            xm = x_max[ri, par]
            zr = rec[ri, par]
            share = np.where(np.isinf(s_hi[ri, par]), 1.0, s_hi[ri, par] / (zr + s_hi[ri, par]))
            miss_hi = np.minimum(xm / (zr + np.maximum(xm, s_lo[ri, par])), share)
            miss_hi = np.nan_to_num(miss_hi, nan=0.0)
        p_lo = np.where(recorded, rec_lo, 0.0)
        p_hi = np.where(recorded, rec_hi, np.where(par_has, miss_hi, 1.0))  # no row: anything in [0, 1]
        p_lo = np.clip(np.nan_to_num(p_lo, nan=0.0), 0.0, 1.0)
        p_hi = np.clip(np.nan_to_num(p_hi, nan=1.0), 0.0, 1.0)
    dup = ~ok_edge[:, 1:]
    p_lo = np.where(dup, 0.0, p_lo)
    p_hi = np.where(dup, 0.0, p_hi)

    reach_lo = np.ones((r, n1))
    reach_hi = np.ones((r, n1))
    for u in range(1, n1):
        pu = parents[:, u]
        reach_lo[:, u] = reach_lo[np.arange(r), pu] * p_lo[:, u - 1]
        reach_hi[:, u] = reach_hi[np.arange(r), pu] * p_hi[:, u - 1]
    return _aggregate(t, reach_lo, reach_hi, p_lo, p_hi, parents, depths, problem, needs_vocab)


def _aggregate(
    t: float,
    reach_lo: np.ndarray,
    reach_hi: np.ndarray,
    p_lo: np.ndarray,
    p_hi: np.ndarray,
    parents: np.ndarray,
    depths: np.ndarray,
    problem: np.ndarray,
    needs_vocab: bool,
) -> SamplingBounds:
    r, n1 = reach_lo.shape
    dmax = int(depths.max()) if depths.size else 0
    ge_lo = np.zeros((r, dmax + 1))
    ge_hi = np.zeros((r, dmax + 1))
    for d in range(dmax + 1):
        at = depths == d
        ge_lo[:, d] = np.where(at, reach_lo, 0.0).sum(axis=1)
        ge_hi[:, d] = np.where(at, reach_hi, 0.0).sum(axis=1)
    # Valid tightening: a probability is <= 1 and P(L >= d) does not grow with d.
    ge_lo = np.minimum(ge_lo, 1.0)
    ge_hi = np.minimum.accumulate(np.minimum(ge_hi, 1.0), axis=1)
    ge_lo = np.minimum(ge_lo, ge_hi)
    exp_lo = ge_lo[:, 1:].sum(axis=1)
    exp_hi = ge_hi[:, 1:].sum(axis=1)
    # Exact when every edge out of a node the walk can reach has lo == hi.
    reach_par_hi = reach_hi[np.arange(r)[:, None], parents[:, 1:]]
    exact = ~((p_hi > p_lo) & (reach_par_hi > 0)).any(axis=1)
    second = (reach_lo[:, 1:] * (2.0 * depths[:, 1:] - 1.0)).sum(axis=1)
    variance = np.where(exact, np.maximum(second - exp_lo**2, 0.0), np.nan)
    bad = problem != PROBLEM_NONE
    if bad.any():
        for arr in (reach_lo, reach_hi, ge_lo, ge_hi):
            arr[bad] = np.nan
        exp_lo = np.where(bad, np.nan, exp_lo)
        exp_hi = np.where(bad, np.nan, exp_hi)
        exact = exact & ~bad
        variance = np.where(bad, np.nan, variance)
    return SamplingBounds(t, reach_lo, reach_hi, exp_lo, exp_hi, ge_lo, ge_hi, exact, variance, problem, needs_vocab)


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
    "check_temperature",
    "node_rows",
    "round_bounds",
    "sampling_bounds",
]
