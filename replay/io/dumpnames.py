"""The dump's file names: draft_step_{i}_{a}_{b} and validate_{a}_{b}, with an optional data
extension and .scores / .parents companions (docs/dump-format.md), the side files a dump
directory may hold beside them, and a round's key (a, b) as the user names it (124_140). A name
is read by DUMP_NAME (a directory's names at once by name_columns, as columns) and spelt by
matrix_name (replay.io.roundbatch.SourceNames inlines it, for speed); replay.io.grouping groups
files by these names, replay.io.dumpwrite writes them.

Which names are companions of which matrix is decided here once (pair_files): a name's matrix is
its (step, a, b), its kind the companion word it carries; a matrix is readable when it has one data
file and at most one companion of each kind. The grouping's fast and general paths and the
messages' scores_companion all ask it.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np

from .formats.matrix_io import DATA_EXTS

_DUMP_NAME_TEXT = (
    r"^(?:draft_step_(?P<step>\d+)|(?P<validate>validate))_(?P<a>-?\d+)_(?P<b>-?\d+)"
    r"(?P<companion>\.scores|\.parents)?(?P<ext>\.[A-Za-z0-9]+)?$"
)


DUMP_NAME = re.compile(_DUMP_NAME_TEXT, re.ASCII)  # counters are ASCII digits (\d alone would take any script's)


# DUMP_NAME over the lines of many names at once, its groups in the same order; a line that is no
# dump name comes back whole, last.
DUMP_NAME_LINES = re.compile(_DUMP_NAME_TEXT + r"|^(?P<other>.*)$", re.ASCII | re.MULTILINE)


# A data file's companions, in FileSet's field order: kinds 1 and 2 (kind 0: the data file).
COMPANIONS = (".scores", ".parents")


# A dump name's companion group → its kind.
COMPANION_KIND: dict[str | None, int] = {None: 0, "": 0} | {word: kind for kind, word in enumerate(COMPANIONS, 1)}


# Files that belong in a dump directory but are not matrices.
SIDE_FILES = ("manifest.json", "config.json")


SIDE_EXTS = (".json", ".md", ".txt.md", ".png", ".svg", ".html", ".csv.md")


Key = tuple[int, int]


# One logical matrix's name: (step, a, b), step -1 for the validate file.
MatrixKey = tuple[int, int, int]


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1  # keys and steps become int64 arrays when read


SAFE_DIGITS = 18  # a counter of at most this many characters (sign included) always fits int64


# DUMP_NAME in the common spelling alone, over lines: counters of at most SAFE_DIGITS characters and
# an extension the readers take (case aside) that holds no digit and does not start as a companion
# does (".sc", ".pa"), so a name's digits are its counters and its first dot starts its companion or
# extension. A line that is no such name comes back whole; a dump name is "" (one shared object).
_COUNTER = rf"(?:-\d{{1,{SAFE_DIGITS - 1}}}|\d{{1,{SAFE_DIGITS}}})"
_PLAIN_EXTS = "|".join(
    re.escape(e) for e in DATA_EXTS if e and not re.search(r"\d", e) and e.lower()[:3] not in (".sc", ".pa")
)
_PLAIN_NAME_LINES = re.compile(
    rf"^(?:(?:draft_step_\d{{1,{SAFE_DIGITS}}}|validate)_{_COUNTER}_{_COUNTER}(?:\.scores|\.parents)?"
    rf"(?i:{_PLAIN_EXTS})?$|(.*)$)",
    re.ASCII | re.MULTILINE,
)
_COUNTER_BYTES = bytes(c if chr(c) in "0123456789-" else ord(" ") for c in range(256))  # else a space


def matrix_name(matrix: MatrixKey) -> str:
    """The file name, without extension, of matrix (step, a, b), step -1 the validate: DUMP_NAME's inverse."""
    step, a, b = matrix
    return f"validate_{a}_{b}" if step == -1 else f"draft_step_{step}_{a}_{b}"


def is_dump_file_name(name: str) -> bool:
    """A draft_step_I_A_B / validate_A_B data file name (not a companion, not a side file)."""
    m = DUMP_NAME.match(name)
    return m is not None and not m.group("companion") and takes_ext(m.group("ext"))


def parse_round_key(text: str) -> Key:
    """``"124_140"`` (or ``"124,140"``) → (124, 140): a round named by its validate file's numbers."""
    try:
        a, b = text.replace(",", "_").split("_")
        return int(a), int(b)
    except ValueError:
        numbers = re.findall(r"\d+", text, re.ASCII)  # 124-140, 124 140, validate_124_140: the two numbers meant
        hint = f"; did you mean {numbers[0]}_{numbers[1]}?" if len(numbers) == 2 else ""
        raise ValueError(f"expected A_B (e.g. 124_140), got {text!r}{hint}") from None


