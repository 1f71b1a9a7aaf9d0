"""Load one or more dump directories as labelled runs (the unit every table and plot groups by)."""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import cached_property, partial
from pathlib import Path

import numpy as np
import pandas as pd

from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.runs import PerBatch, ReplayOptions, Run, RunReplay, iter_run_chunks, replay_run
from replay.util.errors import SpecReplayError, printable
from replay.util.parallel import ordered_map, resolve_workers
from replay.util.progress import progress_enabled

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


RoundSizes = tuple[np.ndarray, np.ndarray, np.ndarray]  # [R] int64 accepted length, draft steps, draft nodes


@dataclass(frozen=True, eq=False)
class LoadedBatch:
    """One batch of a run and its outcomes, as load_run read and replayed it."""

    batch: RoundBatch
    result: BatchResult


def ram_bytes(obj) -> int:
    """Bytes of the arrays of ``obj`` (a dataclass, its fields' dataclasses, lists and tuples) held in
    memory: an array over a memory-mapped file (a packed run's) costs nothing."""
    if isinstance(obj, np.ndarray):
        base = obj
        while isinstance(base, np.ndarray):
            if isinstance(base, np.memmap):
                return 0
            base = base.base
        return 0 if isinstance(base, mmap.mmap) else obj.nbytes
    if isinstance(obj, (list, tuple)):
        return sum(ram_bytes(x) for x in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        return sum(ram_bytes(getattr(obj, f.name)) for f in fields(obj))
    return 0


class _Keeper:
    """load_run's keeping of the batches it read: each one while all of them take at most ``limit``
    bytes of memory (ram_bytes), none once they would take more (batches are replayed on several
    threads: the count is locked)."""

    def __init__(self, limit: int):
        self.limit, self.held, self.full = limit, 0, limit <= 0
        self._lock = threading.Lock()

    def keep(self, batch: RoundBatch, res: BatchResult) -> LoadedBatch | None:
        if self.full:
            return None
        size = ram_bytes(batch) + ram_bytes(res)
        with self._lock:
            self.held += size
            self.full = self.full or self.held > self.limit
            return None if self.full else LoadedBatch(batch, res)


@dataclass(frozen=True, eq=False)
class LabelledRun:
    """A dump directory or packed run, replayed by the batch engine, under a short, unique label.

    ``tables``: the run's (round table, node table or None), as load_run built them; ``sizes``: each
    replayed round's (accepted length, draft steps, draft nodes), in run order.
    """

    label: str
    replay: RunReplay
    tables: tuple[pd.DataFrame, pd.DataFrame | None]
    sizes: RoundSizes
    options: ReplayOptions = field(default_factory=ReplayOptions)
    node_counts: list | None = None  # the node metrics' counts, one per block (None: TABLES_ROUNDS, TABLES_KEYS)
    read_along: tuple | None = None  # load_run's per_batch: its value for each batch, in the order read
    progress: bool = False  # whether a second reading of the run may draw a bar
    # each batch with its outcomes as load_run read and replayed them, in the order read, when it was
    # asked to keep them (keep_bytes) and they fit; None: a consumer reads and replays the run again
    batches: tuple[LoadedBatch, ...] | None = None

    @property
    def rounds(self) -> int:
        """How many rounds replayed (the round table's rows)."""
        return len(self.tables[0])

    @property
    def config(self):
        return self.replay.tree

    @cached_property
    def keys(self) -> RoundKeys:
        """Each replayed round's key (a, b), in run order."""
        return RoundKeys(self.tables[0]["key_a"].to_numpy(), self.tables[0]["key_b"].to_numpy())

    @cached_property
    def summaries(self) -> tuple[list[int], list[str], RoundKeys]:
        """(accepted length, stop, key) per replayed round: what analysis.report.example_round's choice reads."""
        return (self.tables[0]["accepted_length"].tolist(), self.tables[0]["stop"].tolist(), self.keys)


def dir_label(path: str) -> str:
    """A run's label when none is given: its directory's name (the path itself for ``/``), printable."""
    return printable(Path(path).resolve().name or str(path))


def unique_labels(dirs: Sequence[str], labels: Sequence[str] | None = None) -> list[str]:
    """Labels for the runs: given ones, else directory names, made unique with ``#2``, ``#3``.

    A label is printable (undecodable file-name bytes shown as ``\\xff``): it goes into text that is
    encoded strictly as UTF-8 (table columns, JSON, CSV, HTML, plot legends).
    """
    if labels:
        if len(labels) != len(dirs):
            times = "once" if len(labels) == 1 else f"{len(labels)} times"
            runs = "1 dump" if len(dirs) == 1 else f"{len(dirs)} dumps"
            raise SpecReplayError(f"--label given {times} for {runs}: give it once per DUMP, in order")
        base = [printable(label) for label in labels]
    else:
        base = [dir_label(d) for d in dirs]
    seen: dict[str, int] = {}
    out = []
    for b in base:
        seen[b] = seen.get(b, 0) + 1
        out.append(b if seen[b] == 1 else f"{b}#{seen[b]}")
    return out


@dataclass(frozen=True)
class RunsWithRounds:
    """What a command does with its runs by the rounds each can use (runs_with_rounds)."""

    kept: tuple[int, ...]  # the runs with a round to use, by index, in order
    left_out: tuple[int, ...]  # the runs without one among several: each said so on stderr, then left out
    refused: str | None  # REFUSED_ALONE, REFUSED_EVERY or None: the command goes on with ``kept``


# A lone run without a round is refused with its own reasons (replay.cli.options.no_rounds_error); when
# none of several runs has one, the command is refused naming them all (no_rounds_in_runs).
REFUSED_ALONE, REFUSED_EVERY = "alone", "every"


def runs_with_rounds(rounds: Sequence[int]) -> RunsWithRounds:
    """The one rule for a run without a round to use (``rounds``: each run's count of rounds replayed,
    or at --temperature T usable at T): alone, the command is refused with the run's reasons; beside
    runs that have rounds, it is left out; when no run has one, the command is refused."""
    kept = tuple(k for k, n in enumerate(rounds) if n)
    if len(rounds) == 1:
        return RunsWithRounds(kept, (), None if kept else REFUSED_ALONE)
    left_out = tuple(k for k, n in enumerate(rounds) if not n)
    return RunsWithRounds(kept, left_out, None if kept else REFUSED_EVERY)


# What load_run builds besides the replay: the round and node tables (stats --table/-o); the node
# metrics counted block by block and the round columns the metrics read (stats, plot: memory does
# not grow with a run's node rows); those round columns alone (report: tables/ counts the node
# metrics in its own pass over the per-node arrays, which it derives anyway); or the round keys
# only (compare, and stats and recommend at T: they compute on the batch arrays as load_run reads
# them, per_batch and per_run).
TABLES_FULL, TABLES_METRICS, TABLES_ROUNDS, TABLES_KEYS = "full", "metrics", "rounds", "keys"


def load_runs(
    dirs: Sequence[str],
    opts: ReplayOptions = ReplayOptions(),
    labels: Sequence[str] | None = None,
    progress: bool | None = None,
    tables: str = TABLES_FULL,
    per_batch: PerBatch | None = None,
    per_run: PerRun | None = None,
    keep_bytes: int = 0,
) -> list[LabelledRun]:
    """Replay every directory or packed run, tables included (bad rounds are
    listed in ``run.replay.skipped``, never fatal); ``per_batch``, ``per_run``, ``keep_bytes``: see load_run."""
    if not dirs:
        raise SpecReplayError("no dump directory given")
    return [
        load_run(d, label, opts, progress, tables, per_batch, per_run, keep_bytes)
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
    keep_bytes: int = 0,
) -> LabelledRun:
    """One run replayed: outcomes, skipped list and tables (``tables``: TABLES_FULL, TABLES_METRICS,
    TABLES_ROUNDS or TABLES_KEYS, see there). ``per_batch(batch, result, run's tree)`` is computed on
    each batch while it is read (``run.read_along``): a command that needs more of the batch arrays
    (compare's configs) does not read and replay the run again.
    ``per_run(opened run)``, when given, builds that per_batch from the run's manifest and config
    (stats --temperature: the vocabulary size); None from it: nothing read along. ``keep_bytes``: the
    batches and their outcomes are kept (``run.batches``) when they take at most this much memory,
    for a command that would read the run again (report)."""
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
    full = partial(batch_table_parts, counts=True)  # the node metrics from the arrays, as TABLES_METRICS counts them
    slim = partial(batch_key_parts, names=SLIM_ROUND_COLUMNS)
    build = {TABLES_FULL: full, TABLES_METRICS: batch_metric_parts, TABLES_ROUNDS: slim, TABLES_KEYS: batch_key_parts}
    if tables not in build:
        raise ValueError(f"tables={tables!r}: expected one of {', '.join(build)}")
    part = build[tables]

    keepers: list[_Keeper] = []  # one per reading: replay_run reads a run of two layouts again

    def both_of(opened: Run) -> PerBatch:
        extra = per_run(opened) if per_run is not None else per_batch
        keeper = _Keeper(keep_bytes)
        keepers.append(keeper)
        return lambda b, res, tree: (
            part(b, res, tree, label),
            extra(b, res, tree) if extra else None,
            keeper.keep(b, res),
        )

    rep = replay_run(path, opts, progress=on, per_run=both_of)
    parts = [p for p, _, _ in rep.per_batch]
    along = tuple(x for _, x, _ in rep.per_batch) if per_batch or per_run else None
    kept = None if keepers[-1].full else tuple(k for _, _, k in rep.per_batch if k is not None)
    if tables == TABLES_FULL:
        frames = join_parts(parts)
    else:
        names = KEY_ROUND_COLUMNS if tables == TABLES_KEYS else SLIM_ROUND_COLUMNS
        frames = (join_slim(parts, names), None)
    counted = tables in (TABLES_FULL, TABLES_METRICS)
    counts = [p.node_counts for p in parts if p.node_counts is not None] if counted else None
    res = rep.result
    ok = res.ok
    a, steps, nodes = (np.asarray(x[ok], dtype=np.int64) for x in (res.accepted_length, res.num_steps, res.num_nodes))
    # the per-batch values are unpacked above; dropping them frees the batches a full keeper gave up on
    # and the table parts the frames now hold
    rep = replace(rep, per_batch=())
    return LabelledRun(label, rep, frames, (a, steps, nodes), opts, counts, along, on, kept)


def with_node_counts(run: LabelledRun) -> LabelledRun:
    """``run`` with its node metrics' counts: as loaded, else counted from its batches (kept, or the
    run read again) as TABLES_METRICS counts them, for a run loaded with TABLES_ROUNDS whose counts
    no tables/ pass made (analysis.tables.stream.write_run_tables)."""
    if run.node_counts is not None:
        return run
    from .batch import batch_table_parts

    def counted(b, res, tree):
        return batch_table_parts(b, res, tree, run.label, (), (), counts=True).node_counts

    blocks = each_batch(run, counted) if run.rounds else ()
    return replace(run, node_counts=[c for chunk in blocks for c in chunk if c is not None])


def each_batch(run: LabelledRun, per_batch: PerBatch, workers: int | None = None) -> Iterator[list]:
    """``per_batch(batch, result, the run's tree)`` on every batch of a batch-loaded run, one list of its
    values per chunk, chunks by their first round (no later chunk holds a round before an earlier one's
    first): each batch load_run kept (``run.batches``) a chunk of its own, else the run read and replayed
    again (replay.engine.runs.iter_run_chunks). On ``workers`` threads (None: resolve_workers')."""
    if run.batches is not None:

        def apply(loaded: LoadedBatch) -> list:
            return [per_batch(loaded.batch, loaded.result, run.config)]

        yield from ordered_map(apply, sorted(run.batches, key=_first_round), resolve_workers(workers))
        return
    opened = run.replay.reopen(run.options)
    for _, batches in iter_run_chunks(opened, workers, per_batch=per_batch, in_run_order=True):
        yield [value for _, _, value in batches]


def _first_round(loaded: LoadedBatch) -> int:
    """The batch's first round in the run: its least ordinal (a batch without ordinals is a
    directory's, read in run order: the sort, stable, keeps it in place)."""
    ords = loaded.batch.ordinals
    return int(ords.min()) if ords is not None and ords.shape[0] else -1
