"""Short model names and --pair on the live commands: resolved before any model loads (no torch
needed), through $SPECREPLAY_MODELS or --models-dir, with a clear error when not fetched."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.cli import main
from replay.live.errors import FetchError, ModelLoadError, ModelNotFetchedError
from replay.live.models.cache import ENV_CACHE_DIR, model_path
from replay.live.models.catalogue import DEFAULT_PAIR
from replay.live.models.names import ModelPaths, require_both, resolve_model_args

PAIR = DEFAULT_PAIR


def fake_fetch(cache: Path) -> tuple[Path, Path]:
    """Sparse files of the right size stand in for fetched models: resolving checks size only."""
    cache.mkdir(parents=True, exist_ok=True)
    for spec in PAIR.specs:
        with open(model_path(spec, cache), "wb") as fh:
            fh.truncate(spec.size)
    return model_path(PAIR.draft, cache), model_path(PAIR.target, cache)


def test_pair_name_through_env(tmp_path, monkeypatch):
    draft, target = fake_fetch(tmp_path / "env")
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "env"))
    assert resolve_model_args(None, None, "qwen2.5-coder") == ModelPaths(draft, target)


def test_models_dir_wins_over_env(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "empty"))
    draft, target = fake_fetch(tmp_path / "dir")
    got = resolve_model_args("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", None, tmp_path / "dir")
    assert got == ModelPaths(draft, target)


def test_names_and_paths_mix(tmp_path):
    _, target = fake_fetch(tmp_path / "m")
    own = tmp_path / "own.gguf"
    own.write_bytes(b"x")
    assert resolve_model_args(str(own), "qwen2.5-coder-1.5b", None, tmp_path / "m") == ModelPaths(own, target)


def test_not_fetched_names_the_fetch_command(tmp_path):
    with pytest.raises(ModelNotFetchedError, match=r"specreplay models fetch --dir .*empty --only qwen2.5-coder-1.5b"):
        resolve_model_args(None, "qwen2.5-coder-1.5b", None, tmp_path / "empty")
    with pytest.raises(ModelNotFetchedError, match="pair 'qwen2.5-coder' is not fetched"):
        resolve_model_args(None, None, "qwen2.5-coder", tmp_path / "empty")
    with pytest.raises(FetchError, match="unknown model pair 'nope'"):
        resolve_model_args(None, None, "nope", tmp_path)


def test_pair_excludes_draft_and_target(tmp_path):
    fake_fetch(tmp_path)
    with pytest.raises(ModelLoadError, match="drop --draft/--target"):
        resolve_model_args("qwen2.5-coder-0.5b", None, "qwen2.5-coder", tmp_path)


def test_both_models_required():
    with pytest.raises(ModelLoadError, match="missing --draft and --target"):
        require_both(ModelPaths(None, None))
    with pytest.raises(ModelLoadError, match="missing --target"):
        require_both(ModelPaths(Path("d"), None))


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--config", "tree.json", "--out", "o"],
        ["sweep", "--grid", "1,1", "--out", "o"],
    ],
)
def test_cli_not_fetched_is_one_line_exit_2(command, tmp_path, capsys):
    (tmp_path / "p.txt").write_text("hello\n")  # the prompts file is checked first; it must exist
    argv = command + [
        "--pair",
        "qwen2.5-coder",
        "--models-dir",
        str(tmp_path),
        "--prompts",
        str(tmp_path / "p.txt"),
        "--max-new-tokens",
        "4",
    ]
    if command[0] == "generate":
        (tmp_path / "tree.json").write_text('{"gamma": 1, "topKSpec": [[1]], "topHead": [1]}')
        argv[argv.index("tree.json")] = str(tmp_path / "tree.json")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "run `specreplay models fetch" in err


def test_cli_cost_curve_short_name_not_fetched(tmp_path, capsys):
    assert (
        main(["cost-curve", "--target", "qwen2.5-coder-1.5b", "--models-dir", str(tmp_path), "--out", "cc.json"]) == 2
    )
    assert "qwen2.5-coder-1.5b' is not fetched" in capsys.readouterr().err


def test_cli_without_models_says_what_to_give(tmp_path, capsys):
    (tmp_path / "tree.json").write_text('{"gamma": 1, "topKSpec": [[1]], "topHead": [1]}')
    (tmp_path / "p.txt").write_text("hello\n")
    argv = [
        "generate",
        "--config",
        str(tmp_path / "tree.json"),
        "--prompts",
        str(tmp_path / "p.txt"),
        "--max-new-tokens",
        "4",
        "--out",
        "o",
    ]
    assert main(argv) == 2
    assert "give --draft and --target" in capsys.readouterr().err
