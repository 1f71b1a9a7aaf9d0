"""``--temperature`` through the CLI: numbers by hand from a hand-made dump with scores."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

from tests.test_user_mistakes import SYNTH, assert_told, run, write_config, write_matrix

ROOT = Path(__file__).resolve().parent.parent


def tiny_dump(directory: Path, probs=((0.5, 0.3, 0.2), (0.6, 0.3, 0.1))) -> Path:
    """Root children 10, 11 (step 0); node 1 (token 10) expanded with child 12; a vocabulary of 3+.

    validate (parents layout): root row 10 11 13, node 1's row 12 14 15, probabilities ``probs``.
    By hand at T = 1: E[L] = 0.5 + 0.3 + 0.5 * 0.6 = 1.1, P(L >= 1) = 0.8, P(L >= 2) = 0.3.
    """
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[2], [1]], [1, 1])
    write_matrix(directory / "draft_step_0_123_139", [[10, 11]])
    write_matrix(directory / "draft_step_1_124_140", [[12]])
    write_matrix(directory / "validate_124_140", [[10, 11, 13], [12, 14, 15]])
    (directory / "validate_124_140.scores").write_text("".join(" ".join(map(str, r)) + "\n" for r in probs))
    return directory


def sampling_json(capsys, dump, *extra):
    code, out, err = run(capsys, "replay", dump, "--json", "--no-progress", *extra)
    return code, [json.loads(line) for line in out.splitlines()], err


def test_temperature_one_by_hand(capsys, tmp_path):
    code, rows, err = sampling_json(capsys, tiny_dump(tmp_path / "d"), "--temperature", "1")
    assert code == 0, err
    s = rows[0]["sampling"]
    assert s["exact"] and s["expected_accepted_length"] == pytest.approx(1.1, abs=1e-12)
    assert s["expected_accepted_length_lo"] == s["expected_accepted_length_hi"]
    assert s["length_at_least_lo"] == pytest.approx([0.8, 0.3], abs=1e-12)
    # E[L^2] = 0.5 + 0.3 + 0.3 * 3 = 1.7
    assert s["accepted_length_variance"] == pytest.approx(1.7 - 1.21, abs=1e-12)


def test_half_temperature_by_hand(capsys, tmp_path):
    # Rows naming all V = 3 tokens: no tail, so T = 0.5 is exact: probabilities squared, renormalised.
    dump = tiny_dump(tmp_path / "d")
    code, rows, err = sampling_json(capsys, dump, "--temperature", "0.5", "--vocab-size", "3")
    assert code == 0, err
    root, node1 = (0.25 / 0.38, 0.09 / 0.38), 0.36 / 0.46
    truth = sum(root) + root[0] * node1
    s = rows[0]["sampling"]
    assert s["exact"] and s["expected_accepted_length"] == pytest.approx(truth, abs=1e-12)
    # Without V the same rows, summing to 1 in float64, leave a tail of unknown tokens: Z_T is not
    # known, so the round is not exact, though the bounds meet here (float64 rounds the tail away):
    # one value all the same (replay.core.point_value), with no variance.
    code, rows, err = sampling_json(capsys, dump, "--temperature", "0.5")
    s = rows[0]["sampling"]
    assert code == 0 and not s["exact"] and s["accepted_length_variance"] is None
    assert s["expected_accepted_length"] == s["expected_accepted_length_lo"] == s["expected_accepted_length_hi"]
    assert s["expected_accepted_length"] == pytest.approx(truth, abs=1e-12)


def test_a_tail_is_bounded_and_the_vocabulary_size_pins_it(capsys, tmp_path):
    # The root's row misses 0.1 of mass; with 4 tokens it is one token: Z = .25 + .09 + .01 + .01.
    dump = tiny_dump(tmp_path / "d", probs=((0.5, 0.3, 0.1), (0.6, 0.3, 0.1)))
    truth = (0.25 + 0.09) / 0.36 + 0.25 / 0.36 * (0.36 / 0.46)
    code, rows, err = sampling_json(capsys, dump, "--temperature", "0.5", "--vocab-size", "4")
    assert code == 0, err
    assert rows[0]["sampling"]["exact"]
    assert rows[0]["sampling"]["expected_accepted_length"] == pytest.approx(truth, abs=1e-12)
    code, rows, err = sampling_json(capsys, dump, "--temperature", "0.5")
    s = rows[0]["sampling"]
    assert not s["exact"] and s["expected_accepted_length"] is None
    # The tail at its largest (one token of p_K = m) is the truth here: the lower bound is tight.
    assert s["expected_accepted_length_lo"] == pytest.approx(truth, abs=1e-12)
    assert s["expected_accepted_length_hi"] > truth + 0.01


def test_zero_is_the_greedy_replay_through_the_cli(capsys):
    code, rows, err = sampling_json(capsys, SYNTH, "--temperature", "0")
    assert code == 0, err
    assert len(rows) == 300
    for r in rows:
        assert r["sampling"]["expected_accepted_length"] == r["accepted_length"]


def test_text_summary_shows_bounds_and_the_expected_distribution(capsys):
    code, out, err = run(capsys, "replay", SYNTH, "--temperature", "0.7", "--summary", "--no-progress")
    assert code == 0, err
    assert "sampling at T = 0.7 (300 rounds with scores" in out
    assert "expected accepted length per round: [" in out and "(width " in out
    assert "    L = 3: [" in out


def readme_console_blocks() -> list[tuple[list[str], list[str]]]:
    """The ```console blocks of README.md and docs/sampling.md: (the command after ``$ specreplay``, the
    lines it shows)."""
    readme = "".join((ROOT / page).read_text(encoding="utf-8") for page in ("README.md", "docs/sampling.md"))
    blocks = []
    for part in readme.split("```console\n")[1:]:
        command, *shown = part[: part.index("```")].splitlines()
        assert command.startswith("$ specreplay "), command
        blocks.append((command.removeprefix("$ specreplay ").split(), shown))
    return blocks


CONSOLE = readme_console_blocks()


@pytest.mark.parametrize("argv,shown", CONSOLE, ids=[" ".join(argv[:1] + argv[2:]) for argv, _ in CONSOLE])
def test_readme_console_blocks_show_what_the_command_prints(capsys, monkeypatch, argv, shown):
    """new-user try 10: README showed compare's 2.433 where the command printed 2.434. Each shown line
    is printed, in this order; a line starting with "..." elides lines, one ending with " ..." columns."""
    monkeypatch.chdir(ROOT)  # the README runs them from the checkout
    code, out, err = run(capsys, *argv, "--no-progress")
    assert code == 0, err
    printed = out.splitlines()
    at = 0
    for line in shown:
        if line.startswith("..."):
            continue
        matches = (lambda p: p.startswith(line[:-4])) if line.endswith(" ...") else (lambda p: p == line)
        found = next((i for i in range(at, len(printed)) if matches(printed[i])), None)
        assert found is not None, f"README line not printed (after line {at}): {line!r}"
        at = found + 1


def test_above_one_without_vocabulary_says_so(capsys):
    code, out, err = run(capsys, "replay", SYNTH, "--temperature", "1.3", "--summary", "--no-progress")
    assert code == 0
    assert_told(err, "--vocab-size", "lower bounds")


@pytest.mark.parametrize("value", ["-0.5", "nan", "inf", "warm", "-0"])
def test_bad_temperature_is_one_line_exit_2(capsys, tmp_path, value):
    code, out, err = run(capsys, "replay", tiny_dump(tmp_path / "d"), f"--temperature={value}")
    if value == "-0":  # -0.0 is 0: the greedy replay
        assert code == 0
        return
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert_told(err, "--temperature", ">= 0")


def test_rows_that_sum_above_one_are_skipped_not_numbered(capsys, tmp_path):
    dump = tiny_dump(tmp_path / "d", probs=((0.5, 0.4, 0.3), (0.6, 0.3, 0.1)))
    code, out, err = run(capsys, "replay", dump, "--temperature", "0.7")
    assert code == 2 and "expected accepted length" not in out
    assert_told(err, "round 124_140", "sum to more than 1")


