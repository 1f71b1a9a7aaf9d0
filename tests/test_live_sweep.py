"""Sweeps: grid syntax, config lists, one table, plots, and resuming after a kill without
recomputing or losing finished configs."""

import json

import pandas as pd
import pytest

from replay.core.config import TreeConfig
from replay.live.errors import SweepError
from replay.live.generate import DecodeOptions
from replay.live.sweep.grid import config_name, load_config_list, parse_grid
from replay.live.sweep.runner import run_local_sweep
from tests.live_fixtures import live_qwen_pair  # noqa: F401

GRID = "6,2x2,1x1;1,1,1,1;4,2x1,1;2,1x1;3|5,1;8"
PROMPTS = [[1, 2, 3, 4], [50, 7, 8]]
OPTIONS = DecodeOptions(max_new_tokens=16)


class Killed(Exception):
    pass


def test_grid_syntax():
    configs, skipped = parse_grid(GRID)
    assert [c.top_k_spec for c in configs] == [
        ((6,), (2, 2), (1, 1)),
        ((1,), (1,), (1,), (1,)),
        ((4,), (2, 1), (1,)),
        ((2,), (1, 1)),
        ((3,), (1,)),
        ((5,), (1,)),
        ((8,),),
    ]
    assert configs[0].top_head == (1, 2, 2) and skipped == []
    configs, skipped = parse_grid("1|2,2x1@0.25")
    assert [c.top_k_spec for c in configs] == [((2,), (2, 1))] and configs[0].gamma_threshold == 0.25
    assert len(skipped) == 1 and "topHead[1]" in skipped[0]
    with pytest.raises(SweepError, match="topHead"):
        parse_grid("1,2x2")
    with pytest.raises(SweepError, match="not an integer"):
        parse_grid("6,a")
    assert config_name(configs[0]) == "2_2x1_t0.25"
    # '@' alternatives: one config per threshold, 0 = off.
    configs, _ = parse_grid("1,1,1,1@0|0.3|0.5;2,1x1@0.3")
    assert [(c.top_k_spec, c.gamma_threshold) for c in configs] == [
        (((1,), (1,), (1,), (1,)), 0.0),
        (((1,), (1,), (1,), (1,)), 0.3),
        (((1,), (1,), (1,), (1,)), 0.5),
        (((2,), (1, 1)), 0.3),
    ]
    with pytest.raises(SweepError, match="gammaThreshold 'x' is not a number"):
        parse_grid("1,1@0|x")


def test_config_list_file(tmp_path):
    path = tmp_path / "configs.json"
    path.write_text(
        json.dumps(
            [
                {"topKSpec": [[6], [2, 2], [1, 1]]},
                {"gamma": 2, "topKSpec": [[1], [1]], "topHead": [1, 1]},
                {"topKSpec": [[6], [2, 2], [1, 1]]},
            ]
        )
    )
    assert [config_name(c) for c in load_config_list(path)] == ["6_2x2_1x1", "1_1"]


@pytest.mark.slow
def test_sweep_is_killed_and_resumed_without_losing_or_redoing_rows(live_qwen_pair, tmp_path):
    draft, target = live_qwen_pair
    configs, _ = parse_grid(GRID)
    names = [config_name(c) for c in configs]
    assert len(configs) >= 6

    def kill_after_three(name):
        if name == names[2]:
            raise Killed

    with pytest.raises(Killed):
        run_local_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, repeats=1, after_config=kill_after_three)
    rows = {n: (tmp_path / "dumps" / n / "row.json") for n in names[:3]}
    before = {n: (p.read_text(), p.stat().st_mtime_ns) for n, p in rows.items()}
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == sorted(names[:3])
    assert len(pd.read_csv(tmp_path / "results.csv")) == 3

    # A second kill in the middle of the fourth config: nothing of it is visible, no half dump.
    seen = []

    def die_mid_config(n_tokens):
        seen.append(n_tokens)
        if len(seen) == 3:
            raise Killed

    with pytest.raises(Killed):
        run_local_sweep(
            draft, target, configs, PROMPTS, OPTIONS, tmp_path, repeats=1, resume=True, progress=die_mid_config
        )
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == sorted(names[:3])

    result = run_local_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, repeats=1, resume=True)
    assert result.skipped == tuple(names[:3])
    assert result.computed == tuple(names[3:])
    for n, p in rows.items():
        assert (p.read_text(), p.stat().st_mtime_ns) == before[n], f"{n} was recomputed"
    table = pd.read_parquet(tmp_path / "results.parquet")
    assert table["name"].tolist() == names
    assert pd.read_csv(tmp_path / "results.csv")["name"].tolist() == names
    for col in (
        "config",
        "nodes",
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "per_position_acceptance_rate_1",
        "mean_accepted_length",
        "tokens_per_s",
        "speedup",
        "speedup_min",
        "speedup_max",
        "baseline_tokens_per_s",
        "worker",
        "device",
        "session",
        "load_1m",
    ):
        assert col in table.columns
    assert table["identical_to_baseline"].all()
    assert table.loc[table["name"] == "1_1_1_1", "nodes"].item() == 4
    # Every session re-times its baseline beside each config: the two sessions' rows say which.
    assert table["session"].nunique() == 2
    for n in names:
        manifest = json.loads((tmp_path / "dumps" / n / "manifest.json").read_text())
        assert manifest["sweep"]["session"] == table.loc[table["name"] == n, "session"].item()
    # results.csv holds the bytes pandas writes of the table (through the one CSV encoder)
    assert (tmp_path / "results.csv").read_text() == result.table.to_csv(index=False)


