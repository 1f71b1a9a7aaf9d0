"""What a new user met on a fresh clone, with the README alone and dumps typed in by hand.

Each test builds its dump in the form docs/dump-format.md describes, runs ``specreplay ...`` as a
user types it and holds the rule the finding broke, across the commands it applies to.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.test_user_mistakes import run, write_matrix

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