@pytest.mark.parametrize("command", ["replay", "batch"])
def test_a_zero_probability_row_below_one_is_skipped_not_numbered(capsys, tmp_path, command):
    # A row with a zero cell (no unnamed token can have mass) summing to 0.7 is no distribution (read
    # as exact: E[L] 0.58 for a truth of 0.50). Whatever V, it names the file, the row and the sum.
    dump = tiny_dump(tmp_path / "d", probs=((0.4, 0.3, 0.0), (0.6, 0.3, 0.1)))
    for extra in ((), ("--vocab-size", "40")):
        code, out, err = run(capsys, command, dump, "--temperature", "0.7", "--no-progress", *extra)
        assert code == 2 and "expected accepted length" not in out, err
        assert "Traceback" not in err
        assert_told(err, "round 124_140", "validate_124_140.scores", "row 0", "zero probability", "sums to 0.7")
    fine = tiny_dump(tmp_path / "fine", probs=((0.7, 0.3, 0.0), (0.6, 0.3, 0.1)))  # its zero cell, and a sum of 1
    code, out, err = run(capsys, command, fine, "--temperature", "0.7", "--no-progress")
    assert code == 0 and "expected accepted length" in out, err


def _sampling_part(out: str) -> str:
    return out[out.index("sampling at T") :]


@pytest.mark.parametrize("t", ["0", "0.7", "1.3"])
def test_batch_gives_the_replays_sampling_summary(capsys, t):
    code, out, err = run(capsys, "replay", SYNTH, "--temperature", t, "--summary", "--no-progress")
    assert code == 0, err
    code2, out2, err2 = run(capsys, "batch", SYNTH, "--temperature", t, "--no-progress", "--workers", "1")
    assert code2 == 0, err2
    assert _sampling_part(out2) == _sampling_part(out)
    assert ("--vocab-size" in err2) == (t == "1.3")


def test_batch_without_scores_lists_the_skip(capsys, tmp_path):
    from tests.test_user_mistakes import article_by_hand

    code, out, err = run(capsys, "batch", article_by_hand(tmp_path / "a"), "--temperature", "0.5")
    assert code == 2 and "sampling at" not in out
    assert_told(err, "round 124_140", "no scores")


def test_api_frame_per_round_and_temperature_is_the_clis(capsys, tmp_path):
    from replay.cli import api
    from replay.util.errors import SpecReplayError

    dump = tiny_dump(tmp_path / "d", probs=((0.5, 0.3, 0.1), (0.6, 0.3, 0.1)))
    frame = api.sampling(dump, [0, 0.5, 1.0])
    assert list(frame["temperature"]) == [0.0, 0.5, 1.0]
    for t in ("0", "0.5", "1"):
        _, rows, _ = sampling_json(capsys, dump, "--temperature", t)
        row = frame[frame["temperature"] == float(t)].iloc[0]
        for name in ("expected_accepted_length_lo", "expected_accepted_length_hi", "exact"):
            assert row[name] == rows[0]["sampling"][name]
    assert frame["expected_accepted_length"].iloc[2] == pytest.approx(0.5 + 0.3 + 0.5 * 0.6, abs=1e-12)
    no_scores = api.sampling(ROOT / "sample_dumps" / "article_round", 0.7)
    assert len(no_scores) == 0 and "no scores" in no_scores.attrs["skipped"][0][2]
    with pytest.raises(SpecReplayError, match="temperature"):
        api.sampling(dump, -1)


