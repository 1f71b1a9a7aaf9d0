"""One tree-config grammar (replay.core.config_grammar): every form the tool prints pastes back into
every option that takes a config, and each spelling means the tree worked out here by hand."""

from __future__ import annotations

import io
import json
import re
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.compare.configs import generate_funnels
from analysis.shapes.recommend_render import config_line, live_command
from replay.cli import main
from replay.cli.cmd_live import generate_config
from replay.core.config import TREE_DYNAMIC, TreeConfig, format_config, grid_item, run_name
from replay.core.config_grammar import ConfigTextError, parse_config_list, parse_config_text, parse_spec
from replay.live.sweep.grid import config_name, load_config_list, parse_grid

SYNTH = "sample_dumps/synthetic_article"  # recorded config [6]|[2,2]|[1,1]

# The article's tree by hand: 3 draft steps; the root keeps 6, the 2 expanded level-1 nodes keep 2
# each, the 2 expanded level-2 nodes keep 1 each; topHead counts the expanded nodes per step.
ARTICLE = TreeConfig(gamma=3, top_k_spec=((6,), (2, 2), (1, 1)), top_head=(1, 2, 2))
ARTICLE_FORMS = [
    "6,2x2,1x1",
    "6_2x2_1x1",
    "[6]|[2,2]|[1,1]",
    " [6] | [2, 2] | [1, 1] ",
    "[[6],[2,2],[1,1]]",
    '{"topKSpec": [[6], [2, 2], [1, 1]]}',
    '{"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2], "treeType": 0, "gammaThreshold": 0}',
    '{"specTree": [{"topKSpec": [[6], [2, 2], [1, 1]]}], "gammaStrategy": 0}',
]
# A funnel with 3 parents at step 1 and a threshold, dynamic: topHead (1, 3, 1).
ODD = TreeConfig(
    gamma=3, top_k_spec=((4,), (3, 1, 2), (1,)), top_head=(1, 3, 1), tree_type=TREE_DYNAMIC, gamma_threshold=0.25
)
SHAPES = [
    ARTICLE,
    ODD,
    TreeConfig(gamma=1, top_k_spec=((1,),), top_head=(1,)),
    TreeConfig(gamma=4, top_k_spec=((1,), (1,), (1,), (1,)), top_head=(1, 1, 1, 1), gamma_threshold=0.5),
    TreeConfig(gamma=2, top_k_spec=((12,), (1,) * 12), top_head=(1, 12)),
]


@pytest.mark.parametrize("text", ARTICLE_FORMS)
def test_every_spelling_is_the_article_tree(text):
    assert parse_config_text(text) == ARTICLE


def test_article_file_and_suffixes(tmp_path):
    f = tmp_path / "tree.json"
    f.write_text(json.dumps({"topKSpec": [[6], [2, 2], [1, 1]]}))
    assert parse_config_text(str(f)) == ARTICLE
    for text in ("6,2x2,1x1@0.2+dyn", "[6]|[2,2]|[1,1]@0.2+dyn", "6_2x2_1x1_t0.2_dyn"):
        c = parse_config_text(text)
        assert (c.top_k_spec, c.top_head, c.gamma_threshold, c.tree_type) == (
            ARTICLE.top_k_spec,
            (1, 2, 2),
            0.2,
            TREE_DYNAMIC,
        )
    assert parse_config_text("[3]|[3,1,2]|[1]").top_head == (1, 3, 1)  # topHead = widths per step


def test_printed_forms_by_hand():
    assert format_config(ARTICLE) == ARTICLE.short() == "[6]|[2,2]|[1,1]"
    assert grid_item(ARTICLE) == "6,2x2,1x1" and run_name(ARTICLE) == config_name(ARTICLE) == "6_2x2_1x1"
    assert format_config(ODD) == "[4]|[3,1,2]|[1]@0.25+dyn"
    assert grid_item(ODD) == "4,3x1x2,1@0.25+dyn" and run_name(ODD) == "4_3x1x2_1_t0.25_dyn"


