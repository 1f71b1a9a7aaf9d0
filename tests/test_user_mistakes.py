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
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
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
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
    )


def write_matrix(path: Path, rows: list[list[int]]) -> Path:
    """A plain-text matrix, one row per line, the first encoding docs/dump-format.md names."""
    path.write_text("".join(" ".join(str(v) for v in row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_config(path: Path, top_k_spec: list[list[int]], top_head: list[int], **extra) -> Path:
    config = {"gamma": len(top_head), "topKSpec": top_k_spec, "topHead": top_head, "treeType": 0, **extra}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def article_by_hand(
    directory: Path,
    step0_key: tuple[int, int] = (123, 139),
    key: tuple[int, int] = (124, 140),
    validate_name: str = "validate",
) -> Path:
    """The article's round typed in from the article, in the parents layout (DESIGN.md)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[6], [2, 2], [1, 1]], [1, 2, 2])
    a, b = key
    write_matrix(
        directory / f"draft_step_0_{step0_key[0]}_{step0_key[1]}", [[41824, 43744, 44298, 34051, 28380, 37539]]
    )
    write_matrix(directory / f"draft_step_1_{a}_{b}", [[41760, 35740], [45315, 41760]])
    write_matrix(directory / f"draft_step_2_{a}_{b}", [[22870], [22870]])
    write_matrix(directory / f"{validate_name}_{a}_{b}", [[41824], [41760], [45315], [22870], [22870]])
    return directory


def without_fallback_warning(err: str) -> str:
    """stderr less the run's one rank-major-fallback WARNING line (a dump without scores or parents
    always gets it, on stderr: mistakes-round2)."""
    return "".join(line for line in err.splitlines(keepends=True) if "rank-major fallback" not in line)


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


# --- mistakes-speedup: speedups that cannot be right (findings 9, 11, 12; "probably wrong") ------
#
# The hand-made article round with the manifest docs/dump-format.md describes for timed runs. By hand:
# target-only: 8 tokens, 6.0 s in all, 0.4 s prefill, 8 forwards (0.7 s per decode forward);
# speculative: 4 tokens, 4.0 s, 0.4 s prefill, one round (12 nodes, 3 steps, verify 0.9 s).
#   decode only, prefill excluded: ((6.0 − 0.4) / 8) / ((4.0 − 0.4) / 4) = 0.7 / 0.9 = 0.778
#   end to end, three interleaved passes: (4/4.0)/(8/6.0) = 0.75, (4/4.4)/(8/5.5) = 0.625,
#   (4/3.6)/(8/6.6) = 0.9167; median 0.750

PASSES = {
    "speculative": {"seconds": [4.0, 4.4, 3.6], "tokens": [4, 4, 4]},
    "target-only": {"seconds": [6.0, 5.5, 6.6], "tokens": [8, 8, 8]},
}
ROUND_RECORD = {
    "key": [124, 140],
    "root_token": 43107,
    "num_nodes": 12,
    "draft_steps": 3,
    "accepted_length": 3,
    "draft_time_s": 0.3,
    "verify_time_s": 0.9,
}


def timed_article(
    directory: Path, timing: dict | None = None, record: dict | None = None, fast_speculative: bool = False
) -> Path:
    """article_by_hand plus a manifest with round timings and totals, as the harness writes them;
    ``timing`` is totals.timing (None: an older harness, baseline not interleaved)."""
    dump = article_by_hand(directory)
    totals = {
        "new_tokens": 4,
        "total_s": 4.0,
        "prefill_s": 0.4,
        "rounds": 1,
        "timing": timing,
        "baseline": {"new_tokens": 8, "total_s": 6.0, "prefill_s": 0.4, "rounds": 8},
    }
    if fast_speculative:  # 4 tokens in 1.0 s: decode only 0.7 / 0.15 = 4.67
        totals.update(total_s=1.0)
    body = {
        "config": {"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2]},
        "temperature": 0,
        "rounds": [record or ROUND_RECORD],
        "totals": totals,
    }
    (dump / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    return dump


def test_an_old_manifest_without_interleaved_timing_is_not_comparable(capsys, tmp_path):
    dump = timed_article(tmp_path / "old", timing=None)
    code, out, err = run(capsys, "compare", dump, "--no-progress")
    assert code == 0, err
    assert "measured speedup: not comparable: the target-only baseline was not timed together" in out
    assert "totals.timing is null" in out and "generate --baseline" in out
    recorded = next(line for line in out.splitlines() if line.strip().startswith("[6]|[2,2]|[1,1]"))
    assert recorded.rstrip().endswith("not comparable") and "0.778" not in out  # no number, measured or not
    assert "Traceback" not in err
    code, out, err = run(capsys, "compare", dump, "--json", "--no-progress")
    body = json.loads(out)
    assert (
        code == 0
        and body["measured"]["old"]["comparable"] is False
        and "totals.timing" in body["measured"]["old"]["reason"]
    )
    row = body["configs"][0]
    assert row["measured_speedup"] is None and row["measured_status"].startswith("not comparable: ")
    # the cost model does not take t_verify(1) from that baseline either, and says so
    assert "target-only baseline not timed together with these rounds" in body["cost_models"]["old"]["source"]


def test_a_fair_manifest_gives_both_measured_speedups_by_hand(capsys, tmp_path):
    dump = timed_article(tmp_path / "fair", timing={"repeats": 3, "methods": PASSES})
    code, out, err = run(capsys, "compare", dump, "--no-progress")
    assert code == 0 and "probably wrong" not in err, err
    assert "measured speedup (decode only, prefill excluded) 0.778" in out
    assert (
        "measured speedup (end to end, prefill included) 0.750 (median of 3 interleaved pass(es), passes 0.625-0.917"
        in out
    )
    assert "not comparable" not in out.split("definitions")[0]
    code, out, _ = run(capsys, "compare", dump, "--json", "--no-progress")
    m = json.loads(out)["measured"]["fair"]
    assert m["comparable"] is True and m["measured_speedup"] == pytest.approx(0.7 / 0.9)
    assert m["measured_speedup_wall"] == pytest.approx(0.75) and m["passes"] == pytest.approx(
        [0.75, 0.625, 4 / 3.6 / (8 / 6.6)]
    )


@pytest.mark.slow
def test_report_and_api_say_not_comparable_with_the_reason(capsys, tmp_path):
    from replay.cli import api

    old = timed_article(tmp_path / "old", timing=None)
    code, _, err = run(capsys, "report", old, "-o", tmp_path / "rep", "--no-tables", "--no-progress")
    assert code == 0 and "Traceback" not in err, err
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    speed = page[page.index("<h2>Speedup") : page.index("<h2>Accepted length")]
    assert "measured speedup: not comparable: the target-only baseline was not timed together" in speed
    assert "not comparable: " in speed and "0.778" not in speed
    table = api.speed(api.load(str(old)))
    assert table["measured_speedup"].isna().all() and table["measured_status"].iloc[0].startswith("not comparable: ")


def test_a_sweeps_separate_baseline_json_is_not_comparable(capsys, tmp_path):
    dump = timed_article(tmp_path / "sweep" / "dumps" / "6_2x2_1x1", timing=None)
    body = json.loads((dump / "manifest.json").read_text(encoding="utf-8"))
    baseline = body["totals"].pop("baseline")
    (dump / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    (tmp_path / "sweep" / "baseline.json").write_text(json.dumps({"summary": baseline}), encoding="utf-8")
    code, out, err = run(capsys, "compare", dump, "--no-progress")
    assert code == 0 and "Traceback" not in err
    assert_told(
        out, "measured speedup: not comparable", "the sweep's baseline.json, a separate run", "re-run the sweep"
    )


def test_modelled_columns_are_named_modelled(capsys, tmp_path):
    dump = timed_article(tmp_path / "run", timing={"repeats": 3, "methods": PASSES})
    code, out, err = run(capsys, "compare", dump, "--csv", "--top", "2", "--no-progress")
    assert code == 0, err
    header = out.splitlines()[0].split(",")
    assert {
        "modelled_speedup_lo",
        "modelled_speedup_hi",
        "measured_speedup",
        "measured_speedup_wall",
        "measured_status",
    } <= set(header)
    assert "speedup_lo" not in header and "speedup_hi" not in header  # a modelled number never reads as measured
    code, out, _ = run(capsys, "compare", dump, "--gamma-strategies", "0", "--json", "--no-progress")
    strategy = json.loads(out)["gamma_strategies"][0]
    assert code == 0 and "modelled_speedup_lo" in strategy and "speedup_lo" not in strategy


def test_a_measured_speedup_the_cost_data_contradicts_is_flagged(capsys, tmp_path):
    # claims 4.67x decode-only while the 13-token verify took 0.3 s against 0.7 s for one baseline decode
    dump = timed_article(
        tmp_path / "odd",
        timing={"repeats": 3, "methods": PASSES},
        fast_speculative=True,
        record=dict(ROUND_RECORD, verify_time_s=0.3),
    )
    code, out, err = run(capsys, "compare", dump, "--no-progress")
    assert code == 0  # a warning, not a skip: the input is used
    assert_told(
        err,
        "WARNING: odd: measured speedup (decode only, prefill excluded) 4.667 is probably wrong",
        "one verify of 13 tokens took 0.300 s",
        "less than one target-only decode (0.700 s",
        "never cheaper",
    )
    assert "probably wrong" not in out
    code, out, err = run(capsys, "compare", dump, "--json", "--no-progress")
    assert code == 0 and any("probably wrong" in w for w in json.loads(out)["warnings"]) and "probably wrong" in err


def test_rounds_that_replay_differently_from_the_manifest_are_flagged(capsys, tmp_path):
    # the harness recorded accepted length 2 and 10 nodes; the files replay to 3 and 12 (greedy, temperature 0)
    dump = timed_article(tmp_path / "mixed", timing=None, record=dict(ROUND_RECORD, accepted_length=2, num_nodes=10))
    code, out, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 0 and "probably wrong" not in out
    assert_told(
        err,
        "mixed: WARNING: 1 of 1 round(s) replay differently from what",
        "manifest.json records",
        "round 124_140: draft nodes 12 replayed, 10 recorded (num_nodes)",
        "accepted length 3 replayed, 2 recorded",
        "probably wrong",
        "--step0-offset",
    )
    # at temperature > 0 the harness sampled: a greedy replay accepts otherwise by design, only shapes are checked
    body = json.loads((dump / "manifest.json").read_text(encoding="utf-8"))
    body["temperature"] = 0.7
    body["rounds"][0]["num_nodes"] = 12
    (dump / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    code, _, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 0 and "replay differently" not in err


def test_a_manifest_stating_more_rounds_than_the_files_hold_exits_1(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "short")
    (dump / "manifest.json").write_text(json.dumps({"rounds": 3}), encoding="utf-8")
    code, out, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 1 and "states 3 round(s)" not in out
    assert_told(err, "manifest.json", "states 3 round(s); the file names form 1")


@pytest.mark.slow
def test_generate_and_compare_give_the_same_speedups_under_the_same_names(capsys, tmp_path):
    pytest.importorskip("torch", reason="needs the live extras")
    from replay.testing.tiny import build_word_tokenizer, save_hf_dir
    from tests.live_fixtures import make_pair

    draft, target = make_pair("qwen2")
    tok = build_word_tokenizer(64)
    save_hf_dir(target, tmp_path / "target", tok)
    save_hf_dir(draft, tmp_path / "draft", tok)
    (tmp_path / "prompts.jsonl").write_text("[1, 2, 3, 4]\n[50, 7]\n", encoding="utf-8")
    code, out, err = run(
        capsys,
        "generate",
        "--draft",
        tmp_path / "draft",
        "--target",
        tmp_path / "target",
        "--config",
        "1,1",
        "--prompts",
        tmp_path / "prompts.jsonl",
        "--max-new-tokens",
        "6",
        "--repeats",
        "1",
        "--baseline",
        "-o",
        tmp_path / "run",
        "--no-progress",
    )
    assert code == 0, err
    import re

    wall = re.search(r"^measured speedup \(end to end, prefill included\): (\d+\.\d{3})x", out, re.MULTILINE)
    decode = re.search(r"^measured speedup \(decode only, prefill excluded\): (\d+\.\d{3})x", out, re.MULTILINE)
    assert wall and decode, out
    assert "\nspeedup:" not in out  # no bare "speedup" that could be either
    totals = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))["totals"]
    assert wall.group(1) == f"{totals['speedup']:.3f}"  # the harness's own speedup is the end-to-end one
    code, out, err = run(capsys, "compare", tmp_path / "run", "--no-progress")
    assert code == 0, err
    assert f"measured speedup (decode only, prefill excluded) {decode.group(1)}:" in out
    assert f"measured speedup (end to end, prefill included) {wall.group(1)} (median of 1 interleaved pass(es)" in out


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


@pytest.mark.slow
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
        return  # the report builds the same default set (analysis.report.options): once is enough for it
    code, out, err = run(capsys, "report", dump, "-o", tmp_path / "rep", "--no-tables", "--no-progress")
    assert code == 0, err
    assert (tmp_path / "rep" / "index.html").is_file()


def test_every_default_narrowed_config_is_valid_and_narrower():
    """The narrowing rule (analysis.compare.subtree.fit_levels) on random valid configs: each default
    config validates (TreeConfig checks itself) and is contained in the recorded one."""
    from hypothesis import given, settings, strategies as st

    from analysis.compare.subtree import beyond_recorded
    from analysis.report.options import default_comparison_configs
    from replay.core.config import TREE_DYNAMIC, TREE_STATIC, check_tree
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


@pytest.mark.slow
def test_configs_replace_the_default_set(capsys, tmp_path, monkeypatch):
    """--configs replaces the default narrowed set: it is not even built."""
    import analysis.report.options

    def refuse(cfg):
        raise AssertionError("the default set was built")

    monkeypatch.setattr(analysis.report.options, "default_comparison_configs", refuse)
    dump = small_root_by_hand(tmp_path / "small")
    code, out, err = run(capsys, "compare", dump, "--configs", "[2]|[2]", "--no-progress")
    assert code == 0, err
    assert "[2]|[2]" in out
    code, _, err = run(
        capsys, "report", dump, "-o", tmp_path / "rep", "--configs", "[2]|[2]", "--no-tables", "--no-progress"
    )
    assert code == 0, err
    assert "[2]|[2]" in (tmp_path / "rep" / "index.html").read_text()


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize(
    "typo,told",
    [
        ("6,2x2,1xl", "width 'l' is not an integer"),
        ("[6]|[2,2]|[1,1", "unclosed bracket in [1,1;"),
        ("[2]|[1,1,1]", "topHead[1]': = 3 parents but level 1 has only 2"),  # the config's own check
        ("[6]|[2,2]@x", "gammaThreshold 'x' is not a number"),
        ("[6]|[2,2]@0.1|0.2", "gammaThreshold '0.1|0.2' is not a number"),  # the rank form takes one
        ("6,2x2@0|y", "gammaThreshold 'y' is not a number"),  # a grid form's alternatives, each
    ],
)
def test_a_configs_typo_fails_before_any_replay(capsys, tmp_path, monkeypatch, command, typo, told):
    import analysis.tables.runs

    def refuse(*a, **k):
        raise AssertionError("replayed before the configs were checked")

    monkeypatch.setattr(analysis.tables.runs, "load_runs", refuse)
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
    assert_told(
        err,
        "note:",
        "[3]|[2,1]|[1] is deeper or wider than the recorded [3]|[2,1] (gamma 3 > 2)",
        "3 of 3 round(s) are undecidable",
        "lo..hi bounds",
        "record a dump with a config that contains it",
    )
    assert "2.0000..3.0000" in out  # the bounds the note explains
    assert "[3]|[2,2] is deeper" not in err  # decided on every round (the rows hold 2 columns): nothing to explain


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", SYNTH],
        ["batch", SYNTH],
        ["plot", SYNTH, "-o", "{out}"],
        ["report", SYNTH, "-o", "{out}"],
    ],
)
def test_a_round_that_does_not_exist_is_exit_2_everywhere(capsys, tmp_path, monkeypatch, argv):
    """Finding 3: report drew another round and exited 0. Every command: exit 2, the nearest rounds."""
    if argv[0] in ("plot", "report"):  # checked on the names, before the replay
        import analysis.tables.runs

        monkeypatch.setattr(
            analysis.tables.runs, "load_runs", lambda *a, **k: (_ for _ in ()).throw(AssertionError("replayed first"))
        )
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys, *[str(a).replace("{out}", str(out_dir)) for a in argv], "--round", "124_141", "--no-progress"
    )
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
    assert code == 2 and out == ""
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


@pytest.mark.parametrize(
    "argv", [["stats", ARTICLE, "-o"], ["plot", ARTICLE, "-o"], ["report", ARTICLE, "-o"], ["pack", ARTICLE, "-o"]]
)
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
    assert_told(
        err,
        "--per-round",
        "is inside the input dump directory",
        "would list it as a skipped file",
        "write it beside the dump or into a subdirectory",
    )
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


@pytest.mark.parametrize(
    "options,told",
    [
        (["--csv", "--gamma-strategies"], ["--gamma-strategies with --csv", "use --json"]),
        (["--ema-window", "4"], ["--ema-window 4 without --gamma-strategies", "--gamma-strategies 1 4"]),
        (
            ["--gamma-strategies", "2", "--ema-window", "4"],
            ["--ema-window 4 with --gamma-strategies 2", "drop --ema-window"],
        ),
        (["--top", "-2"], ["argument --top", "at least 1, got -2"]),
        (["--json", "--csv"], ["not allowed with argument"]),
    ],
)
def test_compare_options_that_contradict(capsys, options, told):
    """Options that would be taken and then do nothing (or the opposite of what was meant)."""
    code, out, err = run(capsys, "compare", ARTICLE, *options, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, *told)
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("top", ["0", "-2"])
@pytest.mark.parametrize("t", [[], ["--temperature", "0.7"]], ids=["greedy", "T"])
def test_recommend_top_must_be_at_least_one(capsys, top, t):
    # new-user try 12: --top 0 was "internal error: IndexError" (greedy) or an empty table, exit 0 (T);
    # --top -2 dropped the last two shapes, taken as a Python slice
    code, out, err = run(capsys, "recommend", SYNTH, "--budget", "4", "--top", top, *t, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "argument --top", f"at least 1, got {top}")
    assert len(err.strip().splitlines()) == 1


# --- mistakes-polish: the smaller things a user noticed (issue 19, finding 12) -------------------
# A chain [1]|[1] typed in by hand, three rounds: the target takes the draft's top-1 at both depths
# (L = 2), at depth 1 only (L = 1), and the draft's rank 1 at the root (L = 0). So depth 1 is
# accepted in 2 rounds of 3: 0.667, whose 95% Wilson interval, worked by hand in
# tests/test_analysis_metrics.py (WILSON_BY_HAND), is [0.20766, 0.93851].

HAND_067 = (0.6667, 0.2077, 0.9385)  # 2 of 3: rate, Wilson 95% low, high (4 decimals)


def chain_by_hand(directory: Path, targets=((10, 20), (10, 99), (11, 5))) -> Path:
    """A [1]|[1] chain, all layout (a row for R, A1 and B11), one round per (target at R, at A1)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[1], [1]], [1, 1])
    for i, (at_root, at_a1) in enumerate(targets):
        a, b = 200 + 8 * i, 216 + 8 * i
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[10, 11]])  # R's candidates: A1 = 10, (rank 1: 11)
        write_matrix(directory / f"draft_step_1_{a}_{b}", [[20, 21]])  # A1's candidates: B11 = 20
        write_matrix(directory / f"validate_{a}_{b}", [[at_root], [at_a1], [30]])
    return directory


def capture_figures(monkeypatch, name: str) -> list:
    """Every Figure analysis.report.plots.NAME returns while a command runs (the drawn artists to inspect)."""
    from analysis.report import plots

    made, real = [], getattr(plots, name)
    monkeypatch.setattr(plots, name, lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    return made


def whiskers(ax) -> list[tuple[float, float, float]]:
    """(x, low, high) of every vertical error bar drawn on ``ax``."""
    from matplotlib.container import ErrorbarContainer

    out = []
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            for coll in c.lines[2]:
                out += [(float(s[0][0]), float(s[0][1]), float(s[1][1])) for s in coll.get_segments()]
    return out


def test_recommend_numbers_depths_as_stats_does(capsys, tmp_path):
    dump = chain_by_hand(tmp_path / "chain")
    code, out, err = run(capsys, "stats", dump, "--json", "--no-progress")
    assert code == 0 and "Traceback" not in err
    depth = {row["depth"]: row for row in json.loads(out)["depth_acceptance"]}
    assert sorted(depth) == [1, 2]  # depth 1 = the first draft token
    code, out, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 0 and "== depth_acceptance (depth d = the d-th draft token: 1 = the root's children" in out
    code, out, err = run(capsys, "recommend", dump, "--budget", "2", "--bootstrap", "5", "--no-progress")
    assert code == 0, err
    assert "acceptance by depth (depth d = the d-th draft token: 1 = the root's children" in out
    assert "  depth 0:" not in out
    # recommend's visits at depth d are stats's attempts at depth d (every node here has a target row)
    assert f"  depth 1: {depth[1]['attempts']} visits; r0 0.667 [0.208,0.939]" in out
    assert f"  depth 2: {depth[2]['attempts']} visits;" in out
    assert "refused depths beyond 1: depth 2 has " in out and "fewer than --min-count 30" in out
    code, out, err = run(capsys, "recommend", dump, "--budget", "2", "--bootstrap", "5", "--json", "--no-progress")
    assert code == 0 and json.loads(out)["model"]["depths"] == [1, 2]


def test_recommend_says_why_a_depth_has_no_estimate_and_how_to_get_one(capsys, tmp_path):
    dump = chain_by_hand(tmp_path / "chain")  # depth 2: 2 visits, fewer than --min-count 30
    code, out, err = run(capsys, "recommend", dump, "--budget", "2", "--bootstrap", "5", "--no-progress")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("  depth 2:"))
    assert "extrapolated" not in line  # --extrapolate was not given: nothing was extrapolated
    assert (
        "fewer than 30 visits (--min-count): no estimate, so the search stops at depth 1; "
        "--extrapolate would reuse depth 1's estimate" in line
    )
    code, out, err = run(
        capsys, "recommend", dump, "--budget", "2", "--bootstrap", "5", "--no-progress", "--extrapolate"
    )
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("  depth 2:"))
    assert "fewer than 30 visits (--min-count): --extrapolate uses depth 1's estimate here" in line
    code, out, err = run(
        capsys, "recommend", dump, "--budget", "2", "--bootstrap", "5", "--no-progress", "--min-count", "2"
    )
    assert code == 0 and "no estimate" not in out and "--extrapolate uses" not in out  # enough visits: estimated


@pytest.mark.slow
def test_per_depth_acceptance_from_three_rounds_shows_its_interval_and_n(capsys, tmp_path, monkeypatch):
    dump = chain_by_hand(tmp_path / "chain")
    rate, lo, hi = HAND_067
    code, out, err = run(capsys, "stats", dump, "--json", "--no-progress")
    assert code == 0 and "Traceback" not in err
    d1 = json.loads(out)["depth_acceptance"][0]
    assert (d1["depth"], d1["rounds"], d1["reached"]) == (1, 3, 2)
    assert round(d1["per_position_acceptance_rate"], 4) == rate
    assert (
        round(d1["per_position_acceptance_rate_ci95_lo"], 4),
        round(d1["per_position_acceptance_rate_ci95_hi"], 4),
    ) == (lo, hi)
    code, out, err = run(capsys, "stats", dump, "--table", "depth_acceptance", "--csv", "--no-progress")
    assert code == 0 and "conditional_ci95_lo,conditional_ci95_hi" in out.splitlines()[0]
    code, out, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 0 and f"{rate:.4f} [{lo:.4f},{hi:.4f}] n=3" in out  # what a reader sees: not a bare 0.667
    figures = capture_figures(monkeypatch, "plot_depth_acceptance")
    code, out, err = run(capsys, "plot", dump, "-o", tmp_path / "plots", "--format", "png", "--no-progress")
    assert code == 0 and (tmp_path / "plots" / "depth_acceptance.png").is_file(), err
    per_position = figures[0].axes[1]
    bars = {round(x, 6): (round(a, 4), round(b, 4)) for x, a, b in whiskers(per_position)}
    assert (lo, hi) in bars.values()  # the whisker spans the interval
    assert "n=3" in [t.get_text() for t in per_position.texts]


def test_compare_plot_draws_no_zero_height_whisker(capsys, tmp_path, monkeypatch):
    # [2]|[1,1] expands A2 too, whose row the recording lacks: the round whose target took 11 at the
    # root is undecidable there (a range), while the recorded [1]|[1] is decided (one number)
    dump = chain_by_hand(tmp_path / "chain")
    figures = capture_figures(monkeypatch, "plot_compare_configs")
    code, out, err = run(
        capsys, "compare", dump, "--configs", "[2]|[1,1]", "--plot", tmp_path / "cmp.png", "--no-progress"
    )
    assert code == 0 and (tmp_path / "cmp.png").is_file(), err
    assert "1.3333..1.6667" in out  # the undecidable config's range, as the table prints it
    for ax in figures[0].axes:
        drawn = whiskers(ax)
        assert len(drawn) == 1, drawn  # one range, none for the decided config
        ((x, low, high),) = drawn
        assert x == 1.0 and high > low


@pytest.fixture(scope="module")
def two_run_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    first, second = chain_by_hand(root / "first"), chain_by_hand(root / "second", ((10, 20), (10, 20), (11, 5)))
    proc = shell("report", first, second, "-o", root / "rep", "--no-progress")
    html = (root / "rep" / "index.html").read_text(encoding="utf-8") if proc.returncode == 0 else ""
    return proc, html


@pytest.mark.slow
def test_report_summary_has_no_stray_metric_row(two_run_report):
    import re

    proc, html = two_run_report
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    summary = html.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    head = summary.split("<thead>", 1)[1].split("</thead>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", head, re.DOTALL)
    assert len(rows) == 1, head  # one header row: metric, then one column per run
    assert re.findall(r"<th>(.*?)</th>", rows[0]) == ["metric", "first", "second"]


@pytest.mark.slow
def test_report_shows_per_depth_intervals_and_n(two_run_report):
    proc, html = two_run_report
    assert proc.returncode == 0, proc.stderr
    rate, lo, hi = HAND_067
    section = html.split("<h2>Per-depth acceptance</h2>", 1)[1].split("<h2>", 1)[0]
    assert f"{rate:.4f} [{lo:.4f},{hi:.4f}] n=3" in section  # the first run's depth 1
    assert "95% Wilson interval" in section and "depth d = the d-th draft token" in section


def test_output_schema_md_names_the_selection_value_users_filter_on(capsys, tmp_path):
    """docs/output-schema.md said path_prob; the data says path_probability. A user filtering on the
    documented word found nothing. Every column and selection word the doc names is in the data."""
    import re

    code, out, err = run(capsys, "replay", SYNTH, "--json")
    assert code == 0 and "Traceback" not in err
    lines = [json.loads(ln) for ln in out.splitlines()]
    doc = (ROOT / "docs" / "output-schema.md").read_text(encoding="utf-8")
    row = next(ln for ln in doc.splitlines() if ln.startswith("| `selection` |"))
    named = set(re.findall(r"`([a-z_]+)`", row.split("|")[3]))
    used = {obj["selection"] for obj in lines}
    assert used <= named and "path_probability" in used  # the sample has scores
    table = doc.split("Columns, in this order", 1)[1].split("\n\n", 2)[1]
    columns = [
        c for ln in table.splitlines() if ln.startswith("| `") for c in re.findall(r"`([a-z_]+)`", ln.split("|")[1])
    ]
    assert all(list(obj) == columns for obj in lines)


def io_text(text: str):
    import io

    return io.StringIO(text)


