"""Group a dump directory's files into rounds by name; list every file that fits no round.

Names (replay.io.dumpnames): ``draft_step_{i}_{a}_{b}`` and ``validate_{a}_{b}``, optionally with a
data extension and with ``.scores`` / ``.parents`` companions (``draft_step_1_124_140.scores.txt``). A round is keyed by
its validate file's ``(a, b)``. Draft steps ``i >= 1`` carry the round's key; step 0 is named
``step0_offset`` positions earlier, so ``draft_step_0_123_139`` belongs to round ``(124, 140)`` by
default; which offset is used: replay.io.step0.

A file named nearly like a dump file is listed with the name it was probably meant to have
(replay.io.near_miss); replay.io.skipfold lists each such mistake once.

Only regular files (or symlinks to them) are dump files. An entry named like one that is not (a
directory, a FIFO, a device, a broken symlink) is listed with the reason, and the round it belongs
to is skipped: it must not replay as if complete without that file. Such entries are never opened.
Every entry the grouping cannot use is a replay.io.skipped.Skipped.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from replay.util.bounded import not_regular_reason
from replay.util.errors import DumpError, printable
from replay.util.gcpause import collection_paused
from replay.util.words import counted, listed, round_name

from .dumpnames import (
    COMPANION_KIND,
    COMPANIONS,
    DUMP_NAME,
    SAFE_DIGITS,
    Key,
    MatrixKey,
    base_name,
    fits_int64,
    is_dump_name,
    is_side_file,
    matrix_name,
    matrix_of,
    name_columns,
    pair_files,
    takes_ext,
    unread_ext,
)
from .formats.matrix_io import DATA_EXTS
from .near_miss import near_miss
from .skipfold import (
    DUPLICATE_REASON,
    EXT_REASON,
    NO_DRAFTS_REASON,
    ORPHAN_REASON,
    OTHER_OFFSET_REASON,
    OWN_KEY_HINT,
    OWN_KEY_REASON,
    STEP0_HERE,
    STRAY_REASON,
    companions_words,
    fold_duplicates,
    fold_near_misses,
    fold_own_key,
    lost_last_steps,
)
from .skipped import Skipped, round_entry
from .step0 import OFFSET_DEFAULT, OFFSET_DETECTED, Step0Check, format_offset, offset_and_source, step0_check

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
class Grouping:
    rounds: tuple[RoundFiles, ...]  # sorted by key
    skipped: tuple[Skipped, ...]
    keys: tuple[Key, ...] = ()  # every round key the names form, complete or not, sorted
    step0: Step0Check = Step0Check()  # the offset used and what the names say about it

    @property
    def step0_offset(self) -> tuple[int, int]:
        return self.step0.offset


def _stray(name: str, path: str) -> list[Skipped]:
    """The skip entry of a file that is no dump matrix: none for side files and hidden files."""
    if is_side_file(name):
        return []
    ext, guess = unread_ext(name), near_miss(name)
    if ext is not None:  # the name is right, the extension is not one the readers take
        why = EXT_REASON.format(ext=printable(ext))
        meant = matrix_of(guess)
        if meant is not None and meant[1]:  # a companion with a typo (.score), not a matrix
            kind = COMPANIONS[meant[1] - 1][1:]
            return [Skipped(printable(name), f"{why}; did you mean {guess}, the {kind} companion?", (path,))]
        exts = ", ".join(e for e in DATA_EXTS if e)
        return [Skipped(printable(name), f"{why} (dump files have none, or {exts})", (path,))]
    hint = f"; did you mean {guess}?" if guess is not None else ""
    return [Skipped(printable(name), STRAY_REASON + hint, (path,))]


def _duplicates(files: Sequence[str], companions: Mapping[str, list[str]]) -> Skipped:
    """One entry for data files that hold the same matrix, naming each (the user keeps one) and
    their companions, which are not listed again as companions "without their data file": each
    mistake is listed once. The names go in ``what``, not the reason, so that a long listing still
    folds by reason (print_skipped)."""
    names = [base_name(p) for p in files]
    what = listed(names)
    comp = [p for ps in companions.values() for p in ps]
    what += companions_words([base_name(p) for p in comp], len(files))  # of the matrix both files hold
    return Skipped(printable(what), f"{len(files)}{DUPLICATE_REASON}", (*files, *comp))


def _companion_clash(data: str, kinds: Mapping[str, list[str]]) -> Skipped | None:
    """Why a matrix with two companions of one kind (``.scores`` and ``.scores.npy``) cannot be read,
    naming them all (which one the engine wrote is unknown), its ``what`` the data file and its paths
    those companions; None when each kind has one companion at most."""
    clashes = [(kind, paths) for kind, paths in kinds.items() if len(paths) > 1]
    if not clashes:
        return None
    told = []
    for kind, paths in clashes:
        names = [printable(base_name(p)) for p in paths]
        count = "two" if len(paths) == 2 else str(len(paths))
        told.append(
            f"{count} sources of {kind} for {printable(base_name(data))}: the companions {listed(names)}; keep one"
        )
    return Skipped(base_name(data), "; ".join(told), tuple(p for _, paths in clashes for p in paths))


def _logical_files(
    entries: Iterable[tuple[str, str]], unreadable: Container[str] = ()
) -> tuple[dict[MatrixKey, FileSet], list[Skipped], dict[str, Skipped]]:
    """Map (kind, step, a, b) → FileSet, reporting duplicates and stray files.

    entries: (file name, its path) in path order; unreadable: paths that are no regular file (a
    directory named like a dump file): beside a readable file of the same matrix they are no
    duplicate of it, and are listed on their own (_assemble). The third result: data path →
    why its matrix cannot be read (_companion_clash); its FileSet leaves the clashing companions
    out, and its round is skipped with that reason (_assemble).
    """
    skipped: list[Skipped] = []
    keys: list[MatrixKey] = []  # of the dump files, then their kinds and paths
    kinds: list[int] = []
    paths: list[str] = []
    match = DUMP_NAME.match
    for name, path in entries:
        m = match(name)
        if m:
            step_text, validate, a, b, companion, ext = m.groups()
        if not m or not takes_ext(ext):
            skipped += _stray(name, path)
            continue
        lkey = (-1 if validate else int(step_text), int(a), int(b))
        if (
            len(a) > SAFE_DIGITS or len(b) > SAFE_DIGITS or (step_text and len(step_text) > SAFE_DIGITS)
        ) and not fits_int64(*lkey):
            skipped.append(Skipped(name, "step or counters outside the int64 range", (path,)))
            continue
        keys.append(lkey)
        kinds.append(COMPANION_KIND[companion])
        paths.append(path)
    columns = np.asarray(keys, dtype=np.int64).reshape(-1, 3)  # [F, 3] step, a, b
    kind = np.asarray(kinds, dtype=np.int64)  # [F]
    matrices = pair_files(columns[:, 0], columns[:, 1], columns[:, 2], kind).matrices()
    # Listed as the names first show each matrix: by its first data file, an orphan by its first companion.
    with_data = sorted((m for m in matrices if kinds[m[0]] == 0), key=lambda m: min(i for i in m if kinds[i] == 0))
    out: dict[MatrixKey, FileSet] = {}
    clashes: dict[str, Skipped] = {}
    for matrix in with_data:
        files = [paths[i] for i in matrix if kinds[i] == 0]
        comp = _by_kind([i for i in matrix if kinds[i]], kinds, paths)
        readable = [p for p in files if p not in unreadable]
        if readable and len(readable) < len(files):
            files = readable
        if len(files) > 1:
            skipped.append(_duplicates(files, comp))
            continue
        if not comp:  # the common case: a data file alone
            out[keys[matrix[0]]] = FileSet(files[0])
            continue
        clash = _companion_clash(files[0], comp)
        if clash is not None:
            clashes[files[0]] = clash
        # Two or more companions of one kind are left out: the round is skipped, none of them is read.
        kept = {kind: ps[0] for kind, ps in comp.items() if len(ps) == 1}
        out[keys[matrix[0]]] = FileSet(files[0], kept.get("scores"), kept.get("parents"))
    for matrix in sorted((m for m in matrices if kinds[m[0]] != 0), key=min):
        for ps in _by_kind(matrix, kinds, paths).values():
            skipped += [Skipped(base_name(p), ORPHAN_REASON, (p,)) for p in ps]
    return out, skipped, clashes


def _by_kind(companions: list[int], kinds: Sequence[int], paths: Sequence[str]) -> dict[str, list[str]]:
    """A matrix's companions (indices into kinds and paths) by kind word ("scores"), the kinds in the
    order the names first show them, each kind's paths in the order given."""
    groups: dict[int, list[int]] = defaultdict(list)
    for i in companions:
        groups[kinds[i]].append(i)
    return {
        COMPANIONS[k - 1][1:]: [paths[i] for i in sorted(groups[k])]
        for k in sorted(groups, key=lambda k: min(groups[k]))
    }


