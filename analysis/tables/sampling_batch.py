"""``stats --temperature T`` on the batch arrays: analysis.tables.sampling's RunSampling of a
loaded run.

The batches are those load_run read (``sampling_along``, the run read once), else the run is read
again; each batch's rounds at T are replay.engine.sampling_runs' SamplingPart (batch --temperature's
rule: the top-K rows, or the dump's node_logprobs where it records them at T), joined in run order
by its join_parts. A refused round's reason is worded by the engine
(replay.engine.batch.recorded.refusal_texts: the file, the field and the row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from replay.engine.batch.sampling_frames import from_node_logprobs
from replay.engine.runs import PerBatch, Run, replay_run
from replay.engine.sampling_runs import SamplingPart, batch_parts, join_parts
from replay.io.manifest import Manifest
from replay.util.errors import SpecReplayError

from .batch import result_columns
from .definitions import ROUND_COLUMNS_READ
from .runs import LabelledRun


@dataclass(frozen=True, eq=False)
class SamplingAlong:
    """One batch's SamplingPart at T, computed while load_run read it (sampling_along)."""

    temperature: float
    vocab_size: int | None
    node_temperatures: tuple[float, ...] | None
    part: SamplingPart


def sampling_along(temperature: float, vocab_of: Callable[[Manifest], int | None]) -> Callable[[Run], PerBatch | None]:
    """analysis.tables.runs.load_run's ``per_run`` for stats --temperature: each batch's rounds at T
    computed as the run is read, so that batch_run_sampling does not read and replay it again.
    ``vocab_of(manifest)``: the vocabulary size the command uses; when it raises (a --vocab-size that
    the manifest contradicts) nothing is read along, and the error comes where the command asks."""
    t = float(temperature)

    def per_run(opened: Run) -> PerBatch | None:
        try:
            vocab = vocab_of(opened.manifest)
        except SpecReplayError:
            return None
        nodes = opened.manifest.node_logprob_temperatures
        key = None if nodes is None else tuple(nodes)
        at_t = batch_parts([t], vocab, nodes)
        return lambda b, res, cfg: SamplingAlong(t, vocab, key, at_t(b, res, cfg)[0])

    return per_run


def batch_run_sampling(
    run: LabelledRun, temperature: float, vocab_size: int | None, node_temperatures: Sequence[float] | None
) -> tuple:
    """The fields of analysis.tables.sampling.run_sampling's RunSampling for a batch-loaded run, in
    order (module docstring; that module builds it: no import back)."""
    t = float(temperature)
    nodes = None if node_temperatures is None else tuple(node_temperatures)
    along = run.read_along
    if along and all(
        isinstance(a, SamplingAlong)
        and (a.temperature, _vocab_key(a.vocab_size), a.node_temperatures) == (t, _vocab_key(vocab_size), nodes)
        for a in along
    ):
        result, parts = run.replay.result, [a.part for a in along]
    else:
        rep = replay_run(run.replay.directory, run.options, per_batch=batch_parts([t], vocab_size, node_temperatures))
        result, parts = rep.result, [p[0] for p in rep.per_batch]
    at = join_parts(result, parts, t)
    smp, rows = at.sampling, at.rows
    summary_columns = [c for c in ROUND_COLUMNS_READ["summary"] if c != "run"]
    made = result_columns(result, summary_columns)
    columns = {c: _int64(np.asarray(made[c])[rows]) for c in summary_columns}
    depth = int(columns["num_steps"].max(initial=0))  # the widest row: P(L >= d) for d = 1..a round's depth
    return (
        run.label,
        t,
        smp.expected_lo[rows],
        smp.expected_hi[rows],
        _table(smp.length_ge_lo[rows], depth),
        _table(smp.length_ge_hi[rows], depth),
        smp.exact[rows],
        from_node_logprobs(smp)[rows],
        columns,
        at.skipped(),
        any(p.sampling.needs_vocab and p.sampling.usable.any() for p in parts),  # said of the rounds used
        at.gaps,
    )


def _vocab_key(vocab_size: int | None) -> tuple[int, str | None] | None:
    """A vocabulary size and where it came from (replay.core.sampling_problems.VocabSize: messages name it)."""
    return None if vocab_size is None else (int(vocab_size), getattr(vocab_size, "source", None))


def _int64(values: np.ndarray) -> np.ndarray:
    """[R] a round column, integers as int64 (the round table's type)."""
    return values.astype(np.int64) if values.dtype.kind in "iu" else values


def _table(ge: np.ndarray, depth: int) -> np.ndarray:
    """[R, depth + 2] P(L >= d), d = 0..depth + 1 (zeros past a round's tree;
    a run's arrays are as wide as its config's gamma)."""
    out = np.zeros((ge.shape[0], depth + 2))
    w = min(ge.shape[1], depth + 2)
    out[:, :w] = ge[:, :w]
    out[:, 0] = 1.0
    return out
