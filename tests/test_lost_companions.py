"""A round that lost a .scores or .parents companion while its other draft steps kept theirs.

The rank-major fallback would guess the lost step's expanded nodes, and the guess silently changed
the run's numbers (a warning said so, exit 0). Such a round is now skipped by every command, named
with the step file that lacks them (exit 1), and the numbers are those of the dump without it. A
round without any scores, in a run whose other rounds have them, stays replayed with the run's
warning; a dump without any scores is the fallback's documented case (exit 0).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_user_mistakes import assert_told, rounds_by_hand, run

LOST_STEP0 = "draft_step_0_11_21.scores"  # round 12_22: level 1 has no path probabilities
LOST_STEP1 = "draft_step_1_14_24.scores"  # round 14_24: level 2 has none


def scored_rounds(d: Path, rounds: int = 6) -> list[tuple[int, int]]:
    """rounds_by_hand's rounds, every matrix with a log-prob .scores companion."""
    keys = rounds_by_hand(d, rounds=rounds)
    for a, b in keys:
        (d / f"draft_step_0_{a - 1}_{b - 1}.scores").write_text("-0.1 -0.2 -0.3 -0.4 -0.5 -0.6\n", encoding="utf-8")
        (d / f"draft_step_1_{a}_{b}.scores").write_text("-0.5 -0.7\n-0.6 -0.9\n", encoding="utf-8")
        (d / f"draft_step_2_{a}_{b}.scores").write_text("-0.1\n-0.2\n", encoding="utf-8")
        (d / f"validate_{a}_{b}.scores").write_text("-0.1\n-0.2\n-0.3\n-0.4\n-0.5\n", encoding="utf-8")
    return keys


def remove_round(d: Path, key: tuple[int, int]) -> None:
    a, b = key
    for name in (
        f"draft_step_0_{a - 1}_{b - 1}",
        f"draft_step_1_{a}_{b}",
        f"draft_step_2_{a}_{b}",
        f"validate_{a}_{b}",
    ):
        for p in d.glob(name + "*"):
            p.unlink()


@pytest.fixture
def dumps(tmp_path: Path) -> tuple[Path, Path]:
    """(a dump of 6 scored rounds two of which lost a .scores file, the same dump without those rounds)."""
    lost = tmp_path / "dump_with_losses"
    keys = scored_rounds(lost)
    (lost / LOST_STEP0).unlink()
    (lost / LOST_STEP1).unlink()
    kept = tmp_path / "dump_kept"
    shutil.copytree(lost, kept)
    remove_round(kept, keys[2])
    remove_round(kept, keys[4])
    return lost, kept


def without_paths(text: str, d: Path) -> str:
    return text.replace(str(d), "<DUMP>").replace(d.name, "<NAME>")


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "--json"],
        ["batch", "--json", "--workers", "1"],
        ["batch", "--json", "--workers", "2"],
        ["stats", "--json"],
        ["compare", "--json"],
        ["compare", "--temperature", "0.7", "--json"],
        ["recommend", "--budget", "8", "--bootstrap", "20", "--json"],
    ],
)
def test_a_round_that_lost_a_scores_companion_is_skipped_by_every_command(capsys, dumps, command):
    lost, kept = dumps
    code, out, err = run(capsys, command[0], lost, *command[1:], "--no-progress")
    assert code == 1, err
    assert_told(
        err,
        f"skipped round 12_22: {lost / 'draft_step_0_11_21'}: draft_step_0 has no scores while draft_step_1 has "
        "them (a lost .scores companion",
        "draft step 1's expanded nodes would be a guess by the rank-major fallback",
        f"skipped round 14_24: {lost / 'draft_step_1_14_24'}: draft_step_1 has no scores while draft_step_0 has them",
        "draft step 2's expanded nodes would be a guess",
    )
    assert "rank-major fallback, a guess" not in err  # no round was replayed by a guess
    code, expected, err = run(capsys, command[0], kept, *command[1:], "--no-progress")
    assert code == 0, err
    if command[0] == "recommend":  # its JSON times each phase and counts the skipped rounds
        out, expected = (json.loads(text) for text in (out, expected))
        assert (out.pop("skipped"), expected.pop("skipped")) == (2, 0)
        for doc in (out, expected):
            doc.pop("seconds", None)
    assert without_paths(str(out), lost) == without_paths(str(expected), kept)


def test_the_summary_counts_the_skipped_rounds(capsys, dumps):
    lost, kept = dumps
    code, out, _ = run(capsys, "replay", lost, "--summary", "--no-progress")
    assert code == 1
    _, expected, _ = run(capsys, "replay", kept, "--summary", "--no-progress")
    assert "rounds replayed: 4   skipped: 2 round(s)" in out
    mean = next(line for line in out.splitlines() if "mean acceptance length" in line)
    assert mean in expected


