"""The bulk text reader (replay.io.formats.textbatch) against the reference reader and the scalar replay.

Two oracles: the line-by-line text parser (``matrix_io._parse_text_lines``) for single files (a file the bulk parser takes must give
the reference's matrix, and one the reference refuses must never be taken), and the scalar
``replay_directory`` for whole directories (``replay DIR --json`` prints its records, its skip list
and its exit status, byte for byte, on clean, hostile and random text directories).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import replay.io.formats.textbatch as textbatch
import replay.io.formats.textparse as textparse
from replay.cli import main
from replay.cli.options import skipped_lines  # the listing format is the CLI's; this file checks what is listed
from replay.core.config import TreeConfig
from replay.engine.options import ReplayOptions
from replay.engine.runs import replay_run
from replay.io.fastread import ReadOptions, plan_items, read_chunk, round_paths
from replay.io.formats.matrix_io import _parse_text_lines, parse_text_matrix
from replay.io.grouping import group_directory
from replay.io.roundbatch import group_key
from replay.testing.batch_synth import SynthSpec, synth_batch, varied_run, write_text_rounds
from replay.testing.in_memory import round_at
from replay.testing.replayer import record_of, replay_directory
from replay.util.errors import DumpError

ROOT = Path(__file__).resolve().parent.parent
ARTICLE_DIR = ROOT / "sample_dumps" / "article_round"
CONFIGS = (
    TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2]),
    TreeConfig.from_lists([[3], [2, 1, 1], [1]], [1, 3, 1]),
    TreeConfig.from_lists([[1], [1], [1], [1]], [1, 1, 1, 1]),
    TreeConfig.from_lists([[4]], [1]),
)
HOSTILE_CELLS = (
    "+5",
    "1.5",
    "1e3",
    "0x10",
    "1-2",
    "--3",
    "-",
    "99999999999999999999",
    "1000000000000000000",
    "１",
    "٣",
    "1_000",
    "nan",
)


def reference_matrix(data: bytes) -> np.ndarray | None:
    """What the reference text reader makes of a file's bytes (None: it refuses them)."""
    try:
        return _parse_text_lines(data.decode("utf-8-sig").replace("\r\n", "\n"), "f", False)
    except (DumpError, UnicodeDecodeError):
        return None


def random_text(rng: np.random.Generator) -> bytes:
    """A small id matrix as text, formatted in one of the ways engines and editors write it."""
    rows, cols = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    pool = np.array(
        [0, 7, 41824, -1, 2**31 - 1, 2**31, -(2**31) - 1, 10**16, -(10**16)], dtype=np.int64
    )  # <= MAX_DIGITS chars
    vals = rng.choice(pool, size=(rows, cols)) if rng.random() < 0.5 else rng.integers(-5, 50000, size=(rows, cols))
    sep = str(rng.choice([" ", "  ", "\t", ",", ", ", " ,", "\t,"]))
    lines = []
    for row in vals:
        cells = [
            ("00" if rng.random() < 0.1 and v < 10**15 else "") + str(int(v)) if v >= 0 else str(int(v)) for v in row
        ]
        end = str(rng.choice(["", " \t", ","])) if rng.random() < 0.3 else ""  # a trailing comma is no value
        lines.append(("  " if rng.random() < 0.2 else "") + sep.join(cells) + end)
        if rng.random() < 0.1:
            lines.append(str(rng.choice(["", "   ", "\t"])))
    text = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
    return text.encode()


def damage(rng: np.random.Generator, data: bytes) -> bytes:
    """One hostile edit: a foreign cell, a stray byte, CR line ends, a BOM, a comment, a short row,
    an empty value (a comma after a comma or at a line's start)."""
    kind = int(rng.integers(0, 9))
    at = int(rng.integers(0, len(data) + 1))
    if kind == 0:
        return data[:at] + b" " + str(rng.choice(HOSTILE_CELLS)).encode() + b" " + data[at:]
    if kind == 1:
        return data[:at] + bytes([int(rng.integers(0, 256))]) + data[at:]
    if kind == 2:
        return data.replace(b"\n", b"\r\n")
    if kind == 3:
        return b"\xef\xbb\xbf" + data
    if kind == 4:
        return b"# a comment\n" + data
    if kind == 5:
        return data + b"\n1\n"  # a row of one value: ragged unless the matrix has one column
    if kind == 6:
        return b""
    if kind == 7:
        return data[:at] + str(rng.choice([",,", ", ,", "\n,", ",\t,"])).encode() + data[at:]
    return data.replace(b"\n", b"\r")


