"""Messages a new user met that named the wrong thing or read oddly, each through the CLI as the user
typed it (tests/test_user_mistakes.py's style and helpers): two companions of one kind for one
matrix, a matrix of strings, counts of one, and a symbolic link to a device given as a dump file.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import numpy as np
import pytest

from tests.test_user_mistakes import (
    article_by_hand,
    assert_told,
    rounds_by_hand,
    run,
    shell,
    write_config,
    write_matrix,
)

COMMANDS = [["replay", "--summary"], ["batch"], ["batch", "--workers", "2"], ["stats"], ["pack", "-o", "{tmp}/run"]]
SCORES = [[0.9, 0.1], [0.8, 0.2]]  # draft_step_1's scores in rounds_by_hand: 2 rows × 2 columns


def write_scores(path: Path, rows: list[list[float]]) -> None:
    """A scores companion in the encoding its name gives: .npy, else text."""
    if path.name.endswith(".npy"):
        np.save(path, np.asarray(rows))
    else:
        path.write_text("".join(" ".join(map(str, row)) + "\n" for row in rows), encoding="utf-8")


# --- two files of a round's last draft step ------------------------------------------------------


@pytest.mark.parametrize(
    "command,layout",
    [(c, []) for c in COMMANDS] + [(c, ["--layout", "parents"]) for c in COMMANDS if c[0] != "pack"],
    ids=lambda v: " ".join(v[:3]),
)
def test_two_files_of_the_last_step_are_one_round_entry_naming_both(capsys, tmp_path, command, layout):
    """The duplicate was listed on its own and the round, replayed without its last step, was
    refused for its validate rows ('is a draft step missing?', 'the config may not be the one')."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3)
    (dump / "draft_step_2_11_21.txt").write_bytes((dump / "draft_step_2_11_21").read_bytes())
    argv = [a.format(tmp=tmp_path) for a in command]
    code, _, err = run(capsys, argv[0], dump, "--no-progress", *argv[1:], *layout)
    assert code == 1, err
    # pack's count of what it skipped is a note of its own ("specreplay: skipped: 1 round(s) ...")
    skipped = [line for line in err.splitlines() if "skipped" in line and "skipped: " not in line]
    assert len(skipped) == 1 and skipped[0].endswith(
        "skipped round 11_21: cannot choose draft_step_2_11_21: found draft_step_2_11_21 and "
        "draft_step_2_11_21.txt (2 files hold the same matrix; keep one); without its last draft step the "
        "round would replay as one that stopped early"
    ), err


def test_the_companion_of_two_files_of_one_step_is_named_as_both_files(capsys, tmp_path):
    """ "draft_step_2_11_21 and draft_step_2_11_21.txt (with draft_step_2_11_21.scores)" read as if the
    scores belonged to the .txt file: the entry says whose they are."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3)
    (dump / "draft_step_2_11_21.txt").write_bytes((dump / "draft_step_2_11_21").read_bytes())
    write_scores(dump / "draft_step_2_11_21.scores", [[0.9], [0.8]])
    code, _, err = run(capsys, "replay", dump, "--summary", "--no-progress")
    assert code == 1, err
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert (
        len(skipped) == 1
        and (
            "found draft_step_2_11_21 and draft_step_2_11_21.txt (with draft_step_2_11_21.scores, the companion "
            "of both) (2 files hold the same matrix; keep one)"
        )
        in skipped[0]
    ), err


# --- two companions of one kind for one matrix -----------------------------------------------------


@pytest.mark.parametrize("second", [".scores.npy", ".scores.txt"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:3]))
def test_two_scores_companions_are_one_round_entry_naming_both(capsys, tmp_path, command, second):
    """They gave two entries ('several companion files of one kind' and 'missing draft_step_1_10_20',
    a file that is there), naming neither companion."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3)
    write_scores(dump / "draft_step_1_10_20.scores", SCORES)
    write_scores(dump / f"draft_step_1_10_20{second}", SCORES)
    argv = [a.format(tmp=tmp_path) for a in command]
    code, _, err = run(capsys, argv[0], dump, "--no-progress", *argv[1:])
    assert code == 1, err
    skipped = [line for line in err.splitlines() if "skipped" in line and "draft_step_1_10_20" in line]
    assert len(skipped) == 1, err
    assert skipped[0].endswith(
        "skipped round 10_20: two sources of scores for draft_step_1_10_20: the companions "
        f"draft_step_1_10_20.scores and draft_step_1_10_20{second}; keep one"
    ), err
    assert_told(err)  # no traceback
    assert "missing" not in err and "several companion" not in err