@pytest.mark.parametrize("scores", [False, True])
def test_a_round_that_lost_a_parents_companion_is_skipped(capsys, tmp_path, scores):
    """With scores, path probability would choose the step's nodes: the engine's may differ (the
    reason a dump gives parents), so the round is skipped too."""
    d = tmp_path / "d"
    keys = scored_rounds(d, rounds=3) if scores else rounds_by_hand(d, rounds=3)
    for a, b in keys:
        (d / f"draft_step_0_{a - 1}_{b - 1}.parents").write_text("0\n", encoding="utf-8")
        (d / f"draft_step_1_{a}_{b}.parents").write_text("1\n2\n", encoding="utf-8")
        (d / f"draft_step_2_{a}_{b}.parents").write_text("7\n9\n", encoding="utf-8")
    (d / "draft_step_2_11_21.parents").unlink()
    for command in (["replay", "--summary"], ["batch", "--workers", "1"], ["stats"]):
        code, out, err = run(capsys, command[0], d, *command[1:], "--no-progress")
        assert code == 1, (command, err)
        assert_told(
            err,
            f"skipped round 11_21: {d / 'draft_step_2_11_21'}: draft_step_2 has no parents while draft_step_0 has "
            "them (a lost .parents companion",
            ": its expanded nodes would be chosen by a rule (path probability or the rank-major fallback), not read "
            "from the dump",
        )


def test_the_last_steps_scores_decide_no_selection(capsys, tmp_path):
    """The last draft step's scores would be the path probabilities of a level no step expands: a
    greedy replay without them is exact, so the round is replayed."""
    d = tmp_path / "d"
    scored_rounds(d, rounds=3)
    (d / "draft_step_2_11_21.scores").unlink()
    code, out, err = run(capsys, "replay", d, "--summary", "--no-progress")
    assert code == 0, err
    assert "rounds replayed: 3" in out and "WARNING" not in err


def test_a_round_without_any_scores_among_scored_rounds_is_replayed_with_a_warning(capsys, tmp_path):
    d = tmp_path / "d"
    scored_rounds(d, rounds=4)
    for name in ("draft_step_0_11_21", "draft_step_1_12_22", "draft_step_2_12_22", "validate_12_22"):
        (d / f"{name}.scores").unlink()
    for command in (["replay", "--summary"], ["batch", "--workers", "1"], ["stats"], ["compare"]):
        code, out, err = run(capsys, command[0], d, *command[1:], "--no-progress")
        assert code == 0, (command, err)
        assert_told(
            err,
            "WARNING: 1 of 4 round(s) have no scores and no parents while other rounds have them (round 12_22)",
            "lost .scores or .parents companions",
        )
        assert err.count("rank-major fallback") == 1


def test_a_dump_without_scores_is_the_fallbacks_documented_case(capsys, tmp_path):
    d = tmp_path / "d"
    rounds_by_hand(d, rounds=2)
    code, out, err = run(capsys, "replay", d, "--summary", "--no-progress")
    assert code == 0, err
    assert_told(err, "WARNING: 2 of 2 round(s) have no scores and no parents in the dump")


def test_an_engine_without_scores_for_one_step_is_told_how_to_replay_by_the_fallback(capsys, tmp_path):
    """No file was lost when every round lacks the same step's scores: the message names the way out
    (remove the others), and the dump then replays by the fallback with its warning."""
    d = tmp_path / "d"
    keys = scored_rounds(d, rounds=3)
    for a, b in keys:
        (d / f"draft_step_1_{a}_{b}.scores").unlink()
    code, out, err = run(capsys, "replay", d, "--summary", "--no-progress")
    assert code == 2 and out == "", err
    assert_told(err, "remove the round's others (docs/dump-format.md)", "no round could be replayed")
    for p in d.glob("draft_step_*.scores"):
        p.unlink()
    code, out, err = run(capsys, "replay", d, "--summary", "--no-progress")
    assert code == 0 and "rounds replayed: 3" in out, err
    assert_told(err, "WARNING: 3 of 3 round(s) have no scores and no parents in the dump")


@pytest.mark.parametrize(
    "command", [["replay", "--summary"], ["batch"], ["stats"], ["compare"], ["recommend", "--budget", "8"]]
)
def test_a_misspelt_companion_of_a_skipped_round_is_one_entry_with_its_fix(capsys, tmp_path, command):
    # a new-user pass: draft_step_0_11_21.scroes gave two entries, the file's did-you-mean and the
    # round's lost companion; one mistake, one entry, the round's, which names the file and its fix
    d = tmp_path / "d"
    scored_rounds(d)
    (d / LOST_STEP0).rename(d / "draft_step_0_11_21.scroes")
    code, _, err = run(capsys, command[0], d, *command[1:], "--no-progress")
    told = [line for line in err.splitlines() if "skipped" in line]
    assert code == 1 and len(told) == 1, err
    assert (
        told[0].endswith(
            f"remove the round's others (docs/dump-format.md); {d / 'draft_step_0_11_21.scroes'} is here: did you "
            "mean draft_step_0_11_21.scores?"
        )
        and f"skipped round 12_22: {d / 'draft_step_0_11_21'}: draft_step_0 has no scores" in told[0]
    ), err
    if command[0] in ("replay", "batch"):  # the round not replayed: the file keeps its own entry
        code, _, err = run(capsys, command[0], d, *command[1:], "--no-progress", "--round", "14_24")
        assert "skipped draft_step_0_11_21.scroes: extension .scroes is not read; did you mean" in err, err


def test_a_misspelt_companion_of_a_last_step_stays_a_file_entry(capsys, tmp_path):
    d = tmp_path / "d"
    scored_rounds(d)
    (d / "draft_step_2_14_24.scores").rename(d / "draft_step_2_14_24.scroes")  # decides no selection: replayed
    code, _, err = run(capsys, "batch", d, "--no-progress")
    told = [line for line in err.splitlines() if "skipped" in line]
    assert code == 1 and told == [
        "specreplay: skipped draft_step_2_14_24.scroes: extension .scroes is not read; did you mean "
        "draft_step_2_14_24.scores, the scores companion?"
    ], err
