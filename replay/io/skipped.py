"""What a reader could not use, with the files involved and why (Skipped), and how the commands count
and summarise those entries: rounds and files, the first reason, a likely misnaming's fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from replay.util.errors import printable
from replay.util.words import counted

from .dumpnames import base_name
from .dumpwrite import MANIFEST_NAME
from .near_miss import near_miss_names_hint

ROUND_PREFIX = "round "  # Skipped.what of a round's entry; any other entry names a file


def round_entry(name: str) -> str:
    """Skipped.what of the entry of round ``name`` (replay.util.words.round_name of its key)."""
    return ROUND_PREFIX + name


@dataclass(frozen=True)
class Skipped:
    """Something the grouping could not use, with the files involved and why."""

    what: str  # "round a_b", "block 2 of group g000 (4 rounds)" or a file name
    reason: str
    paths: tuple[str, ...] = ()
    rounds: int = 0  # the rounds a block's entry stands for (a packed run's damaged block); 0 otherwise
    # (packed run, the directory it was packed from) of a packed run's entry whose paths are that
    # directory's files (replay.io.packed.read.PackedRun.entry); the same entry as the directory's otherwise
    packed: tuple[str, str] | None = field(default=None, compare=False)

    @property
    def is_round(self) -> bool:
        """The entry of one round (round_entry), not of a file or a block."""
        return self.what.startswith(ROUND_PREFIX)

    @property
    def skips_nothing(self) -> bool:
        """A disagreement with manifest.json: listed and exits 1 like a skip, but nothing was dropped."""
        return self.what == MANIFEST_NAME  # replay.io.manifest.check_manifest_rounds: the rounds are replayed

    @property
    def line(self) -> str:
        """The entry as every command lists it on stderr when no run label comes before it."""
        return self.line_under(labelled=False)

    def line_under(self, labelled: bool) -> str:
        """The entry as listed on stderr; ``labelled``: the run's label comes before the line
        (print_skipped), so a packed run's entry names only the directory it was packed from."""
        if self.skips_nothing:
            return f"{self.what} disagrees with the files: {self.reason}"
        if self.packed is not None:  # the run read (unless its label names it), then where its named files were
            run = "" if labelled else f" of {self.packed[0]}"
            return f"skipped {self.what}{run} (packed from {self.packed[1]}): {self.reason}"
        return f"skipped {self.what}: {self.reason}"


def count_skipped(skipped: Iterable[Skipped]) -> tuple[int, int, int]:
    """(rounds, files, blocks) among skipped entries: a round's entry names its files, so nothing
    counts twice; a block's rounds count among the rounds; a disagreement with the manifest counts
    nowhere (it skips nothing)."""
    rounds = files = blocks = 0
    for s in skipped:
        if s.skips_nothing:
            continue
        if s.is_round:
            rounds += 1
        elif s.rounds:
            rounds += s.rounds
            blocks += 1
        else:
            files += 1
    return rounds, files, blocks


def describe_skipped(skipped: Sequence[Skipped]) -> str:
    """ "3 round(s) and 1 file(s)", "4 round(s) (1 packed block)", "0": what the skipped entries hold;
    then disagreement(skipped)."""
    return counted_skips(skipped) + disagreement(skipped)


def disagreement(skipped: Sequence[Skipped]) -> str:
    """ "; manifest.json disagrees" where the manifest contradicts the files (Skipped.skips_nothing), else ""."""
    return f"; {MANIFEST_NAME} disagrees" if any(s.skips_nothing for s in skipped) else ""


def counted_skips(skipped: Sequence[Skipped]) -> str:
    """ "3 round(s) and 1 file(s)", "4 round(s) (1 packed block)", "0": the entries that skipped something."""
    rounds, files, blocks = count_skipped(skipped)
    in_blocks = f" in {counted(blocks, 'packed block')}" if blocks else ""
    parts = [f"{rounds} round(s){in_blocks}"] * bool(rounds) + [f"{files} file(s)"] * bool(files)
    return " and ".join(parts) or "0"


def why_no_rounds(skipped: Sequence[Skipped]) -> str:
    """ " (6 round(s) skipped, listed above; first: ...); did you mean validate_10_20 (...)?": what the
    error of a run without a single replayed round adds after "no round could be replayed"."""
    if not skipped:
        return " (no round files)"
    hint = near_miss_hint(skipped)
    if hint:  # the likely fix says more than the first reason
        return f" ({counted_skips(skipped)} skipped, listed above){hint}"
    first = printable(f"{skipped[0].what}: {skipped[0].reason}")
    first = first if len(first) <= 200 else first[:197] + "..."
    return f" ({counted_skips(skipped)} skipped, listed above; first: {first})"


def near_miss_hint(skipped: Iterable[Skipped]) -> str:
    """ "; did you mean validate_10_20 (for validation_10_20 and 5 more file(s) named like it)?", or "".

    From the names in skipped entries (a packed run keeps them), for the error of a run without a
    single replayable round.
    """
    # An entry's files, or its what when it has none: a what may list several names ("a and b").
    names = (name for s in skipped for name in dict.fromkeys([base_name(p) for p in s.paths if p] or [s.what]))
    return near_miss_names_hint(names)
