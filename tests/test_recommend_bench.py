"""The recommend benchmark runs and prints its tables (a smoke run: no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_recommend_benchmark_quick_run_prints_the_tables(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "recommend_speed.py"), "--quick", "--out", str(tmp_path / "scratch")],
        cwd=tmp_path,  # not the checkout: the script must find the package by itself
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for heading in ("## recommend speed (quick run)", "### The grid", "### Linearity", "### Against today's code"):
        assert heading in out
    grid = [line for line in out.splitlines() if line.startswith("| 3,000 |")]
    assert len(grid) == 3  # two budgets in the grid, one row in the linearity table
    duel = [line for line in out.splitlines() if line.startswith(("| 300 | 6 | 20 |", "| 300 | 16 | 0 |"))]
    assert len(duel) == 2 and all(line.rstrip().endswith(("| yes |", "| no |")) for line in duel)
