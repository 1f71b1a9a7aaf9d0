"""Read many rounds of plain-text id matrices at once: one read per file, a few numpy calls per chunk.

The common text dump (integers separated by spaces, one matrix row per line, no scores or parents
companions) costs ~100 µs a file through ``matrix_io.read_matrix``, most of it per-file Python
overhead. Here the bytes of a whole chunk of rounds are classified, checked and converted together,
and rounds of equal step count go straight into RoundBatches (padded to their widest matrices).

Only a strict subset of the text format is taken: ASCII digits, ``-``, spaces, tabs, commas and LF;
every non-blank line of a file holds the same number of integers of at most ``MAX_DIGITS``
characters. Anything else is not an error here: a comment, a CR, a BOM, a ``+``, a float, a long
number, a ragged or empty file, a file that is not regular or is too large, a companion file.
Such a round is handed back, and the caller reads it with the reference reader
(``rounds.load_round``), so results, errors and skip messages stay exactly the reference's
(tests/test_textbatch.py compares both on hostile and random inputs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.vocab import PAD_TOKEN
from replay.io.grouping import Key
from replay.io.roundbatch import MatrixStack, RoundBatch, SourceNames
from replay.util.bounded import read_regular_or_none

from .matrix_io import TEXT_EXTS

FilePaths = tuple[str, "str | None", "str | None"]  # a matrix's data file, scores and parents companions
# What crosses to a reader process: strings pickle ~10x faster than the Paths of a RoundFiles.
RoundPaths = tuple[int, Key, tuple[FilePaths, ...], int]  # (ordinal, key, draft steps then validate, root token)
MAX_DIGITS = 18  # characters of one value, sign included: any such integer fits int64
BULK_FILE_BYTES = 1 << 20  # larger text files go to the reference reader (its limit: MAX_TEXT_FILE_BYTES)
BULK_PARSE_BYTES = 8 << 20  # text parsed per numpy pass (~15 bytes of work arrays per byte)
_INT32 = np.iinfo(np.int32)

# Byte classes of the fast alphabet; every other byte is OTHER and sends its file to the reference.
OTHER, DIGIT, MINUS, SEPARATOR, NEWLINE = 0, 1, 2, 3, 4
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[np.frombuffer(b"0123456789", dtype=np.uint8)] = DIGIT
_CLASS[ord("-")] = MINUS
_CLASS[np.frombuffer(b" \t,", dtype=np.uint8)] = SEPARATOR
_CLASS[ord("\n")] = NEWLINE
_COMMA_TO_SPACE = bytes.maketrans(b",", b" ")


@dataclass(frozen=True, eq=False)
class ParsedTexts:
    """The matrices of F text files; a file outside the fast subset has ok False and no values."""

    ok: np.ndarray  # [F] bool
    rows: np.ndarray  # [F] int64, 0 where not ok
    cols: np.ndarray  # [F] int64, 0 where not ok
    start: np.ndarray  # [F] int64, offset of the file's first value in ``values``
    values: np.ndarray  # [sum(rows * cols)] int64, file after file, row-major


def _file_flags(buf: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ok, rows, cols, token starts) of the files laid end to end in ``buf``.

    buf: [N] uint8, each file followed by one LF; ends: [F] int64 position of each file's final LF.
    """
    nfiles = ends.shape[0]
    cls = _CLASS[buf]
    bad = np.zeros(nfiles, dtype=bool)
    bad[np.searchsorted(ends, np.flatnonzero(cls == OTHER))] = True
    in_token = (cls == DIGIT) | (cls == MINUS)
    prev_in = np.concatenate(([False], in_token[:-1]))  # a file ends in LF, so tokens never cross files
    next_in = np.concatenate((in_token[1:], [False]))
    starts = in_token & ~prev_in
    # '-' only as a value's first character, followed by a digit ("1-2", "--3", "-" alone are not)
    minus = np.flatnonzero(cls == MINUS)
    wrong = prev_in[minus] | (cls[minus + 1] != DIGIT)  # minus + 1 exists: buf ends in LF
    bad[np.searchsorted(ends, minus[wrong])] = True
    first, last = np.flatnonzero(starts), np.flatnonzero(in_token & ~next_in)
    bad[np.searchsorted(ends, first[last - first + 1 > MAX_DIGITS])] = True
    # values per line: token starts between consecutive LFs
    newlines = np.flatnonzero(cls == NEWLINE)
    before = np.cumsum(starts, dtype=np.int64)[newlines]
    per_line = np.diff(before, prepend=0)
    line_file = np.searchsorted(ends, newlines)
    filled = per_line > 0  # blank lines (spaces, commas only) are skipped, as the reference does
    files, counts = line_file[filled], per_line[filled]
    rows = np.bincount(files, minlength=nfiles).astype(np.int64)
    cols = np.zeros(nfiles, dtype=np.int64)
    head = np.flatnonzero(np.concatenate(([True], files[1:] != files[:-1]))) if files.size else files
    cols[files[head]] = counts[head]
    bad[files[counts != cols[files]]] = True  # ragged rows
    bad |= rows == 0  # empty file
    return ~bad, rows, cols, starts


