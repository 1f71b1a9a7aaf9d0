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


def test_timed_children_run_with_the_bytecode_compiled(tmp_path, monkeypatch):
    """benchkit.child_env: a timed command must not compile the package again on every run (the VM
    sets PYTHONDONTWRITEBYTECODE), and imports the named tree."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from benchkit import child_env

    for package in ("replay", "analysis"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("X = 1\n")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = child_env(tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)
    for package in ("replay", "analysis"):
        assert list((tmp_path / package / "__pycache__").glob("__init__.*.pyc"))
