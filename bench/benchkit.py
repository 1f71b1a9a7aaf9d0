"""What the benchmark scripts share: dropping files from the page cache, and text dumps to parse.

The scripts run as ``python bench/NAME.py``, so this directory is on ``sys.path``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from replay.io.dumpwrite import step_file_name
from replay.io.roundbatch import RoundBatch


def machine_line() -> str:
    """What a result table was measured on: CPU architecture and cores, Python and numpy versions."""
    return f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def evict(paths) -> None:
    """Drop these files' pages from the page cache so the next read comes from the disk."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def write_text_dump(directory: Path, batch: RoundBatch) -> None:
    """Every round of ``batch`` as plain-text dump files (draft_step_*, validate_*), named by
    replay.io.dumpwrite.step_file_name."""
    for i in range(len(batch)):
        rnd = batch.round_at(i)
        for s, m in enumerate(rnd.steps):
            _write_text(directory / step_file_name("draft", rnd.key, s), m.ids)
        _write_text(directory / step_file_name("validate", rnd.key), rnd.validate.ids)


def _write_text(path: Path, ids: np.ndarray) -> None:
    """As dumpwrite.write_text_matrix, without its fsync per file (tens of thousands of fsyncs take minutes)."""
    path.write_text("\n".join(" ".join(str(int(v)) for v in row) for row in ids) + "\n")
