"""A sweep's commits seen from outside (tests): whether a result is in place, and who holds a
staging lock (replay.live.sweep.commit writes "HOST PID" into it)."""

from __future__ import annotations

from pathlib import Path


def is_committed(parent: str | Path, name: str) -> bool:
    return (Path(parent) / name).is_dir()


def staging_owner(lock_file: str | Path) -> tuple[str, int] | None:
    """(host, pid) written in a staging lock file, None if unreadable: the worker in the middle of a task."""
    try:
        host, pid = Path(lock_file).read_text().split()
        return host, int(pid)
    except (OSError, ValueError):
        return None
