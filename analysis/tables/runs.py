"""Load one or more dump directories as labelled runs (the unit every table and plot groups by)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from replay.engine.replayer import DirectoryReplay, ReplayOptions, RoundResult, replay_directory
from replay.engine.runs import PerBatch, Run, RunReplay, replay_run
from replay.util.errors import SpecReplayError
from replay.util.progress import progress_enabled, tqdm_progress

PerRun = Callable[[Run], PerBatch | None]  # load_run's per_run: a per_batch built from the opened run


class RoundKeys(Sequence):
    """Each round's key (a, b) as a tuple of ints, made when asked: a million tuples cost a fifth of a
    second that plot's choice of its example round (which needs only lengths and stops) need not pay."""

    def __init__(self, a: np.ndarray, b: np.ndarray):
        self._a, self._b = a, b

    def __len__(self) -> int:
        return int(self._a.shape[0])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(zip(self._a[i].tolist(), self._b[i].tolist()))
        return (int(self._a[i]), int(self._b[i]))

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._a.tolist(), self._b.tolist())


class LazyResults(Sequence):
    """The scalar RoundResults of a batch-replayed run, replayed (reference path) on first use.

    Its length is known from the batch replay, so counting rounds costs nothing; only commands
    that need RoundResult objects (the drawn example round, a caller of the reference functions) pay
    for the round-by-round replay; compare's other configs and gamma strategies replay on the batch
    path (analysis.compare.batch).
    """

    def __init__(
        self,
        path: str,
        opts: ReplayOptions,
        rounds: pd.DataFrame,
        label: str = "run",
        progress: bool | None = None,
        sizes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ):
        # analysis.compare.configs.round_sizes: (accepted length, steps, nodes) per round, in order
        self.sizes = sizes
        self._path = path
        self._opts = opts
        self._label = label
        self._progress = progress
        self._rounds = rounds  # the run's round table: its columns become lists only when asked (below)
        self._n = len(rounds)

    @cached_property
    def _keys(self) -> RoundKeys:
        return RoundKeys(self._rounds["key_a"].to_numpy(), self._rounds["key_b"].to_numpy())

    @cached_property
    def summaries(self) -> tuple[list[int], list[str], RoundKeys]:
        """analysis.report.example_round's choice needs only these: it then replays just the round drawn."""
        return (self._rounds["accepted_length"].tolist(), self._rounds["stop"].tolist(), self._keys)

    @cached_property
    def _results(self) -> tuple[RoundResult, ...]:
        results = load_reference(self._path, self._label, self._opts, self._progress).results
        if len(results) != self._n:
            raise RuntimeError(
                f"the reference replayed {len(results)} rounds, the batch path {self._n}: a bug in replay.engine.batch"
            )
        return results

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice) or "_results" in vars(self):
            return self._results[i]
        key = self._keys[i]  # one round: replay only it
        return replay_directory(self._path, replace(self._opts, only_round=key)).results[0]

    def __iter__(self) -> Iterator[RoundResult]:
        return iter(self._results)


@dataclass(frozen=True, eq=False)
class BatchReplay:
    """A run replayed by the batch path, with DirectoryReplay's fields (``results`` lazy)."""

    batch: RunReplay
    results: LazyResults
    options: ReplayOptions = field(default_factory=ReplayOptions)

    directory = property(lambda self: self.batch.directory)
    config = property(lambda self: self.batch.config)
    tree = property(lambda self: self.batch.tree)
    manifest = property(lambda self: self.batch.manifest)
    skipped = property(lambda self: self.batch.skipped)
    config_source = property(lambda self: self.batch.config_source)
    notes = property(lambda self: self.batch.notes)
    warnings = property(lambda self: self.batch.warnings)


@dataclass(frozen=True, eq=False)
class LabelledRun:
    """A replayed dump directory under a short, unique label.

    ``tables``: the run's (round table, node table) when the batch path built them (load_runs);
    analysis.tables.build.build_tables builds them from ``results`` otherwise.
    """

    label: str
    replay: DirectoryReplay | BatchReplay
    tables: tuple[pd.DataFrame, pd.DataFrame | None] | None = None
    node_counts: list | None = None  # with tables=TABLES_METRICS: the node metrics' counts, one per block
    read_along: tuple | None = None  # load_run's per_batch: its value for each batch, in the order read

    @property
    def results(self):
        return self.replay.results

    @property
    def config(self):
        return self.replay.tree


