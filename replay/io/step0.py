"""Which step-0 offset groups a dump's names: step 0 is named step0_offset positions before its round
(the engine names it before advancing its counters). A stated offset (--step0-offset, the manifest)
is used as stated; else the default, unless the names show another offset that pairs every step-0
file with its round's validate file while the default does not. Step0Check records the choice and
says on stderr what the user should know about it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from .dumpnames import Key, MatrixKey, matrix_name

DEFAULT_STEP0_OFFSET: tuple[int, int] = (1, 1)  # the article's rule: step 0 is named one position earlier


OFFSET_DEFAULT, OFFSET_DETECTED, OFFSET_OPTION = "default", "detected", "--step0-offset"


def format_offset(offset: tuple[int, int]) -> str:
    """(1, 1) → "1", (1, 0) → "1,0": the spelling --step0-offset takes."""
    return str(offset[0]) if offset[0] == offset[1] else f"{offset[0]},{offset[1]}"


@dataclass(frozen=True)
class Step0Check:
    """The step-0 offset the names were grouped with, who chose it, and how well the names fit it.

    ``notes()`` and ``after_replay()`` are the lines every command prints on stderr about it: an
    offset detected from the names (with how to pin it), a stated offset that leaves step-0 files
    out while another would group every round, and rounds that all accept nothing while the names
    look off by one. A wrong guess never passes silently.
    """

    offset: tuple[int, int] = DEFAULT_STEP0_OFFSET
    source: str = OFFSET_DEFAULT  # "default", "detected", "--step0-offset", "manifest.json step0_offset"
    rounds: int = 0  # validate files (rounds named)
    step0_files: int = 0  # draft_step_0 files
    grouped: int = 0  # validate files whose step-0 file this offset finds
    other: tuple[int, int] | None = (
        None  # the offset pairing most step-0 files, when this one leaves some out (detected: the default)
    )
    other_grouped: int = 0  # validate files whose step-0 file ``other`` finds
    example: Key | None = None  # a round that ``other`` (detected: ``offset``) groups, for the message
    packed: bool = False  # read back from a packed run: the offset is baked in, changing it needs a repack
    cited: int = 0  # step-0 files this offset leaves out that are named in a skipped round's entry, not their own

    @property
    def fits(self) -> bool:
        """Every step-0 file pairs with a validate file, and every validate file with a step-0 file."""
        return self.grouped == self.rounds == self.step0_files

    @property
    def other_fits(self) -> bool:
        return self.other is not None and self.other_grouped == self.rounds == self.step0_files

    def _pair(self, offset: tuple[int, int]) -> str:
        a, b = self.example if self.example is not None else (0, 0)
        return f"{matrix_name((0, a - offset[0], b - offset[1]))} with {matrix_name((-1, a, b))}"

    def _option(self, offset: tuple[int, int]) -> str:
        """How the user states ``offset``: the option, or for a packed run, packing again with it."""
        option = f"--step0-offset {format_offset(offset)}"
        return f"pack the dump directory again with {option}" if self.packed else f"pass {option}"

    def notes(self) -> tuple[str, ...]:
        """What to tell the user about the grouping itself (before any replay)."""
        x = format_offset(self.offset)
        if self.source == OFFSET_DETECTED and self.other is not None:
            pin = (
                f"packed with it; to pin it, {self._option(self.offset)}"
                if self.packed
                else f"pin it with --step0-offset {x}"
            )
            return (
                f"note: step-0 offset {x} detected from the file names ({self._pair(self.offset)}): it groups all "
                f"{self.rounds} round(s), the default {format_offset(self.other)} groups {self.other_grouped}; {pin}",
            )
        if not self.fits and self.other_fits and self.other is not None:
            return (
                f"WARNING: {self.source} {x} pairs {self.grouped} of {self.rounds} validate file(s) with a step-0 file and "
                f"leaves {self.step0_files - self.grouped} draft_step_0 file(s) in no round{self._cited()}; "
                f"offset {format_offset(self.other)} "
                f"groups every round ({self._pair(self.other)}): {self._option(self.other)}",
            )
        return ()

    def _cited(self) -> str:
        """ " (1 of them named in a skipped round's entry)": why the skipped files count fewer."""
        return f" ({self.cited} of them named in a skipped round's entry)" if self.cited else ""

    def stated(self) -> Step0Check:
        """This check once the user states its offset (--step0-offset on a packed run, which must be
        the offset it was packed with): a detected offset is then pinned, and no note asks to pin it."""
        return replace(self, source=OFFSET_OPTION) if self.source == OFFSET_DETECTED else self

    def hinted(self) -> tuple[int, int] | None:
        """The offset skip entries name for a step-0 file this one leaves out: ``other`` (the offset
        the warnings name) when it pairs more files, or ties as the round's own key (0), an engine's
        naming rather than a coincidence of counters; else None, and no entry names another offset."""
        if self.other is None or self.fits:
            return None
        better = self.other_grouped > self.grouped or (self.other == (0, 0) and self.looks_off())
        return self.other if better else None

    def looks_off(self) -> bool:
        """The names fit another offset at least as well as the one used (and it leaves files out)."""
        return not self.fits and self.other is not None and self.other_grouped >= max(1, self.grouped)

    def after_replay(self, replayed: int, accepted_any: bool) -> tuple[str, ...]:
        """notes(), plus a warning when every replayed round accepted nothing and the names look off."""
        lines = self.notes()
        if replayed and not accepted_any and self.looks_off() and self.other is not None:
            lines += (
                f"WARNING: accepted length 0 in all {replayed} replayed round(s) is probably wrong: the step-0 names look off: "
                f"offset {format_offset(self.offset)} ({self.source}) pairs {self.grouped} of {self.rounds} validate file(s) "
                f"with a step-0 file, offset {format_offset(self.other)} pairs {self.other_grouped}; check --step0-offset"
                + (" (and pack again)" if self.packed else ""),
            )
        return lines

    def to_json(self) -> dict[str, object]:
        return {
            "offset": list(self.offset),
            "source": self.source,
            "rounds": self.rounds,
            "step0_files": self.step0_files,
            "grouped": self.grouped,
            "other": None if self.other is None else list(self.other),
            "other_grouped": self.other_grouped,
            "example": None if self.example is None else list(self.example),
        } | ({"cited": self.cited} if self.cited else {})  # absent when 0: runs packed before it read the same


def parse_offset(text: str | int | tuple[int, int]) -> tuple[int, int]:
    """``1`` → (1, 1); ``"1,0"`` → (1, 0): how far step 0's (a, b) sit before its round's."""
    if isinstance(text, tuple):
        return text
    if isinstance(text, int):
        return (text, text)
    parts = [p for p in str(text).split(",") if p.strip()]
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"step-0 offset must be N or A,B (integers), got {text!r}") from None
    if len(vals) == 1:
        return (vals[0], vals[0])
    if len(vals) == 2:
        return (vals[0], vals[1])
    raise ValueError(f"step-0 offset must be N or A,B, got {text!r}")


def offset_and_source(step0_offset: tuple[int, int] | None, source: str | None) -> tuple[tuple[int, int], str]:
    """A stated offset keeps its source ("--step0-offset" unless told); none stated: the default's."""
    if step0_offset is None:
        return DEFAULT_STEP0_OFFSET, OFFSET_DEFAULT
    return tuple(step0_offset), source or OFFSET_OPTION  # type: ignore[return-value]


