"""Live commands on an install without the live extras: one line naming what to install, exit 2,
no traceback and nothing written. The missing package is simulated in a fresh interpreter
(``sys.modules[name] = None`` makes both import and find_spec fail), so this runs everywhere."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

TREE = '{"gamma": 1, "topKSpec": [[1]], "topHead": [1]}'
MODELS = ["--draft", "model.gguf", "--target", "model.gguf"]
COMMANDS = {
    "generate": [
        "generate",
        "--config",
        "tree.json",
        "--prompts",
        "p.txt",
        "--max-new-tokens",
        "3",
        "-o",
        "out",
        *MODELS,
    ],
    "sweep": ["sweep", "--grid", "1", "--prompts", "p.txt", "--max-new-tokens", "3", "-o", "out", *MODELS],
    "cost-curve": ["cost-curve", "--shape", "qwen2.5-0.5b", "-o", "cc.json"],  # a file output's directory must exist
}


def run_without(package: str, argv: list[str], cwd) -> subprocess.CompletedProcess:
    code = f"import sys\nsys.modules[{package!r}] = None\nfrom replay.cli import main\nsys.exit(main({argv!r}))\n"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("package", ["torch", "transformers"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_missing_live_package_is_one_line_exit_2(command, package, tmp_path):
    (tmp_path / "tree.json").write_text(TREE)
    (tmp_path / "model.gguf").write_bytes(b"never read")
    (tmp_path / "p.txt").write_text("a prompt\n")  # inputs are checked first: they must exist
    # torch is checked before transformers; on a core-only install torch is the one really missing.
    named = "torch" if package == "torch" or importlib.util.find_spec("torch") is None else package
    proc = run_without(package, COMMANDS[command], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"specreplay: error: the live harness needs {named}: pip install 'specreplay[live]'\n"
    assert not (tmp_path / "out").exists() and not (tmp_path / "cc.json").exists()


def test_model_names_are_checked_before_the_live_packages(tmp_path):
    # Resolving names is stdlib: a model that is not fetched is reported even without torch.
    argv = ["cost-curve", "--target", "qwen2.5-coder-1.5b", "--models-dir", str(tmp_path), "--out", "cc.json"]
    proc = run_without("torch", argv, tmp_path)
    assert proc.returncode == 2
    assert "qwen2.5-coder-1.5b' is not fetched yet" in proc.stderr and proc.stderr.count("\n") == 1
