"""Early stops in the shape model (docs/shape-search.md, "Early stops"): a node counts only in the
rounds whose draft runs its step, so each depth's factor is go_on[d] · p[d, q, r]. Checked by hand
on step tables, and through ``specreplay recommend`` on dumps: consistent ones agree with the exact
replay, and one whose stops depend on the accepted branch (against the model) does not."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from analysis.shapes.counts import ShapeStats, step_tables
from analysis.shapes.model import continuation, model_from_stats
from analysis.shapes.paths import engine_paths, expected_accepted
from replay.cli import main
from replay.core.config import TreeConfig
from replay.testing.replayer import replay_directory
from replay.testing.synth import write_synthetic_run

# draft probabilities equal to the hit rows: the engine ranks nodes as the model does (assumption 3)
HIT = np.array(
    [
        [0.62, 0.2, 0.08, 0.04, 0.02, 0.01],
        [0.72, 0.12, 0.05, 0.03, 0.02, 0.01],
        [0.5, 0.28, 0.1, 0.04, 0.02, 0.01],
    ]
)
CFG = TreeConfig.from_lists([[4], [2, 2], [1, 1]], [1, 2, 2])


def test_step_tables_and_continuation_by_hand():
    # (steps, accepted) of 8 rounds of a gamma-3 recording, one group
    rounds = [(3, 3), (3, 1), (3, 0), (2, 2), (2, 1), (1, 1), (1, 0), (2, 0)]
    steps, acc = (np.array(x) for x in zip(*rounds))
    went, stopped = step_tables(np.zeros(8, np.int64), steps, acc, 3, 1, 3)
    # after step 1, walk alive (accepted >= 1): (3,3) (3,1) (2,2) (2,1) went on, (1,1) stopped early
    # after step 2, walk alive (accepted >= 2): (3,3) went on, (2,2) stopped early
    assert went.tolist() == [[4, 1, 0]] and stopped.tolist() == [[1, 1, 0]]
    assert continuation(went[0], stopped[0], 4).tolist() == [1.0, 4 / 5, 1 / 2, 1 / 2]  # row 3 reuses row 2
    # without the recorded gamma every round is complete: nothing stopped early, go_on = 1
    assert step_tables(np.zeros(8, np.int64), steps, acc, None, 1, 3)[1].sum() == 0


def test_chain_value_by_hand():
    """p by hand (one group, parent rank 0 only) and go_on = [1, 0.8, 0.5]: a chain [1]|[1]|[1] is
    worth p0 + 0.8 · p0 · p1 + 0.8 · 0.5 · p0 · p1 · p2 accepted tokens."""
    n = np.zeros((1, 3, 2), np.int64)
    k = np.zeros((1, 3, 2, 2), np.int64)
    n[0, :, 0] = [100, 50, 40]
    k[0, 0, 0], k[0, 1, 0], k[0, 2, 0] = [60, 10], [30, 5], [10, 4]
    went = np.array([[40, 20, 0]])
    stopped = np.array([[10, 20, 0]])
    z = np.zeros((3, 2, 2))
    stats = ShapeStats(n, k, np.array([100]), z, z.astype(np.int64), 100, 3, went, stopped)
    model = model_from_stats(stats, min_count=1)
    assert model.go_on.tolist() == [1.0, 0.8, 0.5]
    chain = TreeConfig.from_lists([[1], [1], [1]])
    p0, p1, p2 = 0.6, 0.6, 0.25
    assert expected_accepted(engine_paths(chain, model), model) == pytest.approx(
        p0 + 0.8 * p0 * p1 + 0.8 * 0.5 * p0 * p1 * p2
    )
    assert model.acceptance_probability((0, 0)) == pytest.approx(p0 * p1)  # given the node is drafted
    assert model.path_probability((0, 0)) == pytest.approx(0.8 * p0 * p1)


@pytest.fixture(scope="module")
def no_fsync():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield


@pytest.fixture(scope="module")
def consistent(tmp_path_factory, no_fsync) -> Path:
    out = tmp_path_factory.mktemp("early") / "run"
    write_synthetic_run(out, CFG, 3000, seed=5, hit=HIT, draft_probs=HIT, early_stop_rate=0.3, cols=6)
    return out


def recommend_json(path: Path, capsys) -> dict:
    code = main(["recommend", str(path), "--budget", "8", "--bootstrap", "50", "--json", "--no-progress"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def judged(obj: dict) -> list[tuple[str, bool]]:
    return [(c["label"], c["agree"]) for c in obj["comparisons"] if c["agree"] is not None]


def test_consistent_dump_with_early_stops_agrees(consistent, capsys):
    obj = recommend_json(consistent, capsys)
    rows = judged(obj)
    assert len(rows) >= 4, rows  # the recorded config, contained shapes and the recorded trees
    assert all(ok for _, ok in rows), rows
    assert 0.7 < obj["model"]["go_on"][1] < 0.95  # the run stops early: the model knows
    assert main(["recommend", str(consistent), "--budget", "8", "--bootstrap", "50", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "early stops:" in captured.out and "disagree" not in captured.err
    (line,) = [ln for ln in captured.out.splitlines() if "early stops:" in ln]
    # steps counted from 0 as the files are (draft_step_0 always runs): gamma 3 can stop before 1 and 2
    assert re.findall(r"step (\d+) \d+/\d+ = ", line) == ["1", "2"], line


def test_stops_that_depend_on_the_branch_disagree(consistent, tmp_path, capsys):
    """Against the model: every round whose walk did not accept the root's rank-0 child stops after
    step 0 (its later steps and their target rows removed). The continuation then depends on which
    depth-1 node the walk reached, so shapes through A1 are undervalued: agree = NO."""
    out = tmp_path / "branchy"
    out.mkdir()
    for f in consistent.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    level1 = 1 + CFG.top_k_spec[0][0]  # validate rows (all layout) of a one-step tree
    for res in replay_directory(out).results:
        if res.acceptance.accepted_length and res.tree.ranks[res.acceptance.accepted_nodes[0]] == 0:
            continue
        for step in range(1, res.tree.num_steps):
            (out / f"draft_step_{step}_{res.name}.npz").unlink()
        path = out / f"validate_{res.name}.npz"
        with np.load(path) as z:
            arrays = {k: z[k][:level1] for k in z}
        np.savez(path, **arrays)
    obj = recommend_json(out, capsys)
    rows = judged(obj)
    assert any(not ok for _, ok in rows), rows
