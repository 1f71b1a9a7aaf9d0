"""A negative value other than padding (-1) is no token id, in whatever column it sits.

Greedy commands read a validate row's column 0 and a draft row's kept columns; the sampling rule at T
reads every validate column, stats, the node table and compare read draft columns past the kept
width. A round holding such a value anywhere in those rows is corrupt, so every command skips it,
greedy and at T, with one reason naming the file, the row, the column and the value; a -1 there
stays padding.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tests.test_user_mistakes import run, write_config, write_matrix

VALIDATE = [[10, 20, 99], [30, 31, 5], [41, 40, 5], [1, 2, 5], [1, 2, 5]]  # layout all: root + 4 nodes
COMMANDS = [("replay", "--summary"), ("batch", "--no-progress"), ("stats", "--no-progress"), ("compare",)]
TEMPERATURES = [(), ("--temperature", "0.7")]


def scored_dump(directory: Path, edit: tuple[str, int, int, int]) -> Path:
    """Three rounds of a two-step tree ([[2], [1, 1]]) whose step-1 rows record a second, unkept
    column, validate scores summing to 0.9; ``edit`` (file prefix, row, column, value) sets one cell
    of round 12_22."""
    directory.mkdir(parents=True)
    write_config(directory / "config.json", [[2], [1, 1]], [1, 2])
    probs = "".join(" ".join(repr(math.log(p)) for p in (0.5, 0.3, 0.1)) + "\n" for _ in VALIDATE)
    for r in range(3):
        a, b = 10 + 2 * r, 20 + 2 * r
        files = {
            f"draft_step_0_{a - 1}_{b - 1}": [[10, 20]],
            f"draft_step_1_{a}_{b}": [[30, 31], [40, 41]],
            f"validate_{a}_{b}": [list(row) for row in VALIDATE],
        }
        if (a, b) == (12, 22):
            prefix, row, col, value = edit
            files[f"{prefix}_{a}_{b}"][row][col] = value
        for name, ids in files.items():
            write_matrix(directory / name, ids)
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}.parents", [[0]])
        write_matrix(directory / f"draft_step_1_{a}_{b}.parents", [[1], [2]])
        (directory / f"validate_{a}_{b}.scores").write_text(probs, encoding="utf-8")
    return directory


def skip_lines(err: str) -> list[str]:
    """The 'skipped round ...' part of each line of stderr that reports one (stats and compare put
    the dump's name before it)."""
    return [line[line.index("skipped round") :] for line in err.splitlines() if "skipped round" in line]


@pytest.mark.parametrize(
    ("edit", "told"),
    [
        (("validate", 1, 2, -7), "validate row 1 (0-based) has negative token ids: column 2 holds -7"),
        (("draft_step_1", 1, 1, -7), "draft_step_1 row 1 (0-based) has negative token ids: column 1 holds -7"),
    ],
)
def test_a_negative_id_past_the_read_columns_skips_the_round_in_every_command(capsys, tmp_path, edit, told):
    dump = scored_dump(tmp_path / "d", edit)
    why = f"{told} (token ids are 0 or more; only padding, -1, is below 0)"
    expected = f"skipped round 12_22: {dump / f'{edit[0]}_12_22'}: {why}"
    for command, *options in COMMANDS:
        for at_t in TEMPERATURES:
            code, out, err = run(capsys, command, dump, *options, *at_t)
            assert code == 1, (command, at_t, err)
            assert skip_lines(err) == [expected], (command, at_t, err)
            replayed = re.findall(r"rounds replayed: (\d+)|read and replayed (\d+) round", out + err)
            assert all(int(next(g for g in m if g)) == 2 for m in replayed), (command, at_t, out)


@pytest.mark.parametrize("edit", [("validate", 1, 2, -1), ("draft_step_1", 1, 1, -1)])
def test_padding_past_the_read_columns_stays_padding(capsys, tmp_path, edit):
    dump = scored_dump(tmp_path / "d", edit)
    for command, *options in COMMANDS:
        for at_t in TEMPERATURES:
            code, _, err = run(capsys, command, dump, *options, *at_t)
            assert code == 0, (command, at_t, err)
            assert not skip_lines(err), (command, at_t, err)
