"""Tree configs: both file forms, unknown keys kept, inconsistencies named."""

import json

import pytest

from replay.core.config import TreeConfig, load_config, parse_config
from replay.util.errors import ConfigError

ARTICLE = {"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2], "treeType": 0, "gammaThreshold": 0}


def test_article_config_counts():
    cfg = parse_config(ARTICLE).tree
    assert cfg.num_nodes == 12 and cfg.num_expanded == 5 and cfg.level_sizes == (6, 4, 2)
    # full top-6 expansion to depth 3 would be 6 + 36 + 216
    assert TreeConfig.from_lists([[6], [6] * 6, [6] * 36]).num_nodes == 258


def test_engine_list_form_keeps_settings_and_unknown_keys(tmp_path):
    body = {
        "specTree": [ARTICLE, {"topKSpec": [[1], [1], [1], [1]], "topHead": [1, 1, 1, 1], "gamma": 4}],
        "gammaStrategy": 2,
        "draftThreshold": 0.05,
        "myEngineFlag": True,
    }
    p = tmp_path / "c.json"
    p.write_text(json.dumps(body))
    cfg = load_config(p)
    assert len(cfg.trees) == 2 and cfg.trees[1].gamma == 4
    assert cfg.settings == {"gammaStrategy": 2, "draftThreshold": 0.05}
    assert cfg.unknown == {"myEngineFlag": True}
    assert cfg.to_json()["myEngineFlag"] is True


def test_defaults_follow_the_engine():
    cfg = parse_config({"topKSpec": [[2], [1, 1], [1]], "topHead": [1, 2, 1]}).tree
    assert (cfg.gamma, cfg.tree_type, cfg.gamma_threshold) == (3, 0, 0.0)


@pytest.mark.parametrize(
    "change, field, text",
    [
        ({"gamma": 2}, "topKSpec", "has 3 rows but gamma = 2: gamma is the number of draft steps"),
        ({"topHead": [1, 2, 5]}, "topHead[2]", "= 5 parents but level 2 has only 4 node(s) (topKSpec[1] = [2, 2])"),
        ({"topHead": [2, 2, 2]}, "topHead[0]", "must be 1"),
        ({"topKSpec": [[6], [2, 2], [1]]}, "topKSpec[2]", "has 1 widths [1] but topHead[2] = 2"),
        ({"treeType": 3}, "treeType", "must be 0 (static) or 1 (dynamic), got 3"),
        ({"gammaThreshold": 1.5}, "gammaThreshold", "must be a number in [0, 1]"),
        ({"topKSpec": [[6], [2, "x"], [1, 1]]}, "topKSpec[1][1]", "expected an integer, got 'x'"),
    ],
)
def test_inconsistent_configs_name_field_and_values(change, field, text):
    with pytest.raises(ConfigError) as exc:
        parse_config({**ARTICLE, **change}, "c.json")
    assert exc.value.field == field
    assert text in str(exc.value) and str(exc.value).startswith("c.json: ")


def test_spec_tree_errors_locate_the_tree():
    with pytest.raises(ConfigError, match=r"'specTree\[1\]\.topHead\[1\]'"):
        parse_config({"specTree": [ARTICLE, {"gamma": 2, "topKSpec": [[1], [1, 1]], "topHead": [1, 2]}]})


def test_misspelt_keys_name_the_tree_of_a_spec_tree_and_leave_other_keys_alone():
    from replay.core.config import misspelt_keys, parse_config

    cfg = parse_config(
        {
            "specTree": [{"gamma": 1, "topKSpec": [[2]], "topHaed": [1]}, {"gamma": 1, "topKSpec": [[3]]}],
            "emaWindw": 3,
            "note": "ours",
        },
        "cfg.json",
    )
    assert misspelt_keys(cfg) == [("emaWindw", "emaWindow"), ("specTree[0].topHaed", "topHead")]
    assert misspelt_keys(parse_config({"gamma": 1, "topKSpec": [[2]], "TOPHEAD": [1]})) == [("TOPHEAD", "topHead")]
    assert misspelt_keys(parse_config({"gamma": 1, "topKSpec": [[2]], "comment": "x"})) == []