@pytest.mark.slow
def test_fast_parse_equals_reference_or_declines():
    rng = np.random.default_rng(11)
    clean = [random_text(rng) for _ in range(1500)]
    hostile = [damage(rng, random_text(rng)) for _ in range(1500)]
    together = textparse.parse_id_texts(clean + hostile)  # one call: files must not disturb each other
    taken_hostile = 0
    for k, data in enumerate(clean + hostile):
        alone = textparse.parse_id_texts([data])
        assert bool(alone.ok[0]) == bool(together.ok[k]), data
        if not alone.ok[0]:
            continue
        ref = reference_matrix(data)
        assert ref is not None, data  # taken by the fast path, refused by the reference: never
        n = int(alone.rows[0] * alone.cols[0])
        got = alone.values[alone.start[0] : alone.start[0] + n].reshape(int(alone.rows[0]), int(alone.cols[0]))
        start = int(together.start[k])
        assert np.array_equal(got, ref) and got.dtype == ref.dtype, data
        assert np.array_equal(together.values[start : start + n].reshape(got.shape), ref), data
        taken_hostile += k >= len(clean)
    assert together.ok[: len(clean)].all()  # the common form is taken, not handed back
    assert 0 < taken_hostile < len(hostile)  # some edits stay in the subset (a leading blank), most do not


@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_one_file_in_pieces_reads_what_the_line_parser_reads(monkeypatch, piece):
    """parse_text_matrix parses a file in pieces cut at line ends (textparse.parse_one_text): any cut,
    a line longer than a piece, a blank or ragged piece included, reads what the line parser reads."""
    monkeypatch.setattr(textparse, "ONE_FILE_PIECE_BYTES", piece)
    rng = np.random.default_rng(5)
    texts = [random_text(rng) for _ in range(300)] + [damage(rng, random_text(rng)) for _ in range(300)]
    texts += [b"1 2\n\n\n\n3 4\n", b"1 2\n3\n", b"# c\n5 6\n# d\n7 8", b"\n\n", b"12345678 9\n1 2\n"]
    for data in texts:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            continue
        got = outcome(lambda: parse_text_matrix(text, "f"))
        assert got == outcome(lambda: _parse_text_lines(text.replace("\r\n", "\n"), "f", False)), data


def outcome(parse) -> object:
    """A parse's matrix as lists (and dtype), or its refusal's words."""
    try:
        matrix = parse()
    except DumpError as exc:
        return str(exc)
    return matrix.tolist(), matrix.dtype.name


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        b" , \n",
        b"1,,2\n",
        b",1,2\n",
        b"1 2\n, ,\n3 4\n",
        b"1 2\n3\n",
        b"1\r\n2\n",
        b"\xef\xbb\xbf1\n",
        b"-\n",
        b"1 -\n",
        b"12345678901234567890\n",
        b"1+2\n",
        b"#1\n",
    ],
)
def test_fast_parse_declines_odd_files(data):
    assert not textparse.parse_id_texts([b"1 2\n", data, b"3 4\n"]).ok[1]


# --- whole directories: the CLI against the scalar reference ---------------------------------------


