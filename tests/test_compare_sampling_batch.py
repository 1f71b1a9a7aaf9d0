"""compare at temperature T from the batch arrays (analysis.compare.sampling_batch) equals the round
path (replay.testing.compare_at_t.compare_sampling over the RoundResults): the same per-round frame
(determined, bounds, exactness, reason) and the same table, value for value, on random dumps with
scores (replay/testing/batch_synth, replay/testing/sampling_ref.with_validate_scores): varied matrix
shapes, early stops, both layouts, the three selection rules, bad rows; at T = 0, < 1, 1 and > 1,
with and without the vocabulary size; for the recorded config, contained ones and configs reaching
past the recording. And compare / recommend / report at T on a packed run go through it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from analysis.compare.sampling_batch import compare_sampling_run
from analysis.compare.sampling_sums import folded_sums
from analysis.compare.subtree import contained_configs
from analysis.tables.runs import load_run
from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import replay_batch
from replay.io.packed.pack import pack_batches
from replay.io.roundbatch import MatrixStack
from replay.testing.batch_synth import synth_run, varied_run
from replay.testing.compare_at_t import compare_sampling
from replay.testing.in_memory import round_at
from replay.testing.sampling_ref import with_validate_scores
from tests.reference_runs import load_reference
from tests.test_batch_tables import ARTICLE, reference_results
from tests.test_compare_batch import beyond, spread

VOCAB = 40
JSON_TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)
TEMPERATURES = (0.0, 0.4, 1.0, 1.3)
SHAPES = (
    ARTICLE,
    TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2]),
    TreeConfig.from_lists([[3], [2, 1, 1], [1]], [1, 3, 1]),
    TreeConfig.from_lists([[1], [1], [1], [1]], [1, 1, 1, 1]),
    TreeConfig.from_lists([[4]], [1]),
)


def scored(batch, seed: int, bad_rate: float = 0.0):
    """``batch`` with scores on its validate rows, each round's own validate width kept (PAD and NaN
    past it, as a padded batch holds them); ``bad_rate`` of the rounds get a NaN in a row (refused)."""
    s = with_validate_scores(batch, seed, VOCAB).validate
    v = batch.validate
    ids, lp = s.ids, s.logp.astype(np.float64)
    if v.cols_of is not None:
        outside = np.arange(ids.shape[1])[None, :, None] >= v.cols_of[None, None, :]
        ids, lp = np.where(outside, PAD_TOKEN, ids), np.where(outside, np.nan, lp)
    rng = np.random.default_rng(seed + 1)
    bad = np.flatnonzero(rng.random(len(batch)) < bad_rate)
    lp[rng.integers(0, min(2, lp.shape[0]), size=bad.shape[0]), 0, bad] = np.nan
    return replace(batch, validate=MatrixStack(ids, lp, None, v.rows_of, v.cols_of, None))


def configs_for(cfg: TreeConfig, rng: np.random.Generator) -> list[TreeConfig]:
    """The recorded config, contained ones and some reaching past it: one step deeper, every width
    + 1 (candidates a row does not name, bounded by its smallest score) and, where the root has room,
    one more head (nodes the recording did not expand, whose children's scores are unknown)."""
    subs = contained_configs(cfg, limit=300)
    pick = rng.choice(len(subs), size=min(5, len(subs)), replace=False)
    return [cfg, spread(cfg)] + [subs[int(i)] for i in pick] + beyond(cfg)[:2] + beyond(cfg)[3:]


def assert_same(got, want) -> None:
    for g, w in ((got.per_round, want.per_round), (got.table, want.table)):
        assert list(g.columns) == list(w.columns)
        assert [str(t) for t in g.dtypes] == [str(t) for t in w.dtypes]
        pd.testing.assert_frame_equal(g, w, check_exact=True)
    # The round path names the scores file and row it read ("validate (scores), row 1: ..."); the batch
    # arrays know no file, so their reason is the same words without that place.
    assert [(k, t, _words(r)) for k, t, r in want.skipped] == [(k, t, _words(r)) for k, t, r in got.skipped]
    assert got.needs_vocab == want.needs_vocab


def _words(reason: str) -> str:
    where, _, words = reason.partition(": ")
    return words if where.split(",")[0].endswith("(scores)") else reason


def random_case(seed: int):
    """(cfg, batches): one of SHAPES, random layout / draft scores / parents / shapes varied or not."""
    rng = np.random.default_rng(seed)
    cfg = SHAPES[seed % len(SHAPES)]
    kw = dict(
        layout=("all", "parents")[int(rng.integers(2))],
        with_scores=bool(rng.integers(2)) or seed % 3 == 0,  # draft scores: the path-probability rule
        with_parents=bool(rng.integers(2)),  # the recorded-order rule when without draft scores
        vocab=VOCAB,
    )
    rounds, stop = int(rng.integers(20, 90)), float(rng.choice([0.0, 0.2, 0.5]))
    if seed % 2:
        batches = varied_run(cfg, rounds, seed=seed, early_stop_rate=stop, **kw)
    else:
        batches = synth_run(cfg, rounds, seed=seed, early_stop_rate=stop, target_cols=int(rng.integers(1, 5)), **kw)
    bad = float(rng.choice([0.0, 0.0, 0.1]))
    return cfg, [scored(b, seed * 31 + k, bad) for k, b in enumerate(batches)]


def round_path(cfg, batches, configs, temps, vocab, threshold):
    rounds = sorted(((int(b.ordinals[i]), round_at(b, i)) for b in batches for i in range(len(b))), key=lambda x: x[0])
    results = reference_results(cfg, [r for _, r in rounds])
    return compare_sampling(results, cfg, configs, temps, vocab, threshold)


@pytest.mark.parametrize("seed", range(16))
def test_random_dumps_batch_equals_round_path(seed):
    cfg, batches = random_case(seed)
    configs = configs_for(cfg, np.random.default_rng(seed + 99))
    for vocab in (None, VOCAB):
        for threshold in (None, 0.3) if seed % 4 == 0 else (None,):
            sums, fold = folded_sums(configs, TEMPERATURES, vocab, threshold or 0.0, None, per_round=True)
            for b in batches:
                fold(b, replay_batch(b, cfg, workers=1), cfg)
            got = sums.comparison(cfg)
            want = round_path(cfg, batches, configs, TEMPERATURES, vocab, threshold)
            assert_same(got, want)
    # the cases reach what they are meant to: determined and undetermined rounds, exact and bounded ones
    if seed < 4:
        assert want.per_round["determined"].any() and not want.per_round["determined"].all()


def test_every_reason_and_refusal_is_reached_across_the_cases():
    """The random cases above are not vacuous: together they hold every kind of undetermined round,
    inexact determined rounds, refused rounds, and T > 1 without a vocabulary size."""
    reasons, inexact, skipped, needs_vocab = set(), 0, 0, False
    for seed in range(0, 16, 3):
        cfg, batches = random_case(seed)
        configs = configs_for(cfg, np.random.default_rng(seed + 99))
        done = round_path(cfg, batches, configs, TEMPERATURES, None, 0.3 if seed % 2 else None)
        pr = done.per_round
        reasons |= {r.split(" ")[-1] for r in pr.loc[~pr["determined"], "reason"]}
        inexact += int((pr["determined"] & ~pr["exact"]).sum())
        skipped += len(done.skipped)
        needs_vocab |= done.needs_vocab
    assert inexact and skipped and needs_vocab
    assert len(reasons) >= 3, reasons


def packed(tmp_path, rounds=300, seed=5):
    run = tmp_path / "run"
    batches = [scored(b, k, 0.02) for k, b in enumerate(synth_run(ARTICLE, rounds, seed=seed, early_stop_rate=0.2))]
    pack_batches(batches, run, block_rounds=128, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    return run


def test_packed_run_uses_the_batch_arrays_and_equals_the_round_path(tmp_path):
    run = packed(tmp_path)
    fast = load_run(str(run), "r", progress=False)
    ref = load_reference(str(run), "r", progress=False)
    configs = configs_for(ref.config, np.random.default_rng(1))
    got = compare_sampling_run(fast, configs, TEMPERATURES, VOCAB)
    assert_same(got, compare_sampling(list(ref.results), ref.config, configs, TEMPERATURES, VOCAB))


@pytest.mark.parametrize("seed", [1, 5, 7, 11])
def test_the_table_and_the_reasons_summed_block_by_block_equal_the_per_round_path(tmp_path, seed):
    # compare --temperature without --per-round keeps no per-round frame (at 10^6 rounds it held
    # ~9 GB): its table and its "most often" reasons, counted as folded, must be the frame's, the
    # order of the reasons (a tie goes to the one met first in the run) included; these cases give
    # some config 2+ reasons, in blocks of 16 rounds that the replay's threads fold in any order
    from analysis.compare.sampling import reason_lines, undetermined_counts, undetermined_reasons

    cfg, batches = random_case(seed)
    run = tmp_path / "run"
    pack_batches(batches, run, block_rounds=16, manifest={"config": cfg.to_json()})
    fast = load_run(str(run), "r", progress=False)
    configs = configs_for(cfg, np.random.default_rng(seed + 99))
    several = 0
    for temps, threshold in (([0.7], None), (TEMPERATURES, None), ([0.0, 1.3], 0.3)):
        frame = compare_sampling_run(fast, configs, temps, VOCAB, threshold, per_round=True)
        summed = compare_sampling_run(fast, configs, temps, VOCAB, threshold, per_round=False)
        assert summed.per_round.empty and not frame.per_round.empty
        pd.testing.assert_frame_equal(summed.table, frame.table)
        assert list(summed.skipped) == list(frame.skipped)
        want = {cfg: undetermined_reasons(g) for cfg, g in frame.per_round.groupby("config", sort=False)}
        got = undetermined_counts(summed)
        assert [(k, list(c.items())) for k, c in got.items() if c] == [
            (k, list(c.items())) for k, c in want.items() if c
        ]
        assert reason_lines(got) == reason_lines(want)
        several += sum(len(c) > 1 for c in want.values())
    assert several, "the case has a config with two or more reasons"


def test_compare_at_t_prints_the_same_with_and_without_the_per_round_file(capsys, tmp_path):
    from replay.cli import main

    run = packed(tmp_path, rounds=400, seed=9)
    outs = []
    for extra in ((), ("--per-round", str(tmp_path / "rounds.csv"))):
        code = main(["compare", str(run), "--temperature", "0.7", "--no-progress", "--vocab-size", str(VOCAB), *extra])
        outs.append((code, capsys.readouterr().out))
    assert outs[0] == outs[1] and "undetermined, most often" in outs[0][1]
    assert len(pd.read_csv(tmp_path / "rounds.csv")) > 400  # a row per round and config


def no_round_by_round(monkeypatch):
    """Make the per-round reference fail: a command that replays the run round by round raises."""
    import replay.testing.replayer

    def refuse(*args, **kwargs):
        raise AssertionError("the run was replayed round by round")

    for name in ("replay_directory", "replay_packed", "replay_round"):
        monkeypatch.setattr(replay.testing.replayer, name, refuse)


def test_compare_recommend_and_report_at_t_read_the_batch_arrays(capsys, tmp_path, monkeypatch):
    """On a packed run, compare --temperature (its --per-round CSV and --json), recommend --temperature
    and report's temperature curve never replay round by round, and print the round path's numbers."""
    import json

    from analysis.compare.configs import parse_config_arg
    from analysis.shapes.sampling_recommend import candidate_shapes
    from tests.test_user_mistakes import run as cli

    path = packed(tmp_path, rounds=200, seed=9)
    ref = load_reference(str(path), "r", progress=False)
    texts = ["[6]|[2]|[1]", "[4]|[2,1]|[1,1]"]
    configs = [ref.config] + [c for t in texts for c in parse_config_arg(t)]
    want = compare_sampling(list(ref.results), ref.config, configs, [0.7], VOCAB)
    no_round_by_round(monkeypatch)
    csv_path = tmp_path / "rounds.csv"
    code, out, err = cli(
        capsys, "compare", path, "--temperature", "0.7", "--vocab-size", str(VOCAB), "--configs", *texts,
        "--json", "--no-progress", "--per-round", csv_path,
    )  # fmt: skip
    assert code == 1, err  # the rounds with a bad row are listed as skipped
    assert f"{len({n for n, _, _ in want.skipped})} " in err or want.skipped[0][0] in err
    got = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    pd.testing.assert_frame_equal(
        got.drop(columns=["run"]), want.per_round.assign(reason=want.per_round["reason"].replace("", np.nan)),
        check_exact=True, check_dtype=False,
    )  # fmt: skip
    body = json.loads(out)["configs"]
    for row, (_, w) in zip(body, want.table.iterrows()):
        assert row["config"] == w["config"] and row["determined"] == w["determined"]
        assert row["all_rounds_block_efficiency_lo"] == pytest.approx(w["all_rounds_block_efficiency_lo"], abs=JSON_TOL)
    code, out, err = cli(capsys, "recommend", path, "--temperature", "0.7", "--budget", "8", "--json", "--no-progress")
    assert code == 1, err
    shapes = candidate_shapes(ref.config, 8, ref.config.gamma)
    assert shapes and str(len(shapes)) in out
    monkeypatch.undo()
    # the report's other sections still read the rounds (its speed table): only the curve's own
    # round path is made to fail here
    import replay.testing.compare_at_t

    def no_round_path(*args, **kwargs):
        raise AssertionError("the curve was computed round by round")

    monkeypatch.setattr(replay.testing.compare_at_t, "sub_tree_round", no_round_path)
    out_dir = tmp_path / "report"
    code, _, err = cli(capsys, "report", path, "-o", out_dir, "--configs", texts[0], "--no-progress")
    assert code == 1, err  # the curve's rounds with a bad row are listed as skipped, once a round
    refused = {n for n, _, _ in want.skipped}
    assert sum(f"skipped round {n}: no sampling replay at T = 0.1, 0.2" in err for n in refused) == len(refused), err
    curve = pd.read_csv(out_dir / "tables" / "sampling_curve.csv")
    monkeypatch.undo()
    grid = sorted(set(curve["temperature"]))
    assert len(grid) == 16
    full = compare_sampling(list(ref.results), ref.config, configs[:2], grid)
    for name in ("determined", "undetermined", "rounds"):
        assert curve[name].tolist() == full.table[name].tolist()
    np.testing.assert_allclose(
        curve["all_rounds_block_efficiency_hi"], full.table["all_rounds_block_efficiency_hi"], rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("varied", [False, True])
def test_the_curve_block_by_block_equals_one_block_and_the_round_path(tmp_path, varied):
    """Without per-round rows (report's curve) the table is summed block by block in run order
    (sampling_sums.curve_sums): a run packed in many blocks of interleaving groups gives the bytes
    of the same run in one block, of the run with its per-round frame and of the round path; gamma 1
    included."""
    make = varied_run if varied else synth_run
    batches = [scored(b, k, 0.03) for k, b in enumerate(make(ARTICLE, 700, seed=11, early_stop_rate=0.2, vocab=VOCAB))]
    configs = configs_for(ARTICLE, np.random.default_rng(3)) + [TreeConfig.from_lists([[2]], [1])]
    tables = []
    for name, block in (("many", 64), ("one", 100_000)):
        pack_batches(
            batches, tmp_path / name, block_rounds=block, manifest={"config": ARTICLE.to_json(), "layout": "all"}
        )
        run = load_run(str(tmp_path / name), "r", progress=False)
        curve = compare_sampling_run(run, configs, TEMPERATURES, VOCAB, per_round=False)
        whole = compare_sampling_run(run, configs, TEMPERATURES, VOCAB)
        assert curve.per_round.empty and curve.skipped == whole.skipped and curve.needs_vocab == whole.needs_vocab
        pd.testing.assert_frame_equal(curve.table, whole.table, check_exact=True)
        tables.append(curve.table)
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=True)
    ref = load_reference(str(tmp_path / "many"), "r", progress=False)
    want = compare_sampling(list(ref.results), ref.config, configs, TEMPERATURES, VOCAB)
    pd.testing.assert_frame_equal(tables[0], want.table, check_exact=True)
    assert (want.table["undetermined"] > 0).any() and want.skipped


def test_exact_sums_are_fsum_in_any_order_and_pieces():
    """ExactSum (the temperature table's sums): math.fsum of each column, whatever the order and the
    pieces the values come in; cancellation, subnormals, values of every magnitude, non-finite."""
    import math

    from analysis.compare.sampling import ExactSum

    rng = np.random.default_rng(8)
    v = np.concatenate(
        [
            rng.random((3000, 3)),
            rng.standard_normal((500, 3)) * 1e16,
            -rng.standard_normal((500, 3)) * 1e-300,
            np.full((4, 3), 5e-324),
            np.array([[1e308, 1.0, 0.1], [-1e308, -1.0, 0.2], [2.0**-60, 3.0, 0.3]]),
        ]
    )
    want = [math.fsum(v[:, c]) for c in range(3)]
    for order in (np.arange(len(v)), rng.permutation(len(v))):
        acc = ExactSum(3)
        for piece in np.array_split(v[order], 7):
            acc.add(piece)
        assert acc.sums().tolist() == want
    assert want != v.sum(axis=0).tolist()  # the plain sum differs: the check can fail
    odd = ExactSum(2)
    odd.add(np.array([[1.0, np.inf], [np.nan, 2.0]]))
    got = odd.sums()
    assert np.isnan(got[0]) and got[1] == np.inf


def test_exact_sum_of_outcomes_is_add_of_their_rows_side_by_side():
    """ExactSum.add_outcomes (the fold's columns read where they lie, some rows left out, non-finite
    values among them) gives add's bins and sums of the same rows put side by side."""
    from analysis.compare.sampling import ExactSum

    rng = np.random.default_rng(3)
    n, g = 400, 3
    lo, hi = rng.standard_normal(n) * 1e3, rng.random(n)
    ge_lo, ge_hi = rng.random((n, g + 1)), rng.standard_normal((n, g + 1)) * 1e-310
    lo[5], hi[7], ge_lo[9, 1], ge_hi[11, 2], ge_hi[12, 2] = np.nan, np.inf, -np.inf, np.inf, 5e-324
    rows = rng.random(n) < 0.8
    rows[[5, 7, 11]] = True, False, True
    want, got = ExactSum(2 + 2 * g), ExactSum(2 + 2 * g)
    want.add(np.column_stack([lo, hi, ge_lo[:, :g], ge_hi[:, :g]])[rows])
    got.add_outcomes(lo, hi, ge_lo, ge_hi, rows)
    np.testing.assert_array_equal(got.parts, want.parts)
    np.testing.assert_array_equal(got.sums(), want.sums())
    assert np.isnan(got.sums()[0]) and got.sums()[1] < np.inf and got.sums()[2 + g + 2] == np.inf


@pytest.mark.parametrize("with_scores", [True, False])
def test_the_curve_without_scores_gives_the_same_table_and_skipped(tmp_path, with_scores):
    """The curve folded block by block as blocks come gives the table and skipped list of the same
    run with its per-round frame and of the round path; a run without scores too (every round refused at every T > 0: its chunks
    are not computed there, its skipped list made as read)."""
    batches = list(synth_run(ARTICLE, 500, seed=5, early_stop_rate=0.2, vocab=VOCAB))
    if with_scores:
        batches = [scored(b, k, 0.03) for k, b in enumerate(batches)]
    configs = configs_for(ARTICLE, np.random.default_rng(4)) + [TreeConfig.from_lists([[2]], [1])]
    pack_batches(batches, tmp_path / "r", block_rounds=64, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    run = load_run(str(tmp_path / "r"), "r", progress=False)
    whole = compare_sampling_run(run, configs, TEMPERATURES, VOCAB)
    curve = compare_sampling_run(run, configs, TEMPERATURES, VOCAB, per_round=False)
    pd.testing.assert_frame_equal(curve.table, whole.table, check_exact=True)
    assert list(curve.skipped) == whole.skipped and len(curve.skipped) == len(whole.skipped)
    assert curve.skipped[-1] == whole.skipped[-1] and curve.skipped[:3] == whole.skipped[:3]
    ref = load_reference(str(tmp_path / "r"), "r", progress=False)
    want = compare_sampling(list(ref.results), ref.config, configs, TEMPERATURES, VOCAB)
    pd.testing.assert_frame_equal(curve.table, want.table, check_exact=True)
    # the round path's reasons name the scores file's row (a packed run's batch arrays know none)
    assert [s[:2] for s in curve.skipped] == [s[:2] for s in want.skipped]
    positive = want.table["temperature"] > 0
    assert (want.table.loc[positive, "determined"] > 0).all() == with_scores
    assert (want.table.loc[~positive, "determined"] > 0).all()
    # by hand: a mean is math.fsum of the determined rounds' bounds (compare --per-round's rows) / their count
    import math

    rounds = whole.per_round
    for _, row in whole.table.iterrows():
        mine = rounds[(rounds["config"] == row["config"]) & (rounds["temperature"] == row["temperature"])]
        lo = mine.loc[mine["determined"], "expected_accepted_length_lo"].to_numpy()
        if len(lo):
            assert row["expected_accepted_length_lo"] == math.fsum(lo) / len(lo)
            assert row["all_rounds_block_efficiency_lo"] == math.fsum(lo) / row["rounds"] + 1.0
