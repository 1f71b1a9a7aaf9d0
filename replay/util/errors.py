"""Errors that carry enough to tell the user what to fix: the file, the field, what was expected."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .words import round_name

PRINTABLE = "specreplay-printable"  # the codec error handler that shows a file name's undecodable bytes


def _show_bytes(exc: UnicodeError) -> tuple[str, int]:
    """A UTF-8 encoder's error handler: an undecodable file-name byte (a surrogate escape, U+DC80-U+DCFF)
    as ``\\xff``, any other unencodable character as its backslash escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    shown = [f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else ascii(c)[1:-1] for c in bad]
    return "".join(shown), exc.end


codecs.register_error(PRINTABLE, _show_bytes)


def printable(text: str) -> str:
    """``text`` with undecodable file-name bytes (surrogate escapes) shown as ``\\xff``.

    File names are bytes; Python keeps the ones that are not UTF-8 as lone surrogates, which a
    strict UTF-8 stdout refuses to print. Messages carry this form instead, and the command's own
    streams write it too (replay.cli.main sets PRINTABLE on them), so that a name reads alike in a
    table, a message and a path the command echoes.
    """
    return text.encode("utf-8", PRINTABLE).decode("utf-8")


def shown(text: str, limit: int = 80) -> str:
    """An option's value as an error message quotes it: printable and cut short, so that a pasted
    100 KB value still gives a one-line error."""
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SpecReplayError(Exception):
    """Base of every error the CLI turns into a one-line message and a non-zero exit."""


class NoRoundsError(SpecReplayError):
    """Not one round could be used: an error (exit 2) in every command. ``skipped`` (replay.io.skipped.Skipped)
    says why, and ``notes`` what the reading found; the CLI lists both on stderr before the error line."""

    def __init__(
        self, message: str, skipped: Sequence[Any] = (), notes: tuple[str, ...] = (), label: str | None = None
    ):
        super().__init__(message)
        self.skipped = tuple(skipped)
        self.notes = tuple(notes)
        self.label = label


class ConfigError(SpecReplayError):
    def __init__(self, source: str | Path | None, field: str | None, message: str):
        """field: None when the file as a whole is at fault (not JSON, not a regular file)."""
        self.source = str(source) if source is not None else None
        self.field = field
        self.message = message  # without the file and field, for a message that adds to it
        where = f"{printable(self.source)}: " if self.source else ""
        named = f"config field '{field}': " if field is not None else ""
        super().__init__(f"{where}{named}{message}")


class DumpError(SpecReplayError):
    """A dump file that cannot be read as what it should be."""

    def __init__(self, path: str | Path, message: str, field: str | None = None):
        self.path = str(path)
        self.field = field
        what = f" ({field})" if field else ""
        super().__init__(f"{printable(self.path)}{what}: {message}")


class RoundError(SpecReplayError):
    """A round whose files were read but disagree with the config or with each other."""

    def __init__(self, key: tuple[int, int], message: str, path: str | Path | None = None):
        self.key = key
        self.path = str(path) if path is not None else None
        where = f" ({printable(self.path)})" if self.path else ""
        # The reason without the round's name, for listings that already name it ("skipped round A_B: ...").
        self.reason = f"{printable(self.path)}: {message}" if self.path else message
        super().__init__(f"round {round_name(key)}{where}: {message}")


class RoundNotFoundError(DumpError):
    """``--round A_B`` names a round the dump cannot replay (replay.io.skipfold.no_such_round says why)."""

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        self.field = None
        SpecReplayError.__init__(self, message)  # the message names the round and the dump itself


class OutputPathError(SpecReplayError):
    """An output path that cannot be written as asked (checked before any work starts)."""


class InputPathError(SpecReplayError):
    """An input file that is missing or unreadable (checked before any slow step)."""
