"""batch --temperature T where the dump records node_logprobs at T: exact, as replay --temperature.

The rule is replay.core.sampling_recorded's (the walk on each node's recorded log-probability
under its parent); this module hands it the batch's trees (the greedy rebuild's level tokens and
parents, replay.engine.batch.shapes.node_parents) and the validate stack's node_logp column.
It serves a replayed round in the ``all`` layout (row u is node u) whose validate file carries
node_logprobs, at a T of the manifest's node_logprob_temperatures. Every other round goes to
batch_sampling (the top-K rows).

A refused round's reason (``refusal_texts``) is worded from the batch's own arrays and file names
(the file, the field, the row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from replay.core.config import TreeConfig
from replay.core.sampling_problems import problem_words
from replay.core.sampling_recorded import recorded_bounds, recorded_column
from replay.core.vocab import LAYOUT_ALL, LAYOUTS
from replay.io.roundbatch import RoundBatch
from replay.util.words import round_name

from ..sampling import NO_SCORES, node_columns_words, row_problem_words
from .codes import ERR_OK
from .driver import rebuilt_levels
from .result import BatchResult
from .sampling import NO_SCORES_CODE, BatchSampling, batch_problems, batch_sampling, usable_rounds
from .shapes import node_parents

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
        for k, shape in enumerate(result.shapes):
            members = np.flatnonzero(use & (result.shape_index == k))
            if not members.shape[0]:
                continue
            whole = members.shape[0] == len(batch)
            part = batch if whole else batch.take(members)
            levels = rebuilt_levels(part, result if whole else result.take(members), shape)
            parents = np.ascontiguousarray(node_parents(shape, levels.chosen).T)  # [R, N+1]
            tokens = np.zeros(parents.shape, dtype=np.int64)  # [R, N+1], node u = validate row u
            for i, tok in enumerate(levels.tokens):
                tokens[:, shape.starts[i + 1] : shape.starts[i + 1] + tok.shape[0]] = tok.T
            edge = np.asarray(part.validate.node_logp[: parents.shape[1], col, :].T, dtype=np.float64)
            b = recorded_bounds(tokens, parents, shape.depths[None], edge, temperature)
            d = b.length_ge_lo.shape[1]
            ge_lo[members], ge_hi[members] = 0.0, 0.0
            ge_lo[members, :d], ge_hi[members, :d] = b.length_ge_lo, b.length_ge_hi
            out["expected_lo"][members], out["expected_hi"][members] = b.expected_lo, b.expected_hi
            out["exact"][members], out["variance"][members], out["problem"][members] = b.exact, b.variance, b.problem
    usable = rest.usable | (use & (out["problem"] == 0))
    return replace(rest, usable=usable, length_ge_lo=ge_lo, length_ge_hi=ge_hi, from_node_logprobs=use, **out)


@dataclass(frozen=True, eq=False)
class Refusals:
    """Which replayed rounds the recorded replay at T refuses, and why (what refusal_texts reads of a
    BatchSampling), without the bounds of the others."""

    usable: np.ndarray  # [R] bool: BatchSampling.usable
    problem: np.ndarray  # [R] int8: BatchSampling.problem
    from_node_logprobs: np.ndarray | None  # BatchSampling.from_node_logprobs


def refusals_at(
    batch: RoundBatch,
    result: BatchResult,
    cfg: TreeConfig,
    temperature: float,
    vocab_size: int | None = None,
    node_temperatures: Sequence[float] | None = None,
) -> Refusals:
    """sampling_at's refusals: from the rows' statistics alone where no round reads node_logprobs at T."""
    if node_rounds(batch, result, temperature, node_temperatures).any():
        smp = sampling_at(batch, result, cfg, temperature, vocab_size, node_temperatures)
        return Refusals(smp.usable, smp.problem, smp.from_node_logprobs)
    problem = batch_problems(batch, result, cfg, temperature, vocab_size)
    return Refusals(usable_rounds(result, problem), problem, None)


def node_logprob_gaps_batch(batch, res: BatchResult, t: float, nodes) -> tuple[list[str], list[str]]:
    """The replayed rounds of ``batch`` whose walk at a recorded T cannot read node_logprobs, by
    name: (those in the parents layout, those of a batch without the array)."""
    if recorded_column(t, nodes) is None:
        return [], []
    ok, names = res.error == ERR_OK, [round_name(key) for key in res.keys.T.tolist()]
    if batch.validate.node_logp is None:
        return [], [n for n, good in zip(names, ok.tolist()) if good]
    return [n for n, good in zip(names, (ok & ~node_rounds(batch, res, t, nodes)).tolist()) if good], []


def refusal_texts(
    batch: RoundBatch,
    result: BatchResult,
    smp: BatchSampling | Refusals,
    vocab_size: int | None = None,
    node_temperatures: Sequence[float] | None = None,
) -> dict[int, str]:
    """{round index in ``batch``: why} for each replayed round that ``smp`` refuses (the file, the
    field, the row), from the batch's own arrays and file names."""
    out = {}
    own = np.zeros(len(batch), dtype=bool) if smp.from_node_logprobs is None else smp.from_node_logprobs
    node_logp = batch.validate.node_logp
    for i in np.flatnonzero(result.ok & ~smp.usable).tolist():
        code = int(smp.problem[i])
        if code == NO_SCORES_CODE:
            out[i] = NO_SCORES
            continue
        key = batch.key(i)
        ordinal = None if batch.ordinals is None else int(batch.ordinals[i])
        data = _validate_path(batch, key, ordinal)
        if code == NODE_COLUMNS_CODE:
            assert node_logp is not None and node_temperatures is not None
            out[i] = node_columns_words(data, node_logp.shape[1], len(node_temperatures))
        elif own[i]:
            out[i] = f"{data} (node_logprobs): {problem_words(code)}"
        else:
            scores = data if batch.names is None else batch.names.scores_path(key, ordinal)
            mat = batch.validate.matrix(i, data)
            assert mat.logp is not None  # a round without scores is NO_SCORES_CODE
            out[i] = row_problem_words(scores, mat.ids, mat.logp, _rows_read(result, i), code, vocab_size)
    return out


def _validate_path(batch: RoundBatch, key: tuple[int, int], ordinal: int | None) -> str:
    return "validate" if batch.names is None else batch.names.paths(key, 0, ordinal)[-1]


def _rows_read(result: BatchResult, i: int) -> np.ndarray:
    """[n] int64 the validate rows round ``i``'s walk reads, in its order: the expanded nodes' rows
    (layout all: row u is node u), or the parents layout's rows 0..n-1."""
    shape = result.shapes[int(result.shape_index[i])]
    if result.layout[i] != _ALL:
        return np.arange(shape.num_expanded, dtype=np.int64)
    assert result.expanded is not None  # kept for every round whose tree was rebuilt (replay.engine.batch.driver)
    slots = result.expanded[: shape.num_expanded, i].astype(np.int64)
    level = np.repeat(np.arange(shape.num_steps), shape.heads)  # each slot's draft step
    return np.asarray(shape.starts, dtype=np.int64)[level] + slots
