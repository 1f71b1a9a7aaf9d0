"""Batch replay agrees with the reference on every round of the bundled samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.engine.runs import replay_run
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.in_memory import round_at
from replay.testing.replayer import replay_directory, replay_round

SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"


@pytest.mark.parametrize("name", ["article_round", "synthetic_article"])
def test_samples_agree(name):
    reference = replay_directory(SAMPLES / name)
    rep = replay_run(SAMPLES / name, workers=2)
    assert list(rep.iter_json()) == [r.to_json() for r in reference.results]
    assert rep.skipped == reference.skipped == ()


def test_article_round_as_arrays():
    res = replay_run(SAMPLES / "article_round").result
    assert res.accepted_tokens[:, 0].tolist() == [41824, 41760, 22870]
    assert res.accepted_nodes[:, 0].tolist() == [1, 7, 11]
    assert res.bonus_token[0] == -1 and res.num_committed[0] == 3  # parents layout: no row for C111
    assert res.selection_summary(0) == "rank_major_fallback"


@pytest.mark.parametrize(
    "spec",
    [
        ([[6], [2, 2], [1, 1]], [1, 2, 2]),
        ([[8], [3, 2, 1], [2, 2, 1], [1, 1, 1], [1, 1]], [1, 3, 3, 3, 2]),
        ([[4], [1]], [1, 1]),
    ],
)
@pytest.mark.parametrize("layout", ["all", "parents"])
def test_vectorised_generator_runs_agree(spec, layout):
    cfg = TreeConfig.from_lists(*spec)
    batch = synth_batch(SynthSpec(cfg, 1500, seed=4, layout=layout, target_cols=2))
    res = replay_batch(batch, cfg, chunk_rounds=256)
    assert res.ok.all() and 0 < res.accepted_length.mean() < cfg.gamma
    for i in np.linspace(0, 1499, 300).astype(int):
        assert res.round_json(int(i)) == replay_round(round_at(batch, int(i)), cfg).to_json()


def _skipping_dump(tmp_path: Path) -> Path:
    """synthetic_article with one unreadable round and one inconsistent round (exit 1)."""
    import shutil

    d = tmp_path / "dump"
    shutil.copytree(SAMPLES / "synthetic_article", d)
    (d / "validate_1004_1020.npz").write_bytes(b"not an npz file")
    with np.load(d / "draft_step_1_100_116.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["ids"] = arrays["ids"][:1]
    np.savez(d / "draft_step_1_100_116.npz", **arrays)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("name", ["article_round", "synthetic_article", "qwen2.5-coder/deep", "skipping", "packed"])
def test_replay_summary_is_the_reference_summary(name, tmp_path, capsys):
    """`replay --summary` (batch arrays) prints the bytes render_summary prints over the
    round-by-round replay, on stdout and stderr, with the same exit status."""
    from replay.cli import main
    from replay.cli.options import print_reading
    from replay.testing.round_summaries import render_summary
    from tests.packed_runs import packed_synth_run

    if name == "skipping":
        path = _skipping_dump(tmp_path)
    elif name == "packed":
        cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
        path = packed_synth_run(tmp_path / "run", cfg, 900, seed=3, early_stop_rate=0.2, block_rounds=256)
    else:
        path = SAMPLES / name
    reference = replay_directory(path)
    print("\n".join(render_summary(reference)))
    print_reading(reference)
    want = capsys.readouterr()
    code = main(["replay", str(path), "--summary", "--no-progress"])
    got = capsys.readouterr()
    assert code == (1 if reference.skipped else 0)
    assert got.out == want.out
    assert got.err == want.err