def fits_int64(*values: int) -> bool:
    return min(values) >= INT64_MIN and max(values) <= INT64_MAX


def scores_companion(data_path: str) -> str | None:
    """The ``.scores`` companion the grouping pairs with a matrix data file (``validate_10_20`` →
    ``validate_10_20.scores``, ``.scores.EXT`` or ``validate_010_20.scores``: any name of the same matrix
    key and an extension the readers take), None when there is none: for messages about a batch, whose
    arrays keep only the data file's name."""
    directory, name = os.path.split(data_path)
    matrix = matrix_of(name)
    if matrix is None or matrix[1]:
        return None
    (step, a, b), wanted = matrix[0], (matrix[0], COMPANION_KIND[".scores"])
    # Every spelling of a counter ends with its digits ("-010" for -10), so this pattern finds each
    # name of the matrix; matrix_of, the key pair_files groups by, decides which of them it is.
    head = "validate" if step == -1 else f"draft_step_*{step}"
    pattern = os.path.join(glob.escape(directory), f"{head}_*{abs(a)}_*{abs(b)}.scores*")
    for found in sorted(glob.glob(pattern)):
        hit = os.path.basename(found)
        if is_dump_name(hit) and matrix_of(hit) == wanted and os.path.isfile(found):
            return found
    return None


def matrix_of(name: str | None) -> tuple[MatrixKey, int] | None:
    """((step, a, b), its COMPANION_KIND: 0 a data file) of a dump file name (step -1: validate), or None."""
    m = DUMP_NAME.match(name) if name is not None else None
    if m is None:
        return None
    step = -1 if m.group("validate") else int(m.group("step"))
    return (step, int(m.group("a")), int(m.group("b"))), COMPANION_KIND[m.group("companion")]