def step0_check(files: Iterable[MatrixKey], offset: tuple[int, int], source: str) -> Step0Check:
    """How well ``offset`` pairs step-0 files with validate files, and the best other offset if it does not."""
    validates = {(a, b) for step, a, b in files if step == -1}
    firsts = [(a, b) for step, a, b in files if step == 0]
    grouped = _paired(validates, firsts, offset)
    check = Step0Check(offset, source, len(validates), len(firsts), grouped)
    if check.fits or not validates or not firsts:
        return check
    # Candidates: the one offset that could pair them one to one (a shift keeps the order of keys,
    # so it maps the smallest step-0 key to the smallest validate key), off by one either way, 0, 1.
    (va, vb), (sa, sb) = min(validates), min(firsts)
    da, db = offset
    candidates = dict.fromkeys([(va - sa, vb - sb), (0, 0), DEFAULT_STEP0_OFFSET, (da - 1, db - 1), (da + 1, db + 1)])
    candidates.pop((da, db), None)
    best, best_grouped = None, 0
    for cand in candidates:
        n = _paired(validates, firsts, cand)
        if n > best_grouped:
            best, best_grouped = cand, n
    if best is None:
        return check
    at = set(firsts)
    example = min(k for k in validates if (k[0] - best[0], k[1] - best[1]) in at)
    return Step0Check(offset, source, len(validates), len(firsts), grouped, best, best_grouped, example)


def _paired(validates: set[Key], firsts: list[Key], offset: tuple[int, int]) -> int:
    """Step-0 files whose round key at ``offset`` names a validate file."""
    da, db = offset
    return sum((a + da, b + db) in validates for a, b in firsts)
