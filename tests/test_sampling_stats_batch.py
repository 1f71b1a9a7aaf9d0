"""stats --temperature T on the batch arrays (analysis.tables.sampling_batch) equals the round path
(analysis.tables.sampling.run_sampling over the RoundResults, the reference): every per-round array,
the three tables (numbers to 1e-9), the skipped list and its words, exactness and the node_logprobs
flags, on random packed runs (varied shapes, early stops, both layouts, NaN rows) at T = 0, 0.4, 0.7,
1, 1.3 with and without the vocabulary size; and on dumps with node_logprobs at a recorded T (exact
rounds, and rounds that fall back to the top-K rows). Through the CLI, a batch-loaded run is never
replayed round by round."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.tables.runs import load_run
from analysis.tables.sampling import run_sampling, sampling_tables
from replay.cli import main
from replay.core.config_grammar import parse_config_text
from replay.io.packed.pack import pack_batches
from replay.testing.round_sampling import node_logprob_gaps
from replay.testing.synth import add_node_logprobs, write_synthetic_run
from tests.reference_runs import load_reference, reference_run_sampling, reference_shapes_at_temperature
from tests.test_compare_sampling_batch import JSON_TOL, VOCAB, _words, no_round_by_round, random_case

TEMPERATURES = (0.0, 0.4, 0.7, 1.0, 1.3)
ARRAYS = ("expected_lo", "expected_hi", "ge_lo", "ge_hi", "exact", "from_node_logprobs")


def assert_same(got, want) -> None:
    assert (got.label, got.temperature, got.needs_vocab) == (want.label, want.temperature, want.needs_vocab)
    assert got.skipped == want.skipped  # the same rounds, in run order, in the same words
    for name in ARRAYS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-9, err_msg=name)
        else:
            assert (a == b).all(), name
    assert list(got.rounds) == list(want.rounds)  # the round columns the summary formulas read
    for name, a in got.rounds.items():
        b = want.rounds[name]
        assert a.shape == b.shape and (a == b).all(), name
        assert a.dtype == b.dtype or not a.shape[0], name  # no rounds: no cell to type
    tg, tw = sampling_tables([got]), sampling_tables([want])
    for name in tw:
        pd.testing.assert_frame_equal(tg[name], tw[name], check_exact=False, rtol=0, atol=1e-9)


def packed_case(tmp_path, seed: int):
    cfg, batches = random_case(seed)
    layout = ("all", "parents")[int(np.random.default_rng(seed).integers(2))]  # random_case's draw
    run = tmp_path / f"run{seed}"
    pack_batches(batches, run, block_rounds=32, manifest={"config": cfg.to_json(), "layout": layout})
    return run


@pytest.mark.parametrize("seed", range(8))
def test_random_packed_runs_batch_equals_round_path(tmp_path, seed):
    run = packed_case(tmp_path, seed)
    fast, ref = load_run(str(run), "r", progress=False), load_reference(str(run), "r", progress=False)
    for vocab in (None, VOCAB):
        for t in TEMPERATURES:
            got = run_sampling(fast, t, vocab, None)
            want = reference_run_sampling(ref, t, vocab, None)
            assert_same(got, want)
            assert got.gaps == ([], [])  # no recorded T: nothing to count


def test_the_random_cases_hold_refusals_bounds_and_needs_vocab(tmp_path):
    """Not vacuous: across the cases, refused rounds (NaN rows), bounded and exact rounds, several
    tree depths, and T > 1 without a vocabulary size."""
    skipped, bounded, exact, depths, needs = 0, 0, 0, set(), False
    for seed in range(8):
        ref = load_reference(str(packed_case(tmp_path, seed)), "r", progress=False)
        for t in (0.0, 0.7, 1.3):  # exact at T = 0
            s = reference_run_sampling(ref, t, None, None)
            skipped += len(s.skipped)
            bounded += int((s.expected_lo < s.expected_hi).sum())
            exact += int(s.exact.sum())
            depths |= set(s.num_steps.tolist())
            needs |= s.needs_vocab
    assert skipped and bounded and exact and needs and len(depths) >= 3


@pytest.fixture(scope="module")
def node_dumps(tmp_path_factory):
    """Dumps with node_logprobs at 0.7 and 1 (all layout, early stops): every round, and every third without."""
    root = tmp_path_factory.mktemp("stats_nodes")
    out = {}
    for name, skip in (("every", 0), ("mixed", 3)):
        d = root / name
        write_synthetic_run(d, parse_config_text("[4]|[2,2]|[1,1]"), 40, seed=4, early_stop_rate=0.3)
        add_node_logprobs(d, (0.7, 1.0), seed=5, skip_every=skip)
        out[name] = d
    return out


@pytest.mark.parametrize("which", ["every", "mixed"])
def test_recorded_temperatures_batch_equals_round_path(node_dumps, which):
    d = str(node_dumps[which])
    fast, ref = load_run(d, "r", progress=False), load_reference(d, "r", progress=False)
    nodes = ref.replay.manifest.node_logprob_temperatures
    for t in (0.4, 0.7, 1.0):
        got, want = run_sampling(fast, t, None, nodes), reference_run_sampling(ref, t, None, nodes)
        assert_same(got, want)
        if t in nodes:
            assert got.from_node_logprobs.any()
            refused = {s.what for s in want.skipped}
            assert got.gaps == node_logprob_gaps([r for r in ref.results if f"round {r.name}" not in refused])
    if which == "mixed":
        assert not got.from_node_logprobs.all() and got.gaps[1]  # some rounds fall back: counted


def test_stats_cli_at_t_reads_the_batch_arrays(capsys, tmp_path, node_dumps, monkeypatch):
    """stats --temperature (text and --json) on a packed run with NaN rows and on a dump with node_logprobs
    prints what the round path gives, without replaying the run round by round."""
    want = {}
    cases = [
        (str(packed_case(tmp_path, 3)), "0.7"),
        (str(node_dumps["mixed"]), "0.7"),
        (str(node_dumps["mixed"]), "1.3"),
    ]
    for path, t in cases:
        ref = load_reference(path, "r", progress=False)
        want[path, t] = reference_run_sampling(ref, float(t), None, ref.replay.manifest.node_logprob_temperatures)
    no_round_by_round(monkeypatch)
    for path, t in cases:
        code = main(["stats", path, "--temperature", t, "--json", "--no-progress"])
        out, err = capsys.readouterr()
        body, w = json.loads(out), want[path, t]
        assert code == (1 if w.skipped else 0), err
        assert [s["reason"] for s in body["skipped"]] == [s.reason for s in w.skipped]
        assert body["summary"][0]["rounds"] == w.expected_lo.shape[0]
        assert body["summary"][0]["mean_accepted_length_lo"] == pytest.approx(float(w.expected_lo.mean()), abs=JSON_TOL)
        code = main(["stats", path, "--temperature", t, "--no-progress"])
        out, err = capsys.readouterr()
        assert f"{w.expected_lo.shape[0]} of" in out and code == (1 if w.skipped else 0)


@pytest.mark.parametrize("seed", [0, 3, 5, 6])
def test_recommend_at_t_two_passes_equal_the_round_path(tmp_path, seed):
    """recommend --temperature's search on a batch-loaded run (two passes: ranking numbers, then the
    shown shapes) gives the round path's ranked rows, ranks, recorded row and skipped list."""
    from analysis.shapes.sampling_recommend import shapes_at_temperature

    run = packed_case(tmp_path, seed)
    fast, ref = load_run(str(run), "r", progress=False), load_reference(str(run), "r", progress=False)
    for t in (0.0, 0.7, 1.3):
        for vocab, budget, top in ((None, 8, 5), (VOCAB, 5, 2)):
            got = shapes_at_temperature(fast, budget, None, t, vocab, top)
            want = reference_shapes_at_temperature(ref, budget, None, t, vocab, top)
            assert got.candidates == want.candidates
            # compare's batch path on a packed run words a bad row without its file (as compare --temperature)
            assert [(k, x, _words(r)) for k, x, r in got.comparison.skipped] == [
                (k, x, _words(r)) for k, x, r in want.comparison.skipped
            ]
            for g, w in ((got.ranked, want.ranked), (got.recorded, want.recorded)):
                assert list(g.columns) == list(w.columns)
                pd.testing.assert_frame_equal(
                    g.reset_index(drop=True), w.reset_index(drop=True), check_exact=False, rtol=0, atol=1e-9
                )


