"""What the umask leaves of a mode is read in one place, replay.util.atomic.umask_mode: atomic file
and directory writes, the live harness's run directory and the model cache give what a plain
``open``/``mkdir`` would, never mkstemp's 0600 or mkdtemp's 0700."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replay.live.dumps import staged_output_dir
from replay.live.models.cache import make_shareable
from replay.util.atomic import staged_directory, umask_mode, write_bytes_atomic
from tests.library_scan import assert_one_place

HOME = "replay/util/atomic.py"


def _umask_reads(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if "os.umask(" in line]


def test_only_umask_mode_reads_the_umask():
    assert_one_place(HOME, _umask_reads, "the umask read", "umask_mode")


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_new_outputs_get_what_the_umask_leaves(tmp_path, umask_027):
    assert umask_mode(0o666) == 0o640 and umask_mode(0o777) == 0o750
    write_bytes_atomic(tmp_path / "f.json", b"{}")
    with staged_directory(tmp_path / "tables", whole=True) as staging:
        (staging / "t.csv").write_text("x\n")
    with staged_output_dir(tmp_path / "run") as staged:
        (staged / "manifest.json").write_text("{}")
    cached = tmp_path / "m.gguf"
    cached.write_bytes(b"")
    cached.chmod(0o600)
    make_shareable(cached)
    modes = {
        p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "f.json", tmp_path / "tables", tmp_path / "run", cached)
    }
    assert modes == {"f.json": 0o640, "tables": 0o750, "run": 0o750, "m.gguf": 0o640}
