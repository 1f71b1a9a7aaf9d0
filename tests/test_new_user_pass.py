"""What a new user met on a fresh clone, with the README alone and dumps typed in by hand.

Each test builds its dump in the form docs/dump-format.md describes, runs ``specreplay ...`` as a
user types it and holds the rule the finding broke, across the commands it applies to.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from replay.core.config import TreeConfig
from replay.testing.synth import write_synthetic_run
from tests.test_user_mistakes import ROOT, run, shell, write_matrix

CONFIG = {"gamma": 2, "topKSpec": [[3], [2, 2]], "topHead": [1, 2], "treeType": 0}
# the target's rows of each tree-order node (root, A1..A3, the four nodes of level 2): a
# permutation of the vocabulary 0..5, the first column the target's greedy token
VALIDATE = [[4, 3, 5, 2, 0, 1], [5, 1, 4, 0, 3, 2], [1, 3, 0, 5, 2, 4], [2, 0, 1, 4, 5, 3]]
VALIDATE += [[5, 3, 1, 4, 0, 2], [3, 1, 0, 5, 4, 2], [1, 4, 5, 0, 2, 3], [5, 4, 2, 0, 3, 1]]


def parents_dump(directory: Path, rounds: int = 4, bad: tuple[int, ...] = ()) -> Path:
    """A text dump in the all layout whose draft steps name their parents; the rounds in ``bad``
    name a parent outside level 1 (node 9 of a level of nodes 1..3), which the replay rejects."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.json").write_text(json.dumps({"config": CONFIG, "vocab_size": 6}), encoding="utf-8")
    for r in range(rounds):
        a, b = 10 + 2 * r, 100 + 2 * r
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[4, 3, 2]])
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}.parents", [[0]])
        write_matrix(directory / f"draft_step_1_{a}_{b}", [[5, 3], [1, 4]])
        write_matrix(directory / f"draft_step_1_{a}_{b}.parents", [[1], [9 if r in bad else 2]])
        write_matrix(directory / f"validate_{a}_{b}", VALIDATE)
    return directory


def write_ids(path: Path, rows: list[list[int]], form: str) -> None:
    """One id matrix in one of the encodings docs/dump-format.md lists: plain text, .npy or .npz."""
    if form == "text":
        write_matrix(path, rows)
    elif form == "npy":
        np.save(path.with_name(path.name + ".npy"), np.asarray(rows, dtype=np.int64))
    else:
        np.savez(path.with_name(path.name + ".npz"), ids=np.asarray(rows, dtype=np.int64))


