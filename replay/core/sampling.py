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

The rule is written once: ``column_bounds`` (replay.core.sampling_columns) on column-major arrays
of rounds that share one tree layout (the round axis last, as in the greedy batch kernel, so every
operation runs on contiguous vectors over rounds; the batch replay calls it on its own arrays), and
here ``sampling_bounds`` on round-major arrays of R rounds (one round is R = 1), which groups the
rounds by tree and calls ``column_bounds``. What a
row gives that does not depend on T (its statistics, replay.core.sampling_rows; each child's cell
in it) is found once per chunk of rounds; ``prepare_columns`` / ``prepare_sampling`` keep it for
many T (the report's curve), so that the rule at T takes one exponential per recorded cell and no
lookup. The temperature's rule is replay.core.temperature; a row's problem codes and the
vocabulary size's words, replay.core.sampling_problems.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from replay.util.rows import unique_rows

from .sampling_columns import PreparedColumns, RowNode, TreeLayout, lower_bounds_refused, prepare_columns
from .sampling_problems import PROBLEM_NONE, vocab_too_small
from .temperature import check_temperature
from .vocab import NO_PARENT


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
        return replace(out, needs_vocab=lower_bounds_refused(t, self.vocab_size, out.exact, out.problem))

    def blind_edges(self, temperature: float) -> np.ndarray:
        """[R, N+1] bool: each round's edges that the walk at T can reach and the rows do not determine
        (a round is exact where it has none: replay.core.sampling_columns._blind_edges)."""
        out = np.zeros((self.rounds, self.n1), dtype=bool)
        for members, prepared in self.groups:
            out[members] = prepared.blind_edges(temperature).T
        return out


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
) -> Iterator[tuple[np.ndarray, TreeLayout, np.ndarray, np.ndarray, np.ndarray, list[RowNode]]]:
    """(members, layout, ids [E, K, M], logp, has [E, M], row nodes) per group of rounds, column-major."""
    r, n1 = parents.shape
    if not r or (parents == parents[0]).all():  # one tree (one round, or a batch of one shape)
        trees, which = parents[:1], np.zeros(r, dtype=np.int64)
    else:
        trees, which = unique_rows(parents)
    if trees.shape[0] > 1 and trees.shape[0] * ROUNDS_PER_TREE > r:
        expanded = np.zeros((r, n1), dtype=bool)  # only the expanded nodes' rows are judged and read
        expanded[np.repeat(np.arange(r), n1 - 1), parents[:, 1:].reshape(-1)] = True
        cols = TreeLayout.per_round(parents.T, depths.T)
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
    """The shared TreeLayout of one tree and its expanded nodes (its rows, in tree order), once per
    tree: the per-round replay asks for the same few trees round after round."""
    par = np.asarray(parents, dtype=np.int64)
    expanded = np.unique(par[1:])  # tree order; each one's parent is expanded and earlier
    pos = np.zeros(par.shape[0], dtype=np.int64)
    pos[expanded] = np.arange(expanded.shape[0])
    return TreeLayout(pos[np.maximum(par, 0)], np.asarray(depths, dtype=np.int64)), expanded


__all__ = [
    "NO_PARENT",
    "PreparedSampling",
    "SamplingBounds",
    "prepare_sampling",
    "sampling_bounds",
]