def test_an_unknown_root_token_is_null_in_both_tables(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")  # no manifest: the dump does not say the root token
    code, out, err = run(capsys, "stats", dump, "--table", "rounds", "--json", "--no-progress")
    assert code == 0 and "Traceback" not in err
    assert json.loads(out)[0]["root_token"] is None
    code, out, err = run(capsys, "stats", dump, "--table", "nodes", "--json", "--no-progress")
    assert code == 0
    nodes = json.loads(out)
    assert nodes[0]["name"] == "R" and nodes[0]["token"] is None  # was -1 here, null in the round table
    assert all(n["token"] is None or n["token"] >= 0 for n in nodes)
    code, out, err = run(capsys, "stats", dump, "--table", "nodes", "--csv", "--no-progress")
    header, root = out.splitlines()[:2]
    assert root.split(",")[header.split(",").index("token")] == ""  # empty, as root_token in rounds.csv
    with_root = article_by_hand(tmp_path / "known")
    (with_root / "manifest.json").write_text(json.dumps({"rounds": [{"key": [124, 140], "root_token": 43107}]}))
    code, out, err = run(capsys, "stats", with_root, "--table", "nodes", "--json", "--no-progress")
    assert code == 0 and json.loads(out)[0]["token"] == 43107, err


def test_an_unknown_bonus_kind_is_none_in_every_output(capsys, tmp_path):
    import pandas as pd

    from replay.core import records

    dump = article_by_hand(tmp_path / "mine")  # parents layout, the path ends on a leaf: no bonus row
    code, out, err = run(capsys, "replay", dump, "--json")
    assert code == 0 and '"bonus_kind": null' in out
    loaded = {"replay --json": records.read_json(io_text(out))}
    for ext in ("parquet", "csv"):
        code, _, err = run(capsys, "batch", dump, "-o", tmp_path / f"r.{ext}", "--no-progress")
        assert code == 0, err
    loaded["batch -o .parquet"] = pd.read_parquet(tmp_path / "r.parquet")  # the documented one-liners
    loaded["batch -o .csv"] = records.read_csv(tmp_path / "r.csv")
    code, out, err = run(capsys, "stats", dump, "--table", "rounds", "--json", "--no-progress")
    loaded["stats --table rounds --json"] = records.read_json(io_text(out))
    for what, frame in loaded.items():
        assert frame["bonus_kind"].tolist() == [None], what  # docs: None, never NaN
        assert frame["bonus_token"].isna().all() and str(frame["root_token"].dtype) == "Int64", what


@pytest.mark.slow
def test_sweep_prints_each_config_in_one_spelling(capsys, tmp_path):
    """The table said 4_1x1 and the prediction lines [4]|[1,1]: one output, two spellings."""
    import re

    pytest.importorskip("torch", reason="needs torch (the live extras): pip install 'specreplay[live]'")
    from replay.testing.tiny import build_word_tokenizer, save_hf_dir
    from tests.live_fixtures import make_pair

    draft, target = make_pair("qwen2")
    d = tmp_path / "models"
    save_hf_dir(target, d / "target", build_word_tokenizer(64))
    save_hf_dir(draft, d / "draft", build_word_tokenizer(64))
    (d / "prompts.jsonl").write_text('{"prompt_ids": [1, 2, 3, 4]}\n[50, 7]\n')
    capsys.readouterr()
    code, out, err = run(
        capsys,
        "sweep",
        "--draft",
        d / "draft",
        "--target",
        d / "target",
        "--prompts",
        d / "prompts.jsonl",
        "--grid",
        "1,1;2;4,1x1",
        "--max-new-tokens",
        "8",
        "--repeats",
        "1",
        "-o",
        tmp_path / "sw",
        "--no-progress",
    )
    assert code == 0 and "Traceback" not in err, err
    table = [ln.split()[0] for ln in out.splitlines()[1:4]]
    assert table == ["[1]|[1]", "[2]", "[4]|[1,1]"]  # the canonical form (replay/core/config_grammar.py)
    assert "exact replay on the rounds of [4]|[1,1];" in out
    for other in ("1_1", "4_1x1", "1,1", "4,1x1"):  # the run-name and grid forms of the same configs
        assert not re.search(rf"(?<![\w\[,|/]){re.escape(other)}(?![\w\],|])", out.replace(str(tmp_path), "DIR")), other


# --- mistakes-vocab: numbers a user misreads (findings 8, 10, 11) -------------------------------


def _stats_json(capsys, *argv) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "stats", *argv, "--json", "--no-progress")
    return code, (json.loads(out) if code == 0 else {}), err


def _hits(body: dict) -> tuple[dict, dict]:
    """node_hits by name and slot_hits by (depth, parent_slot, rank): (rounds_present, on_path)."""
    nodes = {r["name"]: (r["rounds_present"], r["on_path"]) for r in body["node_hits"]}
    slots = {(r["depth"], r["parent_slot"], r["rank"]): (r["rounds_present"], r["on_path"]) for r in body["slot_hits"]}
    return nodes, slots


def test_node_hits_of_a_round_that_expanded_A2_and_A3_name_the_nodes_it_reached(capsys, tmp_path):
    """An engine that expands A2 and A3 at step 1 (explicit parents, docs/dump-format.md): the path
    A2 → B21 → C211 used to be counted under "B11, parent 1", a node that did not even exist."""
    dump = tmp_path / "a2a3"
    dump.mkdir()
    write_config(dump / "config.json", [[6], [2, 2], [1, 1]], [1, 2, 2])
    write_matrix(dump / "draft_step_0_123_139", [[41824, 43744, 44298, 34051, 28380, 37539]])
    write_matrix(dump / "draft_step_1_124_140", [[45315, 41760], [11111, 22222]])  # rows of A2, A3
    write_matrix(dump / "draft_step_1_124_140.parents", [[2], [3]])
    write_matrix(dump / "draft_step_2_124_140", [[22870], [33333]])  # rows of B21 (node 7), B31 (node 9)
    write_matrix(dump / "draft_step_2_124_140.parents", [[7], [9]])
    write_matrix(dump / "validate_124_140", [[43744], [45315], [5], [22870], [6]])  # R, A2, A3, B21, B31
    code, body, err = _stats_json(capsys, dump)
    assert code == 0 and "Traceback" not in err, err
    nodes, slots = _hits(body)
    # by node: what the round drew, by hand (R → A2 → B21 → C211); A1's children were never drafted
    assert {n for n, (_, hit) in nodes.items() if hit} == {"R", "A2", "B21", "C211"}
    assert "B11" not in nodes and "C111" not in nodes
    assert {r["name"]: r["parent_name"] for r in body["node_hits"]}["B21"] == "A2"
    # by slot: the same path is "top-1 child of the 1st expanded parent" at depths 2 and 3, and says so
    assert slots[(2, 0, 0)] == (1, 1) and slots[(3, 0, 0)] == (1, 1) and slots[(1, 0, 1)] == (1, 1)
    names = {r["slot_name"] for r in body["slot_hits"] if r["on_path"]}
    assert names == {"R", "A:p1c2", "B:p1c1", "C:p1c1"}
    assert all("parent" not in r for r in body["slot_hits"])  # no column that reads as a node id


def test_node_hits_when_path_probability_expands_two_children_of_A1(capsys, tmp_path):
    """Scores make step 2 expand B11 and B12 (both under A1), not the fallback's B11, B21: the path
    A1 → B12 → C121 is C121 by node and C:p2c1 by slot, never "C211, parent 9"."""
    dump = tmp_path / "scored"
    dump.mkdir()
    write_config(dump / "config.json", [[6], [2, 2], [1, 1]], [1, 2, 2])
    steps = {
        "draft_step_0_123_139": ([[41824, 43744, 44298, 34051, 28380, 37539]], [[0.5, 0.2, 0.1, 0.1, 0.05, 0.05]]),
        "draft_step_1_124_140": ([[41760, 35740], [45315, 41760]], [[0.6, 0.4], [0.5, 0.5]]),  # A1, A2
        "draft_step_2_124_140": ([[22870], [33333]], [[0.9], [0.8]]),  # B11 (0.30) and B12 (0.20) beat B21, B22 (0.10)
    }
    for name, (ids, probs) in steps.items():
        write_matrix(dump / name, ids)
        (dump / f"{name}.scores").write_text("".join(" ".join(str(p) for p in row) + "\n" for row in probs))
    write_matrix(dump / "validate_124_140", [[41824], [35740], [1], [2], [33333]])  # R, A1, A2, B11, B12
    code, out, err = run(capsys, "replay", dump)
    assert code == 0 and "selection path_probability" in out and "expanded at step 2: B11, B12" in out, out + err
    code, body, err = _stats_json(capsys, dump)
    assert code == 0, err
    nodes, slots = _hits(body)
    assert {n for n, (_, hit) in nodes.items() if hit} == {"R", "A1", "B12", "C121"}
    assert "C211" not in nodes  # B21 was not expanded: no C211 in this round
    assert slots[(3, 1, 0)] == (1, 1) and slots[(3, 0, 0)] == (1, 0)
    assert {r["slot_name"]: r["on_path"] for r in body["slot_hits"]}["C:p2c1"] == 1


@pytest.mark.slow
def test_node_and_slot_hits_match_an_oracle_on_random_dumps(capsys, tmp_path):
    """Random path-probability dumps (tests/analysis_oracle.py, some early stops): node and slot hits
    as `stats --json` prints them equal counts made from the recorder's own trees and a greedy walk."""
    from replay.core.config import TreeConfig
    from replay.core.tree import node_name
    from tests.analysis_oracle import random_oracle, record_round, write_oracle_run

    cfg = TreeConfig.from_lists([[4], [2, 2], [2, 1]], [1, 2, 2])
    for seed in (3, 11):
        draft, target = random_oracle(seed, cols=4, flat=2.0)
        rng = __import__("numpy").random.default_rng(seed)
        roots = [int(v) for v in rng.integers(0, 5000, size=40)]
        steps = [3 if v else 2 for v in rng.random(40) > 0.2]
        dump = tmp_path / f"oracle{seed}"
        write_oracle_run(dump, cfg, roots, steps, draft, target, rule="path", layout="parents")
        want_nodes: dict = {}
        want_slots: dict = {}
        for root, n in zip(roots, steps):
            rec = record_round(cfg, root, n, draft, target, "path")
            paths, ranks, parent, key = [(root,)], [()], [-1], [(0, -1, -1)]
            for i, step in enumerate(rec.steps):
                for j, u in enumerate(step.parents.tolist()):
                    for r in range(cfg.top_k_spec[i][j]):
                        paths.append(paths[u] + (int(step.ids[j, r]),))
                        ranks.append(ranks[u] + (r,))
                        parent.append(u)
                        key.append((i + 1, j, r))
            on, u = {0}, 0
            while True:  # greedy: the target's top-1 at u against u's children, lowest rank first
                kids = [v for v in range(len(paths)) if parent[v] == u]
                nxt = [v for v in kids if paths[v][-1] == int(target(paths[u])[0])]
                if not kids or not nxt:
                    break
                u = nxt[0]
                on.add(u)
            for v in range(len(paths)):
                for table, k in ((want_nodes, node_name(list(ranks[v]))), (want_slots, key[v])):
                    present, hit = table.get(k, (0, 0))
                    table[k] = (present + 1, hit + (v in on))
        code, body, err = _stats_json(capsys, dump)
        assert code == 0, err
        nodes, slots = _hits(body)
        assert nodes == want_nodes
        assert slots == want_slots
        assert sum(hit for (_, hit) in nodes.values()) > 40 + 40  # paths of several tokens: the check has teeth
        assert any(name.startswith("B2") and hit for name, (_, hit) in nodes.items())  # a path under A2: slots ≠ nodes


def test_parents_layout_dump_shows_one_acceptance_length_labelled_derived(capsys, tmp_path):
    """Finding 10: the article's round in the parents layout once printed block efficiency 3 beside
    the engine's 4. The engine committed 4 tokens; the dump holds 3. One number, said to be derived."""
    dump = article_by_hand(tmp_path / "art")
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 0 and without_fallback_warning(err) == ""
    assert (
        "mean acceptance length (bonus included): 4.0000  (derived: accepted + 1; "
        "the dump holds the bonus token of 0 of 1 round(s))"
    ) in out
    assert "block efficiency" not in out and "3.0000" in out  # 3 is only the accepted length now
    assert "mean accepted length (bonus excluded): 3.0000" in out
    code, out, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 0
    assert (
        "note: art: mean_acceptance_length 4.0000 is derived (accepted + 1): the dump holds the bonus token of 0 of 1 round(s)"
        in out
    )
    code, body, err = _stats_json(capsys, dump)
    (row,) = body["summary"]
    assert "block_efficiency" not in row and "engine_block_efficiency" not in row
    assert (row["mean_acceptance_length"], row["mean_accepted_length"], row["bonus_known_fraction"]) == (4.0, 3.0, 0.0)


def test_a_dump_with_some_bonus_tokens_says_how_many_it_holds(capsys, tmp_path):
    """Two parents-layout rounds: the article's (leaf: no row, bonus unknown) and one that misses at
    the root (the root's row is the correction). 1 of 2 known; acceptance length (4 + 1) / 2."""
    dump = article_by_hand(tmp_path / "two")
    article_by_hand(dump, step0_key=(131, 147), key=(132, 148))
    write_matrix(dump / "validate_132_148", [[99999], [41760], [45315], [22870], [22870]])  # R's top-1 matches no child
    code, out, err = run(capsys, "batch", dump)
    assert code == 0, err
    assert (
        "mean acceptance length (bonus included): 2.5000  (derived: accepted + 1; the dump holds the bonus token of 1 of 2 round(s))"
        in out
    )
    assert "2.0000" not in out  # the old as-dumped block efficiency, (3 + 1) / 2, is not shown under any name
    assert "mean accepted length (bonus excluded): 1.5000" in out and "(3 accepted / 24 drafted tokens)" in out


def test_the_article_round_headline_checked_by_hand(capsys):
    """The article's round: 3 accepted of 12 drafted nodes; vLLM's acceptance length counts the
    target's token: 4 (derived); every depth reached once in one round. replay, stats, compare agree."""
    code, out, err = run(capsys, "replay", ARTICLE, "--summary")
    assert code == 0
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "mean acceptance length" in line)
    assert (
        lines[first].strip().startswith("mean acceptance length (bonus included): 4.0000  (derived")
    )  # leads the figures
    assert (
        lines[first + 1].strip() == "draft acceptance rate: 0.2500  (3 accepted / 12 drafted tokens)"
    )  # 3 / 12 by hand
    assert lines[first + 2].strip() == "per-position acceptance rate P(L >= d): d1: 1.0000  d2: 1.0000  d3: 1.0000"
    assert lines[first + 3].strip() == "mean accepted length (bonus excluded): 3.0000"
    code, out, err = run(capsys, "compare", ARTICLE, "--configs", "[6]|[2,2]|[1,1]", "--json", "--no-progress")
    assert code == 0
    (row,) = json.loads(out)["configs"]
    assert (
        row["mean_acceptance_length_lo"],
        row["draft_acceptance_rate_lo"],
        row["per_position_acceptance_rate_lo"],
    ) == (4.0, 0.25, [1.0, 1.0, 1.0])
    assert "engine_block_efficiency_lo" not in row
    code, out, err = run(capsys, "compare", ARTICLE, "--configs", "[6]|[2,2]|[1,1]", "--no-progress")
    header = next(line for line in out.splitlines() if line.split()[:1] == ["config"]).split()
    assert header[6:10] == [
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "per_position_acceptance_rate",
        "mean_accepted_length",
    ]
    assert "derived for every row" in out


def _chain_dump(directory: Path) -> Path:
    """A chain [1]|[1]|[1] in the all layout, 4 rounds typed in: L = 3 (leaf), 1, 0, 2."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[1], [1], [1]], [1, 1, 1])
    targets = [[11, 12, 13, 99], [11, 50, 1, 1], [60, 1, 1, 1], [11, 12, 70, 1]]  # top-1 at R, n1, n2, n3
    for k, rows in enumerate(targets):
        a, b = 200 + 8 * k, 216 + 8 * k
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[11]])
        write_matrix(directory / f"draft_step_1_{a}_{b}", [[12]])
        write_matrix(directory / f"draft_step_2_{a}_{b}", [[13]])
        write_matrix(directory / f"validate_{a}_{b}", [[t] for t in rows])
    return directory


def test_a_vllm_user_finds_vllms_definitions(capsys, tmp_path):
    """A vLLM user reads 'mean acceptance length' as 1 + accepted / drafts and 'draft acceptance
    rate' as accepted / draft tokens. On a chain (drafts = rounds, draft tokens = steps) those are
    computed here from the per-round JSON, the way vLLM's counters add up, and must be what we print."""
    dump = _chain_dump(tmp_path / "chain")
    code, out, err = run(capsys, "replay", dump, "--json")
    assert code == 0, err
    rounds = [json.loads(line) for line in out.splitlines()]
    accepted = sum(r["accepted_length"] for r in rounds)
    drafts, draft_tokens = len(rounds), sum(r["num_nodes"] for r in rounds)
    assert (accepted, drafts, draft_tokens) == (6, 4, 12)
    vllm_mean_acceptance_length = 1 + accepted / drafts  # 2.5
    vllm_draft_acceptance_rate = accepted / draft_tokens  # 0.5
    for argv in (("replay", dump, "--summary"), ("batch", dump)):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert (
            f"mean acceptance length (bonus included): {vllm_mean_acceptance_length:.4f}  (every round's bonus token is in the dump)"
            in out
        )
        assert f"draft acceptance rate: {vllm_draft_acceptance_rate:.4f}  (6 accepted / 12 drafted tokens)" in out
        # vLLM's per-position rate is over all drafts: 3/4, 2/4, 1/4 (the conditional at d2 would be 2/3)
        assert "per-position acceptance rate P(L >= d): d1: 0.7500  d2: 0.5000  d3: 0.2500" in out
    code, body, err = _stats_json(capsys, dump)
    (row,) = body["summary"]
    assert (
        row["mean_acceptance_length"] == vllm_mean_acceptance_length
        and row["draft_acceptance_rate"] == vllm_draft_acceptance_rate
    )
    depth = {r["depth"]: r for r in body["depth_acceptance"]}
    assert depth[2]["per_position_acceptance_rate"] == 0.5 and depth[2]["conditional"] == pytest.approx(2 / 3)
    (d,) = [d for d in body["definitions"] if d["name"] == "mean_acceptance_length"]
    assert (
        "vLLM 'Mean acceptance length' (1 + accepted / drafts)" in d["engines"]
        and "SGLang 'accept length'" in d["engines"]
    )
    assert "block_efficiency" in d["engines"]  # the seed engine's word maps to this number, not to another


def test_the_readme_shows_what_replay_prints(capsys, monkeypatch):
    """The README's shown replay of the article's round (tree, path, summary headline) is the output."""
    monkeypatch.chdir(ROOT)  # the README runs it from the checkout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("The replay of the article's round prints")
    block = readme[readme.index("```\n", start) + 4 : readme.index("```", readme.index("```\n", start) + 4)]
    shown = [line for line in block.splitlines() if line.strip() != "..."]
    code, out, err = run(capsys, "replay", "sample_dumps/article_round")
    assert code == 0
    lines = out.splitlines()
    at = [lines.index(line) for line in shown]  # each shown line is printed, in this order
    assert at == sorted(at), "README lines out of order"
    assert "mean acceptance length (bonus included): 4.0000" in block
    # mistakes-round2: up to its "...", the README leaves no line out (it left out a WARNING note),
    # and the stderr line it shows next is what replay writes there
    cut = block.splitlines().index("  ...")
    assert lines[:cut] == block.splitlines()[:cut]
    after = readme[readme.index("```", readme.index("```\n", start) + 4) + 3 :]
    err_block = after[after.index("```\n") + 4 : after.index("```", after.index("```\n") + 4)]
    assert err_block.splitlines() == err.splitlines()


def test_generate_headline_is_what_its_dump_holds(capsys, tmp_path):
    """`generate` leads with vLLM's numbers; a user recomputes them from the dump it wrote
    (manifest rounds) by hand: 1 + ΣL/R, ΣL/Σnodes, P(L >= d)."""
    pytest.importorskip("torch", reason="needs torch (the live extras)")
    pytest.importorskip("transformers", reason="needs transformers (the live extras)")
    from replay.testing.tiny import build_word_tokenizer, save_hf_dir
    from tests.live_fixtures import make_pair

    draft, target = make_pair("qwen2")
    tok = build_word_tokenizer(64)
    save_hf_dir(target, tmp_path / "target", tok)
    save_hf_dir(draft, tmp_path / "draft", tok)
    (tmp_path / "prompts.txt").write_text("t1 t2 t3 t4\nt50 t7\n")
    write_config(tmp_path / "tree.json", [[4], [2, 2], [1, 1]], [1, 2, 2])
    code, out, err = run(
        capsys,
        "generate",
        "--draft",
        tmp_path / "draft",
        "--target",
        tmp_path / "target",
        "--config",
        tmp_path / "tree.json",
        "--prompts",
        tmp_path / "prompts.txt",
        "--max-new-tokens",
        "16",
        "--repeats",
        "1",
        "--out",
        tmp_path / "run",
        "--no-progress",
    )
    assert code == 0, err
    rounds = json.loads((tmp_path / "run" / "manifest.json").read_text())["rounds"]
    L = [r["accepted_length"] for r in rounds]
    lines = out.splitlines()
    assert (
        lines[0]
        == f"mean acceptance length (bonus included): {1 + sum(L) / len(L):.4f}  (counted: a live round always commits the target's token)"
    )
    assert (
        lines[1]
        == f"draft acceptance rate: {sum(L) / sum(r['num_nodes'] for r in rounds):.4f}  ({sum(L)} accepted / {sum(r['num_nodes'] for r in rounds)} drafted tokens)"
    )
    per_position = "  ".join(f"d{d}: {sum(v >= d for v in L) / len(L):.4f}" for d in (1, 2, 3))
    assert lines[2] == f"per-position acceptance rate P(L >= d): {per_position}"
    assert not any(line.startswith("block efficiency") for line in lines)  # one name for the number


@pytest.mark.slow
def test_the_report_of_a_parents_layout_dump_says_derived(capsys, tmp_path):
    """The HTML report shows the one acceptance length, says it is derived, and keeps slots and nodes
    apart (two tables, each saying what it counts)."""
    dump = article_by_hand(tmp_path / "art")
    code, out, err = run(capsys, "report", dump, "-o", tmp_path / "rep", "--no-progress", "--no-tables")
    assert code == 0 and "Traceback" not in err, err
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert (
        "note: art: mean_acceptance_length 4.0000 is derived (accepted + 1): the dump holds the bonus token of 0 of 1 round(s)"
        in page
    )
    assert "<th>mean_acceptance_length</th>" in page and "block_efficiency</th>" not in page
    assert "per-slot hit table (slot_hits)" in page and "per-node hit table (node_hits" in page


# --- mistakes-reading: how a hand-made dump is read (findings 2, 4, 5, 7 and more) ---------------


ARTICLE_STEPS = ([[41824, 43744, 44298, 34051, 28380, 37539]], [[41760, 35740], [45315, 41760]], [[22870], [22870]])
ARTICLE_VALIDATE = [[41824], [41760], [45315], [22870], [22870]]
NEG_INF = float("-inf")  # probability 0: what a greedy run's T = 0 column holds off the top-1


