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
from types import SimpleNamespace

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
    from replay.live.tiny import build_word_tokenizer, save_gguf_qwen2, save_hf_dir
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
    return ["generate", "--draft", pair.draft, "--target", pair.target, "--config", "2", "--prompts", prompts,
            "--max-new-tokens", "1", "--draft-dtype", "float32", "-o", out, *extra]


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
def test_generate_at_temperature_samples_each_repeated_prompt_afresh(capsys, tmp_path, live_pair_on_disk, baseline_draws):
    """Finding 0: one prompt 150 times, `generate --temperature 0.6 --seed 1234 --baseline`. Every
    sequence drew the same first token (sequence 0's generator); the target gives its most likely
    token only p = 0.46. Both methods' first tokens must follow the target's distribution."""
    pair = live_pair_on_disk
    code, out, err = run(capsys, *live_args(pair, pair.dir / "repeated.jsonl", tmp_path / "run", "--temperature",
                                            str(SAMPLING_T), "--seed", "1234", "--baseline", "--repeats", "1"))
    assert code == 0, err
    assert "outputs identical:      n/a (sampling)" in out
    assert_follows_target(first_tokens(tmp_path / "run" / "manifest.json"), pair.exact)
    assert_follows_target([o[0] for o in baseline_draws[-SAMPLED_N:]], pair.exact)  # after the warm-up call


@pytest.mark.slow
def test_sweep_at_temperature_samples_each_repeated_prompt_afresh(capsys, tmp_path, live_pair_on_disk, baseline_draws):
    """The same through `specreplay sweep` (its own timed run per config, baseline always on)."""
    pair = live_pair_on_disk
    code, _, err = run(capsys, "sweep", "--draft", pair.draft, "--target", pair.target, "--grid", "2", "--prompts",
                         pair.dir / "repeated.jsonl", "--max-new-tokens", "1", "--draft-dtype", "float32", "--temperature",
                         str(SAMPLING_T), "--seed", "7", "--repeats", "1", "--no-cost-curve", "--no-progress", "-o", tmp_path / "sw")
    assert code == 0, err
    assert_follows_target(first_tokens(tmp_path / "sw" / "dumps" / "2" / "manifest.json"), pair.exact)
    assert_follows_target([o[0] for o in baseline_draws[-SAMPLED_N:]], pair.exact)


def test_the_same_seed_gives_the_same_samples_through_the_cli(capsys, tmp_path, live_pair_on_disk):
    """--seed reaches the draws: a rerun with the same seed repeats every sequence, another seed
    does not, and the three copies of one prompt are three samples."""
    pair = live_pair_on_disk
    (tmp_path / "three.jsonl").write_text((json.dumps(SAMPLED_PROMPT) + "\n") * 3)

    def outputs(seed: str, name: str) -> list[tuple[int, ...]]:
        argv = live_args(pair, tmp_path / "three.jsonl", tmp_path / name, "--temperature", "1", "--seed", seed,
                         "--repeats", "1", "--no-progress")
        argv[argv.index("--max-new-tokens") + 1] = "6"
        code, _, err = run(capsys, *argv)
        assert code == 0, err
        return [tuple(s["output_ids"]) for s in json.loads((tmp_path / name / "manifest.json").read_text())["sequences"]]

    first = outputs("5", "a")
    assert len(set(first)) == 3, first
    assert outputs("5", "b") == first
    assert outputs("6", "c") != first


def test_stop_at_eos_without_an_eos_token_is_refused(capsys, tmp_path, live_pair_on_disk):
    """The flag was ignored silently: every sequence ran to --max-new-tokens."""
    pair = live_pair_on_disk
    code, out, err = run(capsys, *live_args(pair, pair.dir / "one.jsonl", tmp_path / "run", "--stop-at-eos", "--no-progress"))
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
        outputs = [s["output_ids"] for s in json.loads((tmp_path / f"run{length}" / "manifest.json").read_text())["sequences"]]
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