@pytest.mark.parametrize("cfg", SHAPES, ids=run_name)
def test_every_printed_form_parses_back(cfg):
    printed = [
        cfg.short(),
        format_config(cfg),
        grid_item(cfg),
        run_name(cfg),
        config_name(cfg),
        config_line(cfg),
        json.dumps(cfg.to_json()),
    ]
    for text in printed:
        assert parse_config_text(text, "--config") == cfg, text  # == covers all five tree fields
        assert generate_config(text).tree == cfg, text
        assert parse_grid(text)[0] == [cfg], text
    # one list of every printed form: the same config, once
    assert parse_config_list(";".join(printed)) == ([cfg], [])


def test_sweep_grid_lists_mix_forms_and_expand_alternatives(tmp_path):
    f = tmp_path / "trees.json"
    f.write_text(json.dumps([{"gamma": 2, "topKSpec": [[2], [1]]}, {"gamma": 1, "topKSpec": [[1]]}]))
    configs, skipped = parse_grid(f"4|6,1x1;[2]|[1,1];2_1;{f}")
    assert [run_name(c) for c in configs] == ["4_1x1", "6_1x1", "2_1x1", "2_1", "1"]
    assert skipped == []
    configs, skipped = parse_grid("1|2,2x1@0|0.5")  # 1 root child cannot have 2 parents below it
    assert [run_name(c) for c in configs] == ["2_2x1", "2_2x1_t0.5"]
    assert len(skipped) == 2 and all(s.startswith("1,2x1") and "topHead[1]" in s for s in skipped)
    assert [run_name(c) for c in load_config_list(str(f))] == ["2_1", "1"]


def test_recommend_sweep_line_pastes_into_sweep_grid():
    wanted = [ARTICLE, ODD, ARTICLE]  # measured None: live_command lists each once
    rec = SimpleNamespace(
        comparisons=[SimpleNamespace(config=c, measured=None) for c in wanted], search=SimpleNamespace(budget=6)
    )
    line = live_command(rec)
    grid = re.search(r'--grid "([^"]+)"', line).group(1)
    assert parse_grid(grid) == ([ARTICLE, ODD], [])


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def compare_csv(capsys, *argv) -> pd.DataFrame:
    code, out, err = run(capsys, "compare", SYNTH, "--csv", "--no-progress", *argv)
    assert code == 0, err
    return pd.read_csv(io.StringIO(out))


@pytest.mark.slow
@pytest.mark.parametrize(
    "text", ["[6]|[2,2]", "6,2x2", "6_2x2", "[[6],[2,2]]", '{"gamma": 2, "topKSpec": [[6], [2, 2]]}']
)
def test_compare_configs_and_grid_take_every_form(capsys, text):
    """The two-step funnel [6]|[2,2] (topHead [1,2]) beside the recorded [6]|[2,2]|[1,1]."""
    for option in ("--configs", "--grid"):
        df = compare_csv(capsys, option, text)
        assert list(df["config"]) == ["[6]|[2,2]|[1,1]", "[6]|[2,2]"]
        assert list(df["nodes"]) == [12, 10]  # 6+4+2 and 6+4


@pytest.mark.slow
def test_compare_table_pastes_back(capsys):
    first = compare_csv(capsys, "--grid", "[3]|[1,1];2,1;1_1_1")
    assert list(first["config"]) == ["[6]|[2,2]|[1,1]", "[3]|[1,1]", "[2]|[1]", "[1]|[1]|[1]"]
    again = compare_csv(capsys, "--configs", *first["config"])
    pd.testing.assert_frame_equal(first, again)
    joined = compare_csv(capsys, "--grid", ";".join(first["config"]))
    pd.testing.assert_frame_equal(first, joined)


