"""Tiny random models for the live-harness tests, built in the test process (no hub, no files).

Import the fixtures you use into a test module: ``from tests.live_fixtures import live_qwen_pair``.
A test module that uses torch itself takes it from here too (``from tests.live_fixtures import
torch``): importing this module skips the importing test module, with the reason, when the live
extras are not installed, so the offline suite runs with the core dependencies alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs torch (the live extras): pip install 'specreplay[live]'")
pytest.importorskip("transformers", reason="needs transformers (the live extras): pip install 'specreplay[live]'")

from replay.live.models.random_weights import build_model  # noqa: E402
from replay.testing.tiny import noisy_copy, tiny_config  # noqa: E402

# Two intra-op threads on a small shared VM spin against each other: tiny forwards go from 0.5 ms
# to 100+ ms at random. One thread keeps the suite fast and its timings stable.
torch.set_num_threads(1)

DRAFT_NOISE = 0.05  # relative weight noise: the draft agrees with the target most of the time


def make_pair(architecture: str, vocab_size: int = 64, seed: int = 0, noise: float = DRAFT_NOISE):
    target = build_model(tiny_config(architecture, vocab_size), seed=seed, name=f"tiny-{architecture}-target")
    draft = noisy_copy(target, noise, seed=seed + 1, name=f"tiny-{architecture}-draft")
    return draft, target


@pytest.fixture(scope="session")
def live_qwen_pair():
    """(draft, target) tiny Qwen2 models, vocab 64."""
    return make_pair("qwen2")


@pytest.fixture(scope="session")
def live_llama_pair():
    """(draft, target) tiny Llama models, vocab 64."""
    return make_pair("llama")


def kill_sweep_after_rows(args: list[str], dumps: Path, rows: int, timeout_s: float) -> dict[str, tuple[bytes, int]]:
    """Run ``specreplay ARGS`` (a sweep) in a child process, SIGKILL it once ``rows`` configs are
    committed under ``dumps`` (DIR/row.json), and return each committed row's (bytes, mtime_ns),
    to check that a resume leaves them untouched."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", *args],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        if len(list(dumps.glob("*/row.json"))) >= rows:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be killed"
    return {p.parent.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in dumps.glob("*/row.json")}


def save_tiny_pair(pair, d: Path) -> Path:
    """``pair`` (draft, target) saved under ``d`` as Hugging Face directories draft/ and target/
    with one word tokenizer of 64 words (the vocab of live_qwen_pair), and two id prompts in
    prompts.jsonl (an object line and a list line); returns ``d``."""
    from replay.testing.tiny import build_word_tokenizer, save_hf_dir

    draft, target = pair
    tok = build_word_tokenizer(64)
    save_hf_dir(target, d / "target", tok)
    save_hf_dir(draft, d / "draft", tok)
    (d / "prompts.jsonl").write_text('{"prompt_ids": [1, 2, 3, 4]}\n[50, 7]\n')
    return d


def cli_args(command: str, models: Path | None = None, **options: object) -> list[str]:
    """argv of ``specreplay COMMAND``, as a user types it: ``--draft``/``--target`` of the pair
    saved under ``models`` (save_tiny_pair) when given, then each option ``name=value`` as
    ``--name value`` (``_`` written ``-``) and ``name=True`` as the bare flag ``--name``."""
    if models is not None:
        options = {"draft": models / "draft", "target": models / "target", **options}
    argv = [command]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv
