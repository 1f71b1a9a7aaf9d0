"""Rejected rounds are worded from the batch kernel's own record, never by replaying them again.

Each dump holds one round of every kind of fault the kernel rejects. The reference replay
(replay.testing.replayer.replay_round) words them first; then it is made to fail if called, and
``batch``, ``stats`` and ``replay --json`` must still list every rejected round in exactly its words.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import replay.engine.runs
import replay.testing.replayer
from replay.cli import main
from replay.engine.options import ReplayOptions
from replay.io.dumpwrite import StepRecord, write_round
from replay.testing.replayer import replay_directory

STATIC = {"gamma": 2, "topKSpec": [[2], [1, 1]], "topHead": [1, 2]}  # 2 + 2 nodes; rows: parents 3, all 5
DYNAMIC = {**STATIC, "treeType": 1}
GOOD = {
    "steps": [[[5, 6]], [[7], [8]]],
    "parents": [[0], [1, 2]],
    "validate": [[5], [7], [8], [9], [9]],  # the all layout: root + 4 nodes
}


def _write(d: Path, k: int, steps, parents, validate, scores: bool | list[bool]) -> None:
    """Round k of ``d`` as .npz files. Rounds whose files carry other arrays (no parents, scores)
    form batches of their own. scores, parents: for every draft step, or per step (None: none)."""
    scored = scores if isinstance(scores, list) else [scores] * len(steps)
    recs = [
        StepRecord(
            np.asarray(s, dtype=np.int64),
            np.zeros(np.shape(s), dtype=np.float32) if has else None,
            None if p is None else np.asarray(p, dtype=np.int64),
        )
        for s, p, has in zip(steps, parents or [None] * len(steps), scored)
    ]
    write_round(d, (100 + 8 * k, 116 + 8 * k), recs, StepRecord(np.asarray(validate, dtype=np.int64)))


def _dump(d: Path, config: dict, rounds: list[dict]) -> Path:
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    for k, changes in enumerate(rounds):
        r = {**GOOD, **changes}
        _write(d, k, r["steps"], r["parents"], r["validate"], r.get("scores", False))
    return d


# One round per fault (the first is replayed): what each breaks, relative to GOOD.
STATIC_ROUNDS = [
    {},
    {"steps": [[[5, 6]], [[7], [-1]]]},  # padding inside a kept column
    {"steps": [[[5, -7]], [[7], [8]]]},  # a negative token id
    {"parents": [[3], [1, 2]]},  # step 0's parent is not the root
    {"parents": [[0], [1, 1]]},  # a node expanded twice
    {"validate": [[5], [7], [-1], [9], [9]]},  # a used validate row without a column-0 token
    {"validate": [[5], [7], [8], [9]]},  # rows of neither layout
    {"validate": [[5], [7], [8], [9], [9], [4]]},  # rows beyond the all layout
    {"steps": [[[5, 6]], [[7]]], "parents": [[0], [1]]},  # fewer rows than topHead (a padded batch)
    {"steps": [[[5]], [[7], [8]]], "scores": True},  # fewer columns than topKSpec: no tree (a batch of its own)
    {"steps": [[[5, 6]]], "parents": [[0]]},  # one draft step, the all layout of two: a step was lost
    {"steps": [[[5, 6]], [[7], [8]], [[9]]], "parents": [[0], [1, 2], [3]]},  # more steps than gamma
    # a batch of its own whose step 1 is too small for the tree: step 0's negative id is named first
    {"steps": [[[5, -7]], [[7]]], "parents": None},
    # a negative id in a column no greedy walk reads: the sampling rule, stats and compare read them
    {"steps": [[[5, 6, -7]], [[7], [8]]]},  # draft step 0, past the kept width
    {"steps": [[[5, 6]], [[7, -1], [8, -7]]]},  # step 1 row 1 past its kept column (row 0: padding there)
    {"validate": [[5, 1], [7, 1], [8, -7], [9, 1], [9, 1]]},  # validate row 2, column 1
    {"validate": [[5, 1], [7, -1], [8, 2], [9, 1], [9, 1]]},  # padding past column 0: replayed
    # a lost companion: step 1's expanded nodes would be the fallback's guess
    {"parents": [[0], None]},  # step 1's .parents
    {"parents": [[0], None], "scores": True},  # ... whose path probabilities would choose, not the dump
    {"parents": None, "scores": [False, True]},  # step 0's .scores (level 1's path probabilities)
    {"parents": None, "scores": [True, False]},  # the last step's .scores decide no selection: replayed
]
PARENTS_ROUNDS = [
    {"validate": [[5], [7], [8]]},
    {"validate": [[5], [7]]},  # fewer rows than the stated layout
    {"validate": [[5], [7], [8], [9], [9]]},  # the all layout's rows, stated parents
    {"validate": [[5], [7], [8], [9]]},  # one row not explained
]
DYNAMIC_ROUNDS = [
    {},
    {"steps": [[[5, 6]], [[-1], [-1]]]},  # step 1 has no valid row
    {"steps": [[[5, -7]], [[-1], [-1]]]},  # ... and step 0 a negative id: the earlier fault is named
    {"steps": [[[5, 6]], [[7, -7], [8, 1]]]},  # a negative id past a row's kept width
]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, tuple[Path, list[str]]]:
    """{name: (dump, its options)}."""
    base = tmp_path_factory.mktemp("rejections")
    return {
        "static": (_dump(base / "static", STATIC, STATIC_ROUNDS), []),
        "parents": (_dump(base / "parents", STATIC, PARENTS_ROUNDS), ["--layout", "parents"]),
        "dynamic": (_dump(base / "dynamic", DYNAMIC, DYNAMIC_ROUNDS), []),
    }


def _reference_reasons(path: Path, options: list[str]) -> list[str]:
    """The reference replay's listing of the rounds it skips: 'round A_B: file: why'."""
    layout = options[1] if options else None
    done = replay_directory(path, ReplayOptions(layout=layout))
    return [f"{s.what}: {s.reason}" for s in done.skipped]


@pytest.mark.parametrize("name", ["static", "parents", "dynamic"])
def test_rejections_are_worded_without_the_reference(dumps, name, monkeypatch, capsys):
    path, options = dumps[name]
    expected = _reference_reasons(path, options)
    assert len(expected) == {"static": 18, "parents": 3, "dynamic": 3}[name]

    def no_second_replay(*args, **kwargs):
        raise AssertionError("a rejected round was replayed again to word its message")

    monkeypatch.setattr(replay.testing.replayer, "replay_round", no_second_replay)
    monkeypatch.setattr(replay.engine.runs, "replay_round", no_second_replay, raising=False)  # none: as it should be
    for argv in (
        ["batch", str(path), *options, "--json"],
        ["stats", str(path), *options],
        ["replay", str(path), *options, "--json"],
    ):
        capsys.readouterr()
        assert main(argv) == 1, argv  # 1: replayed what it could, listed what it skipped
        out, err = capsys.readouterr()
        for line in expected:
            assert line in out + err, (argv, line, out, err)
