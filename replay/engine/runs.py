"""One way in for every source of rounds: a dump directory or a packed run, replayed in batches.

``open_run(path, opts)`` resolves the config and reading options (CLI options, then the manifest,
then config.json) and yields RoundBatches; ``replay_run`` replays them: per-round outcomes as
arrays, and the skipped list with each rejected round's message worded from where the batch
kernel found its fault (replay.engine.batch.rejections).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from replay.core.config import SpecConfig, TreeConfig
from replay.core.selection import fallback_run_warning, unused_scores_note
from replay.core.vocab import LAYOUT_ALL, LAYOUTS
from replay.io.dumpnames import Key
from replay.io.fastread import ReadOptions, iter_read_chunks, plan_items
from replay.io.grouping import Grouping
from replay.io.manifest import Manifest, group_rounds, recorded_round_warnings
from replay.io.packed.pack import PackedBlockError, PackedRun, is_packed_run
from replay.io.skipfold import listed_once, misspelt_companion, no_such_round
from replay.io.skipped import Skipped, round_entry
from replay.io.step0 import Step0Check
from replay.util.errors import DumpError, RoundError, RoundNotFoundError
from replay.util.parallel import ordered_map, resolve_workers
from replay.util.progress import progress_bar
from replay.util.words import round_name

from .batch import BatchResult, RoundBatch, empty_result, replay_batch
from .batch.codes import ERR_LOST_COMPANION, ERR_VALIDATE_ROWS, LOST_PARENTS, ROWS_RUN_LAYOUT, SEL_PARENTS, SEL_PATH
from .batch.rejections import rejection_reasons
from .batch.rising import rising_rows, rising_rows_warnings
from .options import ReplayOptions, open_packed, packed_keys, packed_source_files, resolve_options
from .run_notes import input_warnings, reading_warnings, round_notes_lines, run_layout, unused_raw_note


@dataclass(frozen=True, eq=False)
class Run:
    """A dump directory or a packed run with its resolved config and options."""

    path: str
    kind: str  # "directory" or "packed"
    config: SpecConfig
    tree: TreeConfig
    manifest: Manifest
    options: ReplayOptions  # merged: CLI over manifest
    config_source: str
    skipped: tuple[Skipped, ...]  # files the names could not place in a round
    num_rounds: int  # rounds the names group into, readable or not
    packed: PackedRun | None = None
    grouping: Grouping | None = None
    step0: Step0Check = Step0Check()  # how the step-0 offset was chosen (the grouping's, or the pack's)
    # the layout decided for the run when its rounds' row counts give both (run_notes.run_layout): the
    # rounds of the other one are rejected; None: each round's own (stated, or all rounds agree)
    run_layout: str | None = None

    def chunks(
        self, workers: int | None = None, progress: bool = False, in_run_order: bool = False
    ) -> Iterator[Callable[[], Chunk]]:
        """Loaders of (batches, unreadable rounds as (ordinal, why)) in bounded pieces, ``only_round`` applied.

        A packed run's loader reads and checks one block when called (on a replay thread, so
        checking overlaps replaying); a block that fails its check comes back as skipped rounds.
        A packed run's blocks come group by group; ``in_run_order`` orders them by their first
        round instead, so that no round of a later chunk comes before the first round of an earlier
        one (a directory's chunks are in that order anyway): what a writer of rows in run order
        needs to hold only a few blocks (analysis.tables.stream).
        """
        only = self.options.only_round
        if self.packed is not None:
            yield from self._packed_chunks(only, in_run_order)
            return
        opts = self.options
        items = plan_items(self.grouping, self.manifest.root_tokens, only)
        read = ReadOptions(self.step0.offset, opts.raw, opts.score_kind or "auto", opts.layout)
        for chunk in iter_read_chunks(self.path, items, read, workers, progress=progress):
            yield lambda c=chunk: (list(c.batches), list(c.unreadable))

    def _packed_chunks(self, only: Key | None, in_run_order: bool = False) -> Iterator[Callable[[], Chunk]]:
        run, layout = self.packed, self.options.layout
        unreadable = [(o, s) for o, key, s in run.unreadable if only is None or key == only]
        if only is None:
            blocks = [(g, k) for g in run.groups for k in range(g.blocks)]
            if in_run_order:
                blocks.sort(key=lambda b: _first_ordinal(run, *b))
        else:
            blocks, unknown = run.locate(only)
            unreadable += [(bad.position, bad.skipped) for bad in unknown]
        yield lambda: ([], unreadable)

        def load(g, k) -> Chunk:
            try:
                b = run.block(g, k, layout)
            except PackedBlockError as exc:
                bad = run.bad_block(g, k, exc)
                return [], [(bad.position, bad.skipped)]
            if only is not None:
                b = b.take(np.flatnonzero((b.keys[0] == only[0]) & (b.keys[1] == only[1])))
            return [b], []

        for g, k in blocks:
            yield lambda g=g, k=k: load(g, k)

    def no_such_round(self, key: Key, where: str | None = None) -> str:
        """replay.io.skipfold.no_such_round for this run: the rounds it has, nearest to ``key`` first."""
        if self.grouping is not None:
            return no_such_round(key, [f.key for f in self.grouping.rounds], where or self.path, self.grouping.skipped)
        return no_such_round(key, packed_keys(self.packed), where or self.path, self.packed.skipped)

    def has_round(self, key: tuple[int, int]) -> bool:
        if self.grouping is not None:
            return any(f.key == key for f in self.grouping.rounds)
        found, unknown = self.packed.locate(key)
        return bool(found or unknown) or any(k == key for _, k, _ in self.packed.unreadable)


Chunk = tuple[list[RoundBatch], list[tuple[int, Skipped]]]


def _first_ordinal(run: PackedRun, group, k: int) -> int:
    """The first round of a packed block in its run (a bad block sorts last: it has no rows)."""
    try:
        ords = run.read(group, "ordinal", k)[: group.block_size(k)]
    except PackedBlockError:
        return run.num_rounds
    return int(ords.min()) if ords.shape[0] else run.num_rounds


def open_run(path: str | Path, opts: ReplayOptions = ReplayOptions()) -> Run:
    """A dump directory or a packed run (a directory holding packed.json), ready to replay."""
    path = Path(path)
    if not path.is_dir():
        raise DumpError(path, "not a directory (expected a dump directory or a packed run)")
    if is_packed_run(path):
        packed, config, tree, manifest, merged, source = open_packed(path, opts)
        return Run(
            str(path),
            "packed",
            config,
            tree,
            manifest,
            merged,
            source,
            tuple(packed.skipped),
            packed.num_rounds,
            packed=packed,
            step0=packed.step0,
        )
    config, tree, manifest, merged, source = resolve_options(path, opts)
    grouping = group_rounds(path, opts.step0_offset, manifest, tree.gamma)
    merged = replace(merged, step0_offset=grouping.step0_offset)
    return Run(
        str(path),
        "directory",
        config,
        tree,
        manifest,
        merged,
        source,
        tuple(grouping.skipped),
        len(grouping.rounds),
        grouping=grouping,
        step0=grouping.step0,
    )


def _missing_round(run: Run) -> DumpError:
    return RoundNotFoundError(run.path, run.no_such_round(run.options.only_round))


def require_round(paths, key: Key, opts: ReplayOptions | None = None) -> None:
    """RoundNotFoundError unless at least one of ``paths`` holds round ``key`` (plot and report draw
    it, side by side in the runs that have it): checked on the names, before anything is read."""
    runs = [open_run(p, opts or ReplayOptions()) for p in paths]
    if not any(run.has_round(key) for run in runs):
        where = ", ".join(str(p) for p in paths)
        raise RoundNotFoundError(runs[0].path, runs[0].no_such_round(key, where))


# --------------------------------------------------------------------------------------------
# The batch replay of a run


@dataclass(frozen=True, eq=False)
class RunReplay:
    """A replayed run: outcomes as arrays, rounds in key order."""

    directory: str
    kind: str
    config: SpecConfig
    tree: TreeConfig
    manifest: Manifest
    result: BatchResult  # every readable round, rejected ones with error != 0
    skipped: tuple[Skipped, ...]  # names, unreadable, rejected
    config_source: str
    notes: tuple[str, ...]
    seconds: float  # wall time of reading and replaying
    per_batch: tuple = ()  # replay_run's per_batch(batch, result, tree) of every batch, in reading order
    warnings: tuple[str, ...] = ()  # lines for stderr about how the files were read
    run_layout: str | None = None  # Run.run_layout: the layout decided for the run, when its rounds' differ

    @property
    def kind_words(self) -> str:
        """What the run is, in the words before its path: "directory" or "packed run"."""
        return "packed run" if self.kind == "packed" else "directory"

    def reopen(self, opts: ReplayOptions) -> Run:
        """open_run of this replay's source, with the layout the replay decided for it: a second
        reading of the run (analysis) rejects the rounds this one did."""
        return replace(open_run(self.directory, opts), run_layout=self.run_layout)

    def iter_json(self) -> Iterator[dict]:
        """The record (replay.core.records) of every replayed round, in key order."""
        return self.result.iter_json()


def explain_rejections(batch: RoundBatch, res: BatchResult, run: Run) -> list[tuple[int, Skipped]]:
    """(ordinal, why) of every round of ``run``'s batch the kernel rejected (they are rare), naming the
    file, worded from the kernel's record of the fault; the run's raw spec, when it has one, is named
    in a shape mismatch of a file read as raw."""
    out = []
    for i, (path, message) in rejection_reasons(batch, res, run.tree, run.options.raw, _raw_source(run)).items():
        exc = RoundError(batch.key(i), message, path)  # its reason: "path: message"
        ordinal = int(batch.ordinals[i]) if batch.ordinals is not None else i
        entry = Skipped(round_entry(round_name(exc.key)), exc.reason, (path,))
        if res.error[i] == ERR_LOST_COMPANION:
            kind = "parents" if res.error_at[2, i] == LOST_PARENTS else "scores"
            entry = misspelt_companion(entry, path, kind, run.skipped)
        out.append((ordinal, entry if run.packed is None else run.packed.entry(entry)))
    return out


def _raw_source(run: Run) -> str:
    """Where ``run``'s raw spec came from, in words: the manifest's encoding, or --raw."""
    raw = run.options.raw
    if raw is None:
        return ""
    if run.packed is None and run.manifest.raw == raw:
        return f"the manifest's encoding ({raw.text()})"
    return f"--raw {raw.text()}"


def iter_run_results(
    run: Run, workers: int | None = None, progress: bool = False
) -> Iterator[tuple[BatchResult, list[tuple[int, Skipped]]]]:
    """(outcomes of one batch, unreadable and rejected rounds as (ordinal, why)), batch by batch.

    Batches (a packed run's blocks, a directory's chunks) are replayed on ``workers`` threads, a
    bounded window ahead, results in order. Nothing accumulates here: a consumer that keeps only
    aggregates replays a run larger than RAM in the memory of a few blocks (packed runs are
    memory-mapped).
    """
    for res, why, _ in iter_run_parts(run, workers, progress):
        yield res, why


PerBatch = Callable[[RoundBatch, BatchResult, TreeConfig], object]  # (batch, its outcomes, the run's config)


def iter_run_parts(
    run: Run,
    workers: int | None = None,
    progress: bool = False,
    per_batch: PerBatch | None = None,
) -> Iterator[tuple[BatchResult, list[tuple[int, Skipped]], object]]:
    """iter_run_results plus ``per_batch(batch, result, run.tree)`` of each batch (None without it), computed
    on the replay thread while the batch is in memory (analysis builds its tables there)."""
    for unreadable, done in iter_run_chunks(run, workers, progress, per_batch):
        if unreadable:
            yield empty_result(run.tree.gamma), list(unreadable), None
        yield from done


def iter_run_chunks(
    run: Run,
    workers: int | None = None,
    progress: bool = False,
    per_batch: PerBatch | None = None,
    in_run_order: bool = False,
) -> Iterator[tuple[list[tuple[int, Skipped]], list[tuple[BatchResult, list[tuple[int, Skipped]], object]]]]:
    """iter_run_parts one chunk at a time (Run.chunks: a packed block, a directory's read chunk):
    (its unreadable rounds, (result, rejected rounds, per_batch's value) of each of its batches)."""
    workers = resolve_workers(workers)

    def work(loader: Callable[[], Chunk]):
        batches, unreadable = loader()
        done = []
        for b in batches:
            res = replay_in_run(b, run)  # parallel across batches instead
            done.append(
                (
                    res,
                    explain_rejections(b, res, run),
                    None if per_batch is None else per_batch(b, res, run.tree),
                )
            )
        return unreadable, done

    results = ordered_map(work, run.chunks(workers, progress, in_run_order), workers)
    if run.packed is None:  # a directory's reader draws its own bar (files read)
        yield from results
        return
    # a packed run's blocks read in a second at 10^6 rounds; what takes the time is the replay and
    # what per_batch computes on each block (compare's configs): the bar counts rounds done
    total = run.packed.num_rounds if run.options.only_round is None else 1
    bar = progress_bar(total, "replay", progress, unit="round", unit_scale=True, mininterval=0.5)
    try:
        for unreadable, done in results:
            bar.update(len(unreadable) + sum(len(res) for res, _, _ in done))
            yield unreadable, done
    finally:
        bar.close()


def detected_layouts(res: BatchResult) -> tuple[int, int]:
    """(rounds with the all layout, rounds) among the replayed rounds of ``res`` whose layout was
    detected from their rows (run_notes.run_layout decides the run's from them)."""
    detected = res.ok & ~res.layout_stated
    return int((detected & (res.layout == LAYOUTS.index(LAYOUT_ALL))).sum()), int(detected.sum())


def replay_in_run(batch: RoundBatch, run: Run) -> BatchResult:
    """replay_batch of one of ``run``'s batches on one thread, with the run's layout: a round whose
    detected layout is not Run.run_layout is rejected as the kernel rejects one (ERR_VALIDATE_ROWS,
    the rows it has)."""
    res = replay_batch(batch, run.tree, 1)
    if run.run_layout is None:
        return res
    bad = np.flatnonzero(res.ok & ~res.layout_stated & (res.layout != LAYOUTS.index(run.run_layout)))
    if len(bad):
        rows = [res.shapes[res.shape_index[i]].validate_rows(LAYOUTS[res.layout[i]]) for i in bad]
        res.reject(bad, ERR_VALIDATE_ROWS, np.asarray(rows, dtype=np.int64), ROWS_RUN_LAYOUT)
    return res


def _check_unique_ordinals(run: Run, result: BatchResult) -> None:
    """No round twice: checksums pass for what the writer wrote, but a re-hashed edit could repeat an
    ordinal."""
    ords = result.ordinals  # [N] int64, sorted
    taken = np.asarray([o for o, _, _ in run.packed.unreadable], dtype=np.int64)
    if ords is not None and ((ords[1:] == ords[:-1]).any() or np.isin(ords, taken).any()):
        raise DumpError(
            run.path, "packed rounds repeat an ordinal (ordinal.npy): the run is inconsistent; repack it", "ordinal"
        )


NoteGroup = tuple[int, str, list[str], int]  # (position in the run, round name, its notes, rounds with these notes)


def note_groups(res: BatchResult, positions: np.ndarray | None = None) -> list[NoteGroup]:
    """The rounds of a batch that have notes, for round_notes_lines: the rounds whose only note is
    about padding rows are grouped by that note (rows beyond, layout) without asking each round for
    its notes. positions: [R] each round's place in the run (default: its index)."""
    ok = res.ok
    own = sorted(k for k in res.selection_notes if k < len(res) and ok[k])
    plain = ok & (res.validate_extra_rows > 0)
    plain[own] = False
    at = np.flatnonzero(plain)
    codes = res.validate_extra_rows[at].astype(np.int64) * len(LAYOUTS) + res.layout[at]
    _, first, counts = np.unique(codes, return_index=True, return_counts=True)
    place = np.arange(len(res)) if positions is None else positions
    return [
        (int(place[i]), round_name(res.keys[:, i].tolist()), res.notes(i), c)
        for i, c in [(int(at[f]), int(c)) for f, c in zip(first, counts)] + [(k, 1) for k in own]
    ]


def batch_round_notes(groups: list[NoteGroup]) -> tuple[str, ...]:
    """round_notes_lines of a batch-replayed run's note_groups (from one batch or many)."""
    return round_notes_lines(g[1:] for g in sorted(groups, key=lambda g: g[0]))


def _with_rising(per_batch: PerBatch | None) -> PerBatch:
    """(the batch's RisingRows of each kind, per_batch's value or None) of each batch: the run's
    rising-rows WARNINGs (replay.engine.batch.rising) are made on every replay, whatever per_batch computes."""

    def both(b: RoundBatch, res: BatchResult, tree: TreeConfig) -> tuple:
        return rising_rows(b, res), None if per_batch is None else per_batch(b, res, tree)

    return both


def _grouped_paths(grouping: Grouping) -> Iterator[str]:
    """Every file of every grouped round: data files and their companions."""
    for rnd in grouping.rounds:
        for fs in (*rnd.steps, rnd.validate):
            yield from (p for p in (fs.data, fs.scores, fs.parents) if p is not None)


def _fallback_line(result: BatchResult, ok: np.ndarray) -> str | None:
    """fallback_run_warning of the replayed rounds (ok: [R] bool)."""
    guessed = np.flatnonzero(ok & result.fallback_guessed)
    return fallback_run_warning(
        len(guessed),
        int(ok.sum()),
        [round_name(result.keys[:, i].tolist()) for i in guessed[:3]],
        bool(np.isin(result.selection[:, ok], (SEL_PATH, SEL_PARENTS)).any()),
    )


def replay_run(
    path: str | Path,
    opts: ReplayOptions = ReplayOptions(),
    workers: int | None = None,
    progress: bool = False,
    per_batch: PerBatch | None = None,
    per_run: Callable[[Run], PerBatch | None] | None = None,
) -> RunReplay:
    """Batch-replay a dump directory or a packed run.

    per_run: builds ``per_batch`` from the opened run (its manifest, its config) before any round is read.
    A run whose rounds' row counts give both validate layouts (none stated) is read again under the
    one layout decided for it (run_notes.run_layout), the rounds of the other one skipped: what
    per_batch computed on the first reading held them."""
    start = time.perf_counter()
    run = open_run(path, opts)
    rep = _replay_opened(run, opts, start, workers, progress, per_batch, per_run)
    layout = run_layout(*detected_layouts(rep.result))
    if layout is None:
        return rep
    return _replay_opened(replace(run, run_layout=layout), opts, start, workers, progress, per_batch, per_run)


def _replay_opened(
    run: Run,
    opts: ReplayOptions,
    start: float,
    workers: int | None,
    progress: bool,
    per_batch: PerBatch | None,
    per_run: Callable[[Run], PerBatch | None] | None,
) -> RunReplay:
    """replay_run of an opened run (``opts``: the options asked for; ``start``: when replay_run began)."""
    if per_run is not None:
        per_batch = per_run(run)
    parts: list[BatchResult] = []
    later: list[tuple[int, Skipped]] = []  # unreadable and rejected rounds, by position
    extras, rising = [], []
    for res, why, extra in iter_run_parts(run, workers, progress, _with_rising(per_batch)):
        later += why
        if len(res):
            parts.append(res)
        if extra is not None:
            rising += extra[0]
            if extra[1] is not None:  # per_batch's values (None from it: nothing kept)
                extras.append(extra[1])
    result = BatchResult.concat(parts).sorted_by_ordinal() if parts else empty_result(run.tree.gamma)
    if run.packed is not None:
        _check_unique_ordinals(run, result)
    if run.options.only_round is not None and not len(result) and not run.has_round(run.options.only_round):
        raise _missing_round(run)
    skipped = listed_once(run.skipped, [s for _, s in sorted(later, key=lambda t: t[0])])
    ok = result.ok
    warnings = input_warnings(
        run.config, run.manifest, run.path, run.config_source, run.options.tree_index
    ) + reading_warnings(run.step0, result.accepted_length[ok])
    if run.grouping is not None:
        warnings += unused_raw_note(opts.raw, _grouped_paths(run.grouping))
    elif run.packed is not None and run.packed.raw is None:  # a --raw open_packed let pass: it read nothing
        warnings += unused_raw_note(opts.raw, packed_source_files(run.packed))
    fallback = _fallback_line(result, ok)
    warnings += (fallback,) if fallback else ()
    by_option = opts.score_kind is not None
    unused = unused_scores_note(run.options.score_kind, by_option, int(result.scored[ok].sum()), int(ok.sum()))
    warnings += (unused,) if unused else ()
    warnings += batch_round_notes(note_groups(result))
    warnings += rising_rows_warnings(rising)
    warnings += recorded_round_warnings(
        run.manifest,
        run.tree,
        result.keys[:, ok],
        {
            "num_nodes": result.num_nodes[ok],
            "draft_steps": result.num_steps[ok],
            "accepted_length": result.accepted_length[ok],
        },
    )
    return RunReplay(
        run.path,
        run.kind,
        run.config,
        run.tree,
        run.manifest,
        result,
        skipped,
        run.config_source,
        (),
        time.perf_counter() - start,
        tuple(extras),
        warnings,
        run.run_layout,
    )
