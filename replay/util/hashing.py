"""A file's sha256, read in one reused buffer: what a packed run's files and a cached model's
``.sha256`` sidecar are checked against. Stdlib only."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

HASH_CHUNK = 1 << 20  # one reused buffer: hashing a file allocates 1 MB, whatever its size


def file_sha256(path: Path, start: int = 0, progress: Callable[[int], object] | None = None) -> str:
    """sha256 of a file's bytes from ``start`` (an array file's data after its header); ``progress``
    gets the bytes of each chunk read."""
    sha = hashlib.sha256()
    buf = bytearray(HASH_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        while n := fh.readinto(buf):
            sha.update(view[:n])
            if progress:
                progress(n)
    return sha.hexdigest()
