"""A run replayed at temperatures T, batch by batch: the one driver under ``replay --temperature``,
``batch --temperature``, ``stats --temperature`` and the notebook's ``api.sampling``.

Each batch's rounds at T come from replay.engine.batch.recorded.sampling_at (the top-K rows, or the
dump's node_logprobs where it records them at T), with the refused rounds' reasons in the engine's
words (refusal_texts: the file, the field, the row) and the rounds whose walk at a recorded T cannot
read node_logprobs (node_logprob_gaps_batch). ``join_parts`` joins a run's batches in the order of
its BatchResult (run order): the arrays, the rounds used, the refused rounds and the used rounds'
gaps. ``sampling_means`` is what every summary at T states of the rounds used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.core.headline import Rounds, summary_row
from replay.io.manifest import Manifest
from replay.io.skipped import Skipped
from replay.util.errors import SpecReplayError
from replay.util.words import round_name

from .batch import BatchResult
from .batch.recorded import node_logprob_gaps_batch, refusal_texts, sampling_at
from .batch.sampling import BatchSampling
from .batch.sampling_frames import concat_sampling
from .options import ReplayOptions
from .runs import PerBatch, Run, RunReplay, replay_run
from .sampling import sampling_skip

VocabOf = Callable[[Manifest], "int | None"]  # the vocabulary size a caller uses; raises SpecReplayError on a conflict


@dataclass(frozen=True, eq=False)
class SamplingPart:
    """One batch's rounds at one T."""

    ordinals: np.ndarray | None  # the batch's BatchResult.ordinals: where its rounds fall in the run
    sampling: BatchSampling
    gaps: tuple[list[str], list[str]]  # node_logprob_gaps_batch: (parents-layout rounds, rounds without node_logprobs)
    why: dict[tuple[int, int], str]  # each refused round's reason, by round key


@dataclass(frozen=True, eq=False)
class RunAtT:
    """A run's replayed rounds at T, in the order of its BatchResult."""

    sampling: BatchSampling
    rows: np.ndarray  # [n] int64: the rounds used (replayed and usable at T), indices into the result
    # the replayed rounds without a sampling replay at T, in run order: (round key, the engine's reason)
    refused: tuple[tuple[tuple[int, int], str], ...]
    gaps: tuple[list[str], list[str]]  # the used rounds of ``SamplingPart.gaps``, by name, in run order

    def skipped(self) -> tuple[Skipped, ...]:
        """``refused`` as the commands' skipped entries (replay.engine.sampling.sampling_skip)."""
        return tuple(sampling_skip(round_name(key), self.sampling.temperature, why) for key, why in self.refused)


@dataclass(frozen=True, eq=False)
class SampledRun:
    """replay_sampling's answer: the greedy replay (its skipped list the reading's alone), the run at
    each T asked, and the caller's ``also`` of each batch in reading order."""

    replay: RunReplay
    at: tuple[RunAtT, ...]
    also: tuple


@dataclass(frozen=True)
class SamplingMeans:
    """Means over a run's used rounds at T: what every summary at T states of them (the text of
    replay and batch --temperature, the table of stats --temperature)."""

    rounds: int
    exact_rounds: int
    accepted_lo: float  # bounds on the mean expected accepted length per round
    accepted_hi: float
    block_efficiency_lo: float  # bounds on the mean acceptance length: one target-drawn token per round
    block_efficiency_hi: float


def sampling_means(lo: Rounds, hi: Rounds, exact: np.ndarray) -> SamplingMeans:
    """The means of n (n > 0) rounds at T, each side of their bounds (replay.core.headline.bound_rounds)
    by the summary formulas; ``exact``: [n] bool."""
    names = ("mean_accepted_length", "mean_acceptance_length")
    low, high = summary_row(lo, names=names), summary_row(hi, names=names)
    accepted, efficiency = names
    return SamplingMeans(
        int(exact.shape[0]), int(exact.sum()), low[accepted], high[accepted], low[efficiency], high[efficiency]
    )


def sampling_part(batch, res: BatchResult, cfg, t: float, vocab: int | None, nodes) -> SamplingPart:
    """One batch at T (nodes: the manifest's node_logprob temperatures, or None)."""
    smp = sampling_at(batch, res, cfg, t, vocab, nodes)
    why = refusal_texts(batch, res, smp, vocab, nodes)
    gaps = node_logprob_gaps_batch(batch, res, t, nodes)
    return SamplingPart(res.ordinals, smp, (gaps[0], gaps[1]), {batch.key(i): w for i, w in why.items()})


def batch_parts(temperatures: Sequence[float], vocab: int | None, nodes) -> PerBatch:
    """replay_run's per_batch: each batch's SamplingPart at every T, in the order of ``temperatures``."""
    return lambda b, res, cfg: tuple(sampling_part(b, res, cfg, t, vocab, nodes) for t in temperatures)


def join_parts(result: BatchResult, parts: Sequence[SamplingPart], t: float) -> RunAtT:
    """The run at T from each of its batches' parts (reading order), aligned with ``result``."""
    smp = concat_sampling([(p.ordinals, p.sampling) for p in parts]) if parts else no_sampling(result, t)
    rows = np.flatnonzero(result.ok & smp.usable)
    why = {key: text for p in parts for key, text in p.why.items()}
    refused = tuple((key, why[key]) for key in result.key_list(result.ok & ~smp.usable))
    order = {round_name(key): k for k, key in enumerate(result.key_list(rows))}
    parents, without = (
        sorted((n for p in parts for n in p.gaps[i] if n in order), key=order.__getitem__) for i in (0, 1)
    )
    return RunAtT(smp, rows, refused, (parents, without))


def no_sampling(result: BatchResult, t: float) -> BatchSampling:
    """The BatchSampling of a run without a readable round: nothing usable."""
    n = len(result)
    nan, ge = np.full(n, np.nan), np.full((n, result.gamma + 1), np.nan)
    none = np.zeros(n, dtype=bool)
    return BatchSampling(t, none, np.zeros(n, np.int8), nan, nan, ge, ge, none, nan, False)


def replay_sampling(
    path: str | Path,
    opts: ReplayOptions,
    temperatures: Sequence[float],
    vocab_of: VocabOf,
    workers: int | None = None,
    progress: bool = False,
    also: PerBatch | None = None,
) -> SampledRun:
    """Batch-replay a run and each of its batches at every T; ``also(batch, result, tree)``: what else
    the caller keeps of each batch. A ``vocab_of`` that raises (a vocabulary size the manifest
    contradicts) raises after the reading, as a replay that fails on a round tells that first."""
    found: list = []

    def per_run(run: Run) -> PerBatch | None:
        try:
            vocab = vocab_of(run.manifest)
        except SpecReplayError:
            return None
        found.append(vocab)
        at_t = batch_parts(temperatures, vocab, run.manifest.node_logprob_temperatures)
        return lambda b, res, cfg: (at_t(b, res, cfg), None if also is None else also(b, res, cfg))

    rep = replay_run(path, opts, workers=workers, progress=progress, per_run=per_run)
    if not found:
        vocab_of(rep.manifest)  # raises: the conflict per_run set aside
    parts = rep.per_batch
    at = tuple(join_parts(rep.result, [p[0][k] for p in parts], t) for k, t in enumerate(temperatures))
    return SampledRun(rep, at, tuple(p[1] for p in parts))