def rounds_by_hand(
    directory: Path,
    rounds: int = 6,
    step0_shift: int = 1,
    stride: int = 1,
    first: tuple[int, int] = (10, 20),
    validate_name: str = "validate",
    manifest: dict | None = None,
) -> list[tuple[int, int]]:
    """Several rounds of the article's tree, each round's tokens moved by 1000 × its index, so a
    round given its neighbour's step 0 accepts nothing. step0_shift: how many positions step 0 is
    named before its round (the article's rule is 1; an engine that names it with the round's own
    key gives 0). Returns the round keys."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[6], [2, 2], [1, 1]], [1, 2, 2])
    keys = []
    for r in range(rounds):
        a, b = first[0] + r * stride, first[1] + r * stride
        moved = lambda rows, t=1000 * r: [[v + t for v in row] for row in rows]  # noqa: E731
        write_matrix(directory / f"draft_step_0_{a - step0_shift}_{b - step0_shift}", moved(ARTICLE_STEPS[0]))
        write_matrix(directory / f"draft_step_1_{a}_{b}", moved(ARTICLE_STEPS[1]))
        write_matrix(directory / f"draft_step_2_{a}_{b}", moved(ARTICLE_STEPS[2]))
        write_matrix(directory / f"{validate_name}_{a}_{b}", moved(ARTICLE_VALIDATE))
        keys.append((a, b))
    if manifest is not None:
        (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return keys


def stats_summary(capsys, *argv) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "stats", *argv, "--json", "--no-progress")
    return code, (json.loads(out)["summary"][0] if out else {}), err


@pytest.mark.parametrize("stride", [1, 8])  # consecutive keys (each round got its neighbour's step 0), or gaps
def test_step0_files_named_with_their_rounds_own_key_are_grouped_at_offset_0(capsys, tmp_path, stride):
    """Finding 2: draft_step_0_10_20 with validate_10_20 replayed as all zeros (stride 1) or as no
    round at all (stride 8), exit 0 or 1, with only a 'missing draft_step_0_9_19' line as a hint."""
    dump = tmp_path / "engine"
    rounds_by_hand(dump, step0_shift=0, stride=stride)
    code, summary, err = stats_summary(capsys, dump)
    assert code == 0, err
    assert (
        summary["rounds"] == 6 and summary["mean_accepted_length"] == 3.0 and summary["draft_acceptance_rate"] == 0.25
    )
    assert_told(err, "step-0 offset 0 detected", "draft_step_0_10_20 with validate_10_20", "--step0-offset 0")
    assert len(without_fallback_warning(err).strip().splitlines()) == 1  # one line says it
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 0 and "rounds replayed: 6   skipped: 0" in out and "histogram" in out
    assert_told(err, "pin it with --step0-offset 0")
    assert "step-0" not in out  # stdout keeps the results only


def test_step0_offset_detection_holds_in_every_reading_path(capsys, tmp_path):
    """The scalar reader, the bulk text reader (replay --json / batch), pack and the packed run agree."""
    dump = tmp_path / "engine"
    rounds_by_hand(dump, step0_shift=0)
    code, scalar, err = run(capsys, "replay", dump, "--json", "--workers", "1")
    assert code == 0 and len(scalar.splitlines()) == 6 and "--step0-offset 0" in err
    assert all(json.loads(line)["accepted_length"] == 3 for line in scalar.splitlines())
    code, batch, err = run(capsys, "batch", dump, "--json", "--workers", "1", "--no-progress")
    assert (code, batch) == (0, scalar) and "--step0-offset 0" in err
    code, out, err = run(capsys, "pack", dump, "-o", tmp_path / "run", "--workers", "1", "--no-progress")
    assert code == 0 and "specreplay: wrote 6 of 6 round(s) to " in err
    assert_told(err, "step-0 offset 0 detected", "--step0-offset 0")
    code, packed, err = run(capsys, "replay", tmp_path / "run", "--json")
    assert (code, packed) == (0, scalar)
    assert_told(err, "step-0 offset 0 detected", "packed with it")  # the packed run repeats the note


@pytest.mark.parametrize("stated", ["option", "manifest"])
def test_a_stated_step0_offset_wins_but_a_better_one_is_named(capsys, tmp_path, stated):
    """--step0-offset 1 (or a manifest saying step0_offset 1) on names that pair at 0: used as
    stated, never silently: the other offset is named, and so is the all-zero acceptance."""
    dump = tmp_path / "engine"
    rounds_by_hand(dump, step0_shift=0, manifest={"step0_offset": 1} if stated == "manifest" else None)
    argv = ["--step0-offset", "1"] if stated == "option" else []
    code, summary, err = stats_summary(capsys, dump, *argv)
    assert code == 1  # the orphans at both ends are skipped
    assert summary["rounds"] == 5 and summary["mean_accepted_length"] == 0.0  # the stated offset was used
    source = "--step0-offset 1" if stated == "option" else "manifest.json step0_offset 1"
    assert_told(err, f"warning: {source} pairs 5 of 6", "offset 0 groups every round", "pass --step0-offset 0")
    assert_told(
        err,
        "WARNING: accepted length 0 in all 5 replayed round(s) is probably wrong",
        "step-0 names look off",
        "check --step0-offset",
    )
    assert_told(
        err,
        "skipped round 10_20: missing draft_step_0_9_19",
        "skipped draft_step_0_15_25: a step-0 file named with round 15_25's own key",
    )
    code, summary, err = stats_summary(capsys, dump, "--step0-offset", "0")  # the fix the warning names
    assert code == 0 and summary["mean_accepted_length"] == 3.0 and without_fallback_warning(err) == ""


READERS_OF_A_DIRECTORY = [
    ("replay",),
    ("batch",),
    ("stats",),
    ("compare",),
    ("pack", "-o", "{out}"),
    ("report", "-o", "{out}", "--no-tables"),
]


@pytest.mark.parametrize("command", READERS_OF_A_DIRECTORY, ids=[c[0] for c in READERS_OF_A_DIRECTORY])
def test_a_wrong_stated_step0_offset_counts_each_round_once(capsys, tmp_path, command):
    """--step0-offset 0 on names that pair at 1: each round's step-0 file is named in the entry of
    the round it belongs to (one round, one entry: 6 rounds skipped, not 6 rounds plus 6 step-0
    "rounds"), and manifest.json, which lists exactly those rounds, does not disagree. Every
    command that reads a directory counts the same."""
    dump = tmp_path / "engine"
    keys = [(10 + 8 * r, 20 + 8 * r) for r in range(6)]
    manifest = {"step0_offset": 1, "rounds": [{"key": list(k), "root_token": 43107} for k in keys]}
    assert rounds_by_hand(dump, stride=8, manifest=manifest) == keys
    name, *rest = command
    code, _, err = run(
        capsys, name, dump, *[a.format(out=tmp_path / "out") for a in rest], "--step0-offset", "0", "--no-progress"
    )
    verb = "packed" if name == "pack" else "replayed"
    last = err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("specreplay: error: "), err
    assert f"no round could be {verb} (6 round(s) skipped, listed above; first: round 10_20:" in last, err
    assert_told(
        err,
        "offset 1 groups every round",
        "skipped round 10_20: missing draft_step_0_10_20 (draft_step_0_9_19 is here, step-0 offset 1 pairs it with this round",
    )
    assert "disagrees" not in err and "skipped draft_step_0" not in err and "round 9_19" not in err


def test_every_round_accepting_nothing_while_names_look_off_is_flagged_without_a_full_fit(capsys, tmp_path):
    """No offset groups every round (a step-0 file was lost), so nothing is switched; the all-zero
    result is still called out as probably wrong, naming the option to check."""
    dump = tmp_path / "engine"
    rounds_by_hand(dump, step0_shift=0)
    (dump / "draft_step_0_12_22").unlink()
    code, out, err = run(capsys, "batch", dump, "--no-progress")
    assert code == 1 and "mean accepted length (bonus excluded): 0.0000" in out
    assert_told(err, "is probably wrong", "offset 1 (default)", "offset 0 pairs 5", "check --step0-offset")


NEAR_MISSES = [
    ("validation_{a}_{b}", "validate_{a}_{b}"),
    ("valid_{a}_{b}", "validate_{a}_{b}"),
    ("verify_{a}_{b}", "validate_{a}_{b}"),
    ("Validate_{a}_{b}", "validate_{a}_{b}"),
    ("dump_validate_{a}_{b}", "validate_{a}_{b}"),
    ("validate_{a}_{b}_ids.txt", "validate_{a}_{b}.txt"),
    ("validate-{a}-{b}", "validate_{a}_{b}"),
]


@pytest.mark.parametrize("wrong, right", NEAR_MISSES)
def test_near_miss_validate_names_are_an_error_with_the_name_to_use(capsys, tmp_path, wrong, right):
    """Finding 4: validation_* files gave "rounds replayed: 0 skipped: 12" for 6 rounds and exit 1
    (stats exit 2). Now: exit 2 in every command, each round listed once, and the name to use."""
    dump = tmp_path / "near"
    keys = rounds_by_hand(dump)
    for a, b in keys:
        (dump / f"validate_{a}_{b}").rename(dump / wrong.format(a=a, b=b))
    want = right.format(a=10, b=20)
    every = (
        ["replay", dump],
        ["replay", dump, "--json"],
        ["batch", dump],
        ["stats", dump],
        ["pack", dump, "-o", tmp_path / "run"],
        ["plot", dump, "-o", tmp_path / "plots"],
        ["compare", dump],
        ["report", dump, "-o", tmp_path / "report"],
        ["recommend", dump, "--budget", "4"],
    )
    for argv in every:
        code, out, err = run(capsys, *argv, "--no-progress")
        assert code == 2, (argv, err)
        assert out == "" and not (tmp_path / "run").exists(), argv
        lines = err.strip().splitlines()
        assert sum("skipped round" in line for line in lines) == 6 and len(lines) == 7, (
            argv,
            err,
        )  # one line per round
        assert_told(
            lines[0],
            "draft files without validate_10_20",
            f"{wrong.format(a=10, b=20)} is here",
            f"did you mean {want}?",
        )
        assert_told(lines[-1], "error:", "no round could be", "6 round(s) skipped", f"did you mean {want}")


@pytest.mark.parametrize(
    "wrong, right",
    [
        ("Draft_Step_{s}_{a}_{b}", "draft_step_{s}_{a}_{b}"),
        ("draftstep_{s}_{a}_{b}", "draft_step_{s}_{a}_{b}"),
        ("draft_steps_{s}_{a}_{b}", "draft_step_{s}_{a}_{b}"),
        ("rank0_draft_step_{s}_{a}_{b}", "draft_step_{s}_{a}_{b}"),
    ],
)
def test_near_miss_draft_names_leave_no_dump_file_and_say_what_to_rename(capsys, tmp_path, wrong, right):
    dump = tmp_path / "near"
    rounds_by_hand(dump, rounds=2)
    for path in sorted(dump.glob("draft_step_*")):
        s, a, b = path.name.split("_")[2:]
        path.rename(dump / wrong.format(s=s, a=a, b=b))
    code, out, err = run(capsys, "replay", dump)
    assert code == 2 and out == ""
    # validate files alone: each round is listed once, with the draft file it lacks found nearby
    assert_told(
        err, "skipped round 10_20: validate file without any draft_step file", "error: ", "did you mean draft_step_"
    )
    for path in dump.glob("validate_*"):  # now no file at all is named like a dump file
        path.unlink()
    code, _, err = run(capsys, "replay", dump)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert_told(
        err,
        "no dump files in this directory",
        f"did you mean {right.format(s=0, a=10, b=20)} (for {wrong.format(s=0, a=10, b=20)}",
    )


def test_one_misnamed_file_among_good_rounds_is_counted_once(capsys, tmp_path):
    """Finding 4: one mistake, one skip, and the summary says what it counts."""
    dump = tmp_path / "near"
    rounds_by_hand(dump, rounds=3)
    (dump / "validate_11_21").rename(dump / "validation_11_21")
    (dump / "notes.bin").write_bytes(b"x")
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 1
    assert "rounds replayed: 2   skipped: 1 round(s) and 1 file(s) (each listed on stderr)" in out
    assert err.count("specreplay: skipped") == 2
    assert_told(
        err,
        "skipped round 11_21: draft files without validate_11_21; validation_11_21 is here: did you mean validate_11_21?",
        "skipped notes.bin: name matches neither",
    )
    code, out, err = run(capsys, "stats", dump, "--no-progress")
    assert code == 1 and "(2 rounds replayed, skipped: 1 round(s) and 1 file(s))" in out


def test_a_dump_name_with_an_extension_the_readers_do_not_take(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    (dump / "validate_124_140").rename(dump / "validate_124_140.dat")
    code, out, err = run(capsys, "replay", dump)
    assert code == 2 and out == ""
    assert err.count("specreplay: skipped") == 1  # one mistake, one entry: the round's
    assert_told(
        err,
        "skipped round 124_140: draft files without validate_124_140; "
        "validate_124_140.dat (extension .dat is not read) is here: did you mean validate_124_140?",
    )


def broken_and_good(directory: Path) -> Path:
    """Two rounds; the second's step 1 has a ragged row (one reason to skip it)."""
    rounds_by_hand(directory, rounds=2)
    (directory / "draft_step_1_11_21").write_text("1 2\n3\n", encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "{d}"],
        ["replay", "{d}", "--summary"],
        ["replay", "{d}", "--json"],
        ["batch", "{d}"],
        ["batch", "{d}", "--json"],
        ["stats", "{d}"],
        ["stats", "{d}", "--json"],
        ["pack", "{d}", "-o", "{t}/run"],
    ],
)
def test_skip_reasons_go_to_stderr_and_stdout_keeps_only_results(capsys, tmp_path, argv):
    """Finding 5: `replay DUMP --config ... 2>/dev/null` exited 1 printing nothing on stderr."""
    d = broken_and_good(tmp_path / "d")
    code, out, err = run(capsys, *(a.format(d=d, t=tmp_path) for a in argv), "--no-progress")
    assert code == 1, err
    assert_told(err, "skipped round 11_21:", "draft_step_1_11_21 (ids): ragged rows: line 2 has 1 value")
    assert "ragged" not in out and "draft_step_1_11_21" not in out
    if "--json" in argv:
        json.loads(out) if argv[0] == "stats" else [json.loads(line) for line in out.splitlines()]  # parseable


@pytest.mark.parametrize("command", ["plot", "compare", "report", "recommend"])
def test_skip_reasons_go_to_stderr_in_the_analysis_commands(capsys, tmp_path, command):
    d = broken_and_good(tmp_path / "d")
    extra = {
        "plot": ["-o", tmp_path / "p", "--format", "svg"],
        "report": ["-o", tmp_path / "r"],
        "recommend": ["--budget", "4", "--bootstrap", "0"],
    }
    code, out, err = run(capsys, command, d, *extra.get(command, []), "--no-progress")
    assert code == 1, err
    assert_told(err, "skipped round 11_21:", "ragged rows")
    assert "ragged" not in out


def test_the_config_that_fits_no_round_lists_every_reason_on_stderr(capsys):
    """The finding's own example, on the synthetic sample: most rounds are deeper than gamma 2, and
    the 7 early-stopped ones hold validate rows the narrower config cannot use."""
    r = shell("replay", SYNTH, "--config", "[3]|[2,1,1]", "--summary")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    # beyond 20 lines the listing folds each kind of reason: three in full, then one line counting the rest
    assert r.stderr.count("specreplay: skipped round ") == 9 and "dump has 3 draft steps but gamma = 2" in r.stderr
    folded = "more for the same reason, up to the names and numbers in it"
    assert all(f"skipped {n} {folded}" in r.stderr for n in (280, 7, 4)) and "300 round(s) skipped" in r.stderr
    assert r.stderr.count("that are not padding, 3 more than the all layout of config [3]|[2,1,1] uses") == 4
    assert "no round could be replayed" in r.stderr


def test_a_parents_companion_on_one_line_says_rows_and_columns(capsys, tmp_path):
    """Finding 7: 'expected one integer node index per row, got int64 (1, 2)' read like token values."""
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_1_124_140.parents").write_text("1 2\n", encoding="utf-8")
    code, out, err = run(capsys, "replay", dump)
    assert code == 2 and out == ""
    assert_told(err, "draft_step_1_124_140.parents (parents)", "1 row × 2 columns", "write one index per line")
    assert "(1, 2)" not in err
    (dump / "draft_step_1_124_140.parents").write_text("1\n2\n", encoding="utf-8")  # the fix the message names
    code, out, err = run(capsys, "replay", dump)  # step 2's expanded nodes would now be a guess
    assert code == 2 and out == ""
    assert_told(err, "draft_step_2 has no parents while draft_step_1 has them (a lost .parents companion")
    (dump / "draft_step_2_124_140.parents").write_text("7\n9\n", encoding="utf-8")
    code, out, _ = run(capsys, "replay", dump)
    assert code == 0 and "selection parents" in out