@pytest.mark.parametrize(
    "companions, matrix",
    [
        (("draft_step_0_9_19.parents", "draft_step_0_9_19.parents.txt"), "draft_step_0_9_19"),
        (("validate_10_20.scores", "validate_10_20.scores.csv"), "validate_10_20"),
    ],
    ids=["step-0 parents", "validate scores"],
)
def test_two_companions_of_any_matrix_skip_its_round_naming_them(capsys, tmp_path, companions, matrix):
    """A step 0's (named one position before its round) and a validate file's alike: the round entry
    names them, not 'missing draft_step_0_9_19' or 'draft files without validate_10_20'."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3)
    values = [[0]] if "parents" in companions[0] else [[1.0]] * 5
    for name in companions:
        write_scores(dump / name, values)
    kind = "parents" if "parents" in companions[0] else "scores"
    for command in ("replay", "batch"):
        code, _, err = run(capsys, command, dump, "--no-progress", *(["--summary"] if command == "replay" else []))
        assert code == 1, err
        assert (
            f"skipped round 10_20: two sources of {kind} for {matrix}: the companions {companions[0]} and "
            f"{companions[1]}; keep one"
        ) in err, err
        assert "missing" not in err and "without" not in err and err.count("skipped") == 1, err


def test_two_companions_in_a_single_round_dump_are_the_error_of_its_only_round(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    write_scores(dump / "draft_step_1_124_140.scores", SCORES)
    write_scores(dump / "draft_step_1_124_140.scores.txt", SCORES)
    code, out, err = run(capsys, "replay", dump)
    assert code == 2 and out == "", err
    assert_told(
        err,
        "no round could be replayed",
        "round 124_140: two sources of scores for draft_step_1_124_140: the companions "
        "draft_step_1_124_140.scores and draft_step_1_124_140.scores.txt; keep one",
    )
    assert "missing" not in err


# --- odd wording: dtypes named twice, counts of one ------------------------------------------------


@pytest.mark.parametrize("form", ["npy", "npz"])
@pytest.mark.parametrize("command", ["replay", "batch"])
def test_a_matrix_of_strings_says_it_holds_text_and_what_was_expected(capsys, tmp_path, form, command):
    """It said "dtype '<U1' (<U1) is not read"."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3)
    (dump / "draft_step_1_10_20").unlink()
    strings = np.array([["a", "b"], ["c", "d"]])
    if form == "npy":
        np.save(dump / "draft_step_1_10_20.npy", strings)
    else:
        np.savez(dump / "draft_step_1_10_20.npz", ids=strings)
    code, _, err = run(capsys, command, dump, "--no-progress")
    assert code == 1, err
    assert_told(
        err,
        f"draft_step_1_10_20.{form}",
        "holds text (numpy dtype <U1): token ids must be integers, scores real numbers",
    )
    assert "(<U1)" not in err and "'<U1'" not in err


def test_a_round_of_the_other_layout_with_one_row_is_skipped_in_words(capsys, tmp_path):
    """[2] (gamma 1): the parents layout has 1 row (the root's), the all layout 3. The note said
    "1 rows where the all layout has 3"; the run's layout is now decided once, the round skipped."""
    dump = tmp_path / "dump"
    dump.mkdir()
    write_config(dump / "config.json", [[2]], [1])
    for a in (10, 13, 16, 19):
        write_matrix(dump / f"draft_step_0_{a - 1}_{a + 9}", [[5, 6]])
        rows = [[5], [7], [9]]  # root, then nodes 1..2
        write_matrix(dump / f"validate_{a}_{a + 10}", rows[:1] if a == 13 else rows)
    code, _, err = run(capsys, "batch", dump, "--no-progress")
    assert code == 1, err
    assert "validate_13_23: validate has 1 row(s), as the parents layout has, but the run's layout, " in err
    assert "that of most of its rounds (all on a tie), is all, which needs 3 here: a cut-off file?" in err, err


