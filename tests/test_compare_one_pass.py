"""compare and recommend at a million rounds: compare replays its configs on each batch as
load_run reads it (one pass over the run), and the faster forms of the vectorised replay's helpers give
what the plain numpy calls they replace give, bit for bit (the per-round oracles are in
tests/test_compare_batch.py, tests/test_subtree_batch.py and tests/test_shape_stats.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import analysis.compare.batch as compare_batch
from analysis.compare.batch import compare_along, per_batch_parts, run_parts
from analysis.compare.subtree import IN, MAYBE, OUT
from analysis.compare.subtree_select import FIRST_TRUE_MAX, first_hit
from analysis.shapes.counts import draft_column_totals
from analysis.tables.runs import TABLES_KEYS, load_run
from replay.cli import main
from replay.core.config import TreeConfig
from replay.core.selection import first_true
from replay.engine.runs import Run
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.in_memory import replay_batches
from replay.testing.stats_reference import draft_totals
from tests.packed_runs import packed_synth_run
from tests.test_batch_tables import ARTICLE

CONFIGS = ["[6]|[2,2]|[1,1]", "[4]|[2,2]|[1,1]", "[8]|[2,2]"]


def counting_replays(monkeypatch) -> list:
    """Count the run's whole readings (Run.chunks: load_run's; compare's own second pass)."""
    calls = []
    real = Run.chunks

    def counted(self, *args, **kwargs):
        calls.append(self.path)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Run, "chunks", counted)
    return calls


def test_compare_reads_a_packed_run_once(tmp_path, monkeypatch, capsys):
    """compare --configs on a run of several blocks: one replay of the run, and the same JSON as when
    the configs are replayed in a second pass (the path before; itself checked against the reference)."""
    run = packed_synth_run(tmp_path / "run", ARTICLE, 400, seed=5, early_stop_rate=0.1, block_rounds=64)
    argv = ["compare", str(run), "--configs", *CONFIGS, "--gamma-threshold", "0.3", "--json", "--no-progress"]
    calls = counting_replays(monkeypatch)
    assert main(argv) == 0
    one_pass = capsys.readouterr().out
    assert len(calls) == 1
    monkeypatch.setattr(compare_batch, "compare_along", lambda *a, **k: None)  # no read-along: two passes
    calls.clear()
    assert main(argv) == 0
    two_passes = capsys.readouterr().out
    assert len(calls) == 2
    assert json.loads(one_pass) == json.loads(two_passes) and one_pass == two_passes


def test_read_along_is_used_only_for_its_configs(tmp_path):
    """run_parts takes load_run's parts only when they are of the configs and threshold asked
    (gamma strategies ask for other configs on the same run): else it replays them itself."""
    path = packed_synth_run(tmp_path / "run", ARTICLE, 300, seed=2, early_stop_rate=0.2, block_rounds=50)
    asked = [TreeConfig.from_lists([[4], [2, 2], [1, 1]], [1, 2, 2]), ARTICLE]
    other = [TreeConfig.from_lists([[2], [1, 1]], [1, 2])]
    run = load_run(str(path), "run", progress=False, tables=TABLES_KEYS, per_batch=compare_along(lambda t: asked, 0.3))
    plain = load_run(str(path), "run", progress=False, tables=TABLES_KEYS)
    assert run.read_along is not None and plain.read_along is None
    for configs, threshold in ((asked, 0.3), (asked, 0.0), (other, 0.3)):
        want = per_batch_parts(plain, lambda b, r, t: compare_batch.compare_parts(b, r, t, configs, threshold), None)
        got = run_parts(run, configs, threshold)
        assert len(got) == len(want)
        # read along in reading order, read again in run order: the joins sort by ordinal
        got, want = (sorted(parts, key=lambda p: p.ordinals.tolist()) for parts in (got, want))
        for g, w in zip(got, want):
            assert np.array_equal(g.ordinals, w.ordinals) and np.array_equal(g.keys, w.keys)
            for go, wo in zip(g.outcomes, w.outcomes):
                for f in go.__dataclass_fields__:
                    assert np.array_equal(getattr(go, f), getattr(wo, f)), f
    assert all(a.configs == tuple(asked) for a in run.read_along)


