"""What a replay says on stderr about its inputs and its rounds, once for the run: the config and
manifest (keys it did not read, the tree it replays, configs the directory states that differ),
how the files were grouped, the rounds' own notes, and the layout decided for the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from replay.core.config import SpecConfig, config_key_warnings
from replay.core.selection import FALLBACK_WARNING
from replay.core.vocab import LAYOUT_ALL, LAYOUT_PARENTS
from replay.io.formats.matrix_io import RawSpec, reads_as_raw
from replay.io.manifest import Manifest, manifest_key_warnings
from replay.io.step0 import Step0Check
from replay.util.errors import SpecReplayError


def input_warnings(
    config: SpecConfig, manifest: Manifest, directory: str | Path, source: str, tree_index: int
) -> tuple[str, ...]:
    """What every replay says first on stderr about its config and manifest: keys spelt like ones
    it reads, which it did not read; configs the directory states that differ from the one used."""
    return (
        config_key_warnings(config)
        + manifest_key_warnings(manifest)
        + tree_choice_note(config, tree_index, source)
        + config_disagreements(config, tree_index, directory, manifest, source)
    )


def tree_choice_note(config: SpecConfig, tree_index: int, source: str) -> tuple[str, ...]:
    """The note of a config listing several trees: which one is replayed, and how to pick another."""
    if len(config.trees) < 2:
        return ()
    names = config.tree_names or tuple(f"specTree[{i}]" for i in range(len(config.trees)))
    others = "; ".join(f"{names[i]} is {t.short()} (--tree {i})" for i, t in enumerate(config.trees) if i != tree_index)
    return (
        f"note: {source} lists {len(config.trees)} trees: replaying {names[tree_index]} "
        f"{config.trees[tree_index].short()}; {others}",
    )


def config_disagreements(
    config: SpecConfig, tree_index: int, directory: str | Path, manifest: Manifest, source: str
) -> tuple[str, ...]:
    """A note for each config the directory states (the manifest's, config.json) whose tree differs
    from the one used: parents ids and validate rows are read in the used config's tree order."""
    used = config.trees[tree_index]
    notes = []
    for where, other in _stated_configs(Path(directory), manifest):
        if where != source and tree_index < len(other.trees) and other.trees[tree_index] != used:
            same = [i for i, t in enumerate(other.trees) if t == used]
            listed = f"; it lists {used.short()} as tree {same[0]} (--tree {same[0]} with it)" if same else ""
            notes.append(
                f"note: {where} states the config {other.trees[tree_index].short()}, not {used.short()} "
                f"(from {source}){listed}; the dump's parents ids and validate rows are read in the tree order "
                "of the config used, so a config other than the one the dump was drafted with gives other numbers"
            )
    return tuple(notes)


def _stated_configs(directory: Path, manifest: Manifest) -> list[tuple[str, SpecConfig]]:
    """(where, config) of the configs the directory states; a config.json that does not load is not one."""
    from replay.core.config import load_config

    stated = [] if manifest.config is None else [(manifest.path or "manifest.json", manifest.config)]
    beside = directory / "config.json"
    if beside.is_file():
        try:
            stated.append((str(beside), load_config(beside, allow_stream=False)))
        except SpecReplayError:
            pass  # read only when it is the config used, and refused then
    return stated


def unused_raw_note(raw: RawSpec | None, paths: Iterable[str]) -> tuple[str, ...]:
    """The note of a ``--raw`` none of ``paths`` (the dump's files) is read with: the files were read
    as their extensions say, so the option changed nothing."""
    if raw is None or any(reads_as_raw(p, raw) for p in paths):
        return ()
    return (
        f"note: --raw {raw.text()} was given but no file was read as headerless binary (--raw reads "
        ".bin/.raw files, and extension-less ones with :force); every file was read as its extension says",
    )


def reading_warnings(step0: Step0Check, accepted_lengths) -> tuple[str, ...]:
    """What the commands print on stderr about the grouping, once the rounds are replayed.

    accepted_lengths: the accepted length of every replayed round (any iterable of ints, or an array).
    """
    lengths = np.asarray(list(accepted_lengths) if not isinstance(accepted_lengths, np.ndarray) else accepted_lengths)
    return step0.after_replay(int(lengths.shape[0]), bool(lengths.shape[0] and lengths.any()))


def round_notes_lines(groups: Iterable[tuple[str, Sequence[str], int]]) -> tuple[str, ...]:
    """The run's stderr lines about its rounds' own notes (each round's tree and record keep them):
    one line per kind of note, counting the rounds that have it and naming the first, so that the
    commands that print no round (replay --summary, batch, stats, ...) say it too, and once.

    groups: (round name, its notes, how many rounds have exactly these notes, this one first), in
    run order (one group per distinct note). A kind is a note's text without
    its numbers ("1 row(s)" and "2 row(s)" beyond the layout: one kind); the line quotes the first
    round's and says when the numbers vary. FALLBACK_WARNING has its own line (fallback_run_warning).
    """
    kinds: dict[str, list] = {}  # kind -> [first note, first round, rounds, numbers vary]
    for name, notes, count in groups:
        seen: set[str] = set()
        for note in notes:
            kind = re.sub(r"\d+", "#", note)
            if note == FALLBACK_WARNING:
                continue
            entry = kinds.get(kind)
            if entry is None:
                kinds[kind] = entry = [note, name, 0, False]
            entry[3] = entry[3] or note != entry[0]
            if kind not in seen:  # rounds are counted, not notes: a round may have one per draft step
                entry[2] += count
                seen.add(kind)
    return tuple(
        f"note: {n} round(s): {note} (first: round {name}{'; the numbers vary, each round says its own' if vary else ''})"
        for note, name, n, vary in kinds.values()
    )


def run_layout(n_all: int, n_detected: int) -> str | None:
    """The layout of a run whose rounds' row counts give different layouts (none stated), decided
    once for the run: the layout of most of its rounds, the all layout on a tie (a validate file cut
    to the parents layout's rows is likelier than one written with more); None when they agree.
    n_all of the n_detected replayed rounds whose layout was detected have the all layout's rows.
    The rounds of the other layout are skipped, naming their file
    (replay.engine.batch.rejections.other_layout_words)."""
    if not n_all or n_all == n_detected:
        return None
    return LAYOUT_ALL if 2 * n_all >= n_detected else LAYOUT_PARENTS
