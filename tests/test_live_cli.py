"""The CLI end to end on tiny models saved to disk: generate (text and id prompts, HF and GGUF),
sweep, cost-curve, user errors, help examples, and a torch-free ``--help``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replay.cli import main
from replay.testing.tiny import save_gguf_qwen2
from tests.live_fixtures import cli_args, kill_sweep_after_rows, live_qwen_pair, save_tiny_pair  # noqa: F401

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def tiny_dir(live_qwen_pair, tmp_path_factory):
    d = save_tiny_pair(live_qwen_pair, tmp_path_factory.mktemp("tiny"))
    save_gguf_qwen2(live_qwen_pair[1], d / "target.gguf")
    (d / "prompts.txt").write_text("t1 t2 t3 t4\nt50 t7\n")
    (d / "tree.json").write_text(json.dumps({"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2]}))
    return d


@pytest.mark.slow
def test_generate_with_baseline_text_prompts(tiny_dir, tmp_path, capsys):
    d = tiny_dir
    args = cli_args(
        "generate",
        d,
        config=d / "tree.json",
        prompts=d / "prompts.txt",
        max_new_tokens=20,
        out=tmp_path / "run",
        baseline=True,
    )
    rc = main(args)
    out = capsys.readouterr().out
    assert rc == 0
    for line in (
        "rounds:",
        "mean acceptance length (bonus included): ",
        "(counted: a live round always commits the target's token)",
        "draft acceptance rate: ",
        "per-position acceptance rate P(L >= d): d1: ",
        "mean accepted length (bonus excluded): ",
        "tokens/s:",
        "draft time per round:",
        "verify time per round:",
        "outputs identical:      yes",
        "median of 3 passes",
        "machine load:",
        "measured speedup (end to end, prefill included): ",
        "measured speedup (decode only, prefill excluded): ",
    ):
        assert line in out
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sequences"][0]["prompt_ids"] == [1, 2, 3, 4]
    assert manifest["tokenizer"] == str(d / "target")
    assert manifest["totals"]["identical_to_baseline"] is True
    assert manifest["models"]["draft"]["path"] == str(d / "draft")
    timing = manifest["totals"]["timing"]  # 2 warm-up calls, then 3 passes x 2 prompts x 2 methods
    assert timing["repeats"] == 3 and len(timing["order"]) == 2 + 3 * 2 * 2
    assert set(timing["methods"]) == {"speculative", "target-only"} and "load_1m" in timing["load_before"]


@pytest.mark.slow
def test_generate_gguf_target_with_id_prompts_and_cheaper_draft(tiny_dir, tmp_path, capsys):
    d = tiny_dir
    rc = main(
        cli_args(
            "generate",
            d,
            target=d / "target.gguf",
            config=d / "tree.json",
            prompts=d / "prompts.jsonl",
            max_new_tokens=12,
            out=tmp_path / "run",
            draft_dtype="bfloat16",
            baseline=True,
        )
    )
    assert rc == 0
    assert "outputs identical:      yes" in capsys.readouterr().out  # the target decides every token
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["models"]["draft"]["dtype"] == "bfloat16" and manifest["models"]["target"]["dtype"] == "float32"


@pytest.mark.slow
def test_sweep_and_cost_curve_commands(tiny_dir, tmp_path, capsys):
    d = tiny_dir
    args = cli_args("sweep", d, prompts=d / "prompts.jsonl", grid="4,1x1;1,1,1", max_new_tokens=10, out=tmp_path / "sw")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2 config(s) run, 0 kept" in out
    header = next(
        line for line in out.splitlines() if line.split()[:1] == ["config"]
    )  # vLLM's headline words lead the table
    assert header.split()[:6] == [
        "config",
        "nodes",
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "per_position_acceptance_rate",
        "mean_accepted_length",
    ]
    curve = json.loads((tmp_path / "sw" / "cost_curve.json").read_text())
    assert len(curve["tokens"]) == len(curve["verify_s"]) == len(curve["verify_s_min"]) and curve["draft_step_s"] > 0
    for png in ("nodes_vs_mean_acceptance_length.png", "nodes_vs_tokens_per_s.png", "pareto.png"):
        assert (tmp_path / "sw" / "plots" / png).stat().st_size > 0  # drawn by the CLI after the sweep
    assert main(args) == 2  # an existing sweep is continued only when asked
    assert "pass --resume" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    assert "0 config(s) run, 2 kept" in capsys.readouterr().out
    rc = main(cli_args("cost-curve", target=d / "target", sizes="1,4", prefix=8, repeats=1, out=tmp_path / "cc.json"))
    assert rc == 0
    curve = json.loads((tmp_path / "cc.json").read_text())
    assert curve["tokens"] == [1, 4] and len(curve["verify_s"]) == 2 and curve["draft_step_s"] is None


def test_user_errors_exit_2_with_one_line(tiny_dir, tmp_path, capsys):
    d = tiny_dir

    def generate(**options: object) -> int:
        return main(cli_args("generate", config=d / "tree.json", max_new_tokens=4, out=tmp_path / "x", **options))

    assert generate(draft=tmp_path, target=d / "target", prompts=d / "prompts.txt") == 2
    assert "not a Hugging Face model directory" in capsys.readouterr().err
    (tmp_path / "short.jsonl").write_text("[5]\n")
    assert generate(draft=d / "draft", target=d / "target", prompts=tmp_path / "short.jsonl") == 2
    assert "at least 2" in capsys.readouterr().err
    (tmp_path / "text.txt").write_text("hello world\n")
    assert generate(draft=d / "draft", target=d / "target.gguf", prompts=tmp_path / "text.txt") == 2
    assert "need a tokenizer" in capsys.readouterr().err
    sweep = cli_args("sweep", d, prompts=d / "prompts.jsonl", grid="1,2x2", max_new_tokens=4, out=tmp_path / "s")
    assert main(sweep) == 2
    assert "topHead[1]" in capsys.readouterr().err
    assert generate(draft=d / "draft", target=d / "target", prompts=d / "prompts.jsonl", seed=-1) == 2
    assert "--seed must be >= 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("command", ["generate", "sweep", "cost-curve"])
def test_every_command_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "example:" in capsys.readouterr().out


@pytest.mark.slow
def test_help_and_offline_side_never_import_torch():
    code = (
        "import sys, replay.cli, replay.cli.cmd_live, replay.core.tree, replay.core.acceptance, replay.io.dumpwrite, analysis.report.sweep_plots\n"
        "replay.cli.build_parser().format_help()\n"
        "bad = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    )


def test_record_k_widens_the_recorded_rows(tiny_dir, tmp_path):
    import numpy as np

    d = tiny_dir
    base = cli_args("generate", d, config=d / "tree.json", prompts=d / "prompts.jsonl", max_new_tokens=4)
    assert main(base + ["--out", str(tmp_path / "r"), "--record-k", "16"]) == 0
    validate = sorted((tmp_path / "r").glob("validate_*.npz"))[0]
    with np.load(validate) as z:
        assert z["ids"].shape[1] == 16 and z["scores"].dtype == np.float32
    assert main(base + ["--out", str(tmp_path / "r2"), "--record-k", "3"]) == 2


@pytest.mark.slow
def test_sweep_killed_by_sigkill_resumes_without_redoing_rows(tiny_dir, tmp_path, capsys):
    """A real kill (SIGKILL of the CLI process once two configs are committed), then --resume."""
    d = tiny_dir
    grid = "6,2x2,1x1;1,1,1,1;4,2x1,1;2,1x1;3,1;8"
    args = cli_args(
        "sweep",
        d,
        prompts=d / "prompts.jsonl",
        grid=grid,
        max_new_tokens=12,
        out=tmp_path / "sw",
        no_cost_curve=True,
        threads=1,
        repeats=1,
    )
    dumps = tmp_path / "sw" / "dumps"
    done = kill_sweep_after_rows(args, dumps, rows=2, timeout_s=120)
    assert 2 <= len(done) < 6
    assert main(args + ["--resume"]) == 0
    assert f"{6 - len(done)} config(s) run, {len(done)} kept from before" in capsys.readouterr().out
    for name, before in done.items():
        row = dumps / name / "row.json"
        assert (row.read_bytes(), row.stat().st_mtime_ns) == before
    assert not list(dumps.glob(".staging-*"))  # the killed config's staging area was cleared
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "sw" / "results.parquet")) == 6


@pytest.mark.slow
def test_generate_refuses_a_non_empty_out_before_loading_models(tiny_dir, tmp_path, capsys, monkeypatch):
    """A second run into the same --out would mix the runs (manifest: one run's rounds, replay:
    both runs' files), so it is refused before any model loads."""
    d = tiny_dir
    out = tmp_path / "run"
    args = cli_args("generate", d, config=d / "tree.json", prompts=d / "prompts.jsonl", max_new_tokens=12, out=out)
    assert main(args) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    def no_loading(*a, **k):
        raise AssertionError("models loaded before --out was checked")

    monkeypatch.setattr("replay.live.models.load.load_pair", no_loading)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and str(out) in err and "--replace" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_generate_replace_leaves_exactly_the_new_run(tiny_dir, tmp_path):
    from replay.testing.replayer import replay_directory

    d = tiny_dir
    out = tmp_path / "run"
    base = cli_args("generate", d, config=d / "tree.json", out=out)
    assert main(base + ["--prompts", str(d / "prompts.jsonl"), "--max-new-tokens", "20"]) == 0
    (tmp_path / "one.jsonl").write_text("[9, 8, 7]\n")
    assert main(base + ["--prompts", str(tmp_path / "one.jsonl"), "--max-new-tokens", "6", "--replace"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["prompt_ids"] for s in manifest["sequences"]] == [[9, 8, 7]]
    assert len(list(out.glob("validate_*.npz"))) == len(manifest["rounds"]) == len(replay_directory(out).results)
    assert [p.name for p in tmp_path.iterdir() if p.name != "one.jsonl"] == ["run"]  # no temp or old folder left


def test_generate_says_what_it_loads_and_warns_of_a_misspelt_config_key_before(tiny_dir, tmp_path, capsys):
    # `generate` says what it loads (the real pair takes ~100 s), and a misspelt key ("tretype": 1)
    # is warned about before the run, not silently run as a static tree
    d = tiny_dir
    config = json.dumps({"gamma": 2, "topKSpec": [[2], [1, 1]], "tretype": 1})
    args = cli_args("generate", d, config=config, prompts=d / "prompts.jsonl", max_new_tokens=4, out=tmp_path / "r")
    assert main(args + ["--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    loading = f"specreplay: loading target {d / 'target'} and draft {d / 'draft'} (cpu)"
    warning = next(i for i, line in enumerate(err) if "WARNING: --config: key(s) not read" in line)
    assert "'tretype': did you mean 'treeType'?" in err[warning]
    assert loading in err and warning < err.index(loading)