def plain_dump(
    directory: Path,
    form: str,
    rounds: int = 3,
    edits: dict[str, tuple[int, int, int]] | None = None,
    validate: list[list[int]] = VALIDATE,
) -> Path:
    """A dump in the all layout without scores or parents, the target's rows ``validate`` in every
    round; ``edits`` sets one cell of a file: {file name: (row, column, value)}."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.json").write_text(json.dumps({"config": CONFIG, "vocab_size": 6}), encoding="utf-8")
    for r in range(rounds):
        a, b = 10 + 2 * r, 100 + 2 * r
        files = {
            f"draft_step_0_{a - 1}_{b - 1}": [[4, 3, 2]],
            f"draft_step_1_{a}_{b}": [[5, 3], [1, 4]],
            f"validate_{a}_{b}": [list(row) for row in validate],
        }
        for name, (row, col, value) in (edits or {}).items():
            if name in files:
                files[name][row][col] = value
        for name, ids in files.items():
            write_ids(directory / name, ids, form)
    return directory


def replayed_counts(text: str) -> list[int]:
    """Every count of replayed rounds a summary prints."""
    found = re.findall(r"rounds replayed: (\d+)|read and replayed (\d+) round|\((\d+) rounds replayed", text)
    return [int(next(g for g in groups if g)) for groups in found]


# --- 1: every count of replayed rounds is the rounds the summary holds ------------------------


def test_a_round_the_replay_rejects_is_counted_as_skipped_by_every_command(capsys, tmp_path):
    dump = parents_dump(tmp_path / "mine", rounds=4, bad=(1,))
    packed = tmp_path / "run"
    assert run(capsys, "pack", dump, "-o", packed, "--no-progress")[0] == 0
    for argv in (("replay", dump), ("batch", dump), ("batch", packed), ("stats", dump), ("stats", packed)):
        code, out, err = run(capsys, *argv, "--no-progress")
        assert code == 1, (argv, err)
        assert "skipped round 12_102" in err and "must be distinct nodes of level 1" in err, (argv, err)
        counts = replayed_counts(out)
        assert counts and set(counts) == {3}, (argv, out)


# --- 2: a negative id is worded as one, in draft and validate files, in every encoding ----------


@pytest.mark.parametrize("form", ["text", "npy", "npz"])
@pytest.mark.parametrize(
    ("name", "cell", "told"),
    [
        ("validate_12_102", (2, 0, -3), "validate row 2 (0-based) has negative token ids"),
        ("validate_12_102", (2, 0, -1), "validate row 2 (0-based) has no token in column 0: it holds -1 (padding)"),
        ("draft_step_1_12_102", (1, 0, -3), "draft_step_1 row 1 (0-based) has negative token ids"),
        ("draft_step_1_12_102", (1, 0, -1), "draft_step_1 row 1 (0-based) has padding inside its 2 kept column(s)"),
    ],
)
def test_a_cell_below_zero_is_padding_only_when_it_is_minus_one(capsys, tmp_path, form, name, cell, told):
    dump = plain_dump(tmp_path / form, form, edits={name: cell})
    for command in ("replay", "batch"):
        code, out, err = run(capsys, command, dump)
        assert code == 1, err
        assert f"skipped round 12_102: {dump / name}" in err and told in err, (command, err)


def test_a_nan_score_is_named_by_file_row_and_column(capsys, tmp_path):
    dump = plain_dump(tmp_path / "nan", "text", rounds=2)
    for r in range(2):
        a, b = 10 + 2 * r, 100 + 2 * r
        (dump / f"draft_step_0_{a - 1}_{b - 1}.scores").write_text("-0.5 -1.0 -2.0\n", encoding="utf-8")
        last = "nan" if r else "-1.5"  # round 12_102's last cell only
        (dump / f"draft_step_1_{a}_{b}.scores").write_text(f"-0.5 -1.0\n-0.7 {last}\n", encoding="utf-8")
    for command in ("replay", "batch"):
        code, _, err = run(capsys, command, dump)
        assert code == 1, err
        told = "(scores): NaN among the scores of real tokens, row 1 (0-based), column 1 holds NaN"
        assert f"skipped round 12_102: {dump / 'draft_step_1_12_102.scores'} {told}" in err, (command, err)


# --- 7: replay and batch at T list P(L = d) to one depth: the deepest tree of the rounds used ----

SAMPLES = [
    "synthetic_article",
    "qwen2.5-coder/article",
    "qwen2.5-coder/chain4",
    "qwen2.5-coder/deep",
    "qwen2.5-coder/wide",
]


def length_rows(out: str) -> list[str]:
    """The P(L = d) rows of a sampling summary."""
    return [line for line in out.splitlines() if line.startswith("    L = ")]


def early_stopped(directory: Path) -> Path:
    """Rounds that each stop after one or two draft steps of a gamma-3 config: no tree reaches gamma."""
    write_synthetic_run(
        directory, TreeConfig.from_lists([[3], [2, 2], [1, 1]], [1, 2, 2]), 12, seed=5, early_stop_rate=1.0
    )
    return directory


@pytest.mark.parametrize("sample", ["early-stopped", *SAMPLES])
def test_replay_and_batch_at_t_list_the_same_length_distribution(capsys, tmp_path, sample):
    dump = early_stopped(tmp_path / "early") if sample == "early-stopped" else ROOT / "sample_dumps" / sample
    code, replayed, err = run(capsys, "replay", dump, "--temperature", "0.7", "--summary")
    assert code == 0, err
    code, batched, err = run(capsys, "batch", dump, "--temperature", "0.7", "--no-progress")
    assert code == 0, err
    assert length_rows(replayed) and length_rows(batched) == length_rows(replayed)
    if sample == "early-stopped":  # nothing past the deepest tree (2 steps): rows L = 0, 1, 2
        assert [row.split(":")[0].strip() for row in length_rows(batched)] == ["L = 0", "L = 1", "L = 2"]


# --- 4: no legend where nothing is labelled (matplotlib's warning is not the user's business) ---


def test_plot_and_report_of_a_dump_that_accepts_nothing_print_no_matplotlib_warning(tmp_path):
    # the target's top-1 is token 0 at every node, a token no draft step holds: nothing is accepted
    dump = plain_dump(tmp_path / "zero", "text", validate=[[0, 1, 2, 3, 4, 5]] * len(VALIDATE))
    for argv in (("plot", dump, "-o", tmp_path / "plots"), ("report", dump, "-o", tmp_path / "report")):
        done = shell(*argv, "--no-progress")
        assert done.returncode == 0, done.stderr
        assert "Warning" not in done.stderr and "legend" not in done.stderr, (argv[0], done.stderr)


# --- 5: a companion goes in its data file's entry, or in its round's, never in one of its own -----


def renamed_with_scores(dump: Path, name: str, target: str, scores: str) -> None:
    """``name`` renamed to ``target`` (or removed: "gone"), a .scores companion of its rows named ``scores``."""
    rows = (dump / name).read_text(encoding="utf-8").splitlines()
    (dump / scores).write_text("".join("0.5 " * len(r.split()) + "\n" for r in rows), encoding="utf-8")
    if target == "gone":
        (dump / name).unlink()
    else:
        (dump / name).rename(dump / target)


@pytest.mark.parametrize(
    ("target", "scores", "skipped", "told"),
    [
        (
            "validation_12_102",
            "validate_12_102.scores",
            "1 round(s)",
            "round 12_102: draft files without validate_12_102; "
            "validation_12_102 (with its companion validate_12_102.scores) is here: did you mean validate_12_102?",
        ),
        (
            "validation_50_150",  # completes no round: its own entry, the companion in it
            "validate_50_150.scores",
            "1 round(s) and 1 file(s)",
            "validation_50_150 (with its companion validate_50_150.scores): name matches neither",
        ),
        (
            "gone",  # the data file is not there under any name: the companion goes in the round's entry
            "validate_12_102.scores",
            "1 round(s)",
            "round 12_102: draft files without validate_12_102; validate_12_102.scores is here without its data file",
        ),
    ],
)
def test_a_companion_is_listed_with_its_data_file_or_its_round(capsys, tmp_path, target, scores, skipped, told):
    dump = plain_dump(tmp_path / "mine", "text")
    renamed_with_scores(dump, "validate_12_102", target, scores)
    packed = tmp_path / "run"
    code, out, err = run(capsys, "pack", dump, "-o", packed, "--no-progress")
    assert code == 1 and told in err, err
    what, reason = told.split(": ", 1)
    told_packed = f"{what} of {packed} (packed from {dump}): {reason}"  # a packed run's skip names the run
    for argv, said in (
        (("batch", dump), told),
        (("replay", dump, "--summary"), told),
        (("batch", packed), told_packed),
    ):
        code, out, err = run(capsys, *argv, "--no-progress")
        assert code == 1 and said in err, (argv, err)
        assert f"skipped: {skipped} (each listed" in out, (argv, out)
        assert "companion file without its data file" not in err, (argv, err)


# --- 6c: a damaged packed block is counted as the rounds it held, in the packed reader's words ----


def test_a_damaged_block_is_counted_as_its_rounds(capsys, tmp_path):
    packed = tmp_path / "run"
    assert (
        run(capsys, "pack", plain_dump(tmp_path / "mine", "text", rounds=4), "-o", packed, "--block-rounds", "2")[0]
        == 0
    )
    v_ids = next(packed.glob("*/v_ids.npy"))
    data = bytearray(v_ids.read_bytes())
    data[-1] ^= 0xFF  # the last block's bytes no longer match its CRC-32
    v_ids.write_bytes(bytes(data))
    for argv in (("batch", packed), ("replay", packed, "--summary"), ("stats", packed)):
        code, out, err = run(capsys, *argv, "--no-progress")
        assert code == 1 and "skipped block 1 of group" in err, (argv, err)
        assert "skipped: 2 round(s) in 1 packed block" in out and "file(s)" not in out, (argv, out)
        assert set(replayed_counts(out)) == {2}, (argv, out)