def test_scores_of_another_shape_say_both_shapes_in_words(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_1_124_140.scores").write_text("0.5 0.2 0.1\n0.4 0.3 0.1\n", encoding="utf-8")
    code, _, err = run(capsys, "replay", dump)
    assert code == 2
    assert_told(err, "the scores are 2 rows × 3 columns, the ids 2 rows × 2 columns")


def test_an_npy_saved_one_dimensional_says_both_ways_to_save_it(capsys, tmp_path):
    np = pytest.importorskip("numpy")
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_0_123_139").unlink()
    np.save(dump / "draft_step_0_123_139.npy", np.array(ARTICLE_STEPS[0][0]))  # np.save(ids[0]) instead of ids
    code, _, err = run(capsys, "replay", dump)
    assert code == 2
    assert_told(
        err,
        "draft_step_0_123_139.npy (ids)",
        "6 values in one dimension (1-D)",
        "[1, 6] (one row",
        "[6, 1] (one column)",
    )
    np.save(dump / "draft_step_0_123_139.npy", np.array(ARTICLE_STEPS[0]))
    assert run(capsys, "replay", dump)[0] == 0


def test_a_header_line_of_column_names_in_a_text_matrix(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    (dump / "draft_step_1_124_140").write_text("tok0 tok1\n41760 35740\n45315 41760\n", encoding="utf-8")
    code, _, err = run(capsys, "replay", dump)
    assert code == 2
    assert_told(err, "line 1: 'tok0' is not an integer token id", "a header line? Delete it or start it with #")
    (dump / "draft_step_1_124_140").write_text("# tok0 tok1\n41760 35740\n45315 41760\n", encoding="utf-8")
    assert run(capsys, "replay", dump)[0] == 0


@pytest.mark.parametrize(
    "name,text,field",
    [
        ("draft_step_0_10_20", "1,,41760,45315,22870,31,32\n", "(ids)"),  # a lost second value
        ("draft_step_1_11_21.scores", "-0.5,,-0.7\n-0.6,-0.9\n", "(scores)"),
        ("validate_11_21", "41824\n,\n41760\n45315\n22870\n", "(ids)"),  # a row of one empty value
    ],
    ids=["ids", "scores", "empty row"],
)
@pytest.mark.parametrize("argv", [["replay"], ["batch", "--workers", "1"], ["stats"]])
def test_an_empty_value_in_a_csv_row_is_refused_not_skipped(capsys, tmp_path, name, text, field, argv):
    """`701,,836` was read as two values: the row's later values moved one column left (or a row of
    commas vanished and the later rows moved up) and the round replayed with other tokens, exit 0."""
    d = tmp_path / "d"
    rounds_by_hand(d, rounds=3)
    (d / name).write_text(text, encoding="utf-8")
    code, out, err = run(capsys, argv[0], d, *argv[1:], "--no-progress")
    assert code == 1, err
    line = 2 if name.startswith("validate") else 1
    value = 1 if name.startswith("validate") else 2
    assert_told(err, "skipped round 11_21:", f"{name} {field}: line {line}: value {value} is empty")
    assert "Traceback" not in err


def test_windows_line_endings_and_a_txt_extension_on_some_files_only(capsys, tmp_path):
    """Both are fine: the round is read as typed (nothing to fix, and nothing skipped)."""
    dump = article_by_hand(tmp_path / "mine")
    for path in dump.glob("draft_step_*"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    (dump / "validate_124_140").rename(dump / "validate_124_140.txt")
    (dump / "draft_step_2_124_140").rename(dump / "draft_step_2_124_140.txt")
    for argv in (["replay", dump], ["batch", dump, "--json", "--no-progress"]):
        code, out, err = run(capsys, *argv)
        assert (code, without_fallback_warning(err)) == (0, ""), argv
        assert "41824, 41760, 22870" in out or "R → 41824 → 41760 → 22870" in out


def test_a_flat_topkspec_list_in_config_json_says_the_nested_form(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    (dump / "config.json").write_text('{"gamma": 3, "topKSpec": [6, 2, 2, 1, 1], "topHead": [1, 2, 2], "treeType": 0}')
    code, out, err = run(capsys, "replay", dump)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert_told(
        err,
        "config.json: config field 'topKSpec'",
        "one list of widths per draft step",
        "with topHead [1, 2, 2] that is [[6], [2, 2], [1, 1]]",
    )


def test_the_parent_folder_of_several_dumps(capsys, tmp_path):
    article_by_hand(tmp_path / "runs" / "engine")
    rounds_by_hand(tmp_path / "runs" / "harness", rounds=2)
    for command in ("replay", "stats", "batch"):
        code, out, err = run(capsys, command, tmp_path / "runs")
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, command
        assert_told(
            err, "no dump files directly in this directory", "engine, harness", f"e.g. {tmp_path / 'runs' / 'engine'}"
        )


# --- mistakes-live: generate, sweep and cost-curve the way users run them ------------------------
#
# Two kinds of scenario. Options and files the CLI must refuse before a model loads run on two
# empty folders named like models (the guard ``no_model_load`` fails the test if one would load):
# no torch needed, milliseconds each. Scenarios that need real decoding use a tiny float32 pair
# (vocab 16) saved to disk the way a user's models are, and run it through ``specreplay generate``
# / ``sweep`` / ``cost-curve``: the path users take, never the inner functions.

SAMPLED_PROMPT = [3, 1, 4, 1, 5]
SAMPLING_T = 0.6
SAMPLED_N = 150  # one prompt repeated: 150 sequences of one run, one new token each
SAMPLING_ALPHA = 1e-4  # a correct harness fails a distribution check with probability at most this


@pytest.fixture(scope="module")
def live_pair_on_disk(tmp_path_factory):
    """A tiny float32 draft/target pair saved as Hugging Face directories (and the target as GGUF),
    with the target's exact next-token distribution after SAMPLED_PROMPT at SAMPLING_T, computed
    here from the model's own logits (plain transformers forward, plain softmax)."""
    pytest.importorskip("torch", reason="needs torch (the live extras)")
    pytest.importorskip("transformers", reason="needs transformers (the live extras)")
    from replay.testing.tiny import build_word_tokenizer, save_gguf_qwen2, save_hf_dir
    from tests.live_fixtures import make_pair, torch

    draft, target = make_pair("qwen2", vocab_size=16, seed=3, noise=0.2)
    d = tmp_path_factory.mktemp("live_pair")
    tok = build_word_tokenizer(16)
    save_hf_dir(target, d / "target", tok)
    save_hf_dir(draft, d / "draft", tok)
    save_gguf_qwen2(target, d / "target.gguf")
    with torch.no_grad():
        logits = target.module(input_ids=torch.tensor([SAMPLED_PROMPT])).logits[0, -1].double()
    probs = torch.softmax(logits / SAMPLING_T, dim=-1).tolist()
    (d / "repeated.jsonl").write_text((json.dumps(SAMPLED_PROMPT) + "\n") * SAMPLED_N, encoding="utf-8")
    (d / "one.jsonl").write_text(json.dumps(SAMPLED_PROMPT) + "\n", encoding="utf-8")
    # The same pair with an EOS token in its tokenizer: the target's greedy first token.
    greedy = max(range(16), key=probs.__getitem__)
    tok.eos_token = f"t{greedy}"
    save_hf_dir(target, d / "eos" / "target", tok)
    save_hf_dir(draft, d / "eos" / "draft", tok)
    return SimpleNamespace(dir=d, draft=d / "draft", target=d / "target", exact=dict(enumerate(probs)), eos=greedy)


def live_args(pair, prompts: Path, out: Path, *extra: str) -> list[str]:
    """``specreplay generate`` on the tiny pair: float32 draft (no bf16 speed question), one token."""
    return [
        "generate",
        "--draft",
        pair.draft,
        "--target",
        pair.target,
        "--config",
        "2",
        "--prompts",
        prompts,
        "--max-new-tokens",
        "1",
        "--draft-dtype",
        "float32",
        "-o",
        out,
        *extra,
    ]


def first_tokens(manifest: Path) -> list[int]:
    return [s["output_ids"][0] for s in json.loads(manifest.read_text(encoding="utf-8"))["sequences"]]


@pytest.fixture
def baseline_draws(monkeypatch):
    """The target-only outputs a run decodes, in call order, seen by wrapping the function the
    timed run calls (the baseline's tokens are timed, not written to the dump)."""
    import replay.live.run as live_run

    seen: list[tuple[int, ...]] = []
    real = live_run.target_generate

    def spy(*args, **kwargs):
        g = real(*args, **kwargs)
        seen.append(g.output_ids)
        return g

    monkeypatch.setattr(live_run, "target_generate", spy)
    return seen


def assert_follows_target(draws: list[int], exact: dict[int, float]) -> None:
    """A total-variation check with false-alarm rate SAMPLING_ALPHA (tests/live_stats.py); and the
    failure it exists for, every sequence drawing the same token, fails it whichever token it is."""
    from tests.live_stats import tv_check

    assert len(draws) == SAMPLED_N
    check = tv_check(draws, exact, SAMPLING_ALPHA)
    assert check.passed, (check, sorted(draws))
    assert not any(tv_check([x] * SAMPLED_N, exact, SAMPLING_ALPHA).passed for x in exact)


@pytest.mark.slow
def test_generate_at_temperature_samples_each_repeated_prompt_afresh(
    capsys, tmp_path, live_pair_on_disk, baseline_draws
):
    """Finding 0: one prompt 150 times, `generate --temperature 0.6 --seed 1234 --baseline`. Every
    sequence drew the same first token (sequence 0's generator); the target gives its most likely
    token only p = 0.46. Both methods' first tokens must follow the target's distribution."""
    pair = live_pair_on_disk
    code, out, err = run(
        capsys,
        *live_args(
            pair,
            pair.dir / "repeated.jsonl",
            tmp_path / "run",
            "--temperature",
            str(SAMPLING_T),
            "--seed",
            "1234",
            "--baseline",
            "--repeats",
            "1",
        ),
    )
    assert code == 0, err
    assert "outputs identical:      n/a (sampling)" in out
    assert_follows_target(first_tokens(tmp_path / "run" / "manifest.json"), pair.exact)
    assert_follows_target([o[0] for o in baseline_draws[-SAMPLED_N:]], pair.exact)  # after the warm-up call


@pytest.mark.slow
def test_sweep_at_temperature_samples_each_repeated_prompt_afresh(capsys, tmp_path, live_pair_on_disk, baseline_draws):
    """The same through `specreplay sweep` (its own timed run per config, baseline always on)."""
    pair = live_pair_on_disk
    code, _, err = run(
        capsys,
        "sweep",
        "--draft",
        pair.draft,
        "--target",
        pair.target,
        "--grid",
        "2",
        "--prompts",
        pair.dir / "repeated.jsonl",
        "--max-new-tokens",
        "1",
        "--draft-dtype",
        "float32",
        "--temperature",
        str(SAMPLING_T),
        "--seed",
        "7",
        "--repeats",
        "1",
        "--no-cost-curve",
        "--no-progress",
        "-o",
        tmp_path / "sw",
    )
    assert code == 0, err
    assert_follows_target(first_tokens(tmp_path / "sw" / "dumps" / "2" / "manifest.json"), pair.exact)
    assert_follows_target([o[0] for o in baseline_draws[-SAMPLED_N:]], pair.exact)


def test_the_same_seed_gives_the_same_samples_through_the_cli(capsys, tmp_path, live_pair_on_disk):
    """--seed reaches the draws: a rerun with the same seed repeats every sequence, another seed
    does not, and the three copies of one prompt are three samples."""
    pair = live_pair_on_disk
    (tmp_path / "three.jsonl").write_text((json.dumps(SAMPLED_PROMPT) + "\n") * 3)

    def outputs(seed: str, name: str) -> list[tuple[int, ...]]:
        argv = live_args(
            pair,
            tmp_path / "three.jsonl",
            tmp_path / name,
            "--temperature",
            "1",
            "--seed",
            seed,
            "--repeats",
            "1",
            "--no-progress",
        )
        argv[argv.index("--max-new-tokens") + 1] = "6"
        code, _, err = run(capsys, *argv)
        assert code == 0, err
        return [
            tuple(s["output_ids"]) for s in json.loads((tmp_path / name / "manifest.json").read_text())["sequences"]
        ]

    first = outputs("5", "a")
    assert len(set(first)) == 3, first
    assert outputs("5", "b") == first
    assert outputs("6", "c") != first


def test_stop_at_eos_without_an_eos_token_is_refused(capsys, tmp_path, live_pair_on_disk):
    """The flag was ignored silently: every sequence ran to --max-new-tokens."""
    pair = live_pair_on_disk
    code, out, err = run(
        capsys, *live_args(pair, pair.dir / "one.jsonl", tmp_path / "run", "--stop-at-eos", "--no-progress")
    )
    assert code == 2 and out == ""
    assert_told(err, "--stop-at-eos", "no tokenizer with an EOS token", str(pair.target))
    assert not (tmp_path / "run").exists()


def test_stop_at_eos_stops_at_the_tokenizers_eos_through_the_cli(capsys, tmp_path, live_pair_on_disk):
    """With an EOS token the flag works end to end: the greedy first token is EOS, so each output
    is that one token (without the flag, all 8)."""
    pair = live_pair_on_disk
    eos = SimpleNamespace(draft=pair.dir / "eos" / "draft", target=pair.dir / "eos" / "target")
    for flag, length in ((["--stop-at-eos"], 1), ([], 8)):
        argv = live_args(eos, pair.dir / "one.jsonl", tmp_path / f"run{length}", "--no-progress", *flag)
        argv[argv.index("--max-new-tokens") + 1] = "8"
        code, _, err = run(capsys, *argv)
        assert code == 0, err
        outputs = [
            s["output_ids"] for s in json.loads((tmp_path / f"run{length}" / "manifest.json").read_text())["sequences"]
        ]
        assert [o[0] for o in outputs] == [pair.eos] and [len(o) for o in outputs] == [length]


class _Terminal:
    """A stderr that says it is a terminal (what a person watching a shell has)."""

    def __init__(self):
        import io

        self.buffer = io.StringIO()

    def write(self, text: str) -> int:
        return self.buffer.write(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def getvalue(self) -> str:
        return self.buffer.getvalue()


@pytest.mark.parametrize(
    "terminal,extra,drawn",
    [
        (False, [], False),  # a log file, a pipe, CI: no bars
        (True, ["--no-progress"], False),
        (True, [], True),  # a person at a terminal keeps them
    ],
)
def test_model_loading_bars_only_on_a_terminal(terminal, extra, drawn, tmp_path, live_pair_on_disk, monkeypatch):
    """Finding 12: transformers' "Loading weights" bars reached stderr when it was not a terminal,
    one redraw per update in every log of `generate`."""
    import io

    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    pair = live_pair_on_disk
    assert (
        main([str(a) for a in live_args(pair, pair.dir / "one.jsonl", tmp_path / "run", "--repeats", "1", *extra)]) == 0
    )
    assert ("Loading weights" in err.getvalue()) is drawn, err.getvalue()


@pytest.mark.parametrize("terminal,drawn", [(False, False), (True, True)])
def test_gguf_loading_bars_only_on_a_terminal(terminal, drawn, tmp_path, live_pair_on_disk, monkeypatch):
    """A GGUF model is dequantized under a bar of its own (tqdm, past transformers' switch)."""
    import io

    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    argv = [
        "cost-curve",
        "--target",
        str(live_pair_on_disk.dir / "target.gguf"),
        "--sizes",
        "1,2",
        "--prefix",
        "4",
        "--repeats",
        "1",
        "-o",
        str(tmp_path / "cc.json"),
    ]
    assert main(argv) == 0
    assert ("de-quantizing" in err.getvalue()) is drawn, err.getvalue()


def test_record_k_outside_the_vocabulary_names_the_option(capsys, tmp_path, live_pair_on_disk):
    """It said "config field 'record_k'" for a command-line option."""
    pair = live_pair_on_disk
    code, out, err = run(
        capsys, *live_args(pair, pair.dir / "one.jsonl", tmp_path / "run", "--record-k", "100", "--no-progress")
    )
    assert code == 2 and out == ""
    assert_told(err, "--record-k 100", "vocabulary size (16)")
    assert not (tmp_path / "run").exists()


# Mistakes caught before any model loads: two empty folders stand in for the models.


@pytest.fixture
def models_by_name(tmp_path, monkeypatch):
    """``draft`` and ``target`` folders (empty: nothing may load them) and a prompts file; any
    model load fails the test, so each mistake below is proven to be caught before loading."""
    from replay.cli import cmd_live, cmd_sweep

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the mistake was caught")

    for module in (cmd_live, cmd_sweep):
        monkeypatch.setattr(module, "load_pair", refuse)
    monkeypatch.setattr(cmd_live, "_model_or_shape", refuse)
    for name in ("draft", "target"):
        (tmp_path / name).mkdir()
    (tmp_path / "prompts.jsonl").write_text("[1, 2, 3]\n", encoding="utf-8")
    return tmp_path


def generate_argv(d: Path, *extra: str, prompts: Path | None = None, config: str = "4,2x2") -> list:
    return [
        "generate",
        "--draft",
        d / "draft",
        "--target",
        d / "target",
        "--config",
        config,
        "--prompts",
        prompts or d / "prompts.jsonl",
        "--max-new-tokens",
        "8",
        "-o",
        d / "run",
        *extra,
    ]


def sweep_argv(d: Path, *extra: str, prompts: Path | None = None) -> list:
    return [
        "sweep",
        "--draft",
        d / "draft",
        "--target",
        d / "target",
        "--grid",
        "4,2x2",
        "--prompts",
        prompts or d / "prompts.jsonl",
        "--max-new-tokens",
        "8",
        "-o",
        d / "sw",
        *extra,
    ]


def test_a_typo_in_the_model_path_names_the_path(capsys, models_by_name):
    d = models_by_name
    code, out, err = run(
        capsys,
        "generate",
        "--draft",
        d / "drfat",
        "--target",
        d / "target",
        "--config",
        "4",
        "--prompts",
        d / "prompts.jsonl",
        "--max-new-tokens",
        "8",
        "-o",
        d / "run",
    )
    assert code == 2 and out == ""
    assert_told(err, str(d / "drfat"), "nor an existing path")
    assert len(err.strip().splitlines()) == 1 and not (d / "run").exists()


def test_a_missing_prompts_file_is_refused_by_name(capsys, models_by_name):
    d = models_by_name
    code, out, err = run(capsys, *generate_argv(d, prompts=d / "promts.jsonl"))
    assert code == 2 and out == ""
    assert_told(err, "--prompts", str(d / "promts.jsonl"), "no such file")


@pytest.mark.parametrize("content", [b"", b"\n  \n\n"], ids=["empty", "blank lines"])
def test_an_empty_prompts_file_is_refused_before_the_models_load(capsys, models_by_name, content):
    """It was read only after both models had loaded (a minute for the real pair)."""
    d = models_by_name
    (d / "empty.txt").write_bytes(content)
    for argv in (generate_argv(d, prompts=d / "empty.txt"), sweep_argv(d, prompts=d / "empty.txt")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert_told(err, str(d / "empty.txt"), "no prompts", "one prompt per line")


def test_a_model_file_given_as_prompts_is_refused_as_not_text(capsys, models_by_name):
    """`--prompts model.safetensors` (the flags mixed up): it was an internal UnicodeDecodeError."""
    d = models_by_name
    (d / "model.safetensors").write_bytes(b"\x80\x00\xff\xfe weights")
    code, out, err = run(capsys, *generate_argv(d, prompts=d / "model.safetensors"))
    assert code == 2 and out == ""
    assert_told(err, str(d / "model.safetensors"), "not UTF-8", "one prompt per line")


@pytest.mark.parametrize("value", ["-0.5", "nan", "inf"])
@pytest.mark.parametrize("command", ["generate", "sweep"])
def test_a_temperature_that_is_not_a_temperature_is_refused(capsys, models_by_name, command, value):
    """-0.5 ran silently as greedy (exit 0), nan failed mid-run with an internal error, inf sampled
    uniformly. 0 is greedy; anything else must be a finite positive number."""
    d = models_by_name
    argv = generate_argv(d) if command == "generate" else sweep_argv(d)
    code, out, err = run(capsys, *argv, "--temperature", value)
    assert code == 2 and out == ""
    assert_told(err, "--temperature", "finite number >= 0", "0 = greedy")
    assert not (d / "run").exists() and not (d / "sw").exists()


@pytest.mark.parametrize("value,words", [("abc", "invalid int value"), ("1.5", "invalid int value"), ("-1", ">= 0")])
def test_a_seed_that_is_not_a_seed_is_refused(capsys, models_by_name, value, words):
    d = models_by_name
    code, out, err = run(capsys, *generate_argv(d), "--seed", value)
    assert code == 2 and out == ""
    assert_told(err, "--seed", words)


def test_generate_into_a_folder_that_holds_files_is_refused(capsys, models_by_name):
    d = models_by_name
    (d / "run").mkdir()
    (d / "run" / "notes.txt").write_text("mine\n")
    code, out, err = run(capsys, *generate_argv(d))
    assert code == 2 and out == ""
    assert_told(err, str(d / "run"), "not empty", "--replace")
    assert [p.name for p in (d / "run").iterdir()] == ["notes.txt"]


def test_sweep_into_a_folder_that_holds_other_files_is_refused(capsys, models_by_name):
    """It ran (exit 0) and wrote results.csv, dumps/ and plots/ among the user's files, overwriting
    any of the same name; a folder holding a sweep already is continued only with --resume."""
    d = models_by_name
    (d / "sw").mkdir()
    (d / "sw" / "results.csv").write_text("my own table\n")
    for extra in ([], ["--resume"]):
        code, out, err = run(capsys, *sweep_argv(d, *extra))
        assert code == 2 and out == ""
        assert_told(err, str(d / "sw"), "not empty", "holds no sweep", "-o/--output")
    assert (d / "sw" / "results.csv").read_text() == "my own table\n"
    (d / "sw" / "results.csv").unlink()
    (d / "sw" / "sweep.json").write_text("{}")
    code, out, err = run(capsys, *sweep_argv(d))
    assert code == 2
    assert_told(err, "already holds a sweep", "--resume")


def test_an_inconsistent_tree_config_is_refused_before_the_models_load(capsys, models_by_name):
    """gamma says 3 levels, topHead and topKSpec give 2: generate and sweep --configs name the field."""
    d = models_by_name
    bad = write_config(d / "tree.json", [[4], [2, 2]], [1, 2], gamma=3)
    code, out, err = run(capsys, *generate_argv(d, config=str(bad)))
    assert code == 2 and out == ""
    assert_told(err, str(bad), "topKSpec", "gamma = 3")
    (d / "configs.json").write_text(
        json.dumps([{"gamma": 1, "topKSpec": [[4]], "topHead": [1]}, json.loads(bad.read_text())])
    )
    code, out, err = run(
        capsys,
        "sweep",
        "--draft",
        d / "draft",
        "--target",
        d / "target",
        "--configs",
        d / "configs.json",
        "--prompts",
        d / "prompts.jsonl",
        "--max-new-tokens",
        "8",
        "-o",
        d / "sw",
    )
    assert code == 2 and out == ""
    assert_told(err, "topKSpec", "gamma = 3")
    assert not (d / "run").exists() and not (d / "sw").exists()


@pytest.mark.parametrize(
    "argv,words",
    [
        (["generate", "--repeats", "0"], ["--repeats must be at least 1"]),
        (["sweep", "--repeats", "0"], ["--repeats must be at least 1"]),
        (["generate", "--threads", "0"], ["--threads must be at least 1"]),
        (["cost-curve", "--repeats", "0"], ["--repeats must be at least 1"]),
        (["cost-curve", "--prefix", "-3"], ["--prefix must be >= 0"]),  # was an internal RuntimeError
        (["cost-curve", "--threads", "0"], ["--threads must be at least 1"]),
    ],
)
def test_counts_of_zero_are_refused_before_the_models_load(capsys, models_by_name, argv, words):
    """--repeats 0 was refused only after loading, as "config field 'repeats'"; cost-curve's ended
    in an internal error, and --threads 0 was silently 1."""
    d = models_by_name
    command, *extra = argv
    if command == "generate":
        full = generate_argv(d, *extra)
    elif command == "sweep":
        full = sweep_argv(d, *extra)
    else:
        full = ["cost-curve", "--target", d / "target", "--sizes", "1,2", "-o", d / "cc.json", *extra]
    code, out, err = run(capsys, *full)
    assert code == 2 and out == ""
    assert_told(err, *words)
    assert len(err.strip().splitlines()) == 1


# --- sampling-live: a validate .npz with node_logprobs (docs/dump-format.md "Node log-probabilities") ---
#
# The hand-made article round with its validate matrix saved as .npz (np.savez), as a user who
# follows docs/dump-format.md adds the per-node log-probabilities the harness records.

ARTICLE_VALIDATE = [[41824], [41760], [45315], [22870], [22870]]
NEG_INF = float("-inf")  # probability 0: what a greedy run's T = 0 column holds off the top-1


def article_with_node_logprobs(directory: Path, node_logprobs) -> Path:
    import numpy as np

    dump = article_by_hand(directory)
    (dump / "validate_124_140").unlink()
    np.savez(dump / "validate_124_140.npz", ids=np.array(ARTICLE_VALIDATE), node_logprobs=np.asarray(node_logprobs))
    return dump


def test_valid_node_logprobs_are_read_and_change_nothing_in_the_greedy_replay(capsys, tmp_path):
    dump = article_with_node_logprobs(
        tmp_path / "ok", [[0.0, 0.0], [-0.1, -0.2], [-1.0, -2.0], [-0.5, -0.7], [-3.0, NEG_INF]]
    )
    code, out, err = run(capsys, "replay", dump)
    assert code == 0, err
    assert "accepted path: R → 41824 → 41760 → 22870" in out


@pytest.mark.parametrize(
    "node_logprobs,words",
    [
        ([[0.0, 0.0], [float("nan"), -0.2], [-1.0, -2.0], [-0.5, -0.7], [-3.0, -1.0]], ["NaN"]),
        ([[0.0, 0.0], [0.5, -0.2], [-1.0, -2.0], [-0.5, -0.7], [-3.0, -1.0]], ["must be <= 0", "0.5"]),
        ([[0.0, 0.0], [float("inf"), -0.2], [-1.0, -2.0], [-0.5, -0.7], [-3.0, -1.0]], ["must be <= 0", "inf"]),
        ([[0.0, 0.0], [-0.1, -0.2], [-1.0, -2.0], [-0.5, -0.7]], ["expected [5 rows (one per row of the ids)"]),
        ([0.0, -0.1, -1.0, -0.5, -3.0], ["expected [5 rows", "1-D"]),
        ([["a", "b"]] * 5, ["holds text (numpy dtype <U1)", "scores real numbers"]),
    ],
    ids=["nan", "positive", "plus-inf", "a-row-short", "one-dimensional", "strings"],
)
def test_bad_node_logprobs_skip_the_round_naming_the_array(capsys, tmp_path, node_logprobs, words):
    """Read (and checked) even by a greedy replay, as scores are: never a wrong number later. The
    dump's only round is skipped, so nothing is left to replay: exit 2."""
    dump = article_with_node_logprobs(tmp_path / "bad", node_logprobs)
    code, out, err = run(capsys, "replay", dump)
    assert code == 2 and out == "", (code, err)
    assert "skipped round 124_140" in err
    assert_told(err, "validate_124_140.npz", "node_logprobs", *words)


# --- sampling-core: --temperature on dumps that cannot answer it (issue 20) ---------------------


def test_temperature_on_a_dump_without_scores_says_what_is_missing(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")  # ids only, as most engine dumps
    code, out, err = run(capsys, "replay", dump, "--temperature", "0.7")
    assert code == 2 and out == ""
    assert_told(err, "round 124_140", "no scores", "log-probs", "dump-format.md")


def test_temperature_that_is_not_a_number_is_one_line(capsys, tmp_path):
    dump = article_by_hand(tmp_path / "mine")
    for bad in ("0,7", "-0.7", "nan"):
        code, out, err = run(capsys, "replay", dump, "--temperature", bad)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert_told(err, "--temperature", ">= 0", bad)


def test_validate_scores_that_are_not_probabilities_skip_the_round(capsys, tmp_path):
    # A user writes the target's raw counts' shares per row but normalises them wrongly (sum 1.3).
    dump = article_by_hand(tmp_path / "mine")
    write_matrix(dump / "validate_124_140", [[41824, 43744], [41760, 1], [45315, 2], [22870, 3], [22870, 4]])
    (dump / "validate_124_140.scores").write_text("0.9 0.4\n0.5 0.1\n0.5 0.1\n0.5 0.1\n0.5 0.1\n", encoding="utf-8")
    code, out, err = run(capsys, "replay", dump, "--temperature", "1")
    assert code == 2 and "expected accepted length" not in out
    assert_told(err, "round 124_140", "sum to more than 1", "row 0", "it sums to 1.3")  # 0.9 + 0.4


# --- mistakes-round2: a new user's try ---
#
# A tiny tree by hand: config [2]|[1], topHead [1, 1]. Step 0 drafts 5, 6 under the root; step 1
# (no scores: rank-major fallback, expands node 1 = token 5) drafts 7. Tree order: root, 5, 6, 7.
# All layout (4 rows): root -> 5, node 5 -> 7, node 6 -> 1, node 7 -> 8 (bonus): accepted length 2.


def tiny_all(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[2], [1]], [1, 1])
    write_matrix(directory / "draft_step_0_9_19", [[5, 6]])
    write_matrix(directory / "draft_step_1_10_20", [[7]])
    write_matrix(directory / "validate_10_20", [[5], [7], [1], [8]])
    return directory


@pytest.mark.parametrize("command", ["replay", "batch", "stats"])
def test_a_stated_parents_layout_on_an_all_layout_dump_is_refused(capsys, tmp_path, command):
    """--layout parents on 4 all-layout rows used the first 2 rows silently (exit 0)."""
    dump = tiny_all(tmp_path / "d")
    code, out, err = run(capsys, command, dump, "--layout", "parents")
    assert code == 2, (out, err)
    assert_told(err, "validate_10_20", "4 row(s)", "the parents layout needs 2", "--layout all")
    assert "round 10_20: round 10_20" not in err  # the round is named once


def test_a_manifest_parents_layout_on_an_all_layout_dump_is_refused(capsys, tmp_path):
    dump = tiny_all(tmp_path / "d")
    (dump / "manifest.json").write_text('{"layout": "parents"}')
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 2
    assert_told(err, "parents layout needs 2")


def test_a_parents_file_with_more_entries_than_rows_is_refused(capsys, tmp_path):
    """Three parents for one row were accepted silently; one too few was already an error."""
    dump = tiny_all(tmp_path / "d")
    write_matrix(dump / "draft_step_1_10_20.parents", [[1], [2], [3]])
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 2
    assert_told(err, "draft_step_1_10_20.parents", "3 entries", "1 row", "one node index per row")


@pytest.mark.parametrize("command", ["replay", "batch", "plot", "report"])
def test_a_repeated_round_option_is_refused(capsys, tmp_path, command):
    """--round 10_20 --round 9_19 replayed only the last and exited 0."""
    dump = tiny_all(tmp_path / "d")
    code, out, err = run(capsys, command, dump, "--round", "10_20", "--round", "9_19", "-o", tmp_path / "o")
    assert code == 2 and out == ""
    assert_told(err, "--round", "more than once")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["replay"], ["replay", "--summary"], ["replay", "--json"], ["batch"]])
def test_replay_and_batch_check_the_manifest_round_records(capsys, tmp_path, argv):
    """stats/compare/report warned that rounds replay differently from manifest.json; replay and
    batch said nothing. The check is one function (replay.io.manifest), on stderr everywhere."""
    dump = timed_article(tmp_path / "mixed", timing=None, record=dict(ROUND_RECORD, accepted_length=2))
    code, out, err = run(capsys, *argv, dump, "--no-progress")
    assert code == 0 and "probably wrong" not in out
    assert_told(err, "1 of 1 round(s) replay differently", "accepted length 3 replayed, 2 recorded", "probably wrong")
    assert err.count("replay differently") == 1


def test_replay_help_says_a_manifest_disagreement_is_a_warning_not_exit_1(capsys):
    """new-user try 10: replay --help put "rounds that disagree with the directory's manifest.json"
    under exit 1, while they are a WARNING with exit 0 (the test above; docs/dump-format.md)."""
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    exit_part = shown[shown.index("Exit status:") :]  # the last paragraph (options.exit_status_help)
    assert "disagree with the directory's manifest.json" not in exit_part
    assert "replays differently from what manifest.json records for it" in shown
    assert "is a WARNING on stderr and leaves the exit status alone" in shown


@pytest.mark.parametrize(
    "argv,words",
    [
        (["replay", "--workers", "3"], ["--workers 3 without --json or --summary", "drop --workers"]),
        (["replay", "--workers", "2"], ["--workers 2 without --json or --summary"]),
        (["replay", "--json", "--workers", "-2"], ["--workers", "at least 1", "-2"]),
        (["batch", "--workers", "0"], ["--workers", "at least 1", "got 0"]),
    ],
)
def test_workers_that_would_do_nothing_or_cannot_be_are_refused(capsys, tmp_path, argv, words):
    """--workers with the tree text was taken and did nothing (only --json and --summary read in worker
    processes); a negative count was taken as 1."""
    dump = tiny_all(tmp_path / "d")
    code, out, err = run(capsys, argv[0], dump, *argv[1:])
    assert code == 2 and out == ""
    assert_told(err, *words)
    assert len(err.strip().splitlines()) == 1


def tiny_two_rounds(directory: Path) -> Path:
    """tiny_all plus a second round 11_21 (its step 0 named 10_20), the same files."""
    tiny_all(directory)
    write_matrix(directory / "draft_step_0_10_20", [[5, 6]])
    write_matrix(directory / "draft_step_1_11_21", [[7]])
    write_matrix(directory / "validate_11_21", [[5], [7], [1], [8]])
    return directory


@pytest.mark.parametrize("command", [["replay", "--summary"], ["replay", "--json"], ["batch"], ["stats"]])
@pytest.mark.parametrize(
    "lose,words",
    [
        ({"draft_step_1_11_21": None}, ["validate has 4 rows", "2 draft steps", "draft_step_1_11_21 is missing"]),
        ({"draft_step_1_11_21": "Draft_Step_1_11_21"}, ["missing draft_step_1_11_21", "Draft_Step_1_11_21"]),
        (
            {"draft_step_1_11_21": "draft_step_1_11_21.scores"},
            ["missing draft_step_1_11_21", "companion without its data file"],
        ),
    ],
)
def test_a_lost_last_draft_step_is_not_an_early_stop(capsys, tmp_path, command, lose, words):
    """The last step's file deleted, misnamed, or only its .scores left: the round replayed with one
    step, as if it stopped early (exit 0, or 1 with the round still counted)."""
    dump = tiny_two_rounds(tmp_path / "d")
    for name, becomes in lose.items():
        if becomes is None:
            (dump / name).unlink()
        else:
            (dump / name).rename(dump / becomes)
    code, out, err = run(capsys, *command, dump, "--no-progress")
    assert code == 1, err
    assert_told(err, "skipped round 11_21", *words)
    if "--json" in command:
        assert [json.loads(line)["round"] for line in out.splitlines()] == ["10_20"]
    elif command[0] == "replay":
        assert "rounds replayed: 1   skipped: 1" in out


@pytest.mark.parametrize("command", [["replay"], ["replay", "--summary"], ["batch"], ["stats"], ["compare"]])
def test_warnings_about_the_input_go_to_stderr_once(capsys, tmp_path, command):
    """replay printed the rank-major WARNING as a note on stdout, stats its own WARNING line on stdout,
    compare its 'no measured timings' WARNING on stdout; batch said nothing at all."""
    dump = tiny_two_rounds(tmp_path / "d")
    code, out, err = run(capsys, *command, dump, "--no-progress")
    assert code == 0, err
    assert "WARNING" not in out
    assert_told(err, "2 of 2 round(s) have no scores and no parents", "rank-major fallback")
    assert err.count("rank-major fallback") == 1
    if command[0] == "compare":
        assert_told(err, "no measured timings")


def test_recommend_says_why_depth_1_is_estimated_from_fewer_visits_than_depth_2_needs(capsys, tmp_path):
    """Depth 1 (2 visits) was estimated while depth 2 was refused for "fewer than 30 visits": the
    note now gives both counts and the rule (depth 1 from any number: every round visits the root)."""
    dump = tiny_two_rounds(tmp_path / "d")  # 2 rounds: depth 1 has 2 visits, depth 2 has 2 (node 5 accepted)
    code, out, err = run(capsys, "recommend", dump, "--budget", "2", "--bootstrap", "5", "--no-progress")
    assert code == 0, err
    note = next(ln for ln in out.splitlines() if "refused depths beyond 1" in ln)
    assert "depth 2 has 2 visit(s), fewer than --min-count 30" in note
    assert "depth 1 is estimated from any number of visits (2 here: every round visits the root)" in note


def test_hints_point_the_right_way(capsys, tmp_path):
    """A config that does not fit was told "state it with --layout"; gamma 2 with 3 topKSpec rows
    blamed topHead (not written); 1e0 suggested a header line; 5.0 in a .parents file was "not an
    integer token id"."""
    dump = tiny_two_rounds(tmp_path / "d")
    write_matrix(dump / "validate_10_20", [[5], [7], [1]])  # 3 rows: neither 2 (parents) nor 4 (all)
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 1
    assert_told(err, "validate has 3 row(s)", "is the config the dump's (--config)", "draft step missing")
    (dump / "config.json").write_text('{"gamma": 2, "topKSpec": [[2], [1], [1]]}')
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 2
    assert_told(err, "'topKSpec'", "3 rows but gamma = 2", "number of draft steps")
    assert "topHead" not in err
    write_config(dump / "config.json", [[2], [1]], [1, 1])
    write_matrix(dump / "draft_step_1_10_20", [["7e0"]])
    write_matrix(dump / "draft_step_1_11_21.parents", [["1.0"]])
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 2
    assert_told(err, "'7e0' is not an integer token id; scientific notation", "write it as one")
    assert_told(err, "draft_step_1_11_21.parents (parents)", "'1.0' is not an integer node index")
    assert "header line" not in err


def test_a_label_count_that_does_not_fit_is_told_in_plain_words(capsys, tmp_path):
    """ "--label given 1 time(s) for 2 director(y/ies)"."""
    a, b = tiny_all(tmp_path / "a"), tiny_all(tmp_path / "b")
    code, out, err = run(capsys, "stats", a, b, "--label", "mine", "--no-progress")
    assert code == 2
    assert_told(err, "--label given once for 2 dumps", "once per DUMP")
    assert "(s)" not in err and "y/ies" not in err


def test_a_near_miss_beside_its_right_name_is_called_an_extra_file(capsys, tmp_path):
    """dump_validate_10_20 beside validate_10_20 got "did you mean validate_10_20?"."""
    dump = tiny_two_rounds(tmp_path / "d")
    write_matrix(dump / "dump_validate_10_20", [[5], [7], [1], [8]])
    code, out, err = run(capsys, "replay", dump, "--summary")
    assert code == 1
    assert_told(err, "skipped dump_validate_10_20", "validate_10_20 is here too", "extra file")
    assert "did you mean validate_10_20" not in err


# --- lead: a second new user's try (after the merges) -------------------------------------------


@pytest.mark.parametrize("command", [["replay", "--summary"], ["batch"]])
def test_temperature_zero_is_greedy_even_without_scores(capsys, tmp_path, command):
    """--help says "0 = greedy", and greedy needs only the top-1 column: a script passing
    --temperature "$T" with T = 0 must not fail on a dump without scores (it exited 2)."""
    dump = article_by_hand(tmp_path / "art")
    code, out, err = run(capsys, command[0], dump, *command[1:], "--temperature", "0", "--no-progress")
    assert code == 0, err
    assert "L = 3: 1.000" in out  # the article's round accepts 3 (DESIGN.md), with probability 1 at T = 0
    code, out, err = run(capsys, command[0], dump, *command[1:], "--temperature", "0.5", "--no-progress")
    assert code == 2 and "no scores" in err  # any other T still needs the target's log-probs


def test_sampling_on_rounds_with_fewer_validate_columns_agrees_in_batch_and_replay(capsys, tmp_path):
    """Rounds whose validate files record fewer candidates are padded together in one batch; the
    padding (NaN scores under PAD_TOKEN ids) must not read as a hostile NaN log-prob."""
    import numpy as np

    src = SYNTH
    keys = sorted(p.name[len("validate_") : -len(".npz")] for p in src.glob("validate_*.npz"))[:6]
    dump = tmp_path / "d"
    dump.mkdir()
    manifest = json.loads((src / "manifest.json").read_text())
    manifest.pop("rounds")
    (dump / "manifest.json").write_text(json.dumps(manifest))
    for key in keys:
        a, b = (int(v) for v in key.split("_"))
        for f in [*src.glob(f"*_{key}.npz"), src / f"draft_step_0_{a - 1}_{b - 1}.npz"]:
            (dump / f.name).write_bytes(f.read_bytes())
    first = dump / f"validate_{keys[0]}.npz"
    arrays = dict(np.load(first))
    np.savez(first, **{k: v[:, :2] for k, v in arrays.items()})  # 2 candidates recorded instead of 4
    code, out, err = run(capsys, "replay", dump, "--temperature", "0.7", "--json", "--no-progress")
    assert code == 0, err
    rows = [json.loads(line)["sampling"] for line in out.splitlines()]
    lo = sum(r["expected_accepted_length_lo"] for r in rows) / len(rows)
    hi = sum(r["expected_accepted_length_hi"] for r in rows) / len(rows)
    code, out, err = run(capsys, "batch", dump, "--temperature", "0.7", "--no-progress")
    assert code == 0 and "skipped" not in err, err
    assert f"({len(rows)} rounds with scores" in out
    assert f"expected accepted length per round: [{lo:.4f}, {hi:.4f}]" in out


# --- sampling-compare: compare / recommend / report at temperature T (issue 20) -----------------


def test_compare_at_t_with_a_plot_is_refused_naming_the_option(capsys):
    """A user adds --plot to compare --temperature: the plot draws the greedy table, so it is refused."""
    code, out, err = run(capsys, "compare", SYNTH, "--temperature", "0.7", "--plot", "c.png")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert_told(err, "--plot", "--temperature", "drop")


def test_recommend_at_t_on_a_dump_without_scores_says_why(capsys, tmp_path):
    """The article typed in by hand has no scores: recommend at T has nothing to walk, exit 2 with the round."""
    code, out, err = run(capsys, "recommend", article_by_hand(tmp_path / "a"), "--budget", "6", "--temperature", "0.7")
    assert code == 2 and out == ""
    assert_told(err, "round 124_140", "no scores", "no round could be replayed")


@pytest.mark.slow
def test_compare_above_one_without_vocabulary_says_which_option_gives_lower_bounds(capsys):
    code, out, err = run(
        capsys, "compare", SYNTH, "--temperature", "1.3", "--configs", "[6]|[2,2]", "--no-progress", "--json"
    )
    assert code == 0 and json.loads(out)["configs"][0]["expected_accepted_length_lo"] == 0.0
    assert_told(err, "--vocab-size", "lower bounds")


# --- sampling-cmds: node_logprobs and vocab_size written by hand (docs/dump-format.md), stats at T ---


def node_logprob_dump(directory: Path, own: tuple[float, float, float], temps=(0.5,), vocab=None) -> Path:
    """Root children 10, 11; node 1 (token 10) expanded with child 12; validate in the all layout
    (.npz: ids and node_logprobs, one row per node), manifest listing the column's temperature."""
    import math

    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[2], [1]], [1, 1])
    write_matrix(directory / "draft_step_0_123_139", [[10, 11]])
    write_matrix(directory / "draft_step_1_124_140", [[12]])
    ids = np.array([[10, 11], [12, 13], [14, 15], [16, 17]], dtype=np.int64)
    lp = np.array([[0.0], *([math.log(p)] for p in own)])
    np.savez(directory / "validate_124_140.npz", ids=ids, node_logprobs=lp)
    body = {"layout": "all", "node_logprob_temperatures": list(temps)}
    if vocab is not None:
        body["vocab_size"] = vocab
    (directory / "manifest.json").write_text(json.dumps(body))
    return directory


def test_hand_written_node_logprobs_replay_exact_at_their_temperature(capsys, tmp_path):
    """p(10) = 0.6, p(11) = 0.3, p(12 | 10) = 0.5 at T = 0.5: E[L] = 0.6 + 0.3 + 0.6 * 0.5 = 1.2, exact;
    no scores needed at that T, while T = 0.7 (not recorded) has no scores to read and is skipped."""
    d = node_logprob_dump(tmp_path / "d", (0.6, 0.3, 0.5))
    code, out, err = run(capsys, "replay", d, "--temperature", "0.5", "--json", "--no-progress")
    assert code == 0, err
    s = json.loads(out)["sampling"]
    assert s["exact"] and s["from_node_logprobs"] and abs(s["expected_accepted_length"] - 1.2) < 1e-12
    code, out, err = run(capsys, "stats", d, "--temperature", "0.7", "--no-progress")
    assert code == 2
    assert_told(err, "round 124_140", "no scores")


def test_hand_written_node_logprobs_that_sum_above_one_are_skipped(capsys, tmp_path):
    d = node_logprob_dump(tmp_path / "d", (0.7, 0.6, 0.5))  # the root's children: 1.3
    code, out, err = run(capsys, "replay", d, "--temperature", "0.5", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "round 124_140", "sum to more than 1", "node_logprobs")


@pytest.mark.parametrize(
    "temps,vocab,field",
    [
        (["0.5"], None, "node_logprob_temperatures"),
        ([0.5, -1], None, "node_logprob_temperatures"),
        ([0.5], 0, "vocab_size"),
    ],
)
def test_hand_written_manifest_sampling_fields_are_checked(capsys, tmp_path, temps, vocab, field):
    d = node_logprob_dump(tmp_path / "d", (0.6, 0.3, 0.5), temps, vocab)
    code, out, err = run(capsys, "stats", d, "--temperature", "0.5", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "manifest.json", field)


def test_stats_at_t_with_a_top1_table_says_to_drop_the_temperature(capsys, tmp_path):
    d = node_logprob_dump(tmp_path / "d", (0.6, 0.3, 0.5))
    code, out, err = run(capsys, "stats", d, "--temperature", "0.5", "--table", "node_hits", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "--table node_hits", "drop --temperature")


# --- sampling-fixes: a new user's sampling mistakes (issue 20's review) ---------------------------


def small_scored_by_hand(directory: Path, first_row: list[float] | None = None) -> Path:
    """The user's dump (docs/dump-format.md, layout all): two steps, 3 recorded candidates per row,
    every row summing to 0.9 (a tail of 0.1 left over), scores as natural-log probabilities."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[2], [1, 1]], [1, 2])
    write_matrix(directory / "draft_step_0_9_19", [[10, 20]])
    write_matrix(directory / "draft_step_0_9_19.parents", [[0]])
    write_matrix(directory / "draft_step_1_10_20", [[30], [40]])
    write_matrix(directory / "draft_step_1_10_20.parents", [[1], [2]])
    write_matrix(directory / "validate_10_20", [[10, 20, 99], [30, 31, 5], [41, 40, 5], [1, 2, 5], [1, 2, 5]])
    probs = [[0.5, 0.3, 0.1], [0.6, 0.2, 0.1], [0.5, 0.3, 0.1], [0.5, 0.3, 0.1], [0.5, 0.3, 0.1]]
    if first_row is not None:
        probs[0] = first_row
    lines = "".join(" ".join(repr(math.log(p)) for p in row) + "\n" for row in probs)
    (directory / "validate_10_20.scores").write_text(lines, encoding="utf-8")
    return directory


@pytest.mark.parametrize("t", ["0.7", "1.3"])
@pytest.mark.parametrize("command", ["replay", "stats", "batch", "compare"])
def test_a_vocab_size_equal_to_the_recorded_columns_with_mass_below_one_gives_no_number(capsys, tmp_path, t, command):
    # Before: "1 exact, 1.2989" at T = 1.3, above the upper bound the tool gives without V (1.0877).
    d = small_scored_by_hand(tmp_path / "my")
    code, out, err = run(capsys, command, d, "--temperature", t, "--vocab-size", "3")
    assert code == 2 and "exact" not in out and "1.2989" not in out and "1.5537" not in out
    assert_told(err, "round 10_20", "contradicts the vocabulary size", "vocab size 3 (from --vocab-size)")
    if command in ("replay", "stats", "compare"):  # the per-round readers name the scores file and row
        assert_told(err, "validate_10_20.scores (scores), row 0")
    # one more token than recorded: the tail of 0.1 fits (<= the smallest p, 0.1), and the bounds are
    # the truth's (one unnamed token holds exactly m)
    code, out, err = run(capsys, command, d, "--temperature", t, "--vocab-size", "4")
    assert code == 0, err


def test_the_manifest_vocab_size_is_named_when_the_rows_contradict_it(capsys, tmp_path):
    d = small_scored_by_hand(tmp_path / "my")
    (d / "manifest.json").write_text(json.dumps({"vocab_size": 3}), encoding="utf-8")
    code, _, err = run(capsys, "replay", d, "--temperature", "0.7")
    assert code == 2
    assert_told(err, "vocab size 3 (from", "manifest.json, field vocab_size")
    (d / "manifest.json").write_text(json.dumps({"vocab_size": 2}), encoding="utf-8")
    code, _, err = run(capsys, "replay", d, "--temperature", "0.7")
    assert code == 2
    assert_told(err, "vocab size 2 (from", "manifest.json, field vocab_size", "smaller than the 3 recorded")


@pytest.mark.parametrize("command", ["replay", "stats", "batch"])
def test_temperature_zero_does_not_judge_the_scores(capsys, tmp_path, command):
    # A first row summing to more than 1: the greedy replay reads only the top-1 column, and T = 0 is
    # the greedy replay (README): the same numbers and the same exit code as without --temperature.
    d = small_scored_by_hand(tmp_path / "sum", first_row=[0.9, 0.6, 0.1])
    code, out, err = run(capsys, command, d, "--temperature", "0")
    greedy_code, greedy_out, _ = run(capsys, command, d)
    assert code == greedy_code == 0, err
    assert "sum to more than 1" not in err
    if command == "replay":
        assert "expected accepted length 2.0000  (exact)" in out and greedy_out.splitlines()[0] in out


@pytest.mark.parametrize("command", ["replay", "stats"])
def test_a_row_summing_above_one_names_the_scores_file_and_row(capsys, tmp_path, command):
    d = small_scored_by_hand(tmp_path / "sum", first_row=[0.9, 0.6, 0.1])
    code, _, err = run(capsys, command, d, "--temperature", "0.7")
    assert code == 2
    assert_told(err, "round 10_20", "validate_10_20.scores (scores), row 0", "sum to more than 1")


@pytest.mark.parametrize("command", ["replay", "batch", "stats", "compare", "recommend"])
def test_vocab_size_without_temperature_is_refused(capsys, tmp_path, command):
    d = small_scored_by_hand(tmp_path / "my")
    extra = ["--budget", "3"] if command == "recommend" else []
    code, out, err = run(capsys, command, d, "--vocab-size", "3", *extra)
    assert code == 2 and not out
    assert_told(err, "--vocab-size 3 without --temperature")
    assert len(err.strip().splitlines()) == 1


def test_temperature_zero_says_nothing_about_scores_and_counts_one_round(capsys, tmp_path):
    d = small_scored_by_hand(tmp_path / "nos")
    (d / "validate_10_20.scores").unlink()  # no scores: T = 0 is still the greedy replay
    for argv in (["replay", "--summary"], ["compare"], ["recommend", "--budget", "3"]):
        code, out, err = run(capsys, argv[0], d, "--temperature", "0", *argv[1:])
        assert code == 0, err
        assert "1 round" in out and "1 rounds" not in out and "with scores" not in out, out
    code, out, _ = run(capsys, "replay", small_scored_by_hand(tmp_path / "my"), "--temperature", "0.7", "--summary")
    assert code == 0 and "(1 round with scores, " in out


def test_recommend_on_one_round_shows_no_infinite_interval(capsys, tmp_path):
    # Before: "measured BE 2.000 [-inf,inf]" and "yes": one round has no spread to build a CI from.
    code, out, err = run(capsys, "recommend", small_scored_by_hand(tmp_path / "my"), "--budget", "3")
    assert code == 0, err
    assert "inf" not in out and "[CI n/a: 1 round]" in out and "not judged (no interval from one round)" in out


def test_report_temperature_table_shows_refused_lower_bounds_as_a_dash(capsys, tmp_path):
    d = small_scored_by_hand(tmp_path / "my")
    code, _, err = run(capsys, "report", d, "-o", tmp_path / "rep")
    assert code == 0, err
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    section = page.split("Sampling at temperature T</h2>")[1]
    rows = [r for r in section.split("<tr>") if "<td>1.5</td>" in r]
    assert rows and all("0.000.." not in r and "1.000.." not in r and "—.." in r for r in rows)
    assert "Z = 1 is known there" in section and "<div class='wide'>" in section
    assert "shown as —" in section


def test_validate_scores_that_rise_along_the_row_are_warned_about(capsys, tmp_path):
    # docs/dump-format.md: a row in descending probability. A rising row is read as it is (column 0
    # the top-1), so the numbers do not change; one WARNING line names the file and the first row.
    d = small_scored_by_hand(tmp_path / "asc", first_row=[0.1, 0.3, 0.5])
    code, out, err = run(capsys, "replay", d)
    assert code == 0 and "accepted length: 2" in out
    assert_told(err, "WARNING: 1 validate row(s) have scores that rise", "validate_10_20.scores, row 0")
    code, out, err = run(capsys, "replay", small_scored_by_hand(tmp_path / "my"))
    assert code == 0 and "rise" not in err


def draft_scores_by_hand(directory: Path, step0: str, validate_row0: str | None = None) -> Path:
    """A user's text dump (layout all): step 0 drafts three candidates (its scores row ``step0``, as
    probabilities), step 1 expands two of them by path probability; validate scores only when
    ``validate_row0`` is given (then its first row, the others descending)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[3], [1, 1]], [1, 2])
    write_matrix(directory / "draft_step_0_9_19", [[10, 20, 30]])
    (directory / "draft_step_0_9_19.scores").write_text(step0 + "\n", encoding="utf-8")
    write_matrix(directory / "draft_step_1_10_20", [[50], [60]])
    (directory / "draft_step_1_10_20.scores").write_text("0.9\n0.8\n", encoding="utf-8")
    write_matrix(directory / "validate_10_20", [[30, 20], [1, 2], [1, 2], [50, 2], [1, 2], [1, 2]])
    if validate_row0 is not None:
        rows = [validate_row0] + ["0.6 0.3"] * 5
        (directory / "validate_10_20.scores").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return directory


