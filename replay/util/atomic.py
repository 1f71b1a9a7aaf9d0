"""Atomic file writes: a reader (or a resumed sweep) never sees half a file.

Every error names the path the user gave, never the temporary file beside it: an OSError of the
temporary (a directory that refuses new files, a full disk) becomes OutputPathError naming the
path. What is not a file to replace is written in place (``writes_in_place``): /dev/null,
/dev/stdout, a FIFO. Renaming over /dev/null would replace the device node with a regular file.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import OutputPathError
from .interrupt import commit_output, held_interrupts, stop_if_interrupted

# Open files by another name (/dev/stdout, /dev/fd/1, /proc/self/fd/1): written into, never replaced,
# even when they lead to a regular file (`> out.txt`): replacing it would cut off the shell's stdout.
OPEN_FILE_NAMES = ("/dev/stdout", "/dev/stderr")
OPEN_FILE_ROOTS = ("/dev/fd/", "/proc/")


def writes_in_place(path: str | Path) -> bool:
    """Whether ``path`` is written into rather than replaced: an open file by another name
    (OPEN_FILE_NAMES, OPEN_FILE_ROOTS), or an existing entry that is neither a regular file nor a
    directory (a device such as /dev/null, a FIFO, a socket)."""
    absolute = os.path.abspath(path)
    if absolute in OPEN_FILE_NAMES or absolute.startswith(OPEN_FILE_ROOTS):
        return True
    try:
        mode = os.stat(path).st_mode  # follows symlinks: a link to /dev/null is /dev/null
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def replaced_file(path: str | Path) -> Path:
    """The file an atomic write of ``path`` replaces: ``path``, or a symlink's target (the link is
    kept, as a plain ``open(path, "w")`` would keep it)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds.

    In-place targets (writes_in_place) are yielded as they are. An OSError about the temporary
    file, or one without a file name (ENOSPC from a write), is raised as OutputPathError naming
    ``path``; other errors pass unchanged.
    """
    given = Path(path)
    if writes_in_place(given):
        try:
            yield given
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):  # `-o /dev/stdout | head`: the reader has what it wanted
                raise
            if _about(exc, given):
                raise _write_error(given, exc, given) from exc
            raise
        return
    target = replaced_file(given)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _write_error(given, exc, None) from exc
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        try:
            yield tmp_path
            os.chmod(tmp_path, _final_mode(target))
            with open(tmp_path, "rb") as fh:
                os.fsync(fh.fileno())
            stop_if_interrupted()
            os.replace(tmp_path, target)
        except OSError as exc:
            if _about(exc, tmp_path):
                raise _write_error(given, exc, tmp_path) from exc
            raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _about(exc: OSError, tmp: Path) -> bool:
    """Is ``exc`` about the file being written (named, or unnamed as a failed write is)?"""
    names = {str(n) for n in (exc.filename, exc.filename2) if n is not None}
    return not names or str(tmp) in names or str(tmp) in str(exc)


def _write_error(given: Path, exc: OSError, tmp: Path | None) -> OutputPathError:
    reason = exc.strerror or str(exc)
    if tmp is not None:
        reason = reason.replace(str(tmp), str(given))
    return OutputPathError(f"{given}: cannot be written: {reason}")


def umask_mode(requested: int) -> int:
    """The mode the process umask leaves of ``requested``: what a plain ``open`` (0o666) or ``mkdir``
    (0o777) gives. mkstemp and mkdtemp make 0600 / 0700, which would leave dumps, reports and a shared
    model cache unreadable to the rest of a team."""
    mask = os.umask(0)
    os.umask(mask)
    return requested & ~mask


def _final_mode(path: Path) -> int:
    """The mode a plain ``open(path, "w")`` would give (umask_mode)."""
    try:
        return path.stat().st_mode & 0o7777  # replacing a file keeps its mode
    except OSError:
        return umask_mode(0o666)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode("utf-8"))


# --- directories of several files ---------------------------------------------------------------

PARTIAL_MARK = ".specreplay-partial-"  # a staging directory beside its target, while it is written
OLD_MARK = ".specreplay-old-"  # the target's earlier version, between the two renames of a swap


def _leftovers(target: Path, mark: str) -> list[Path]:
    return sorted(p for p in target.parent.glob(f".{target.name}{mark}*") if not p.is_symlink())


def clear_leftovers(target: str | Path) -> None:
    """Remove what an interrupted or killed write of ``target`` left beside it: staging directories,
    and an earlier version moved aside (put back first when the new one never arrived)."""
    target = Path(target)
    for p in _leftovers(target, PARTIAL_MARK):
        shutil.rmtree(p, ignore_errors=True)
    for p in _leftovers(target, OLD_MARK):
        if not target.exists() and not target.is_symlink():
            p.rename(target)
        else:
            shutil.rmtree(p, ignore_errors=True)


@contextmanager
def staged_directory(target: str | Path, whole: bool) -> Iterator[Path]:
    """Yield an empty directory beside ``target`` to write into; when the block succeeds, its files
    take their place in ``target`` with renames, during which SIGINT waits: an interrupt leaves the
    earlier ``target`` or the new one, never a mix. Once the new one is in place, the command's
    output is committed (interrupt.commit_output): a later interrupt ends it with exit 0. ``whole``:
    the new directory replaces ``target`` entirely (its caller has checked that ``target`` holds only
    its own kind of output); else each new entry replaces its namesake and other entries stay. A failed block removes the staging
    directory; a killed one leaves it for clear_leftovers, which the next write calls."""
    given = Path(target)
    target = replaced_file(given)
    if target.exists() and not target.is_dir():
        raise OutputPathError(f"{given}: exists and is not a directory")
    clear_leftovers(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{PARTIAL_MARK}", dir=target.parent))
    except OSError as exc:
        raise _write_error(given, exc, None) from exc
    try:
        yield staging
        commit_staged(staging, target, whole)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def not_written(target: str | Path, written: set[str]) -> list[str]:
    """The visible entries of directory ``target`` whose names are not in ``written``, sorted: what a
    per-file staged write (``whole=False``) left as it was."""
    try:
        return sorted(e.name for e in Path(target).iterdir() if e.name not in written and not e.name.startswith("."))
    except OSError:
        return []


def commit_staged(staging: Path, target: Path, whole: bool) -> None:
    """Move the finished ``staging`` directory into ``target`` (``whole``: see staged_directory) with
    SIGINT held, and commit the output: every staged directory's commit point, so that an interrupt
    from here on ends the command with exit 0 (a writer with its own staging directory calls this)."""
    os.chmod(staging, _final_dir_mode(target))
    with held_interrupts():
        stop_if_interrupted()
        if not whole and target.is_dir():
            for entry in sorted(staging.iterdir()):
                dest = target / entry.name
                if dest.is_dir() and not dest.is_symlink() and entry.is_dir():
                    shutil.rmtree(dest)
                os.replace(entry, dest)
            commit_output()
            return
        old = target.parent / f".{target.name}{OLD_MARK}{os.getpid()}"
        moved = target.exists()
        if moved:
            target.rename(old)
        staging.rename(target)
        # the commit point: from here an interrupt (one held during the renames included) ends the
        # command with exit 0, its output complete
        commit_output()
        if moved:
            _remove_old(old)


def _remove_old(old: Path) -> None:
    """The earlier version, moved aside by a swap (one an interrupt leaves, clear_leftovers removes)."""
    shutil.rmtree(old) if old.is_dir() else old.unlink()


def _final_dir_mode(path: Path) -> int:
    """mkdtemp makes 0700; a new output directory gets what mkdir would give, a replaced one keeps its mode."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return umask_mode(0o777)