def reference_output(d: Path, argv: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """(exit, stdout, stderr) that `replay DIR --json` owes: the scalar replay, record by record."""
    opts = ReplayOptions(step0_offset=None)
    if argv:
        from replay.cli import build_parser
        from replay.cli.options import options_from_args

        opts = options_from_args(build_parser().parse_args(["replay", str(d), *argv]))
    rep = replay_directory(d, opts)
    out = "".join(json.dumps(record_of(r).to_json()) + "\n" for r in rep.results)
    err = "".join(f"specreplay: {w}\n" for w in rep.warnings) + "".join(
        f"specreplay: {line}\n" for line in skipped_lines(rep.skipped)
    )
    if not rep.results:  # nothing replayed: an error, after the reasons (replay.cli.options.no_rounds_error)
        from replay.cli.options import no_rounds_error

        return 2, out, err + f"specreplay: error: {no_rounds_error(rep.directory, rep.skipped)}\n"
    return (1 if rep.skipped else 0), out, err


def cli_output(d: Path, argv: tuple[str, ...] = ()) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", str(d), "--json", "--no-progress", *argv])
    return code, out.getvalue(), err.getvalue()


def fast_rounds(d: Path, step0_offset: tuple[int, int] = (1, 1)) -> int:
    """Rounds of ``d`` that the bulk reader takes (the rest go to the reference reader)."""
    items = round_paths(plan_items(group_directory(d), {}))
    batches, _ = textbatch.read_text_batches(str(d), items, step0_offset, None, False)
    return sum(len(b) for b in batches)


def write_matrix(path: Path, ids: np.ndarray, rng: np.random.Generator, shift: int = 0) -> None:
    """shift: added to every real token (not to PAD_TOKEN padding), e.g. 2**32 for ids beyond int32."""
    ids = np.where(ids == -1, -1, ids.astype(np.int64) + shift)
    sep = str(rng.choice([" ", "\t", ", "]))
    path.write_text("\n".join(sep.join(str(int(v)) for v in row) for row in ids) + "\n")


def write_random_dir(d: Path, seed: int, step0_shift: int = 1) -> None:
    """Rounds of one config, some early-stopped or of another shape, as plain text; step 0 named
    ``step0_shift`` positions before its round (the article's rule: 1)."""
    rng = np.random.default_rng(seed)
    cfg = CONFIGS[seed % len(CONFIGS)]
    (d / "config.json").write_text(json.dumps(cfg.to_json()))
    for j in range(3):
        other = CONFIGS[int(rng.integers(0, len(CONFIGS)))] if j == 2 else cfg  # may not fit cfg: rejected rounds
        spec = SynthSpec(
            other,
            int(rng.integers(2, 7)),
            steps=int(rng.integers(1, other.gamma + 1)),
            seed=seed * 10 + j,
            with_scores=False,
            layout=str(rng.choice(["all", "parents"])),
            extra_cols=int(rng.integers(0, 3)),
            target_cols=int(rng.integers(1, 3)),
            vocab=int(rng.choice([1000, 50000])),
            first_key=100 + 1000 * j,
        )
        shift = 2**32 if seed % 4 == 1 else 0
        batch = synth_batch(spec)
        for i in range(len(batch)):
            rnd = round_at(batch, i)
            a, b = rnd.key
            for s, m in enumerate(rnd.steps):
                name = f"draft_step_{s}_{a - step0_shift}_{b - step0_shift}" if s == 0 else f"draft_step_{s}_{a}_{b}"
                write_matrix(d / name, m.ids, rng, shift)
            write_matrix(d / f"validate_{a}_{b}", rnd.validate.ids, rng, shift)


def files_of(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.startswith(("draft_step_", "validate_")))


def break_files(d: Path, rng: np.random.Generator, count: int) -> None:
    """Damage ``count`` files: their bytes, their kind, their name, or their existence."""
    for path in rng.choice(files_of(d), size=count, replace=False):
        kind = int(rng.integers(0, 6))
        if kind <= 2:
            path.write_bytes(damage(rng, path.read_bytes()))
        elif kind == 3:
            path.unlink()
        elif kind == 4:
            path.unlink()
            path.mkdir()
        else:
            path.rename(path.with_name(path.name + ".txt"))  # still text, under another extension


@pytest.mark.parametrize("seed", range(12))
def test_random_text_dirs_print_what_the_scalar_replay_prints(tmp_path, seed):
    write_random_dir(tmp_path, seed)
    rng = np.random.default_rng(seed)
    if seed % 3:
        break_files(tmp_path, rng, int(rng.integers(1, 6)))
    assert fast_rounds(tmp_path) > 0
    assert cli_output(tmp_path) == reference_output(tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_varied_shape_text_dirs_print_what_the_scalar_replay_prints(tmp_path, seed):
    """Matrix sizes varied round by round (replay.testing.batch_synth.varied_run) form one batch per
    step count, padded, and print what the scalar replay prints, damaged files included."""
    cfg = CONFIGS[seed % len(CONFIGS)]
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_json()))
    batches = varied_run(
        cfg, 40, seed=seed, early_stop_rate=0.3, with_scores=False, layout=("all", "parents")[seed % 2]
    )
    write_text_rounds(tmp_path, batches)
    items = round_paths(plan_items(group_directory(tmp_path), {}))
    chunk = read_chunk(str(tmp_path), items, ReadOptions())
    assert len(chunk.batches) == len({b.num_steps for b in batches})  # not one per shape
    assert any(st.padded for b in chunk.batches for st in (*b.steps, b.validate))
    if seed % 2:
        break_files(tmp_path, np.random.default_rng(seed), 3)
    assert cli_output(tmp_path) == reference_output(tmp_path)
    assert cli_output(tmp_path, ("--workers", "1")) == reference_output(tmp_path)


