"""compare at a temperature the manifest records node_logprobs for, on the batch arrays
(analysis.compare.sampling_parts / sampling_subtrees.recorded_edges), equals the round path
(replay.testing.compare_at_t.compare_sampling with the node temperatures) value for value, on random
dumps of mixed rounds: some with node_logprobs, some without (their batch has no array), both layouts
(the parents layout never reads them), refused rounds (a NaN node log-prob, children summing above 1,
a bad top-K row), every config kind of tests/test_compare_sampling_batch.py (sub-configs, configs
reaching past the recording, whose extra nodes keep the top-K rows), at recorded and other T in one
call; and the table folded block by block (compare's table, report's curve) is the per-round one's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from analysis.compare.sampling_batch import compare_sampling_run
from analysis.compare.sampling_sums import folded_sums
from analysis.tables.runs import load_run
from replay.core.config import TreeConfig
from replay.engine.batch import RoundBatch, replay_batch
from replay.io.packed.pack import pack_batches
from replay.testing.compare_at_t import compare_sampling
from replay.testing.in_memory import round_at
from tests.reference_runs import load_reference
from tests.test_batch_tables import reference_results
from tests.test_compare_sampling_batch import VOCAB, configs_for, random_case

NODE_T = (0.4, 0.7)  # the manifest's node_logprob_temperatures
TEMPS = (0.0, 0.4, 0.7, 1.0, 1.3)  # recorded and other T, in one call


def with_node_logprobs(batch: RoundBatch, seed: int) -> RoundBatch:
    """``batch`` with random node_logprobs [rows, 2, R]: each row's value at T = 0.4 a share of up to
    0.35 (a wide node's children may sum above 1: that round is refused), half that at 0.7; a few
    rounds hold a NaN in a row the walk reads (refused); rows past a round's own are NaN (padding)."""
    v = batch.validate
    rng = np.random.default_rng(seed)
    rows, r = v.ids.shape[0], v.ids.shape[2]
    share = rng.uniform(0.01, 0.35, size=(rows, 1, r)) * np.array([1.0, 0.5])[None, :, None]
    own = np.log(share)
    bad = np.flatnonzero(rng.random(r) < 0.08)
    own[rng.integers(1, min(4, rows), size=bad.shape[0]) if rows > 1 else 0, 0, bad] = np.nan
    if v.rows_of is not None:
        own = np.where(np.arange(rows)[:, None, None] >= v.rows_of[None, None, :], np.nan, own)
    return replace(batch, validate=replace(v, node_logp=own))


def mixed(batches: list[RoundBatch], seed: int) -> list[RoundBatch]:
    """Each batch cut in two: the first part with node_logprobs, the second without (a run of mixed rounds)."""
    out = []
    for k, b in enumerate(batches):
        cut = len(b) * 2 // 3
        out.append(with_node_logprobs(b.take(np.arange(cut)), seed * 17 + k))
        if cut < len(b):
            out.append(b.take(np.arange(cut, len(b))))
    return out


def round_path(cfg, batches, configs, temps, vocab, threshold):
    rounds = sorted(((int(b.ordinals[i]), round_at(b, i)) for b in batches for i in range(len(b))), key=lambda x: x[0])
    results = reference_results(cfg, [r for _, r in rounds])
    return compare_sampling(results, cfg, configs, temps, vocab, threshold, None, NODE_T)


def _words(reason: str) -> str:
    """A refusal's words without its place: the round path names the file it read, the in-memory
    batch has none (tests/test_compare_sampling_batch._words)."""
    where, _, words = reason.partition(": ")
    return words if where.split(",")[0].endswith(("(scores)", "(node_logprobs)")) else reason


def assert_same(got, want) -> None:
    for g, w in ((got.per_round, want.per_round), (got.table, want.table)):
        assert list(g.columns) == list(w.columns)
        pd.testing.assert_frame_equal(g, w, check_exact=True)
    assert [(k, t, _words(r)) for k, t, r in want.skipped] == [(k, t, _words(r)) for k, t, r in got.skipped]
    assert got.needs_vocab == want.needs_vocab


def batch_path(cfg, batches, configs, temps, vocab, threshold):
    sums, fold = folded_sums(configs, temps, vocab, threshold or 0.0, NODE_T, per_round=True)
    for b in batches:
        fold(b, replay_batch(b, cfg, workers=1), cfg)
    return sums.comparison(cfg)


@pytest.mark.parametrize("seed", range(16))  # 1, 6, 9, 11 and 14 are in the all layout
def test_mixed_rounds_at_recorded_t_batch_equals_round_path(seed):
    cfg, batches = random_case(seed)
    batches = mixed(batches, seed)
    configs = configs_for(cfg, np.random.default_rng(seed + 99))
    for vocab in (None, VOCAB):
        threshold = 0.3 if seed % 4 == 0 and vocab else None
        want = round_path(cfg, batches, configs, TEMPS, vocab, threshold)
        assert_same(batch_path(cfg, batches, configs, TEMPS, vocab, threshold), want)


def test_the_cases_reach_exact_sub_configs_refusals_and_the_top_k_rows_at_recorded_t():
    """Not vacuous: at a recorded T some sub-config is exact from node_logprobs in rounds the top-K rows
    leave bounded, some rounds are refused for their node_logprobs, and some stay on the top-K rows."""
    exact_from_nodes = refused = top_k = 0
    for seed in (1, 6, 9, 11):  # the all layout (random_case draws it)
        cfg, batches = random_case(seed)
        batches = mixed(batches, seed)
        configs = configs_for(cfg, np.random.default_rng(seed + 99))[1:]  # not the recorded config
        done = round_path(cfg, batches, configs, [0.4], VOCAB, None)
        plain = compare_sampling(
            reference_results(cfg, [round_at(b, i) for b in batches for i in range(len(b))]),
            cfg,
            configs,
            [0.4],
            VOCAB,
        )
        pr, pp = done.per_round, plain.per_round
        both = pr.merge(pp, on=["config", "round"], suffixes=("", "_topk"))
        exact_from_nodes += int((both["exact"] & both["determined_topk"] & ~both["exact_topk"]).sum())
        top_k += int((both["determined"] & ~both["exact"]).sum())
        refused += sum("(node_logprobs)" in why for _, _, why in done.skipped)
    assert exact_from_nodes and refused and top_k


def test_a_packed_run_of_mixed_rounds_per_round_and_folded(tmp_path):
    """compare_sampling_run on a packed run (node_logprobs as v_node_logp, a manifest listing NODE_T)
    equals the round path, and its table folded block by block (per_round=False) is the same table."""
    cfg, batches = random_case(9)  # the all layout
    batches = mixed(batches, 9)
    run = tmp_path / "run"
    manifest = {"config": cfg.to_json(), "node_logprob_temperatures": list(NODE_T)}
    pack_batches(batches, run, block_rounds=16, manifest=manifest)
    fast = load_run(str(run), "r", progress=False)
    configs = configs_for(cfg, np.random.default_rng(5))
    whole = compare_sampling_run(fast, configs, TEMPS, VOCAB)
    ref = load_reference(str(run), "r", progress=False)  # the packed arrays' names in both
    assert_same(whole, compare_sampling(list(ref.results), ref.config, configs, TEMPS, VOCAB, None, None, NODE_T))
    assert any("(node_logprobs)" in why for _, _, why in whole.skipped)
    folded = compare_sampling_run(fast, configs, TEMPS, VOCAB, per_round=False)
    pd.testing.assert_frame_equal(folded.table, whole.table, check_exact=True)
    assert list(folded.skipped) == list(whole.skipped)


def test_a_config_wider_than_the_recording_keeps_the_top_k_rows_in_rounds_with_extra_nodes():
    """A config whose nodes reach past the recorded kept width holds extra nodes (no recorded value):
    those rounds take the top-K rows even at a recorded T, in both paths."""
    for seed in (1, 4, 6):
        cfg, batches = random_case(seed)
        batches = mixed(batches, seed)
        wider = TreeConfig.from_lists([[w + 1 for w in ws] for ws in cfg.top_k_spec], list(cfg.top_head))
        want = round_path(cfg, batches, [cfg, wider], [0.4], VOCAB, None)
        assert_same(batch_path(cfg, batches, [cfg, wider], [0.4], VOCAB, None), want)
        rows = want.per_round[want.per_round["config"] == wider.short()]
        assert (rows["determined"] & ~rows["exact"]).any()  # some round of it stays on the top-K rows
