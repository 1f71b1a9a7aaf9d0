"""What the benchmark scripts share: a timed child's environment, dropping files from the page
cache, and text dumps to parse.

The scripts run as ``python bench/NAME.py``, so this directory is on ``sys.path``.
"""

from __future__ import annotations

import compileall
import os
import platform
from pathlib import Path

import numpy as np

from replay.io.roundbatch import RoundBatch
from replay.testing.batch_synth import write_text_rounds


def machine_line() -> str:
    """What a result table was measured on: CPU architecture and cores, Python and numpy versions."""
    return f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def child_env(code_root: Path) -> dict[str, str]:
    """The environment of a timed ``python -m replay.cli`` child that imports ``code_root``'s package,
    its bytecode compiled first as an installed tool has it: with PYTHONDONTWRITEBYTECODE set (this
    sandbox sets it) every child would compile ~100 modules again, ~0.15 CPU s of each command."""
    for package in ("replay", "analysis"):
        compileall.compile_dir(str(Path(code_root) / package), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(code_root) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return env


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
    """Every round of ``batch`` as plain-text dump files (replay.testing.batch_synth.write_text_rounds)."""
    write_text_rounds(directory, [batch])
