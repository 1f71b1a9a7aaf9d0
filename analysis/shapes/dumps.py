"""One dump as ``recommend`` sees it: its statistics and exact measurements of contained configs.

``scan_run``: a dump directory or packed run read in batches (``replay.engine.runs``), replayed by
``replay.engine.batch``, measured by ``analysis.compare.subtree_batch``. The statistics pass reads the dump
once; the measurements need a second pass over the batches, kept in memory when they are small
or memory-mapped (packed runs), read again otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from analysis.compare.subtree import is_contained
from analysis.compare.subtree_batch import STOP_CODE_LEAF, SubOutcomes, replay_contained_many
from analysis.tables.runs import LabelledRun, ram_bytes
from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch, TreeShape, expanded_nodes
from replay.engine.options import ReplayOptions
from replay.engine.run_notes import input_warnings, run_layout
from replay.engine.runs import (
    NoteGroup,
    Run,
    batch_round_notes,
    detected_layouts,
    explain_rejections,
    note_groups,
    open_run,
    replay_in_run,
)
from replay.io.skipfold import listed_once
from replay.io.skipped import Skipped

from .stats import DumpStats, StatsBuilder

KEEP_BYTES = 512 << 20  # batches held in RAM between the two passes (memory-mapped ones are free)
HOW_EXACT = "exact replay of the contained config (analysis.compare.subtree)"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Measured:
    """A measured accepted length (bonus excluded) of one config on recorded rounds.

    ``mean_accepted`` and its standard error ``se`` are over the ``rounds`` decided rounds. When the
    dump cannot decide ``undecidable`` further rounds, ``lower`` / ``upper`` are the mean over all
    rounds with each undecidable round at its lower / upper bound (both equal the mean otherwise).
    """

    mean_accepted: float
    se: float
    rounds: int
    how: str
    undecidable: int = 0
    lower: float | None = None
    upper: float | None = None

    @property
    def decided(self) -> bool:
        return self.undecidable == 0


@dataclass
class Totals:
    """Running sums of one config's per-round outcomes (sums of whole numbers: the same in any order)."""

    decided: int = 0
    total: int = 0
    sum_dec: float = 0.0
    sq_dec: float = 0.0
    sum_lo: float = 0.0
    sum_hi: float = 0.0
    leaf_stops: int = 0  # decided rounds whose accepted path ends at a leaf of the config's tree

    def add(self, decided: np.ndarray, lower: np.ndarray, upper: np.ndarray, stop: np.ndarray | None = None) -> None:
        lo = lower.astype(np.float64)
        if stop is not None:
            self.leaf_stops += int((decided & (stop == STOP_CODE_LEAF)).sum())
        self.decided += int(decided.sum())
        self.total += int(decided.shape[0])
        self.sum_dec += float(lo[decided].sum())
        self.sq_dec += float((lo[decided] ** 2).sum())
        self.sum_lo += float(lo.sum())
        self.sum_hi += float(upper.astype(np.float64).sum())

    def measured(self) -> Measured:
        n = self.decided
        mean = self.sum_dec / n if n else float("nan")
        if n > 1:
            se = math.sqrt(max(self.sq_dec - n * mean * mean, 0.0) / (n - 1) / n)
        else:
            se = float("inf") if n == 1 else float("nan")
        lo = self.sum_lo / self.total if self.total else float("nan")
        hi = self.sum_hi / self.total if self.total else float("nan")
        return Measured(mean, se, n, HOW_EXACT, self.total - n, lo, hi)


def outcome_totals(outcomes: Iterable[SubOutcomes]) -> Totals:
    """The sums of one config's walks on replayed rounds, some rounds each (compare's parts), as the
    second pass adds them: what measure_many gives for a config walked already."""
    totals = Totals()
    for o in outcomes:
        totals.add(o.decided, o.lower, o.upper, o.stop)
    return totals


