"""compare's outcomes from the batch arrays (analysis.compare.batch) equal the round-by-round
reference (replay.testing.compare_reference.compare_configs over replay.testing.subtree_walk): the same summary table and the
same per-round frame (decided, bounds, stop, steps, rule, reason), column for column, on the bundled
samples, a packed run and random dumps; for the recorded config, contained ones and configs
reaching past the recording (deeper, wider, more heads), with and without a gammaThreshold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis.compare.batch import compare_parts, compare_run, join_compare
from analysis.compare.subtree import contained_configs
from analysis.cost.model import CostModel
from analysis.tables.runs import load_run
from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.testing.compare_reference import compare_configs
from replay.testing.in_memory import batch_from_rounds
from replay.util.errors import ConfigError
from tests.packed_runs import assert_same_frames, packed_synth_run
from tests.reference_runs import load_reference
from tests.test_batch_property import runs
from tests.test_batch_tables import ARTICLE, SAMPLE_RUNS, SAMPLES, reference_results

COST = CostModel(np.array([1.0, 17.0]), np.array([1.0, 2.6]), 0.1, "test")


def beyond(cfg: TreeConfig) -> list[TreeConfig]:
    """Configs the recording does not contain: one step deeper, every width + 1, one more head."""
    spec = [list(r) for r in cfg.top_k_spec]
    heads = list(cfg.top_head)
    out = [
        TreeConfig.from_lists(spec + [[2] * min(2, sum(spec[-1]))], heads + [min(2, sum(spec[-1]))]),
        TreeConfig.from_lists([[w + 1 for w in r] for r in spec], heads),
        TreeConfig.from_lists([[3], [1, 1], [2]], [1, 2, 1]),
    ]
    if len(spec) > 1 and heads[1] < spec[0][0]:
        out.append(TreeConfig.from_lists([spec[0], spec[1] + [1]] + spec[2:], [1, heads[1] + 1] + heads[2:]))
    return out


def spread(cfg: TreeConfig) -> TreeConfig:
    """The recorded shape with every slot after a step's first keeping one child: a node whose
    selection slot is uncertain has an uncertain kept width (an undecidable reason of its own)."""
    try:
        return TreeConfig.from_lists([[r[0]] + [1] * (len(r) - 1) for r in cfg.top_k_spec], cfg.top_head)
    except ConfigError:  # a level left with fewer nodes than the next step's heads: not expressible
        return cfg


def assert_same_run(path: Path, configs_of, thresholds=(None, 0.3)) -> pd.DataFrame:
    fast = load_run(str(path), "r", progress=False)
    ref = load_reference(str(path), "r", progress=False)
    configs = configs_of(ref.config)
    rounds = None
    for thr in thresholds:
        got = compare_run(fast, configs, COST, thr)
        want = compare_configs(ref.results, ref.config, configs, COST, thr)
        assert_same_frames(got, want)
        rounds = want[1] if rounds is None else pd.concat([rounds, want[1]])
    return rounds


def some_configs(cfg: TreeConfig) -> list[TreeConfig]:
    subs = contained_configs(cfg, limit=300)
    return [cfg, spread(cfg)] + subs[:: max(1, len(subs) // 12)] + beyond(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE_RUNS)
def test_sample_compare_agrees(name):
    rounds = assert_same_run(SAMPLES / name, some_configs)
    assert len(rounds)


@pytest.mark.slow
def test_synthetic_article_compare_has_undecidable_rounds_and_bounds():
    """Every contained config of the article tree, with a threshold: undecidable rounds of each
    reason and ranges of steps occur, and both paths agree on them."""
    rounds = assert_same_run(
        SAMPLES / "synthetic_article", lambda cfg: [cfg] + contained_configs(cfg) + beyond(cfg), (None, 0.5)
    )
    assert (~rounds["decided"]).sum() > 0 and (rounds["steps_lo"] < rounds["steps_hi"]).any()
    assert (
        rounds["reason"].str.contains("gammaThreshold").any() and rounds["reason"].str.contains("did not expand").any()
    )


@pytest.mark.slow
def test_packed_run_compare_agrees(tmp_path):
    """Several blocks, early stops (two shapes), rounds read back in run order."""
    run = packed_synth_run(tmp_path / "run", ARTICLE, 700, seed=5, early_stop_rate=0.2, block_rounds=128)
    assert_same_run(run, some_configs)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.randoms(use_true_random=False), st.sampled_from([None, 0.0, 0.3, 0.6, 1.0]))
def test_random_run_compare_agrees(case, rnd, threshold):
    """Random configs (static and dynamic), scores or not, parents or not, layouts, defects."""
    cfg, rounds = case
    subs = contained_configs(cfg, limit=400)
    configs = [cfg, spread(cfg)] + rnd.sample(subs, min(4, len(subs))) + rnd.sample(beyond(cfg), 2)
    parts = []
    for batch in batch_from_rounds(rounds):
        parts += compare_parts(batch, replay_batch(batch, cfg, workers=1), cfg, configs, threshold or 0.0)
    results = reference_results(cfg, rounds)
    got = join_compare(parts, cfg, configs, COST, threshold)
    if not results:
        assert not parts and len(got[1]) == 0
        return
    assert_same_frames(got, compare_configs(results, cfg, configs, COST, threshold))


def test_compare_command_does_not_replay_round_by_round(tmp_path, monkeypatch):
    """``specreplay compare`` on a packed run: no scalar replay of the run happens (the reference
    loader is made to fail), and its per-round CSV is the reference's frame."""
    import replay.testing.compare_reference
    from analysis.compare.configs import parse_config_arg
    from replay.cli import main

    run = packed_synth_run(tmp_path / "run", ARTICLE, 300, seed=3, early_stop_rate=0.1, block_rounds=64)
    texts = ["[3]|[1,1]|[1,1]", "[6]|[2,2]|[1,1]|[2]"]
    ref = load_reference(str(run), "run", progress=False)

    def no_scalar_replay(*args, **kwargs):
        raise AssertionError("compare replayed the run round by round")

    per_round = tmp_path / "rounds.csv"
    monkeypatch.setattr(replay.testing.compare_reference, "replay_subconfig", no_scalar_replay)
    monkeypatch.setattr(replay.testing.replayer, "replay_directory", no_scalar_replay)
    assert (
        main(
            [
                "compare",
                str(run),
                "--configs",
                *texts,
                "--gamma-threshold",
                "0.4",
                "--csv",
                "--no-progress",
                "--per-round",
                str(per_round),
            ]
        )
        == 0
    )
    monkeypatch.undo()
    configs = [ref.config] + [c for t in texts for c in parse_config_arg(t)]
    _, want = compare_configs(ref.results, ref.config, configs, COST, 0.4)
    got = pd.read_csv(per_round, keep_default_na=False)
    assert len(got) == 3 * len(ref.results) and (got["run"] == "run").all()
    pd.testing.assert_frame_equal(got.drop(columns=["run"]), want, check_exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["synthetic_article", "qwen2.5-coder/deep", "packed"])
def test_gamma_strategies_from_the_batch_arrays_agree(name, tmp_path):
    """Every strategy's result (bounds, undecidable rounds, trajectory) equals the reference's."""
    from analysis.compare.batch import simulate_run_strategies
    from replay.testing.compare_reference import simulate_strategies

    path = SAMPLES / name
    if name == "packed":
        path = packed_synth_run(tmp_path / "run", ARTICLE, 400, seed=7, early_stop_rate=0.2, block_rounds=128)
    fast = load_run(str(path), "r", progress=False)
    ref = load_reference(str(path), "r", progress=False)
    for threshold in (None, 0.5):
        for window in (1, 4):
            got = simulate_run_strategies(fast, fast.config, [0, 1, 2, 3, 4], COST, window, threshold)
            want = simulate_strategies(
                ref.results, ref.config, [0, 1, 2, 3, 4], COST, window, threshold, ref.config.gamma
            )
            assert got == want
