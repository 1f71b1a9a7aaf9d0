"""Group a dump directory's files into rounds by name; list every file that fits no round.

Names: ``draft_step_{i}_{a}_{b}`` and ``validate_{a}_{b}``, optionally with a data extension and
with ``.scores`` / ``.parents`` companions (``draft_step_1_124_140.scores.txt``). A round is keyed by
its validate file's ``(a, b)``. Draft steps ``i >= 1`` carry the round's key; step 0 is named
``step0_offset`` positions earlier (the engine names it before advancing its counters), so
``draft_step_0_123_139`` belongs to round ``(124, 140)`` by default.

Only regular files (or symlinks to them) are dump files. An entry named like one that is not (a
directory, a FIFO, a device, a broken symlink) is listed with the reason, and the round it belongs
to is skipped: it must not replay as if complete without that file. Such entries are never opened.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from itertools import compress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping

import numpy as np

from .bounded import not_regular_reason
from .errors import DumpError, printable
from .matrix_io import DATA_EXTS

_NAME = re.compile(
    r"^(?:draft_step_(?P<step>\d+)|(?P<validate>validate))_(?P<a>-?\d+)_(?P<b>-?\d+)"
    r"(?P<companion>\.scores|\.parents)?(?P<ext>\.[A-Za-z0-9]+)?$",
    re.ASCII,  # counters are ASCII digits (\d alone would take any script's)
)
# _NAME over the lines of many names at once; a line that is no dump name comes back whole, last.
_LINE = re.compile(
    r"^(?:draft_step_(\d+)|(validate))_(-?\d+)_(-?\d+)(\.scores|\.parents)?(\.[A-Za-z0-9]+)?$|^(.*)$",
    re.ASCII | re.MULTILINE,
)
# Files that belong in a dump directory but are not matrices.
SIDE_FILES = ("manifest.json", "config.json")
SIDE_EXTS = (".json", ".md", ".txt.md", ".png", ".svg", ".html", ".csv.md")

Key = tuple[int, int]
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1  # keys and steps become int64 arrays when read
_SAFE_DIGITS = 18  # a counter of at most this many characters (sign included) always fits int64
_NAMED_GAPS = 5  # missing draft steps named in a round's skip reason


@dataclass(frozen=True)
class FileSet:
    """One logical matrix: its data file and optional companions, as path strings.

    Strings, not Paths: a directory holds tens of thousands of these, and the readers (and the
    reader processes they are sent to) want strings; ``Path(fs.data)`` where a Path is needed.
    """

    data: str
    scores: str | None = None
    parents: str | None = None


@dataclass(frozen=True)
class RoundFiles:
    key: Key
    steps: tuple[FileSet, ...]  # draft steps 0..k-1, contiguous
    validate: FileSet


@dataclass(frozen=True)
class Skipped:
    """Something the grouping could not use, with the files involved and why."""

    what: str  # "round a_b" or a file name
    reason: str
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Grouping:
    rounds: tuple[RoundFiles, ...]  # sorted by key
    skipped: tuple[Skipped, ...]
    keys: tuple[Key, ...] = ()  # every round key the names form, complete or not, sorted


def is_dump_file_name(name: str) -> bool:
    """A draft_step_I_A_B / validate_A_B data file name (not a companion, not a side file)."""
    m = _NAME.match(name)
    return bool(m) and not m.group("companion") and (m.group("ext") or "").lower() in DATA_EXTS


def parse_round_key(text: str) -> Key:
    """``"124_140"`` (or ``"124,140"``) → (124, 140): a round named by its validate file's numbers."""
    try:
        a, b = text.replace(",", "_").split("_")
        return int(a), int(b)
    except ValueError:
        numbers = re.findall(r"\d+", text, re.ASCII)  # 124-140, 124 140, validate_124_140: the two numbers meant
        hint = f"; did you mean {numbers[0]}_{numbers[1]}?" if len(numbers) == 2 else ""
        raise ValueError(f"expected A_B (e.g. 124_140), got {text!r}{hint}") from None


NEAREST_ROUNDS = 5  # rounds named when --round names one the dump does not have


