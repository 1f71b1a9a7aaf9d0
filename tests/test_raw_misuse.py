"""``--raw`` given wrong, run as a user types it: the message names ``--raw`` and how to fix it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from replay.cli import main

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
# the article round, each matrix with the columns it is written with (draft 8, validate 4)
ROWS = {
    "draft_step_0_123_139": [[41824, 43744, 44298, 34051, 28380, 37539, 0, 0]],
    "draft_step_1_124_140": [[41760, 35740, 0, 0, 0, 0, 0, 0], [45315, 41760, 0, 0, 0, 0, 0, 0]],
    "draft_step_2_124_140": [[22870] + [0] * 7, [22870] + [0] * 7],
    "validate_124_140": [[t, 0, 0, 0] for t in (41824, 41760, 45315, 22870, 22870)],
}


def run(capsys, *argv: object) -> tuple[int, str, str]:
    """``specreplay ARGV`` in process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def raw_article(directory: Path) -> Path:
    """The article round as headerless int32 .bin files."""
    directory.mkdir()
    shutil.copy(ARTICLE / "config.json", directory / "config.json")
    for name, m in ROWS.items():
        (directory / f"{name}.bin").write_bytes(np.asarray(m, dtype="<i4").tobytes())
    return directory


def test_the_right_column_counts_replay_the_article(capsys, tmp_path):
    code, out, err = run(capsys, "replay", raw_article(tmp_path / "d"), "--raw", "int32:draft=8,validate=4", "--json")
    assert code == 0, err
    assert '"accepted_tokens": [41824, 41760, 22870]' in out
    assert "no file was read as headerless binary" not in err


@pytest.mark.parametrize(
    ("spec", "told"),
    [
        ("int32:draft=8,validate=2", "validate has 10 row(s)"),  # 4 validate columns read as 2: twice the rows
        ("int32:4", "draft_step_0 has 4 column(s)"),
    ],
)
def test_a_wrong_column_count_names_the_raw_spec_it_came_from(capsys, tmp_path, spec, told):
    """A shape mismatch in a file read as raw says the column counts came from --raw, and how to give them per kind."""
    code, out, err = run(capsys, "replay", raw_article(tmp_path / "d"), "--raw", spec)
    assert code == 2 and out == "", err
    assert told in err
    assert f"the raw column counts came from --raw {spec}" in err.lower()
    assert "--raw DTYPE:draft=N,validate=M" in err


def test_raw_on_a_text_dump_is_noted_as_unused(capsys):
    """Every file is text: --raw changed nothing, and the note says so (exit 0: all input was used)."""
    code, out, err = run(capsys, "replay", ARTICLE, "--raw", "int32:4", "--summary")
    assert code == 0 and "mean accepted length" in out, err
    assert "note: --raw int32:4 was given but no file was read as headerless binary" in err
