"""Read one dump matrix (token ids, optional scores, optional parent indices) from any encoding.

Encodings (docs/dump-format.md): plain text (no extension, ``.txt``, ``.csv``; whitespace- or
comma-separated), ``.npy``, ``.npz`` (arrays ``ids``, ``scores``, ``parents``), ``.pt`` (a tensor or
a dict of those tensors; read without torch, never unpickled) and raw headerless binary with a
stated dtype and column count (``.bin``/``.raw``, or every data file when raw is forced).
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np

from replay.core.vocab import PAD_TOKEN
from replay.util.bounded import (
    MAX_MATRIX_FILE_BYTES,
    MAX_TEXT_FILE_BYTES,
    Fail,
    check_cells,
    dump_fail,
    read_file_bytes,
)
from replay.util.errors import DumpError
from replay.util.words import counted, row_words, value_words

from .npyfile import EMPTY_MATRIX_FILE, read_npy, read_npz, shape_words
from .ptfile import load_pt
from .textparse import parse_one_text

TEXT_EXTS = ("", ".txt", ".csv")
RAW_EXTS = (".bin", ".raw")
ARRAY_EXTS = (".npy", ".npz", ".pt")
DATA_EXTS = TEXT_EXTS + RAW_EXTS + ARRAY_EXTS

SCORE_AUTO, SCORE_PROB, SCORE_LOGPROB = "auto", "prob", "logprob"
# What an .npz/.pt file may hold; other arrays are not read. node_logprobs: docs/dump-format.md.
ARRAY_NAMES = ("ids", "scores", "parents", "node_logprobs")
MAX_NODE_LOGPROB_COLUMNS = 16  # one column per recorded temperature (the harness writes 2)
ID_KINDS, SCORE_KINDS = "iu", "iuf"  # numpy dtype kinds accepted for token ids / for scores
_SEP = re.compile(r"[\s,]+")
# A cell is an ASCII decimal integer (Python's int() would also take '1_000' and other scripts' digits)
# or, for scores, a float literal; checked per line before numpy converts.
_BAD_INT_CHAR = re.compile(r"[^0-9+\-\s,]")
_BAD_FLOAT_CHAR = re.compile(r"[^0-9+\-.eE\s,naifNAIFtyTY]")
# What the bulk parser needs of lines: LF ends a line, nothing else does.
_ODD_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines splits here too
_COMMENT_LINES = re.compile(r"^[ \t]*#.*$", re.MULTILINE)
# A comma with no value since the line's start or the last comma is an empty value: skipping it
# would move the row's later values one column left, so it is refused (a trailing comma is not a value).
_EMPTY_INSIDE, _EMPTY_FIRST = re.compile(r",[ \t]*,"), re.compile(r"^[ \t]*,", re.MULTILINE)
_INT64 = np.iinfo(np.int64)
_PROB_SLACK = 1e-5  # float32 softmax outputs can exceed 1 by a few ulps


@dataclass(frozen=True)
class RawSpec:
    """How to read headerless binary: dtype and columns (rows follow from the file size)."""

    dtype: str = "int32"  # numpy dtype string, little-endian unless stated ('>i4')
    columns: Mapping[str, int] = field(default_factory=dict)  # per kind: "draft", "validate"
    score_dtype: str = "float32"
    force: bool = False  # read extension-less files as raw instead of text

    @classmethod
    def parse(cls, text: str) -> RawSpec:
        """``int32:16`` or ``int32:draft=16,validate=1`` (append ``:force`` for extension-less files)."""
        parts = text.split(":")
        if len(parts) < 2:
            raise DumpError("--raw", f"expected DTYPE:COLUMNS (e.g. int32:16), got {text!r}")
        raw_dtype(parts[0], ID_KINDS, dump_fail("--raw"))
        cols: dict[str, int] = {}
        try:
            if "=" in parts[1]:
                for item in parts[1].split(","):
                    kind, value = item.split("=")
                    if kind not in ("draft", "validate"):
                        raise ValueError(kind)
                    cols[kind] = int(value)
            else:
                cols = {"draft": int(parts[1]), "validate": int(parts[1])}
        except ValueError:
            raise DumpError("--raw", f"columns must be N or draft=N,validate=M, got {parts[1]!r}") from None
        check_raw_columns(cols, dump_fail("--raw"))
        return cls(parts[0], cols, force=len(parts) > 2 and parts[2] == "force")

    def text(self) -> str:
        """The spec as ``--raw`` takes it: ``int32:16``, ``int32:draft=16,validate=4``, ``:force`` appended."""
        cols = dict(self.columns)
        same = set(cols) == {"draft", "validate"} and cols["draft"] == cols["validate"]
        body = str(cols["draft"]) if same else ",".join(f"{k}={v}" for k, v in cols.items())
        return f"{self.dtype}:{body}" + (":force" if self.force else "")


def raw_dtype(name: object, kinds: str, fail: Fail) -> np.dtype:
    """The numpy dtype called ``name`` (little-endian unless it says '>'), of one of ``kinds``."""
    try:
        dt = np.dtype(name) if isinstance(name, str) else None
    except (TypeError, ValueError, SyntaxError):
        dt = None
    if dt is None:
        raise fail(f"expected a numpy dtype name (int32, float32, ...), got unknown dtype {name!r}")
    if dt.kind not in kinds or dt.fields is not None or dt.subdtype is not None:
        want = "an integer dtype (int32, <i8, ...)" if kinds == ID_KINDS else "a numeric dtype (float32, ...)"
        raise fail(f"dtype {name!r} is not {want}")
    return dt.newbyteorder("<") if dt.byteorder == "=" else dt


def check_raw_columns(columns: object, fail: Fail) -> dict[str, int]:
    """Column counts per kind: {"draft": N, "validate": M}, each a positive integer; a copy once checked."""
    if not isinstance(columns, Mapping) or not columns:
        raise fail(f"expected columns as {{draft: N, validate: M}}, got {value_words(columns)}")
    for kind, value in columns.items():
        if kind not in ("draft", "validate"):
            raise fail(f"expected column counts for 'draft' and 'validate', got {value_words(kind)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(f"expected the {kind} column count as a positive integer, got {value_words(value)}")
    return dict(columns)


@dataclass(frozen=True, eq=False)
class DumpMatrix:
    """One file's content. ``scores`` are always converted to natural-log probabilities."""

    path: str
    ids: np.ndarray  # [rows, cols] int64
    logp: np.ndarray | None = None  # [rows, cols] float64 log-probabilities, None when absent
    parents: np.ndarray | None = None  # [rows] int64 tree-order node expanded by each row
    # [rows, T] float64: row n's node's log-probability under its parent's row, one column per
    # temperature of the manifest's node_logprob_temperatures (validate files of a live dump)
    node_logp: np.ndarray | None = None
    scores_path: str = ""  # the file the scores came from (path itself, or a .scores companion)

    @classmethod
    def from_lists(
        cls,
        ids: Sequence[Sequence[int]],
        logp: Sequence[Sequence[float]] | None = None,
        parents: Sequence[int] | None = None,
        path: str = "<memory>",
    ) -> DumpMatrix:
        return cls(
            path,
            np.asarray(ids, dtype=np.int64).reshape(len(ids), -1),
            None if logp is None else np.asarray(logp, dtype=np.float64).reshape(len(ids), -1),
            None if parents is None else np.asarray(parents, dtype=np.int64),
        )

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def cols(self) -> int:
        return int(self.ids.shape[1])


