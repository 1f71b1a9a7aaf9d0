"""The benchmark script runs and prints its tables (a smoke run: no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_benchmark_quick_run_prints_the_tables(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "replay_speed.py"), "--quick", "--out", str(tmp_path / "scratch")],
        cwd=tmp_path,  # not the checkout: the script imports the installed package, wherever it runs
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for heading in (
        "## Offline replay speed (quick run)",
        "### Batch replay vs the round-by-round reference",
        "### Packed runs: pack, load",
        "### Text directory parsing",
        "### Peak memory",
    ):
        assert heading in out
    rows = [line for line in out.splitlines() if line.startswith("| article") or line.startswith("| deep")]
    assert len(rows) == 3 and all(line.rstrip().endswith("x |") for line in rows)
    assert "| 5,000 |" in out and "| 160 | 40 | 2 |" in out and "| 160 | 40 | 1 |" in out
