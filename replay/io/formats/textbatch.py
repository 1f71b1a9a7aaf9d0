"""Read many rounds of plain-text matrices at once: one read per file, a few numpy calls per chunk.

The common text dump (integers separated by spaces, one matrix row per line, scores in ``.scores``
companions or none) costs mostly per-file Python overhead through ``matrix_io.read_matrix``. Here the bytes of a whole chunk of rounds are classified, checked and converted
together, and rounds of equal step count go straight into RoundBatches (padded to their widest
matrices).

Only a strict subset of the text format is taken: ASCII digits, ``-``, spaces, tabs, commas and LF;
every non-blank line of a file holds the same number of integers of at most ``MAX_DIGITS``
characters. A scores companion may hold decimal numbers (``-1.5``, ``.5``, ``2e-3``, a ``+``), every
one a whole float literal (the grammar checked on all files at once, by array operations), and must
have its ids' shape; the scores rule is ``matrix_io.logp_of_scores``. Anything else is not an error here: a comment, a CR, a BOM, a ``+``
in ids, a float id, a long number, ``nan``, a ragged or empty file, a file that is not regular or is
too large, a parents companion. Such a round is handed back, and the caller reads it with the
file-by-file reader (``rounds.load_round``), so results, errors and skip messages stay exactly
that reader's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.vocab import PAD_TOKEN
from replay.io.dumpnames import Key
from replay.io.roundbatch import MatrixStack, RoundBatch, SourceNames
from replay.util.bounded import read_regular_or_none

from .matrix_io import DATA_EXTS, SCORE_AUTO, TEXT_EXTS, logp_of_scores

FilePaths = tuple[str, "str | None", "str | None"]  # a matrix's data file, scores and parents companions
# What crosses to a reader process: strings pickle ~10x faster than the Paths of a RoundFiles.
RoundPaths = tuple[int, Key, tuple[FilePaths, ...], int]  # (ordinal, key, draft steps then validate, root token)
MAX_DIGITS = 18  # characters of one value, sign included: any such integer fits int64
BULK_FILE_BYTES = 1 << 20  # larger text files go to the reference reader (its limit: MAX_TEXT_FILE_BYTES)
BULK_PARSE_BYTES = 8 << 20  # text parsed per numpy pass (~15 bytes of work arrays per byte)

# The fast alphabets; any other byte sends its file to the reference. A value is a run of bytes
# other than the separators (space, tab, comma, LF).
_SEPARATORS = b" \t,\n"
_ID_BYTES = b"0123456789-" + _SEPARATORS
_FLOAT_BYTES = _ID_BYTES + b"+.eE"  # scores: decimal float literals, whose grammar _float_literals checks
_SPACE, _TAB, _COMMA, _NEWLINE, _MINUS, _PLUS, _DOT = b" \t,\n-+."
_COMMA_TO_SPACE = bytes.maketrans(b",", b" ")
# Score values with their signs and dots deleted and each exponent mark made a space: each value's
# mantissa digits, then its exponent's digits when it has one, as integers (read ~3x faster as such).
_DIGITS_ONLY = bytes.maketrans(b",eE", b"   ")
_POW10 = np.array([float(10**k) for k in range(23)])  # the powers of ten that are exact doubles
_EXACT = 2**53  # the integers up to this are exact doubles


@dataclass(frozen=True, eq=False)
class ParsedTexts:
    """The matrices of F text files; a file outside the fast subset has ok False and no values."""

    ok: np.ndarray  # [F] bool
    rows: np.ndarray  # [F] int64, 0 where not ok
    cols: np.ndarray  # [F] int64, 0 where not ok
    start: np.ndarray  # [F] int64, offset of the file's first value in ``values``
    values: np.ndarray  # [sum(rows * cols)] int64, file after file, row-major


@dataclass(frozen=True, eq=False)
class _Values:
    """Where the values of files laid end to end in one buffer are."""

    buf: np.ndarray  # [N] uint8: an LF, then each file followed by one LF
    inside: np.ndarray  # [N] bool: a byte of a value
    starts: np.ndarray  # [V] int64 position of each value's first byte
    lasts: np.ndarray  # [V] int64 position of each value's last byte


@dataclass(frozen=True, eq=False)
class _Literals:
    """What the doubles of score values need beyond their bytes."""

    odd: np.ndarray  # [V] bool: no float literal
    dots: np.ndarray  # [D] int64: the positions of decimal points
    dotted: np.ndarray  # [V] bool: has one
    marked: np.ndarray  # [M] int64: the values with an exponent mark, ascending
    at: np.ndarray  # [M] int64: the position of each one's mark


def _values_of(buf: np.ndarray) -> _Values:
    """buf starts and ends with LF, so every value has a separator on each side."""
    inside = buf != _SPACE
    for separator in (_TAB, _COMMA, _NEWLINE):
        inside &= buf != separator
    edges = np.flatnonzero(inside[1:] != inside[:-1])  # alternately before a value's first byte, its last
    return _Values(buf, inside, edges[0::2] + 1, edges[1::2])


def _odd_ids(vals: _Values) -> np.ndarray:
    """[V] bool: values that are no integer of at most MAX_DIGITS characters (bytes outside the
    alphabet aside)."""
    buf = vals.buf
    # '-' only as a value's first byte, followed by a digit ("1-2", "--3", "-" alone are not)
    minus = np.flatnonzero(buf == _MINUS)
    wrong = minus[vals.inside[minus - 1] | (buf[minus + 1] - ord("0") > 9)]
    odd: np.ndarray = vals.lasts - vals.starts >= MAX_DIGITS
    odd[np.searchsorted(vals.starts, wrong, side="right") - 1] = True
    return odd


def _float_literals(vals: _Values, marks: bool) -> _Literals:
    """The values checked against ``[+-]?(D+(.D*)?|.D+)([eE][+-]?D+)?`` (D a digit), the literals
    np.fromstring, float() and the reference read to the same double. marks: the buffer holds e or E."""
    buf, inside, starts, lasts = vals.buf, vals.inside, vals.starts, vals.lasts
    sign = (buf == _MINUS) | (buf == _PLUS)
    dots = np.flatnonzero(buf == _DOT)
    dot_value = np.searchsorted(starts, dots, side="right") - 1
    dot_at = np.full(starts.size, -1, dtype=np.int64)
    dot_at[dot_value] = dots
    lead = sign[starts]
    # without a mark every byte but one dot and a leading sign is a digit, and one is needed
    odd: np.ndarray = lasts - starts + 1 - (dot_at >= 0) - lead < 1
    odd[dot_value[1:][dot_value[1:] == dot_value[:-1]]] = True  # a second dot
    mark = (buf == ord("e")) | (buf == ord("E")) if marks else np.zeros_like(sign)
    misplaced = np.flatnonzero(sign[1:] & inside[:-1] & ~mark[:-1]) + 1  # a sign inside a value follows its mark
    odd[np.searchsorted(starts, misplaced, side="right") - 1] = True
    at = np.flatnonzero(mark)
    marked = np.searchsorted(starts, at, side="right") - 1
    if at.size:
        first, last, dot = starts[marked], lasts[marked], dot_at[marked]
        mantissa = (at - first) - (dot >= 0) - lead[marked]  # its digits (a dot after the mark is odd)
        exponent = (last - at) - sign[at + 1]
        again = np.concatenate((marked[1:] == marked[:-1], [False]))  # a second mark in the value
        odd[marked[(mantissa < 1) | (exponent < 1) | (dot > at) | again]] = True
    return _Literals(odd, dots, dot_at >= 0, marked, at)


def _file_flags(
    big: bytes, vals: _Values, odd: np.ndarray, ends: np.ndarray, alphabet: bytes
) -> tuple[np.ndarray, ...]:
    """(ok, rows, cols) of the files laid end to end in ``big``.

    odd: [V] the values outside the fast subset; ends: [F] int64 position of each file's final LF.
    """
    nfiles = ends.shape[0]
    buf, starts = vals.buf, vals.starts
    bad = np.zeros(nfiles, dtype=bool)
    if big.translate(None, alphabet):  # a byte outside the alphabet (rare): find its files
        known = np.zeros(256, dtype=bool)
        known[np.frombuffer(alphabet, dtype=np.uint8)] = True
        bad[np.searchsorted(ends, np.flatnonzero(~known[buf]))] = True
    bad[np.searchsorted(ends, starts[odd])] = True
    if b"," in big:  # an empty value (a comma with no value since the last comma or LF) is the reference's to refuse
        delimiters = np.flatnonzero((buf == _COMMA) | (buf == _NEWLINE))
        empty = delimiters[np.flatnonzero(np.diff(np.searchsorted(starts, delimiters)) == 0) + 1]
        bad[np.searchsorted(ends, empty[buf[empty] == _COMMA])] = True
    # values per line: value starts between consecutive LFs (the first LF is the buffer's own)
    newlines = np.flatnonzero(buf == _NEWLINE)
    per_line = np.diff(np.searchsorted(starts, newlines))
    line_file = np.searchsorted(ends, newlines[1:])
    filled = per_line > 0  # blank lines are skipped, as the reference does
    files, counts = line_file[filled], per_line[filled]
    rows = np.bincount(files, minlength=nfiles).astype(np.int64)
    cols = np.zeros(nfiles, dtype=np.int64)
    head = np.flatnonzero(np.concatenate(([True], files[1:] != files[:-1]))) if files.size else files
    cols[files[head]] = counts[head]
    bad[files[counts != cols[files]]] = True  # ragged rows
    bad |= rows == 0  # empty file
    return ~bad, rows, cols


def _float_values(big: bytes, vals: _Values, lit: _Literals) -> np.ndarray:
    """[V] the doubles of float literals, each its mantissa's digits × 10^scale. Where the digits are
    at most 2^53 and |scale| at most 22, both factors are exact doubles and one division or product
    rounds once, to what float() gives (Clinger's fast path); every other value goes through float()."""
    ints = np.fromstring(big.translate(_DIGITS_ONLY, b"+-."), dtype=np.int64, sep=" ")  # saturates at int64
    nvals, nmarked = vals.starts.size, lit.marked.size
    if ints.size != nvals + nmarked:  # never seen: every value has mantissa digits, every mark exponent digits
        return np.fromstring(big.translate(_COMMA_TO_SPACE), dtype=np.float64, sep=" ")
    mantissa, mantissa_ends = ints, vals.lasts
    scale = np.zeros(nvals, dtype=np.int64)  # the decimal exponent of the mantissa's digits
    if nmarked:
        of_exponent = np.zeros(ints.size, dtype=bool)
        of_exponent[lit.marked + np.arange(1, nmarked + 1)] = True
        mantissa = ints[~of_exponent]
        mantissa_ends = vals.lasts.copy()
        mantissa_ends[lit.marked] = lit.at - 1
        exponent = np.minimum(ints[of_exponent], 10**6)
        scale[lit.marked] = np.where(vals.buf[lit.at + 1] == _MINUS, -exponent, exponent)
    scale[lit.dotted] -= mantissa_ends[lit.dotted] - lit.dots  # the digits after the dot
    fast = (mantissa <= _EXACT) & (np.abs(scale) <= 22)
    power = _POW10[np.where(fast, np.abs(scale), 0)]
    values: np.ndarray = np.where(scale < 0, mantissa / power, mantissa * power)
    np.negative(values, out=values, where=vals.buf[vals.starts] == _MINUS)
    slow = np.flatnonzero(~fast)
    if slow.size:
        spans = zip(vals.starts[slow].tolist(), (vals.lasts[slow] + 1).tolist())
        values[slow] = [float(big[a:b]) for a, b in spans]
    return values


def parse_id_texts(datas: Sequence[bytes]) -> ParsedTexts:
    """Parse the files' bytes together; files outside the fast subset come back with ok False."""
    return _parse_texts(datas, False)


def parse_score_texts(datas: Sequence[bytes]) -> ParsedTexts:
    """parse_id_texts for scores companions: float64 values, each a whole float literal."""
    return _parse_texts(datas, True)


def _parse_texts(datas: Sequence[bytes], floats: bool) -> ParsedTexts:
    nfiles = len(datas)
    empty = np.zeros(nfiles, dtype=np.int64)
    if not nfiles:
        return ParsedTexts(
            np.zeros(0, dtype=bool), empty, empty, empty, empty.astype(np.float64 if floats else np.int64)
        )
    lengths = np.fromiter(map(len, datas), dtype=np.int64, count=nfiles)
    big = b"\n".join([b"", *datas, b""])
    ends = np.cumsum(lengths + 1)
    vals = _values_of(np.frombuffer(big, dtype=np.uint8))
    lit = _float_literals(vals, b"e" in big or b"E" in big) if floats else None
    odd = _odd_ids(vals) if lit is None else lit.odd
    ok, rows, cols = _file_flags(big, vals, odd, ends, _ID_BYTES if lit is None else _FLOAT_BYTES)
    if not ok.all():  # rare: parse the good files alone, then put them back in place
        keep = np.flatnonzero(ok)
        sub = _parse_texts([datas[i] for i in keep.tolist()], floats)
        full_ok = np.zeros(nfiles, dtype=bool)
        full_ok[keep] = sub.ok
        out = [np.zeros(nfiles, dtype=np.int64) for _ in range(3)]
        for arr, part in zip(out, (sub.rows, sub.cols, sub.start)):
            arr[keep] = part
        return ParsedTexts(full_ok, out[0], out[1], out[2], sub.values)
    # Validated above: only well-formed numbers separated by whitespace and commas.
    if lit is not None:
        values = _float_values(big, vals, lit)
    else:
        values = np.fromstring(big.translate(_COMMA_TO_SPACE), dtype=np.int64, sep=" ")
    sizes = rows * cols
    if values.shape[0] != vals.starts.size or values.shape[0] != int(sizes.sum()):
        return ParsedTexts(
            np.zeros(nfiles, dtype=bool), empty, empty, empty, values[:0]
        )  # never seen; the reference decides
    start = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    return ParsedTexts(ok, rows, cols, start, values)


def _text_ext(path: str) -> str:
    """The extension of a dump file name as named ("" for none: the plain dump's names have none)."""
    return "" if path.rfind(".") <= path.rfind(os.sep) else os.path.splitext(path)[1]


def _text_paths(
    files: tuple[FilePaths, ...], raw_forced: bool
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str | None, ...]] | None:
    """(data paths, their extensions, their scores companions or None) when every file is plain text
    and no matrix has a parents companion, else None."""
    paths, exts, scores_paths = [], [], []
    for p, scores, parents in files:
        if parents is not None:
            return None
        ext = _text_ext(p)
        if ext.lower() not in TEXT_EXTS or (ext == "" and raw_forced):
            return None
        if scores is not None:
            # read_array_file's rule: an extension it does not know (".scores") reads as text
            s_ext = "" if scores.endswith(".scores") else _text_ext(scores).lower()
            s_ext = s_ext if s_ext in DATA_EXTS else ""
            if s_ext not in TEXT_EXTS or (s_ext == "" and raw_forced):
                return None
        paths.append(p)
        exts.append(ext)
        scores_paths.append(scores)
    return tuple(paths), tuple(exts), tuple(scores_paths)


