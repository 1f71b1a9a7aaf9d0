"""Commit a result directory atomically and at most once, whoever finishes first.

A task writes its whole result into a private staging directory ``PARENT/.staging-<name>-<id>/``
and renames it to ``PARENT/<name>`` when it is complete. The rename is atomic, and it fails when
``PARENT/<name>`` already exists (an earlier run of the same task won), so a reader never sees half
a result, and a task that runs twice (retried after a lost worker, or resubmitted by a resumed
client while the first run was still going) leaves exactly one result, never a mixed one.

Each staging directory has a lock file (``.staging-<name>-<id>.lock``) that its owner holds
(``flock``) while it works; the lock dies with the process, so ``clear_stale`` removes exactly the
staging directories of dead owners. The lock file appears under its final name already locked
(it is locked under a temporary name, then renamed), so a cleaner can never mistake a starting
owner for a dead one. Locks need a file system with working ``flock`` (local disks; NFSv4).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STAGING_PREFIX = ".staging-"
LOCK_SUFFIX = ".lock"
_NEW_LOCK_PREFIX = ".newlock-"  # a lock file before it is locked: never touched by clear_stale


@dataclass(frozen=True)
class Staging:
    path: Path  # write the result here
    final: Path  # where ``commit`` moves it


@contextmanager
def staged(parent: str | Path, name: str) -> Iterator[Staging]:
    """A fresh locked staging directory for ``name`` under ``parent``; removed on exit unless
    ``commit`` moved it into place."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    token = f"{STAGING_PREFIX}{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    lock_path = parent / f"{token}{LOCK_SUFFIX}"
    fd = _locked_file(parent / f"{_NEW_LOCK_PREFIX}{token}", lock_path)
    path = parent / token
    try:
        path.mkdir()
        yield Staging(path, parent / name)
    finally:
        shutil.rmtree(path, ignore_errors=True)  # gone already after a commit
        lock_path.unlink(missing_ok=True)
        os.close(fd)


def _locked_file(tmp: Path, final: Path) -> int:
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
    os.replace(tmp, final)
    return fd


def commit(staging: Staging) -> bool:
    """Move the staged result into place; False when another run already committed it."""
    try:
        os.rename(staging.path, staging.final)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and staging.final.is_dir():
            return False
        raise
    _fsync_dir(staging.final.parent)
    return True


def clear_stale(parent: str | Path) -> list[Path]:
    """Remove the staging directories whose owner is dead (its lock is free); return them."""
    parent = Path(parent)
    removed = []
    for lock_path in sorted(parent.glob(f"{STAGING_PREFIX}*{LOCK_SUFFIX}")):
        try:
            fd = os.open(lock_path, os.O_RDWR)
        except FileNotFoundError:  # its owner just finished
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # alive
            os.close(fd)
            continue
        stale = lock_path.with_name(lock_path.name[: -len(LOCK_SUFFIX)])
        shutil.rmtree(stale, ignore_errors=True)
        lock_path.unlink(missing_ok=True)
        os.close(fd)
        removed.append(stale)
    return removed


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
