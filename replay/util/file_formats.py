"""The formats an output file is written in, named by its suffix: one rule for every file a command
writes (replay.cli checks each output option against it before any work; the writers read the
format from it again); require_formats, the formats a writer is asked for by name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replay.util.atomic import writes_in_place
from replay.util.errors import SpecReplayError


@dataclass(frozen=True)
class FileFormats:
    """Formats named by a file's suffix (any case). ``device``: the format written to a device or FIFO
    (``/dev/stdout``, which has no suffix), None where one is refused."""

    suffixes: tuple[str, ...]  # (".parquet", ".csv"): each names its format, "parquet" or "csv"
    device: str | None = None

    def named(self, path: str | Path) -> str | None:
        """The format ``path`` names, None for a name this rule does not take."""
        name = str(path).lower()
        found = [s[1:] for s in self.suffixes if name.endswith(s)]
        if found:
            return found[0]
        return self.device if self.device and writes_in_place(path) else None

    def of(self, option: str, path: str | Path) -> str:
        """The format ``path`` names, else a SpecReplayError naming the option and the suffixes it takes."""
        fmt = self.named(path)
        if fmt is None:
            raise SpecReplayError(f"{option} {self.refusal(path)}")
        return fmt

    def refusal(self, path: str | Path) -> str:
        """'PATH: use a .csv file name ...': why ``path`` is refused (the caller names the option)."""
        *head, last = self.suffixes
        names = f"{', '.join(head)} or {last}" if head else last
        device = " (or a device: /dev/stdout)" if self.device else ""
        return f"{path}: use a {names} file name{device}"


def require_formats(formats: Sequence[str], known: Sequence[str], kind: str) -> None:
    """Raise ValueError on the first of ``formats`` not in ``known`` (``kind``: "table", "image"), before
    anything is written: a caller's mistake, since the commands' options take only known formats."""
    for fmt in formats:
        if fmt not in known:
            raise ValueError(f"unknown {kind} format {fmt!r}: expected one of {known}")
