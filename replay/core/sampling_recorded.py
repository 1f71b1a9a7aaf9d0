"""Sampling-mode acceptance from recorded node log-probabilities: exact at a recorded temperature.

A live dump records, beside the top-K rows, each node's own log-probability under its parent at
the temperatures listed in its manifest (validate ``node_logprobs``, docs/dump-format.md "Node
log-probabilities"). At such a temperature every edge probability p_T(child | parent) of the walk
is known, whatever K, so P(reach n) is the product of the recorded edge probabilities along
root -> n and the round is exact (lo == hi).

The walk and its sums are replay.core.sampling's: this module writes each node's children, with
their recorded log-probabilities, as that node's "row" with one more cell for drawing none of
them, and asks ``sampling_bounds`` at T = 1, where a recorded child's probability is its row value
itself (Z = 1, no tail enters). The checks on rows apply unchanged: a NaN or positive value, or
children whose probabilities sum to more than 1, skip the round; a child of probability 0 is a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .sampling import SamplingBounds, sampling_bounds
from .temperature import check_temperature
from .vocab import PAD_TOKEN


def recorded_column(temperature: float, recorded: Sequence[float] | None) -> int | None:
    """The node_logprobs column recorded at ``temperature`` (None: not recorded, or T = 0).

    T = 0 is left to the greedy replay (the top-1 column decides it exactly in every dump); a
    temperature matches a recorded one only when it is the same number (the manifest's JSON value
    read back is the float the run used).
    """
    t = check_temperature(temperature)
    if t == 0.0 or not recorded:
        return None
    for j, r in enumerate(recorded):
        if float(r) == t:
            return j
    return None


def children_rows(tokens: np.ndarray, parents: np.ndarray, edge_logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each node's row of its children: ids [R, N+1, W] (PAD_TOKEN-padded) and log-probs [R, N+1, W].

    tokens, parents: [R, N+1] (tree order); edge_logp: [R, N+1] node u's log-prob under its parent
    (column 0, the root, unused). W = the widest node's number of children. A child whose token an
    earlier sibling already carries is left out of the row (the walk never moves to it; the
    duplicate edge is zeroed by sampling_bounds), so a row never counts one token twice.
    """
    r, n1 = tokens.shape
    ids = np.full((r, n1, 1), PAD_TOKEN, dtype=np.int64)
    if n1 < 2:
        return ids, np.full((r, n1, 1), -np.inf)
    lanes = np.arange(r)
    counts = np.zeros((r, n1), dtype=np.int64)
    slot = np.zeros((r, n1), dtype=np.int64)
    for u in range(1, n1):
        slot[:, u] = counts[lanes, parents[:, u]]
        counts[lanes, parents[:, u]] += 1
    w = max(int(counts.max()), 1)
    ids = np.full((r, n1, w), PAD_TOKEN, dtype=np.int64)
    lp = np.full((r, n1, w), -np.inf)
    for u in range(1, n1):
        p, s = parents[:, u], slot[:, u]
        dup = (ids[lanes, p] == tokens[:, u : u + 1]).any(axis=1)
        keep = lanes[~dup]
        ids[keep, p[keep], s[keep]] = tokens[keep, u]
        lp[keep, p[keep], s[keep]] = edge_logp[keep, u]
    return ids, lp


# The token id of a children row's stop cell: no child carries it (token ids are >= 0, PAD_TOKEN is -1).
STOP_TOKEN = -2


def _with_stop_cell(ids: np.ndarray, lp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ids, lp [R, N+1, W] with one more cell per row: the mass 1 - sum(children) of drawing no child.

    A node's children are not a top-K row: a child of probability 0 (log-prob -inf) says nothing
    about the tokens the row does not name, so the top-K rule for a zero cell (every unnamed token
    is then 0 too, and the row must sum to 1) must not judge them. With the stop cell the row names
    its whole distribution and sums to 1; children summing to more than 1, or a NaN, are still
    refused (the stop cell is then -inf or NaN)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        total = np.where(ids == PAD_TOKEN, 0.0, np.exp(lp)).sum(axis=2, keepdims=True)
        stop = np.log(np.where(total > 1.0, 0.0, 1.0 - total))
    stop = np.where(np.isnan(total), np.nan, stop)
    return (
        np.concatenate([ids, np.full(stop.shape, STOP_TOKEN, dtype=ids.dtype)], axis=2),
        np.concatenate([lp, stop], axis=2),
    )


def recorded_bounds(
    tokens: np.ndarray, parents: np.ndarray, depths: np.ndarray, edge_logp: np.ndarray, temperature: float
) -> SamplingBounds:
    """SamplingBounds of R rounds at ``temperature`` from their recorded edge log-probabilities at it.

    tokens, parents, depths: [R, N+1] (depths may be [1, N+1]); edge_logp: [R, N+1], the
    node_logprobs column of ``temperature`` (recorded_column). Exact wherever the values are sound.
    """
    t = check_temperature(temperature)
    tokens = np.asarray(tokens, dtype=np.int64)
    parents = np.broadcast_to(np.asarray(parents, dtype=np.int64), tokens.shape)
    ids, lp = children_rows(tokens, parents, np.asarray(edge_logp, dtype=np.float64))
    ids, lp = _with_stop_cell(ids, lp)
    has = np.ones(tokens.shape, dtype=bool)
    b = sampling_bounds(tokens, parents, depths, ids, lp, has, 1.0)  # T = 1: p = the row value itself
    return replace(b, temperature=t, needs_vocab=False)
