"""Values given to options (inline JSON, cost files, config text) go through the same bounded reads
as dump files: a FIFO, a device, a file larger than the limit or JSON nested without end is
refused with one line naming the option or file, exit 2, and never read without end.

The CLI cases run in a subprocess with a timeout, because the failure mode being guarded against
is a hang (reading /dev/zero or waiting on a FIFO nobody writes).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from replay.util.atomic import write_bytes_atomic
from replay.util.bounded import MAX_JSON_DEPTH

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
SYNTH = ROOT / "sample_dumps" / "synthetic_article"


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPECREPLAY_DEBUG="")
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert len(lines[0]) < 1000  # a pasted 100 KB value is quoted cut short


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--configs", "--cost"])
def test_inline_json_nested_past_the_limit_is_refused_by_depth(option: str) -> None:
    text = nested(50_000) if option == "--configs" else '{"tokens": ' + nested(MAX_JSON_DEPTH + 5) + "}"
    proc = run_cli("compare", str(ARTICLE), option, text)
    assert_one_line_error(proc, option, "levels deep", f"at most {MAX_JSON_DEPTH}")


@pytest.mark.slow
def test_inline_json_at_the_limit_is_parsed_not_refused() -> None:
    # One level under the limit parses; the cost model then refuses its *content*, naming the field.
    text = '{"tokens": ' + nested(MAX_JSON_DEPTH - 1) + "}"
    proc = run_cli("compare", str(ARTICLE), "--cost", text)
    assert proc.returncode == 2
    assert "levels deep" not in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_cost_file_that_is_a_device_is_refused_without_reading() -> None:
    proc = run_cli("compare", str(ARTICLE), "--cost", "/dev/zero", timeout=60)
    assert_one_line_error(proc, "/dev/zero", "not a regular file")


@pytest.mark.slow
def test_cost_file_that_is_a_fifo_is_refused_without_opening(tmp_path: Path) -> None:
    fifo = tmp_path / "cost.json"
    os.mkfifo(fifo)
    proc = run_cli("compare", str(ARTICLE), "--cost", str(fifo), timeout=60)
    assert_one_line_error(proc, str(fifo), "FIFO")


@pytest.mark.slow
def test_cost_file_nested_too_deep_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(nested(100_000))
    proc = run_cli("compare", str(ARTICLE), "--cost", str(path))
    assert_one_line_error(proc, str(path), "levels deep")


@pytest.mark.slow
def test_unterminated_inline_json_says_where() -> None:
    proc = run_cli("compare", str(ARTICLE), "--configs", '{"specTree": [[6]')
    assert_one_line_error(proc, "--configs", "not valid JSON", "column")


@pytest.mark.slow
def test_recommend_with_every_round_skipped_names_the_directory_and_a_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for src in SYNTH.iterdir():
        target = bad / src.name
        if src.name.startswith("validate_"):
            target.write_text("garbage\n")
        else:
            target.write_bytes(src.read_bytes())
    proc = run_cli("recommend", str(bad), "--budget", "8", "--no-progress", timeout=120)
    # every skip is listed (beyond 20 lines, the first three of the one reason and a line counting the
    # rest), then the one error line, itself naming the directory and a reason
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    *listed, error = proc.stderr.strip().splitlines()
    assert len(listed) == 4 and all(line.startswith("specreplay: skipped round ") for line in listed[:3])
    assert listed[3].startswith("specreplay: skipped 297 more for the same reason") and "300 round(s)" in error
    for needle in ("specreplay: error: ", str(bad), "skipped", "validate_"):
        assert needle in error, error


def test_atomic_write_gives_the_mode_a_plain_write_would(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        plain, atomic = tmp_path / "plain", tmp_path / "atomic"
        plain.write_bytes(b"x")
        write_bytes_atomic(atomic, b"x")
        assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o644
        # replacing a file keeps the mode its owner chose
        os.chmod(atomic, 0o600)
        write_bytes_atomic(atomic, b"y")
        assert stat.S_IMODE(atomic.stat().st_mode) == 0o600
        assert atomic.read_bytes() == b"y"
    finally:
        os.umask(old)
