"""Fast directory reading: both cores, every file read exactly once, a progress bar on stderr."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

import replay.io.formats.matrix_io as matrix_io
import replay.io.roundbatch as roundbatch
from replay.core.config import TreeConfig
from replay.io.fastread import ReadOptions, iter_read_chunks, plan_items
from replay.io.grouping import group_directory
from replay.io.manifest import read_manifest
from replay.testing.in_memory import read_directory, replay_batches
from replay.testing.replayer import replay_directory
from replay.testing.synth import default_hit_probs, synth_round, write_text_matrix

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def write_text_run(d: Path, rounds: int, seed: int = 0) -> None:
    """Text dumps with .scores.txt companions, the engine's plain form."""
    rng = np.random.default_rng(seed)
    hit = default_hit_probs(4, 8)
    (d / "config.json").write_text('{"topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2]}')
    for k in range(rounds):
        a, b = 100 + 8 * k, 116 + 8 * k
        rnd = synth_round(rng, ARTICLE, (a, b), hit, cols=8)
        for i, st in enumerate(rnd.steps):
            name = f"draft_step_{i}_{a - 1}_{b - 1}" if i == 0 else f"draft_step_{i}_{a}_{b}"
            write_text_matrix(d / name, st.ids)
            (d / f"{name}.scores.txt").write_text("\n".join(" ".join(f"{v:.7g}" for v in r) for r in st.scores) + "\n")
        write_text_matrix(d / f"validate_{a}_{b}", rnd.validate.ids)


def test_every_file_read_once_and_results_match(tmp_path, monkeypatch):
    write_text_run(tmp_path, 60)
    reads: Counter = Counter()

    def counting(original):
        def read(path, *args, **kwargs):
            reads[str(path)] += 1
            return original(path, *args, **kwargs)

        return read

    # every reader: the reference (one file at a time) and the bulk readers (text, .npz/.npy: roundbatch.round_pieces)
    monkeypatch.setattr(matrix_io, "read_array_file", counting(matrix_io.read_array_file))
    monkeypatch.setattr(roundbatch, "read_regular_or_none", counting(roundbatch.read_regular_or_none))
    grouping = group_directory(tmp_path)
    batches, unreadable = read_directory(tmp_path, grouping, {}, ReadOptions(), workers=1)
    files = [p for p in tmp_path.iterdir() if p.name.startswith(("draft", "validate"))]
    assert not unreadable and len(files) == 60 * 7
    assert set(reads) == {str(p) for p in files} and set(reads.values()) == {1}
    monkeypatch.undo()
    reference = replay_directory(tmp_path)
    assert list(replay_batches(batches, reference.tree).iter_json()) == [r.to_json() for r in reference.results]
    parallel, _ = read_directory(tmp_path, grouping, {}, ReadOptions(), workers=2)
    assert list(replay_batches(parallel, reference.tree).iter_json()) == [r.to_json() for r in reference.results]


def test_progress_bar_counts_files_and_rounds(tmp_path, capsys):
    write_text_run(tmp_path, 12)
    items = plan_items(group_directory(tmp_path), read_manifest(tmp_path).root_tokens)
    chunks = list(iter_read_chunks(tmp_path, items, ReadOptions(), workers=2, chunk_rounds=4, progress=True))
    assert sum(c.rounds for c in chunks) == 12 and sum(c.files for c in chunks) == 12 * 7
    assert [int(o) for c in chunks for b in c.batches for o in b.ordinals] == list(range(12))  # in key order
    err = capsys.readouterr().err
    assert "84/84" in err and "12 rounds" in err and "file" in err


def test_stats_at_a_temperature_reads_each_file_once(tmp_path, monkeypatch, capsys):
    """stats --temperature computes the rounds at T while it reads the run (sampling_along), not in a second read."""
    import shutil

    import replay.util.parallel as parallel
    from replay.cli import main

    tmp_path = tmp_path / "dump"
    shutil.copytree(Path(__file__).resolve().parent.parent / "sample_dumps" / "synthetic_article", tmp_path)
    reads: Counter = Counter()

    def counting(original):
        def read(path, *args, **kwargs):
            reads[str(path)] += 1
            return original(path, *args, **kwargs)

        return read

    monkeypatch.setattr(parallel, "default_workers", lambda: 1)  # reads in this process, where they are counted
    monkeypatch.setattr(matrix_io, "read_array_file", counting(matrix_io.read_array_file))
    monkeypatch.setattr(roundbatch, "read_regular_or_none", counting(roundbatch.read_regular_or_none))
    assert main(["stats", str(tmp_path), "--temperature", "0.7", "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]
    files = [p for p in tmp_path.iterdir() if p.name.startswith(("draft", "validate"))]
    assert set(reads) == {str(p) for p in files} and set(reads.values()) == {1}