@dataclass(frozen=True, eq=False)
class DumpInput:
    """A dump's statistics and a way to measure contained configs exactly on its rounds."""

    directory: str
    tree: TreeConfig  # the recorded config
    stats: DumpStats
    skipped: tuple[Skipped, ...]
    measure_many: Callable[[Sequence[TreeConfig], Progress | None], list[Measured | None]]
    warnings: tuple[str, ...] = ()  # lines for stderr about how the files were read
    # per contained config, the fraction of its decided rounds whose accepted path ends at a leaf of its
    # tree (None: not contained or none decided); scan_run's, from the batch arrays
    leaf_stops: Callable[[Sequence[TreeConfig]], list[float | None]] | None = None


@dataclass(frozen=True, eq=False)
class _Piece:
    """Rounds of one shape from one batch, with what the second pass needs."""

    batch: RoundBatch
    result: BatchResult
    expanded: list[np.ndarray]
    shape: TreeShape


def _pieces(run: Run, batch: RoundBatch, res: BatchResult) -> list[_Piece]:
    """One replayed batch's pieces: one per round shape."""
    out = []
    for k, shape in enumerate(res.shapes):
        members = np.flatnonzero(res.shape_index == k)
        if not members.shape[0]:
            continue
        whole = members.shape[0] == len(batch)
        b = batch if whole else batch.take(members)
        r = res if whole else res.take(members)
        out.append(_Piece(b, r, expanded_nodes(r, shape), shape))
    return out


def _pieces_again(
    run: Run, path: str, opts: ReplayOptions, kept: list[_Piece] | None, given: tuple | None
) -> Callable[[], Iterator[_Piece]]:
    """The second pass's pieces: those ``kept``, else made again from the batches loaded (``given``),
    else the run read again."""

    def pieces() -> Iterator[_Piece]:
        if kept is not None:
            yield from kept
            return
        if given is not None:  # too big to keep: made again from the batches loaded
            for b in given:
                yield from _pieces(run, b.batch, b.result)
            return
        for load in replace(open_run(path, opts), run_layout=run.run_layout).chunks(1):  # too big to keep: read again
            for batch in load()[0]:
                yield from _pieces(run, batch, replay_in_run(batch, run))

    return pieces


def _totals_of(
    run: Run,
    pieces: Callable[[], Iterator[_Piece]] | None,
    configs: Sequence[TreeConfig],
    progress: Progress | None,
    known: Mapping[TreeConfig, Totals],
) -> dict[int, Totals]:
    """The running sums of each config contained in the recorded one, by its index in ``configs``
    (none measured without ``pieces``: the dump replayed no round); those of ``known`` as given, not walked again."""
    todo = [k for k, c in enumerate(configs) if is_contained(c, run.tree)]
    totals = {k: known[configs[k]] if pieces is not None and configs[k] in known else Totals() for k in todo}
    walk = [k for k in todo if pieces is not None and configs[k] not in known]
    done = 0
    if walk and pieces is not None:
        for piece in pieces():
            ok = piece.result.error == 0
            outs = replay_contained_many(
                piece.batch, piece.result, piece.expanded, piece.shape, [configs[k] for k in walk], run.tree.gamma
            )
            for k, out in zip(walk, outs):
                totals[k].add(out.decided[ok], out.lower[ok], out.upper[ok], out.stop[ok])
            done += len(piece.batch)
            if progress:
                progress(done, run.num_rounds)
    return totals


def _read(run: Run) -> Iterator[tuple[list[tuple[RoundBatch, None]], list[tuple[int, Skipped]]]]:
    """(the batches of a chunk, outcomes not known yet; its unreadable rounds), chunk by chunk."""
    for load in run.chunks(1):  # each loader reads (and checks) one piece when called
        batches, unreadable = load()
        yield [(b, None) for b in batches], unreadable