@pytest.mark.parametrize("command", ["replay", "batch", "stats", "compare"])
def test_rising_draft_scores_are_warned_about(capsys, tmp_path, command):
    # docs/dump-format.md: a draft row in descending probability. "0.2 0.3 0.5" was taken silently:
    # A1 named the least likely candidate (and rank 0 in the rank statistics) while the selection by
    # path probability expanded A3 first. Numbers stay as they are; one WARNING line says so.
    d = draft_scores_by_hand(tmp_path / "asc", "0.2 0.3 0.5")
    code, out, err = run(capsys, command, d, "--no-progress")
    assert code == 0
    assert_told(
        err,
        "WARNING: 1 draft row(s) have scores that rise along the row",
        f"(first: {d / 'draft_step_0_9_19.scores'}, row 0 (0-based))",
        "names and rank statistics (A1, A2, ...; rank_of_hit) follow the column order",
        "the selection by path probability reads the scores",
    )
    assert err.count("have scores that rise along the row") == 1
    if command == "replay":
        assert "expanded at step 1: A3, A2" in out and "accepted length: 2" in out
    # equal neighbours do not rise: a tie is in descending order either way
    code, _, err = run(capsys, command, draft_scores_by_hand(tmp_path / "tie", "0.4 0.3 0.3"), "--no-progress")
    assert code == 0 and "rise along" not in err


def test_the_rising_validate_warning_is_unchanged_and_comes_before_the_draft_one(capsys, tmp_path):
    d = draft_scores_by_hand(tmp_path / "both", "0.2 0.3 0.5", validate_row0="0.3 0.6")
    code, _, err = run(capsys, "replay", d)
    assert code == 0
    rising = [line for line in err.splitlines() if "rise along the row" in line]
    assert rising == [
        f"specreplay: WARNING: 1 validate row(s) have scores that rise along the row (first: "
        f"{d / 'validate_10_20.scores'}, row 0 (0-based)); docs/dump-format.md writes a row in descending "
        "probability: the greedy replay takes column 0 as the target's top-1 all the same (the sampling "
        "bounds read each row's smallest p, valid in any order)",
        f"specreplay: WARNING: 1 draft row(s) have scores that rise along the row (first: "
        f"{d / 'draft_step_0_9_19.scores'}, row 0 (0-based)); docs/dump-format.md writes a row in descending "
        "probability: the candidates' names and rank statistics (A1, A2, ...; rank_of_hit) follow the "
        "column order all the same, while the selection by path probability reads the scores",
    ]
    code, _, err = run(capsys, "replay", draft_scores_by_hand(tmp_path / "only", "0.5 0.3 0.2", "0.3 0.6"))
    assert code == 0 and "validate row(s) have scores that rise" in err and "draft row(s)" not in err


@pytest.mark.parametrize("command", ["batch", "stats", "compare"])
def test_the_engine_words_its_refusals_without_a_second_replay(capsys, tmp_path, monkeypatch, command):
    """Every refused round's reason (the file, the field, the row) comes from the vectorised engine
    itself: the per-round reference never runs, for one refused round or for many."""
    import analysis.shapes.speedpredict
    import analysis.tables.runs
    import replay.testing.replayer

    def no_reference(*_a, **_k):
        raise AssertionError("the per-round reference replay ran")

    for module in (replay.testing.replayer, analysis.tables.runs, analysis.shapes.speedpredict):
        for name in ("replay_directory", "replay_packed"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, no_reference)
    d = small_scored_by_hand(tmp_path / "my")
    keys = [f"{10 + 2 * k}_{20 + 2 * k}" for k in range(1, 25)]
    for key in keys:
        a, b = map(int, key.split("_"))
        for f in sorted(d.glob("*_10_20*")):
            shutil.copy(f, d / f.name.replace("10_20", key))
        for f in sorted(d.glob("draft_step_0_9_19*")):
            shutil.copy(f, d / f.name.replace("9_19", f"{a - 1}_{b - 1}"))
    code, _, err = run(capsys, command, d, "--temperature", "0.7", "--vocab-size", "3")
    assert code == 2, err
    for key in ["10_20", "12_22", "14_24"]:  # the first three in full, the rest folded with the last's name
        assert_told(err, f"round {key}", f"validate_{key}.scores (scores), row 0 (0-based): a validate row contradicts")
    assert_told(err, "skipped 22 more for the same reason", "round 58_68)")


def test_many_refused_rounds_each_name_their_scores_file_through_compare(capsys, tmp_path):
    # compare at T reads a dump directory on the batch arrays, which know no file; its refused rounds
    # get the round path's words. More than a few are replayed in one pass of the run (not one scan
    # of the directory per round): each still names its own file and row.
    d = small_scored_by_hand(tmp_path / "my")
    keys = [f"{10 + 2 * k}_{20 + 2 * k}" for k in range(1, 19)]  # 19 refused: more than 16, each listed (<= 20)
    for key in keys:  # the step-0 files sit one key earlier (docs/dump-format.md), here at odd keys
        a, b = map(int, key.split("_"))
        for f in sorted(d.glob("*_10_20*")):
            shutil.copy(f, d / f.name.replace("10_20", key))
        for f in sorted(d.glob("draft_step_0_9_19*")):
            shutil.copy(f, d / f.name.replace("9_19", f"{a - 1}_{b - 1}"))
    code, out, err = run(capsys, "compare", d, "--temperature", "0.7", "--vocab-size", "3")
    assert code == 2 and "exact" not in out
    for key in ["10_20", *keys]:
        assert_told(err, f"round {key}", f"validate_{key}.scores (scores), row 0")


# --- sampling-gaps: batch --temperature's messages name the file; where node_logprobs go unread ---


@pytest.mark.parametrize("command", ["replay", "batch"])
def test_batch_names_the_scores_file_and_row_of_a_row_summing_above_one(capsys, tmp_path, command):
    # Before: batch said "round 10_20: ... a validate row's probabilities sum to more than 1" and no
    # file; now the words of replay: the scores file, the field, the row.
    d = small_scored_by_hand(tmp_path / "my", first_row=[0.7, 0.5, 0.1])
    code, out, err = run(capsys, command, d, "--temperature", "0.7")
    assert code == 2 and "exact" not in out
    assert_told(err, "round 10_20", "validate_10_20.scores (scores), row 0", "sum to more than 1")


@pytest.mark.parametrize("command", ["replay", "batch"])
def test_node_logprobs_summing_above_one_name_the_file_and_field(capsys, tmp_path, command):
    d = node_logprob_dump(tmp_path / "d", (0.7, 0.6, 0.5))  # the root's children: 1.3
    code, out, err = run(capsys, command, d, "--temperature", "0.5", "--no-progress")
    assert code == 2 and "exact" not in out
    assert_told(err, "round 124_140", "validate_124_140.npz (node_logprobs)", "sum to more than 1")


@pytest.mark.parametrize("command", ["replay", "batch"])
def test_node_logprobs_with_fewer_columns_than_the_manifest_lists_are_named(capsys, tmp_path, command):
    d = node_logprob_dump(tmp_path / "d", (0.6, 0.3, 0.5), temps=(0.5, 1.0))  # one column written, two listed
    code, out, err = run(capsys, command, d, "--temperature", "0.5", "--no-progress")
    assert code == 2 and "exact" not in out
    assert_told(
        err, "validate_124_140.npz (node_logprobs)", "1 column(s)", "manifest.json node_logprob_temperatures lists 2"
    )


def parents_layout_node_logprob_dump(directory: Path) -> Path:
    """node_logprob_dump's round with its validate in the parents layout (one row per expanded node:
    the root, node 1), scored, node_logprobs written one per row as a live dump would."""
    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    write_config(directory / "config.json", [[2], [1]], [1, 1])
    write_matrix(directory / "draft_step_0_123_139", [[10, 11]])
    write_matrix(directory / "draft_step_1_124_140", [[12]])
    ids = np.array([[10, 11, 5], [12, 13, 5]], dtype=np.int64)
    scores = np.log(np.array([[0.6, 0.3, 0.05], [0.5, 0.2, 0.1]]))
    own = np.log(np.array([[1.0], [0.6]]))
    np.savez(directory / "validate_124_140.npz", ids=ids, scores=scores, node_logprobs=own)
    (directory / "manifest.json").write_text(json.dumps({"layout": "parents", "node_logprob_temperatures": [0.5]}))
    return directory


@pytest.mark.parametrize("command", ["replay", "batch", "stats", "compare"])
def test_a_parents_layout_round_with_node_logprobs_says_it_uses_the_bounds(capsys, tmp_path, command):
    # In the parents layout validate row n is the n-th expanded node, not tree node n: its
    # node_logprobs cannot be read as the nodes' own, so the round falls back to the top-K rows.
    # Before, replay said "(a packed run does not)" and compare said nothing; now each says which
    # round, why, and that the numbers are bounds, once.
    d = parents_layout_node_logprob_dump(tmp_path / "p")
    code, out, err = run(capsys, command, d, "--temperature", "0.5", "--no-progress")
    assert code == 0, err
    assert_told(err, "records node_logprobs at T = 0.5", "1 in the parents layout", "round 124_140", "top-K bounds")
    assert err.count("note: manifest.json records node_logprobs") == 1
    assert "packed run does not" not in err


# --- lead: a long skip listing is folded by reason (new-user try 3: 100,001 identical lines) ---


def test_many_rounds_skipped_for_one_reason_are_folded_into_a_count(capsys, tmp_path):
    d = small_root_by_hand(tmp_path / "noscores", root=2, rounds=25)  # no scores: nothing to sample from
    code, out, err = run(capsys, "replay", d, "--temperature", "0.7", "--summary", "--no-progress")
    assert code == 2
    skips = [line for line in err.splitlines() if line.startswith("specreplay: skipped")]
    assert len(skips) == 4, err
    assert all("no scores" in line for line in skips), err
    assert skips[0].startswith("specreplay: skipped round 10_10: ")
    assert_told(skips[3], "skipped 22 more for the same reason (round 40_40 … round 250_250)")


def test_a_short_skip_listing_keeps_one_line_per_round(capsys, tmp_path):
    d = small_root_by_hand(tmp_path / "noscores", root=2, rounds=5)
    code, out, err = run(capsys, "replay", d, "--temperature", "0.7", "--summary", "--no-progress")
    assert code == 2
    skips = [line for line in err.splitlines() if line.startswith("specreplay: skipped")]
    assert [s.split(":")[1].strip() for s in skips] == [f"skipped round {10 * r}_{10 * r}" for r in range(1, 6)], err


def test_a_mistyped_option_is_told_by_its_command_with_the_nearest_option(capsys):
    code, out, err = run(capsys, "replay", "sample_dumps/article_round", "--temprature", "0.7")
    assert code == 2 and out == ""
    assert err.strip() == (
        "specreplay replay: error: unrecognized arguments: --temprature 0.7; --temprature: did you mean "
        "--temperature? (see specreplay replay --help)"
    )
    code, out, err = run(capsys, "stats", "sample_dumps/article_round", "--zzz")
    assert code == 2 and "did you mean" not in err and "(see specreplay stats --help)" in err


def test_an_option_after_double_dash_is_told_to_be_a_positional_not_suggested_as_itself(capsys):
    """After ``--`` argparse reads every word as a positional: '--json: did you mean --json?' was the hint."""
    d = "sample_dumps/article_round"
    code, out, err = run(capsys, "compare", d, "--configs", "[1]", "--", "--json")
    assert code == 2 and out == ""
    assert err.strip() == (
        "specreplay compare: error: unrecognized arguments: -- --json; words after -- are not options: --json "
        "(put options before --) (see specreplay compare --help)"
    )
    code, out, err = run(capsys, "replay", d, "--", "--json")  # argparse drops this -- itself
    assert code == 2 and "did you mean" not in err and "words after -- are not options: --json (" in err
    code, out, err = run(capsys, "replay", d, "--temprature", "0.7", "--", "--jsn")
    assert_told(err, "--temprature: did you mean --temperature?; words after -- are not options: --jsn (")
    code, out, err = run(capsys, "batch", d, "--", "-o", "x.csv")  # a short option after -- too
    assert code == 2 and "words after -- are not options: -o (put options before --)" in err
    code, out, err = run(capsys, "stats", "--", d, "--json")  # stats takes dumps: --json became one
    assert code == 2 and out == ""
    assert err.strip() == "specreplay: error: --json: no such directory (an option after --? put options before --)"


@pytest.mark.parametrize(
    "argv",
    [("batch",), ("stats",), ("compare",), ("recommend", "--budget", "4")],
    ids=["batch", "stats", "compare", "recommend"],
)
def test_a_vocab_size_below_the_recorded_candidates_is_one_line_on_the_batch_path(capsys, argv):
    # new-user try 4: these four stopped with "internal error: ValueError" (replay skips each round)
    command, *rest = argv
    code, out, err = run(
        capsys, command, "sample_dumps/synthetic_article", *rest, "--temperature", "0.7", "--vocab-size", "2"
    )
    assert code == 2 and out == ""
    # the file, as replay names it (the round path): every round of the sample has 4 columns, so the
    # widest is the first in key order
    assert err.strip().splitlines()[-1] == (
        "specreplay: error: sample_dumps/synthetic_article/validate_100_116.npz (scores): vocab size 2 "
        "(from --vocab-size): smaller than the 4 recorded candidates per row; "
        "it must be at least 4 (the target's vocabulary size)"
    )
    assert "internal error" not in err and "Traceback" not in err


def test_the_batch_paths_name_the_widest_validate_file_when_the_vocab_size_is_below_it(capsys, tmp_path):
    # a varied dump: round 2_3's validate file records 5 candidates, round 1_2's only 3; V = 4 fits the
    # narrower, so the message must name the wider file (the one whose row the size contradicts)
    import numpy as np

    d = tmp_path / "varied"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"gamma": 1, "topKSpec": [[2]], "topHead": [1]}), encoding="utf-8")
    for (a, b), k in (((1, 2), 3), ((2, 3), 5)):
        np.save(d / f"draft_step_0_{a - 1}_{b - 1}.npy", np.array([[7, 8]], dtype=np.int64))
        ids = np.arange(100, 100 + 3 * k, dtype=np.int64).reshape(3, k)  # all layout: root, 7, 8
        ids[0, 0] = 7
        logp = np.log(np.full((3, k), 0.5 / k))
        logp[:, 0] = np.log(0.5)
        np.savez(d / f"validate_{a}_{b}.npz", ids=ids, scores=logp)
    for command in ("batch", "stats"):
        code, out, err = run(capsys, command, d, "--temperature", "0.7", "--vocab-size", "4")
        assert code == 2 and out == "", err
        last = err.strip().splitlines()[-1]
        want = f"specreplay: error: {d / 'validate_2_3.npz'} (scores): vocab size 4 (from --vocab-size): "
        assert last.startswith(want + "smaller than the 5 recorded candidates per row"), err


@pytest.mark.parametrize(
    "companion", ["validate_124_140.scores", "validate_124_140.scores.txt", "validate_0124_140.scores"]
)
@pytest.mark.parametrize("argv", [("replay",), ("batch",), ("stats",), ("compare",), ("recommend", "--budget", "2")])
def test_a_text_dump_names_its_scores_companion_when_the_vocab_size_is_below_it(capsys, tmp_path, argv, companion):
    # new-user try 11: replay named validate_124_140.scores, the batch paths the ids file beside it; a
    # companion whose counter has a leading zero is paired with validate_124_140 by the same rule
    from tests.test_sampling_cli import tiny_dump

    d = tiny_dump(tmp_path / "d")
    (d / "validate_124_140.scores").rename(d / companion)
    command, *rest = argv
    for extra in (("--vocab-size", "2"), ()):
        if not extra:
            (d / "manifest.json").write_text(json.dumps({"vocab_size": 2}), encoding="utf-8")
        code, out, err = run(capsys, command, d, *rest, "--temperature", "0.7", "--no-progress", *extra)
        assert code == 2 and out == "", err
        assert (
            err.strip().splitlines()[-1].startswith(f"specreplay: error: {d / companion} (scores): vocab size 2 (from ")
        ), err


# --- sampling-minor: issue 20's small items from the new-user tries (one line, the file, 0-based rows) ---


def test_replay_tells_a_vocab_size_below_the_recorded_candidates_once(capsys):
    # new-user try 4: replay skipped every round with the same line (300 rounds, folded) and exit 2;
    # the option is wrong for the whole dump: one line, naming the option, its value, the file and the size
    code, out, err = run(
        capsys, "replay", "sample_dumps/synthetic_article", "--temperature", "0.7", "--vocab-size", "2", "--summary"
    )
    assert code == 2 and out == ""
    assert err.strip() == (
        "specreplay: error: sample_dumps/synthetic_article/validate_100_116.npz (scores): vocab size 2 (from "
        "--vocab-size): smaller than the 4 recorded candidates per row; it must be at least 4 (the target's "
        "vocabulary size)"
    ), err
    code, out, err = run(
        capsys, "replay", "sample_dumps/synthetic_article", "--temperature", "0.7", "--vocab-size", "4", "--summary"
    )
    assert "recorded candidates" not in err  # the size it names passes this check (the rows are then judged by it)


def test_a_row_number_in_a_message_says_it_counts_from_zero(capsys, tmp_path):
    # new-user try 4: "row 1" was read as the file's first row; rows count from 0 (docs/dump-format.md)
    d = small_scored_by_hand(tmp_path / "sum")
    lines = (d / "validate_10_20.scores").read_text(encoding="utf-8").splitlines()
    lines[1] = " ".join(repr(math.log(p)) for p in (0.9, 0.6, 0.1))  # the second line: row 1
    (d / "validate_10_20.scores").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = run(capsys, "replay", d, "--temperature", "0.7", "--summary")
    assert code == 2
    assert_told(err, "validate_10_20.scores (scores), row 1 (0-based): a validate row's probabilities sum")
    d = small_scored_by_hand(tmp_path / "neg")
    write_matrix(d / "draft_step_1_10_20", [[30], [-40]])  # the second row of step 1
    code, _, err = run(capsys, "replay", d)
    assert code == 2
    assert_told(err, "draft_step_1 row 1 (0-based) has negative token ids")


def test_a_rising_draft_row_of_a_run_packed_from_memory_names_the_packed_array(capsys, tmp_path):
    # no original files: the line names the draft step's packed scores array and the round's place in it
    from replay.core.config import TreeConfig
    from replay.io.packed.pack import pack_batches
    from replay.testing.batch_synth import synth_run

    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
    batches = synth_run(cfg, 40, seed=3, early_stop_rate=0.0, target_cols=4, vocab=1000)
    lp = batches[0].steps[1].logp  # [rows, cols, rounds]
    lp[1, [0, 1], 1] = lp[1, [1, 0], 1]  # step 1, row 1 of the second round: its first two columns swapped
    pack_batches(batches, tmp_path / "run", manifest={"config": cfg.to_json(), "layout": "all"})
    for command in ("replay", "batch"):
        code, _, err = run(capsys, command, tmp_path / "run", "--no-progress")
        assert code == 0
        where = f"{tmp_path / 'run' / 'g000' / 's1_logp.npy'}[0, :, :, 1], row 1 (0-based)"
        assert_told(err, f"WARNING: 1 draft row(s) have scores that rise along the row (first: {where})")


