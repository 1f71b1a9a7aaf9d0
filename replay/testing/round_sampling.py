"""Sampling-mode facts read off reference RoundResults (replay.testing.replayer), one round at a
time: the oracles of the batch path's own (replay.engine.batch.recorded), which tests hold equal.
Also the one-round forms of the sampling rule (node_rows, round_bounds). No library module imports
this (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from replay.core.acceptance import is_all_layout, node_validate_rows
from replay.core.sampling import SamplingBounds, greedy_logp, sampling_bounds
from replay.core.sampling_problems import VocabTooSmall, problem_words
from replay.core.sampling_recorded import recorded_bounds, recorded_column
from replay.core.temperature import check_temperature
from replay.core.tree import Tree
from replay.core.vocab import LAYOUT_ALL, PAD_TOKEN
from replay.engine.sampling import (
    NO_SCORES,
    RoundSampling,
    VocabBelowCandidates,
    node_columns_words,
    row_problem_words,
)


def node_rows(
    tree_tokens_len: int, validate_ids: np.ndarray, validate_logp: np.ndarray, layout: str, expanded_order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map a round's validate rows onto its nodes: ids, log-probs [N+1, K] and has_row [N+1].

    layout "all": row u is node u; "parents": row i is the i-th expanded node (tree.expanded_order):
    each node's acceptance.validate_row.
    """
    n1 = tree_tokens_len
    k = validate_ids.shape[1]
    rows = node_validate_rows(is_all_layout(layout), n1 - 1, expanded_order)
    has = (rows >= 0) & (rows < validate_ids.shape[0])
    ids = np.full((n1, k), PAD_TOKEN, dtype=np.int64)
    logp = np.full((n1, k), -np.inf)
    ids[has], logp[has] = validate_ids[rows[has]], validate_logp[rows[has]]
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


def node_logprob_gaps(results: Sequence) -> tuple[list[str], list[str]]:
    """Names of replayed rounds (RoundResults) whose walk cannot read node_logprobs at a recorded T:
    (those in the parents layout, whose validate rows are not tree nodes; those without the array)."""
    parents = [r.name for r in results if r.node_logp_unused]
    return parents, [r.name for r in results if r.node_logp is None and not r.node_logp_unused]


def round_sampling(
    res, temperature: float, vocab_size: int | None = None, node_temperatures: Sequence[float] | None = None
) -> RoundSampling:
    """Bounds for a replay.testing.replayer.RoundResult; ValueError (the reason) when it cannot be used,
    VocabBelowCandidates when ``vocab_size`` is below its recorded candidates (wrong for the dump).

    node_temperatures: the manifest's node_logprob_temperatures; at one of them a round that carries
    node_logprobs (``res.node_logp``) is exact from those (replay.core.sampling_recorded).
    """
    col = recorded_column(temperature, node_temperatures)
    own = res.node_logp
    if col is not None and own is not None:
        assert node_temperatures is not None
        if own.shape[1] != len(node_temperatures):
            raise ValueError(node_columns_words(res.validate_path, own.shape[1], len(node_temperatures)))
        tree = res.tree
        b = recorded_bounds(tree.tokens[None], tree.parents[None], tree.depths[None], own[None, :, col], temperature)
        if b.problem[0]:
            raise ValueError(f"{res.validate_path} (node_logprobs): {problem_words(int(b.problem[0]))}")
        return _one(b, True)
    logp = res.validate_logp
    if logp is None:
        if check_temperature(temperature) != 0.0:
            raise ValueError(NO_SCORES)
        logp = greedy_logp(res.validate_ids)  # T = 0 reads only the top-1 column
    try:
        b = round_bounds(res.tree, res.validate_ids, logp, res.layout, temperature, vocab_size)
    except VocabTooSmall as exc:
        raise VocabBelowCandidates.naming(res.scores_path, exc) from None
    if b.problem[0]:
        raise ValueError(_row_problem_words(res, int(b.problem[0]), vocab_size))
    return _one(b, False)


def _row_problem_words(res, code: int, vocab_size: int | None) -> str:
    """The problem of a round's rows, naming the scores file and the first row the walk reads that has it."""
    expanded = res.tree.expanded_order
    rows = expanded if res.layout == LAYOUT_ALL else np.arange(expanded.shape[0])
    return row_problem_words(res.scores_path, res.validate_ids, res.validate_logp, rows, code, vocab_size)


def _one(b, from_node_logprobs: bool) -> RoundSampling:
    exact = bool(b.exact[0])
    return RoundSampling(
        b.temperature,
        float(b.expected_lo[0]),
        float(b.expected_hi[0]),
        tuple(float(x) for x in b.length_ge_lo[0, 1:]),
        tuple(float(x) for x in b.length_ge_hi[0, 1:]),
        exact,
        float(b.variance[0]) if exact else None,
        b.needs_vocab,
        from_node_logprobs,
    )