def _group_general(
    entries: list[tuple[str, str]],
    step0_offset: tuple[int, int],
    source: str,
    unreadable: Mapping[str, str],
    gamma: int | None,
) -> Grouping:
    """Group (name, path) entries, in path order, into rounds by name, file by file, every mistake
    listed; step0_offset and source as offset_and_source gives them; unreadable: path → why ("is a
    directory, not a regular file"), in path order: each is listed, and so is its round, unread.
    gamma: the draft steps a round of the replayed config has (None: not known), so that a stray
    beyond them names no lost last step."""
    files, skipped, clashes = _logical_files(entries, unreadable)
    check = step0_check(files, step0_offset, source)
    if source == OFFSET_DEFAULT and check.other_fits and check.other is not None:
        # The default leaves step-0 files out and the names pair one to one at another offset.
        check = Step0Check(
            check.other,
            OFFSET_DETECTED,
            check.rounds,
            check.step0_files,
            check.rounds,
            step0_offset,
            check.grouped,
            check.example,
        )
    return _assemble(files, skipped, check, unreadable, clashes, gamma)


def _assemble(
    files: dict[MatrixKey, FileSet],
    skipped: list[Skipped],
    check: Step0Check,
    unreadable: Mapping[str, str],
    clashes: Mapping[str, Skipped],
    gamma: int | None,
) -> Grouping:
    """Rounds from the logical files at ``check.offset``; every round that is not complete, or that
    holds a matrix in ``clashes`` (data path → why it cannot be read), is listed."""
    step0_offset = check.offset
    da, db = step0_offset
    alt = check.hinted()  # the one other offset a skip entry names, or None
    at_unreadable = len(skipped)  # unreadable entries that no round's entry names are listed here
    told: set[str] = set()
    by_round: dict[Key, dict[int, FileSet]] = defaultdict(dict)
    for (step, a, b), fs in files.items():
        key = (a + da, b + db) if step == 0 else (a, b)
        if step == 0 and not fits_int64(*key):  # other keys are their names' counters, checked already
            skipped.append(
                Skipped(
                    base_name(fs.data),
                    f"step-0 offset {step0_offset} moves its counters outside the int64 range",
                    (fs.data,),
                )
            )
            continue
        by_round[key][step] = fs
    rounds: list[RoundFiles] = []
    keys: list[Key] = []  # the round keys: a lone step-0 file of a round at ``alt`` forms none
    for key in sorted(by_round):
        entries = by_round[key]
        if _round_at(key, entries, by_round, step0_offset, alt) is None:
            keys.append(key)
        steps = sorted(entries)  # the validate's step, -1, sorts first
        if steps[0] == -1:
            steps = steps[1:]
        if -1 in entries and steps and steps[-1] + 1 == len(steps) and not unreadable and not clashes:
            rounds.append(RoundFiles(key, tuple(entries[s] for s in steps), entries[-1]))  # the common case
            continue
        paths = tuple(entries[s].data for s in sorted(entries))
        name = round_entry(round_name(key))
        bad = [
            p for fs in entries.values() for p in (fs.data, fs.scores, fs.parents) if p is not None and p in unreadable
        ]
        if bad:
            skipped.append(Skipped(name, "; ".join(f"{p}: {unreadable[p]}" for p in bad), paths))
            told.update(bad)
            continue
        clash = [clashes[entries[s].data] for s in sorted(entries) if entries[s].data in clashes]
        what, why = _incomplete(name, key, entries, by_round, (da, db), alt)
        if why is None and not clash:
            rounds.append(RoundFiles(key, tuple(entries[s] for s in steps), entries[-1]))
            continue
        reasons = ([] if why is None else [why]) + [c.reason for c in clash]
        skipped.append(Skipped(what, "; ".join(reasons), paths + tuple(p for c in clash for p in c.paths)))
    rounds = lost_last_steps(rounds, skipped, gamma)
    # An unreadable entry is named in its round's entry (counted once); one in no round is listed alone.
    skipped[at_unreadable:at_unreadable] = [
        Skipped(base_name(p), why, (p,)) for p, why in unreadable.items() if p not in told
    ]
    folded = fold_own_key(skipped)
    if len(folded) < len(skipped):  # the warning's left-out step-0 files then outnumber the file entries
        check = replace(check, cited=len(skipped) - len(folded))
    skipped = fold_near_misses(fold_duplicates(folded, step0_offset), files, step0_offset)
    return Grouping(tuple(rounds), tuple(skipped), tuple(keys), check)