def test_a_bad_row_of_a_run_packed_from_memory_names_the_packed_file(capsys, tmp_path):
    # new-user try 4, on bench/million.py's run: "validate (scores), row 0" named no file; the message
    # now names the packed array and the round's place in it, which the user can open with numpy
    import numpy as np

    from replay.core.config import TreeConfig
    from replay.io.packed.pack import pack_batches
    from replay.testing.batch_synth import synth_run
    from replay.testing.sampling_ref import with_validate_scores

    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
    batches = synth_run(cfg, 40, seed=3, early_stop_rate=0.0, target_cols=4, vocab=1000)
    batches = [with_validate_scores(b, k, 1000) for k, b in enumerate(batches)]
    lp = batches[0].validate.logp  # [rows, cols, rounds]
    lp[0, :, 1] = np.log(0.6)  # the root row of the second round sums to 2.4
    run_dir = tmp_path / "run"
    pack_batches(batches, run_dir, manifest={"config": cfg.to_json(), "layout": "all", "vocab_size": 1000})
    for argv in (("replay", "--summary"), ("batch",), ("compare",)):
        code, _, err = run(capsys, argv[0], run_dir, *argv[1:], "--temperature", "0.7")
        assert code == 1, err
        (line,) = [x for x in err.splitlines() if "sum to more than 1" in x]
        assert " validate (scores)" not in line
        where = line.split("no sampling replay at T = 0.7: ")[1].split(" (scores), row 0 (0-based)")[0]
        file, _, index = where.partition("[")
        assert Path(file).parent.parent == run_dir and Path(file).name == "v_logp.npy", line
        block, rows, cols, i = (p.strip() for p in index.rstrip("]").split(","))
        assert (rows, cols) == (":", ":")
        row = np.load(file)[int(block), 0, :, int(i)]  # the row the message names: the one we wrote
        assert np.exp(row).sum() == pytest.approx(2.4, rel=1e-6)


def two_scored_rounds_one_bad(directory: Path) -> Path:
    """small_scored_by_hand's round 10_20, and the same round again as 20_30 with a first row that
    sums to 1.6 (refused at T > 0)."""
    small_scored_by_hand(directory)
    for name in ("draft_step_0_9_19", "draft_step_0_9_19.parents", "draft_step_1_10_20", "draft_step_1_10_20.parents"):
        new = name.replace("9_19", "19_29").replace("10_20", "20_30")
        shutil.copy(directory / name, directory / new)
    shutil.copy(directory / "validate_10_20", directory / "validate_20_30")
    lines = (directory / "validate_10_20.scores").read_text(encoding="utf-8").splitlines()
    lines[0] = " ".join(repr(math.log(p)) for p in (0.9, 0.6, 0.1))
    (directory / "validate_20_30.scores").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    "argv, head",
    [
        (
            ("replay", "--summary"),
            "sampling at T = 0.7 (2 rounds with scores, 1 of them skipped (listed on stderr), 0 exact of the 1 used):",
        ),
        (
            ("batch",),
            "sampling at T = 0.7 (2 rounds with scores, 1 of them skipped (listed on stderr), 0 exact of the 1 used):",
        ),
        (("compare",), "my: 2 rounds with scores, 1 of them skipped (listed on stderr) at T = 0.7, recorded"),
        (("recommend", "--budget", "3"), "my: 2 rounds with scores, 1 of them skipped (listed on stderr) at T = 0.7;"),
    ],
    ids=["replay", "batch", "compare", "recommend"],
)
def test_the_count_of_rounds_with_scores_includes_those_skipped_for_a_bad_row(capsys, tmp_path, argv, head):
    # new-user try 4: "1 rounds with scores" for a dump whose two rounds both have scores (one refused)
    d = two_scored_rounds_one_bad(tmp_path / "my")
    code, out, err = run(capsys, argv[0], d, *argv[1:], "--temperature", "0.7")
    assert code == 1, err
    assert head in out, out
    assert_told(err, "skipped round 20_30", "sum to more than 1")


def test_no_usable_round_at_t_is_one_wording_in_every_command(capsys):
    # new-user try 4: stats said "no round could be replayed at T = 0.7 in DUMP (reasons listed above)",
    # replay "DUMP: no round could be replayed (1 round(s) skipped, ...)", compare with two runs a third
    dump = "sample_dumps/article_round"  # no scores: nothing to sample from
    lines = {}
    for argv in (("replay",), ("batch",), ("stats",), ("compare",), ("recommend", "--budget", "4")):
        code, out, err = run(capsys, argv[0], dump, *argv[1:], "--temperature", "0.7")
        assert code == 2 and out == ""
        lines[argv[0]] = err.strip().splitlines()[-1]
        assert err.count("skipped round 124_140") == 1, err  # the reason once, before the error
    assert len(set(lines.values())) == 1, lines
    assert lines["stats"].startswith(f"specreplay: error: {dump}: no round could be replayed (1 round(s) skipped")
    several = {}
    for argv in (("stats",), ("compare",), ("recommend", "--budget", "4")):
        code, out, err = run(capsys, argv[0], dump, dump, *argv[1:], "--temperature", "0.7")
        assert code == 2
        several[argv[0]] = err.strip().splitlines()[-1]
    assert set(several.values()) == {
        f"specreplay: error: no round could be replayed at T = 0.7 in {dump}, {dump} (reasons listed above)"
    }, several


@pytest.mark.parametrize("extra", [(), ("--temperature", "0.7")], ids=["greedy", "at-T"])
def test_the_stats_header_names_a_run_once(capsys, tmp_path, extra):
    # new-user try 4: "synthetic_article: sample_dumps/synthetic_article  config ..." said the name twice
    dump = "sample_dumps/synthetic_article"
    code, out, _ = run(capsys, "stats", dump, *extra)
    assert code == 0 and out.splitlines()[0].startswith(f"{dump}  config [6]|[2,2]|[1,1] "), out
    code, out, _ = run(capsys, "stats", dump, "--label", "mine", *extra)  # a label of its own is shown
    assert code == 0 and out.splitlines()[0].startswith(f"mine: {dump}  config "), out


