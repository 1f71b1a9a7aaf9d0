"""Read a dump directory on every core: each file read once, rounds stacked column-major.

The directory is grouped by name first (no file is opened for that); then chunks of rounds go to
a process pool (as plain strings, ``round_paths``). Each worker reads plain-text rounds
(``replay.io.formats.textbatch``) and ``.npz``/``.npy`` rounds (``replay.io.formats.arraybatch``) in
bulk and every other round, those the bulk readers hand back included, with the reference
reader (``replay.io.rounds.load_round``), and stacks rounds of equal signature into RoundBatches
(replay.io.roundbatch).
Chunks come back in key order, a bounded number in flight, so memory stays proportional to the
chunk size, not to the directory. A tqdm bar on stderr counts files and rounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.core.vocab import PAD_TOKEN
from replay.util.errors import DumpError
from replay.util.gcpause import collection_paused
from replay.util.parallel import WorkerDiedError, ordered_map, resolve_workers
from replay.util.progress import progress_bar
from replay.util.words import round_name

from .dumpnames import Key
from .formats.arraybatch import read_array_batches
from .formats.matrix_io import SCORE_AUTO, RawSpec, file_kind
from .formats.textbatch import read_text_batches
from .grouping import FileSet, Grouping, RoundFiles
from .roundbatch import (
    GroupKey,
    MatrixStack,
    RoundBatch,
    RoundPaths,
    Signature,
    SourceNames,
    batch_of_items,
    group_key,
    signature_of,
)
from .rounds import Round, load_round
from .skipped import Skipped, round_entry
from .step0 import DEFAULT_STEP0_OFFSET

# Rounds per worker task: ~4,000 files, a progress tick every ~50 ms; each task's rounds form one
# batch per step count, so this also sets the kernel's fixed cost (~0.5 ms a batch): ~1 % here.
READ_TASK_ROUNDS = 1024


@dataclass(frozen=True)
class ReadOptions:
    """What reading needs (the tree config is not among it)."""

    step0_offset: tuple[int, int] = DEFAULT_STEP0_OFFSET
    raw: RawSpec | None = None
    score_kind: str = SCORE_AUTO
    layout: str | None = None  # stated validate layout, carried into every Round


@dataclass(frozen=True, eq=False)
class ReadChunk:
    """One task's output: the rounds it read, stacked by signature, and those it could not read."""

    batches: tuple[RoundBatch, ...]
    unreadable: tuple[tuple[int, Skipped], ...]  # (ordinal, why)
    files: int
    rounds: int


def count_files(rounds: Iterable[RoundFiles]) -> int:
    """Files the rounds are read from: their matrices and the matrices' .scores/.parents companions
    (counted over one list of all matrices: a generator per round cost ~2.5 us a round)."""
    sets = [fs for rf in rounds for fs in (*rf.steps, rf.validate)]
    return len(sets) + sum([fs.scores is not None for fs in sets]) + sum([fs.parents is not None for fs in sets])


def _exts(files: RoundFiles) -> tuple[str, ...]:
    return tuple(file_kind(fs.data, False)[0] for fs in (*files.steps, files.validate))


def _paths_of(rnd: Round) -> tuple[str, ...]:
    return tuple(m.path for m in (*rnd.steps, rnd.validate))


@collection_paused()  # tuples by the thousand: automatic collections would scan the whole grouping
def round_paths(items: Sequence[tuple[int, RoundFiles, int]]) -> list[RoundPaths]:
    """plan_items' rounds as plain tuples of strings, cheap to send to a reader process."""
    return [
        (o, rf.key, tuple([(fs.data, fs.scores, fs.parents) for fs in (*rf.steps, rf.validate)]), root)
        for o, rf, root in items
    ]


def _round_files(item: RoundPaths) -> tuple[int, RoundFiles, int]:
    ordinal, key, files, root = item
    sets = tuple(FileSet(d, s, p) for d, s, p in files)
    return ordinal, RoundFiles(key, sets[:-1], sets[-1]), root


@collection_paused()
def read_chunk(directory: str, items: Sequence[RoundPaths], opts: ReadOptions) -> ReadChunk:
    """Read rounds ``items`` (from round_paths) as the module docstring says; runs inside a worker process."""
    raw_forced = opts.raw is not None and opts.raw.force

    def texts(todo: Sequence[RoundPaths]) -> tuple[list[RoundBatch], list[RoundPaths]]:
        return read_text_batches(directory, todo, opts.step0_offset, opts.layout, raw_forced, opts.score_kind)

    def arrays(todo: Sequence[RoundPaths]) -> tuple[list[RoundBatch], list[RoundPaths]]:
        return read_array_batches(directory, todo, opts.step0_offset, opts.layout, opts.score_kind)

    # The bulk reader of the first round's kind goes first: a directory of one format is classified
    # once a file. Each takes only rounds of its own kind, so the order changes no result.
    if items and file_kind(items[0][2][0][0], raw_forced)[1] in ("npz", "npy"):
        array_batches, rest = arrays(items)
        fast, rest = texts(rest)
    else:
        fast, rest = texts(items)
        array_batches, rest = arrays(rest)
    fast += array_batches
    groups: dict[tuple[Signature, tuple[str, ...]], list[tuple[RoundPaths, Round]]] = {}
    unreadable: list[tuple[int, Skipped]] = []
    files = sum(1 + (s is not None) + (p is not None) for _, _, fps, _ in items for _, s, p in fps)
    for item in rest:
        ordinal, rf, root = _round_files(item)
        try:
            rnd = load_round(rf, opts.raw, opts.score_kind, root, opts.layout)
        except DumpError as exc:
            unreadable.append((ordinal, Skipped(round_entry(round_name(rf.key)), str(exc), (exc.path,))))
            continue
        groups.setdefault((signature_of(rnd), _exts(rf)), []).append((item, rnd))
    batches = []
    for (_, exts), members in groups.items():
        rounds = [r for _, r in members]
        names = SourceNames(directory, exts, opts.step0_offset)
        stacks = [MatrixStack.stack([r.steps[s] for r in rounds]).narrowed() for s in range(len(rounds[0].steps))]
        stacks.append(MatrixStack.stack([r.validate for r in rounds]).narrowed())
        # the matrices' own paths: names that do not round-trip (zero-padded counters) are kept verbatim
        odd = {it[0]: _paths_of(r) for it, r in members if _paths_of(r) != names.paths(r.key, len(r.steps))}
        batches.append(batch_of_items([it for it, _ in members], stacks, names, opts.layout, odd))
    # One batch per group: text rounds of any shape, and rounds from both readers, in key order as one reader gives them
    batches = _merge_in_order(fast + batches)
    return ReadChunk(tuple(batches), tuple(unreadable), files, len(items))


