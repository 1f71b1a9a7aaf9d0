"""Other configs at temperature T (analysis.compare.sampling's table), on the batch arrays: numpy over rounds.

Per config, T and round: determined or not (and why), the bounds on the expected accepted length and
on P(L >= d), exactness.

Each batch's rounds go through analysis.compare.sampling_parts (per tree shape: refused or not,
each config's outcome from analysis.compare.sampling_subtrees), folded block by block into a
SamplingComparison (analysis.compare.sampling_sums).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from analysis.tables.batch import run_ordinals
from analysis.tables.runs import LabelledRun, each_batch
from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.batch.recorded import node_logprob_gaps_batch
from replay.util.words import round_name

from .sampling import SamplingComparison
from .sampling_sums import curve_sums


def compare_sampling_run(
    run: LabelledRun,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None = None,
    gamma_threshold: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    per_round: bool = True,
) -> SamplingComparison:
    """The SamplingComparison of a loaded run, from the batch arrays; ``progress(rounds
    done, rounds)``. At a temperature whose node_logprobs the manifest lists, a round that carries them
    walks every config's sub-tree on its recorded edges (exact, analysis.compare.sampling_subtrees.
    recorded_edges); folded block by block (curve_sums), the per-round frame kept only with ``per_round``."""
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)
    nodes = run.replay.manifest.node_logprob_temperatures
    return curve_sums(run, configs, temperatures, vocab_size, threshold, progress, nodes, per_round)


def node_logprob_gaps_run(run: LabelledRun, t: float, refused: set[str]) -> tuple[list[str], list[str]]:
    """The replayed rounds of ``run`` not in ``refused`` (names) whose walk at the recorded T cannot read
    node_logprobs (parents layout; without the array), in run order, from the batch arrays
    (replay.engine.batch.recorded.node_logprob_gaps_batch on analysis.tables.runs.each_batch)."""
    nodes = run.replay.manifest.node_logprob_temperatures
    parts = [p for chunk in each_batch(run, lambda b, res, tree: batch_gaps(b, res, t, nodes)) for p in chunk]
    return join_gaps(parts, refused)


def batch_gaps(batch: RoundBatch, res: BatchResult, t: float, nodes) -> list[list[tuple[int, str]]]:
    """node_logprob_gaps_batch's two lists of round names, each name with its position in the run."""
    ordinals = run_ordinals(batch, res)
    at = {round_name((a, b)): int(o) for a, b, o in zip(*res.keys.tolist(), ordinals.tolist())}
    return [[(at[n], n) for n in names] for names in node_logprob_gaps_batch(batch, res, t, nodes)]


def join_gaps(parts: Sequence[list[list[tuple[int, str]]]], refused: set[str]) -> tuple[list[str], list[str]]:
    """batch_gaps of every batch of a run as node_logprob_gaps_run's two lists, in run order."""
    parents, without = ([n for _, n in sorted(g for p in parts for g in p[i]) if n not in refused] for i in (0, 1))
    return parents, without