def test_results_table_files_are_what_pandas_writes_of_the_rows(tmp_path):
    """results.csv is the bytes pandas' to_csv writes of the rows' frame and results.parquet reads
    back as that frame, whatever the rows hold: quoted text, NaN and None, a column some rows lack
    (older rows), floats of every size, True/False."""
    from replay.live.sweep.directory import ROW_FILE, dumps_dir, write_results_table

    rows = [
        {"name": "6_2x2", "config": "[6]|[2,2]", "config_json": json.dumps({"topKSpec": [[6], [2, 2]]}),
         "nodes": 10, "speedup": 0.6793574206492398, "tokens_per_s": 1.5e12, "load_1m": -0.0,
         "identical_to_baseline": True, "host": 'a "b"\nc', "per_position_acceptance_rate_2": 0.25},
        {"name": "1_1", "config": "[1]|[1]", "config_json": "{}", "nodes": 2, "speedup": None,
         "tokens_per_s": 1e-07, "load_1m": 2.0, "identical_to_baseline": False, "host": "vm é"},
        {"name": "8", "config": "[8]", "config_json": "{}", "nodes": 8, "speedup": float("nan"),
         "tokens_per_s": 100.0, "load_1m": 0.1, "identical_to_baseline": None, "host": "vm"},
    ]  # fmt: skip
    for row in rows:
        (dumps_dir(tmp_path) / row["name"]).mkdir(parents=True)
        (dumps_dir(tmp_path) / row["name"] / ROW_FILE).write_text(json.dumps(row))
    names = [r["name"] for r in rows]
    table = write_results_table(tmp_path, names)
    assert (tmp_path / "results.csv").read_text() == pd.DataFrame(rows).to_csv(index=False)
    assert table["name"].tolist() == names
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "results.parquet"), table)


def test_row_numbers_come_from_the_committed_dump(live_qwen_pair, tmp_path):
    """Counts in a row are recomputed by hand from its manifest; the speedup is the median of the
    per-pass ratios recorded in the manifest's timing."""
    import statistics

    draft, target = live_qwen_pair
    configs, _ = parse_grid("4,2x1,1;1,1,1@0|0.9")
    assert [config_name(c) for c in configs] == ["4_2x1_1", "1_1_1", "1_1_1_t0.9"]
    result = run_local_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, repeats=3)
    for _, row in result.table.iterrows():
        m = json.loads((tmp_path / "dumps" / row["name"] / "manifest.json").read_text())
        rounds = m["rounds"]
        assert row["rounds"] == len(rounds)
        assert row["mean_accepted_length"] == pytest.approx(sum(r["accepted_length"] for r in rounds) / len(rounds))
        # bonus included: a live round commits its accepted tokens and the target's, so the dump's committed tokens count it
        assert row["mean_acceptance_length"] == pytest.approx(
            sum(len(r["committed_tokens"]) for r in rounds) / len(rounds)
        )
        assert row["draft_acceptance_rate"] == pytest.approx(
            sum(r["accepted_length"] for r in rounds) / sum(r["num_nodes"] for r in rounds)
        )
        assert row["per_position_acceptance_rate_1"] == pytest.approx(
            sum(r["accepted_length"] >= 1 for r in rounds) / len(rounds)
        )
        t = m["totals"]["timing"]["methods"]
        rate = {k: [tok / sec for tok, sec in zip(v["tokens"], v["seconds"])] for k, v in t.items()}
        ratios = [a / b for a, b in zip(rate["speculative"], rate["target-only"])]
        assert row["speedup"] == pytest.approx(statistics.median(ratios))
        assert (row["speedup_min"], row["speedup_max"]) == pytest.approx((min(ratios), max(ratios)))
        assert row["baseline_tokens_per_s"] == pytest.approx(statistics.median(rate["target-only"]))
        assert row["repeats"] == 3 and row["gamma_threshold"] == (0.9 if row["name"].endswith("_t0.9") else 0.0)
    # The 0.9 threshold stops drafting early in some round (the tiny draft is rarely that sure).
    steps = [
        r["draft_steps"]
        for r in json.loads((tmp_path / "dumps" / "1_1_1_t0.9" / "manifest.json").read_text())["rounds"]
    ]
    assert min(steps) < 3


