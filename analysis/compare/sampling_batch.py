"""Other configs at temperature T (analysis.compare.sampling's table), on the batch arrays: numpy over rounds.

Per config, T and round: determined or not (and why), the bounds on the expected accepted length and
on P(L >= d), exactness.

Each batch's rounds go through analysis.compare.sampling_parts (per tree shape: refused or not,
each config's outcome from analysis.compare.sampling_subtrees); here the parts are joined into
a SamplingComparison in run order, or, for the table alone, folded block by block
(analysis.compare.sampling_sums).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from analysis.tables.runs import LabelledRun, each_batch
from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.batch.recorded import node_logprob_gaps_batch
from replay.util.rows import unique_rows
from replay.util.words import round_name

from .batch import per_batch_parts
from .sampling import (
    REACHED,
    SAMPLING_COLUMNS,
    SAMPLING_PER_ROUND_COLUMNS,
    SamplingComparison,
    summarize_sampling_arrays,
)
from .sampling_parts import NOT_REFUSED, SamplingPart, sampling_parts
from .sampling_subtrees import AtT
from .sampling_sums import curve_sums
from .subtree import (
    reason_text,
)


def join_sampling(
    parts: Sequence[SamplingPart],
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    per_round: bool = True,
) -> SamplingComparison:
    """The SamplingComparison of the parts of one run, rounds in run order.
    ``per_round`` False leaves the per-round frame empty (the report reads only the table)."""
    order = np.argsort(np.concatenate([p.ordinals for p in parts] or [np.zeros(0, np.int64)]), kind="stable")
    names = np.concatenate([p.names for p in parts] or [np.zeros(0, dtype=object)])[order]
    # each T's refused rounds and reasons, in run order (temperatures of one refusal_key share them)
    keys = parts[0].keys if parts else {}
    refused = {key: np.concatenate([p.refused[key] for p in parts])[order] for key in set(keys.values())}
    why = {key: np.concatenate([p.why[key] for p in parts])[order] for key in set(keys.values())}
    skipped = []
    for t in temperatures:
        codes = refused[keys[t]] if parts else np.zeros(0, np.int8)
        skipped.extend((str(names[i]), t, str(why[keys[t]][i])) for i in np.flatnonzero(codes != NOT_REFUSED))
    rows, frames, needs_vocab = [], [], False
    for c, cfg in enumerate(configs):
        for t in temperatures:
            use = refused[keys[t]] == NOT_REFUSED if parts else np.zeros(0, bool)
            at = AtT.concat([p.outcomes[(c, t)] for p in parts]).take(order[use]) if parts else None
            if at is None:
                rows.append(summarize_sampling_arrays(cfg, recorded, t, *_empty(cfg.gamma)))
                continue
            needs_vocab |= at.needs_vocab
            rows.append(
                summarize_sampling_arrays(
                    cfg, recorded, t, at.determined, at.lo, at.hi, at.ge_lo, at.ge_hi, at.exact, at.steps_hi
                )
            )
            if per_round and at.determined.shape[0]:
                frames.append(_frame(cfg, t, names[use], at))
    table = pd.DataFrame(rows, columns=SAMPLING_COLUMNS)
    if frames:
        rounds = pd.DataFrame({k: np.concatenate([f[k] for f in frames]) for k in SAMPLING_PER_ROUND_COLUMNS})
    else:
        rounds = pd.DataFrame([], columns=SAMPLING_PER_ROUND_COLUMNS)
    return SamplingComparison(table, rounds, skipped, needs_vocab)


def _empty(gamma: int) -> tuple:
    f, b, i = np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    return b, f, f, np.zeros((0, gamma)), np.zeros((0, gamma)), b, i


def _frame(cfg: TreeConfig, t: float, names: np.ndarray, at: AtT) -> dict[str, np.ndarray]:
    n = names.shape[0]
    codes = np.stack([at.why.astype(np.int64), at.depth, at.rank], axis=1)
    uniq, inverse = unique_rows(codes)
    texts = np.asarray(
        [reason_text(int(w), int(d), int(r), REACHED) if w else "" for w, d, r in uniq.tolist()] or [""], dtype=object
    )
    return {
        "config": np.full(n, cfg.short(), dtype=object),
        "temperature": np.full(n, float(t)),
        "round": names.astype(object),
        "determined": at.determined,
        "expected_accepted_length_lo": at.lo,
        "expected_accepted_length_hi": at.hi,
        "exact": at.exact,
        "reason": texts[inverse],
    }


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
    recorded_edges); without ``per_round``, block by block (curve_sums): the table only."""
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)
    nodes = run.replay.manifest.node_logprob_temperatures
    if not per_round:
        return curve_sums(run, configs, temperatures, vocab_size, threshold, progress, nodes)

    def parts_of(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> list[SamplingPart]:
        return sampling_parts(batch, res, run.config, configs, temperatures, vocab_size, threshold, None, nodes)

    parts = per_batch_parts(run, parts_of, progress)
    return join_sampling(parts, run.config, configs, temperatures, per_round)


def node_logprob_gaps_run(run: LabelledRun, t: float, refused: set[str]) -> tuple[list[str], list[str]]:
    """The replayed rounds of ``run`` not in ``refused`` (names) whose walk at the recorded T cannot read
    node_logprobs (parents layout; without the array), in run order, from the batch arrays
    (replay.engine.batch.recorded.node_logprob_gaps_batch on analysis.tables.runs.each_batch)."""
    nodes = run.replay.manifest.node_logprob_temperatures
    parts = [p for chunk in each_batch(run, lambda b, res, tree: batch_gaps(b, res, t, nodes)) for p in chunk]
    return join_gaps(parts, refused)


def batch_gaps(batch: RoundBatch, res: BatchResult, t: float, nodes) -> list[list[tuple[int, str]]]:
    """node_logprob_gaps_batch's two lists of round names, each name with its position in the run."""
    ordinals = np.arange(len(res)) if res.ordinals is None else np.asarray(res.ordinals, dtype=np.int64)
    at = {round_name((a, b)): int(o) for a, b, o in zip(*res.keys.tolist(), ordinals.tolist())}
    return [[(at[n], n) for n in names] for names in node_logprob_gaps_batch(batch, res, t, nodes)]


def join_gaps(parts: Sequence[list[list[tuple[int, str]]]], refused: set[str]) -> tuple[list[str], list[str]]:
    """batch_gaps of every batch of a run as node_logprob_gaps_run's two lists, in run order."""
    parents, without = ([n for _, n in sorted(g for p in parts for g in p[i]) if n not in refused] for i in (0, 1))
    return parents, without