def _group_names(
    names: list[str], paths: list[str] | str, step0_offset: tuple[int, int], source: str
) -> Grouping | None:
    """The rounds of files ``names`` when every dump file is a plain data file of a complete round,
    else None. One regex pass and a few array operations instead of Python work per file,
    companions paired by one sort; anything else (duplicates, an orphan companion or two of one kind,
    long counters, an incomplete round, a name with a newline) returns None for _group_general.

    ``names`` in any order (the result does not depend on it); ``paths``:
    their paths, or the prefix that makes each one's path (prefix + name), so that a listing builds
    the paths of the files it uses only."""

    def paths_at(index: np.ndarray) -> list[str]:  # [N] int64 places in names
        at = index.tolist()
        return [paths + names[i] for i in at] if isinstance(paths, str) else [paths[i] for i in at]

    text = "\n".join(names)
    if text.count("\n") != len(names) - 1:
        return None  # a name holds a newline: lines would not be names
    columns = name_columns(names, text)
    del text
    if columns is None:
        return None
    dump = columns.dump  # [N] the dump files' names
    skipped: list[Skipped] = []
    if not dump.all():  # names that are no dump files (config.json, ...): listed unless side files
        strays = np.flatnonzero(~dump)
        if isinstance(paths, str):  # a listing: in name order, as the paths go (given paths are in order)
            strays = strays[np.argsort(np.asarray(names, dtype=object)[strays], kind="stable")]
        for name_at, path in zip(strays.tolist(), paths_at(strays)):
            skipped += _stray(names[name_at], path)
        if any(near_miss(base_name(p)) is not None for s in skipped for p in s.paths):
            return None  # a near-miss may be a round's lost step (_lost_last_steps): the general work checks
    if not dump.any():
        return None
    index = np.flatnonzero(dump)  # [F] the dump files' places in names
    step, a, b, kind = columns.step, columns.a, columns.b, columns.kind  # [F] the validate's step is -1
    count = len(names)
    scores_of = parents_of = None  # [data files] each one's companion's place in names, -1: none
    if kind.any():
        pairs = pair_files(step, a, b, kind)
        if not pairs.readable():
            return None  # an orphan companion, a duplicate or two companions of one kind
        lead = pairs.order[np.flatnonzero(pairs.first)[np.cumsum(pairs.first) - 1]]  # [F] sorted file -> its data file
        data = kind == 0
        scores_of, parents_of = np.full((2, count), -1, dtype=np.int64)
        for c, of in ((1, scores_of), (2, parents_of)):
            of[index[lead[pairs.kind == c]]] = index[pairs.order[pairs.kind == c]]
        index, step, a, b = index[data], step[data], a[data], b[data]
    return _rounds_of(index, step, a, b, paths_at, scores_of, parents_of, skipped, step0_offset, source)