@dataclass(frozen=True)
class Pairing:
    """Files grouped by the matrix their names give (pair_files)."""

    order: np.ndarray  # [F] int64 the files by matrix (step, a, b), then kind, then as given
    kind: np.ndarray  # [F] int64 each sorted file's COMPANION_KIND (0: a data file)
    first: np.ndarray  # [F] bool a sorted file that starts its matrix's files

    def readable(self) -> bool:
        """Every matrix has one data file and at most one companion of each kind: none is an orphan
        companion, a duplicate or two companions of one kind (grouping lists those)."""
        k = self.kind
        return bool((k[self.first] == 0).all() and not (~self.first[1:] & (k[1:] == k[:-1])).any())

    def matrices(self) -> list[list[int]]:
        """Each matrix's files (indices as given), its data files first, then its companions by kind."""
        order = self.order.tolist()
        bounds = [*np.flatnonzero(self.first).tolist(), len(order)]
        return [order[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]


def pair_files(step: np.ndarray, a: np.ndarray, b: np.ndarray, kind: np.ndarray) -> Pairing:
    """The one pairing rule: files of one (step, a, b) hold one matrix, a companion (kind 1 or 2)
    belongs to the data file (kind 0) of its matrix. step, a, b, kind: [F] int64 of each file's
    name (matrix_of; step -1 the validate)."""
    order = np.lexsort((kind, b, a, step))  # stable: files of one matrix and kind keep their order
    s, x, y = step[order], a[order], b[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (x[1:] != x[:-1]) | (y[1:] != y[:-1])
    return Pairing(order, kind[order], first)


def is_dump_name(name: str) -> bool:
    """Whether ``name`` is a matrix or companion file name (draft_step_I_A_B / validate_A_B)."""
    m = DUMP_NAME.match(name)
    return m is not None and takes_ext(m.group("ext"))


def unread_ext(name: str) -> str | None:
    """The extension that alone keeps ``name`` from being a dump name (``validate_10_20.csv`` →
    ``.csv``: an extension no reader takes), else None."""
    m = DUMP_NAME.match(name)
    ext = m.group("ext") if m is not None else None
    return ext if ext and not takes_ext(ext) else None


def takes_ext(ext: str | None) -> bool:
    """Whether a dump name's extension (None or "" for none) is one the readers take: a name with
    another is a stray, not a matrix or companion."""
    return (ext or "").lower() in DATA_EXTS


def base_name(path: str) -> str:
    return path.rpartition(os.sep)[2]


def is_side_file(name: str) -> bool:
    """A file a dump directory may hold that is no matrix and is not listed (manifest.json,
    notes, pictures, hidden files); any other name that is no dump file is listed as skipped."""
    return name in SIDE_FILES or name.startswith(".") or PurePosixPath(name).suffix.lower() in SIDE_EXTS


@dataclass(frozen=True, eq=False)
class NameColumns:
    """Many file names read by DUMP_NAME at once: which are dump names, and each one's matrix and kind."""

    dump: np.ndarray  # [N] bool the dump names among the names
    step: np.ndarray  # [F] int64 each dump name's draft step, -1 the validate
    a: np.ndarray  # [F] int64 its counters
    b: np.ndarray  # [F] int64
    kind: np.ndarray  # [F] int64 its COMPANION_KIND (0: a data file)


def name_columns(names: Sequence[str], text: str) -> NameColumns | None:
    """The names (``text``: joined by LFs, none holding one) as columns; None when some dump name has
    an extension no reader takes or a counter longer than SAFE_DIGITS (the grouping's general work
    names them). Names in the common spelling take one regex pass without groups and array
    operations (~4x faster than a tuple of groups per name); any other dump name, the groups."""
    others = _PLAIN_NAME_LINES.findall(text)
    if len(others) == len(names):
        dump = np.fromiter(map(len, others), dtype=np.int64, count=len(names)) == 0  # [N]
        if not any(DUMP_NAME.match(names[i]) for i in np.flatnonzero(~dump).tolist()):  # the few others
            plain = text if dump.all() else "\n".join(itertools.compress(names, dump.tolist()))
            columns = _plain_columns(plain.encode("ascii"), dump)
            if columns is not None:
                return columns
    return _group_columns(names, text)


def _plain_columns(text: bytes, dump: np.ndarray) -> NameColumns | None:
    """NameColumns of ``text``, the dump names (``dump``: [N] bool which names they are) joined by LFs,
    each matched by _PLAIN_NAME_LINES: counters are the digit runs, kinds the word after a dot (only a
    companion's reads "sc" or "pa")."""
    numbers = np.fromstring(text.translate(_COUNTER_BYTES), dtype=np.int64, sep=" ")  # [2 or 3 per name]
    buf = np.frombuffer(text + b"\n\n", dtype=np.uint8)  # two more bytes: a dot's next two exist
    starts = np.concatenate(([0], np.flatnonzero(buf[:-2] == ord("\n")) + 1))  # [F] each name's first byte
    drafts = (buf[starts] == ord("d")).astype(np.int64)  # [F] 1: draft_step_S_A_B, 0: validate_A_B
    if starts.shape[0] != int(dump.sum()) or numbers.shape[0] != 2 * starts.shape[0] + int(drafts.sum()):
        return None  # never seen: the groups decide
    at = np.cumsum(2 + drafts) - 2 - drafts  # [F] each name's first number
    dots = np.flatnonzero(buf == ord("."))
    owner = np.searchsorted(starts, dots, side="right") - 1  # [dots] whose name each dot is in
    word = np.select(
        [
            (buf[dots + 1] == ord("s")) & (buf[dots + 2] == ord("c")),
            (buf[dots + 1] == ord("p")) & (buf[dots + 2] == ord("a")),
        ],
        [COMPANION_KIND[COMPANIONS[0]], COMPANION_KIND[COMPANIONS[1]]],
        0,
    )
    kind = np.zeros(starts.shape[0], dtype=np.int64)
    kind[owner[word > 0]] = word[word > 0]
    step = np.where(drafts == 1, numbers[at], -1)
    return NameColumns(dump, step, numbers[at + drafts], numbers[at + drafts + 1], kind)


def _group_columns(names: Sequence[str], text: str) -> NameColumns | None:
    """name_columns by DUMP_NAME_LINES' groups, a tuple per name."""
    rows = DUMP_NAME_LINES.findall(text)  # one tuple of groups per name, in order
    if len(rows) != len(names):
        return None
    step_text, _, a_text, b_text, companion, ext, other = zip(*rows)
    del rows  # the columns hold what is needed: the peak memory is theirs alone
    if not all(map(takes_ext, set(ext))) or max(map(len, (*step_text, *a_text, *b_text))) > SAFE_DIGITS:
        return None
    count = len(names)
    dump = np.fromiter(map(len, other), dtype=np.int64, count=count) == 0  # [N]
    index = np.flatnonzero(dump)
    kind = np.fromiter(map(COMPANION_KIND.__getitem__, companion), dtype=np.int64, count=count)[index]
    step, a, b = (_counters(t, e)[index] for t, e in ((step_text, "-1"), (a_text, "0"), (b_text, "0")))
    return NameColumns(dump, step, a, b, kind)


def _counters(texts: Sequence[str], empty: str) -> np.ndarray:
    """[N] int64 of decimal counters of at most SAFE_DIGITS characters, ``empty`` for ""."""
    return np.fromstring(" ".join([t or empty for t in texts]), dtype=np.int64, sep=" ")