def parse_text_matrix(text: str, path: str, as_float: bool = False) -> np.ndarray:
    """[rows, cols] from whitespace/comma-separated text; '#' lines and blank lines are skipped, empty values refused.

    ``_parse_text_lines`` defines the format. Its fast subset is read by the bulk parser (``textparse``,
    a batch of one; CRLF line ends and comment lines set aside first) with the same result in a
    fraction of the time; any text it does not take goes to the line-by-line parser, which names the line.
    """
    text = text.replace("\r\n", "\n")
    if text.isascii() and not _ODD_LINE_BREAKS.search(text):
        matrix = parse_one_text(_COMMENT_LINES.sub("", text).encode("ascii"), as_float)
        if matrix is not None:
            return matrix
    return _parse_text_lines(text, path, as_float)


def _empty_value(text: str) -> re.Match[str] | None:
    """An empty value of ``text`` (on one line: its first), else None."""
    return _EMPTY_FIRST.search(text) or _EMPTY_INSIDE.search(text) if "," in text else None


_PARENTS_NAME = re.compile(r"\.parents(\.[A-Za-z0-9]+)?$")
_FLOAT_TEXT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+)")


def _parse_text_lines(text: str, path: str, as_float: bool) -> np.ndarray:
    """The text format, line by line (the reference; errors name the line)."""
    parents = _PARENTS_NAME.search(str(path)) is not None  # a .parents companion holds node indices, not tokens
    kind = "a number" if as_float else ("an integer node index" if parents else "an integer token id")
    field_name = "scores" if as_float else ("parents" if parents else "ids")
    bad_char = _BAD_FLOAT_CHAR if as_float else _BAD_INT_CHAR
    rows: list[list[str]] = []
    first = 0
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        bad = bad_char.search(stripped)
        if bad:
            cell = next(c for c in _SEP.split(stripped) if bad.group() in c)
            # Words on the first line are most likely column names: say how to keep them.
            if not as_float and _FLOAT_TEXT.fullmatch(cell):
                # 1e0 or 5.0 is a number, but ids and indices are written as integers
                header = f"; {'scientific notation' if 'e' in cell.lower() else 'a decimal point'} is not an integer: write it as one"
            elif not rows and any(ch.isalpha() for ch in cell):
                header = "; a header line? Delete it or start it with #"  # words on the first line: column names
            else:
                header = ""
            raise DumpError(path, f"line {no}: {cell[:40]!r} is not {kind}{header}", field_name)
        empty = _empty_value(stripped)
        if empty:
            column = len([c for c in _SEP.split(stripped[: empty.end() - 1]) if c]) + 1
            raise DumpError(
                path,
                f"line {no}: value {column} is empty (a comma with no value before it); write every value",
                field_name,
            )
        cells = [c for c in _SEP.split(stripped) if c]
        if rows and len(cells) != len(rows[0]):
            raise DumpError(
                path,
                f"ragged rows: line {no} has {counted(len(cells), 'value')}, line {first} has {len(rows[0])}",
                field_name,
            )
        first = first or no
        for c in cells:
            try:
                value = float(c) if as_float else int(c)
            except ValueError:
                raise DumpError(path, f"line {no}: {c[:40]!r} is not {kind}", field_name) from None
            if not as_float and not _INT64.min <= value <= _INT64.max:
                raise DumpError(path, f"line {no}: token id {c[:40]} is outside the int64 range", field_name)
        rows.append(cells)
    if not rows:
        raise DumpError(path, EMPTY_MATRIX_FILE)
    return np.array(rows, dtype=np.float64 if as_float else np.int64)


