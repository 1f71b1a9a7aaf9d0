"""A matrix whose .npz holds its own scores (or parents) and that has a companion file for them too is
refused in every reader, naming both: taking either silently would change the round's selection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from replay.cli import main

SAMPLE = Path("sample_dumps/synthetic_article")


def _npz_dump(tmp_path: Path, rounds: int = 3) -> tuple[Path, str]:
    """The first ``rounds`` rounds of the article sample (.npz files with their scores inside); the
    name of one round's step-1 matrix."""
    out = tmp_path / "dump"
    out.mkdir()
    config = json.loads((SAMPLE / "manifest.json").read_text())["config"]
    (out / "config.json").write_text(json.dumps(config))  # the manifest would list the rounds left out
    keys = sorted(p.name[len("validate_") : -len(".npz")] for p in SAMPLE.glob("validate_*.npz"))[:rounds]
    for key in keys:
        a, b = (int(x) for x in key.split("_"))
        for stem in (f"validate_{key}", f"draft_step_1_{key}", f"draft_step_2_{key}", f"draft_step_0_{a - 1}_{b - 1}"):
            shutil.copy(SAMPLE / f"{stem}.npz", out / f"{stem}.npz")
    return out, f"draft_step_1_{keys[0]}"


@pytest.mark.parametrize("command", [["replay", "--summary"], ["batch"], ["batch", "--workers", "1"], ["stats"]])
def test_scores_inside_and_a_companion_refuse_the_round(tmp_path, capsys, command):
    out, stem = _npz_dump(tmp_path)
    with np.load(out / f"{stem}.npz") as z:
        assert "scores" in z.files, "the sample's step 1 has scores: the case needs them inside the file"
        shape = z["ids"].shape
    np.save(out / f"{stem}.scores.npy", np.full(shape, -9.0))
    code = main([command[0], str(out), "--no-progress", *command[1:]])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{stem}.npz (scores): two sources of scores" in err
    assert f"the companion {stem}.scores.npy; keep one" in err
    assert "skipped: 1 round" in err or "skipped round" in err


def test_without_the_companion_the_round_replays(tmp_path, capsys):
    out, _ = _npz_dump(tmp_path)
    assert main(["batch", str(out), "--no-progress"]) == 0
    assert "two sources" not in capsys.readouterr().err