def scan_run(
    path: str,
    opts: ReplayOptions = ReplayOptions(),
    progress: Progress | None = None,
    loaded: LabelledRun | None = None,
    known: Mapping[TreeConfig, Totals] | None = None,
) -> DumpInput:
    """The statistics pass over a dump directory or packed run, batch by batch: the batches and
    outcomes ``loaded`` kept when it is the run at ``path`` loaded with them (analysis.tables.runs:
    nothing read again), else the run read and replayed; a run whose rounds give both validate
    layouts is read again under the one decided for it (replay.engine.runs.replay_run's rule).
    ``known``: the sums of configs walked on the loaded run already (outcome_totals of the greedy
    walk without the early stop), which measure_many takes instead of walking them again."""
    if loaded is not None:  # its replay decided the run's layout
        return _scan(loaded.replay.reopen(opts), path, opts, progress, loaded, known or {})[0]
    run = open_run(path, opts)
    dump, layouts = _scan(run, path, opts, progress, None, {})
    layout = run_layout(*layouts)
    if layout is None:
        return dump
    return _scan(replace(run, run_layout=layout), path, opts, progress, None, {})[0]


def _scan(
    run: Run,
    path: str,
    opts: ReplayOptions,
    progress: Progress | None,
    loaded: LabelledRun | None,
    known: Mapping[TreeConfig, Totals],
) -> tuple[DumpInput, tuple[int, int]]:
    """scan_run of an opened run, and its replayed rounds' detected layouts (runs.detected_layouts)."""
    builder = StatsBuilder(run.num_rounds, run.tree.gamma)
    later: list[tuple[int, Skipped]] = []
    kept: list[_Piece] | None = []
    notes: list[NoteGroup] = []
    held = 0
    seen = replayed = accepted = n_all = n_detected = 0
    given = loaded.batches if loaded is not None else None
    for batches, unreadable in _read(run) if given is None else (([(b.batch, b.result) for b in given], []),):
        later += unreadable
        for batch, res in batches:
            if res is None:  # read here: its rejected rounds named here (given: load_run named them)
                res = replay_in_run(batch, run)
                later += explain_rejections(batch, res, run)
            n_all, n_detected = (a + b for a, b in zip((n_all, n_detected), detected_layouts(res)))
            for piece in _pieces(run, batch, res):
                ok = piece.result.ok
                replayed += int(ok.sum())
                accepted += int(piece.result.accepted_length[ok].astype(np.int64).sum())
                b = piece.batch
                positions = b.ordinals if b.ordinals is not None else seen + np.arange(len(b))
                builder.add_batch(b, piece.result, piece.expanded, piece.shape, positions)
                notes += note_groups(piece.result, positions)
                if kept is not None:
                    held += ram_bytes(piece.batch) + ram_bytes(piece.expanded)
                    if held <= KEEP_BYTES:
                        kept.append(piece)
                    else:
                        kept = None
            seen += len(batch)
            if progress:
                progress(seen, run.num_rounds)
    skipped = listed_once(run.skipped, [s for _, s in sorted(later, key=lambda t: t[0])])
    if given is not None:  # the unreadable rounds too, as load_run listed them
        skipped = loaded.replay.skipped

    again = _pieces_again(run, path, opts, kept, given)

    def totals_of(configs: Sequence[TreeConfig], progress: Progress | None = None) -> dict[int, Totals]:
        return _totals_of(run, again if builder.rounds else None, configs, progress, known)

    def measure_many(configs: Sequence[TreeConfig], progress: Progress | None = None) -> list[Measured | None]:
        totals = totals_of(configs, progress)
        return [totals[k].measured() if k in totals and builder.rounds else None for k in range(len(configs))]

    def leaf_stops(configs: Sequence[TreeConfig]) -> list[float | None]:
        totals = totals_of(configs)
        return [
            totals[k].leaf_stops / totals[k].decided if k in totals and totals[k].decided else None
            for k in range(len(configs))
        ]

    warnings = input_warnings(
        run.config, run.manifest, run.path, run.config_source, run.options.tree_index
    ) + run.step0.after_replay(replayed, accepted > 0)
    warnings += batch_round_notes(notes)
    dump = DumpInput(run.path, run.tree, builder.finish(), skipped, measure_many, warnings, leaf_stops)
    return dump, (n_all, n_detected)
