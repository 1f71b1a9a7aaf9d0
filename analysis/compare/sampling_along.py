"""compare --temperature and recommend --temperature on the batches load_run reads: every config at T
computed on each batch while the run is read (``comparison_along``, load_run's ``per_run``), so that
the command reads and replays a dump once. ``loaded_comparison`` and ``loaded_sums`` take the results
from ``run.read_along``; ``compare_sampling_loaded`` reads the run again (compare_sampling_run) only
when nothing matching was computed along (another set of configs, a vocabulary size the manifest
contradicts: that error comes where the command asks for the size).

Every batch folds its rounds into one FoldedSums that the run's batches share (as
analysis.compare.sampling_sums.curve_sums: nothing per round but the refused rounds', and the
outcomes where the per-round frame is asked for).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig
from replay.core.sampling_recorded import recorded_column
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.runs import PerBatch, Run
from replay.io.manifest import Manifest
from replay.util.errors import SpecReplayError

from .sampling import SamplingComparison
from .sampling_batch import batch_gaps, compare_sampling_run, join_gaps
from .sampling_sums import FoldedSums, check_every_round, folded_sums


@dataclass(frozen=True)
class AlongKey:
    """What a comparison at T was computed for: a consumer uses it only when it asks for the same."""

    configs: tuple[TreeConfig, ...]
    temperature: float
    vocab: tuple[int, str | None] | None  # the size and where it came from (messages name it)
    threshold: float
    per_round: bool


@dataclass(frozen=True, eq=False)
class SamplingCompareAlong:
    """One batch's share of a comparison at T, computed while load_run read it (comparison_along)."""

    key: AlongKey
    sums: FoldedSums  # the run's, shared by its batches
    rounds: int  # the batch's replayed rounds
    gaps: list | None  # batch_gaps at a T whose node_logprobs the manifest records, else None


def along_key(
    configs: Sequence[TreeConfig], temperature: float, vocab_size: int | None, gamma_threshold: float | None, per_round
) -> AlongKey:
    vocab = None if vocab_size is None else (int(vocab_size), getattr(vocab_size, "source", None))
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)
    return AlongKey(tuple(configs), float(temperature), vocab, threshold, bool(per_round))


def comparison_along(
    temperature: float,
    configs_of: Callable[[TreeConfig], Sequence[TreeConfig]],
    vocab_of: Callable[[Manifest], int | None],
    gamma_threshold: float | None,
    per_round_of: Callable[[Manifest], bool],
    gaps: bool = False,
) -> Callable[[Run], PerBatch | None]:
    """analysis.tables.runs.load_run's ``per_run`` for a comparison at T: ``configs_of(the run's tree)``
    at ``temperature`` with ``vocab_of(manifest)``, with the per-round frame where
    ``per_round_of(manifest)``; ``gaps``: also node_logprob_gaps_run's rounds, at a recorded T. When
    ``configs_of`` or ``vocab_of`` raises, nothing is computed along."""

    def per_run(opened: Run) -> PerBatch | None:
        try:
            vocab = vocab_of(opened.manifest)
            configs = tuple(configs_of(opened.tree))
        except SpecReplayError:
            return None
        nodes = opened.manifest.node_logprob_temperatures
        key = along_key(configs, temperature, vocab, gamma_threshold, per_round_of(opened.manifest))
        with_gaps = gaps and recorded_column(key.temperature, nodes) is not None
        sums, fold = folded_sums(configs, [key.temperature], vocab, key.threshold, nodes, key.per_round)

        def per_batch(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> SamplingCompareAlong:
            found = batch_gaps(batch, res, key.temperature, nodes) if with_gaps else None
            return SamplingCompareAlong(key, sums, fold(batch, res, tree), found)

        return per_batch

    return per_run


def _read_along(run: LabelledRun, key: AlongKey) -> list[SamplingCompareAlong] | None:
    """The batches' shares computed for ``key`` while the run was read (every round once), else None."""
    along = run.read_along
    if not along or not all(isinstance(a, SamplingCompareAlong) and a.key == key for a in along):
        return None
    check_every_round(sum(a.rounds for a in along), run, "compare")
    return list(along)


def loaded_sums(run: LabelledRun, key: AlongKey) -> FoldedSums | None:
    """The run's FoldedSums for ``key`` (without the per-round frame), computed as it was read, else None."""
    along = _read_along(run, key) if not key.per_round else None
    return along[0].sums if along else None


def loaded_comparison(run: LabelledRun, key: AlongKey) -> SamplingComparison | None:
    """compare_sampling_run's SamplingComparison for ``key``, from what was computed as the run was read, else None."""
    along = _read_along(run, key)
    return along[0].sums.comparison(run.config) if along else None


def compare_sampling_loaded(
    run: LabelledRun,
    configs: Sequence[TreeConfig],
    temperature: float,
    vocab_size: int | None = None,
    gamma_threshold: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    per_round: bool = True,
) -> SamplingComparison:
    """compare_sampling_run at one T: from what was computed as the run was read, else the run read again."""
    done = loaded_comparison(run, along_key(configs, temperature, vocab_size, gamma_threshold, per_round))
    if done is not None:
        return done
    return compare_sampling_run(run, configs, [temperature], vocab_size, gamma_threshold, progress, per_round)


def loaded_gaps(run: LabelledRun, temperature: float, refused: set[str]) -> tuple[list[str], list[str]] | None:
    """node_logprob_gaps_run's two lists from what was computed as the run was read, else None."""
    along = run.read_along
    if not along or not all(
        isinstance(a, SamplingCompareAlong) and a.gaps is not None and a.key.temperature == float(temperature)
        for a in along
    ):
        return None
    return join_gaps([a.gaps for a in along], refused)