def test_hostile_text_dir(tmp_path):
    """One directory holding each odd case next to clean rounds."""
    write_random_dir(tmp_path, 0)
    files = files_of(tmp_path)
    edits = {
        0: b"# engine dump\n",  # a comment line: the reference reads it
        1: b"\xef\xbb\xbf",  # a BOM: allowed
        2: b"1.5\n",  # a float: an error naming the line
        3: b"\x00",  # a NUL byte
    }
    for k, prefix in edits.items():
        files[k].write_bytes(prefix + files[k].read_bytes())
    files[4].write_bytes(b"")  # empty
    files[5].write_bytes(files[5].read_bytes().replace(b"\n", b"\r\n"))  # CRLF: allowed
    files[7].unlink()
    os.mkfifo(files[7])  # a FIFO named like a dump file: listed, never opened
    (tmp_path / "stray.bin.tmp").write_text("x")
    assert fast_rounds(tmp_path) > 0
    code, out, err = cli_output(tmp_path)
    assert code == 1 and "line 1: '1.5' is not an integer token id" in err and "FIFO" in err
    assert (code, out, err) == reference_output(tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_step0_offset_the_names_show_is_used_alike_by_every_reader(tmp_path, seed):
    """Step 0 named with its round's own key (or 3 earlier): the bulk reader, the reference and a
    packed run group at the offset the names show, and say so on stderr in the same words."""
    shift = (0, 3)[seed % 2]
    d = tmp_path / "d"
    d.mkdir()
    write_random_dir(d, seed, step0_shift=shift)
    if seed >= 4:  # damaged files: whatever the grouping decides, both readers decide it alike
        break_files(d, np.random.default_rng(seed), 2)
    code, out, err = cli_output(d)
    assert (code, out, err) == reference_output(d)
    if seed < 4:
        assert code in (0, 1) and f"step-0 offset {shift} detected" in err and f"--step0-offset {shift}" in err
        assert fast_rounds(d, (shift, shift)) > 0  # the bulk text reader took rounds at that offset
    from replay.io.packed.pack import pack_directory

    pack_directory(d, tmp_path / "run", workers=1)
    assert cli_output(tmp_path / "run")[:2] == (code, out)


def test_zero_padded_names_keep_their_paths(tmp_path):
    """A name that does not round-trip (counters "0124") is kept verbatim for messages."""
    shutil.copytree(ARTICLE_DIR, tmp_path / "d")
    d = tmp_path / "d"
    (d / "validate_124_140").rename(d / "validate_0124_140")
    assert fast_rounds(d) == 1
    assert cli_output(d) == reference_output(d)
    code, _, err = cli_output(d, ("--layout", "all"))  # the article's validate holds the parents layout only
    assert code == 2 and "validate_0124_140" in err  # its one round skipped: nothing replayed
    assert (code, _, err) == reference_output(d, ("--layout", "all"))
    (d / "validate_0124_140").write_text("oops\n")
    code, _, err = cli_output(d)
    assert code == 2 and "validate_0124_140" in err
    assert cli_output(d) == reference_output(d)


def test_relative_directory(tmp_path, monkeypatch):
    """`replay . --json`: paths print as the reference prints them (no "./" prefix)."""
    write_random_dir(tmp_path, 2)
    break_files(tmp_path, np.random.default_rng(2), 4)
    monkeypatch.chdir(tmp_path)
    assert fast_rounds(Path(".")) > 0
    assert cli_output(Path(".")) == reference_output(Path("."))


@pytest.mark.parametrize(
    "name", ["article_round", "synthetic_article", "qwen2.5-coder/article", "qwen2.5-coder/chain4"]
)
def test_sample_dumps(name):
    d = ROOT / "sample_dumps" / name
    assert cli_output(d) == reference_output(d)


def test_article_round_is_read_by_the_bulk_reader():
    assert fast_rounds(ARTICLE_DIR) == 1


def test_stated_layout_and_offset_options(tmp_path):
    write_random_dir(tmp_path, 5)
    for argv in (
        ("--layout", "all"),
        ("--layout", "parents"),
        ("--step0-offset", "0"),
        ("--raw", "int32:8:force"),
        ("--workers", "1"),
    ):
        assert cli_output(tmp_path, argv) == reference_output(tmp_path, argv), argv


def test_fast_path_off_gives_the_same_bytes(tmp_path, monkeypatch):
    """The batch path with and without the bulk reader: today's output, byte for byte."""
    write_random_dir(tmp_path, 7)
    break_files(tmp_path, np.random.default_rng(7), 3)
    with_fast = replay_run(tmp_path, ReplayOptions(), workers=1)
    monkeypatch.setattr("replay.io.fastread.read_text_batches", lambda directory, items, *a: ([], list(items)))
    without = replay_run(tmp_path, ReplayOptions(), workers=1)
    assert list(with_fast.iter_json()) == list(without.iter_json())
    assert with_fast.skipped == without.skipped


def test_parse_pieces_and_large_files(tmp_path, monkeypatch):
    """Small parse pieces and a low per-file cap (files above it go to the reference reader) change nothing."""
    write_random_dir(tmp_path, 3)
    sizes = sorted(p.stat().st_size for p in files_of(tmp_path))
    monkeypatch.setattr(textbatch, "BULK_PARSE_BYTES", 200)
    monkeypatch.setattr(textbatch, "BULK_FILE_BYTES", sizes[len(sizes) // 2])
    total = len(group_directory(tmp_path).rounds)
    assert 0 < fast_rounds(tmp_path) < total
    rep = replay_run(tmp_path, ReplayOptions(), workers=1)
    code, out, err = reference_output(tmp_path)
    assert "".join(json.dumps(o) + "\n" for o in rep.iter_json()) == out
    assert "".join(f"specreplay: {line}\n" for line in skipped_lines(rep.skipped)) == err


def test_bulk_file_read_refuses_what_the_bounded_reader_refuses(tmp_path):
    """read_regular_or_none returns a file's bytes, or None wherever read_file_bytes would raise."""
    from replay.util.bounded import read_file_bytes, read_regular_or_none

    (tmp_path / "ok").write_bytes(b"1 2\n")
    (tmp_path / "big").write_bytes(b"1" * 100)
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dev").symlink_to("/dev/zero")
    (tmp_path / "broken").symlink_to(tmp_path / "missing")
    assert read_regular_or_none(str(tmp_path / "ok"), 99) == b"1 2\n" == bytes(read_file_bytes(tmp_path / "ok", 99))
    for name in ("big", "dir", "fifo", "dev", "broken", "missing"):
        assert read_regular_or_none(str(tmp_path / name), 99) is None, name
        with pytest.raises(DumpError):
            read_file_bytes(tmp_path / name, 99)


def test_chunk_keeps_each_signature_in_key_order(tmp_path):
    """Rounds of one group from both readers come back as one batch in key order (packing relies on it)."""
    write_random_dir(tmp_path, 4)
    files = files_of(tmp_path)
    for k in (3, 9):
        files[k].write_bytes(b"# to the reference reader\n" + files[k].read_bytes())
    items = round_paths(plan_items(group_directory(tmp_path), {}))
    chunk = read_chunk(str(tmp_path), items, ReadOptions())
    signatures = [group_key(b) for b in chunk.batches]
    assert len(signatures) == len(set(signatures))
    assert sorted(int(o) for b in chunk.batches for o in b.ordinals) == list(range(len(items)))
    for b in chunk.batches:
        assert (np.diff(b.ordinals) > 0).all()


# --- scores companions: parsed in bulk, the scores rule applied to all rounds at once ---------------

HOSTILE_SCORES = (
    "nan", "inf", "-inf", "1.5.3", "1e", "e5", ".", "-", "+", "1e5e5", "1-2", "--1", "0x1p3", "1_0", "１",
    "+.5", "5.", ".5e-3", "1E+2", "-0", "007.5", "1e999", "-1e-400", "2", "-1.5", "0.5", "1.0000001",
)  # fmt: skip


def reference_scores(data: bytes) -> np.ndarray | None:
    try:
        return _parse_text_lines(data.decode("utf-8-sig").replace("\r\n", "\n"), "f", True)
    except (DumpError, UnicodeDecodeError):
        return None


def test_fast_score_parse_equals_reference_or_declines():
    rng = np.random.default_rng(5)
    files = []
    for _ in range(400):
        rows, cols = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cells = [
            [str(rng.choice(HOSTILE_SCORES)) if rng.random() < 0.3 else repr(float(-rng.random())) for _ in range(cols)]
            for _ in range(rows)
        ]
        sep = str(rng.choice([" ", "\t", ", "]))
        files.append("\n".join(sep.join(r) for r in cells).encode() + b"\n")
    together = textparse.parse_score_texts(files)
    taken = 0
    for k, data in enumerate(files):
        ref = reference_scores(data)
        if not together.ok[k]:
            continue
        assert ref is not None, data  # taken by the fast path, refused by the reference: never
        n = int(together.rows[k] * together.cols[k])
        got = together.values[together.start[k] : together.start[k] + n].reshape(ref.shape)
        assert np.array_equal(got, ref, equal_nan=True) and got.dtype == ref.dtype, data
        taken += 1
    assert 0 < taken < len(files)


# The float literals the bulk reader takes, as a regular expression (the oracle of its array checks);
# possessive, so a hostile cell costs linear time.
FLOAT_LITERAL = re.compile(rb"[+-]?+(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+")
LITERAL_PIECES = ("", "+", "-", "0", "7", "12", "007", ".", ".", "e", "E", "e-", "e+", "5", "--", "x", "1e5")


def random_cell(rng: np.random.Generator) -> bytes:
    """A cell of float-literal pieces: often a literal, often one the grammar refuses."""
    return "".join(str(rng.choice(LITERAL_PIECES)) for _ in range(int(rng.integers(1, 6)))).encode()


def bits(values: np.ndarray) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def test_score_cells_taken_are_exactly_the_float_literals():
    rng = np.random.default_rng(17)
    cells = [random_cell(rng) for _ in range(4000)]
    files = [c + b"\n" for c in cells]
    parsed = textparse.parse_score_texts(files)
    literals = 0
    for k, cell in enumerate(cells):
        literal = FLOAT_LITERAL.fullmatch(cell) is not None and cell != b""
        assert bool(parsed.ok[k]) == literal, cell
        if literal:
            assert bits(parsed.values[parsed.start[k] : parsed.start[k] + 1]) == bits([float(cell)]), cell
            assert reference_scores(files[k]) is not None, cell
            literals += 1
    assert 500 < literals < 3500


def test_score_rows_taken_are_rows_of_float_literals():
    rng = np.random.default_rng(19)
    files, rows_of = [], []
    for _ in range(1500):
        sep = str(rng.choice([" ", "\t", ",", ", ", "  "]))
        rows = [
            [random_cell(rng) if rng.random() < 0.2 else repr(float(rng.normal())).encode() for _ in range(3)]
            for _ in range(2)
        ]
        files.append(b"\n".join(sep.encode().join(r) for r in rows) + b"\n")
        rows_of.append(rows)
    parsed = textparse.parse_score_texts(files)
    for k, rows in enumerate(rows_of):
        literal = all(FLOAT_LITERAL.fullmatch(c) is not None for r in rows for c in r if c)
        whole = all(c for r in rows for c in r)  # an empty cell is no value: its row is ragged or empty-valued
        if not whole:
            assert not parsed.ok[k] or reference_scores(files[k]) is not None, files[k]
            continue
        assert bool(parsed.ok[k]) == literal, files[k]
        if literal:
            want = [float(c) for r in rows for c in r]
            assert bits(parsed.values[parsed.start[k] : parsed.start[k] + 6]) == bits(want), files[k]


def test_score_values_are_the_doubles_float_reads():
    """Every way an engine prints a double, extreme ones included: the bulk parse is bit for bit float()."""
    rng = np.random.default_rng(23)
    magnitudes = 10.0 ** rng.uniform(-330, 308, 3000)
    values = np.concatenate(
        [
            -rng.random(3000) * 30,
            rng.random(3000),
            magnitudes * rng.choice([-1.0, 1.0], 3000),
            [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2],
        ]
    )
    formats = ("%.9g", "%.17g", "%r", "%.6e", "%.3f", "%.20f", "%.0f", "%E", "%.12G")
    for fmt in formats:
        cells = [(repr(float(v)) if fmt == "%r" else fmt % v).encode() for v in values]
        cells = [c for c in cells if len(c) <= 90 and b"inf" not in c.lower()]  # "%.20f" of 1e300 is long
        parsed = textparse.parse_score_texts([c + b"\n" for c in cells])
        assert parsed.ok.all(), fmt
        assert bits(parsed.values) == bits([float(c) for c in cells]), fmt


def write_scores(path: Path, logp: np.ndarray, rng: np.random.Generator) -> None:
    """A matrix's scores as text, as engines print them: log-probs or probabilities, various formats."""
    values = np.exp(logp) if rng.random() < 0.4 else logp
    fmt = str(rng.choice(["%.9g", "%.3f", "%r", "%.6e"]))
    sep = str(rng.choice([" ", "\t", ", "]))
    text = "\n".join(sep.join(repr(float(v)) if fmt == "%r" else fmt % v for v in row) for row in values)
    path.write_text(text + "\n")


def write_scored_dir(d: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cfg = CONFIGS[seed % len(CONFIGS)]
    (d / "config.json").write_text(json.dumps(cfg.to_json()))
    for j in range(3):
        spec = SynthSpec(
            cfg,
            int(rng.integers(3, 7)),
            steps=int(rng.integers(1, cfg.gamma + 1)),
            seed=seed * 10 + j,
            with_scores=True,
            layout="all",
            extra_cols=int(rng.integers(0, 3)),
            target_cols=int(rng.integers(1, 3)),
            vocab=1000,
            first_key=100 + 1000 * j,
        )
        batch = synth_batch(spec)
        for i in range(len(batch)):
            rnd = round_at(batch, i)
            a, b = rnd.key
            for s, m in enumerate((*rnd.steps, rnd.validate)):
                if s == len(rnd.steps):
                    name = f"validate_{a}_{b}"
                else:
                    name = f"draft_step_{s}_{a - 1}_{b - 1}" if s == 0 else f"draft_step_{s}_{a}_{b}"
                write_matrix(d / name, m.ids, rng)
                if m.logp is not None and (j != 1 or rng.random() < 0.7):  # some matrices without scores
                    suffix = str(rng.choice([".scores", ".scores", ".scores.txt"]))
                    write_scores(d / (name + suffix), np.nan_to_num(m.logp, nan=-30.0), rng)


def break_scores(d: Path, rng: np.random.Generator, count: int) -> None:
    """Damage ``count`` scores files: a hostile cell, a value out of range, NaN, a short row."""
    scores = sorted(p for p in d.iterdir() if ".scores" in p.name)
    for path in rng.choice(scores, size=count, replace=False):
        lines = path.read_text().splitlines()
        k = int(rng.integers(0, 4))
        if k == 0:
            lines[0] = lines[0] + " " + str(rng.choice(HOSTILE_SCORES))
        elif k == 1:
            lines[-1] = " ".join(["1.5"] * len(lines[-1].replace(",", " ").split()))
        elif k == 2:
            lines[0] = "nan " + lines[0]
        else:
            lines = lines[:-1] if len(lines) > 1 else ["-1 -2 -3 -4 -5 -6 -7 -8 -9"]
        path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("seed", range(8))
def test_scored_text_dirs_print_what_the_scalar_replay_prints(tmp_path, seed):
    write_scored_dir(tmp_path, seed)
    rng = np.random.default_rng(seed)
    if seed % 2:
        break_scores(tmp_path, rng, int(rng.integers(1, 6)))
    assert fast_rounds(tmp_path) > 0
    assert cli_output(tmp_path) == reference_output(tmp_path)


@pytest.mark.parametrize("kind", ["prob", "logprob"])
def test_scored_text_dir_with_stated_score_kind(tmp_path, kind):
    write_scored_dir(tmp_path, 3)
    assert cli_output(tmp_path, ("--scores", kind)) == reference_output(tmp_path, ("--scores", kind))