def tail_dump(directory: Path) -> Path:
    """A hand-made dump: tree [3]|[2,1], all layout, four rounds whose rows name 4 tokens
    of an unknown vocabulary (docs/dump-format.md). Every child is in its parent's row; the root's
    row of round 10_20 sums to 1 in float64 (its tail rounds away), the other rows leave a tail."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[3], [2, 1]], [1, 2])
    root_a, root_b = ([10, 11, 12, 99], [0.5, 0.25, 0.125, 0.0625]), ([11, 10, 12, 99], [0.5, 0.25, 0.125, 0.0625])
    a1, a2 = ([20, 21, 98, 97], [0.4, 0.3, 0.2, 0.05]), ([30, 31, 96, 95], [0.6, 0.2, 0.1, 0.1])
    a2_swapped = ([31, 30, 96, 95], [0.6, 0.2, 0.1, 0.1])
    a3, leaf = ([40, 41, 42, 43], [0.25] * 4), ([50, 51, 52, 53], [0.7, 0.1, 0.1, 0.05])
    rounds = {
        (10, 20): [([77, 10, 11, 12], [0.4, 0.3, 0.2, 0.1]), a1, a2],
        (11, 21): [root_a, a1, a2],
        (12, 22): [root_b, a1, a2_swapped],
        (13, 23): [root_b, a1, a2],
    }
    for (a, b), rows in rounds.items():
        rows = [*rows, a3, leaf, leaf, leaf]  # rows of all 8 nodes (the all layout)
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[10, 11, 12]])
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}.scores", [[math.log(p) for p in (0.5, 0.3, 0.2)]])
        write_matrix(directory / f"draft_step_1_{a}_{b}", [[20, 21], [30, 31]])
        write_matrix(directory / f"draft_step_1_{a}_{b}.scores", [[-0.5, -0.9], [-0.4, -1.2]])
        write_matrix(directory / f"draft_step_1_{a}_{b}.parents", [[1], [2]])
        write_matrix(directory / f"validate_{a}_{b}", [r[0] for r in rows])
        write_matrix(directory / f"validate_{a}_{b}.scores", [[math.log(p) for p in r[1]] for r in rows])
    return directory


@pytest.mark.parametrize("t", ["0.001", "0.003", "0.5"])
def test_an_unrecorded_tail_is_never_exact_however_small_t(capsys, tmp_path, t):
    """At T = 0.001 the rows' tails round away in float64 and the bounds meet (lo == hi), but the
    rows do not record the tail, so Z_T is not known: no round is exact, and every count says 0. The
    bounds that meet are one value all the same (replay.core.point_value), said to be not exact.
    At T = 1 (Z = 1) every child recorded makes each round exact."""
    dump = tail_dump(tmp_path / "d")
    code, rows, err = sampling_json(capsys, dump, "--temperature", t, "--round", "10_20")
    s = rows[0]["sampling"]
    assert code == 0, err
    assert not s["exact"] and s["accepted_length_variance"] is None
    lo, hi = s["expected_accepted_length_lo"], s["expected_accepted_length_hi"]
    assert lo < hi or t != "0.5"
    if t == "0.001":  # the floats came out equal: one value, but not a proof
        assert lo == hi
    assert s["expected_accepted_length"] == (lo if lo == hi else None)
    code, out, err = run(capsys, "replay", dump, "--temperature", t, "--round", "10_20")
    assert code == 0 and ("(bounds that meet, not exact)" in out) == (lo == hi), err
    for command in ("replay", "batch"):
        code, out, err = run(capsys, command, dump, "--temperature", t, "--no-progress")
        assert code == 0, err
        assert f"sampling at T = {float(t):g} (4 rounds with scores, 0 exact" in out
    code, out, err = run(capsys, "stats", dump, "--temperature", t, "--json")
    assert code == 0 and json.loads(out)["summary"][0]["exact_rounds"] == 0, err
    code, out, err = run(capsys, "replay", dump, "--temperature", "1", "--no-progress")
    assert code == 0 and "sampling at T = 1 (4 rounds with scores, 4 exact" in out, err


def test_recommend_at_t_says_when_it_shows_only_the_top(capsys, tmp_path):
    # not "9 shapes contained ..., best first:" over fewer rows with --top's default unsaid
    dump = tiny_dump(tmp_path / "d")
    code, out, err = run(capsys, "recommend", dump, "--budget", "3", "--temperature", "0.7", "--top", "2")
    assert code == 0, err
    head = out.splitlines()[0]
    shapes = int(head.split(" shapes contained")[0].rsplit(" ", 1)[1])
    assert shapes > 2 and head.endswith("best first (the top 2; --top N for more):"), head
    code, out, err = run(capsys, "recommend", dump, "--budget", "3", "--temperature", "0.7", "--top", str(shapes))
    assert code == 0 and out.splitlines()[0].endswith("best first:"), err


@pytest.mark.parametrize("t", ["0", "0.7"])
def test_rows_with_several_zero_cells_print_no_numpy_warning(capsys, tmp_path, t):
    # two -inf cells side by side would make the rising-row check's np.diff warn
    # "RuntimeWarning: invalid value encountered in subtract" on stderr, at every T
    dump = tiny_dump(tmp_path / "d", probs=((1.0, 0.0, 0.0), (0.6, 0.4, 0.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code, out, err = run(capsys, "replay", dump, "--temperature", t, "--json")
    assert code == 0 and "Warning" not in err, err
