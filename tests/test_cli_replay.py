"""The CLI as a user runs it: a subprocess, its stdout, stderr and exit status."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"


def run(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env
    )


@pytest.mark.slow
def test_replay_article_prints_tree_and_path():
    r = run("replay", ARTICLE)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for line in (
        "R=43107 ▸ target→41824",
        "├── A1=41824 ✓ ▸ target→41760",
        "│   ├── B11=41760 ✓ ▸ target→22870",
        "│   │   └── C111=22870 ✓",
        "│   ├── B21=45315 ▸ target→22870",
        "│   │   └── C211=22870",
        "└── A6=37539",
        "accepted path: R → 41824 → 41760 → 22870  (nodes 1, 7, 11)",
        "accepted length: 3   bonus token: not in dump",
        "committed tokens: 3 [41824, 41760, 22870]",
        "mean accepted length (bonus excluded): 3.0000",
        "rank_major_fallback",
    ):
        assert line in out, line


@pytest.mark.slow
def test_replay_json_lines_fields():
    r = run("replay", ARTICLE, "--json")
    assert r.returncode == 0
    (obj,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert (obj["round"], obj["key_a"], obj["key_b"]) == ("124_140", 124, 140)
    assert obj["accepted_tokens"] == [41824, 41760, 22870]
    assert obj["accepted_nodes"] == [1, 7, 11]
    assert obj["accepted_length"] == 3
    assert obj["bonus_token"] is None
    assert obj["committed_tokens"] == [41824, 41760, 22870]
    assert obj["num_nodes"] == 12
    assert obj["selection"] == "rank_major_fallback"


@pytest.mark.slow
def test_round_filter_and_missing_round(tmp_path):
    assert run("replay", ARTICLE, "--round", "124_140", "--json").returncode == 0
    r = run("replay", ARTICLE, "--round", "1_2")
    assert r.returncode == 2 and "--round 1_2: no such round" in r.stderr and "Traceback" not in r.stderr


def broken_dir(tmp_path: Path) -> Path:
    """The article round plus four broken rounds, each broken differently."""
    d = tmp_path / "dumps"
    shutil.copytree(ARTICLE, d)
    (d / "draft_step_0_200_300").write_text("1 2 3 4 5 6\n")  # round 201_301: ragged step 1
    (d / "draft_step_1_201_301").write_text("1 2\n3\n")
    (d / "draft_step_2_201_301").write_text("1\n2\n")
    (d / "validate_201_301").write_text("1\n2\n3\n4\n5\n")
    (d / "draft_step_0_210_310").write_text("1 2 3 4 5 6\n")  # round 211_311: non-integer
    (d / "draft_step_1_211_311").write_text("1 2\n3 zz\n")
    (d / "validate_211_311").write_text("1\n2\n3\n")
    (d / "draft_step_0_220_320").write_text("1 2 3 4 5 6\n")  # round 221_321: step 1 missing
    (d / "draft_step_2_221_321").write_text("1\n2\n")
    (d / "validate_221_321").write_text("1\n")
    (d / "draft_step_0_230_330").write_text("1 2 3 4 5 6\n")  # round 231_331: 1 row, topHead 2
    (d / "draft_step_1_231_331").write_text("1 2\n")
    (d / "validate_231_331").write_text("1\n2\n3\n")
    return d


@pytest.mark.slow
def test_directory_with_broken_rounds_reports_good_ones_and_lists_the_broken(tmp_path):
    r = run("replay", broken_dir(tmp_path))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr + r.stdout
    # four broken rounds, and the copied manifest.json lists only the article's round
    # the summary counts them (4 rounds; manifest.json's disagreement skips nothing); each reason is on stderr only
    assert "rounds replayed: 1   skipped: 4 round(s); manifest.json disagrees (each listed on stderr)" in r.stdout
    assert "accepted path: R → 41824 → 41760 → 22870" in r.stdout
    assert "skipped" not in r.stdout.replace("skipped: 4 round(s)", "")
    assert "does not list 4 rounds found here: 201_301, 211_311, 221_321, 231_331 (it lists 1;" in r.stderr
    assert (
        "skipped round 201_301: " in r.stderr
        and "draft_step_1_201_301 (ids): ragged rows: line 2 has 1 value" in r.stderr
    )
    assert "draft_step_1_211_311 (ids): line 2: 'zz' is not an integer token id" in r.stderr
    assert "skipped round 221_321: missing draft_step_1_221_321" in r.stderr
    assert "draft_step_1 has 1 row(s) but topHead[1] = 2" in r.stderr and "draft_step_1_231_331" in r.stderr


@pytest.mark.parametrize(
    "setup, message",
    [
        (
            lambda d: (d / "config.json").write_text('{"gamma": 3, "topKSpec": [[6],[2,2],[1,1]], "topHead": [1,2,9]}'),
            "config.json: config field 'topHead[2]': = 9 parents but level 2 has only 4 node(s)",
        ),
        (lambda d: (d / "config.json").write_text("{not json"), "config.json: not valid JSON"),
        (
            lambda d: (d / "manifest.json").write_text('{"layout": "diagonal"}'),
            "manifest.json (layout): expected one of",
        ),
    ],
)
def test_bad_config_or_manifest_is_one_line_error(tmp_path, setup, message):
    d = tmp_path / "d"
    shutil.copytree(ARTICLE, d)
    setup(d)
    r = run("replay", d)
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_pickled_and_truncated_files_in_a_directory(tmp_path):
    d = tmp_path / "d"
    shutil.copytree(ARTICLE, d)
    np.save(d / "validate_124_140.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    (d / "validate_124_140").unlink()
    r = run("replay", d)
    assert r.returncode == 2  # its only round skipped: nothing replayed
    assert "validate_124_140.npy: holds pickled objects; refusing to unpickle" in r.stderr


@pytest.mark.slow
def test_raw_binary_directory(tmp_path):
    d = tmp_path / "raw"
    d.mkdir()
    rows = {
        "draft_step_0_123_139": [[41824, 43744, 44298, 34051, 28380, 37539, 0, 0]],
        "draft_step_1_124_140": [[41760, 35740, 0, 0, 0, 0, 0, 0], [45315, 41760, 0, 0, 0, 0, 0, 0]],
        "draft_step_2_124_140": [[22870] + [0] * 7, [22870] + [0] * 7],
        "validate_124_140": [[41824], [41760], [45315], [22870], [22870]],
    }
    for name, m in rows.items():
        (d / name).write_bytes(np.asarray(m, dtype="<i4").tobytes())
    r = run("replay", d, "--config", ARTICLE / "config.json", "--raw", "int32:draft=8,validate=1:force", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["accepted_tokens"] == [41824, 41760, 22870]
    r = run("replay", d, "--config", ARTICLE / "config.json")
    assert r.returncode == 2 and "not UTF-8 text; if this is a raw binary dump, pass --raw" in r.stderr


def test_help_has_examples():
    r = run("replay", "--help")
    assert r.returncode == 0 and "specreplay replay sample_dumps/article_round" in r.stdout


@pytest.mark.slow
def test_offline_cli_never_imports_torch():
    code = "import sys, replay.cli as c; c.main(['replay', '%s', '--json']); print('torch' in sys.modules)" % ARTICLE
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout + r.stderr