def _rounds_of(
    index: np.ndarray,
    step: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    paths_at: Callable[[np.ndarray], list[str]],
    scores_of: np.ndarray | None,
    parents_of: np.ndarray | None,
    skipped: list[Skipped],
    step0_offset: tuple[int, int],
    source: str,
) -> Grouping | None:
    """_group_names' rounds of its data files (index: [F] int64 their places in its names; step, a, b:
    [F] int64 their names' counters; scores_of, parents_of: [names] int64 each one's companion, -1
    none), None when some round is not complete."""
    count = index.shape[0]
    da, db = step0_offset
    first = step == 0
    if first.any() and not (
        fits_int64(da, db)
        and fits_int64(
            int(a[first].min()) + da, int(a[first].max()) + da, int(b[first].min()) + db, int(b[first].max()) + db
        )
    ):
        return None  # _group_general names the files whose keys leave int64
    ka = np.where(first, a + da, a) if first.any() else a
    kb = np.where(first, b + db, b) if first.any() else b
    order = np.lexsort((step, kb, ka))  # by round key, then the validate (-1) and steps 0, 1, ...
    ka, kb, step = ka[order], kb[order], step[order]
    new_round = np.concatenate(([True], (ka[1:] != ka[:-1]) | (kb[1:] != kb[:-1])))
    starts = np.flatnonzero(new_round)  # [rounds]
    sizes = np.diff(np.append(starts, count))  # [rounds] files per round
    if not (step == np.arange(count) - np.repeat(starts, sizes) - 1).all() or (sizes < 2).any():
        return None  # a duplicate, a missing validate or step, or a validate alone
    at = index[order]
    paths = paths_at(at)
    if scores_of is None or parents_of is None:
        sets = list(map(FileSet, paths))
    else:
        sets = list(
            map(FileSet, paths, _optional_paths(scores_of[at], paths_at), _optional_paths(parents_of[at], paths_at))
        )
    rounds = []
    bounds = np.append(starts, count).tolist()
    for lo, hi, key_a, key_b in zip(bounds[:-1], bounds[1:], ka[starts].tolist(), kb[starts].tolist()):
        rounds.append(RoundFiles((key_a, key_b), tuple(sets[lo + 1 : hi]), sets[lo]))
    check = Step0Check(step0_offset, source, len(rounds), len(rounds), len(rounds))  # every round has its step 0
    return Grouping(tuple(rounds), tuple(skipped), tuple(rf.key for rf in rounds), check)


