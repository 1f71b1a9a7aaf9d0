"""Is a path something the commands can read rounds from? Say what it is when it is not.

A source is a packed run (a directory holding packed.json) or a directory with dump files
(draft_step_I_A_B, validate_A_B) directly in it. The library replays an empty directory as zero
rounds; the commands call ``require_dump_source`` first, so a wrong path is an error naming it,
and the parent of several dump directories lists them instead of complaining about a config.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from replay.util.atomic import writes_in_place
from replay.util.errors import DumpError, OutputPathError
from replay.util.pathcheck import DIRECTORY, FILE

from .dumpnames import is_dump_file_name, is_side_file
from .near_miss import near_miss_names_hint
from .packed.pack import is_packed_run

MAX_LISTED = 8  # subdirectories named in the message; the rest are counted


def has_dump_files(directory: Path) -> bool:
    """True at the first dump file directly in ``directory`` (stops early on huge directories)."""
    try:
        with os.scandir(directory) as it:
            return any(is_dump_file_name(e.name) and e.is_file() for e in it)
    except OSError as exc:
        raise DumpError(directory, f"cannot be listed: {exc.strerror}") from None


def is_dump_source(path: Path) -> bool:
    return path.is_dir() and (is_packed_run(path) or has_dump_files(path))


def dump_subdirectories(directory: Path) -> list[str]:
    """Names of the subdirectories of ``directory`` that are sources themselves, sorted."""
    return sorted(p.name for p in directory.iterdir() if p.is_dir() and is_dump_source(p))


def require_directory(path: str | Path, expected: str) -> Path:
    """``path`` if it is a directory, else DumpError: the one wording of every command for an input
    directory that is missing or is not a directory (``expected``: what the command reads)."""
    p = Path(path)
    if not p.exists():
        # only after -- does an option reach here as a path
        hint = " (an option after --? put options before --)" if str(path).startswith("-") else ""
        raise DumpError(p, f"no such directory{hint}")
    if not p.is_dir():
        raise DumpError(p, f"not a directory (expected {expected})")
    return p


def require_dump_source(path: str | Path) -> Path:
    """``path`` if it is a packed run or a directory with dump files, else DumpError."""
    p = require_directory(path, "a dump directory or a packed run")
    if is_packed_run(p) or has_dump_files(p):
        return p
    subs = dump_subdirectories(p)
    if subs:
        shown = ", ".join(subs[:MAX_LISTED]) + (f" and {len(subs) - MAX_LISTED} more" if len(subs) > MAX_LISTED else "")
        raise DumpError(
            p,
            f"no dump files directly in this directory; these subdirectories hold dumps: {shown} (pass one of them, e.g. {p / subs[0]})",
        )
    try:
        hint = near_miss_names_hint(sorted(e.name for e in os.scandir(p) if e.is_file()))
    except OSError:
        hint = ""
    raise DumpError(
        p, f"no dump files in this directory (expected draft_step_I_A_B and validate_A_B files, or a packed run){hint}"
    )


def check_outside_inputs(outputs: Iterable[tuple[str, str, str]], dumps: Iterable[str | Path]) -> None:
    """Outputs must not turn into input: OutputPathError for an output that IS an input dump
    directory, or a file written directly in one under a name its next read would list as skipped
    (``rounds.csv`` in DUMP makes every later command on DUMP exit 1; a picture or .json is a side
    file, fine). Only files directly in a dump directory are read, so a subdirectory is always safe.

    outputs: (option, value, kind) of every output given; dumps: the DUMP paths of the command.
    """
    homes = {os.path.realpath(d): str(d) for d in dumps if os.path.isdir(d)}
    for option, value, kind in outputs:
        real = os.path.realpath(value)
        if kind == DIRECTORY and real in homes:
            raise OutputPathError(
                f"{option} {value}: is the input dump directory {homes[real]}; what is written there would be "
                f"read as part of the dump next time: write into a subdirectory ({Path(homes[real]) / 'out'}) or elsewhere"
            )
        parent = os.path.dirname(real)
        if kind == FILE and parent in homes and not is_side_file(os.path.basename(real)) and not writes_in_place(value):
            raise OutputPathError(
                f"{option} {value}: is inside the input dump directory {homes[parent]}, whose next read would list "
                f"it as a skipped file (exit 1): write it beside the dump or into a subdirectory "
                f"({Path(homes[parent]) / 'out' / os.path.basename(real)})"
            )