def test_timed_run_writes_the_same_dump_as_a_plain_run(live_qwen_pair, tmp_path):
    """The dump is buffered during the first timed pass and written after the timing: same files."""
    from replay.live.run import run_speculative, run_timed

    draft, target = live_qwen_pair
    config = parse_grid("4,2x1,1")[0][0]
    run_speculative(draft, target, PROMPTS, config, OPTIONS, tmp_path / "plain")
    timed = run_timed(draft, target, PROMPTS, config, OPTIONS, repeats=2, baseline=False, dump_dir=tmp_path / "timed")
    assert [m.name for m in timed.timing.methods] == ["speculative"] and timed.baseline is None
    plain = sorted(p.name for p in (tmp_path / "plain").iterdir())
    assert plain == sorted(p.name for p in (tmp_path / "timed").iterdir()) and plain
    for name in plain:
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "timed" / name).read_bytes(), name


def test_a_config_finished_twice_is_committed_once(live_qwen_pair, tmp_path):
    """A second run of a committed config (a retried task) is discarded whole: the first result's
    files are untouched, nothing of the second remains, the table has one row."""
    from replay.live.sweep.directory import DUPLICATE
    from replay.live.sweep.runner import run_config

    draft, target = live_qwen_pair
    config = parse_grid("2,1x1")[0][0]
    run_local_sweep(draft, target, [config], PROMPTS, OPTIONS, tmp_path, repeats=1)
    first = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "dumps" / "2_1x1").iterdir()}
    assert run_config(draft, target, config, PROMPTS, OPTIONS, tmp_path, 1, "second-session", "w9") == DUPLICATE
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "dumps" / "2_1x1").iterdir()} == first
    assert [p.name for p in (tmp_path / "dumps").iterdir()] == ["2_1x1"]
    result = run_local_sweep(draft, target, [config], PROMPTS, OPTIONS, tmp_path, repeats=1, resume=True)
    assert result.skipped == ("2_1x1",) and len(result.table) == 1 and result.table["worker"].item() == "local"


def test_resume_with_other_settings_is_refused(live_qwen_pair, tmp_path):
    draft, target = live_qwen_pair
    configs = [TreeConfig.from_lists([[2]])]
    run_local_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, repeats=1)
    with pytest.raises(SweepError, match="pass --resume"):
        run_local_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, repeats=1)
    with pytest.raises(SweepError, match="other options"):
        run_local_sweep(
            draft, target, configs, PROMPTS, DecodeOptions(max_new_tokens=8), tmp_path, repeats=1, resume=True
        )


def test_pareto_front_keeps_undominated_rows():
    from analysis.report.sweep_plots import pareto_front

    t = pd.DataFrame(
        {"name": list("abcde"), "nodes": [1, 4, 4, 8, 12], "mean_acceptance_length": [1.5, 2.0, 1.8, 2.6, 2.5]}
    )
    assert pareto_front(t)["name"].tolist() == ["a", "b", "d"]
    both = pareto_front(
        t.assign(tokens_per_s=[5, 6, 7, 4, 3]), "mean_acceptance_length", "tokens_per_s", x_is_cost=False
    )
    assert both["name"].tolist() == ["d", "b", "c"]
