"""The dump's file names: draft_step_{i}_{a}_{b} and validate_{a}_{b}, with an optional data
extension and .scores / .parents companions (docs/dump-format.md), the side files a dump
directory may hold beside them, and a round's key (a, b) as the user names it (124_140). A name
is read by DUMP_NAME and spelt by matrix_name (replay.io.roundbatch.SourceNames inlines it, for
speed); replay.io.grouping groups files by these names, replay.io.dumpwrite writes them.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import PurePosixPath

from .formats.matrix_io import DATA_EXTS

DUMP_NAME = re.compile(
    r"^(?:draft_step_(?P<step>\d+)|(?P<validate>validate))_(?P<a>-?\d+)_(?P<b>-?\d+)"
    r"(?P<companion>\.scores|\.parents)?(?P<ext>\.[A-Za-z0-9]+)?$",
    re.ASCII,  # counters are ASCII digits (\d alone would take any script's)
)


# DUMP_NAME over the lines of many names at once; a line that is no dump name comes back whole, last.
DUMP_NAME_LINES = re.compile(
    r"^(?:draft_step_(\d+)|(validate))_(-?\d+)_(-?\d+)(\.scores|\.parents)?(\.[A-Za-z0-9]+)?$|^(.*)$",
    re.ASCII | re.MULTILINE,
)


# Files that belong in a dump directory but are not matrices.
SIDE_FILES = ("manifest.json", "config.json")


SIDE_EXTS = (".json", ".md", ".txt.md", ".png", ".svg", ".html", ".csv.md")


Key = tuple[int, int]


# One logical matrix's name: (step, a, b), step -1 for the validate file.
MatrixKey = tuple[int, int, int]


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1  # keys and steps become int64 arrays when read


SAFE_DIGITS = 18  # a counter of at most this many characters (sign included) always fits int64


def matrix_name(matrix: MatrixKey) -> str:
    """The file name, without extension, of matrix (step, a, b), step -1 the validate: DUMP_NAME's inverse."""
    step, a, b = matrix
    return f"validate_{a}_{b}" if step == -1 else f"draft_step_{step}_{a}_{b}"


def is_dump_file_name(name: str) -> bool:
    """A draft_step_I_A_B / validate_A_B data file name (not a companion, not a side file)."""
    m = DUMP_NAME.match(name)
    return m is not None and not m.group("companion") and (m.group("ext") or "").lower() in DATA_EXTS


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
    return min(values) >= _INT64_MIN and max(values) <= _INT64_MAX


def scores_companion(data_path: str) -> str | None:
    """The ``.scores`` companion beside a matrix data file (``validate_10_20`` → ``validate_10_20.scores``,
    or ``.scores.EXT``, any extension the grouping takes for one), None when there is none: for messages
    about a batch, whose arrays keep only the data file's name."""
    directory, name = os.path.split(data_path)
    m = DUMP_NAME.match(name)
    if m is None or m.group("companion"):
        return None
    stem = os.path.join(directory, name[: len(name) - len(m.group("ext") or "")] + ".scores")
    for found in sorted(glob.glob(glob.escape(stem) + "*")):
        hit = DUMP_NAME.match(os.path.basename(found))
        if hit is not None and hit.group("companion") == ".scores" and os.path.isfile(found):
            return found
    return None


def is_dump_name(name: str) -> bool:
    """Whether ``name`` is a matrix or companion file name (draft_step_I_A_B / validate_A_B)."""
    m = DUMP_NAME.match(name)
    return m is not None and (m.group("ext") or "").lower() in DATA_EXTS


def base_name(path: str) -> str:
    return path.rpartition(os.sep)[2]


def is_side_file(name: str) -> bool:
    """A file a dump directory may hold that is no matrix and is not listed (manifest.json,
    notes, pictures, hidden files); any other name that is no dump file is listed as skipped."""
    return name in SIDE_FILES or name.startswith(".") or PurePosixPath(name).suffix.lower() in SIDE_EXTS
