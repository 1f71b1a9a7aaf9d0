"""Sweeps: grid syntax, config lists, one table, plots, and resuming after a kill without
recomputing or losing finished configs."""

import json

import pandas as pd
import pytest
from tests.live_fixtures import live_qwen_pair  # noqa: F401

from replay.config import TreeConfig
from replay.live.errors import SweepError
from replay.live.generate import DecodeOptions
from replay.live.grid import config_name, load_config_list, parse_grid
from replay.live.sweep import run_sweep

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


def test_config_list_file(tmp_path):
    path = tmp_path / "configs.json"
    path.write_text(json.dumps([{"topKSpec": [[6], [2, 2], [1, 1]]}, {"gamma": 2, "topKSpec": [[1], [1]], "topHead": [1, 1]}, {"topKSpec": [[6], [2, 2], [1, 1]]}]))
    assert [config_name(c) for c in load_config_list(path)] == ["6_2x2_1x1", "1_1"]


def test_sweep_is_killed_and_resumed_without_losing_or_redoing_rows(live_qwen_pair, tmp_path):
    draft, target = live_qwen_pair
    configs, _ = parse_grid(GRID)
    names = [config_name(c) for c in configs]
    assert len(configs) >= 6

    def kill_after_three(name):
        if name == names[2]:
            raise Killed

    with pytest.raises(Killed):
        run_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, after_config=kill_after_three, plots=False)
    rows = {n: (tmp_path / "rows" / f"{n}.json") for n in names[:3]}
    before = {n: (p.read_text(), p.stat().st_mtime_ns) for n, p in rows.items()}
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == sorted(f"{n}.json" for n in names[:3])
    assert len(pd.read_csv(tmp_path / "results.csv")) == 3

    # A second kill in the middle of the fourth config leaves a partial dump and no row.
    seen = []

    def die_mid_config(n_tokens):
        seen.append(n_tokens)
        if len(seen) == 3:
            raise Killed

    with pytest.raises(Killed):
        run_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, progress=die_mid_config, plots=False)
    assert (tmp_path / "dumps" / names[3]).is_dir() and not (tmp_path / "rows" / f"{names[3]}.json").exists()

    result = run_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path)
    assert result.skipped == tuple(names[:3])
    assert result.computed == tuple(names[3:])
    for n, p in rows.items():
        assert (p.read_text(), p.stat().st_mtime_ns) == before[n], f"{n} was recomputed"
    table = pd.read_parquet(tmp_path / "results.parquet")
    assert table["name"].tolist() == names
    assert pd.read_csv(tmp_path / "results.csv")["name"].tolist() == names
    for col in ("config", "nodes", "mean_accepted_length", "block_efficiency", "tokens_per_s", "speedup"):
        assert col in table.columns
    assert table["identical_to_baseline"].all()
    assert table.loc[table["name"] == "1_1_1_1", "nodes"].item() == 4
    for n in names:
        assert (tmp_path / "dumps" / n / "manifest.json").is_file()
    for png in ("nodes_vs_block_efficiency.png", "nodes_vs_tokens_per_s.png", "pareto.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 0


def test_resume_with_other_settings_is_refused(live_qwen_pair, tmp_path):
    draft, target = live_qwen_pair
    configs = [TreeConfig.from_lists([[2]])]
    run_sweep(draft, target, configs, PROMPTS, OPTIONS, tmp_path, plots=False)
    with pytest.raises(SweepError, match="other models, prompts or options"):
        run_sweep(draft, target, configs, PROMPTS, DecodeOptions(max_new_tokens=8), tmp_path, plots=False)


def test_pareto_front_keeps_undominated_rows():
    from analysis.sweep_plots import pareto_front

    t = pd.DataFrame({"name": list("abcde"), "nodes": [1, 4, 4, 8, 12], "block_efficiency": [1.5, 2.0, 1.8, 2.6, 2.5]})
    assert pareto_front(t)["name"].tolist() == ["a", "b", "d"]
    both = pareto_front(t.assign(tokens_per_s=[5, 6, 7, 4, 3]), "block_efficiency", "tokens_per_s", x_is_cost=False)
    assert both["name"].tolist() == ["d", "b", "c"]