def test_report_says_its_no_measured_timings_warning_on_stderr_too(capsys, tmp_path, monkeypatch):
    # new-user try 4: the warning was only in the HTML; compare says it on stderr, report now does too
    import analysis.cost.source as cost_source

    priced = []
    read_timings = cost_source.read_timings
    monkeypatch.setattr(cost_source, "read_timings", lambda *a: priced.append(a) or read_timings(*a))
    code, out, err = run(capsys, "report", "sample_dumps/synthetic_article", "-o", tmp_path / "r", "--no-tables")
    assert len(priced) == 1  # the stderr warning is the page's: the run is priced once
    assert code == 0 and out == "" and f"specreplay: wrote {tmp_path / 'r' / 'index.html'}" in err
    told = [line for line in err.splitlines() if "no measured timings" in line]
    assert len(told) == 1 and told[0].startswith("specreplay: WARNING: synthetic_article: no measured timings"), err
    assert told[0].split("specreplay: ")[1] in (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    cost = '{"tokens": [1, 16], "verify_s": [0.01, 0.012], "draft_step_s": 0.002}'
    code, _, err = run(
        capsys, "report", "sample_dumps/synthetic_article", "-o", tmp_path / "c", "--no-tables", "--cost", cost
    )
    assert code == 0 and "no measured timings" not in err  # a given cost: nothing to warn about


# --- out-paths: output paths never made beyond the one directory named; shapes in words; one entry per mistake ---


@pytest.mark.parametrize(
    "argv,target",
    [
        (["batch", SYNTH, "-o"], "typo/rounds.parquet"),
        (["compare", ARTICLE, "--per-round"], "typo/rounds.csv"),
        (["stats", ARTICLE, "-o"], "typo/tables"),
        (["plot", ARTICLE, "-o"], "typo/plots"),
        (["report", ARTICLE, "-o"], "typo/report"),
        (["pack", ARTICLE, "-o"], "typo/run"),
    ],
)
def test_an_output_under_a_missing_directory_is_refused_not_made(capsys, tmp_path, argv, target):
    """Try 5, finding 1: `batch DUMP -o /nonexistent/dir/rounds.parquet` wrote its rows, exit 0, and
    made /nonexistent/dir at the filesystem root: a typo'd parent is now an error, and nothing is made."""
    code, out, err = run(capsys, *argv, tmp_path / target, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, f"{tmp_path / target}: directory {tmp_path / 'typo'} does not exist (create it first)")
    assert len(err.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []
    (tmp_path / "typo").mkdir()  # the fix the message names
    code, _, err = run(capsys, *argv, tmp_path / target, "--no-progress")
    assert code == 0 and (tmp_path / target).exists(), err


def test_stats_json_to_a_json_name_is_refused_with_the_redirect_hint(capsys, tmp_path):
    """Try 5, finding 1: `stats DUMP --json -o x.json` made a DIRECTORY named x.json (-o of stats is
    where every table goes as CSV and Parquet); the JSON itself is printed on stdout."""
    code, out, err = run(capsys, "stats", ARTICLE, "--json", "-o", tmp_path / "x.json", "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "-o/--output", f"{tmp_path / 'x.json'}: names a new directory but ends in .json", "> x.json")
    assert list(tmp_path.iterdir()) == []
    code, out, err = run(capsys, "stats", ARTICLE, "--json", "-o", tmp_path / "x", "--no-progress")
    assert code == 0 and json.loads(out) and (tmp_path / "x").is_dir(), err


def test_a_truncated_npy_gives_its_shape_in_words(capsys, tmp_path):
    """Try 5, finding 2: "header shape (7, 4) x int64 needs 224 data bytes" gave a Python tuple;
    docs/dump-format.md says messages give shapes in words."""
    np = pytest.importorskip("numpy")
    dump = article_by_hand(tmp_path / "mine")
    (dump / "validate_124_140").unlink()
    np.save(dump / "validate_124_140.npy", np.zeros((7, 4), dtype=np.int64))
    path = dump / "validate_124_140.npy"
    path.write_bytes(path.read_bytes()[:-20])
    code, out, err = run(capsys, "replay", dump, "--no-progress")
    assert code == 2 and out == ""
    assert_told(err, "validate_124_140.npy", "truncated", "7 rows × 4 columns of int64", "224 data bytes", "204")
    assert "(7, 4)" not in err


def test_two_files_of_one_matrix_are_named_in_one_entry(capsys, tmp_path):
    """Try 5, finding 3: validate_10_20 and validate_10_20.txt gave "skipped validate_10_20: 2 files
    hold the same matrix" (which two?), then "validate_10_20.scores: companion file without its data
    file" and "round 10_20: draft files without validate_10_20", though it is there twice."""
    dump = article_by_hand(tmp_path / "mine")
    article_by_hand(dump, step0_key=(9, 19), key=(10, 20))
    shutil.copy(dump / "validate_10_20", dump / "validate_10_20.txt")
    write_matrix(dump / "validate_10_20.scores", [[0]] * 5)
    code, out, err = run(capsys, "replay", dump, "--no-progress")
    assert code == 1 and "124_140" in out
    skips = [line for line in err.splitlines() if "skipped" in line]
    assert len(skips) == 1, err
    assert_told(skips[0], "round 10_20", "keep one")
    # the companion goes with the matrix both files hold, not with the file named last
    # the entry's reason begins with the files: each named by path, as the readers' entries name theirs
    both = f"{dump}/validate_10_20 and {dump}/validate_10_20.txt (with {dump}/validate_10_20.scores, the companion of both)"
    assert both in skips[0]
    assert "without" not in err
    (dump / "validate_10_20.txt").unlink()  # the fix the message names
    code, _, err = run(capsys, "replay", dump, "--no-progress")
    assert code == 0 and "skipped" not in err, err


def test_a_misnamed_validate_and_its_scores_are_one_entry(capsys, tmp_path):
    """Try 5, finding 3: validation_12_22 was named in its round's entry, but its .scores was listed
    again on its own line: one mistake, listed once."""
    dump = article_by_hand(tmp_path / "mine")
    article_by_hand(dump, step0_key=(11, 21), key=(12, 22), validate_name="validation")
    write_matrix(dump / "validation_12_22.scores", [[0]] * 5)
    code, out, err = run(capsys, "replay", dump, "--no-progress")
    assert code == 1 and "124_140" in out
    skips = [line for line in err.splitlines() if "skipped" in line]
    assert len(skips) == 1, err
    assert_told(skips[0], "round 12_22", "did you mean validate_12_22?", "did you mean validate_12_22.scores?")


# --- report-skips: report lists its curve's skipped rounds; recommend's exit; mixed layouts (new-user try 5) ---


def scaled_scores_row(dump: Path, round_name: str = "100_116", row: int = 1, total: float = 1.1) -> Path:
    """synthetic_article with one validate row's probabilities scaled to sum to ``total`` (its scores
    are log-probabilities: each stays below 0, the row's sum is what is wrong)."""
    import numpy as np

    shutil.copytree(SYNTH, dump)
    path = dump / f"validate_{round_name}.npz"
    arrays = dict(np.load(path))
    scores = arrays["scores"].astype(np.float64)
    p = np.exp(scores[row])
    scores[row] = np.log(p * (total / p.sum()))
    arrays["scores"] = scores.astype(np.float32)
    np.savez(path, **arrays)
    return dump


@pytest.mark.slow
def test_report_lists_the_temperature_curves_skipped_rounds_and_exits_1(capsys, tmp_path):
    # new-user try 5: replay/stats/compare --temperature said "skipped round ..." and exited 1; report
    # exited 0 and said it only inside index.html
    dump = scaled_scores_row(tmp_path / "dump")
    row_reason = f"{dump}/validate_100_116.npz (scores), row 1 (0-based): a validate row's probabilities sum"
    code, _, err = run(capsys, "compare", dump, "--temperature", "0.7", "--no-progress")
    # one DUMP's lines carry its RUN label too, as in every command of DUMPs
    assert code == 1 and f"specreplay: dump: skipped round 100_116: no sampling replay at T = 0.7: {row_reason}" in err
    code, out, err = run(capsys, "report", dump, "-o", tmp_path / "r", "--no-tables", "--no-progress")
    assert code == 1 and out == "" and f"specreplay: wrote {tmp_path / 'r' / 'index.html'}" in err, err
    told = [line for line in err.splitlines() if "skipped" in line]
    assert told == [
        "specreplay: dump: skipped round 100_116: no sampling replay at T = 0.1, 0.2, 0.3, 0.4, … "
        f"(15 of the curve's 16): {row_reason} to more than 1 (+1e-05): it sums to 1.1"
    ], err  # once for the round, not once per T; greedy (T = 0) needs no scores
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "1 round(s) without a sampling replay at some T" in page  # the page keeps its note
    # a dump without any scores is one note (no curve), not a skip per round: exit 0 as before
    code, _, err = run(capsys, "report", ARTICLE, "-o", tmp_path / "a", "--no-tables", "--no-progress")
    assert code == 0 and "skipped" not in err, err


def test_readme_and_recommend_help_say_a_disagreeing_shape_exits_0(capsys):
    # new-user try 5: the README listed a disagreeing shape under exit 1, --help called it "a finding,
    # not an error", and recommend exits 0 (tests/test_recommend_cli.py asserts the exit itself)
    readme = " ".join((ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split())  # the exit statuses
    exit_1 = readme[readme.index("**1** some input skipped") : readme.index("**2** error")]
    assert "recommend" not in exit_1 and "disagree" not in exit_1, exit_1
    assert "a `recommend` shape whose measurement disagrees with its prediction is marked `agree = NO`" in readme
    assert "warned about on stderr, with exit 0" in readme
    code, out, _ = run(capsys, "recommend", "--help")
    text = " ".join(out.split())
    assert code == 0 and "is a finding, not skipped input: agree = NO in the table, a warning on stderr, exit 0" in text


def mixed_layout_dump(directory: Path, cut: tuple[str, ...]) -> Path:
    """Four rounds of [2]|[2,2] (topHead [1, 2]: 6 nodes, all layout 7 rows, parents layout 3) typed in
    as docs/dump-format.md says, no layout stated; the validate files of ``cut`` keep their first 3 rows."""
    directory.mkdir()
    write_config(directory / "config.json", [[2], [2, 2]], [1, 2])
    for a in (10, 13, 16, 19):
        b = a + 10
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[5, 6]])
        write_matrix(directory / f"draft_step_1_{a}_{b}", [[7, 8], [9, 10]])
        rows = [[5], [7], [9], [11], [12], [13], [14]]  # root, then nodes 1..6 (tree order)
        write_matrix(directory / f"validate_{a}_{b}", rows[:3] if f"{a}_{b}" in cut else rows)
    return directory


CUT_WORDS = (
    "skipped round 13_23: {d}/validate_13_23: validate has 3 row(s), as the parents layout has, but the run's layout, "
    "that of most of its rounds (all on a tie), is all, which needs 7 here: a cut-off file? (--layout states the run's "
    "layout)"
)


@pytest.mark.parametrize(
    "command",
    [
        ("replay",),
        ("replay", "--json"),
        ("batch",),
        ("stats",),
        ("compare",),
        ("recommend", "--budget", "6"),
        ("plot",),
    ],
    ids=lambda c: " ".join(c),
)
def test_a_validate_file_cut_to_the_parents_rows_is_skipped_by_every_command(capsys, tmp_path, command):
    # new-user try 5: a validate file cut from 7 rows to 3 passed silently as a parents-layout round
    # ("bonus token: not in dump") among all-layout rounds; then a note with exit 0: the layout is the
    # run's, decided once from its rounds, and the cut file a skipped round naming it
    dump = mixed_layout_dump(tmp_path / "dump", cut=("13_23",))
    out = ("-o", tmp_path / "out") if command[0] == "plot" else ()
    code, _, err = run(capsys, *command, dump, "--no-progress", *out)
    told = [
        line.removeprefix("specreplay: ").removeprefix("dump: ") for line in err.splitlines()
    ]  # stats names the run
    skipped = [line for line in told if "skipped" in line]
    assert code == 1 and skipped == [CUT_WORDS.format(d=dump)] and "layout's rows while" not in err, err


@pytest.mark.parametrize("command", ["replay", "batch"])
def test_the_run_layout_is_its_rounds_and_a_stated_one_wins(capsys, tmp_path, command):
    dump = mixed_layout_dump(tmp_path / "dump", cut=("13_23",))
    code, _, err = run(capsys, command, dump, "--no-progress", "--layout", "all")
    assert code == 1 and "skipped round 13_23" in err and "the all layout needs 7" in err, err  # stated: its words
    code, _, err = run(capsys, command, dump, "--no-progress", "--layout", "parents")
    assert code == 1 and err.count("skipped round") == 3 and "13_23" not in err, err
    # three rounds cut to 3 rows and one of 7: the run's layout is parents, the odd file is named
    two = mixed_layout_dump(tmp_path / "two", cut=("10_20", "13_23", "16_26"))
    code, _, err = run(capsys, command, two, "--no-progress")
    assert code == 1 and [line for line in err.splitlines() if "skipped" in line] == [
        f"specreplay: skipped round 19_29: {two}/validate_19_29: validate has 7 row(s), as the all layout has, but the "
        "run's layout, that of most of its rounds (all on a tie), is parents, which needs 3 here: a file from another "
        "recording? (--layout states the run's layout)"
    ], err
    tie = mixed_layout_dump(tmp_path / "tie", cut=("10_20", "13_23"))  # a tie: the cut files are the parents rounds
    code, _, err = run(capsys, command, tie, "--no-progress")
    assert code == 1 and "skipped round 10_20" in err and "skipped round 13_23" in err and "19_29" not in err, err
    assert "the run's layout, that of most of its rounds (all on a tie), is all" in err, err
    code, _, err = run(capsys, command, mixed_layout_dump(tmp_path / "same", cut=()), "--no-progress")
    assert code == 0 and "layout" not in err, err  # one layout throughout: nothing to say


REPEATED_ROW = (
    "note: 1 round(s): draft_step_1: row 2 (0-based), beyond topHead[1] = 2, repeats row 0: not read (rows beyond "
    "topHead are padding) (first: round 124_140)"
)


@pytest.mark.parametrize(
    "command",
    [("replay",), ("replay", "--json"), ("batch",), ("stats",), ("compare",), ("recommend", "--budget", "6")],
    ids=lambda c: " ".join(c),
)
def test_a_draft_row_beyond_top_head_that_repeats_an_expanded_row_is_noted_by_every_command(capsys, tmp_path, command):
    # a new-user pass: a third row repeating the first, in a draft step whose topHead is 2, was ignored
    # silently; rows beyond topHead are never read (docs/dump-format.md, Padding), so a note, exit 0
    dump = article_by_hand(tmp_path / "mine")
    write_matrix(dump / "draft_step_1_124_140", [[41760, 35740], [45315, 41760], [41760, 35740]])
    code, out, err = run(capsys, *command, dump, "--no-progress")
    told = [line.removeprefix("specreplay: ").removeprefix("mine: ") for line in err.splitlines()]
    assert code == 0 and REPEATED_ROW in told, err
    plain = article_by_hand(tmp_path / "plain" / "mine")  # the same label: the same column widths
    code, expected, _ = run(capsys, *command, plain, "--no-progress")
    if command[0] in ("stats", "compare"):  # the numbers are the plain round's
        assert out.replace(str(dump), str(plain)) == expected, (out, expected)
    write_matrix(dump / "draft_step_1_124_140", [[41760, 35740], [45315, 41760], [-1, -1]])  # padding: nothing
    write_matrix(dump / "draft_step_2_124_140", [[22870], [22870], [5]])  # another token: not read, not noted
    code, _, err = run(capsys, *command, dump, "--no-progress")
    assert code == 0 and "repeats row" not in err, err


# --- new-user try 7 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [(), ("--summary",), ("--json",)], ids=["tree", "summary", "json"])
def test_a_greedy_replay_of_a_sampled_run_says_its_tokens_are_not_the_runs(capsys, tmp_path, mode):
    # new-user try 7: a generate --temperature 0.7 dump replayed without --temperature printed
    # "committed tokens: [198, 262, 421]" where the run committed [198, 262, 264], and nothing said why
    d = tmp_path / "sampled"
    shutil.copytree(ROOT / "sample_dumps" / "article_round", d)
    (d / "manifest.json").write_text(json.dumps({"temperature": 0.7}), encoding="utf-8")
    code, out, err = run(capsys, "replay", d, *mode)
    assert code == 0 and out
    assert_told(err, "records a run sampled at T = 0.7", "greedy walk", f"replay {d} --temperature 0.7")
    code, _, at0 = run(capsys, "replay", d, "--temperature", "0", *mode[:1])  # T = 0 is the same greedy walk
    assert "records a run sampled at T = 0.7" in at0
    (d / "manifest.json").write_text(json.dumps({"temperature": 0}), encoding="utf-8")
    code, _, err = run(capsys, "replay", d, *mode)
    assert code == 0 and "sampled at" not in err


def test_modelled_speedups_without_a_timed_target_step_are_warned_about(capsys, tmp_path):
    # new-user try 7: generate without --baseline, then compare: 2.402 modelled for every config (the
    # target-only step taken flat at the 7-token forward's time), where a run with a baseline measured
    # 0.80; the reason was only a parenthesis in the cost line, and no WARNING
    d = tmp_path / "no_baseline"
    shutil.copytree(ROOT / "sample_dumps" / "qwen2.5-coder" / "article", d)
    body = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    for key in ("baseline", "speedup", "identical_to_baseline"):
        body["totals"].pop(key)
    (d / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    for command in ("compare", "report"):
        extra = ("-o", str(tmp_path / "rep")) if command == "report" else ()
        code, _, err = run(capsys, command, d, *extra, "--no-progress")
        assert code == 0, err
        assert_told(err, "WARNING: no_baseline: the target-only step was not timed", "t_verify(1)", "--baseline")
    assert "the target-only step was not timed" in (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    code, _, err = run(capsys, "compare", ROOT / "sample_dumps" / "qwen2.5-coder" / "article", "--no-progress")
    assert code == 0 and "WARNING" not in err  # timed with its baseline: nothing guessed


@pytest.mark.parametrize("command", ["replay", "batch", "stats"])
def test_a_misspelt_config_key_is_warned_about(capsys, tmp_path, command):
    # new-user try 7: {"topHaed": ...} replayed with exit 0 and only a stdout line about unused keys;
    # the key it stands for takes its default (gammaThreshhold: 0.3 would replay at 0.0)
    d = tmp_path / "typo"
    shutil.copytree(ARTICLE, d)
    cfg = json.loads((d / "config.json").read_text(encoding="utf-8"))
    cfg["topHaed"] = cfg.pop("topHead")
    cfg["gammathreshold"] = 0.3
    cfg["comment"] = "a key of our own"  # like no known key: kept and not warned about
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    code, _, err = run(capsys, command, d)
    assert code == 0
    assert_told(err, "WARNING:", "config.json: key(s) not read", "'topHaed': did you mean 'topHead'?")
    assert_told(err, "'gammathreshold': did you mean 'gammaThreshold'?")
    assert "comment" not in err
    code, _, err = run(capsys, command, ARTICLE)
    assert "did you mean" not in err


# --- cfg-hints: misspelt config keys and manifest fields (new-user try) -----------------------------

ARTICLE_TREE = {"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]]}


def config_in(where: str, body: dict, tmp_path: Path) -> list[str | os.PathLike]:
    """argv that hands ``body`` to a command the way a user does: inline (replay/compare/--grid), a
    config.json beside the dump, a manifest's config, or a --configs file."""
    d = tmp_path / "dump"
    shutil.copytree(ARTICLE, d)
    (d / "config.json").unlink()
    text = json.dumps(body)
    if where == "replay --config":
        return ["replay", d, "--config", text]
    if where == "config.json":
        (d / "config.json").write_text(text, encoding="utf-8")
        return ["replay", d]
    if where == "manifest.json":
        (d / "manifest.json").write_text(json.dumps({"config": body}), encoding="utf-8")
        return ["replay", d]
    if where == "compare --configs FILE":
        (tmp_path / "mine.json").write_text(text, encoding="utf-8")
        return ["compare", d, "--config", "6,2x2,1x1", "--configs", tmp_path / "mine.json", "--no-progress"]
    assert where == "compare --grid"
    return ["compare", d, "--config", "6,2x2,1x1", "--grid", f"6,2x2;{text}", "--no-progress"]


CONFIG_PATHS = ["replay --config", "config.json", "manifest.json", "compare --configs FILE", "compare --grid"]


@pytest.mark.parametrize("where", CONFIG_PATHS)
def test_near_miss_config_keys_are_warned_about_wherever_the_config_comes_from(capsys, tmp_path, where):
    # new-user try: "tretype": 1 and "top_head": [...] were taken silently (a static tree replayed, no
    # word said), where "topHaed" got a warning: case, '_'/'-' and a letter or two are one rule now
    body = {**ARTICLE_TREE, "tretype": 1, "top_head": [1, 2, 2], "TOP-K": 5, "comment": "ours"}
    code, _, err = run(capsys, *config_in(where, body, tmp_path))
    assert code == 0, err
    assert_told(err, "WARNING:", "key(s) not read", "took its default")
    assert_told(err, "'tretype': did you mean 'treeType'?", "'top_head': did you mean 'topHead'?")
    assert_told(err, "'TOP-K': did you mean 'topK'?")
    assert "comment" not in err
    if where in ("config.json", "manifest.json", "compare --configs FILE"):
        assert_told(
            err, {"manifest.json": "manifest.json#config"}.get(where, where.split()[-1].replace("FILE", "mine.json"))
        )


@pytest.mark.parametrize("where", CONFIG_PATHS)
@pytest.mark.parametrize(
    "body,told",
    [
        (
            {"gamma": 3, "topkSpec": [[6], [2, 2], [1, 1]]},
            "'topKSpec': is missing (found 'topkSpec': did you mean 'topKSpec'?)",
        ),
        (
            {"gama": 2, "topKSpec": [[6], [2, 2]], "tretype": 1},
            "has 2 rows but gamma = 3: gamma is the number of draft steps, one topKSpec row each "
            "(found 'gama': did you mean 'gamma'?)",
        ),
        (
            {"spec_tree": [ARTICLE_TREE], "gammaStrategy": 1},
            "'topKSpec': is missing (found 'spec_tree': did you mean 'specTree'?)",
        ),
        (
            {"specTree": [ARTICLE_TREE, {"Gamma": 2, "topKSpec": [[6], [2, 2]]}]},
            "'specTree[1].topKSpec': has 2 rows but gamma = 3: gamma is the number of draft steps, one topKSpec "
            "row each (found 'Gamma': did you mean 'gamma'?)",
        ),
    ],
    ids=["topkSpec", "gama", "spec_tree", "specTree-item"],
)
def test_a_misspelt_key_behind_a_config_error_is_named(capsys, tmp_path, where, body, told):
    # new-user try: "gama": 2 read as gamma 3 ("has 2 rows but gamma = 3") and "topkSpec" as "is
    # missing", with no word of the key the user did write
    code, out, err = run(capsys, *config_in(where, body, tmp_path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert_told(err, "error:", told)
    assert "found 'tretype'" not in err  # a misspelling the error is not about: left to the warning


def test_a_correctly_spelt_config_gets_no_hint(capsys, tmp_path):
    code, _, err = run(capsys, *config_in("replay --config", {"topKSpec": [[6], [2, 2]]}, tmp_path))
    assert code == 2 and "did you mean" not in err and "has 2 rows but gamma = 3" in err


@pytest.mark.parametrize(
    "text,got",
    [('"0.7"', "'0.7'"), ('"hot"', "'hot'"), ("NaN", "nan"), ("Infinity", "inf"), ("-0.5", "-0.5"), ("true", "True")],
)
def test_a_manifest_temperature_that_is_no_temperature_is_an_error(capsys, tmp_path, text, got):
    # new-user try: "temperature": "0.7" (a JSON string) was silently taken for no temperature: no
    # note that the greedy replay is a counterfactual of a sampled run
    d = tmp_path / "sampled"
    shutil.copytree(ARTICLE, d)
    (d / "manifest.json").write_text('{"temperature": ' + text + "}", encoding="utf-8")
    for command in ("replay", "stats", "batch"):
        code, out, err = run(capsys, command, d, "--no-progress")
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert_told(
            err,
            f"{d / 'manifest.json'} (temperature): expected a finite number >= 0 (the run's sampling temperature, "
            f"0 = greedy), got {got}",
        )
    (d / "manifest.json").write_text('{"temperature": null}', encoding="utf-8")  # as if absent
    code, _, err = run(capsys, "replay", d)
    assert code == 0 and "temperature" not in err


def test_sweep_warns_of_misspelt_keys_in_its_config_list_before_any_model_is_looked_for(capsys, tmp_path):
    # a JSON list of tree objects dropped each item's unknown keys: "tretype" went unseen there
    configs = tmp_path / "configs.json"
    configs.write_text(
        json.dumps([{**ARTICLE_TREE, "tretype": 1}, {"gamma": 2, "topKSpec": [[2], [1, 1]], "top_head": [1, 2]}]),
        encoding="utf-8",
    )
    (tmp_path / "prompts.jsonl").write_text("[1, 2]\n", encoding="utf-8")
    code, out, err = run(
        capsys,
        "sweep",
        "--configs",
        configs,
        "--draft",
        tmp_path / "no-draft",
        "--target",
        tmp_path / "no-target",
        "--prompts",
        tmp_path / "prompts.jsonl",
        "--max-new-tokens",
        "4",
        "-o",
        tmp_path / "sweep",
    )
    assert code == 2 and out == ""
    warning, error = err.strip().splitlines()
    assert_told(warning, f"WARNING: {configs}: key(s) not read", "'[0].tretype': did you mean 'treeType'?")
    assert_told(warning, "'[1].top_head': did you mean 'topHead'?")
    assert_told(error, "error:", "no-draft")


# --- an output directory named like a file: the advice is the command's own -------------------------


def test_report_output_named_like_a_page_says_what_the_directory_gets(capsys, tmp_path):
    code, out, err = run(capsys, "report", ARTICLE, "-o", tmp_path / "x.html")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "index.html" in err and "tables/" in err and str(tmp_path / "x") in err
    assert "redirect stdout" not in err  # report prints no page: redirecting gives none
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "x").exists()


def test_stats_export_named_like_a_file_also_suggests_redirecting(capsys, tmp_path):
    code, out, err = run(capsys, "stats", ARTICLE, "-o", tmp_path / "x.json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "NAME.csv" in err and "redirect stdout (> x.json)" in err  # stats does print its tables
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    "command, name",
    [
        ("plot", "x.bmp"),
        ("plot", "pl.tiff"),
        ("plot", "x.JPG"),
        ("stats", "x.xlsx"),
        ("stats", "x.parquet"),
        ("stats", "x.tsv"),
        ("pack", "x.zip"),
        ("pack", "x.h5"),
    ],
)
def test_any_new_directory_output_with_a_file_suffix_is_refused(capsys, tmp_path, command, name):
    code, out, err = run(capsys, command, ARTICLE, "-o", tmp_path / name)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert_told(err, str(tmp_path / name), "like a file: this option takes a directory")
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(
    "command, name",
    [
        ("stats", "out.d"),
        ("stats", "run.v2"),
        ("stats", "results.final"),
        ("stats", "qwen2.5.coder"),
        ("pack", "article.run"),
        ("pack", "article.packed"),
    ],
)
def test_directory_names_with_a_dot_are_still_taken(capsys, tmp_path, command, name):
    code, _, err = run(capsys, command, ARTICLE, "-o", tmp_path / name)
    assert code == 0, err
    assert (tmp_path / name).is_dir()


def test_a_trailing_slash_keeps_a_directory_name_that_ends_like_a_file(capsys, tmp_path):
    code, _, err = run(capsys, "stats", ARTICLE, "-o", f"{tmp_path / 'x.json'}/")
    assert code == 0, err
    assert (tmp_path / "x.json").is_dir()


def test_an_existing_directory_named_like_a_file_is_taken(capsys, tmp_path):
    (tmp_path / "x.bmp").mkdir()
    code, _, err = run(capsys, "plot", ARTICLE, "-o", tmp_path / "x.bmp")
    assert code == 0, err


# --- a full disk names the output path, whichever command's writer hit it ----------------------------


@pytest.mark.parametrize("command", ["stats", "plot", "pack"])
def test_a_full_disk_names_the_output(capsys, tmp_path, monkeypatch, command):
    """ENOSPC from a write carries no file name: the error names the command's output instead."""
    import replay.io.packed.write
    import replay.util.atomic

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(replay.util.atomic, "commit_staged", full)
    monkeypatch.setattr(replay.io.packed.write, "commit_staged", full)
    out_dir = tmp_path / "out"
    code, _, err = run(capsys, command, ARTICLE, "-o", out_dir)
    assert code == 2
    assert err.strip().splitlines()[-1] == f"specreplay: error: {out_dir}: cannot be written: No space left on device"


# --- new-user try 10: notes that only per-round output showed, and misspelt manifest keys ------------


def test_misspelt_manifest_keys_are_warned_once(capsys, tmp_path):
    d = tmp_path / "dump"
    shutil.copytree(SYNTH, d)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["lay_out"] = manifest.pop("layout")
    manifest["vocabsize"] = 151936
    manifest["engine_note"] = "an engine's own key: not a near miss, stays quiet"
    (d / "manifest.json").write_text(json.dumps(manifest))
    code, out, err = run(capsys, "replay", d, "--summary")
    assert code == 0 and out
    lines = [line for line in err.splitlines() if "did you mean" in line]
    assert len(lines) == 1 and str(d / "manifest.json") in lines[0]
    assert "'lay_out': did you mean 'layout'?" in lines[0] and "'vocabsize': did you mean 'vocab_size'?" in lines[0]
    assert "engine_note" not in err
    code, _, err = run(capsys, "replay", SYNTH, "--summary")  # the bundled manifest: nothing to say
    assert code == 0 and "did you mean" not in err


@pytest.mark.parametrize(
    "argv",
    [["replay", "--summary"], ["stats"], ["batch", "-o", "{tmp}/b.csv"]],
    ids=["replay --summary", "stats", "batch"],
)
def test_round_notes_reach_commands_that_print_no_round(argv, capsys, tmp_path):
    """Validate files with two trailing padding rows (only -1) in every round: the commands that print
    no round say so once, counting the rounds."""
    dump = tmp_path / "padded"
    shutil.copytree(SYNTH, dump)
    for p in dump.glob("validate_*.npz"):
        with np.load(p) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["ids"] = np.vstack([arrays["ids"], np.full((2, arrays["ids"].shape[1]), -1, arrays["ids"].dtype)])
        arrays["scores"] = np.vstack(
            [arrays["scores"], np.zeros((2, arrays["scores"].shape[1]), arrays["scores"].dtype)]
        )
        np.savez(p, **arrays)
    cmd, *rest = argv
    code, out, err = run(capsys, cmd, dump, *[a.format(tmp=tmp_path) for a in rest])
    notes = [line for line in err.splitlines() if "beyond the all layout" in line]
    assert code == 0 and out and len(notes) == 1, err
    assert "300 round(s): validate: 2 row(s) beyond the all layout ignored as padding (first: round " in notes[0]


def test_a_temperature_prints_as_typed_in_tables(capsys):
    code, out, err = run(capsys, "stats", SYNTH, "--temperature", "1e-9", "--table", "summary")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split()[1] == "temperature" and row.split()[1] == "1e-09"  # not 0.0000


@pytest.fixture
def one_round_without_scores(tmp_path) -> Path:
    d = tmp_path / "dump"
    shutil.copytree(SYNTH, d)
    path = d / "validate_100_116.npz"
    with np.load(path) as z:
        ids = z["ids"]
    np.savez(path, ids=ids)  # this round's target rows lose their scores: greedy still replays it
    return d


@pytest.mark.parametrize("cmd", [["replay", "--summary"], ["batch"]], ids=["replay --summary", "batch"])
def test_a_round_without_scores_is_skipped_by_sampling_only(cmd, one_round_without_scores, capsys):
    code, out, err = run(capsys, cmd[0], one_round_without_scores, *cmd[1:], "--temperature", "0.7")
    assert code == 1  # skipped input, listed
    assert "rounds replayed: 300   skipped: 0" in out  # the greedy replay skipped nothing
    assert "(299 rounds with scores, 0 exact; 1 replayed round without scores skipped (listed on stderr))" in out
    assert "skipped round 100_116: no sampling replay at T = 0.7: its validate rows have no scores" in err
    assert "validate_A_B.scores file beside it" in err  # new-user try 11: where the scores would be
    code, out, _ = run(capsys, cmd[0], one_round_without_scores, *cmd[1:])  # greedy: nothing skipped
    assert code == 0 and "rounds replayed: 300   skipped: 0" in out


def test_batch_csv_leaves_undetermined_numbers_empty(one_round_without_scores, capsys, tmp_path):
    """docs/output-schema.md: a bound or variance the dump does not determine is NaN, empty in CSV."""
    from replay.core.records import read_csv

    out_csv = tmp_path / "b.csv"
    code, _, _ = run(capsys, "batch", one_round_without_scores, "--temperature", "0.7", "-o", out_csv)
    assert code == 1
    text = out_csv.read_text()
    assert "nan" not in text.lower()
    df = read_csv(out_csv)
    assert len(df) == 299 and df["accepted_length_variance"].isna().all()  # T = 0.7 on top-K rows: bounded
    assert df["expected_accepted_length_lo"].notna().all()


# --- issue 36, item 1: a recorded probability 0 (log-prob -inf) is a known score -----------------


def _zero_score_dump(tmp_path: Path) -> Path:
    """One round of [4]|[2] as text with .scores companions: the root's last two candidates have
    probability 0, as fp16 engines write them; the target accepts A1 then its first child."""
    d = tmp_path / "zeros"
    d.mkdir()
    write_matrix(d / "draft_step_0_9_19", [[10, 11, 12, 13]])
    (d / "draft_step_0_9_19.scores").write_text("0.7 0.3 0 0\n")
    write_matrix(d / "draft_step_1_10_20", [[20, 21]])
    (d / "draft_step_1_10_20.scores").write_text("0.6 0.4\n")
    write_matrix(d / "validate_10_20", [[10, 11], [20, 21], [30, 31], [40, 41], [50, 51], [60, 61], [70, 71]])
    (d / "validate_10_20.scores").write_text("0.9 0.1\n0.8 0.2\n" + "0.5 0.5\n" * 5)
    (d / "config.json").write_text('{"gamma": 2, "topKSpec": [[4], [2]], "topHead": [1, 1], "treeType": 0}')
    return d


def test_compare_decides_the_recorded_config_on_zero_scores(capsys, tmp_path):
    d = _zero_score_dump(tmp_path)
    code, out, _ = run(capsys, "compare", d, "--json")
    assert code == 0
    row = json.loads(out)["configs"][0]
    assert row["config"] == "[4]|[2]" and row["undecidable"] == 0
    assert row["mean_accepted_length_lo"] == row["mean_accepted_length_hi"] == 2.0  # replay's L
    code, out, _ = run(capsys, "compare", d)
    assert "unrecorded scores" not in out


def test_compare_at_t0_on_zero_scores_equals_replay(capsys, tmp_path):
    d = _zero_score_dump(tmp_path)
    code, out, _ = run(capsys, "compare", d, "--json", "--temperature", "0")
    assert code == 0
    row = json.loads(out)["configs"][0]
    assert row["determined"] == 1 and row["expected_accepted_length_lo"] == row["expected_accepted_length_hi"] == 2.0


def _wide_zero_dump(tmp_path: Path) -> Path:
    """[[64],[64]] as .npz, zeros beyond column 8 in every draft row, four rounds."""
    d = tmp_path / "wide"
    d.mkdir()
    rng = np.random.default_rng(3)
    lp = np.full((1, 64), -np.inf, dtype=np.float32)
    lp[0, :8] = np.log(np.linspace(0.3, 0.05, 8) / 1.4)
    for k in range(4):
        a, b = 10 + 2 * k, 20 + 2 * k
        ids0, ids1 = np.arange(64).reshape(1, 64) + 100, np.arange(64).reshape(1, 64) + 300
        np.savez(d / f"draft_step_0_{a - 1}_{b - 1}.npz", ids=ids0, scores=lp)
        np.savez(d / f"draft_step_1_{a}_{b}.npz", ids=ids1, scores=lp)
        val = rng.integers(1000, 2000, size=(129, 2))
        val[0, 0], val[1, 0] = ids0[0, k], ids1[0, 3 * k]  # hits at rank k, then 3k (9: probability 0)
        np.savez(d / f"validate_{a}_{b}.npz", ids=val, scores=np.log(np.tile([0.6, 0.4], (129, 1))))
    (d / "config.json").write_text('{"gamma": 2, "topKSpec": [[64], [64]], "topHead": [1, 1], "treeType": 0}')
    return d


def test_compare_at_t_on_a_wide_zero_score_dump_equals_replay(capsys, tmp_path):
    d = _wide_zero_dump(tmp_path)
    code, out, _ = run(capsys, "replay", d, "--json", "--temperature", "0.5")
    assert code == 0
    per_round = [json.loads(line)["sampling"]["expected_accepted_length_lo"] for line in out.splitlines()]
    code, out, _ = run(capsys, "compare", d, "--json", "--temperature", "0.5")
    assert code == 0
    row = json.loads(out)["configs"][0]
    assert row["config"] == "[64]|[64]" and row["determined"] == 4 and row["undetermined"] == 0
    assert row["expected_accepted_length_lo"] == pytest.approx(
        float(np.mean(per_round)), abs=1e-9
    )  # the JSON reads its figures to 10 decimals
    code, out, _ = run(capsys, "compare", d, "--temperature", "0.5")
    recorded = next(line for line in out.splitlines() if line.split()[:1] == ["[64]|[64]"])
    assert "n/a" not in recorded


def test_compare_top_ranks_the_recorded_zero_score_tree_by_its_real_value(capsys, tmp_path):
    d = _wide_zero_dump(tmp_path)
    code, out, _ = run(capsys, "compare", d, "--json", "--top", "3", "--temperature", "0.5")
    assert code == 0
    rows = json.loads(out)["configs"]
    recorded = rows[0]
    assert recorded["config"] == "[64]|[64]"
    # a sub-tree of the recording never accepts more than the recording: nothing ranks above it by
    # a larger expected length
    assert all(r["expected_accepted_length_hi"] <= recorded["expected_accepted_length_lo"] + 1e-12 for r in rows[1:])


def _parents_not_by_path_probability(tmp_path: Path) -> Path:
    """One [3]|[2,2]|[1] round whose step-2 parent (node 6, B21) is not the path-probability choice
    (node 4): step-0 scores 0.6 0.3 0.1, step-1 parents 1 2. The target walks root → 2 → 6 → 8."""
    d = tmp_path / "parents_dump"
    d.mkdir()
    np.savez(d / "draft_step_0_99_199.npz", ids=[[11, 12, 13]], scores=np.log([[0.6, 0.3, 0.1]]), parents=[0])
    np.savez(
        d / "draft_step_1_100_200.npz",
        ids=[[21, 22], [23, 24]],
        scores=np.log([[0.9, 0.1], [0.5, 0.5]]),
        parents=[1, 2],
    )
    np.savez(d / "draft_step_2_100_200.npz", ids=[[31]], scores=np.log([[0.9]]), parents=[6])
    val = np.full((9, 2), 500)
    val[[0, 2, 6, 8], 0] = [12, 23, 31, 301]
    np.savez(d / "validate_100_200.npz", ids=val)
    write_config(d / "config.json", [[3], [2, 2], [1]], [1, 2, 1])
    return d


def test_compare_replays_the_recorded_config_with_the_dumps_parents(capsys, tmp_path):
    d = _parents_not_by_path_probability(tmp_path)
    code, out, err = run(capsys, "replay", d, "--json")
    assert code == 0 and json.loads(out)["accepted_length"] == 3 and "differ from path-probability" in err
    code, out, _ = run(capsys, "compare", d, "--json")
    row = json.loads(out)["configs"][0]
    assert row["config"] == "[3]|[2,2]|[1]" and row["decided"] == 1
    assert row["mean_accepted_length_lo"] == row["mean_accepted_length_hi"] == 3.0


def _parents_dump_with_two_configs(tmp_path: Path) -> Path:
    """A [3]|[2,2]|[1] round (manifest config) in the parents layout beside a narrower config.json: step
    2's parent 4 is B11 in the drafted tree and B21 in the narrow one, which nothing in the files refutes."""
    d = tmp_path / "two_configs"
    d.mkdir()
    np.savez(d / "draft_step_0_99_199.npz", ids=[[11, 12, 13]], parents=[0])
    np.savez(d / "draft_step_1_100_200.npz", ids=[[21, 22], [23, 24]], parents=[1, 2])
    np.savez(d / "draft_step_2_100_200.npz", ids=[[31]], parents=[4])
    val = np.full((4, 2), 500)
    val[[0, 1, 3], 0] = [11, 21, 31]
    np.savez(d / "validate_100_200.npz", ids=val)
    write_config(d / "config.json", [[2], [1, 1], [1]], [1, 2, 1])
    wide = {"gamma": 3, "topKSpec": [[3], [2, 2], [1]], "topHead": [1, 2, 1], "treeType": 0}
    (d / "manifest.json").write_text(json.dumps({"format": "specreplay-dump", "version": 1, "config": wide}))
    return d


@pytest.mark.parametrize("command", ["replay", "stats", "compare"])
def test_a_config_other_than_the_one_the_directory_states_is_named(capsys, tmp_path, command):
    d = _parents_dump_with_two_configs(tmp_path)
    code, _, err = run(capsys, command, d)
    assert code == 0
    assert_told(err, "config.json states the config [2]|[1,1]|[1], not [3]|[2,2]|[1]", "tree order")
    code, _, err = run(capsys, command, d, "--config", d / "config.json")
    assert_told(err, "manifest.json states the config [3]|[2,2]|[1], not [2]|[1,1]|[1] (from --config)")
    code, out, err = run(capsys, "replay", d, "--json")
    assert json.loads(out)["accepted_length"] == 3  # the manifest's config, the one drafted with


# --- issue 36, item 2: rows the config does not explain are not padding --------------------------


def _two_config_dump(tmp_path: Path, pad_rows: int = 0) -> Path:
    """Round 10_20 drafted as [3]|[2,2]|[1] (9 validate rows, all layout), round 12_22 as
    [2]|[1,1]|[1] (6 rows); config.json says the narrower one. ``pad_rows``: rows of -1 appended to
    the narrow round's validate file (padding, which stays padding)."""
    d = tmp_path / "mixed"
    d.mkdir()
    write_matrix(d / "draft_step_0_9_19", [[1, 2, 3]])
    write_matrix(d / "draft_step_1_10_20", [[4, 5], [6, 7]])
    write_matrix(d / "draft_step_2_10_20", [[8]])
    write_matrix(d / "validate_10_20", [[1], [4], [2], [3], [8], [5], [6], [7], [301]])
    write_matrix(d / "draft_step_0_11_21", [[1, 2]])
    write_matrix(d / "draft_step_1_12_22", [[4], [6]])
    write_matrix(d / "draft_step_2_12_22", [[8]])
    write_matrix(d / "validate_12_22", [[1], [4], [6], [8], [0], [9], *[[-1]] * pad_rows])
    (d / "config.json").write_text('{"gamma": 3, "topKSpec": [[2], [1, 1], [1]], "topHead": [1, 2, 1]}')
    return d


@pytest.mark.parametrize("command", ["replay", "batch", "stats", "compare"])
def test_validate_rows_beyond_the_config_skip_the_round(capsys, tmp_path, command):
    d = _two_config_dump(tmp_path)
    code, out, err = run(capsys, command, d)
    assert code == 1 and out, err
    told = [line for line in err.splitlines() if "skipped round 10_20" in line]
    assert len(told) == 1 and str(d / "validate_10_20") in told[0], err
    assert "9 row(s) that are not padding, 3 more than the all layout of config [2]|[1,1]|[1] uses (6)" in told[0]
    assert "the config may not be the one the dump was drafted with" in told[0]
    assert "ignored as padding" not in err and "12_22" not in err


def test_validate_rows_beyond_the_config_are_not_replayed_as_other_nodes(capsys, tmp_path):
    d = _two_config_dump(tmp_path)
    code, out, _ = run(capsys, "replay", d, "--json")
    assert code == 1
    rounds = [json.loads(line) for line in out.splitlines()]
    assert [r["round"] for r in rounds] == ["12_22"] and rounds[0]["accepted_length"] == 3


def test_rows_of_padding_beyond_the_config_stay_padding(capsys, tmp_path):
    d = _two_config_dump(tmp_path, pad_rows=2)
    (d / "validate_10_20").unlink()
    for f in ("draft_step_0_9_19", "draft_step_1_10_20", "draft_step_2_10_20"):
        (d / f).unlink()
    code, out, err = run(capsys, "replay", d, "--summary")
    assert code == 0 and "rounds replayed: 1" in out, err


def test_a_packed_run_skips_rows_beyond_the_config_too(capsys, tmp_path):
    d = _two_config_dump(tmp_path)
    packed = tmp_path / "run.packed"
    code, _, err = run(capsys, "pack", d, "-o", packed)
    assert code in (0, 1), err
    code, out, err = run(capsys, "batch", packed)
    assert code == 1 and out
    assert "9 row(s) that are not padding" in err and "12_22" not in err.replace("skipped round 10_20", "")


# --- issue 36, items 3 and 4: Ctrl-C leaves old or new output whole; one line, exit 130 -----------


@pytest.fixture(scope="module")
def long_dump(tmp_path_factory) -> Path:
    """3,000 rounds (synthetic_article's under ten shifted keys): `report` takes seconds on it."""
    import re

    d = tmp_path_factory.mktemp("long") / "dump"
    d.mkdir()
    for k in range(10):
        for p in SYNTH.glob("*.npz"):
            m = re.fullmatch(r"(draft_step_\d+|validate)_(\d+)_(\d+)\.npz", p.name)
            shutil.copyfile(p, d / f"{m[1]}_{int(m[2]) + 10000 * k}_{int(m[3]) + 10000 * k}.npz")
    shutil.copyfile(SYNTH / "manifest.json", d / "manifest.json")
    body = json.loads((d / "manifest.json").read_text())
    body.pop("rounds", None)
    (d / "manifest.json").write_text(json.dumps(body))
    return d


def _start(*argv) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "replay.cli", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it and its workers
    )


def _interrupt_twice(proc: subprocess.Popen) -> tuple[int, str]:
    import signal

    os.killpg(proc.pid, signal.SIGINT)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _wait_for(predicate, proc: subprocess.Popen, limit: float = 60.0) -> bool:
    import time

    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_an_interrupted_report_leaves_the_earlier_report_whole(capsys, tmp_path, long_dump):
    out = tmp_path / "report"
    code, _, err = run(capsys, "report", SYNTH, "-o", out, "--no-progress")
    assert code == 0, err
    before = _tree(out)
    assert "tables/summary.csv" in before
    proc = _start("report", long_dump, "-o", out, "--no-progress")
    staged_tables = lambda: any(tmp_path.glob(".report.specreplay-partial-*/tables/*"))  # noqa: E731
    assert _wait_for(staged_tables, proc), "the table phase never started"
    code, err = _interrupt_twice(proc)
    assert code == 130 and err.strip().splitlines()[-1] == "specreplay: interrupted" and "Traceback" not in err
    assert _tree(out) == before  # the earlier report, whole: no new index.html beside old tables
    code, _, err = run(capsys, "report", SYNTH, "-o", out, "--no-progress")  # the rerun is never blocked
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no leftovers beside it


@pytest.mark.slow
def test_an_interrupted_report_into_a_new_directory_leaves_nothing_that_blocks_a_rerun(capsys, tmp_path, long_dump):
    out = tmp_path / "new"
    proc = _start("report", long_dump, "-o", out, "--no-progress")
    assert _wait_for(lambda: any(tmp_path.glob(".new.specreplay-partial-*/index.html")), proc)
    code, err = _interrupt_twice(proc)
    assert code == 130 and "Traceback" not in err
    assert not (out / "index.html").exists()
    code, _, err = run(capsys, "report", SYNTH, "-o", out, "--no-progress")
    assert code == 0 and (out / "index.html").is_file() and (out / "tables" / "summary.csv").is_file(), err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["stats", "plot"])
def test_an_interrupted_multi_file_output_keeps_the_earlier_files(capsys, tmp_path, long_dump, command):
    out = tmp_path / "out"
    code, _, err = run(capsys, command, SYNTH, "-o", out, "--no-progress")
    assert code == 0, err
    (out / "mine.txt").write_text("a user's own file\n")
    before = _tree(out)
    proc = _start(command, long_dump, "-o", out, "--no-progress")
    assert _wait_for(lambda: any(p.is_file() for p in tmp_path.glob(".out.specreplay-partial-*/*")), proc)
    code, err = _interrupt_twice(proc)
    assert code == 130 and "Traceback" not in err
    assert _tree(out) == before
    code, _, err = run(capsys, command, long_dump, "-o", out, "--no-progress")
    assert code in (0, 1) and (out / "mine.txt").is_file() and _tree(out) != before, err


@pytest.mark.slow
def test_two_sigints_at_once_give_one_line_and_exit_130(tmp_path, long_dump):
    """timeout -s INT and a terminal signal the whole group, sometimes twice: never a traceback,
    wherever the signals land (imports, reading on worker processes, tables, the final renames)."""
    import time

    # counted from when numpy is loaded (the command's own code runs: before it the interpreter starts,
    # with its own handler, whatever the machine's load); from 0 on, every phase of the command
    delays = [0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.2, 1.8, 2.5]
    for i, delay in enumerate(delays):
        proc = _start("report", long_dump, "-o", tmp_path / f"r{i % 2}", "--no-progress")
        maps = Path(f"/proc/{proc.pid}/maps")
        assert _wait_for(lambda: "_multiarray_umath" in maps.read_text(), proc), "the command never started"
        time.sleep(delay)
        if proc.poll() is not None:
            continue
        code, err = _interrupt_twice(proc)
        assert code == 130, (delay, code, err)
        assert err.splitlines() == ["specreplay: interrupted"] or (
            err.splitlines()[-1] == "specreplay: interrupted" and "Traceback" not in err
        ), (delay, err)


def test_a_report_without_tables_names_no_table_file(capsys, tmp_path):
    code, _, err = run(capsys, "report", SYNTH, "-o", tmp_path / "r", "--no-tables", "--no-progress")
    assert code == 0, err
    page = (tmp_path / "r" / "index.html").read_text()
    assert "tables/" not in page and not (tmp_path / "r" / "tables").exists()


# --- issue 36, item 6: measured_status is "measured" or "not comparable: REASON", never empty ------


def test_measured_status_says_why_for_a_run_without_timings(capsys):
    code, out, _ = run(capsys, "compare", ARTICLE, "--json")
    assert code == 0
    statuses = [row["measured_status"] for row in json.loads(out)["configs"]]
    assert statuses and all(s == "measured" or s.startswith("not comparable: ") for s in statuses), statuses
    assert (
        statuses[0]
        == "not comparable: the dump records no timings (manifest totals of the run and of the target alone)"
    )
    from replay.cli import api

    runs = api.load([str(ARTICLE)])
    assert api.speed(runs)["measured_status"].iloc[0].startswith("not comparable: ")
    assert all(s.startswith("not comparable: ") for s in api.compare(runs[0], ["[2]|[1,1]"])["measured_status"])


# --- issue 36, item 5: a config wider than the vocabulary is a usage error naming --config ----------


def _generate_argv(tmp_path: Path, config: str, max_new_tokens: int, noise: float | None = None) -> list[str]:
    """``specreplay generate`` on a tiny qwen2 pair (vocabulary 64) saved under tmp_path, into tmp_path/run."""
    from tests.live_fixtures import cli_args, make_pair, save_tiny_pair

    pair = make_pair("qwen2", vocab_size=64) if noise is None else make_pair("qwen2", vocab_size=64, noise=noise)
    models = save_tiny_pair(pair, tmp_path / "models")
    return cli_args(
        "generate",
        models,
        config=config,
        prompts=models / "prompts.jsonl",
        max_new_tokens=max_new_tokens,
        out=tmp_path / "run",
    )


@pytest.mark.slow
def test_generate_with_a_width_beyond_the_vocabulary_names_config(capsys, tmp_path):
    code, out, err = run(capsys, *_generate_argv(tmp_path, "[[80],[2]]", 4))
    assert code == 2 and "internal error" not in err and "Traceback" not in err, err
    assert "--config [80]|[2]" in err and "80" in err and "vocabulary size 64" in err
    assert not (tmp_path / "run").exists()


# --- issue 36, item 9: the live headline says what a sequence's last round committed past its end --


@pytest.mark.slow
def test_generate_says_how_many_committed_tokens_were_cut(capsys, tmp_path):
    import re

    code, out, err = run(
        capsys, *_generate_argv(tmp_path, "[[4],[1],[1]]", 5, noise=0.0), "--repeats", "1", "--no-progress"
    )
    assert code == 0, err
    rounds = int(re.search(r"rounds:\s+(\d+)", out)[1])
    kept = int(re.search(r"new tokens:\s+(\d+)", out)[1])
    accepted = int(re.search(r"\((\d+) accepted / \d+ drafted tokens\)", out)[1])
    assert kept == 2 * 5  # two prompts, cut at 5 tokens each
    if accepted + rounds != kept:  # an identical draft accepts whole chains: the last round overshoots
        line = next(x for x in out.splitlines() if x.startswith("committed tokens:"))
        assert f"{accepted + rounds} in {rounds} rounds" in line and f"{kept} kept as output" in line
        assert f"{accepted + rounds - kept} cut at --max-new-tokens" in line
    else:
        assert "committed tokens:" not in out
    assert accepted + rounds > kept  # the case this test is for


# --- issue 36, item 7: T prints as given; node log-probs recorded at other temperatures are named ---


@pytest.fixture(scope="module")
def node_dump(tmp_path_factory) -> Path:
    from tests.dump_mutations import build_corpora
    from tests.test_fuzz_sampling import _with_node_logprobs

    base = tmp_path_factory.mktemp("node")
    corpora = {c.name: c.path for c in build_corpora(base / "corpora")}
    _with_node_logprobs(corpora["npz"], base / "node")
    body = json.loads((base / "node" / "manifest.json").read_text())
    body["node_logprob_temperatures"] = [0.8, 1.0]
    (base / "node" / "manifest.json").write_text(json.dumps(body))
    return base / "node"


@pytest.mark.parametrize("command", ["replay", "stats", "compare", "batch"])
def test_a_temperature_near_a_recorded_one_prints_as_given_and_names_the_recorded(capsys, node_dump, command):
    code, out, err = run(capsys, command, node_dump, "--temperature", "0.80000001")
    assert code == 0, err
    assert "T = 0.80000001" in out + err and "T = 0.8:" not in out + err and "T = 0.8 " not in out
    notes = [line for line in err.splitlines() if "records node_logprobs at T = 0.8, 1, not at T = 0.80000001" in line]
    assert len(notes) == 1 and "top-K bounds" in notes[0], err
    code, out, err = run(capsys, command, node_dump, "--temperature", "0.8")  # the recorded T: exact, no note
    assert code == 0 and "not at T" not in err


def test_a_boolean_temperature_is_spelled_as_json(capsys, tmp_path):
    from replay.cli import api

    with pytest.raises(Exception) as caught:
        api.sampling(str(SYNTH), True)
    assert "got true" in str(caught.value) and "True" not in str(caught.value)


# --- issue 36, item 12 and small ones: the sampled-run note at T = 0, quoted paths, JSON's true ----


def _sampled_article(tmp_path: Path) -> Path:
    d = tmp_path / "my runs" / "article"
    shutil.copytree(ARTICLE, d)
    body = json.loads((d / "manifest.json").read_text())
    body["temperature"] = 0.7
    (d / "manifest.json").write_text(json.dumps(body))
    return d


def test_replay_at_t0_of_a_sampled_run_gives_the_sampled_run_note(capsys, tmp_path):
    d = _sampled_article(tmp_path)
    _, _, plain = run(capsys, "replay", d)
    code, _, at0 = run(capsys, "replay", d, "--temperature", "0")
    note = [line for line in plain.splitlines() if "records a run sampled at T = 0.7" in line]
    assert len(note) == 1 and code == 0
    assert [line for line in at0.splitlines() if "records a run sampled at T = 0.7" in line] == note


def test_a_suggested_command_quotes_a_path_with_a_space(capsys, tmp_path):
    d = _sampled_article(tmp_path)
    _, _, err = run(capsys, "replay", d)
    assert f"`specreplay replay '{d}' --temperature 0.7`" in err


def test_a_boolean_in_a_json_file_is_quoted_as_json(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"gamma": true, "topKSpec": [[2]], "topHead": [1]}')
    code, _, err = run(capsys, "replay", ARTICLE, "--config", config)
    assert code == 2 and "got true" in err and "True" not in err
    d = tmp_path / "d"
    shutil.copytree(ARTICLE, d)
    (d / "manifest.json").write_text(
        json.dumps({**json.loads((ARTICLE / "manifest.json").read_text()), "temperature": True})
    )
    code, _, err = run(capsys, "replay", d)
    assert code == 2 and "manifest.json (temperature)" in err and "got true" in err and "True" not in err


# --- issue 36, item 10: a damaged .npy header is said in plain words ------------------------------


def test_a_damaged_npy_header_is_said_in_plain_words(capsys, tmp_path):
    d = tmp_path / "npy"
    d.mkdir()
    np.save(d / "draft_step_0_9_19.npy", np.array([[1, 2, 3]]))
    np.save(d / "draft_step_1_10_20.npy", np.array([[4, 5], [6, 7]]))
    np.save(d / "draft_step_2_10_20.npy", np.array([[8], [9]]))
    np.save(d / "validate_10_20.npy", np.array([[1], [4], [2]]))
    raw = (d / "validate_10_20.npy").read_bytes()
    at = raw.index(b"(3, 1)")
    (d / "validate_10_20.npy").write_bytes(raw[:at] + b"(3, 1 \n" + raw[at + 7 :])  # the shape's ')' lost
    (d / "config.json").write_text('{"gamma": 2, "topKSpec": [[3], [1, 1]], "topHead": [1, 2]}')
    code, _, err = run(capsys, "replay", d)
    assert code == 2 and str(d / "validate_10_20.npy") in err
    assert "damaged .npy header: expected a dictionary like" in err and "the file is truncated or was changed" in err
    assert "EOF in multi-line" not in err and "SyntaxError" not in err and "((" not in err


@pytest.mark.parametrize(
    ("damage", "told"),
    [
        (lambda h: h.replace(b"'shape': (", b"'shape': (("), "cut short or garbled"),  # unclosed parenthesis
        (lambda h: h.replace(b"'shape'", b"'shaep'"), "its keys are not exactly 'descr', 'fortran_order' and 'shape'"),
        (lambda h: h.replace(b"False", b"Flase"), "cut short or garbled"),
    ],
    ids=["unclosed", "misspelt key", "misspelt bool"],
)
def test_a_damaged_npy_header_says_what_is_wrong_in_words(capsys, tmp_path, damage, told):
    d = article_by_hand(tmp_path / "dump")
    ids = np.loadtxt(d / "validate_124_140", dtype=np.int64, ndmin=2)
    (d / "validate_124_140").unlink()
    np.save(d / "validate_124_140.npy", ids)
    path = d / "validate_124_140.npy"
    raw = path.read_bytes()
    path.write_bytes(damage(raw))  # same length: the header's padding is unchanged, only its text
    code, out, err = run(capsys, "replay", d)
    assert code == 2 and out == ""
    assert_told(err, str(path), "damaged .npy header: expected a dictionary like", told, "as numpy.save writes it")
    assert "Error" not in err and "(2, 0)" not in err  # no Python exception name, no tokenizer position


# --- issue 36, item 11: run labels in CJK: a font that has the glyphs, or one note ----------------


@pytest.mark.slow
@pytest.mark.parametrize("command", ["plot", "report"])
def test_cjk_run_labels_give_one_note_or_a_font_with_the_glyphs(capsys, tmp_path, command):
    from analysis.report.fonts import fallback_family

    d = tmp_path / "中文运行"
    shutil.copytree(ARTICLE, d)
    code, _, err = run(capsys, command, d, "-o", tmp_path / "out", "--no-progress")
    assert code == 0 and "Glyph" not in err and "missing from" not in err, err
    notes = [line for line in err.splitlines() if "no installed font has" in line]
    if fallback_family() is None:
        assert len(notes) == 1 and "中" in notes[0] and "fonts-noto-cjk" in notes[0]
    else:
        assert notes == []


def test_a_step0_file_under_its_own_rounds_key_is_named_for_what_it_is(capsys, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(ARTICLE, d)
    (d / "manifest.json").unlink()
    for src, dst in (
        ("draft_step_0_123_139", "draft_step_0_505_605"),
        ("draft_step_1_124_140", "draft_step_1_505_605"),
        ("draft_step_2_124_140", "draft_step_2_505_605"),
        ("validate_124_140", "validate_505_605"),
    ):
        shutil.copyfile(d / src, d / dst)
    code, _, err = run(capsys, "replay", d, "--summary")
    assert code == 1
    assert "506_606" not in err  # no round of that key exists
    # one mistake, listed once: the round's entry names the file, which has no entry of its own
    assert "skipped draft_step_0_505_605" not in err
    assert (
        "skipped round 505_605: missing draft_step_0_504_604 (draft_step_0_505_605 is here, named with the round's own key"
        in err
    )
    assert err.count("draft_step_0_505_605") == 1


def test_a_directory_named_like_a_matrix_is_no_duplicate_of_the_regular_file(capsys, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(ARTICLE, d)
    (d / "validate_124_140.npy").mkdir()
    code, out, err = run(capsys, "replay", d, "--summary")
    assert code == 1  # the directory is skipped
    assert "skipped validate_124_140.npy: is a directory, not a regular file" in err
    assert "same matrix" not in err  # a directory holds no matrix
    assert "rounds replayed: 1" in out  # the round is read from its regular validate file


# --- issue 36, new-user pass: a child of probability 0 in node_logprobs is a value ----------------


@pytest.mark.parametrize("command", ["replay", "stats", "compare"])
def test_a_zero_probability_child_in_node_logprobs_is_a_value(capsys, node_dump, tmp_path, command):
    """node_dump's children share half their parent's mass equally (the root's six: 1/12 each); one
    of them at -inf leaves the level-1 reach at 5/12, and no round is skipped."""
    d = tmp_path / "zero_child"
    shutil.copytree(node_dump, d)
    first = sorted(d.glob("validate_*.npz"))[0]
    with np.load(first) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["node_logprobs"] = arrays["node_logprobs"].copy()
    arrays["node_logprobs"][3, :] = -np.inf  # node 3: a child of the root
    np.savez(first, **arrays)
    code, out, err = run(capsys, command, d, "--temperature", "0.8", *(["--json"] if command != "compare" else []))
    assert code == 0 and "skipped" not in err and "zero probability" not in err, err
    if command == "replay":
        reach = [json.loads(line)["sampling"]["length_at_least_lo"][0] for line in out.splitlines()]
        assert reach[0] == pytest.approx(5 / 12, rel=1e-6) and reach[1] == pytest.approx(6 / 12, rel=1e-6)


# --- issue 36, new-user pass: a long skip listing folds reasons that differ only in names -----------


def test_a_long_skip_listing_folds_reasons_that_differ_only_in_file_names(capsys, tmp_path):
    d = tmp_path / "many_bad"
    shutil.copytree(ROOT / "sample_dumps" / "synthetic_article", d)
    bad = sorted(d.glob("validate_*.npz"))[:30]
    for p in bad:
        p.write_text("garbage\n")  # each round's reason names its own file
    code, _, err = run(capsys, "stats", d)
    skips = [line for line in err.splitlines() if "skipped" in line]
    assert code == 1 and len(skips) == 4, err
    assert_told(skips[3], "skipped 27 more for the same reason, up to the names and numbers in it", "not a zip file")


@pytest.mark.parametrize("command", ["stats", "plot"])
def test_files_an_earlier_run_left_in_the_output_are_named(capsys, tmp_path, command):
    out = tmp_path / "out"
    out.mkdir()
    (out / "accepted_length_old.csv").write_text("an earlier run's\n")
    code, _, err = run(capsys, command, ROOT / "sample_dumps" / "synthetic_article", "-o", out)
    assert code == 0, err
    assert_told(err, f"{out} also holds file(s) this run did not write, left as they were: accepted_length_old.csv")
    assert (out / "accepted_length_old.csv").read_text() == "an earlier run's\n"


@pytest.mark.parametrize(
    "file,body,told",
    [
        ("config.json", {"gamma": True, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2]}, "got true"),
        ("config.json", {"gamma": 3, "topKSpec": [[6], [2, False], [1, 1]], "topHead": [1, 2, 2]}, "got false"),
        ("manifest.json", {"temperature": False}, "got false"),
        ("manifest.json", {"encoding": {"format": "raw", "dtype": "int32", "columns": {"draft": True}}}, "got true"),
        ("manifest.json", {"rounds": [{"key": [True, None]}]}, "got [true, null]"),
    ],
    ids=["config int", "config list item", "manifest temperature", "manifest columns", "manifest round key"],
)
def test_a_json_bool_in_an_error_is_spelt_as_in_the_file(capsys, tmp_path, file, body, told):
    """A value read from JSON is shown as the file spells it: true, false, null, never Python's True."""
    d = article_by_hand(tmp_path / "dump")
    (d / file).write_text(json.dumps(body), encoding="utf-8")
    code, out, err = run(capsys, "replay", d, "--summary", "--no-progress")
    assert code == 2 and out == "", err
    assert told in err and "True" not in err and "False" not in err and "None" not in err, err


@pytest.mark.parametrize("cmd", [["replay"], ["replay", "--summary"], ["batch"]], ids=["replay", "summary", "batch"])
def test_scores_stated_for_a_dump_without_scores_gets_a_note(cmd, capsys, tmp_path):
    """`--scores logprob` on a dump without any scores: one note that it changes nothing; none when
    the dump has scores, or when nothing was stated."""
    d = article_by_hand(tmp_path / "plain")
    note = (
        "note: --scores logprob changes nothing here: none of the 1 replayed round(s) has scores (no .scores "
        'companion file, no scores array; docs/dump-format.md, "Scores and parents")'
    )
    code, out, err = run(capsys, cmd[0], d, *cmd[1:], "--scores", "logprob", "--no-progress")
    assert code == 0 and out, err
    assert err.count(note) == 1, err
    (d / "manifest.json").write_text(json.dumps({"score_kind": "prob"}), encoding="utf-8")
    code, out, err = run(capsys, cmd[0], d, *cmd[1:], "--no-progress")
    assert code == 0 and "note: manifest.json score_kind 'prob' changes nothing here" in err, err
    code, out, err = run(capsys, cmd[0], SYNTH, *cmd[1:], "--scores", "logprob", "--no-progress")
    assert code == 0 and "changes nothing" not in err, err


# --- issue 36, new-user pass: a dynamic recording's own config in compare is its replay ----------


def _dynamic_by_hand(d: Path) -> Path:
    """Three dynamic rounds of [4]|[2,2]|[1,1] (treeType 1): 10_20 expands two nodes at step 1 (L = 3),
    11_21 three, more than topHead (L = 3), 12_22 stops after step 0 (L = 1). By hand: mean accepted
    length 7/3, draft acceptance rate 7 / (10 + 11 + 4) = 0.28."""
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps({"gamma": 3, "topKSpec": [[4], [2, 2], [1, 1]], "topHead": [1, 2, 2], "treeType": 1})
    )

    def put(a, b, steps, parents, top1):
        for i, (rows, par) in enumerate(zip(steps, parents)):
            k = (a - 1, b - 1) if i == 0 else (a, b)
            np.savez(d / f"draft_step_{i}_{k[0]}_{k[1]}.npz", ids=np.array(rows), parents=np.array(par))
        np.savez(d / f"validate_{a}_{b}.npz", ids=np.array([[v] for v in top1]))

    put(
        10,
        20,
        [[[11, 12, 13, 14]], [[21, 22], [23, 24]], [[31], [32]]],
        [[0], [1, 2], [6, 7]],
        [11, 22, 0, 0, 0, 0, 31, 0, 0, 400, 0],
    )
    put(
        11,
        21,
        [[[11, 12, 13, 14]], [[21, 22], [23, 24], [25, 26]], [[31]]],
        [[0], [1, 2, 3], [9]],
        [13, 0, 0, 25, 0, 0, 0, 0, 0, 31, 0, 500],
    )
    put(12, 22, [[[11, 12, 13, 14]]], [[0]], [14, 0, 0, 0, 600])
    return d


def test_compare_gives_a_dynamic_recordings_own_config_its_replayed_numbers(capsys, tmp_path):
    d = _dynamic_by_hand(tmp_path / "dyn")
    code, out, err = run(capsys, "stats", d, "--json")
    assert code == 0, err
    assert json.loads(out)["summary"][0]["mean_accepted_length"] == pytest.approx(7 / 3)
    code, out, err = run(capsys, "compare", d, "--json")
    row = json.loads(out)["configs"][0]
    assert code == 0 and row["config"] == "[4]|[2,2]|[1,1]+dyn" and row["decided"] == 3, row
    assert row["mean_accepted_length_lo"] == row["mean_accepted_length_hi"] == pytest.approx(7 / 3)
    assert row["draft_acceptance_rate_lo"] == pytest.approx(0.28)


def test_packs_count_adds_the_rounds_it_packed_and_skipped(capsys, tmp_path):
    d = article_by_hand(tmp_path / "mine")
    write_matrix(d / "draft_step_1_130_150", [[1, 2], [3, 4]])  # a round without its validate file
    code, out, err = run(capsys, "pack", d, "-o", tmp_path / "packed")
    assert code == 1, err
    assert "specreplay: wrote 1 of 2 round(s) to " in err and "specreplay: skipped: 1 round(s)" in err and out == ""


def test_the_vocab_note_at_t_above_1_only_where_a_lower_bound_was_refused(capsys, tmp_path):
    d = small_scored_by_hand(tmp_path / "tail")  # every row sums to 0.9: the tail needs V at T > 1
    code, _, err = run(capsys, "replay", d, "--temperature", "2", "--json")
    assert code == 0 and "lower bounds need the vocabulary size" in err, err
    # every row names its whole distribution (a zero cell: nothing unnamed): exact without V
    whole = [[0.5, 0.5, 0.0], [0.75, 0.25, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]
    (d / "validate_10_20.scores").write_text(
        "".join(" ".join(repr(math.log(p)) if p else "-inf" for p in row) + "\n" for row in whole), encoding="utf-8"
    )
    for command in ("replay", "stats", "batch"):
        code, out, err = run(capsys, command, d, "--temperature", "2", *(["--json"] if command != "stats" else []))
        assert code == 0 and "vocabulary size" not in err, (command, err)


def test_a_dump_taken_by_a_list_option_is_told(capsys):
    code, _, err = run(capsys, "compare", "--configs", "[2]|[1,1]", ROOT / "sample_dumps" / "article_round")
    assert code == 2
    assert_told(err, "required: DUMP", "takes every word after it", "put DUMP before it, or end the list with --")


def _certain_chain_by_hand(directory: Path, validate_scores: list[list[float]] | None = None) -> Path:
    """A [1]|[1] dump whose validate rows name one token at log-prob 0 (certain), as a top-1 fp16
    engine writes it; the draft gave its tokens log-prob -0.5."""
    directory.mkdir()
    write_config(directory / "config.json", [[1], [1]], [1, 1])
    for k in range(3):
        a, b = 100 + 8 * k, 116 + 8 * k
        write_matrix(directory / f"draft_step_0_{a - 1}_{b - 1}", [[5]])
        (directory / f"draft_step_0_{a - 1}_{b - 1}.scores").write_text("-0.5\n", encoding="utf-8")
        write_matrix(directory / f"draft_step_1_{a}_{b}", [[6]])
        (directory / f"draft_step_1_{a}_{b}.scores").write_text("-0.5\n", encoding="utf-8")
        write_matrix(directory / f"validate_{a}_{b}", [[5], [6], [7]])
        rows = validate_scores or [[0.0], [0.0], [0.0]]
        (directory / f"validate_{a}_{b}.scores").write_text(
            "".join(" ".join(str(v) for v in row) + "\n" for row in rows), encoding="utf-8"
        )
    return directory


def test_a_scores_file_of_zeros_is_read_as_certain_log_probabilities(capsys, tmp_path):
    """No probability row is all 0 (its top candidate has a positive probability), so such a file
    holds log-probabilities: the target is certain of each drafted token and every round accepts
    both at any T. Read as probabilities 0, every round was refused."""
    d = _certain_chain_by_hand(tmp_path / "certain")
    for argv in (["stats", d, "--json"], ["compare", d, "--json", "--configs", "[1]|[1]"]):
        code, out, err = run(capsys, *argv, "--temperature", "0.7")
        assert code == 0 and "skipped" not in err, err
        report = json.loads(out)
        if argv[0] == "stats":
            row = report["summary"][0]
            assert row["rounds"] == 3 and row["mean_accepted_length_lo"] == pytest.approx(2.0), row
        else:
            row = report["configs"][0]
            assert row["determined"] == 3 and row["expected_accepted_length_lo"] == pytest.approx(2.0), row
    mixed = _certain_chain_by_hand(tmp_path / "mixed", [[0.0], [0.5], [0.0]])
    code, _, err = run(capsys, "stats", mixed)
    assert code == 2, err
    assert_told(err, "validate_100_116.scores", "row 0 (0-based) is all 0", "log-probabilities must be <= 0, found 0.5")


@pytest.mark.parametrize("at_t", [[], ["--temperature", "0.7"]])
def test_compare_says_which_gamma_threshold_it_simulated(capsys, tmp_path, at_t):
    """A simulated threshold changes the recorded config's row: the header and the JSON say so; a
    config's own ``@X`` is not simulated, and a note says how to simulate it."""
    configs = ["--configs", "[6]|[2,2]|[1,1]", "[4]|[1,1]@0.3"]
    code, out, err = run(capsys, "compare", SYNTH, *configs, *at_t, "--gamma-threshold", "0.5")
    assert code == 0, err
    assert "gammaThreshold 0.5 simulated for every config" in out.splitlines()[0], out
    assert_told(err, "[4]|[1,1]@0.3 states gammaThreshold 0.3", "simulates gammaThreshold 0.5", "--gamma-threshold 0.3")
    code, out, err = run(capsys, "compare", SYNTH, *configs, *at_t, "--json")
    assert code == 0 and json.loads(out)["gamma_threshold"] is None, err
    assert_told(err, "inherits the recorded early stops only", "pass --gamma-threshold 0.3 to simulate it")
    code, out, err = run(capsys, "compare", SYNTH, *configs, *at_t, "--json", "--gamma-threshold", "0.5")
    assert json.loads(out)["gamma_threshold"] == 0.5


def test_the_fallback_warns_only_where_it_chose_among_nodes(capsys, tmp_path):
    """No scores, no parents: a chain's levels hold one node each, so the rank-major fallback guesses
    nothing and no command warns; a level of two nodes is a guess, and every command says so."""
    guess = "a guess about the engine"
    for name, spec, heads, rows in (("chain", [[1], [1]], [1, 1], [[6]]), ("two", [[2], [1]], [1, 1], [[6]])):
        d = tmp_path / name
        d.mkdir()
        write_config(d / "config.json", spec, heads)
        write_matrix(d / "draft_step_0_9_19", [[5, 8][: spec[0][0]]])
        write_matrix(d / "draft_step_1_10_20", rows)
        write_matrix(d / "validate_10_20", [[5], [6], [9], [1]][: 2 + sum(spec[0])])
        for argv in (["replay"], ["replay", "--json"], ["stats"], ["batch"], ["compare"]):
            code, out, err = run(capsys, argv[0], d, *argv[1:])
            assert code == 0, (name, argv, err)
            warned = guess in err + out or "rank-major fallback (docs" in out
            assert warned == (name == "two"), (name, argv, err)


def test_a_config_listing_several_trees_names_the_one_replayed_in_every_command(capsys, tmp_path):
    d = article_by_hand(tmp_path / "two_trees")
    wide = json.loads((d / "config.json").read_text(encoding="utf-8"))
    narrow = {**wide, "topKSpec": [[2], [1, 1], [1, 1]]}
    (d / "config.json").write_text(json.dumps({"specTree": [wide, narrow], "gammaStrategy": 1}), encoding="utf-8")
    for argv in (["replay", "--summary"], ["stats"], ["compare"], ["batch"]):
        code, out, err = run(capsys, argv[0], d, *argv[1:])
        assert_told(
            err, "lists 2 trees: replaying specTree[0] [6]|[2,2]|[1,1]", "specTree[1] is [2]|[1,1]|[1,1] (--tree 1)"
        )
    code, out, err = run(capsys, "replay", d, "--summary")
    assert 'run settings: {"gammaStrategy": 1}' in out, out


def test_plots_are_the_same_bytes_on_every_run(capsys, tmp_path):
    for k in (1, 2):
        code, _, err = run(capsys, "plot", SYNTH, "-o", tmp_path / f"p{k}", "--format", "svg")
        assert code == 0, err
    first = sorted((tmp_path / "p1").iterdir())
    assert first and all(p.read_bytes() == (tmp_path / "p2" / p.name).read_bytes() for p in first)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "inf", "x"])
def test_a_gamma_threshold_outside_0_1_is_refused_as_a_config_would_be(capsys, value):
    code, out, err = run(capsys, "compare", SYNTH, "--gamma-threshold", value, "--json")
    assert code == 2 and not out, out
    assert_told(err, "--gamma-threshold", "expected a number in [0, 1]")


def test_a_gamma_threshold_of_0_is_off(capsys):
    """0 is the config grammar's 'off': the recorded early stops only, as without the option."""
    code, out, err = run(capsys, "compare", SYNTH, "--gamma-threshold", "0", "--json")
    assert code == 0 and json.loads(out)["gamma_threshold"] is None, err
    _, plain, _ = run(capsys, "compare", SYNTH, "--json")
    assert json.loads(out)["configs"] == json.loads(plain)["configs"]


def test_tree_choice_mistakes_name_the_valid_trees(capsys, tmp_path):
    d = article_by_hand(tmp_path / "two_trees")
    wide = json.loads((d / "config.json").read_text(encoding="utf-8"))
    narrow = {**wide, "topKSpec": [[2], [1, 1], [1, 1]]}
    (d / "config.json").write_text(json.dumps({"specTree": [wide, narrow]}), encoding="utf-8")
    code, _, err = run(capsys, "replay", d, "--tree", "2")
    assert code == 2 and "--tree 2 but the config has 2 tree(s): use 0 to 1" in err, err
    # --config names the file's second tree: the note says the file lists it, and how to pick it there
    code, _, err = run(capsys, "replay", d, "--config", "[2]|[1,1]|[1,1]", "--summary")
    assert_told(err, "states the config [6]|[2,2]|[1,1]", "it lists [2]|[1,1]|[1,1] as tree 1 (--tree 1 with it)")


def test_a_hidden_alias_is_named_as_typed_in_its_usage_error(capsys, tmp_path):
    """``batch --table FILE`` (the old spelling of -o) refused: the message names --table, the option
    the user typed, not -o/--output; -o keeps its own name."""
    dump = shutil.copytree(SYNTH, tmp_path / "dump")
    for typed, value, why in (
        ("--table", tmp_path / "r.xlsx", "use a .parquet or .csv file name"),
        ("--table", tmp_path / "nodir" / "r.csv", "does not exist"),
        ("--table", "", "empty value"),
        ("-o", tmp_path / "r.xlsx", "use a .parquet or .csv file name"),
    ):
        code, out, err = run(capsys, "batch", dump, typed, value, "--no-progress")
        named = "--table" if typed == "--table" else "-o/--output"
        assert code == 2 and not out and f"error: argument {named}: " in err and why in err, (typed, err)
