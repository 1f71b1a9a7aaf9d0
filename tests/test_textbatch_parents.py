"""The bulk text reader (replay.io.formats.textbatch) on dumps with ``.parents`` companions (dynamic
trees, docs/dump-format.md "Scores and parents") against the file-by-file reader (rounds.load_round).

Two oracles: read_chunk with the bulk text reader switched off (every round read by load_round) must
give the same RoundBatches, array by array and dtype by dtype, and the same unreadable rounds; and
``replay DIR --json`` must print what the scalar replay prints, on clean and damaged parents files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from replay.io.dumpwrite import step_file_name
from replay.io.fastread import ReadChunk, ReadOptions, plan_items, read_chunk, round_paths
from replay.io.formats.matrix_io import parents_fit
from replay.io.formats.textbatch import read_text_batches
from replay.io.grouping import group_directory
from replay.io.roundbatch import MatrixStack, RoundBatch
from replay.testing.batch_synth import varied_run
from replay.testing.in_memory import round_at
from tests.test_textbatch import CONFIGS, cli_output, reference_output, write_matrix, write_scores

# Damage to one parents file: the reference reader refuses or reads it, the bulk reader hands the
# round back or reads what the reference reads.
PARENTS_EDITS = (
    lambda lines: [lines[0] + " 0", *lines[1:]],  # two values on a line: not one index per row
    lambda lines: lines[:-1],  # one entry short
    lambda lines: [*lines, "0"],  # one entry too many
    lambda lines: ["1.5", *lines[1:]],  # a float
    lambda lines: ["# engine note", *lines],  # a comment: the reference reads it
    lambda lines: ["", *lines, ""],  # blank lines: skipped by both
    lambda lines: [],  # empty file
    lambda lines: ["99999999999999999999", *lines[1:]],  # beyond int64
    lambda lines: [f"{2**40}", *lines[1:]],  # beyond int32: the stack narrows to int64
    lambda lines: ["-7", *lines[1:]],  # negative: read; the replay decides
    lambda lines: [line + "," for line in lines],  # a trailing comma: an empty value
    lambda lines: [", ".join(lines)],  # all on one line
)


def write_parents_dir(d: Path, seed: int) -> None:
    """Rounds of varied sizes with a ``.parents`` companion on every draft step (one node index per
    line), scores on some matrices for odd seeds, early stops."""
    rng = np.random.default_rng(seed)
    cfg = CONFIGS[seed % len(CONFIGS)]
    (d / "config.json").write_text(json.dumps(cfg.to_json()))
    scored = bool(seed % 2)
    batches = varied_run(
        cfg, 30, seed=seed, early_stop_rate=0.3, with_scores=scored, with_parents=True, layout="parents"
    )
    for batch in batches:
        for i in range(len(batch)):
            rnd = round_at(batch, i)
            named = [(step_file_name("draft", rnd.key, s), m) for s, m in enumerate(rnd.steps)]
            for name, m in (*named, (step_file_name("validate", rnd.key), rnd.validate)):
                write_matrix(d / name, m.ids, rng)
                if m.logp is not None and rng.random() < 0.8:
                    write_scores(d / (name + ".scores"), np.nan_to_num(m.logp, nan=-30.0), rng)
                if m.parents is not None and (seed < 4 or rng.random() < 0.9):  # seeds 4+: some lost
                    (d / (name + ".parents")).write_text("".join(f"{int(p)}\n" for p in m.parents))


def chunk_of(d: Path, bulk: bool, monkeypatch: pytest.MonkeyPatch, opts: ReadOptions = ReadOptions()) -> ReadChunk:
    """read_chunk of the whole directory, with the bulk text reader or with every round handed to load_round."""
    with monkeypatch.context() as m:
        if not bulk:
            m.setattr("replay.io.fastread.read_text_batches", lambda directory, items, *a: ([], list(items)))
        return read_chunk(str(d), round_paths(plan_items(group_directory(d), {})), opts)


def assert_same_stack(a: MatrixStack, b: MatrixStack) -> None:
    for name in ("ids", "logp", "parents", "rows_of", "cols_of", "prows_of", "node_logp"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape, name
            np.testing.assert_array_equal(x, y, err_msg=name)


def assert_same_chunk(fast: ReadChunk, reference: ReadChunk) -> None:
    """Equal batches (in order, array by array, dtypes included) and equal unreadable rounds."""
    assert fast.unreadable == reference.unreadable
    assert (fast.files, fast.rounds) == (reference.files, reference.rounds)
    assert len(fast.batches) == len(reference.batches)
    for x, y in zip(fast.batches, reference.batches):
        assert isinstance(x, RoundBatch) and isinstance(y, RoundBatch)
        for name in ("keys", "root_tokens", "ordinals"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
        assert (x.layout, x.names) == (y.layout, y.names)
        assert x.num_steps == y.num_steps
        for sx, sy in zip((*x.steps, x.validate), (*y.steps, y.validate)):
            assert_same_stack(sx, sy)


def bulk_rounds(d: Path) -> int:
    """Rounds of ``d`` that the bulk text reader takes."""
    batches, _ = read_text_batches(str(d), round_paths(plan_items(group_directory(d), {})), (1, 1), None, False)
    return sum(len(b) for b in batches)


def parents_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.endswith(".parents"))


@pytest.mark.parametrize("seed", range(8))
def test_parents_dirs_read_in_bulk_as_load_round_reads_them(tmp_path, seed, monkeypatch):
    write_parents_dir(tmp_path, seed)
    assert bulk_rounds(tmp_path) == len(group_directory(tmp_path).rounds)  # every round taken
    assert any(st.parents is not None for b in chunk_of(tmp_path, True, monkeypatch).batches for st in b.steps)
    assert_same_chunk(chunk_of(tmp_path, True, monkeypatch), chunk_of(tmp_path, False, monkeypatch))
    assert cli_output(tmp_path) == reference_output(tmp_path)


@pytest.mark.parametrize("seed", range(12))
def test_damaged_parents_files_read_as_load_round_reads_them(tmp_path, seed, monkeypatch):
    """Random damage to a few parents files: the same batches, skips and output as the reference."""
    write_parents_dir(tmp_path, seed)
    rng = np.random.default_rng(seed)
    files = parents_files(tmp_path)
    for path in rng.choice(files, size=min(len(files), int(rng.integers(1, 6))), replace=False):
        kind = int(rng.integers(0, len(PARENTS_EDITS) + 2))
        if kind < len(PARENTS_EDITS):
            path.write_text("\n".join(PARENTS_EDITS[kind](path.read_text().splitlines())) + "\n")
        elif kind == len(PARENTS_EDITS):
            path.unlink()
            path.mkdir()  # not a regular file
        else:
            path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))  # CRLF: the reference reads it
    assert_same_chunk(chunk_of(tmp_path, True, monkeypatch), chunk_of(tmp_path, False, monkeypatch))
    assert cli_output(tmp_path) == reference_output(tmp_path)


@pytest.mark.parametrize("edit", range(len(PARENTS_EDITS)))
def test_each_parents_edit_alone(tmp_path, edit, monkeypatch):
    write_parents_dir(tmp_path, 2)
    path = parents_files(tmp_path)[3]
    path.write_text("\n".join(PARENTS_EDITS[edit](path.read_text().splitlines())) + "\n")
    assert_same_chunk(chunk_of(tmp_path, True, monkeypatch), chunk_of(tmp_path, False, monkeypatch))
    assert cli_output(tmp_path) == reference_output(tmp_path)


def test_a_validate_parents_companion_is_not_read(tmp_path, monkeypatch):
    """load_round never reads a validate's parents companion, so neither does the bulk reader: not
    even one that is a FIFO or a directory."""
    write_parents_dir(tmp_path, 0)
    validates = sorted(p for p in tmp_path.iterdir() if p.name.startswith("validate_") and "." not in p.name)
    (tmp_path / (validates[0].name + ".parents")).write_text("0\n")
    os.mkfifo(tmp_path / (validates[1].name + ".parents"))
    (tmp_path / (validates[2].name + ".parents")).mkdir()
    assert bulk_rounds(tmp_path) == len(group_directory(tmp_path).rounds)
    assert_same_chunk(chunk_of(tmp_path, True, monkeypatch), chunk_of(tmp_path, False, monkeypatch))
    assert cli_output(tmp_path) == reference_output(tmp_path)


def test_parents_companions_under_other_names(tmp_path, monkeypatch):
    """``.parents.txt`` companions and data files with an extension are read in bulk too; under
    --raw ...:force a ``.parents`` companion is raw binary, the reference reader's."""
    write_parents_dir(tmp_path, 1)
    for path in parents_files(tmp_path)[::2]:
        path.rename(path.with_name(path.name + ".txt"))
    assert bulk_rounds(tmp_path) == len(group_directory(tmp_path).rounds)
    assert_same_chunk(chunk_of(tmp_path, True, monkeypatch), chunk_of(tmp_path, False, monkeypatch))
    assert cli_output(tmp_path) == reference_output(tmp_path)
    argv = ("--raw", "int32:8:force")
    assert cli_output(tmp_path, argv) == reference_output(tmp_path, argv)


