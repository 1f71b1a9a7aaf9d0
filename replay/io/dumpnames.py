"""The dump's file names: draft_step_{i}_{a}_{b} and validate_{a}_{b}, with an optional data
extension and .scores / .parents companions (docs/dump-format.md), the side files a dump
directory may hold beside them, and a round's key (a, b) as the user names it (124_140). A name
is read by DUMP_NAME and spelt by matrix_name (replay.io.roundbatch.SourceNames inlines it, for
speed); replay.io.grouping groups files by these names, replay.io.dumpwrite writes them.

Which names are companions of which matrix is decided here once (pair_files): a name's matrix is
its (step, a, b), its kind the companion word it carries; a matrix is readable when it has one data
file and at most one companion of each kind. The grouping's fast and general paths and the
messages' scores_companion all ask it.
"""

from __future__ import annotations

import glob
import os
import re
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