@pytest.mark.parametrize("terminal,extra,drawn", [
    (False, [], False),  # a log file, a pipe, CI: no bars
    (True, ["--no-progress"], False),
    (True, [], True),  # a person at a terminal keeps them
])
def test_model_loading_bars_only_on_a_terminal(terminal, extra, drawn, tmp_path, live_pair_on_disk, monkeypatch):
    """Finding 12: transformers' "Loading weights" bars reached stderr when it was not a terminal,
    one redraw per update in every log of `generate`."""
    import io

    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    pair = live_pair_on_disk
    assert main([str(a) for a in live_args(pair, pair.dir / "one.jsonl", tmp_path / "run", "--repeats", "1", *extra)]) == 0
    assert ("Loading weights" in err.getvalue()) is drawn, err.getvalue()


@pytest.mark.parametrize("terminal,drawn", [(False, False), (True, True)])
def test_gguf_loading_bars_only_on_a_terminal(terminal, drawn, tmp_path, live_pair_on_disk, monkeypatch):
    """A GGUF model is dequantized under a bar of its own (tqdm, past transformers' switch)."""
    import io

    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    argv = ["cost-curve", "--target", str(live_pair_on_disk.dir / "target.gguf"), "--sizes", "1,2", "--prefix", "4",
            "--repeats", "1", "-o", str(tmp_path / "cc.json")]
    assert main(argv) == 0
    assert ("de-quantizing" in err.getvalue()) is drawn, err.getvalue()


def test_record_k_outside_the_vocabulary_names_the_option(capsys, tmp_path, live_pair_on_disk):
    """It said "config field 'record_k'" for a command-line option."""
    pair = live_pair_on_disk
    code, out, err = run(capsys, *live_args(pair, pair.dir / "one.jsonl", tmp_path / "run", "--record-k", "100", "--no-progress"))
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
    return ["generate", "--draft", d / "draft", "--target", d / "target", "--config", config, "--prompts",
            prompts or d / "prompts.jsonl", "--max-new-tokens", "8", "-o", d / "run", *extra]


def sweep_argv(d: Path, *extra: str, prompts: Path | None = None) -> list:
    return ["sweep", "--draft", d / "draft", "--target", d / "target", "--grid", "4,2x2", "--prompts",
            prompts or d / "prompts.jsonl", "--max-new-tokens", "8", "-o", d / "sw", *extra]


def test_a_typo_in_the_model_path_names_the_path(capsys, models_by_name):
    d = models_by_name
    code, out, err = run(capsys, "generate", "--draft", d / "drfat", "--target", d / "target", "--config", "4",
                         "--prompts", d / "prompts.jsonl", "--max-new-tokens", "8", "-o", d / "run")
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
    assert_told(err, str(bad), "topHead", "gamma = 3")
    (d / "configs.json").write_text(json.dumps([{"gamma": 1, "topKSpec": [[4]], "topHead": [1]}, json.loads(bad.read_text())]))
    code, out, err = run(capsys, "sweep", "--draft", d / "draft", "--target", d / "target", "--configs", d / "configs.json",
                         "--prompts", d / "prompts.jsonl", "--max-new-tokens", "8", "-o", d / "sw")
    assert code == 2 and out == ""
    assert_told(err, "topHead", "gamma = 3")
    assert not (d / "run").exists() and not (d / "sw").exists()


@pytest.mark.parametrize("argv,words", [
    (["generate", "--repeats", "0"], ["--repeats must be at least 1"]),
    (["sweep", "--repeats", "0"], ["--repeats must be at least 1"]),
    (["generate", "--threads", "0"], ["--threads must be at least 1"]),
    (["cost-curve", "--repeats", "0"], ["--repeats must be at least 1"]),
    (["cost-curve", "--prefix", "-3"], ["--prefix must be >= 0"]),  # was an internal RuntimeError
    (["cost-curve", "--threads", "0"], ["--threads must be at least 1"]),
])
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