# The parents rule's edges (matrix_io.parents_fit, which both readers ask): a companion the
# file-by-file reader refuses sends its round back from the bulk reader, and one it reads is taken.
PARENTS_RULE_EDGES = {
    "one column": lambda lines: lines,
    "one entry short": PARENTS_EDITS[1],
    "one entry too many": PARENTS_EDITS[2],
    "two columns": lambda lines: [line + " 0" for line in lines],
    "a float": PARENTS_EDITS[3],
}


@pytest.mark.parametrize("edge", PARENTS_RULE_EDGES)
def test_parents_rule_edges_decided_alike(tmp_path, edge, monkeypatch):
    write_parents_dir(tmp_path, 2)
    path = parents_files(tmp_path)[3]
    path.write_text("\n".join(PARENTS_RULE_EDGES[edge](path.read_text().splitlines())) + "\n")
    reference = chunk_of(tmp_path, False, monkeypatch)
    assert len(reference.unreadable) == (edge != "one column")
    assert bulk_rounds(tmp_path) == len(group_directory(tmp_path).rounds) - len(reference.unreadable)
    assert_same_chunk(chunk_of(tmp_path, True, monkeypatch), reference)


def test_parents_fit_on_one_file_and_many():
    """The rule for one array (scalars) and for the bulk readers' [F] arrays gives the same answers."""
    entries, columns, rows = np.array([3, 2, 4, 3, 3]), np.array([1, 1, 1, 2, 0]), np.array([3, 3, 3, 3, 3])
    many = parents_fit(entries, columns, rows)
    assert many.tolist() == [True, False, False, False, False]
    assert [bool(parents_fit(int(e), int(c), int(r))) for e, c, r in zip(entries, columns, rows)] == many.tolist()
