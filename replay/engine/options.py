"""How a replay reads its source: the options (CLI over the manifest over config.json) and a
packed run opened with its config resolved as a directory's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from replay.core.config import SpecConfig, TreeConfig
from replay.io.dumpnames import Key
from replay.io.formats.matrix_io import RawSpec, reads_as_raw
from replay.io.manifest import Manifest, read_manifest
from replay.io.packed.pack import PackedBlockError, PackedRun
from replay.io.step0 import format_offset
from replay.util.errors import DumpError


@dataclass(frozen=True)
class ReplayOptions:
    """How to read a dump directory; every field can also come from its manifest."""

    config: SpecConfig | None = None
    tree_index: int = 0
    step0_offset: tuple[int, int] | None = None
    layout: str | None = None
    raw: RawSpec | None = None
    score_kind: str | None = None
    only_round: Key | None = None


def resolve_options(
    directory: Path, opts: ReplayOptions
) -> tuple[SpecConfig, TreeConfig, Manifest, ReplayOptions, str]:
    """Merge CLI options with the directory's manifest and config.json (CLI wins)."""
    manifest = read_manifest(directory)
    config, source = opts.config, "--config"
    if config is None and manifest.config is not None:
        config, source = manifest.config, manifest.path or "manifest.json"
    beside = directory / "config.json"
    if config is None and os.path.lexists(beside):  # a directory or FIFO there is an error, never read or ignored
        from replay.core.config import load_config

        config, source = load_config(beside, allow_stream=False), str(beside)
    if config is None:
        raise DumpError(directory, "no tree config: pass --config FILE or put config.json beside the dumps")
    if not 0 <= opts.tree_index < len(config.trees):
        n = len(config.trees)
        valid = "0 (its only tree)" if n == 1 else f"0 to {n - 1}"
        raise DumpError(source, f"--tree {opts.tree_index} but the config has {n} tree(s): use {valid}", "specTree")
    merged = ReplayOptions(
        config,
        opts.tree_index,
        opts.step0_offset or manifest.step0_offset,  # None: the names decide (replay.io.manifest.group_rounds sets it)
        opts.layout or manifest.layout,
        opts.raw or manifest.raw,
        opts.score_kind or manifest.score_kind,
        opts.only_round,
    )
    return config, config.trees[opts.tree_index], manifest, merged, source


def packed_source_files(run: PackedRun) -> list[str]:
    """A name for each kind of data file the run was packed from (its groups' extensions) and the
    files it skipped or could not read: what a ``--raw`` given now would have applied to."""
    files = [f"file{ext}" for g in run.spec.groups if g.exts is not None for ext in g.exts]
    files += [p for s in run.skipped for p in s.paths]
    return files + [p for _, _, s in run.unreadable for p in s.paths]


def _check_packed_options(run: PackedRun, opts: ReplayOptions) -> None:
    """Reading options are baked into a packed run; asking for other ones needs a repack. A ``--raw``
    that would read none of the files the run was packed from as headerless binary changes nothing
    (the replay notes it, replay.engine.run_notes.unused_raw_note), as on the dump directory."""
    raw = opts.raw
    if run.raw is None and raw is not None and not any(reads_as_raw(p, raw) for p in packed_source_files(run)):
        raw = None
    wanted: list[tuple[str, Any, Any, Callable[[Any], str]]] = [  # option, asked, packed, as the option is written
        ("--step0-offset", opts.step0_offset, run.step0_offset, format_offset),
        ("--raw", raw, run.raw, RawSpec.text),
        ("--scores", opts.score_kind, run.score_kind, str),
    ]
    for name, asked, packed, spell in wanted:
        if asked is not None and asked != packed:
            was = f"no {name}" if packed is None else f"{name} {spell(packed)}"
            raise DumpError(
                run.path,
                f"{name} {spell(asked)}, but the run was packed with {was}: repack the dump directory to change it",
            )


def open_packed(
    path: Path, opts: ReplayOptions
) -> tuple[PackedRun, SpecConfig, TreeConfig, Manifest, ReplayOptions, str]:
    """A packed run with its config resolved as a directory's; its reading options are the pack's."""
    packed = PackedRun.open(path)
    _check_packed_options(packed, opts)
    if opts.step0_offset is not None:  # the pack's own offset, stated again (checked above)
        packed = replace(packed, spec=replace(packed.spec, step0=packed.step0.stated()))
    config, tree, manifest, merged, source = resolve_options(path, opts)
    merged = ReplayOptions(
        merged.config,
        merged.tree_index,
        packed.step0_offset,
        merged.layout,
        packed.raw,
        packed.score_kind,
        merged.only_round,
    )
    return packed, config, tree, manifest, merged, source


def packed_keys(packed: PackedRun) -> np.ndarray:
    """[2, N] keys of a packed run's readable blocks (a bad block's rounds are listed as skipped anyway)."""
    parts = []
    for g in packed.groups:
        for k, n in enumerate(g.block_sizes()):
            try:
                parts.append(packed.read(g, "keys", k)[..., :n])
            except PackedBlockError:
                continue
    return np.concatenate(parts, axis=-1).astype(np.int64) if parts else np.zeros((2, 0), dtype=np.int64)
