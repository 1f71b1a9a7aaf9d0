"""How often each file under a directory is opened during a call: what the read-once tests count.

Every reader opens a dump file with ``os.open`` (replay.util.bounded) or ``open`` (a packed run's
blocks); both are wrapped, and only paths under the directory are counted. Readers run in this
process (replay.util.parallel.default_workers is 1 while counting): a reader process would count in
its own copy of the wrapper.
"""

from __future__ import annotations

import builtins
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import replay.util.parallel as parallel


@contextmanager
def counting_reads(root: str | Path) -> Iterator[Counter]:
    """A Counter of path -> opens of the files under ``root`` (manifest.json and packed.json left out:
    every command reads its manifest and config more than once, they are not the rounds)."""
    top = os.path.realpath(root) + os.sep
    counts: Counter = Counter()
    real_os_open, real_open, real_workers = os.open, builtins.open, parallel.default_workers

    def count(path) -> None:
        if isinstance(path, int):
            return
        p = os.path.realpath(os.fspath(path))
        if p.startswith(top) and not p.endswith(".json"):
            counts[p] += 1

    def os_open(path, *args, **kwargs):
        count(path)
        return real_os_open(path, *args, **kwargs)

    def open_(file, *args, **kwargs):
        count(file)
        return real_open(file, *args, **kwargs)

    os.open, builtins.open, parallel.default_workers = os_open, open_, lambda: 1
    try:
        yield counts
    finally:
        os.open, builtins.open, parallel.default_workers = real_os_open, real_open, real_workers
