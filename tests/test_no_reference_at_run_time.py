"""Commands and the notebook API run on the batch engine alone: with every per-round reference entry
point made to raise, plot, report, stats (greedy and at T), compare and recommend (greedy and at T)
and the api functions still work. The pieces that replaced a reference use are checked against it:
the static shape (was rebuilt by replay.testing.rebuild), the leaf stops of generate --config auto
(were walked by replay.testing.subtree_walk), and the rising-rows WARNING, which replay_run now makes
for every command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import numpy as np
import pytest

import replay.engine.sampling
import replay.testing.compare_at_t
import replay.testing.compare_reference
import replay.testing.rebuild
import replay.testing.replayer
import replay.testing.stats_reference
import replay.testing.subtree_walk
import replay.testing.table_rows
from analysis.shapes.dumps import scan_run
from analysis.shapes.speedpredict import leaf_stop_fractions
from analysis.tables.slot_hits import static_shape
from replay.cli import api, main
from replay.core.config import TreeConfig
from replay.core.config_grammar import parse_spec
from replay.core.tree import Tree
from replay.core.vocab import PAD_TOKEN
from replay.io.rounds import Round
from tests.dump_mutations import build_corpora
from tests.reference_runs import leaf_stop_fractions as reference_leaf_stops
from tests.test_fuzz_sampling import NODE_T, _with_node_logprobs
from tests.test_replay_on_batch_engine import _rising, _rising_drafts

SAMPLES = "sample_dumps"
REFERENCES = (
    (replay.testing.replayer, ("replay_directory", "replay_packed", "replay_round", "iter_rounds")),
    (replay.testing.rebuild, ("rebuild_tree",)),
    (replay.testing.round_sampling, ("round_sampling",)),
    (replay.testing.subtree_walk, ("replay_subconfig", "replay_subconfig_all")),
    (replay.testing.compare_at_t, ("compare_sampling",)),
    (replay.testing.compare_reference, ("compare_configs", "simulate_strategies")),
    (replay.testing.table_rows, ("round_table", "node_table", "node_facts")),
    (replay.testing.stats_reference, ("dump_stats_from_results", "collect_visits", "estimate_model")),
)


@pytest.fixture
def no_reference(monkeypatch):
    """Every per-round reference entry point raises."""

    def refuse(*_a, **_k):
        raise AssertionError("a per-round reference ran")

    for module, names in REFERENCES:
        for name in names:
            monkeypatch.setattr(module, name, refuse)


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def node_dump(tmp_path_factory):
    """The npz corpus with node_logprobs recorded at NODE_T (tests/test_fuzz_sampling.py)."""
    base = tmp_path_factory.mktemp("node")
    paths = {c.name: c.path for c in build_corpora(base)}
    _with_node_logprobs(paths["npz"], base / "node")
    return base / "node"


@pytest.mark.slow
def test_plot_and_report_draw_without_the_reference(tmp_path, no_reference):
    runs = [f"{SAMPLES}/synthetic_article", f"{SAMPLES}/article_round"]
    code, out, err = cli("plot", *runs, "-o", tmp_path / "plots", "--no-progress")
    assert code == 0, err
    assert (tmp_path / "plots" / "round_synthetic_article.png").exists()
    code, _, err = cli("plot", runs[0], "-o", tmp_path / "one", "--round", "1004_1020", "--no-progress")
    assert code == 0, err
    code, _, err = cli("report", runs[0], "-o", tmp_path / "report", "--no-progress")
    assert code == 0, err
    assert (tmp_path / "report" / "index.html").exists()


def test_stats_compare_recommend_without_the_reference(no_reference):
    d = f"{SAMPLES}/synthetic_article"
    for argv in (
        ("stats", d),
        ("stats", d, "--temperature", "0.7"),
        ("compare", d, "--contained", "--gamma-strategies", "0", "1", "2"),
        ("compare", d, "--temperature", "0.7"),
        ("recommend", d, "--budget", "8"),
        ("recommend", d, "--temperature", "0.7", "--budget", "8"),
        ("replay", d, "--summary"),
        ("batch", d),
    ):
        code, out, err = cli(*argv, "--no-progress")
        assert code in (0, 1) and out, (argv, err)


def test_api_without_the_reference(no_reference):
    (run,) = api.load([f"{SAMPLES}/synthetic_article"])
    assert run.rounds == 300
    assert api.speed([run])["rounds"].tolist() == [300]
    pick = api.example_round(run)
    assert pick.result.acceptance.stop == "mismatch" and pick.why.startswith("a typical failing round")
    assert api.example_round(run, "1004_1020").result.name == "1004_1020"
    assert len(api.compare(run, ["[3]|[1,1]|[1,1]"])) == 2
    assert len(api.sampling(f"{SAMPLES}/synthetic_article", [0.7])) == 300


def test_stats_at_a_recorded_t_without_the_reference(node_dump, no_reference):
    t = str(NODE_T[0])
    code, out, err = cli("stats", node_dump, "--temperature", t, "--json", "--no-progress")
    assert code in (0, 1), err
    assert json.loads(out)["temperature"] == NODE_T[0]


def test_compare_at_a_recorded_t_without_the_reference(node_dump, no_reference):
    code, _, err = cli("compare", node_dump, "--temperature", str(NODE_T[0]), "--no-progress")
    assert code in (0, 1), err


def test_static_shape_is_the_reference_rebuild_of_a_full_round():
    """static_shape builds the fallback layout itself; the reference rebuild of a round of
    placeholder tokens without scores gives the same tree."""

    def rebuilt(cfg: TreeConfig) -> Tree:
        steps, fake = [], 1
        for i in range(cfg.gamma):
            steps.append(
                [list(range(fake + j * cfg.max_width, fake + (j + 1) * cfg.max_width)) for j in range(cfg.top_head[i])]
            )
            fake += cfg.top_head[i] * cfg.max_width
        return replay.testing.rebuild.rebuild_tree(Round.from_lists(steps, [[0]]), cfg).tree

    specs = (
        [[6], [2, 2], [1, 1]],
        [[3], [3, 2, 1], [2, 1, 1], [1, 1]],
        [[1], [1], [1]],
        [[4], [2, 2, 1], [3, 1]],
        [[5]],
    )
    for spec in specs:
        for tree_type in (0, 1):
            cfg = dataclasses.replace(TreeConfig.from_lists(spec), tree_type=tree_type)
            got, want = static_shape(cfg), rebuilt(cfg)
            assert (got.tokens == PAD_TOKEN).all()
            for field in ("parents", "depths", "ranks"):
                np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)
            np.testing.assert_array_equal(got.logprobs, want.logprobs)
            assert [e.tolist() for e in got.expanded] == [e.tolist() for e in want.expanded]


@pytest.mark.parametrize("name", ["chain4", "article", "wide", "deep"])
def test_leaf_stops_from_the_batch_walk_are_the_reference(name):
    path = f"{SAMPLES}/qwen2.5-coder/{name}"
    dump = scan_run(path)
    ref = replay.testing.replayer.replay_directory(path)
    configs = [parse_spec(s, "test").tree for s in ("1", "1,1", "1,1,1,1", "2", "6,2x2,1x1", "4,2x2", "3,1x3,1x3")]
    configs.append(dataclasses.replace(configs[1], gamma_threshold=0.5))
    assert leaf_stop_fractions(dump, configs) == reference_leaf_stops(ref, configs)


def test_the_rising_rows_warning_comes_with_every_command(tmp_path):
    """replay_run makes it: replay (trees, --json, --summary), batch and stats all print it."""
    d = _rising(tmp_path / "rising")
    for argv in (("replay",), ("replay", "--json"), ("replay", "--summary"), ("batch",), ("stats",)):
        code, _, err = cli(*argv, d, "--no-progress")
        assert code == 0 and err.count("validate row(s) have scores that rise along the row") == 1, (argv, err)


def test_the_rising_draft_rows_warning_comes_with_every_command(tmp_path):
    """The draft line is made where the validate one is: every command, a packed run too."""
    d = _rising_drafts(tmp_path / "rising_drafts")
    code, _, _ = cli("pack", d, "-o", tmp_path / "packed.run")
    assert code == 0
    words = "WARNING: 3 draft row(s) have scores that rise along the row (first: "
    for run in (d, tmp_path / "packed.run"):
        for argv in (("replay",), ("replay", "--json"), ("replay", "--summary"), ("batch",), ("stats",)):
            code, _, err = cli(*argv, run, "--no-progress")
            assert code == 0 and err.count(words) == 1, (argv, err)
            assert f"{d / 'draft_step_1_108_124.npz'}, row 1 (0-based)" in err and "validate row(s)" not in err