@pytest.mark.slow
def test_compare_generate_and_old_grid_spelling(capsys):
    gen = compare_csv(capsys, "--generate", "root=1,2 heads=1 width=1 gamma=2")
    assert list(gen["config"]) == ["[6]|[2,2]|[1,1]", "[1]|[1]", "[2]|[1]"]
    code, out, err = run(
        capsys, "compare", SYNTH, "--csv", "--no-progress", "--grid", "root=1,2 heads=1 width=1 gamma=2"
    )
    assert code == 0 and "deprecated" in err and "--generate" in err
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out)), gen)
    assert [c.short() for c in generate_funnels("root=2 heads=2 width=1 gamma=3")] == ["[2]|[1,1]|[1,1]"]


@pytest.mark.slow
def test_cost_inline_json_equals_the_file(capsys, tmp_path):
    cost = {"tokens": [1, 16], "verify_s": [0.1, 0.2], "draft_step_s": 0.01}
    f = tmp_path / "cost.json"
    f.write_text(json.dumps(cost))
    from_file = compare_csv(capsys, "--cost", str(f))
    inline = compare_csv(capsys, "--cost", json.dumps(cost))
    assert set(from_file.pop("cost_source")) == {f"given: {f}"} and set(inline.pop("cost_source")) == {
        "given: inline JSON"
    }
    pd.testing.assert_frame_equal(from_file, inline)


@pytest.mark.slow
def test_replay_summary_config_pastes_back(capsys):
    code, out, _ = run(capsys, "replay", SYNTH, "--summary")
    assert code == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("config ("))
    short, _, js = line.split("): ", 1)[1].partition("  ")
    assert parse_config_text(short) == parse_config_text(js) == ARTICLE
    code, out2, _ = run(capsys, "replay", SYNTH, "--summary", "--config", short)
    assert code == 0 and "rounds replayed: 300" in out2


@pytest.mark.slow
def test_stats_header_config_pastes_back(capsys):
    code, out, _ = run(capsys, "stats", SYNTH)
    assert code == 0
    m = re.search(r"config (\S+) topHead", out)
    assert parse_config_text(m.group(1)) == ARTICLE


@pytest.mark.parametrize(
    "argv, option, text",
    [
        (["compare", SYNTH, "--no-progress", "--configs", "6,2y2"], "--configs", "6,2y2"),
        (["compare", SYNTH, "--no-progress", "--grid", "6,2x2;[2]|[1,1,1]"], "--grid item", "[2]|[1,1,1]"),
        (["compare", SYNTH, "--no-progress", "--cost", '{"tokens": [1'], "--cost", '{"tokens": [1'),
        (["replay", SYNTH, "--config", "no_such.json"], "--config", "no_such.json"),
        (
            [
                "generate",
                "--pair",
                "p",
                "--config",
                "1,2x2",
                "--prompts",
                "README.md",
                "--max-new-tokens",
                "2",
                "-o",
                "unused",
            ],
            "--config",
            "1,2x2",
        ),
    ],
)
def test_errors_name_the_option_and_text(capsys, argv, option, text):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and f"{option} {text!r}" in err and "Traceback" not in err


def test_generate_parse_stage_takes_every_form(tmp_path):
    for text in ARTICLE_FORMS:
        assert generate_config(text).tree == ARTICLE
    spec = parse_spec(
        '{"specTree": [{"gamma": 1, "topKSpec": [[2]]}, {"gamma": 2, "topKSpec": [[1], [1]]}], "gammaStrategy": 2}'
    )
    assert [t.short() for t in spec.trees] == ["[2]", "[1]|[1]"] and spec.settings == {"gammaStrategy": 2}
    with pytest.raises(ConfigTextError, match="holds 2 trees"):
        parse_config_text('[{"gamma": 1, "topKSpec": [[2]]}, {"gamma": 1, "topKSpec": [[1]]}]')
    # a tree object without gamma takes the engine's default, 3 (docs/DESIGN): two rows are refused
    with pytest.raises(ConfigTextError, match="gamma = 3"):
        parse_config_text('{"topKSpec": [[6], [2, 2]]}')
