"""Every config at every T on the replayed rounds of one batch, one tree shape at a time (SamplingPart):
whether the recorded replay at T refuses a round (no scores, a bad row), and each config's outcome
on the others, chunk by chunk (analysis.compare.sampling_subtrees), kept or folded as made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.vocab import CHUNK_ROUNDS
from replay.engine.batch import BatchResult, RoundBatch, expanded_nodes
from replay.engine.batch.frames import round_names
from replay.engine.batch.recorded import refusal_texts
from replay.engine.batch.sampling import BatchSampling, batch_sampling

from .batch import replayed_by_shape
from .configs import is_own_tree
from .sampling_subtrees import AtT, at_temperature, sub_trees, validate_rows
from .subtree import WHY_NONE
from .subtree_levels import RecordedChunk
from .subtree_select import selection_rules

NOT_REFUSED = 0  # SamplingPart.refused: the recorded round has a sampling replay at T


@dataclass(frozen=True, eq=False)
class SamplingPart:
    """The replayed rounds of one tree shape of one batch, every config at every T."""

    ordinals: np.ndarray  # [C] position of each round in its run
    names: np.ndarray  # [C] object round names a_b
    refused: dict[bool, np.ndarray]  # T > 0 or not -> [C] NOT_REFUSED, NO_SCORES_CODE or PROBLEM_*
    outcomes: dict[tuple[int, float], AtT]  # (config position, T)
    why: dict[bool, np.ndarray]  # T > 0 or not -> [C] object: a refused round's reason (the engine's words), else ""


def sampling_parts(
    batch: RoundBatch,
    res: BatchResult,
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None = None,
    gamma_threshold: float = 0.0,
    fold: Callable[[int, float, AtT, np.ndarray], None] | None = None,
) -> list[SamplingPart]:
    """Every config at every T on the rounds of ``batch`` that ``res`` replayed, one shape at a time.
    Whether a round is refused (no scores, a bad row) is the recorded replay at T's verdict
    (replay.engine.batch.sampling.batch_sampling), which depends only on T > 0.
    ``fold(config position, T, AtT of the chunk's usable rounds, their ordinals)``: called instead, the
    parts' outcomes left empty (compare's table, report's curve and recommend at T sum each chunk as it
    is made: nothing per round waits)."""
    ordinals = np.arange(len(batch)) if batch.ordinals is None else np.asarray(batch.ordinals, dtype=np.int64)
    static = recorded.tree_type != TREE_DYNAMIC
    parts = []
    for shape, members, b, r in replayed_by_shape(batch, res):
        refused: dict[bool, np.ndarray] = {}
        why: dict[bool, np.ndarray] = {}
        for t in temperatures:
            if (t > 0.0) not in refused:
                bs = batch_sampling(b, r, recorded, t, vocab_size)
                refused[t > 0.0] = np.where(bs.usable, NOT_REFUSED, bs.problem).astype(np.int8)
                why[t > 0.0] = _reasons(refusal_texts(b, r, bs, vocab_size), len(b))
        outcomes = _part_outcomes(
            b,
            r,
            shape,
            static,
            recorded,
            configs,
            temperatures,
            vocab_size,
            gamma_threshold,
            refused,
            fold,
            ordinals[members],
        )
        parts.append(SamplingPart(ordinals[members], round_names(r), refused, outcomes, why))
    return parts


def _reasons(texts: dict[int, str], c: int) -> np.ndarray:
    """[C] object: texts[i] at each refused round i, "" elsewhere (a run refused throughout shares one string)."""
    out = np.full(c, "", dtype=object)
    for i, text in texts.items():
        out[i] = text
    return out


def _part_outcomes(
    b, r, shape, static, recorded, configs, temperatures, vocab_size, threshold, refused, fold=None, ords=None
):
    """{(config, T): AtT} on rounds of one shape, chunk by chunk (analysis.compare.subtree_batch's chunks)."""
    expanded = expanded_nodes(b, shape, static)
    rules = selection_rules(b, r, shape)
    steps = shape.num_steps
    chunks: dict[tuple[int, float], list[AtT]] = {}
    own = (
        {t: batch_sampling(b, r, recorded, t, vocab_size) for t in temperatures}
        if any(is_own_tree(c, recorded, threshold) for c in configs)
        else {}
    )
    for lo in range(0, len(b), CHUNK_ROUNDS):
        hi = min(len(b), lo + CHUNK_ROUNDS)
        uses = {pos: codes[lo:hi] == NOT_REFUSED for pos, codes in refused.items()}
        if not any(u.any() for u in uses.values()):  # every T refuses every round (no scores, T > 0 only)
            for c, sub in enumerate(configs):
                if fold is not None:
                    continue  # no usable round to fold
                for t in temperatures:
                    at = _refused_at(hi - lo, sub.gamma)
                    chunks.setdefault((c, t), []).append(at)
            continue
        rec = RecordedChunk(b, r, expanded, shape, lo, hi, rules[lo:hi])
        rows = validate_rows(b, r, shape, lo, hi)
        for c, sub in enumerate(configs):
            cap = min(sub.gamma, steps) if steps < recorded.gamma else sub.gamma
            mine = is_own_tree(sub, recorded, threshold)
            st = None if mine else sub_trees(rec, rows, b.root_tokens[lo:hi], sub, cap, float(threshold))
            for t in temperatures:
                use = uses[t > 0.0]
                if not use.any():  # a refused round's outcome is never read (every reader takes the usable rounds)
                    if fold is None:
                        chunks.setdefault((c, t), []).append(_refused_at(hi - lo, sub.gamma))
                    continue
                at = (
                    _replayed_at(own[t], r, lo, hi, sub.gamma) if st is None else at_temperature(st, use, t, vocab_size)
                )
                if fold is not None:
                    fold(c, t, at.take(np.flatnonzero(use)), ords[lo:hi][use])
                else:
                    chunks.setdefault((c, t), []).append(at)
    return {key: AtT.concat(v) for key, v in chunks.items()}


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


def _refused_at(c: int, gamma: int) -> AtT:
    """at_temperature's AtT on C rounds none of which is used (each refused at this T), not computed:
    undetermined, as at_temperature leaves the rounds it does not read (why 0: never read)."""
    f, z = np.full(c, np.nan), np.zeros(c, dtype=np.int64)
    no = np.zeros(c, dtype=bool)
    return AtT(no, f, f, np.zeros((c, gamma)), np.zeros((c, gamma)), no, z, np.zeros(c, np.int8), z, z - 1, False)
