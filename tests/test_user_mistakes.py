"""Mistakes users make, made the way a user makes them (issue 19).

Each scenario builds its input by hand, as docs/dump-format.md tells a newcomer to, runs the
command the way a user types it (``specreplay ...`` through ``replay.cli.main``; a subprocess where
the stream or the process matters), and checks three things: the exit code, the stream the message
went to (skip reasons and errors on stderr, never stdout) and the words that tell the user the fix.

Sections, one per finding of issue 19 and then more of our own. Any mistake a person could make
twice belongs here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay.cli import main

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
SYNTH = ROOT / "sample_dumps" / "synthetic_article"


def run(capsys, *argv: str | os.PathLike) -> tuple[int, str, str]:
    """``specreplay ARGV`` in process: (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def shell(*argv: str | os.PathLike, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``specreplay ARGV`` as a separate process, as a user's shell runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *map(str, argv)],
        capture_output=True, text=True, cwd=cwd or ROOT, env=env, timeout=timeout,
    )


def write_matrix(path: Path, rows: list[list[int]]) -> Path:
    """A plain-text matrix, one row per line, the first encoding docs/dump-format.md names."""
    path.write_text("".join(" ".join(str(v) for v in row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_config(path: Path, top_k_spec: list[list[int]], top_head: list[int], **extra) -> Path:
    config = {"gamma": len(top_head), "topKSpec": top_k_spec, "topHead": top_head, "treeType": 0, **extra}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def article_by_hand(directory: Path, step0_key: tuple[int, int] = (123, 139),
                    key: tuple[int, int] = (124, 140), validate_name: str = "validate") -> Path:
    """The article's round typed in from the article, in the parents layout (DESIGN.md)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[6], [2, 2], [1, 1]], [1, 2, 2])
    a, b = key
    write_matrix(directory / f"draft_step_0_{step0_key[0]}_{step0_key[1]}",
                 [[41824, 43744, 44298, 34051, 28380, 37539]])
    write_matrix(directory / f"draft_step_1_{a}_{b}", [[41760, 35740], [45315, 41760]])
    write_matrix(directory / f"draft_step_2_{a}_{b}", [[22870], [22870]])
    write_matrix(directory / f"{validate_name}_{a}_{b}", [[41824], [41760], [45315], [22870], [22870]])
    return directory


def assert_told(err: str, *needles: str) -> None:
    """Every needle is in the message (case-insensitive) and nothing is a traceback."""
    assert "Traceback" not in err, err
    low = err.lower()
    for needle in needles:
        assert needle.lower() in low, f"{needle!r} not in stderr:\n{err}"


# --- the harness's own files are a valid starting point for every scenario below ----------------


def test_the_hand_made_article_round_replays_like_the_sample(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    code, out, err = run(capsys, "replay", dump)
    assert code == 0, err
    assert "accepted path: R → 41824 → 41760 → 22870" in out
    assert "accepted length: 3" in out


# --- mistakes-options: configs, --round and output paths (findings 1, 3, 6) and other option mistakes ---


def small_root_by_hand(directory: Path, root: int = 3, rounds: int = 3) -> Path:
    """A dump recorded with ``[root]|[2,1]`` (topHead [1, 2]) or, root 2, ``[2]|[1,1]``: a root
    narrower than the article's, typed in as docs/dump-format.md says (parents layout, no scores).
    Each round accepts the root's first child and that child's first child."""
    directory.mkdir(parents=True, exist_ok=True)
    widths = [2, 1] if root == 3 else [1, 1]
    write_config(directory / "config.json", [[root], widths], [1, 2])
    for r in range(1, rounds + 1):
        a = b = 10 * r
        first = [100 * r + k for k in range(root)]
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [first])
        step1 = [[200 * r + 10 * j + k for k in range(max(widths))] for j in range(2)]
        write_matrix(directory / f"draft_step_1_{a}_{b}", step1)
        write_matrix(directory / f"validate_{a}_{b}", [[first[0]], [step1[0][0]], [7]])
    return directory


@pytest.mark.parametrize("root,narrowed", [(3, ["[2]|[2,1]", "[1]|[2]"]), (2, ["[1]|[1]"])])
def test_compare_and_report_take_a_small_root(capsys, tmp_path, root, narrowed):
    """Finding 1: the default narrowed set narrowed the root to 1 and kept topHead [1, 2]: exit 2."""
    dump = small_root_by_hand(tmp_path / "small", root)
    code, out, err = run(capsys, "compare", dump, "--no-progress")
    assert code == 0, err
    assert_told(err)  # no traceback, nothing about topHead
    assert "topHead" not in err
    shown = {line.split()[0] for line in out.splitlines() if line.strip().startswith("[")}  # the config column
    assert set(narrowed) <= shown, out  # root 1 feeds one parent: step 1 keeps its first slot
    if root == 2:
        return  # the report builds the same default set (analysis.report): once is enough for it
    code, out, err = run(capsys, "report", dump, "-o", tmp_path / "rep", "--no-tables", "--no-progress")
    assert code == 0, err
    assert (tmp_path / "rep" / "index.html").is_file()


def test_every_default_narrowed_config_is_valid_and_narrower():
    """The narrowing rule (analysis.subtree.fit_levels) on random valid configs: each default
    config validates (TreeConfig checks itself) and is contained in the recorded one."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from analysis.report import default_comparison_configs
    from analysis.subtree import beyond_recorded
    from replay.config import TREE_DYNAMIC, TREE_STATIC, check_tree
    from tests.strategies import tree_configs

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(tree_configs(gammas=st.integers(1, 5), tree_types=st.sampled_from([TREE_STATIC, TREE_DYNAMIC])))
    def check(recorded):
        configs = default_comparison_configs(recorded)
        assert configs[0] == recorded
        for cfg in configs[1:]:
            check_tree(cfg)
            assert beyond_recorded(cfg, recorded) is None, (cfg.short(), recorded.short())
            assert cfg.num_nodes < recorded.num_nodes and cfg.tree_type == recorded.tree_type

    check()


def test_configs_replace_the_default_set(capsys, tmp_path, monkeypatch):
    """--configs replaces the default narrowed set: it is not even built."""
    import analysis.report

    def refuse(cfg):
        raise AssertionError("the default set was built")

    monkeypatch.setattr(analysis.report, "default_comparison_configs", refuse)
    dump = small_root_by_hand(tmp_path / "small")
    code, out, err = run(capsys, "compare", dump, "--configs", "[2]|[2]", "--no-progress")
    assert code == 0, err
    assert "[2]|[2]" in out
    code, _, err = run(capsys, "report", dump, "-o", tmp_path / "rep", "--configs", "[2]|[2]", "--no-tables", "--no-progress")
    assert code == 0, err
    assert "[2]|[2]" in (tmp_path / "rep" / "index.html").read_text()


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("typo,told", [
    ("6,2x2,1xl", "width 'l' is not an integer"),
    ("[6]|[2,2]|[1,1", "not valid JSON"),
    ("[2]|[1,1,1]", "topHead[1]': = 3 parents but level 1 has only 2"),  # the config's own check
])
def test_a_configs_typo_fails_before_any_replay(capsys, tmp_path, monkeypatch, command, typo, told):
    import analysis.runs

    def refuse(*a, **k):
        raise AssertionError("replayed before the configs were checked")

    monkeypatch.setattr(analysis.runs, "load_runs", refuse)
    extra = ["-o", tmp_path / "rep"] if command == "report" else []
    code, out, err = run(capsys, command, SYNTH, *extra, "--configs", typo, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "--configs", repr(typo), told)
    assert "internal error" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "rep").exists()


def test_compare_says_why_a_wider_config_is_only_bounded(capsys, tmp_path):
    """A config deeper or wider than the recorded one needs draft rows the dump does not hold."""
    dump = small_root_by_hand(tmp_path / "small")
    code, out, err = run(capsys, "compare", dump, "--configs", "[3]|[2,1]|[1]", "[3]|[2,2]", "--no-progress")
    assert code == 0, err
    assert_told(err, "note:", "[3]|[2,1]|[1] is deeper or wider than the recorded [3]|[2,1] (gamma 3 > 2)",
                "3 of 3 round(s) are undecidable", "lo..hi bounds", "record a dump with a config that contains it")
    assert "2.000..3.000" in out  # the bounds the note explains
    assert "[3]|[2,2] is deeper" not in err  # decided on every round (the rows hold 2 columns): nothing to explain


@pytest.mark.parametrize("argv", [
    ["replay", SYNTH],
    ["batch", SYNTH],
    ["plot", SYNTH, "-o", "{out}"],
    ["report", SYNTH, "-o", "{out}"],
])
def test_a_round_that_does_not_exist_is_exit_2_everywhere(capsys, tmp_path, monkeypatch, argv):
    """Finding 3: report drew another round and exited 0. Every command: exit 2, the nearest rounds."""
    if argv[0] in ("plot", "report"):  # checked on the names, before the replay
        import analysis.runs

        monkeypatch.setattr(analysis.runs, "load_runs", lambda *a, **k: (_ for _ in ()).throw(AssertionError("replayed first")))
    out_dir = tmp_path / "out"
    code, out, err = run(capsys, *[str(a).replace("{out}", str(out_dir)) for a in argv], "--round", "124_141", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "--round 124_141: no such round in", str(SYNTH), "nearest", "124_140")
    assert err.lower().index("124_140") < err.lower().index("132_148")  # nearest first
    assert "internal error" not in err and not out_dir.exists()


def test_round_written_with_a_dash_suggests_the_underscore(capsys):
    code, out, err = run(capsys, "replay", ARTICLE, "--round", "124-140")
    assert code == 2 and out == ""
    assert_told(err, "--round", "expected A_B", "did you mean 124_140?")
    code, _, err = run(capsys, "plot", ARTICLE, "-o", "unused", "--round", "validate_124_140")
    assert code == 2
    assert_told(err, "did you mean 124_140?")


def test_a_round_with_a_missing_file_says_what_is_missing(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_1_124_140").unlink()
    code, out, err = run(capsys, "replay", dump, "--round", "124_140")
    assert code == 2
    assert_told(err, "--round 124_140: that round in", "cannot be replayed", "missing draft_step_1_124_140")


def test_batch_to_proc_fails_at_once_naming_the_path(capsys):
    """Finding 6: the replay ran, then the error named /proc/.r.parquet.fns0bprz.tmp."""
    code, out, err = run(capsys, "batch", SYNTH, "-o", "/proc/r.parquet", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "-o/--output", "/proc/r.parquet: cannot be written: /proc takes no new file")
    assert ".tmp" not in err and len(err.strip().splitlines()) == 1


def test_plot_to_proc_says_what_refused(capsys):
    code, out, err = run(capsys, "plot", ARTICLE, "-o", "/proc/nope", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "-o/--output", "/proc/nope: cannot be created: /proc takes no new directory")


@pytest.mark.parametrize("argv", [["stats", ARTICLE, "-o"], ["plot", ARTICLE, "-o"], ["report", ARTICLE, "-o"], ["pack", ARTICLE, "-o"]])
def test_a_file_where_a_directory_output_goes(capsys, tmp_path, argv):
    existing = tmp_path / "results.csv"
    existing.write_text("keep me\n")
    code, out, err = run(capsys, *argv, existing, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "-o/--output", f"{existing}: exists and is not a directory")
    assert existing.read_text() == "keep me\n"


def test_an_output_in_the_dump_would_be_read_back_so_it_is_refused(capsys, tmp_path):
    """rounds.csv in DUMP: every later command on DUMP lists it as a skipped file and exits 1."""
    dump = article_by_hand(tmp_path / "mine")
    code, _, err = run(capsys, "compare", dump, "--per-round", dump / "rounds.csv", "--no-progress")
    assert code == 2
    assert_told(err, "--per-round", "is inside the input dump directory", "would list it as a skipped file",
                "write it beside the dump or into a subdirectory")
    assert not (dump / "rounds.csv").exists()
    code, _, err = run(capsys, "stats", dump, "-o", dump, "--no-progress")
    assert code == 2
    assert_told(err, "-o/--output", "is the input dump directory", "write into a subdirectory")
    # the harm refused: such a file makes the next read exit 1
    (dump / "rounds.csv").write_text("run,config\n")
    code, out, err = run(capsys, "replay", dump)
    assert code == 1 and "rounds.csv" in out + err  # the stream of skip reasons is finding 5's
    (dump / "rounds.csv").unlink()
    # a subdirectory or a side file (a picture) is never read as part of the dump
    code, _, err = run(capsys, "stats", dump, "-o", dump / "tables", "--no-progress")
    assert code == 0, err
    code, _, err = run(capsys, "compare", dump, "--plot", dump / "compare.png", "--no-progress")
    assert code == 0, err
    code, _, err = run(capsys, "replay", dump)
    assert code == 0, err


@pytest.mark.parametrize("options,told", [
    (["--csv", "--gamma-strategies"], ["--gamma-strategies with --csv", "use --json"]),
    (["--ema-window", "4"], ["--ema-window 4 without --gamma-strategies", "--gamma-strategies 1 4"]),
    (["--gamma-strategies", "2", "--ema-window", "4"], ["--ema-window 4 with --gamma-strategies 2", "drop --ema-window"]),
    (["--top", "-2"], ["argument --top", "at least 1, got -2"]),
    (["--json", "--csv"], ["not allowed with argument"]),
])
def test_compare_options_that_contradict(capsys, options, told):
    """Options that would be taken and then do nothing (or the opposite of what was meant)."""
    code, out, err = run(capsys, "compare", ARTICLE, *options, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, *told)
    assert len(err.strip().splitlines()) == 1