def _merge_in_order(batches: Sequence[RoundBatch]) -> list[RoundBatch]:
    """One batch per group_key, its rounds sorted by ordinal (a packed group's blocks stay in key order)."""
    parts: dict[GroupKey, list[RoundBatch]] = {}
    for b in batches:
        parts.setdefault(group_key(b), []).append(b)
    out = []
    for bs in parts.values():
        merged = concat_batches(bs)
        if len(bs) > 1:
            if merged.ordinals is None:  # read_chunk numbers every round it reads
                raise ValueError("_merge_in_order: batches without ordinals")
            merged = merged.take(np.argsort(merged.ordinals, kind="stable"))
        out.append(merged)
    return out


def _read_task(args: tuple[str, Sequence[RoundPaths], ReadOptions]) -> ReadChunk:
    return read_chunk(*args)


@collection_paused()  # as round_paths
def plan_items(
    grouping: Grouping, roots: Mapping[Key, int], only: Key | None = None
) -> list[tuple[int, RoundFiles, int]]:
    """(ordinal, files, root token) for every grouped round, ordinal = position in key order."""
    return [
        (k, rf, roots.get(rf.key, PAD_TOKEN)) for k, rf in enumerate(grouping.rounds) if only is None or rf.key == only
    ]


def iter_read_chunks(
    directory: str | Path,
    items: Sequence[tuple[int, RoundFiles, int]],
    opts: ReadOptions,
    workers: int | None = None,
    chunk_rounds: int = READ_TASK_ROUNDS,
    progress: bool = True,
) -> Iterator[ReadChunk]:
    """Read ``items`` in chunks on ``workers`` processes; chunks come back in order.

    At most ``2 * workers`` chunks are in flight, so a slow consumer (the pack writer) bounds memory.
    """
    directory = str(Path(directory))
    workers = resolve_workers(workers)
    # Small directories still get a few chunks per worker, so both cores share the work.
    chunk_rounds = max(8, min(chunk_rounds, -(-len(items) // (4 * workers))))
    starts = range(0, len(items), chunk_rounds)
    # made as the pool asks for them (ordered_map reads lazily): only the tasks in flight are held
    tasks = ((directory, round_paths(items[i : i + chunk_rounds]), opts) for i in starts)
    total_files = count_files(rf for _, rf, _ in items)
    bar = _progress_bar(total_files, progress)
    rounds = 0
    try:
        for chunk in ordered_map(_read_task, tasks, min(workers, len(starts)), processes=True):
            rounds += chunk.rounds
            bar.update(chunk.files)
            bar.set_postfix_str(f"{rounds} rounds", refresh=False)
            yield chunk
    except WorkerDiedError:
        raise DumpError(
            directory,
            "a reader process died (killed, e.g. out of memory) while reading; --workers 1 reads in this process",
        ) from None
    finally:
        bar.close()


def _progress_bar(total: int, enabled: bool) -> Any:  # a tqdm bar (tqdm has no type stubs here)
    return progress_bar(total, "reading", enabled, unit="file", dynamic_ncols=True, mininterval=0.5)


def concat_batches(batches: Sequence[RoundBatch]) -> RoundBatch:
    """Rounds of equal group_key from several batches, in the given order (copies; sizes padded)."""
    if len(batches) == 1:
        return batches[0]
    first = batches[0]

    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays, axis=-1)

    def stack(i: int | None) -> MatrixStack:
        """Draft step ``i`` of every batch (the validate for None), concatenated."""
        return MatrixStack.concat([b.validate if i is None else b.steps[i] for b in batches])

    overrides: dict[int, tuple[str, ...]] = {}
    for b in batches:
        if b.names is not None:
            overrides.update(b.names.overrides)
    names = None  # a packed block's ArrayNames name its own block only: concatenated, they name nothing
    if isinstance(first.names, SourceNames):
        names = SourceNames(first.names.directory, first.names.exts, first.names.step0_offset, overrides)
    ordinals = [b.ordinals for b in batches if b.ordinals is not None]
    ords = cat(ordinals) if len(ordinals) == len(batches) else None
    return RoundBatch(
        cat([b.keys for b in batches]),
        cat([b.root_tokens for b in batches]),
        tuple(stack(i) for i in range(first.num_steps)),
        stack(None),
        first.layout,
        names,
        ords,
    )