def no_such_round(key: Key, keys, where: str, skipped: Iterable[Skipped] = ()) -> str:
    """The one message of every command's ``--round KEY`` when ``where`` cannot replay round KEY.

    ``keys``: the rounds it can replay, (a, b) pairs or a [2, N] array; ``skipped``: its skip
    entries. A round whose files are there but incomplete is named with the reason; otherwise the
    rounds nearest to KEY (smallest |Δa| + |Δb|) are listed first, so a typo shows its fix.
    """
    name = f"{key[0]}_{key[1]}"
    for s in skipped:
        if s.what == f"round {name}":
            return f"--round {name}: that round in {where} cannot be replayed: {s.reason}"
    arr = np.asarray(keys, dtype=np.int64)
    arr = arr.T if arr.ndim == 2 and arr.shape[0] == 2 and arr.shape[1] != 2 else arr.reshape(-1, 2)
    if not len(arr):
        return f"--round {name}: no such round in {where}, which has no round to replay"
    dist = np.abs(arr[:, 0].astype(np.float64) - key[0]) + np.abs(arr[:, 1].astype(np.float64) - key[1])  # float: no int64 overflow
    nearest = arr[np.lexsort((arr[:, 1], arr[:, 0], dist))[:NEAREST_ROUNDS]]
    listed = ", ".join(f"{a}_{b}" for a, b in nearest.tolist())
    return f"--round {name}: no such round in {where}; nearest of its {len(arr)} round(s): {listed} (A_B of validate_A_B)"


def parse_offset(text: str | int | tuple[int, int]) -> tuple[int, int]:
    """``1`` → (1, 1); ``"1,0"`` → (1, 0): how far step 0's (a, b) sit before its round's."""
    if isinstance(text, tuple):
        return text
    if isinstance(text, int):
        return (text, text)
    parts = [p for p in str(text).split(",") if p.strip()]
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"step-0 offset must be N or A,B (integers), got {text!r}") from None
    if len(vals) == 1:
        return (vals[0], vals[0])
    if len(vals) == 2:
        return (vals[0], vals[1])
    raise ValueError(f"step-0 offset must be N or A,B, got {text!r}")


def _fits_int64(*values: int) -> bool:
    return min(values) >= _INT64_MIN and max(values) <= _INT64_MAX


def is_dump_name(name: str) -> bool:
    """Whether ``name`` is a matrix or companion file name (draft_step_I_A_B / validate_A_B)."""
    m = _NAME.match(name)
    return m is not None and (m.group("ext") or "").lower() in DATA_EXTS


def _path_order(path: Path) -> tuple[str, ...]:
    """Path's own order (PurePosixPath compares its parts), without its slow __lt__."""
    return path.parts


def _base_name(path: str) -> str:
    return path.rpartition(os.sep)[2]


def is_side_file(name: str) -> bool:
    """A file a dump directory may hold that is no matrix and is not listed (manifest.json,
    notes, pictures, hidden files); any other name that is no dump file is listed as skipped."""
    return name in SIDE_FILES or name.startswith(".") or PurePosixPath(name).suffix.lower() in SIDE_EXTS


def _stray(name: str, path: str) -> list[Skipped]:
    """The skip entry of a file that is no dump matrix: none for side files and hidden files."""
    if is_side_file(name):
        return []
    return [Skipped(printable(name), "name matches neither draft_step_I_A_B nor validate_A_B", (path,))]