def parse_id_texts(datas: Sequence[bytes]) -> ParsedTexts:
    """Parse the files' bytes together; files outside the fast subset come back with ok False."""
    nfiles = len(datas)
    empty = np.zeros(nfiles, dtype=np.int64)
    if not nfiles:
        return ParsedTexts(np.zeros(0, dtype=bool), empty, empty, empty, empty)
    lengths = np.fromiter(map(len, datas), dtype=np.int64, count=nfiles)
    big = b"\n".join(datas) + b"\n"
    ends = np.cumsum(lengths + 1) - 1
    ok, rows, cols, starts = _file_flags(np.frombuffer(big, dtype=np.uint8), ends)
    if not ok.all():  # rare: parse the good files alone, then put them back in place
        keep = np.flatnonzero(ok)
        sub = parse_id_texts([datas[i] for i in keep.tolist()])
        full_ok = np.zeros(nfiles, dtype=bool)
        full_ok[keep] = sub.ok
        out = [np.zeros(nfiles, dtype=np.int64) for _ in range(3)]
        for arr, part in zip(out, (sub.rows, sub.cols, sub.start)):
            arr[keep] = part
        return ParsedTexts(full_ok, out[0], out[1], out[2], sub.values)
    # Validated above: np.fromstring sees only well-formed integers separated by whitespace.
    values = np.fromstring(big.translate(_COMMA_TO_SPACE), dtype=np.int64, sep=" ")
    sizes = rows * cols
    if values.shape[0] != int(starts.sum()) or values.shape[0] != int(sizes.sum()):
        return ParsedTexts(
            np.zeros(nfiles, dtype=bool), empty, empty, empty, empty
        )  # never seen; the reference decides
    start = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    return ParsedTexts(ok, rows, cols, start, values)