def _read_text(path: Path, as_float: bool) -> np.ndarray:
    data = read_file_bytes(path, MAX_TEXT_FILE_BYTES)
    try:
        text = data.decode("utf-8-sig")  # a BOM is allowed
    except UnicodeDecodeError:
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # Windows editors' "Unicode" text
            raise DumpError(path, "UTF-16 text (it starts with a UTF-16 byte order mark): save it as UTF-8") from None
        raise DumpError(path, "not UTF-8 text; if this is a raw binary dump, pass --raw DTYPE:COLUMNS") from None
    return parse_text_matrix(text, str(path), as_float)


def _read_raw(path: Path, dtype: str, columns: int, kinds: str) -> np.ndarray:
    dt = raw_dtype(dtype, kinds, dump_fail(path, "--raw"))
    data = read_file_bytes(path, MAX_MATRIX_FILE_BYTES)
    row_bytes = dt.itemsize * columns
    if len(data) % row_bytes:
        raise DumpError(
            path,
            f"size {len(data)} bytes is not a whole number of rows of {columns} x {dt.name} ({row_bytes} bytes); "
            "truncated file or wrong --raw",
        )
    if not data:
        raise DumpError(path, EMPTY_MATRIX_FILE)
    cells = len(data) // dt.itemsize
    check_cells(cells, lambda: f"{cells:,} values", dump_fail(path))
    return np.frombuffer(data, dtype=dt).reshape(-1, columns)