def unique_labels(dirs: Sequence[str], labels: Sequence[str] | None = None) -> list[str]:
    """Labels for the runs: given ones, else directory names, made unique with ``#2``, ``#3``."""
    if labels:
        if len(labels) != len(dirs):
            times = "once" if len(labels) == 1 else f"{len(labels)} times"
            runs = "1 dump" if len(dirs) == 1 else f"{len(dirs)} dumps"
            raise SpecReplayError(f"--label given {times} for {runs}: give it once per DUMP, in order")
        base = list(labels)
    else:
        base = [Path(d).resolve().name or str(d) for d in dirs]
    seen: dict[str, int] = {}
    out = []
    for b in base:
        seen[b] = seen.get(b, 0) + 1
        out.append(b if seen[b] == 1 else f"{b}#{seen[b]}")
    return out


# What load_run builds besides the replay: the round and node tables (stats --table/-o, report's
# tables/); the node metrics counted block by block and the round columns the metrics read (stats,
# plot: memory does not grow with a run's node rows); or the round keys only (compare, and stats and
# recommend at T: they read the batch arrays again).
TABLES_FULL, TABLES_METRICS, TABLES_KEYS = "full", "metrics", "keys"


def load_runs(
    dirs: Sequence[str],
    opts: ReplayOptions = ReplayOptions(),
    labels: Sequence[str] | None = None,
    progress: bool | None = None,
    tables: str = TABLES_FULL,
    per_batch: PerBatch | None = None,
    per_run: PerRun | None = None,
) -> list[LabelledRun]:
    """Replay every directory or packed run on the batch path, tables included (bad rounds are
    listed in ``run.replay.skipped``, never fatal); ``per_batch``, ``per_run``: see load_run."""
    if not dirs:
        raise SpecReplayError("no dump directory given")
    return [
        load_run(d, label, opts, progress, tables, per_batch, per_run)
        for label, d in zip(unique_labels(dirs, labels), dirs)
    ]


def load_run(
    path: str,
    label: str,
    opts: ReplayOptions = ReplayOptions(),
    progress: bool | None = None,
    tables: str = TABLES_FULL,
    per_batch: PerBatch | None = None,
    per_run: PerRun | None = None,
) -> LabelledRun:
    """One run by the batch path: outcomes, skipped list and tables as the reference would give
    (``tables``: TABLES_FULL, TABLES_METRICS or TABLES_KEYS, see there). ``per_batch(batch, result,
    run's tree)`` is computed on each batch while it is read (``run.read_along``): a command that
    needs more of the batch arrays (compare's configs) does not read and replay the run again.
    ``per_run(opened run)``, when given, builds that per_batch from the run's manifest and config
    (stats --temperature: the vocabulary size); None from it: nothing read along."""
    from .batch import (
        KEY_ROUND_COLUMNS,
        SLIM_ROUND_COLUMNS,
        batch_key_parts,
        batch_metric_parts,
        batch_table_parts,
        join_parts,
        join_slim,
    )

    on = progress_enabled() if progress is None else progress
    build = {TABLES_FULL: batch_table_parts, TABLES_METRICS: batch_metric_parts, TABLES_KEYS: batch_key_parts}
    if tables not in build:
        raise ValueError(f"tables={tables!r}: expected one of {', '.join(build)}")
    part = build[tables]

    def both_of(opened: Run) -> PerBatch:
        extra = per_run(opened) if per_run is not None else per_batch
        return lambda b, res, tree: (part(b, res, tree, label), extra(b, res, tree) if extra else None)

    rep = replay_run(path, opts, progress=on, per_run=both_of)
    parts = [p for p, _ in rep.per_batch]
    along = tuple(x for _, x in rep.per_batch) if per_batch or per_run else None
    counts = None
    if tables == TABLES_FULL:
        frames = join_parts(parts)
    else:
        names = SLIM_ROUND_COLUMNS if tables == TABLES_METRICS else KEY_ROUND_COLUMNS
        frames = (join_slim(parts, names), None)
        counts = [p.node_counts for p in parts if p.node_counts is not None] if tables == TABLES_METRICS else None
    res = rep.result
    ok = res.ok
    sizes = tuple(np.asarray(a[ok], dtype=np.int64) for a in (res.accepted_length, res.num_steps, res.num_nodes))
    results = LazyResults(path, opts, frames[0], label, on, sizes)
    return LabelledRun(label, BatchReplay(rep, results, opts), frames, counts, along)


def load_reference(
    path: str, label: str, opts: ReplayOptions = ReplayOptions(), progress: bool | None = None
) -> LabelledRun:
    """One run by the scalar reference path (every RoundResult in memory; tables built from them)."""
    update, close = tqdm_progress(f"replay {label}", progress)
    try:
        return LabelledRun(label, replay_directory(path, opts, update))
    finally:
        close()
