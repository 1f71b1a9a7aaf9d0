"""Any list of dump paths grouped into rounds by name (tests): the commands group a directory's
listing (replay.io.grouping.group_directory); both take the one pass over complete rounds
(grouping._group_names) where it applies, else the general grouping (grouping._group_general)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from replay.io import grouping
from replay.io.grouping import Grouping
from replay.io.step0 import offset_and_source


def group_paths(
    paths: Iterable[Path],
    step0_offset: tuple[int, int] | None = None,
    unreadable: Mapping[Path, str] | None = None,
    source: str | None = None,
) -> Grouping:
    """Group file paths into rounds by name.

    step0_offset: None lets the names decide between the default and the offset they show
    (Step0Check); a stated offset is used as stated, ``source`` naming who stated it.
    unreadable: entries among ``paths`` that are named like dump files but cannot be read as files,
    with why ("is a directory, not a regular file"): each is listed, and so is its round, unread.
    """
    entries = [(p.name, str(p)) for p in sorted(map(Path, paths), key=_path_order)]
    given = sorted(((Path(p), why) for p, why in (unreadable or {}).items()), key=lambda kv: _path_order(kv[0]))
    bad = {str(p): why for p, why in given}
    return group_entries(entries, *offset_and_source(step0_offset, source), bad)


def group_entries(
    entries: list[tuple[str, str]], step0_offset: tuple[int, int], source: str, unreadable: Mapping[str, str]
) -> Grouping:
    """Group (name, path) entries, in path order, into rounds by name, as group_directory does a
    listing: complete rounds in one pass (group_complete), anything else file by file."""
    if not unreadable:
        simple = group_complete(entries, step0_offset, source)
        if simple is not None:
            return simple
    return grouping._group_general(entries, step0_offset, source, unreadable, None)


def group_complete(entries: list[tuple[str, str]], step0_offset: tuple[int, int], source: str) -> Grouping | None:
    """The one-pass grouping of (name, path) entries when every dump file is a plain data file of a
    complete round, else None (tests set it to None to take the general grouping)."""
    return grouping._group_names([name for name, _ in entries], [path for _, path in entries], step0_offset, source)


def _path_order(path: Path) -> tuple[str, ...]:
    """Path's own order (PurePosixPath compares its parts), without its slow __lt__."""
    return path.parts