def _optional_paths(index: np.ndarray, paths_at: Callable[[np.ndarray], list[str]]) -> list[str | None]:
    """The paths of files ``index`` ([N] int64 places in the names, -1: none, as None)."""
    there = index >= 0
    if there.all():
        return list(paths_at(index))
    out: list[str | None] = [None] * index.shape[0]
    for i, path in zip(np.flatnonzero(there).tolist(), paths_at(index[there])):
        out[i] = path
    return out


@collection_paused()
def group_directory(
    directory: str | Path,
    step0_offset: tuple[int, int] | None = None,
    source: str | None = None,
    gamma: int | None = None,
) -> Grouping:
    """Group the files directly inside ``directory`` (not recursive) into rounds by name.

    step0_offset: None lets the names decide between the default and the offset they show
    (Step0Check); a stated offset is used as stated, ``source`` naming who stated it.
    Entries that are not regular files are ignored unless named like a dump file: then they are
    listed, with their rounds (see the module docstring). gamma as _group_general takes it. Nothing
    here opens a file.
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
                    unreadable[prefix + entry.name] = (
                        not_regular_reason(Path(prefix + entry.name)) or "changed while the directory was listed"
                    )
    except OSError as exc:
        raise DumpError(directory, f"cannot list the directory: {exc.strerror or exc}") from None
    offset, stated_by = offset_and_source(step0_offset, source)
    if not unreadable:  # the common directory: no sort, and paths made for the files used only
        simple = _group_names(names, prefix, offset, stated_by)
        if simple is not None:
            return simple
    names.sort()  # one directory: name order is the paths' order
    entries = [(name, prefix + name) for name in names]
    if unreadable:
        unreadable = {p: unreadable[p] for _, p in entries if p in unreadable}
    return _group_general(entries, offset, stated_by, unreadable, gamma)


def _child_prefix(directory: Path) -> str:
    """What str(directory / name) puts before ``name``: "" for ".", "/" for the root, else "dir/"."""
    text = str(directory)
    if text == ".":
        return ""
    return text if text.endswith(os.sep) else text + os.sep


def _incomplete(
    name: str,
    key: Key,
    entries: dict[int, FileSet],
    by_round: dict[Key, dict[int, FileSet]],
    offset: tuple[int, int],
    alt: tuple[int, int] | None,
) -> tuple[str, str | None]:
    """(the entry's what, why round ``key`` lacks a file), why None when its validate and every draft
    step up to its last are there. alt: Step0Check.hinted, the one other offset entries name."""
    if -1 not in entries:
        return _without_validate(name, key, entries, by_round, offset, alt)
    steps = sorted(s for s in entries if s != -1)
    if not steps:
        return name, NO_DRAFTS_REASON + _step0_hint(key, by_round, offset, alt)
    gaps = steps[-1] + 1 - len(steps)  # steps are distinct, so this counts the missing ones
    if not gaps:
        return name, None
    # Name the first few only: a file called draft_step_1000000000_... must not make a billion-entry list.
    da, db = offset
    missing = [s for s in range(min(steps[-1], len(steps) + _NAMED_GAPS)) if s not in entries][:_NAMED_GAPS]
    want = ", ".join(matrix_name((s, key[0] - da, key[1] - db) if s == 0 else (s, *key)) for s in missing)
    more = f" and {gaps - len(missing)} more" if gaps > len(missing) else ""
    return name, f"missing {want}{more}{_step0_hint(key, by_round, offset, alt)}"


def _round_at(
    key: Key,
    entries: dict[int, FileSet],
    by_round: dict[Key, dict[int, FileSet]],
    offset: tuple[int, int],
    alt: tuple[int, int] | None,
) -> Key | None:
    """The round whose step 0 a lone step-0 file (the only file at ``key``) is at offset ``alt``,
    when that round has a validate file: then the file is a file of that round, not a round of its
    own; else None."""
    if alt is None or set(entries) != {0}:
        return None
    own = (key[0] - offset[0] + alt[0], key[1] - offset[1] + alt[1])
    return own if -1 in by_round.get(own, {}) else None


def _without_validate(
    name: str,
    key: Key,
    entries: dict[int, FileSet],
    by_round: dict[Key, dict[int, FileSet]],
    offset: tuple[int, int],
    alt: tuple[int, int] | None,
) -> tuple[str, str]:
    """Why draft files make no round. A lone step-0 file that another offset (``alt``) pairs with a
    round's validate file was most likely written as that round's step 0: say so, instead of naming
    a round that exists nowhere but in the offset arithmetic."""
    own = _round_at(key, entries, by_round, offset, alt)
    if own is None or alt is None:
        return name, f"draft files without {matrix_name((-1, *key))}"
    file = base_name(entries[0].data)
    if alt == (0, 0):
        return file, (
            f"{OWN_KEY_REASON} {round_name(own)}'s own key: step 0 is named {_offset_words(offset)} "
            f"before its round, so it pairs with no validate file (--step0-offset 0 reads every "
            "step 0 so)"
        )
    return file, (
        f"{OTHER_OFFSET_REASON} {round_name(own)} at step-0 offset {format_offset(alt)}: offset "
        f"{format_offset(offset)} pairs it with no validate file"
    )


def _offset_words(offset: tuple[int, int]) -> str:
    """How far before its round step 0 is named: "1 position", or "2 and 1 positions" (a's, b's)."""
    if offset[0] == offset[1]:
        return counted(offset[0], "position")
    return f"{offset[0]} and {offset[1]} positions (A, B)"


def _step0_hint(
    key: Key, by_round: dict[Key, dict[int, FileSet]], offset: tuple[int, int], alt: tuple[int, int] | None
) -> str:
    """The hint of a round missing its step-0 file while a lone step-0 file is its step 0 at offset
    ``alt`` (_round_at): " (draft_step_0_99_115 is here, ...)"."""
    if alt is None:
        return ""
    name = (key[0] - alt[0], key[1] - alt[1])  # the counters of its step-0 file's name at alt
    lone = (name[0] + offset[0], name[1] + offset[1])  # where the used offset puts that file
    if set(by_round.get(lone, {})) != {0}:
        return ""
    if alt == (0, 0):
        return f" ({matrix_name((0, *name))}{OWN_KEY_HINT})"
    x = format_offset(alt)
    return f" ({matrix_name((0, *name))}{STEP0_HERE} step-0 offset {x} pairs it with this round: see --step0-offset)"