def test_a_config_with_one_topkspec_row_for_three_steps_says_row(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    write_config(dump / "config.json", [[6]], [1, 2, 2])
    code, _, err = run(capsys, "replay", dump)
    assert code == 2, err
    assert_told(err, "topKSpec", "has 1 row but gamma = 3")


def test_a_ragged_text_row_of_one_value_says_value(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    write_matrix(dump / "draft_step_1_124_140", [[41760, 35740], [45315]])
    code, _, err = run(capsys, "replay", dump)
    assert code == 2, err
    assert_told(err, "draft_step_1_124_140", "ragged rows: line 2 has 1 value, line 1 has 2")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_table_of_one_round_says_row(capsys, tmp_path, suffix):
    out = tmp_path / f"rounds{suffix}"
    code, _, err = run(capsys, "batch", article_by_hand(tmp_path / "mine"), "-o", out, "--no-progress")
    assert code == 0 and f"wrote 1 row to {out}" in err, err


def test_a_step0_file_named_with_its_rounds_own_key_says_how_many_positions(capsys, tmp_path):
    """It said 'step 0 is named 1,1 position(s) before its round'."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3, step0_shift=0)
    code, _, err = run(capsys, "batch", dump, "--step0-offset", "1", "--no-progress")
    assert code == 1, err
    assert_told(err, "a step-0 file named with round 12_22's own key: step 0 is named 1 position before its round")
    assert "1,1" not in err and "position(s)" not in err


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_utf16_text_matrix_says_save_it_as_utf8(capsys, tmp_path, encoding):
    """A Windows editor's "Unicode" text was told 'not UTF-8 text; ... pass --raw DTYPE:COLUMNS',
    advice that would misread it."""
    dump = article_by_hand(tmp_path / "mine")
    text = "41760 35740\n45315 41760\n"
    data = text.encode(encoding) if encoding == "utf-16" else codecs.BOM_UTF16_BE + text.encode(encoding)
    (dump / "draft_step_1_124_140").write_bytes(data)
    code, _, err = run(capsys, "replay", dump)
    assert code == 2, err
    assert_told(err, "draft_step_1_124_140", "UTF-16 text", "save it as UTF-8")
    assert "--raw" not in err


# --- a symbolic link to a device or FIFO given as a dump file ---------------------------------------


@pytest.mark.parametrize("command", ["replay", "batch"])
def test_a_symlink_to_dev_zero_is_called_a_symlink_naming_its_target(capsys, tmp_path, command):
    """It said "is a character device, not a regular file": the user sees a link in the directory."""
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_2_124_140").unlink()
    (dump / "draft_step_2_124_140").symlink_to("/dev/zero")
    code, out, err = run(capsys, command, dump, "--no-progress")
    assert code == 2 and out == "", err
    assert_told(
        err,
        f"skipped round 124_140: {dump / 'draft_step_2_124_140'}: is a symbolic link to /dev/zero, a character "
        "device, not a regular file",
    )


def test_a_relative_symlink_to_a_fifo_names_both_and_never_blocks(tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    os.mkfifo(tmp_path / "pipe")
    (dump / "validate_124_140").unlink()
    (dump / "validate_124_140").symlink_to("../pipe")
    done = shell("replay", dump, timeout=120)  # an open of the FIFO would block: the timeout fails the test
    assert done.returncode == 2, done.stderr
    assert_told(
        done.stderr,
        f"{dump / 'validate_124_140'}: is a symbolic link to ../pipe (which is {tmp_path.resolve() / 'pipe'}), "
        "a FIFO (named pipe), not a regular file",
    )


def test_a_companion_with_a_typo_in_its_extension_is_named_with_its_fix(capsys, tmp_path):
    """'draft_step_1_11_21.score' was listed as 'extension .score is not read (dump files have none,
    or .txt, ...)', which suggested renaming it to a data file's extension, not '.scores'."""
    d = tmp_path / "d"
    rounds_by_hand(d, rounds=3)
    for name, text in (
        ("draft_step_1_10_20.socres", "0.9 0.1\n0.8 0.2\n"),
        ("draft_step_1_11_21.score", "0.9 0.1\n0.8 0.2\n"),
        ("draft_step_2_12_22.parnets", "7\n9\n"),
    ):
        (d / name).write_text(text, encoding="utf-8")
    code, _, err = run(capsys, "replay", d, "--summary", "--no-progress")
    assert code == 1, err
    assert_told(
        err,
        "skipped draft_step_1_10_20.socres: extension .socres is not read; did you mean draft_step_1_10_20.scores, "
        "the scores companion?",
        "skipped draft_step_1_11_21.score: extension .score is not read; did you mean draft_step_1_11_21.scores",
        "skipped draft_step_2_12_22.parnets: extension .parnets is not read; did you mean "
        "draft_step_2_12_22.parents, the parents companion?",
    )
    assert "dump files have none" not in err


# --- a companion beyond gamma; option values out of range or empty; --cost fields; labels --------


def test_a_companion_beyond_gamma_is_a_stray_companion_not_a_lost_last_step(capsys, tmp_path):
    """draft_step_3_10_20.scores beside a dump of gamma 3 named "missing draft_step_3_10_20 ... would
    replay as one that stopped early": a round of gamma steps lost none, the file is a companion
    without its matrix, and the round replays."""
    dump = article_by_hand(tmp_path / "d")
    (dump / "draft_step_3_124_140.scores").write_text("0.5\n", encoding="utf-8")
    code, out, err = run(capsys, "replay", dump, "--summary", "--no-progress")
    assert code == 1 and "rounds replayed: 1" in out, err
    assert_told(err, "skipped draft_step_3_124_140.scores: companion file without its data file")
    assert "stopped early" not in err and "missing draft_step_3" not in err


@pytest.mark.parametrize(
    "argv,option",
    [
        (["replay", "{dump}", "--step0-offset", "99999999999999999999999"], "--step0-offset"),
        (["replay", "{dump}", "--tree", "9223372036854775808"], "--tree"),
        (["replay", "{dump}", "--round", "1_99999999999999999999"], "--round"),
        (["compare", "{dump}", "--top", "99999999999999999999"], "--top"),
        (["recommend", "{dump}", "--budget", "-99999999999999999999"], "--budget"),
    ],
)
def test_an_integer_out_of_range_is_a_usage_error_naming_the_option_and_range(capsys, tmp_path, argv, option):
    dump = article_by_hand(tmp_path / "d")
    code, out, err = run(capsys, *(a.format(dump=dump) for a in argv))
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert_told(err, f"argument {option}:", "9223372036854775807")


@pytest.mark.parametrize(
    "option", [["--grid", ""], ["--configs", ""], ["--generate", " "], ["--cost", ""], ["--label", ""]]
)
def test_an_empty_option_value_is_refused_not_the_default(capsys, tmp_path, option):
    dump = article_by_hand(tmp_path / "d")
    code, out, err = run(capsys, "compare", dump, *option, "--no-progress")
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert_told(err, f"argument {option[0]}: empty value")


@pytest.mark.parametrize(
    "cost,words",
    [
        ('{"tokens":[1,16],"verify_s":[0.38,"x"],"draft_step_s":0.08}', "'verify_s' must be a list of numbers"),
        ('{"tokens":[1,16],"verify_s":[0.38,0.9],"draft_step_s":"a"}', "'draft_step_s' must be a number"),
        ('{"tokens":"ab","verify_s":[0.38,0.9],"draft_step_s":0.1}', "'tokens' must be a list of numbers"),
    ],
)
def test_a_cost_model_names_the_field_and_what_it_must_be(capsys, tmp_path, cost, words):
    dump = article_by_hand(tmp_path / "d")
    code, _, err = run(capsys, "compare", dump, "--cost", cost, "--no-progress")
    assert code == 2 and "could not convert" not in err, err
    assert_told(err, words)


def test_a_config_file_that_is_not_json_has_no_pseudo_field(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "d")
    (dump / "config.json").write_text('{"gamma": 3, "topKSpec": [[6],[2,2]]\n', encoding="utf-8")
    code, _, err = run(capsys, "replay", dump, "--no-progress")
    assert code == 2 and "<json>" not in err and f"{dump / 'config.json'}: not valid JSON" in err, err


def test_every_command_of_dumps_labels_its_skip_lines_recommend_too(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_9_124_140.scores").write_text("0.5\n", encoding="utf-8")
    for argv in (["stats"], ["compare"], ["recommend", "--budget", "4"]):
        code, _, err = run(capsys, argv[0], dump, *argv[1:], "--no-progress")
        skips = [line for line in err.splitlines() if "skipped" in line]
        assert code == 1 and skips == [
            "specreplay: mine: skipped draft_step_9_124_140.scores: companion file without its data file"
        ], (argv, err)


def test_files_that_hold_one_matrix_are_named_by_path_in_their_rounds_entry(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "d")
    (dump / "validate_124_140.txt").write_bytes((dump / "validate_124_140").read_bytes())
    code, _, err = run(capsys, "replay", dump, "--summary", "--no-progress")
    assert code == 2, err
    assert_told(err, f"skipped round 124_140: {dump / 'validate_124_140'} and {dump / 'validate_124_140.txt'}: 2 files")


def _skip_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("specreplay: skipped ")]


@pytest.mark.parametrize("offset", ["1000", "-1"])
def test_a_wrong_step0_offset_hints_only_the_offset_the_warning_names(capsys, tmp_path, offset):
    """--step0-offset 1000 on names at offset 1 said 'draft_step_0_10_20 is here, named with the
    round's own key' of round 10_20 (it is round 11_21's step 0) and named draft_step_0_10_20 in two
    rounds' entries; -1 said '--step0-offset 0 reads every step 0 so' (0 groups 2 of 3 rounds)."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3, step0_shift=1)
    code, _, err = run(capsys, "replay", dump, "--summary", "--step0-offset", offset)
    assert code in (1, 2), err
    assert_told(err, f"--step0-offset {offset} pairs", "offset 1 groups every round", "pass --step0-offset 1")
    assert "own key" not in err and "--step0-offset 0" not in err
    assert "(draft_step_0_10_20 is here, step-0 offset 1 pairs it with this round" in err
    lines = _skip_lines(err)
    for name in ("draft_step_0_9_19", "draft_step_0_10_20", "draft_step_0_11_21"):
        assert sum(name in line for line in lines) <= 1, (name, lines)


def test_a_packed_runs_own_step0_offset_stated_again_pins_it(capsys, tmp_path):
    """replay RUN --step0-offset 0 on a run packed at the detected offset 0 still said 'to pin it,
    pack the dump directory again with --step0-offset 0', which the user had just done."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=3, step0_shift=0)
    code, _, err = run(capsys, "pack", dump, "-o", tmp_path / "run")
    assert code == 0, err
    code, _, err = run(capsys, "replay", tmp_path / "run", "--summary")
    assert code == 0 and "to pin it, pack the dump directory again with --step0-offset 0" in err, err
    code, _, err = run(capsys, "replay", tmp_path / "run", "--summary", "--step0-offset", "0")
    assert code == 0 and "step-0 offset" not in err and "pin" not in err, err


@pytest.mark.parametrize("packed", [False, True])
def test_the_step0_warning_counts_files_as_the_summary_does(capsys, tmp_path, packed):
    """--step0-offset 0 on names at offset 1: the summary said 'skipped: 2 round(s) and 1 file(s)'
    and the WARNING 'leaves 2 draft_step_0 file(s) in no round': the second is named in the entry
    of round 50_60, which has its validate file only."""
    dump = tmp_path / "dump"
    rounds_by_hand(dump, rounds=2, step0_shift=1)
    write_matrix(dump / "draft_step_0_49_59", [[1, 2, 3, 4, 5, 6]])
    write_matrix(dump / "validate_50_60", [[1, 2]])
    target = dump
    if packed:
        code, _, err = run(capsys, "pack", dump, "-o", tmp_path / "run", "--step0-offset", "0")
        assert code == 1, err
        target = tmp_path / "run"
    code, out, err = run(capsys, "replay", target, "--summary", *([] if packed else ["--step0-offset", "0"]))
    assert code == 1, err
    assert "skipped: 2 round(s) and 1 file(s)" in out
    assert_told(err, "leaves 2 draft_step_0 file(s) in no round (1 of them named in a skipped round's entry)")
    assert "(draft_step_0_49_59 is here, step-0 offset 1 pairs it with this round" in err