def _logical_files(entries: Iterable[tuple[str, str]]) -> tuple[dict[tuple, FileSet], list[Skipped]]:
    """Map (kind, step, a, b) → FileSet, reporting duplicates and stray files.

    entries: (file name, its path) in path order.
    """
    data: dict[tuple, list[str]] = defaultdict(list)
    companions: dict[tuple, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    skipped: list[Skipped] = []
    match = _NAME.match
    for name, path in entries:
        m = match(name)
        if m:
            step_text, validate, a, b, companion, ext = m.groups()
        if not m or (ext is not None and ext.lower() not in DATA_EXTS):
            skipped += _stray(name, path)
            continue
        lkey = (-1 if validate else int(step_text), int(a), int(b))
        if (len(a) > _SAFE_DIGITS or len(b) > _SAFE_DIGITS or (step_text and len(step_text) > _SAFE_DIGITS)) and not _fits_int64(*lkey):
            skipped.append(Skipped(name, "step or counters outside the int64 range", (path,)))
            continue
        if companion:
            companions[lkey][companion[1:]].append(path)
        else:
            data[lkey].append(path)
    out: dict[tuple, FileSet] = {}
    for lkey, files in data.items():
        if len(files) > 1:
            skipped.append(
                Skipped(PurePosixPath(_base_name(files[0])).stem, f"{len(files)} files hold the same matrix; keep one", tuple(files))
            )
            continue
        comp = companions.pop(lkey, None)
        if comp is None:  # the common case: a data file alone
            out[lkey] = FileSet(files[0])
            continue
        extra = [p for ps in comp.values() if len(ps) > 1 for p in ps]
        if extra:
            skipped.append(Skipped(_base_name(files[0]), "several companion files of one kind", tuple(extra)))
            continue
        out[lkey] = FileSet(files[0], (comp.get("scores") or [None])[0], (comp.get("parents") or [None])[0])
    for lkey, comp in companions.items():
        for ps in comp.values():
            for p in ps:
                skipped.append(Skipped(_base_name(p), "companion file without its data file", (p,)))
    return out, skipped


def group_paths(
    paths: Iterable[Path], step0_offset: tuple[int, int] = (1, 1), unreadable: Mapping[Path, str] | None = None
) -> Grouping:
    """Group file paths into rounds by name.

    unreadable: entries among ``paths`` that are named like dump files but cannot be read as files,
    with why ("is a directory, not a regular file"): each is listed, and so is its round, unread.
    """
    entries = [(p.name, str(p)) for p in sorted(map(Path, paths), key=_path_order)]
    given = sorted(((Path(p), why) for p, why in (unreadable or {}).items()), key=lambda kv: _path_order(kv[0]))
    bad = {str(p): why for p, why in given}
    return _group(entries, step0_offset, bad)


def _group(entries: list[tuple[str, str]], step0_offset: tuple[int, int], unreadable: Mapping[str, str]) -> Grouping:
    """group_paths over (name, path) entries in path order; unreadable: path → why, in path order."""
    if not unreadable:
        simple = _group_complete(entries, step0_offset)
        if simple is not None:
            return simple
    files, skipped = _logical_files(entries)
    skipped += [Skipped(_base_name(p), why, (p,)) for p, why in unreadable.items()]
    da, db = step0_offset
    by_round: dict[Key, dict[int, FileSet]] = defaultdict(dict)
    for (step, a, b), fs in files.items():
        key = (a + da, b + db) if step == 0 else (a, b)
        if step == 0 and not _fits_int64(*key):  # other keys are their names' counters, checked already
            skipped.append(Skipped(_base_name(fs.data), f"step-0 offset {step0_offset} moves its counters outside the int64 range", (fs.data,)))
            continue
        by_round[key][step] = fs
    rounds: list[RoundFiles] = []
    for key in sorted(by_round):
        entries = by_round[key]
        steps = sorted(entries)  # the validate's step, -1, sorts first
        if steps[0] == -1:
            steps = steps[1:]
        if -1 in entries and steps and steps[-1] + 1 == len(steps) and not unreadable:
            rounds.append(RoundFiles(key, tuple(entries[s] for s in steps), entries[-1]))  # the common case
            continue
        paths = tuple(entries[s].data for s in sorted(entries))
        name = f"round {key[0]}_{key[1]}"
        bad = [p for fs in entries.values() for p in (fs.data, fs.scores, fs.parents) if p is not None and p in unreadable]
        if bad:
            skipped.append(Skipped(name, "; ".join(f"{_base_name(p)} {unreadable[p]}" for p in bad), paths))
            continue
        if -1 not in entries:
            skipped.append(Skipped(name, "draft files without validate_%d_%d" % key, paths))
            continue
        if not steps:
            skipped.append(Skipped(name, "validate file without any draft_step file", paths))
            continue
        gaps = steps[-1] + 1 - len(steps)  # steps are distinct, so this counts the missing ones
        if gaps:
            # Name the first few only: a file called draft_step_1000000000_... must not make a
            # billion-entry list.
            missing = [s for s in range(min(steps[-1], len(steps) + _NAMED_GAPS)) if s not in entries][:_NAMED_GAPS]
            want = ", ".join(
                f"draft_step_{s}_{key[0] - da}_{key[1] - db}" if s == 0 else f"draft_step_{s}_{key[0]}_{key[1]}"
                for s in missing
            )
            more = f" and {gaps - len(missing)} more" if gaps > len(missing) else ""
            skipped.append(Skipped(name, f"missing {want}{more}", paths))
            continue
        rounds.append(RoundFiles(key, tuple(entries[s] for s in steps), entries[-1]))
    return Grouping(tuple(rounds), tuple(skipped), tuple(sorted(by_round)))


def _group_complete(entries: list[tuple[str, str]], step0_offset: tuple[int, int]) -> Grouping | None:
    """_group's result when every dump file is a plain data file of a complete round, else None.

    The common directory, grouped with one regex pass and a few array operations instead of
    Python work per file. Anything else (companions, duplicates, long counters, an incomplete
    round, a name with a newline) returns None, and _group does the general work.
    """
    text = "\n".join(name for name, _ in entries)
    if text.count("\n") != len(entries) - 1:
        return None  # a name holds a newline: lines would not be names
    rows = _LINE.findall(text)  # one tuple of groups per name, in order
    if len(rows) != len(entries):
        return None
    step_text, _, a_text, b_text, companion, ext, other = (list(col) for col in zip(*rows))
    if any(companion) or not set(map(str.lower, ext)) <= set(DATA_EXTS):
        return None
    skipped: list[Skipped] = []
    if any(other):  # names that are no dump files (config.json, ...): listed unless side files
        keep = [not o for o in other]
        for i in np.flatnonzero(~np.asarray(keep, dtype=bool)).tolist():
            skipped += _stray(*entries[i])
        step_text, a_text, b_text = (list(compress(col, keep)) for col in (step_text, a_text, b_text))
        entries = list(compress(entries, keep))
    if not entries or max(map(len, step_text)) > _SAFE_DIGITS or max(map(len, a_text)) > _SAFE_DIGITS or max(map(len, b_text)) > _SAFE_DIGITS:
        return None
    count = len(entries)
    step = np.asarray([int(t) if t else -1 for t in step_text], dtype=np.int64)  # [F] the validate's step is -1
    a = np.fromiter(map(int, a_text), dtype=np.int64, count=count)  # [F]
    b = np.fromiter(map(int, b_text), dtype=np.int64, count=count)  # [F]
    da, db = step0_offset
    first = step == 0
    if first.any() and not (
        _fits_int64(da, db) and _fits_int64(int(a[first].min()) + da, int(a[first].max()) + da, int(b[first].min()) + db, int(b[first].max()) + db)
    ):
        return None  # _group names the files whose keys leave int64
    ka = np.where(first, a + da, a) if first.any() else a
    kb = np.where(first, b + db, b) if first.any() else b
    order = np.lexsort((step, kb, ka))  # by round key, then the validate (-1) and steps 0, 1, ...
    ka, kb, step = ka[order], kb[order], step[order]
    new_round = np.concatenate(([True], (ka[1:] != ka[:-1]) | (kb[1:] != kb[:-1])))
    starts = np.flatnonzero(new_round)  # [rounds]
    sizes = np.diff(np.append(starts, count))  # [rounds] files per round
    if not (step == np.arange(count) - np.repeat(starts, sizes) - 1).all() or (sizes < 2).any():
        return None  # a duplicate, a missing validate or step, or a validate alone
    paths = [entries[i][1] for i in order.tolist()]
    rounds = []
    bounds = np.append(starts, count).tolist()
    for lo, hi, key_a, key_b in zip(bounds[:-1], bounds[1:], ka[starts].tolist(), kb[starts].tolist()):
        rounds.append(RoundFiles((key_a, key_b), tuple(map(FileSet, paths[lo + 1 : hi])), FileSet(paths[lo])))
    return Grouping(tuple(rounds), tuple(skipped), tuple(rf.key for rf in rounds))


def group_directory(directory: str | Path, step0_offset: tuple[int, int] = (1, 1)) -> Grouping:
    """Group the files directly inside ``directory`` (not recursive).

    Entries that are not regular files are ignored unless named like a dump file: then they are
    listed, with their rounds (see the module docstring). Nothing here opens a file.
    """
    directory = Path(directory)
    prefix = _child_prefix(directory)
    names: list[str] = []
    unreadable: dict[str, str] = {}
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                try:
                    is_file = entry.is_file()  # follows symlinks; no open
                except OSError:
                    is_file = False
                if is_file:
                    names.append(entry.name)
                elif is_dump_name(entry.name):
                    names.append(entry.name)
                    unreadable[prefix + entry.name] = not_regular_reason(Path(prefix + entry.name)) or "changed while the directory was listed"
    except OSError as exc:
        raise DumpError(directory, f"cannot list the directory: {exc.strerror or exc}") from None
    names.sort()  # one directory: name order is the paths' order
    entries = [(name, prefix + name) for name in names]
    if unreadable:
        unreadable = {p: unreadable[p] for _, p in entries if p in unreadable}
    return _group(entries, step0_offset, unreadable)


def _child_prefix(directory: Path) -> str:
    """What str(directory / name) puts before ``name``: "" for ".", "/" for the root, else "dir/"."""
    text = str(directory)
    if text == ".":
        return ""
    return text if text.endswith(os.sep) else text + os.sep