@pytest.mark.parametrize("seed", [1, 3, 5, 7])
def test_recommend_ranking_numbers_equal_a_per_round_sum(tmp_path, seed):
    """The ranking pass folds each chunk's E[L] lower bounds into one running sum per candidate as
    they are made: each number equals, bit for bit, the plain computation from the per-round rows of
    compare's batch path (math.fsum of the determined rounds' lower bounds / the used rounds, + 1),
    on packed runs of several batches and varied shapes (several parts, folded in any order)."""
    import math
    from collections import Counter

    from analysis.compare.sampling_batch import compare_sampling_run
    from analysis.shapes.sampling_recommend import _rank_numbers, candidate_shapes
    from replay.engine.runs import iter_run_chunks, open_run

    run = packed_case(tmp_path, seed)
    fast = load_run(str(run), "r", progress=False)
    assert sum(len(done) for _, done in iter_run_chunks(open_run(str(run), fast.options), None)) > 1
    rec = fast.config
    configs = [
        rec,
        *[c for c in candidate_shapes(rec, 8, rec.gamma) if (c.short(), c.top_head) != (rec.short(), rec.top_head)],
    ]
    named = Counter(c.short() for c in configs)  # the per-round frame names a config by its short form
    for t in (0.0, 0.7, 1.3):
        for vocab in (None, VOCAB):
            got = _rank_numbers(fast, configs, t, vocab, None)
            done = compare_sampling_run(fast, configs, [t], vocab)
            rows = done.per_round
            checked = 0
            for c, cfg in enumerate(configs):
                n = int(done.table["rounds"].iloc[c])
                assert got[c] == done.table["all_rounds_block_efficiency_lo"].iloc[c] or (n == 0 and math.isnan(got[c]))
                if named[cfg.short()] > 1:
                    continue
                mine = rows[(rows["config"] == cfg.short()) & rows["determined"].astype(bool)]
                want = math.fsum(mine["expected_accepted_length_lo"]) / n + 1.0 if n else math.nan
                assert got[c] == want or (math.isnan(want) and math.isnan(got[c])), (t, vocab, cfg.short())
                checked += 1
            assert checked > 1


def test_recommend_at_t_builds_no_round_or_node_table(capsys, tmp_path, monkeypatch):
    """recommend --temperature reads the batch arrays again: its load keeps the round keys only
    (TABLES_KEYS, as stats --temperature), not the round and node tables (0.8 GB at 10^5 rounds)."""
    import analysis.tables.runs as runs

    asked, load = [], runs.load_run

    def spy(path, label, opts=None, progress=None, tables=runs.TABLES_FULL, *rest):
        asked.append(tables)
        return load(path, label, opts, progress, tables, *rest)

    monkeypatch.setattr(runs, "load_run", spy)
    code = main(["recommend", str(packed_case(tmp_path, 3)), "--temperature", "0.7", "--budget", "5", "--no-progress"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "best first" in out and asked == [runs.TABLES_KEYS]