def _load_arrays(path: Path, fmt: str) -> dict[str, np.ndarray]:
    """The arrays named in ARRAY_NAMES that the file (of file_kind ``fmt``) holds; 'ids' must be among them."""
    if fmt == "npy":
        return {"ids": read_npy(path)}
    if fmt == "npz":
        arrays, found = read_npz(path, ARRAY_NAMES)
    else:
        obj = load_pt(path)
        if isinstance(obj, np.ndarray):
            return {"ids": obj}
        arrays, found = {k: v for k, v in obj.items() if k in ARRAY_NAMES}, tuple(obj)
    if "ids" not in arrays:
        raise DumpError(path, f"no 'ids' array (found {sorted(found)[:10]})", "ids")
    return arrays


def to_int64(arr: np.ndarray, path: Path, field_name: str) -> np.ndarray:
    """Integers (their dtype checked by ids_refusal or _as_parents, which word it) as int64; refused
    when they do not fit int64 (no silent wrap)."""
    if wide_unsigned(arr.dtype) and arr.size and arr.max() > _INT64.max:
        raise DumpError(path, f"value {int(arr.max())} is outside the int64 range", field_name)
    return arr.astype(np.int64, copy=False)


def wide_unsigned(dtype: np.dtype) -> bool:
    """Integers of this dtype can exceed int64: to_int64 checks their values."""
    return dtype.kind == "u" and dtype.itemsize >= 8


