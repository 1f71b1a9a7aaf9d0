"""Mistakes users make, made the way a user makes them (issue 19).

Each scenario builds its input by hand, as docs/dump-format.md tells a newcomer to, runs the
command the way a user types it (``specreplay ...`` through ``replay.cli.main``; a subprocess where
the stream or the process matters), and checks three things: the exit code, the stream the message
went to (skip reasons and errors on stderr, never stdout) and the words that tell the user the fix.

Sections, one per finding of issue 19 and then more of our own. Any mistake a person could make
twice belongs here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay.cli import main

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
SYNTH = ROOT / "sample_dumps" / "synthetic_article"


def run(capsys, *argv: str | os.PathLike) -> tuple[int, str, str]:
    """``specreplay ARGV`` in process: (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def shell(*argv: str | os.PathLike, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``specreplay ARGV`` as a separate process, as a user's shell runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *map(str, argv)],
        capture_output=True, text=True, cwd=cwd or ROOT, env=env, timeout=timeout,
    )


def write_matrix(path: Path, rows: list[list[int]]) -> Path:
    """A plain-text matrix, one row per line, the first encoding docs/dump-format.md names."""
    path.write_text("".join(" ".join(str(v) for v in row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_config(path: Path, top_k_spec: list[list[int]], top_head: list[int], **extra) -> Path:
    config = {"gamma": len(top_head), "topKSpec": top_k_spec, "topHead": top_head, "treeType": 0, **extra}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def article_by_hand(directory: Path, step0_key: tuple[int, int] = (123, 139),
                    key: tuple[int, int] = (124, 140), validate_name: str = "validate") -> Path:
    """The article's round typed in from the article, in the parents layout (DESIGN.md)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[6], [2, 2], [1, 1]], [1, 2, 2])
    a, b = key
    write_matrix(directory / f"draft_step_0_{step0_key[0]}_{step0_key[1]}",
                 [[41824, 43744, 44298, 34051, 28380, 37539]])
    write_matrix(directory / f"draft_step_1_{a}_{b}", [[41760, 35740], [45315, 41760]])
    write_matrix(directory / f"draft_step_2_{a}_{b}", [[22870], [22870]])
    write_matrix(directory / f"{validate_name}_{a}_{b}", [[41824], [41760], [45315], [22870], [22870]])
    return directory


def assert_told(err: str, *needles: str) -> None:
    """Every needle is in the message (case-insensitive) and nothing is a traceback."""
    assert "Traceback" not in err, err
    low = err.lower()
    for needle in needles:
        assert needle.lower() in low, f"{needle!r} not in stderr:\n{err}"


# --- the harness's own files are a valid starting point for every scenario below ----------------


def test_the_hand_made_article_round_replays_like_the_sample(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    code, out, err = run(capsys, "replay", dump)
    assert code == 0, err
    assert "accepted path: R → 41824 → 41760 → 22870" in out
    assert "accepted length: 3" in out
