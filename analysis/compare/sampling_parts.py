"""Every config at every T on the replayed rounds of one batch, one tree shape at a time (SamplingPart):
whether the recorded replay at T refuses a round (no scores, a bad row), and each config's outcome
on the others, chunk by chunk (analysis.compare.sampling_subtrees), handed to a fold as made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from analysis.tables.batch import run_ordinals
from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.sampling_recorded import recorded_column
from replay.core.vocab import CHUNK_ROUNDS
from replay.engine.batch import BatchResult, RoundBatch, expanded_nodes, replayed_by_shape
from replay.engine.batch.frames import round_names
from replay.engine.batch.recorded import node_rounds, refusal_texts, refusals_at, sampling_at
from replay.engine.batch.sampling import BatchSampling

from .configs import is_own_tree
from .sampling_reach import reach_chunk
from .sampling_subtrees import AtT, RecordedEdges, SubTrees, at_temperature, recorded_edges, sub_trees, validate_rows
from .subtree import WHY_NONE
from .subtree_levels import RecordedChunk, step_caps
from .subtree_select import selection_rules

NOT_REFUSED = 0  # SamplingPart.refused: the recorded round has a sampling replay at T

RefusalKey = tuple[bool, int | None]  # refusal_key: what a round's refusal at T depends on
# fold(config position, T, AtT of some usable rounds, [C] their ordinals): where sampling_parts' outcomes go
Fold = Callable[[int, float, AtT, np.ndarray], None]


def refusal_key(t: float, node_temperatures: Sequence[float] | None) -> RefusalKey:
    """Whether the recorded replay at T refuses a round depends on T > 0 (T = 0 reads no scores) and on
    the node_logprobs column T reads (None: the top-K rows; replay.core.sampling_recorded.recorded_column)."""
    return (t > 0.0, recorded_column(t, node_temperatures))


@dataclass(frozen=True, eq=False)
class SamplingPart:
    """The replayed rounds of one tree shape of one batch, every config at every T (their outcomes
    went to sampling_parts' fold)."""

    ordinals: np.ndarray  # [C] position of each round in its run
    result: BatchResult  # the replayed rounds' outcomes (their keys name them)
    refused: dict[RefusalKey, np.ndarray]  # -> [C] NOT_REFUSED, NO_SCORES_CODE, NODE_COLUMNS_CODE or PROBLEM_*
    why: dict[RefusalKey, np.ndarray]  # -> [C] object: a refused round's reason (the engine's words), else ""
    keys: dict[float, RefusalKey]  # each T's key into refused and why

    def refused_at(self, t: float) -> np.ndarray:
        return self.refused[self.keys[t]]

    @cached_property
    def names(self) -> np.ndarray:
        """[C] object round names a_b, made when first read: only refused rounds and the per-round frame
        are named (a string a round at 10^6 rounds)."""
        return round_names(self.result)


@dataclass(frozen=True)
class _Ask:
    """What sampling_parts was asked: the same for every shape and chunk of a batch."""

    recorded: TreeConfig
    configs: Sequence[TreeConfig]
    temperatures: Sequence[float]
    vocab_size: int | None
    threshold: float
    node_temperatures: Sequence[float] | None  # the manifest's node_logprob_temperatures
    keys: dict[float, RefusalKey]
    reach: bool  # whether a config's outcome may come from the recorded config's walk (sampling_reach)


def sampling_parts(
    batch: RoundBatch,
    res: BatchResult,
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    fold: Fold,
    vocab_size: int | None = None,
    gamma_threshold: float = 0.0,
    node_temperatures: Sequence[float] | None = None,
    reach: bool = True,
) -> list[SamplingPart]:
    """Every config at every T on the rounds of ``batch`` that ``res`` replayed, one shape at a time.
    Whether a round is refused (no scores, a bad row) is the recorded replay at T's verdict
    (replay.engine.batch.recorded.refusals_at: sampling_at's, without its bounds; at a T of
    ``node_temperatures``, a round that carries node_logprobs is judged on those), which depends
    only on refusal_key(T).
    ``fold(config position, T, AtT of the chunk's usable rounds, their ordinals)`` takes each outcome as
    it is made (analysis.compare.sampling_sums.FoldedSums: nothing per round waits unless the per-round
    frame is asked for). With the recorded config first, the configs' outcomes at each T come from the
    recorded config's walk at T where it gives them (analysis.compare.sampling_reach; ``reach`` False: each
    config's own walk, the tests' oracle)."""
    ordinals = run_ordinals(batch, res)
    keys = {t: refusal_key(t, node_temperatures) for t in temperatures}
    ask = _Ask(recorded, configs, temperatures, vocab_size, gamma_threshold, node_temperatures, keys, reach)
    static = recorded.tree_type != TREE_DYNAMIC
    parts = []
    for shape, members, b, r in replayed_by_shape(batch, res):
        refused: dict[RefusalKey, np.ndarray] = {}
        why: dict[RefusalKey, np.ndarray] = {}
        for t in temperatures:
            if keys[t] not in refused:
                bs = refusals_at(b, r, recorded, t, vocab_size, node_temperatures)
                refused[keys[t]] = np.where(bs.usable, NOT_REFUSED, bs.problem).astype(np.int8)
                why[keys[t]] = _reasons(refusal_texts(b, r, bs, vocab_size, node_temperatures), len(b))
        _fold_outcomes(b, r, shape, static, ask, refused, fold, ordinals[members])
        parts.append(SamplingPart(ordinals[members], r, refused, why, keys))
    return parts


def _reasons(texts: dict[int, str], c: int) -> np.ndarray:
    """[C] object: texts[i] at each refused round i, "" elsewhere (a run refused throughout shares one string)."""
    out = np.full(c, "", dtype=object)
    for i, text in texts.items():
        out[i] = text
    return out


def _node_logprob_walks(b: RoundBatch, r: BatchResult, ask: _Ask) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """{T: ([R] bool the rounds whose recorded walk at T reads node_logprobs, [rows, R] that column)} for
    each T of the manifest's node_logprob_temperatures that this batch can read (its column count is
    the manifest's; otherwise every such round is refused, NODE_COLUMNS_CODE, and none is walked)."""
    node_logp = b.validate.node_logp
    out = {}
    for t in ask.temperatures:
        col = ask.keys[t][1]
        if col is None or node_logp is None or node_logp.shape[1] != len(ask.node_temperatures or ()):
            continue
        out[t] = (node_rounds(b, r, t, ask.node_temperatures), node_logp[:, col, :])
    return out


def _fold_outcomes(b, r, shape, static, ask: _Ask, refused, fold: Fold, ords: np.ndarray) -> None:
    """fold(config, T, AtT, ordinals) on the usable rounds of one shape, chunk by chunk
    (analysis.compare.subtree_batch's chunks); ``ords``: [R] each round's position in its run."""
    expanded = expanded_nodes(r, shape)
    rules = selection_rules(b, r, shape)
    recorded, threshold = ask.recorded, ask.threshold
    mine = [is_own_tree(sub, recorded, threshold) for sub in ask.configs]
    own = (
        {t: sampling_at(b, r, recorded, t, ask.vocab_size, ask.node_temperatures) for t in ask.temperatures}
        if any(mine)
        else {}
    )
    nodes = _node_logprob_walks(b, r, ask)
    reach = _reach_applies(ask, static, nodes)
    caps = step_caps(ask.configs, shape.num_steps, recorded.gamma)
    for lo in range(0, len(b), CHUNK_ROUNDS):
        hi = min(len(b), lo + CHUNK_ROUNDS)
        uses = {key: codes[lo:hi] == NOT_REFUSED for key, codes in refused.items()}
        if not any(u.any() for u in uses.values()):  # every T refuses every round (no scores, T > 0 only)
            continue
        rec = RecordedChunk(b, r, expanded, shape, lo, hi, rules[lo:hi])
        rows = validate_rows(b, r, lo, hi)
        if reach:
            at_t = [(t, uses[ask.keys[t]]) for t in ask.temperatures]
            reach_chunk(rec, rows, ask.configs, caps, at_t, ask.vocab_size, fold, ords[lo:hi])
            continue
        for c, sub in enumerate(ask.configs):
            st = None if mine[c] else sub_trees(rec, rows, sub, caps[c], float(threshold))
            for t in ask.temperatures:
                use = uses[ask.keys[t]]
                if not use.any():  # a refused round has no outcome
                    continue
                if st is None:
                    at = _replayed_at(own[t], r, lo, hi, sub.gamma)
                else:
                    at = at_temperature(st, use, t, ask.vocab_size, _edges(st, nodes.get(t), lo, hi))
                fold(c, t, at.take(np.flatnonzero(use)), ords[lo:hi][use])


def _reach_applies(ask: _Ask, static: bool, nodes: dict) -> bool:
    """Whether the folded configs' outcomes go through analysis.compare.sampling_reach (one walk of the
    recorded config per T, at any number of T): a static recording's own config first, no simulated
    early stop, no recorded node_logprobs read at any T."""
    walks = ask.reach and not nodes
    return walks and static and not ask.threshold and bool(ask.configs) and ask.configs[0] == ask.recorded


def _edges(st: SubTrees, walks: tuple[np.ndarray, np.ndarray] | None, lo: int, hi: int) -> RecordedEdges | None:
    """The chunk lo..hi's recorded edges at T (recorded_edges), None where no round of it reads node_logprobs.
    walks: _node_logprob_walks' ([R] bool, [rows, R] column) at T, or None."""
    if walks is None or not walks[0][lo:hi].any():
        return None
    return recorded_edges(st, walks[1][:, lo:hi], walks[0][lo:hi])


def _replayed_at(bs: BatchSampling, res: BatchResult, lo: int, hi: int, gamma: int) -> AtT:
    """The recorded replay's own sampling at T of rounds lo..hi (a dynamic recording's own config,
    analysis.compare.configs.is_own_tree), as at_temperature's AtT; a refused round's values are never read."""
    c = hi - lo
    ge = [np.zeros((c, gamma)), np.zeros((c, gamma))]
    for g, full in zip(ge, (bs.length_ge_lo[lo:hi], bs.length_ge_hi[lo:hi])):
        w = min(gamma, full.shape[1] - 1)
        g[:, :w] = full[:, 1 : 1 + w]  # P(L >= d), d = 1.. (column 0 is d = 0)
    z = np.zeros(c, dtype=np.int64)
    return AtT(
        bs.usable[lo:hi].copy(),
        bs.expected_lo[lo:hi],
        bs.expected_hi[lo:hi],
        ge[0],
        ge[1],
        bs.exact[lo:hi],
        res.num_steps[lo:hi].astype(np.int64),
        np.full(c, WHY_NONE, dtype=np.int8),
        z,
        z - 1,
        bs.needs_vocab,
    )
