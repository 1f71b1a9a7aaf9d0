"""Parse plain-text matrices in bulk: the bytes of many files classified, checked and converted by a
few numpy passes over all of them at once.

Only a strict subset of the text format (``matrix_io._parse_text_lines`` defines it) is taken:
ASCII digits, ``-``, spaces, tabs, commas and LF; every non-blank line of a file holds the same
number of integers of at most ``MAX_DIGITS`` characters. Scores may hold decimal numbers
(``-1.5``, ``.5``, ``2e-3``, a ``+``), every one a whole float literal (the grammar checked on all
files at once, by array operations). A file outside the subset comes back with ok False, and its
reader hands it to the line-by-line parser, which decides and words every refusal. One file is a
batch of one: ``matrix_io.parse_text_matrix`` reads through here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_DIGITS = 18  # characters of one value, sign included: any such integer fits int64
ONE_FILE_PIECE_BYTES = 1 << 20  # one file's text parsed per numpy pass (up to ~40 bytes of work arrays a byte)

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


def parse_one_text(body: bytes, floats: bool) -> np.ndarray | None:
    """One file's [rows, cols] matrix (float64 scores or int64 ids), None when it is outside the fast
    subset. Parsed in pieces of about ONE_FILE_PIECE_BYTES cut at line ends, so the work arrays stay
    small for a file of any size; a piece of blank lines only is outside the subset."""
    parse = parse_score_texts if floats else parse_id_texts
    parts: list[np.ndarray] = []
    start = 0
    while start < len(body):
        end = len(body)
        if end - start > ONE_FILE_PIECE_BYTES:  # cut after the piece's last LF (or a longer line's own)
            cut = body.rfind(b"\n", start, start + ONE_FILE_PIECE_BYTES)
            cut = cut if cut >= 0 else body.find(b"\n", start + ONE_FILE_PIECE_BYTES)
            end = end if cut < 0 else cut + 1
        parsed = parse([body[start:end]])
        if not parsed.ok[0] or (parts and int(parsed.cols[0]) != parts[0].shape[1]):
            return None
        parts.append(parsed.values.reshape(int(parsed.rows[0]), int(parsed.cols[0])))
        start = end
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