def ids_refusal(dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
    """Why token ids of this dtype and shape are refused whatever their values, None when they are
    taken (a wide_unsigned dtype's values still checked): the one rule of both readers."""
    if not np.issubdtype(dtype, np.integer):
        return f"expected integer token ids, got dtype {dtype}"
    if len(shape) == 1:
        n = shape[0]
        return (
            f"expected a 2-D [rows, cols] matrix, got {shape_words(shape)}: is it one row or one column? "
            f"Save it as [1, {n}] (one row, e.g. draft step 0) or [{n}, 1] (one column)"
        )
    if len(shape) != 2 or shape[0] == 0 or shape[1] == 0:
        return f"expected a non-empty 2-D [rows, cols] matrix, got {shape_words(shape)}"
    return None


def real_refusal(dtype: np.dtype) -> str | None:
    """Why scores or node log-probabilities of this dtype are refused (they are real numbers, SCORE_KINDS)."""
    return None if dtype.kind in SCORE_KINDS else f"expected real numbers, got dtype {dtype}"


def scores_shape_refusal(scores: tuple[int, ...], ids: tuple[int, ...]) -> str | None:
    """Why scores of shape ``scores`` cannot go with ids of shape ``ids``: one score per token id."""
    if scores == ids:
        return None
    return f"the scores are {shape_words(scores)}, the ids {shape_words(ids)}: one score per token id"


def _as_ids(arr: np.ndarray, path: Path) -> np.ndarray:
    why = ids_refusal(arr.dtype, arr.shape)
    if why is not None:
        raise DumpError(path, why, "ids")
    return to_int64(arr, path, "ids")


def _as_logp(scores: np.ndarray, ids: np.ndarray, path: Path, kind: str) -> np.ndarray:
    scores = _as_real(scores, path, "scores")
    why = scores_shape_refusal(scores.shape, ids.shape)
    if why is not None:
        raise DumpError(path, why, "scores")
    logp, ok = logp_of_scores(scores[..., None], ids[..., None], kind)
    if ok[0]:
        out: np.ndarray = logp[..., 0]
        return out
    # refused: the first rule logp_of_scores found broken, with the first offending cell
    real = ids != PAD_TOKEN
    valid = scores[real]
    if np.isnan(valid).any():
        raise DumpError(path, f"NaN among the scores of real tokens, {_nan_words(scores, real)}", "scores")
    zero = _zero_row(scores[..., None], real[..., None])[:, 0]
    if kind == SCORE_LOGPROB or (kind == SCORE_AUTO and ((valid < 0).any() or zero.any())):
        why = ""
        if kind == SCORE_AUTO and not (valid < 0).any():
            why = f"{row_words(int(np.flatnonzero(zero)[0]))} is all 0, which no probability row can be, so the file holds log-probabilities; "
        _refuse_positive_logp(scores, (scores > _PROB_SLACK) & real, path, "scores", why)
    value, where = _first_bad(scores, ((scores < 0) | (scores > 1 + _PROB_SLACK)) & real)
    raise DumpError(path, f"probabilities must lie in [0, 1], found {value:.6g} ({where})", "scores")


def batch_logp(
    scores: np.ndarray,
    score_rows: np.ndarray,
    score_cols: np.ndarray,
    ids: np.ndarray,
    rows_of: np.ndarray,
    cols_of: np.ndarray,
    kind: str,
) -> tuple[np.ndarray, np.ndarray]:
    """_as_logp's rule for R rounds read in bulk: ([rows, cols, R] natural-log probabilities, [R] bool
    accepted). scores: [srows, scols, R] float64 padded with NaN, ids: [rows, cols, R] padded with
    PAD_TOKEN; score_rows, score_cols, rows_of, cols_of: [R] each round's own sizes. A round whose
    scores' shape is not its ids' is refused (scores_shape_refusal), then logp_of_scores judges the rest."""
    same_shape = (score_rows == rows_of) & (score_cols == cols_of)
    if scores.shape != ids.shape:  # wider somewhere than the ids: those rounds are refused above
        fitted = np.full(ids.shape, np.nan)
        rows, cols = min(ids.shape[0], scores.shape[0]), min(ids.shape[1], scores.shape[1])
        fitted[:rows, :cols] = scores[:rows, :cols]
        scores = fitted
    logp, ok = logp_of_scores(scores, ids, kind)
    return logp, ok & same_shape


def logp_of_scores(scores: np.ndarray, ids: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The scores rule, for R matrices at once: (natural-log probabilities, [R] bool accepted).

    scores: [rows, cols, R] float64, ids: [rows, cols, R]; only cells of real tokens (ids other than
    PAD_TOKEN) are judged. A matrix is refused when such a cell is NaN, or, read as log-probabilities
    (``kind`` logprob, or auto with a negative cell), one exceeds 0 by more than _PROB_SLACK, or,
    read as probabilities, one lies outside [0, 1 + _PROB_SLACK]. Log-probabilities are capped at 0,
    probabilities clipped to [0, 1] before the log.
    """
    real = ids != PAD_TOKEN
    ok = ~(np.isnan(scores) & real).any(axis=(0, 1))
    if kind == SCORE_AUTO:
        is_log = ((scores < 0) & real).any(axis=(0, 1)) | _zero_row(scores, real).any(axis=0)
    else:
        is_log = np.full(scores.shape[2], kind == SCORE_LOGPROB)
    ok &= ~(is_log & ((scores > _PROB_SLACK) & real).any(axis=(0, 1)))
    ok &= ~(~is_log & (((scores < 0) | (scores > 1 + _PROB_SLACK)) & real).any(axis=(0, 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        if is_log.all():
            logp: np.ndarray = np.minimum(scores, 0.0)
        elif not is_log.any():
            logp = np.log(np.clip(scores, 0.0, 1.0))
        else:
            logp = np.where(is_log, np.minimum(scores, 0.0), np.log(np.clip(scores, 0.0, 1.0)))
    return logp, ok


def _zero_row(scores: np.ndarray, real: np.ndarray) -> np.ndarray:
    """[rows, R] bool: rows with a real token whose real cells are all exactly 0. No probability row
    can be: its top candidate has a positive probability; as log-probabilities it is a row of certain
    candidates, which an fp16 top-1 dump writes (scores, real: [rows, cols, R])."""
    out: np.ndarray = real.any(axis=1) & ((scores == 0) | ~real).all(axis=1)
    return out


def _first_cell(bad: np.ndarray) -> tuple[int, int]:
    """(row, column) of the first True of a [rows, cols] mask, row by row."""
    r, c = divmod(int(np.flatnonzero(bad)[0]), bad.shape[1])
    return r, c


def _as_real(arr: np.ndarray, path: Path, field_name: str) -> np.ndarray:
    """Scores or node log-probabilities as float64, refused unless real numbers (real_refusal). A
    signalling NaN (a flipped bit) widens quietly: the NaN check after this finds it."""
    why = real_refusal(arr.dtype)
    if why is not None:
        raise DumpError(path, why, field_name)
    with np.errstate(invalid="ignore"):
        out: np.ndarray = np.asarray(arr, dtype=np.float64)
    return out


def _refuse_positive_logp(values: np.ndarray, bad: np.ndarray, path: Path, field_name: str, why: str = "") -> NoReturn:
    """Refuse [rows, cols] log-probabilities above 0 (True in ``bad``), naming the first; ``why`` says
    how the reader knows they are log-probabilities when the file did not say."""
    value, where = _first_bad(values, bad)
    raise DumpError(path, f"{why}log-probabilities must be <= 0, found {value:.6g} ({where})", field_name)


def _first_bad(values: np.ndarray, bad: np.ndarray) -> tuple[float, str]:
    """The first True of a [rows, cols] mask, row by row: its value and ``row r (0-based)``, where to look."""
    r, c = _first_cell(bad)
    return float(values[r, c]), row_words(r)


def _nan_words(values: np.ndarray, among: np.ndarray | None) -> str:
    """Where the first NaN of a [rows, cols] array (among the True cells of ``among``) sits: ``row r (0-based), column c holds NaN``."""
    bad = np.isnan(values) if among is None else np.isnan(values) & among
    r, c = _first_cell(bad)
    return f"{row_words(r)}, column {c} holds NaN"


def parents_fit(entries: np.ndarray | int, columns: np.ndarray | int, rows: np.ndarray | int) -> np.ndarray:
    """The parents rule: one node index per row of the ids, in one column (a 1-D array is one column).
    Ints (one array: a 0-d bool) or [F] int64 arrays (the bulk readers, a file each: [F] bool)."""
    # too many is as wrong as too few: which entries go with which row?
    return np.asarray((columns == 1) & (entries == rows))


def _as_parents(parents: np.ndarray, rows: int, path: Path) -> np.ndarray:
    parents = np.asarray(parents)
    if not np.issubdtype(parents.dtype, np.integer):
        raise DumpError(path, f"expected integer node indices, got {parents.dtype} values", "parents")
    entries = parents.shape[0] if parents.ndim else 0
    columns = 1 if parents.ndim == 1 else parents.shape[1] if parents.ndim == 2 else 0  # 0: not a column
    if not parents_fit(entries, columns, rows):
        if columns == 1:  # the words say which half of the rule failed
            raise DumpError(
                path,
                f"has {entries} entr{'y' if entries == 1 else 'ies'} but the ids have {rows} row{'s' * (rows != 1)}: one node index per row",
                "parents",
            )
        raise DumpError(
            path,
            f"expected one node index per row of the ids, got {shape_words(parents.shape)}; write one index per line",
            "parents",
        )
    own: np.ndarray = to_int64(parents.reshape(entries), path, "parents").copy()
    return own


# Each extension the readers know (lower case), by how its files are read; any other reads as text.
_EXT_FORMATS = {**dict.fromkeys(TEXT_EXTS, "text"), **dict.fromkeys(RAW_EXTS, "raw")} | {
    ext: ext[1:] for ext in ARRAY_EXTS
}


def file_kind(path: str, raw_forced: bool) -> tuple[str, str]:
    """(the extension as named, ``Path(path).suffix``, "" for none; how the file is read): "npy", "npz",
    "pt", "raw" (headerless binary: a .bin/.raw file, or one without a known extension when --raw
    ...:force) or "text" (none, .txt, .csv, or one the readers do not know, such as a companion's
    ``.scores``). The one dispatch rule of every reader; batches keep the extension to rebuild names.
    The bulk readers ask it of every file of a directory, or of one file of a chunk whose paths show
    it answers the same for all (arraybatch._array_infos)."""
    dot = path.rfind(".")
    ext = path[dot:] if path.rfind(os.sep) + 1 < dot < len(path) - 1 else ""
    fmt = _EXT_FORMATS.get(ext.lower())
    if raw_forced and (fmt is None or not ext):
        return ext, "raw"
    return ext, fmt or "text"


def reads_as_raw(path: str | Path, raw: RawSpec | None) -> bool:
    """True when ``path`` is read as headerless binary: a .bin/.raw file, or an extension-less one
    when ``raw`` is forced."""
    return file_kind(str(path), raw is not None and raw.force)[1] == "raw"


def read_array_file(
    path: Path, kind: str, raw: RawSpec | None, as_float: bool = False, columns: int | None = None
) -> dict[str, np.ndarray]:
    """The named arrays of one file: ``ids`` (or a companion's single matrix) and friends.

    columns: raw column count overriding the kind's (1 for a parents companion).
    """
    fmt = file_kind(str(path), raw is not None and raw.force)[1]
    if fmt in ("npy", "npz", "pt"):
        return _load_arrays(path, fmt)
    if fmt == "raw":
        if raw is None or (columns is None and kind not in raw.columns):
            raise DumpError(path, "raw binary needs a stated dtype and column count: pass --raw DTYPE:COLUMNS")
        cols = raw.columns[kind] if columns is None else columns
        check_raw_columns({kind: cols}, dump_fail(path, "--raw"))  # a RawSpec made in code was not parsed
        dtype, kinds = (raw.score_dtype, SCORE_KINDS) if as_float else (raw.dtype, ID_KINDS)
        return {"ids": _read_raw(path, dtype, cols, kinds)}
    return {"ids": _read_text(path, as_float)}


def read_matrix(
    path: str | Path,
    kind: str,
    raw: RawSpec | None = None,
    scores_path: str | Path | None = None,
    parents_path: str | Path | None = None,
    score_kind: str = SCORE_AUTO,
) -> DumpMatrix:
    """Read ids plus optional scores and parents (inside the file, or from companion files).

    kind: "draft" or "validate" (chooses the raw column count). Every failure is a DumpError
    naming the file (and the array): see replay.util.bounded for the limits.
    """
    path = Path(path)
    arrays = read_array_file(path, kind, raw)
    ids = _as_ids(arrays["ids"], path)
    scores = arrays.get("scores")
    if scores_path is not None:
        _refuse_two_sources(path, arrays, "scores", scores_path)
        scores = read_array_file(Path(scores_path), kind, raw, as_float=True)["ids"]
        path_for_scores = Path(scores_path)
    else:
        path_for_scores = path
    logp = None if scores is None else _as_logp(scores, ids, path_for_scores, score_kind)
    parents = arrays.get("parents")
    parents_src = path
    if parents_path is not None:
        _refuse_two_sources(path, arrays, "parents", parents_path)
        parents = read_array_file(Path(parents_path), kind, raw, columns=1)["ids"]
        parents_src = Path(parents_path)
    par = None if parents is None else _as_parents(parents, ids.shape[0], parents_src)
    own = arrays.get("node_logprobs")
    node_logp = None if own is None else _as_node_logp(own, ids.shape[0], path)
    return DumpMatrix(str(path), ids, logp, par, node_logp, str(path_for_scores) if logp is not None else "")


def _refuse_two_sources(path: Path, arrays: dict[str, np.ndarray], name: str, companion: str | Path) -> None:
    """A file's own array ``name`` and a companion file for it: which one the engine meant is unknown,
    and taking either silently changes the tree (the selection reads the scores)."""
    if name in arrays:
        raise DumpError(
            path,
            f"two sources of {name}: this file's own '{name}' array and the companion {Path(companion).name}; keep one",
            name,
        )


def _as_node_logp(arr: np.ndarray, rows: int, path: Path) -> np.ndarray:
    """[rows, T] log-probabilities: real, no NaN, no +inf, <= 0 (-inf is probability 0, as a
    greedy run's T = 0 column has it)."""
    out = _as_real(arr, path, "node_logprobs")
    if out.ndim != 2 or out.shape[0] != rows or not 1 <= out.shape[1] <= MAX_NODE_LOGPROB_COLUMNS:
        raise DumpError(
            path,
            f"expected [{counted(rows, 'row')} (one per row of the ids), 1..{MAX_NODE_LOGPROB_COLUMNS} temperatures], "
            f"got {shape_words(out.shape)}",
            "node_logprobs",
        )
    if np.isnan(out).any():
        raise DumpError(path, f"NaN among the node log-probabilities, {_nan_words(out, None)}", "node_logprobs")
    if (out > _PROB_SLACK).any():
        _refuse_positive_logp(out, out > _PROB_SLACK, path, "node_logprobs")
    capped: np.ndarray = np.minimum(out, 0.0)
    return capped
