"""Packed runs: a whole dump directory as a few column-major arrays per kind of round.

Layout, groups and padding: docs/packed-format.md, "Layout". This module is the entry point
(packing a dump directory or in-memory batches, and the names callers use); the parts: the
package's docstring.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from replay.io.formats.matrix_io import SCORE_AUTO, RawSpec
from replay.io.roundbatch import RoundBatch
from replay.io.skipped import Skipped, why_no_rounds
from replay.io.step0 import DEFAULT_STEP0_OFFSET
from replay.util.errors import DumpError, NoRoundsError

from .format import PackedBlockError, looks_packed
from .read import BadBlock, PackedGroup, PackedRun
from .write import DEFAULT_BLOCK_ROUNDS, PackSummary, PackWriter

__all__ = [  # the names callers import from here (the parts are implementation modules)
    "DEFAULT_BLOCK_ROUNDS",
    "BadBlock",
    "PackSummary",
    "PackWriter",
    "PackedBlockError",
    "PackedGroup",
    "PackedRun",
    "is_packed_run",
    "pack_batches",
    "pack_directory",
]


def is_packed_run(path: str | Path) -> bool:
    """A directory holding packed.json, or a packed run's arrays without it (reading that fails loudly)."""
    return looks_packed(path)


def pack_directory(
    directory: str | Path,
    out: str | Path,
    step0_offset: tuple[int, int] | None = None,
    raw: RawSpec | None = None,
    score_kind: str | None = None,
    workers: int | None = None,
    block_rounds: int = DEFAULT_BLOCK_ROUNDS,
    progress: bool = False,
    force: bool = False,
) -> PackSummary:
    """Read ``directory`` (in parallel, each file once) and write it as a packed run at ``out``.

    Reading options default to the directory's manifest, as for ``replay``; the tree config is not
    needed (it is applied when the run is replayed, from the copied manifest/config or --config).
    """
    from replay.io.fastread import ReadOptions, iter_read_chunks, plan_items
    from replay.io.manifest import group_rounds, read_manifest

    directory = Path(directory)
    if not directory.is_dir():
        raise DumpError(directory, "not a directory")
    if is_packed_run(directory):
        raise DumpError(directory, "is already a packed run")
    manifest = read_manifest(directory)
    raw = raw or manifest.raw
    kind = score_kind or manifest.score_kind or SCORE_AUTO
    grouping = group_rounds(directory, step0_offset, manifest)
    offset = grouping.step0_offset
    if not grouping.rounds:  # before anything is written: a packed run of nothing helps no one
        raise _no_rounds_packed(directory, grouping.skipped, grouping.step0.notes())
    items = plan_items(grouping, manifest.root_tokens)
    keys = {o: rf.key for o, rf, _ in items}
    writer = PackWriter(out, str(directory), offset, raw, kind, block_rounds, force, grouping.step0)
    try:
        for chunk in iter_read_chunks(
            directory, items, ReadOptions(offset, raw, kind, None), workers, progress=progress
        ):
            for b in chunk.batches:
                writer.add(b)
            writer.add_unreadable(chunk.unreadable)
        if not writer.packed_rounds:  # every round unreadable: as above, and the staged run goes with abort
            raise _no_rounds_packed(directory, writer.skipped_items(grouping.skipped), grouping.step0.notes())
        summary = writer.finish(len(grouping.rounds), grouping.skipped, directory, keys)
    except BaseException:
        writer.abort()
        raise
    return summary


def _no_rounds_packed(directory: Path, skipped: Sequence[Skipped], notes: Sequence[str]) -> NoRoundsError:
    """The error of a dump without a single packable round (exit 2, nothing written): the words of
    every command's "no round could be replayed" error (replay.cli.options.no_rounds_error), the
    CLI listing ``notes`` and ``skipped`` before its line."""
    return NoRoundsError(f"{directory}: no round could be packed{why_no_rounds(skipped)}", skipped, tuple(notes))


def pack_batches(
    batches: Sequence[RoundBatch] | Iterator[RoundBatch],
    out: str | Path,
    block_rounds: int = DEFAULT_BLOCK_ROUNDS,
    force: bool = False,
    manifest: dict[str, Any] | None = None,
) -> PackSummary:
    """Pack in-memory RoundBatches (synthetic runs, benchmarks); ``manifest`` becomes manifest.json.

    Batches without ordinals are numbered in the order given.
    """
    writer = PackWriter(out, "<memory>", DEFAULT_STEP0_OFFSET, None, SCORE_AUTO, block_rounds, force)
    rounds = 0
    try:
        for b in batches:
            if b.ordinals is None:
                b = RoundBatch(
                    b.keys, b.root_tokens, b.steps, b.validate, b.layout, b.names, np.arange(rounds, rounds + len(b))
                )
            writer.add(b)
            rounds += len(b)
        return writer.finish(rounds, (), manifest=manifest)
    except BaseException:
        writer.abort()
        raise