def _gather(parsed: ParsedTexts, files: np.ndarray, fill: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """([rows, cols, R] values of ``files`` (indices into ``parsed``, of any shapes) padded to the widest
    with ``fill``; each file's rows; its columns)."""
    rows_of, cols_of = parsed.rows[files], parsed.cols[files]
    rows, cols = int(rows_of.max()), int(cols_of.max())
    if (rows_of == rows).all() and (cols_of == cols).all():
        index = parsed.start[files][:, None] + np.arange(rows * cols, dtype=np.int64)  # [R, rows * cols]
        return parsed.values[index].reshape(files.shape[0], rows, cols).transpose(1, 2, 0), rows_of, cols_of
    r_i, c_i = np.arange(rows)[None, :, None], np.arange(cols)[None, None, :]
    inside = (r_i < rows_of[:, None, None]) & (c_i < cols_of[:, None, None])  # [R, rows, cols]
    index = parsed.start[files][:, None, None] + r_i * cols_of[:, None, None] + c_i
    values = np.where(inside, parsed.values[np.where(inside, index, 0)], fill).transpose(1, 2, 0)
    return values, rows_of, cols_of


def read_text_batches(
    directory: str,
    items: Sequence[RoundPaths],
    step0_offset: tuple[int, int],
    layout: str | None,
    raw_forced: bool,
    score_kind: str = SCORE_AUTO,
) -> tuple[list[RoundBatch], list[RoundPaths]]:
    """(RoundBatches of the rounds read here, the items left for the reference reader, in order).

    directory: as the RoundFiles' paths were built (str(Path(directory))); raw_forced: --raw ...:force,
    which makes extension-less files raw binary; score_kind: --scores (how scores are read). Files
    are parsed in pieces of about BULK_PARSE_BYTES, so memory stays ~15 bytes per byte of one piece
    whatever the chunk holds.
    """
    rest: list[RoundPaths] = []
    batches: list[RoundBatch] = []
    piece = _Piece()
    names: dict[tuple[str, ...], SourceNames] = {}
    for item in items:
        found = _text_paths(item[2], raw_forced)
        if found is None:
            rest.append(item)
            continue
        paths, exts, scores_paths = found
        if exts not in names:
            names[exts] = SourceNames(directory, exts, step0_offset)
        if not piece.add(item, exts, paths, scores_paths):  # a file the bulk reader does not take
            rest.append(item)
            continue
        if piece.held >= BULK_PARSE_BYTES:
            _parse_piece(piece, names, layout, score_kind, batches, rest)
            piece = _Piece()
    if piece.taken:
        _parse_piece(piece, names, layout, score_kind, batches, rest)
    rest.sort(key=lambda it: it[0])
    return batches, rest


class _Piece:
    """Rounds read so far for one parse: their ids files' bytes, and their scores companions' bytes."""

    def __init__(self) -> None:
        self.taken: list[tuple[RoundPaths, tuple[str, ...], tuple[int, ...]]] = []  # (item, exts, scores file or -1)
        self.ids: list[bytes] = []
        self.scores: list[bytes] = []
        self.held = 0

    def add(
        self, item: RoundPaths, exts: tuple[str, ...], paths: tuple[str, ...], scores: tuple[str | None, ...]
    ) -> bool:
        """Read a round's files; False (nothing kept) when one is not a regular file within BULK_FILE_BYTES."""
        ids: list[bytes] = []
        score_bytes: list[bytes] = []
        where: list[int] = []
        for p, sp in zip(paths, scores):
            data = read_regular_or_none(p, BULK_FILE_BYTES)
            if data is None:
                return False
            ids.append(data)
            if sp is None:
                where.append(-1)
                continue
            sdata = read_regular_or_none(sp, BULK_FILE_BYTES)
            if sdata is None:
                return False
            where.append(len(self.scores) + len(score_bytes))
            score_bytes.append(sdata)
        self.taken.append((item, exts, tuple(where)))
        self.ids += ids
        self.scores += score_bytes
        self.held += sum(map(len, ids)) + sum(map(len, score_bytes))
        return True


def _parse_piece(
    piece: _Piece,
    names: dict[tuple[str, ...], SourceNames],
    layout: str | None,
    score_kind: str,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """Parse the files of the piece's rounds; batches and rounds refused are appended."""
    parsed = parse_id_texts(piece.ids)
    scored = parse_score_texts(piece.scores)
    taken = piece.taken
    counts = np.fromiter((len(exts) for _, exts, _ in taken), dtype=np.int64, count=len(taken))  # [T] files per round
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))  # [T] each round's first file in ``parsed``
    round_ok = np.logical_and.reduceat(parsed.ok, firsts)
    score_ok = scored.ok.tolist()
    by_kind: dict[tuple[tuple[str, ...], tuple[bool, ...]], list[int]] = {}
    for t, (item, exts, where) in enumerate(taken):
        if round_ok[t] and all(w < 0 or score_ok[w] for w in where):
            by_kind.setdefault((exts, tuple(w >= 0 for w in where)), []).append(t)
        else:
            rest.append(item)
    rounds = _RoundColumns.of([item for item, _, _ in taken])
    for (exts, has_scores), members in by_kind.items():
        idx = np.asarray(members, dtype=np.int64)
        files = firsts[idx][:, None] + np.arange(len(exts))  # [R, matrices]
        score_files = np.asarray([taken[t][2] for t in members], dtype=np.int64).reshape(len(members), len(exts))
        # Matrix sizes do not split a batch (replay.io.roundbatch): one batch per step count, extensions, scores.
        mats = []
        good = np.ones(idx.size, dtype=bool)
        for m in range(len(exts)):
            ids, rows_of, cols_of = _gather(parsed, files[:, m], PAD_TOKEN)
            logp = None
            if has_scores[m]:
                scores, s_rows, s_cols = _gather(scored, score_files[:, m], np.nan)
                good &= (s_rows == rows_of) & (s_cols == cols_of)  # else _as_logp refuses: the reference says so
                if scores.shape != ids.shape:
                    scores = _fit(scores, ids.shape)
                logp, checked = logp_of_scores(scores, ids, score_kind)
                good &= checked
            mats.append((ids, rows_of, cols_of, logp))
        rest += [taken[t][0] for t in idx[~good].tolist()]
        if not good.any():
            continue
        keep = np.flatnonzero(good)
        idx = idx[keep]
        stacks = [MatrixStack.of_rounds(ids, logp, rows_of, cols_of, keep) for ids, rows_of, cols_of, logp in mats]
        src = names[exts]
        # names that do not round-trip ("007", "./"): kept verbatim, as the reference does
        overrides = src.odd_rounds([taken[t][0] for t in idx.tolist()])
        if overrides:
            src = SourceNames(src.directory, src.exts, src.step0_offset, overrides)
        batches.append(
            RoundBatch(
                rounds.keys[:, idx],
                rounds.roots[idx],
                tuple(stacks[:-1]),
                stacks[-1],
                layout,
                src,
                rounds.ordinals[idx],
            )
        )


def _fit(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """[rows, cols, R] values cut or NaN-padded to ``shape`` (rounds whose shapes differ are refused anyway)."""
    out: np.ndarray = np.full(shape, np.nan)
    rows, cols = min(shape[0], values.shape[0]), min(shape[1], values.shape[1])
    out[:rows, :cols] = values[:rows, :cols]
    return out


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