def test_take_maps_selection_notes_by_position():
    """BatchResult.take: each note follows its round to its new position (the last one where the index
    repeats a round), notes of rounds not taken are dropped."""
    res = replay_batches([synth_batch(SynthSpec(ARTICLE, 40, seed=1))], ARTICLE, workers=1)
    res = replace(res, selection_notes={3: ("a",), 7: ("b",), 39: ("c",), 0: ("d",)})
    for index in (np.arange(40)[::-1], np.array([7, 1, 3, 7, 5]), np.array([], dtype=np.int64), np.array([39, 0, 39])):
        pos = {old: new for new, old in enumerate(index.tolist())}  # the dict the array replaced: last wins
        want = {pos[k]: v for k, v in res.selection_notes.items() if k in pos}
        got = res.take(index)
        assert got.selection_notes == want and list(got.selection_notes) == list(want)
        assert np.array_equal(got.keys, res.keys[:, index])


@pytest.mark.parametrize("seed", range(6))
def test_draft_totals_sum_in_node_order(seed):
    """The totals are the finite values of each (d, q, r) summed one by one in node order (what one
    bincount over every (node, r) does), to the bit; a loop is the oracle."""
    rng = np.random.default_rng(seed)
    e, depths, cols = int(rng.integers(0, 3000)), int(rng.integers(1, 4)), int(rng.integers(1, 7))
    c = int(rng.integers(1, cols + 3))
    depth, own = rng.integers(0, depths + 1, e), rng.integers(0, cols + 1, e)
    lp = rng.standard_normal((e, c)) * 10.0 ** rng.integers(-3, 6, (e, c))
    for value, share in ((-np.inf, 0.1), (np.nan, 0.05), (-0.0, 0.05)):
        lp[rng.random((e, c)) < share] = value
    lp = lp.astype(np.float32) if seed % 2 else lp
    total, count = np.zeros((depths, cols, cols)), np.zeros((depths, cols, cols), dtype=np.int64)
    for k in range(e):
        for r in range(min(c, cols)):
            v = float(lp[k, r])
            if depth[k] < depths and own[k] < cols and np.isfinite(v):
                total[depth[k], own[k], r] += v
                count[depth[k], own[k], r] += 1
    for got in (draft_totals(depth, own, lp, depths, cols), draft_column_totals(depth, own, lp.T, depths, cols)):
        assert got[0].tobytes() == total.tobytes() and got[1].dtype == np.int64
        assert np.array_equal(got[1], count)


@pytest.mark.parametrize("levels", [1, 2, 5, 9, FIRST_TRUE_MAX + 3])
def test_short_axis_helpers_equal_numpy(levels):
    """open_nodes_loop, first_hit and first_true are argsort(stable), argmax and argmax (K when none) along axis 0."""
    from replay.core.level_loops import open_nodes_loop

    rng = np.random.default_rng(levels)
    for share in (0.0, 0.3, 0.8, 1.0):
        valid = rng.random((levels, 500)) < max(share, 0.5)
        status = rng.choice(
            np.array([OUT, IN, MAYBE], dtype=np.int8), (levels, 500), p=[1 - share, share / 2, share / 2]
        )
        alive = valid & (status != OUT)
        kpos, order = np.empty(alive.shape, dtype=np.int64), np.empty(alive.shape, dtype=np.int64)
        k = open_nodes_loop(valid, status, OUT, kpos, order)
        assert k == max(1, int(alive.sum(axis=0).max()))
        assert np.array_equal(order, np.argsort(~alive, axis=0, kind="stable"))
        assert np.array_equal(kpos, np.where(alive, np.cumsum(alive, axis=0) - 1, -1))
        assert np.array_equal(first_hit(alive), alive.argmax(axis=0))
        want_first = np.where(alive.any(axis=0), alive.argmax(axis=0), levels)
        assert np.array_equal(first_true(alive), want_first)