def _text_paths(files: tuple[FilePaths, ...], raw_forced: bool) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(data paths, their extensions) when every file is plain text without companions, else None."""
    paths, exts = [], []
    for p, scores, parents in files:
        if scores is not None or parents is not None:
            return None
        ext = "" if "." not in p[p.rfind(os.sep) + 1 :] else os.path.splitext(p)[1]  # the plain dump's names have none
        if ext.lower() not in TEXT_EXTS or (ext == "" and raw_forced):
            return None
        paths.append(p)
        exts.append(ext)
    return tuple(paths), tuple(exts)


def _narrow(ids: np.ndarray) -> np.ndarray:
    """int32 when every id fits (as fastread.narrow_ids): half the bytes for the kernel to scan."""
    if ids.size == 0 or (ids.min() >= _INT32.min and ids.max() <= _INT32.max):
        return ids.astype(np.int32)
    return ids


def _stack(parsed: ParsedTexts, files: np.ndarray) -> MatrixStack:
    """files: [R] int64 indices into ``parsed``, of any shapes: padded to the widest with PAD_TOKEN
    (replay.io.roundbatch keeps each round's own sizes)."""
    rows_of, cols_of = parsed.rows[files], parsed.cols[files]
    rows, cols = int(rows_of.max()), int(cols_of.max())
    if (rows_of == rows).all() and (cols_of == cols).all():
        index = parsed.start[files][:, None] + np.arange(rows * cols, dtype=np.int64)  # [R, rows * cols]
        ids = parsed.values[index].reshape(files.shape[0], rows, cols).transpose(1, 2, 0)
        return MatrixStack(np.ascontiguousarray(_narrow(ids)))
    r_i, c_i = np.arange(rows)[None, :, None], np.arange(cols)[None, None, :]
    inside = (r_i < rows_of[:, None, None]) & (c_i < cols_of[:, None, None])  # [R, rows, cols]
    index = parsed.start[files][:, None, None] + r_i * cols_of[:, None, None] + c_i
    ids = np.where(inside, parsed.values[np.where(inside, index, 0)], PAD_TOKEN).transpose(1, 2, 0)
    return MatrixStack(
        np.ascontiguousarray(_narrow(ids)),
        rows_of=None if (rows_of == rows).all() else rows_of.astype(np.int64),
        cols_of=None if (cols_of == cols).all() else cols_of.astype(np.int64),
    )


def read_text_batches(
    directory: str, items: Sequence[RoundPaths], step0_offset: tuple[int, int], layout: str | None, raw_forced: bool
) -> tuple[list[RoundBatch], list[RoundPaths]]:
    """(RoundBatches of the rounds read here, the items left for the reference reader, in order).

    directory: as the RoundFiles' paths were built (str(Path(directory))); raw_forced: --raw ...:force,
    which makes extension-less files raw binary. Files are parsed in pieces of about
    BULK_PARSE_BYTES, so memory stays ~15 bytes per byte of one piece whatever the chunk holds.
    """
    rest: list[RoundPaths] = []
    batches: list[RoundBatch] = []
    taken: list[tuple[RoundPaths, tuple[str, ...]]] = []
    datas: list[bytes] = []
    held = 0
    names: dict[tuple[str, ...], SourceNames] = {}
    odd: dict[int, tuple[str, ...]] = {}  # ordinal → paths
    for item in items:
        _, key, files, _ = item
        found = _text_paths(files, raw_forced)
        if found is None:
            rest.append(item)
            continue
        paths, exts = found
        if exts not in names:
            names[exts] = SourceNames(directory, exts, step0_offset)
        if paths != names[exts].paths(key, len(files) - 1):
            odd[item[0]] = paths  # names that do not round-trip ("007", "./"): kept verbatim, as the reference does
        read = [read_regular_or_none(p, BULK_FILE_BYTES) for p in paths]
        got = [g for g in read if g is not None]
        if len(got) < len(read):  # a file the bulk reader does not take: the reference reads the round
            rest.append(item)
            continue
        taken.append((item, exts))
        datas += got
        held += sum(map(len, got))
        if held >= BULK_PARSE_BYTES:
            _parse_piece(taken, datas, names, odd, layout, batches, rest)
            taken, datas, held = [], [], 0
    if taken:
        _parse_piece(taken, datas, names, odd, layout, batches, rest)
    rest.sort(key=lambda it: it[0])
    return batches, rest


def _parse_piece(
    taken: list[tuple[RoundPaths, tuple[str, ...]]],
    datas: list[bytes],
    names: dict[tuple[str, ...], SourceNames],
    odd: dict[int, tuple[str, ...]],
    layout: str | None,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """Parse the files of rounds ``taken`` (their bytes ``datas``, in order); batches and rounds refused are appended.

    odd: ordinal → paths of the rounds whose names SourceNames does not rebuild.
    """
    parsed = parse_id_texts(datas)
    counts = np.fromiter((len(exts) for _, exts in taken), dtype=np.int64, count=len(taken))  # [T] files per round
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))  # [T] each round's first file in ``parsed``
    round_ok = np.logical_and.reduceat(parsed.ok, firsts)
    by_exts: dict[tuple[str, ...], list[int]] = {}
    for t, (item, exts) in enumerate(taken):
        if round_ok[t]:
            by_exts.setdefault(exts, []).append(t)
        else:
            rest.append(item)
    rounds = _RoundColumns.of([item for item, _ in taken])
    for exts, members in by_exts.items():
        idx = np.asarray(members, dtype=np.int64)
        files = firsts[idx][:, None] + np.arange(len(exts))  # [R, matrices]
        # Matrix sizes do not split a batch (replay.io.roundbatch): one batch per step count and extensions.
        src = names[exts]
        overrides = {int(o): odd[int(o)] for o in rounds.ordinals[idx] if int(o) in odd} if odd else None
        if overrides:
            src = SourceNames(src.directory, src.exts, src.step0_offset, overrides)
        batches.append(_batch(src, files, idx, rounds, parsed, layout))


@dataclass(frozen=True, eq=False)
class _RoundColumns:
    """Per-round columns of the rounds read here, for indexing by round."""

    ordinals: np.ndarray  # [T] int64
    keys: np.ndarray  # [2, T] int64
    roots: np.ndarray  # [T] int64

    @classmethod
    def of(cls, items: Sequence[RoundPaths]) -> _RoundColumns:
        return cls(
            np.fromiter((it[0] for it in items), dtype=np.int64, count=len(items)),
            np.asarray([it[1] for it in items], dtype=np.int64).reshape(-1, 2).T.copy(),
            np.fromiter((it[3] for it in items), dtype=np.int64, count=len(items)),
        )


def _batch(
    names: SourceNames,
    files: np.ndarray,
    rounds: np.ndarray,
    columns: _RoundColumns,
    parsed: ParsedTexts,
    layout: str | None,
) -> RoundBatch:
    """Rounds of one signature. files: [R, matrices] int64 indices into ``parsed``; rounds: [R] into ``columns``."""
    stacks = [_stack(parsed, files[:, m]) for m in range(files.shape[1])]
    return RoundBatch(
        columns.keys[:, rounds],
        columns.roots[rounds],
        tuple(stacks[:-1]),
        stacks[-1],
        layout,
        names,
        columns.ordinals[rounds],
    )
