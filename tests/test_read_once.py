"""Read once: compare, recommend, stats and batch with --temperature T read each file of a dump
directory once, whatever they compute at T (issue 38: they read the run a second and third time
for the comparison, the ranking and the rounds without node_logprobs).

The count is tests/read_counts.py's (every open of a file under the directory). The formats the bulk
readers take (.npz, .npy, .pt, raw, text) are read once; a round the bulk reader hands to the reference
reader (here: .npz files holding node_logprobs) is opened by each, so there a command at T must open
each file as often as a plain ``batch DIR`` does.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest

from analysis.compare.sampling_along import (
    along_key,
    compare_sampling_loaded,
    comparison_along,
    loaded_comparison,
    loaded_gaps,
)
from analysis.compare.sampling_batch import compare_sampling_run, node_logprob_gaps_run
from analysis.shapes.sampling_recommend import candidate_shapes
from analysis.tables.runs import TABLES_KEYS, load_run
from replay.cli import main
from replay.core.config_grammar import parse_config_text
from replay.testing.synth import add_node_logprobs, write_synthetic_run
from tests.dump_mutations import build_corpora
from tests.read_counts import counting_reads
from tests.test_compare_sampling_batch import VOCAB
from tests.test_sampling_stats_batch import packed_case

FORMATS = ("npz", "npy", "pt", "raw", "text")
AT = ((0.0, None), (0.7, VOCAB), (1.3, None), (1.3, VOCAB))  # (T, vocabulary size): T > 1 needs one


def commands(out) -> dict[str, list[str]]:
    return {
        "compare": ["compare", "--configs", "2,1x1", "4,2x2", "--temperature", "0.7"],
        "compare --contained --per-round": [
            "compare",
            "--contained",
            "--per-round",
            str(out / "rounds.csv"),
            "--temperature",
            "0.7",
        ],  # fmt: skip
        "recommend": ["recommend", "--budget", "6", "--temperature", "0.7"],
        "recommend at T = 0": ["recommend", "--budget", "6", "--temperature", "0"],
        "stats": ["stats", "--temperature", "0.7"],
        "batch": ["batch", "--temperature", "0.7", "--workers", "1"],
    }


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """name -> (directory, extra arguments): the corpora in every format, and a dump whose manifest
    records node_logprobs at 0.7 (every third round without them)."""
    root = tmp_path_factory.mktemp("read_once")
    out = {c.name: (c.path, list(c.argv)) for c in build_corpora(root / "corpora") if c.name in FORMATS}
    d = root / "node_logprobs"
    d.mkdir()
    write_synthetic_run(d, parse_config_text("[4]|[2,2]|[1,1]"), 24, seed=4, early_stop_rate=0.3)
    add_node_logprobs(d, (0.7, 1.0), seed=5, skip_every=3)
    out["node_logprobs"] = (d, [])
    return out


def reads(path, argv: list[str]) -> dict[str, int]:
    with counting_reads(path) as counts:
        code = main([*argv, "--no-progress", str(path)])
    assert code in (0, 1), argv
    assert counts, f"{argv}: no file counted (the counter missed the readers)"
    return dict(counts)


@pytest.mark.parametrize("command", list(commands(Path())))
@pytest.mark.parametrize("name", [*FORMATS, "node_logprobs"])
def test_command_at_t_reads_each_file_once(dumps, tmp_path, capsys, name, command):
    path, extra = dumps[name]
    once = reads(path, ["batch", "--workers", "1", *extra])
    got = reads(path, [*commands(tmp_path)[command], *extra])
    capsys.readouterr()
    assert got == once, f"{command} on {name}: files opened more often than one read of the run"
    if name in FORMATS:
        assert set(once.values()) == {1}, f"{name}: the bulk reader opened a file twice"


def assert_same_comparison(got, want) -> None:
    pd.testing.assert_frame_equal(got.table, want.table, check_exact=True)
    pd.testing.assert_frame_equal(
        got.per_round.reset_index(drop=True), want.per_round.reset_index(drop=True), check_exact=True
    )
    assert list(got.skipped) == list(want.skipped)
    assert (got.needs_vocab, got.undetermined) == (want.needs_vocab, want.undetermined)


def runs_of(tmp_path, dumps) -> list[str]:
    """Packed random runs (refusals, several tree shapes and blocks) and a directory whose manifest
    records node_logprobs at 0.7."""
    return [str(packed_case(tmp_path, seed)) for seed in (0, 5)] + [str(dumps["node_logprobs"][0])]


def some_configs(tree):
    return [tree, *[c for c in candidate_shapes(tree, 8, tree.gamma) if c != tree][:8]]


def test_compare_at_t_computed_as_read_equals_reading_again(tmp_path, dumps):
    """compare --temperature's comparison computed on each batch as load_run reads it (with and
    without the per-round frame) is the one compare_sampling_run makes reading the run again."""
    for path in runs_of(tmp_path, dumps):
        plain = load_run(path, "r", progress=False, tables=TABLES_KEYS)
        configs = some_configs(plain.config)
        for (t, vocab), per_round in itertools.product(AT, (False, True)):
            along = comparison_along(t, some_configs, lambda _: vocab, None, lambda _: per_round, gaps=True)
            run = load_run(path, "r", progress=False, tables=TABLES_KEYS, per_run=along)
            key = along_key(configs, t, vocab, None, per_round)
            assert loaded_comparison(run, key) is not None, "nothing was computed as the run was read"
            got = compare_sampling_loaded(run, configs, t, vocab, None, None, per_round)
            assert_same_comparison(got, compare_sampling_run(plain, configs, [t], vocab, None, None, per_round))
            if t == 0.7 and path.endswith("node_logprobs"):
                assert loaded_gaps(run, t, set()) == node_logprob_gaps_run(plain, t, set())


@pytest.mark.parametrize("fits", [True, False])
def test_recommend_at_t_computed_as_read_equals_reading_again(tmp_path, dumps, monkeypatch, fits):
    """recommend --temperature's search from what load_run computed as it read the run (every
    candidate's sums; or, when they would not fit ALONG_SUMS_BYTES, the ranking numbers only) is the
    search that reads the run again."""
    import analysis.shapes.sampling_recommend as recommend

    if not fits:
        monkeypatch.setattr(recommend, "ALONG_SUMS_BYTES", 0)
    for path in runs_of(tmp_path, dumps):
        plain = load_run(path, "r", progress=False, tables=TABLES_KEYS)
        for (t, vocab), (budget, top) in zip(AT, ((8, 5), (5, 2), (8, 3), (6, 5))):
            along = recommend.shapes_along(budget, None, t, lambda _: vocab)
            run = load_run(path, "r", progress=False, tables=TABLES_KEYS, per_run=along)
            assert all(a is not None for a in run.read_along), "nothing was computed as the run was read"
            got = recommend.shapes_at_temperature(run, budget, None, t, vocab, top)
            want = recommend.shapes_at_temperature(plain, budget, None, t, vocab, top)
            assert got.candidates == want.candidates
            pd.testing.assert_frame_equal(got.ranked, want.ranked, check_exact=True)
            pd.testing.assert_frame_equal(got.recorded, want.recorded, check_exact=True)
            assert_same_comparison(got.comparison, want.comparison)
