"""batch --temperature T where the dump records node_logprobs at T: exact, as replay --temperature.

The rule is replay.core.sampling_recorded's (the walk on each node's recorded log-probability
under its parent); this module hands it the batch's trees (the greedy rebuild's level tokens and
parents, replay.engine.batch.sampling.shape_arrays) and the validate stack's node_logp column.
Which rounds use it is replay.engine.sampling.round_sampling's choice, round by round: a replayed
round in the ``all`` layout (row u is node u) whose validate file carries node_logprobs, at a T of
the manifest's node_logprob_temperatures. Every other round goes to batch_sampling (the top-K rows).

The batch arrays know no file: a round refused for a bad row or node log-prob gets the round
path's reason (``refusal_reasons``), which names the file, the field and the row, so that batch
lists the rounds replay lists, in replay's words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.sampling import problem_words
from replay.core.sampling_recorded import recorded_bounds, recorded_column
from replay.core.vocab import LAYOUT_ALL, LAYOUTS
from replay.io.roundbatch import RoundBatch

from ..sampling import NO_SCORES
from .codes import ERR_OK
from .driver import rebuilt_levels
from .result import BatchResult
from .sampling import NO_SCORES_CODE, BatchSampling, batch_sampling, shape_arrays

NODE_COLUMNS_CODE = -2  # BatchSampling.problem: node_logprobs columns differ from the manifest's count
_ALL = LAYOUTS.index(LAYOUT_ALL)  # BatchResult.layout's code of the all layout
_AWAY = -1  # an error code no replayed round has: the node-log-prob rounds, kept out of the top-K pass


def node_rounds(batch: RoundBatch, result: BatchResult, temperature: float, node_temperatures) -> np.ndarray:
    """[R] bool: the replayed rounds whose walk at ``temperature`` reads their node_logprobs."""
    if recorded_column(temperature, node_temperatures) is None or batch.validate.node_logp is None:
        return np.zeros(len(batch), dtype=bool)
    return (result.error == ERR_OK) & (result.layout == _ALL)


def sampling_at(
    batch: RoundBatch,
    result: BatchResult,
    cfg: TreeConfig,
    temperature: float,
    vocab_size: int | None = None,
    node_temperatures: Sequence[float] | None = None,
) -> BatchSampling:
    """batch_sampling, with the rounds that carry node_logprobs at ``temperature`` exact from them."""
    use = node_rounds(batch, result, temperature, node_temperatures)
    if not use.any():
        return batch_sampling(batch, result, cfg, temperature, vocab_size)
    assert node_temperatures is not None and batch.validate.node_logp is not None  # node_rounds checked them
    rest = batch_sampling(
        batch, replace(result, error=np.where(use, _AWAY, result.error)), cfg, temperature, vocab_size
    )
    out = {f: getattr(rest, f).copy() for f in ("problem", "expected_lo", "expected_hi", "exact", "variance")}
    ge_lo, ge_hi = rest.length_ge_lo.copy(), rest.length_ge_hi.copy()
    own = batch.validate.node_logp
    if own.shape[1] != len(node_temperatures):  # every round of a batch has the same columns
        out["problem"][use] = NODE_COLUMNS_CODE
    else:
        col = recorded_column(temperature, node_temperatures)
        static = cfg.tree_type != TREE_DYNAMIC
        for k, shape in enumerate(result.shapes):
            members = np.flatnonzero(use & (result.shape_index == k))
            if not members.shape[0]:
                continue
            part = batch if members.shape[0] == len(batch) else batch.take(members)
            levels = rebuilt_levels(part, shape, static)
            parents, depths = shape_arrays(shape, levels.chosen)
            tokens = np.zeros(parents.shape, dtype=np.int64)  # [R, N+1], node u = validate row u
            for i, tok in enumerate(levels.tokens):
                tokens[:, shape.starts[i + 1] : shape.starts[i + 1] + tok.shape[0]] = tok.T
            edge = np.asarray(part.validate.node_logp[: parents.shape[1], col, :].T, dtype=np.float64)
            b = recorded_bounds(tokens, parents, depths[None], edge, temperature)
            d = b.length_ge_lo.shape[1]
            ge_lo[members], ge_hi[members] = 0.0, 0.0
            ge_lo[members, :d], ge_hi[members, :d] = b.length_ge_lo, b.length_ge_hi
            out["expected_lo"][members], out["expected_hi"][members] = b.expected_lo, b.expected_hi
            out["exact"][members], out["variance"][members], out["problem"][members] = b.exact, b.variance, b.problem
    usable = rest.usable | (use & (out["problem"] == 0))
    return replace(rest, usable=usable, length_ge_lo=ge_lo, length_ge_hi=ge_hi, from_node_logprobs=use, **out)


def node_logprob_gaps_batch(batch, res: BatchResult, t: float, nodes) -> tuple[list[str], list[str]]:
    """replay.engine.sampling.node_logprob_gaps on the batch arrays: the replayed rounds of ``batch``
    whose walk at a recorded T cannot read node_logprobs (in the parents layout; without the array), by name."""
    if recorded_column(t, nodes) is None:
        return [], []
    ok, names = res.error == ERR_OK, [f"{a}_{b}" for a, b in res.keys.T.tolist()]
    if batch.validate.node_logp is None:
        return [], [n for n, good in zip(names, ok.tolist()) if good]
    return [n for n, good in zip(names, (ok & ~node_rounds(batch, res, t, nodes)).tolist()) if good], []


ALONE_LIMIT = 16  # refused rounds replayed one by one (each read of one round scans the directory); more: the run once


def refusal_reasons(directory: str, opts, keys: Iterable[tuple[int, int]], temperature: float, vocab_size, nodes):
    """{round key: the round path's reason} for rounds ``keys`` of a dump directory or packed run
    refused at ``temperature`` (replay.engine.sampling.round_sampling's words: the file, the field,
    the row); ``nodes``: the manifest's node_logprob_temperatures. A round the round path does not
    refuse (none should be) is left out."""
    from ..replayer import replay_directory
    from ..sampling import round_sampling

    wanted = set(keys)
    if not wanted:
        return {}
    if len(wanted) > ALONE_LIMIT:
        results = list(replay_directory(directory, opts).results)
    else:
        results = [r for k in sorted(wanted) for r in replay_directory(directory, replace(opts, only_round=k)).results]
    out = {}
    for res in results:
        if res.key in wanted:
            try:
                round_sampling(res, temperature, vocab_size, nodes)
            except ValueError as exc:
                out[res.key] = str(exc)
    return out


def refusal_words(code: int, vocab_size=None) -> str:
    """The arrays' own words for a BatchSampling.problem (no file: refusal_reasons' are preferred)."""
    if code == NO_SCORES_CODE:
        return NO_SCORES
    if code == NODE_COLUMNS_CODE:
        return "its validate node_logprobs has another number of columns than manifest.json node_logprob_temperatures lists"
    return problem_words(code, vocab_size)


__all__ = [
    "ALONE_LIMIT",
    "NODE_COLUMNS_CODE",
    "node_logprob_gaps_batch",
    "node_rounds",
    "refusal_reasons",
    "refusal_words",
    "sampling_at",
]
