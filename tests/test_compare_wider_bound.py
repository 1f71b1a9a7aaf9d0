"""`compare` with a config wider than the recorded draft rows: a candidate a recorded row does not
name is no more probable than the row's smallest named one (docs/analysis.md, "Offline comparison",
Unknowns), which decides rounds where that is enough and leaves the others undecidable.

The dumps are typed in by hand (text ids with `.scores` companions holding probabilities, the
`all` layout), and the counts below are worked out on paper.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from replay.cli import main
from replay.testing.synth import write_text_matrix


def _write_round(directory: Path, key: int, steps: list[tuple[list[list[int]], list[list[float]]]], top1: list[int]):
    """One round ``key``_``key``: draft step i's ids and probabilities, the target's top-1 per tree node."""
    for i, (ids, probs) in enumerate(steps):
        a = key - 1 if i == 0 else key  # step 0's file is named by the previous round's key (step0_offset 1)
        name = f"draft_step_{i}_{a}_{a}"
        write_text_matrix(directory / name, ids)
        (directory / f"{name}.scores").write_text("".join(" ".join(map(str, row)) + "\n" for row in probs))
    write_text_matrix(directory / f"validate_{key}_{key}", [[t] for t in top1])


def _dump(directory: Path, top_k_spec: list[list[int]], top_head: list[int], rounds: dict) -> Path:
    directory.mkdir(parents=True)
    config = {"gamma": len(top_head), "topKSpec": top_k_spec, "topHead": top_head, "treeType": 0}
    (directory / "config.json").write_text(json.dumps(config))
    for key, (steps, top1) in rounds.items():
        _write_round(directory, key, steps, top1)
    return directory


def _per_round(capsys, tmp_path: Path, dump: Path, config: str) -> dict[str, tuple[str, str, str]]:
    """``compare DUMP --configs CONFIG --per-round FILE``: round → (decided, lower, upper) of CONFIG."""
    out = tmp_path / "rounds.csv"
    code = main(["compare", str(dump), "--configs", config, "--per-round", str(out), "--no-progress"])
    _, err = capsys.readouterr()
    assert code == 0, err
    with out.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["config"] == config]
    return {r["round"]: (r["decided"], r["lower"], r["upper"]) for r in rows}


# Recorded [3]|[2,2]: step 0 names 3 root children (A1..A3), step 1 expands two of them by path
# probability (A1 and A2 here), 2 columns each. Tree order: R, A1, A2, A3, B11, B12, B21, B22.
#
# Round 10 (the new user's round 12_102): root row A1 0.432, A2 0.404, A3 0.143. Under [4]|[2,2]
# the unnamed A4 has p <= 0.143 (the row's smallest), so A2 (0.404) surely beats A4 and A3: step 1
# expands A1 and A2, as recorded. The target picks A2 (tok 2) at R and B21 (tok 21) at A2: accepted
# 2, decided. Taking A4 as merely "no more probable than the root" (p <= 1) left A2 MAYBE.
# Round 20: the target's top-1 at R (tok 9) is none of A1..A3, so the walk needs A4's token, which
# the dump does not hold: undecidable whatever the bound.
ROOT_ROUNDS = {
    10: (
        [([[1, 2, 3]], [[0.432, 0.404, 0.143]]), ([[11, 12], [21, 22]], [[0.6, 0.3], [0.7, 0.2]])],
        [2, 50, 21, 50, 50, 50, 99, 50],
    ),
    20: (
        [([[1, 2, 3]], [[0.5, 0.3, 0.2]]), ([[11, 12], [21, 22]], [[0.6, 0.3], [0.7, 0.2]])],
        [9, 50, 50, 50, 50, 50, 50, 50],
    ),
}


@pytest.mark.parametrize("config", ["[4]|[2,2]", "[9]|[2,2]"])
def test_a_wider_root_is_decided_where_the_rows_smallest_score_suffices(capsys, tmp_path, config):
    dump = _dump(tmp_path / "root", [[3], [2, 2]], [1, 2], ROOT_ROUNDS)
    assert _per_round(capsys, tmp_path, dump, "[3]|[2,2]") == {"10_10": ("True", "2", "2"), "20_20": ("True", "0", "0")}
    assert _per_round(capsys, tmp_path, dump, config) == {"10_10": ("True", "2", "2"), "20_20": ("False", "0", "2")}


# Recorded [2]|[2,1]|[1,1,1] (topHead [1, 2, 3]): root row A1 0.6, A2 0.3; step 1 rows A1: B11,
# B12 (2 columns), A2: B21 (width 1; a second column is recorded); step 2 expands all three level-2
# nodes, in the order of their path probabilities (step 2's rows, and the order of their children
# in the tree: R, A1, A2, B11, B12, B21, then the C nodes). The config [2]|[4,1]|[1,1,1] is
# wider at A1: B13 and B14 are unnamed, each with path probability <= P(A1) * (A1's smallest q),
# and step 2 picks 3 of B11, B12, B13, B14, B21. The target walks R -> A2 -> B21 -> C211.
#
# Round 10: A1 row 0.5, 0.25: B11 0.30, B12 0.15, B13, B14 <= 0.6 * 0.25 = 0.15 < B21 = 0.3 * 0.6
# = 0.18 (the recording expanded B11, B21, B12). Only B11 can rank above B21, so B21 is expanded and the walk accepts 3 tokens: decided.
# (Bounded by A1's 0.6 alone, B13 and B14 could both beat B21: MAYBE, undecidable.)
# Round 20: A1 row 0.4, 0.3: B11 0.24, B12 0.18, B13, B14 <= 0.18, B21 = 0.3 * 0.55 = 0.165. B11
# and B12 surely rank above B21 and B13 may too (0.174, say, fits every score of the row, the tail
# mass 1 - 0.7 included): whether B21 is expanded is unknown, undecidable.
DEEP_ROUNDS = {
    10: (
        [
            ([[1, 2]], [[0.6, 0.3]]),
            ([[11, 12], [21, 22]], [[0.5, 0.25], [0.6, 0.2]]),
            ([[111], [211], [121]], [[0.9], [0.9], [0.9]]),  # expanded B11, B21, B12
        ],
        [2, 50, 21, 50, 50, 211, 50, 99, 50],
    ),
    20: (
        [
            ([[1, 2]], [[0.6, 0.3]]),
            ([[11, 12], [21, 22]], [[0.4, 0.3], [0.55, 0.2]]),
            ([[111], [121], [211]], [[0.9], [0.9], [0.9]]),
        ],
        [2, 50, 21, 50, 50, 211, 50, 50, 99],
    ),
}


def test_a_config_wider_below_the_root_is_decided_only_where_the_bound_suffices(capsys, tmp_path):
    dump = _dump(tmp_path / "deep", [[2], [2, 1], [1, 1, 1]], [1, 2, 3], DEEP_ROUNDS)
    recorded = _per_round(capsys, tmp_path, dump, "[2]|[2,1]|[1,1,1]")
    assert recorded == {"10_10": ("True", "3", "3"), "20_20": ("True", "3", "3")}
    wider = _per_round(capsys, tmp_path, dump, "[2]|[4,1]|[1,1,1]")
    assert wider == {"10_10": ("True", "3", "3"), "20_20": ("False", "2", "3")}
