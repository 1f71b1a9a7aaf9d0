"""Is a path something the commands can read rounds from? Say what it is when it is not.

A source is a packed run (a directory holding packed.json) or a directory with dump files
(draft_step_I_A_B, validate_A_B) directly in it. The library replays an empty directory as zero
rounds; the commands call ``require_dump_source`` first, so a wrong path is an error naming it,
and the parent of several dump directories lists them instead of complaining about a config.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import DumpError
from .grouping import is_dump_file_name
from .packed import is_packed_run

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


def require_dump_source(path: str | Path) -> Path:
    """``path`` if it is a packed run or a directory with dump files, else DumpError."""
    p = Path(path)
    if not p.exists():
        raise DumpError(p, "no such directory")
    if not p.is_dir():
        raise DumpError(p, "not a directory (expected a dump directory or a packed run)")
    if is_packed_run(p) or has_dump_files(p):
        return p
    subs = dump_subdirectories(p)
    if subs:
        shown = ", ".join(subs[:MAX_LISTED]) + (f" and {len(subs) - MAX_LISTED} more" if len(subs) > MAX_LISTED else "")
        raise DumpError(p, f"no dump files directly in this directory; these subdirectories hold dumps: {shown} (pass one of them, e.g. {p / subs[0]})")
    raise DumpError(p, "no dump files in this directory (expected draft_step_I_A_B and validate_A_B files, or a packed run)")
