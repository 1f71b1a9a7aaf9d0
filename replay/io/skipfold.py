"""The grouping's skip entries folded so that each mistake is listed once: a file that explains
why a round is incomplete (a duplicate of its matrix, a near-miss name of a file it lacks, a
companion whose data file is not there) is named inside that round's entry, and a companion goes
with its misnamed data file, not in an entry of its own (docs/dump-format.md).

The reasons of the grouping's entries are here too: the folding recognises entries by them; and
the message of a ``--round`` the dump cannot replay (no_such_round), which quotes the round's entry;
and the rounds whose last draft step strays name (lost_last_steps).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Container, Iterable, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from replay.util.errors import printable
from replay.util.words import listed, round_name

from .dumpnames import COMPANION_KIND, Key, MatrixKey, base_name, matrix_name, matrix_of
from .near_miss import near_miss
from .skipped import Skipped, round_entry

if TYPE_CHECKING:  # the grouping imports this module
    from .grouping import RoundFiles

STRAY_REASON = "name matches neither draft_step_I_A_B nor validate_A_B"
EXT_REASON = "extension {ext} is not read"
ORPHAN_REASON = "companion file without its data file"
DUPLICATE_REASON = " files hold the same matrix; keep one"  # after the count
NO_DRAFTS_REASON = "validate file without any draft_step file"
OWN_KEY_REASON = "a step-0 file named with round"  # then "A_B's own key: ..."
OTHER_OFFSET_REASON = "the step-0 file of round"  # then "A_B at step-0 offset N: ..."
STEP0_HERE = " is here,"  # after the file's name, in the entry of the round it is step 0 of
OWN_KEY_HINT = f"{STEP0_HERE} named with the round's own key: see --step0-offset"  # after the file's name


def is_stray(s: Skipped) -> bool:
    """An entry of a file whose name is no dump file's (or whose extension the readers do not take),
    its first path that file's (the others: its companions, _with_companions)."""
    return bool(s.paths) and s.reason.startswith((STRAY_REASON, EXT_REASON.split("{")[0]))


def is_duplicate(s: Skipped) -> bool:
    """An entry of files that hold the same matrix (grouping._duplicates), its first path the first file."""
    return s.reason.endswith(DUPLICATE_REASON) and bool(s.paths) and not s.is_round


def with_paths(s: Skipped) -> str:
    """``s.what`` (file names) with each of its files named by path: an entry whose reason begins with
    files ("validate_10_20 and validate_10_20.txt: 2 files hold ...", a file read: "DIR/validate_10_20:
    ...") names every file by path, as the readers' entries do; the grouping's own sentences about
    names ("missing X", "X is here") keep the names, the directory being the DUMP's."""
    text = s.what
    for path in s.paths:
        name = re.escape(printable(base_name(path)))
        text = re.sub(rf"(?<![\w/.-]){name}(?![\w.-])", lambda _: printable(path), text, count=1)
    return text


def _round_of(matrix: MatrixKey, offset: tuple[int, int]) -> str:
    step, a, b = matrix
    return round_entry(round_name((a + offset[0], b + offset[1]) if step == 0 else (a, b)))


def fold_duplicates(skipped: list[Skipped], offset: tuple[int, int]) -> list[Skipped]:
    """Duplicates of a matrix (grouping._duplicates) are named in the entry of the round that lacks it,
    not in one of their own: the round's entry alone would call a file that is there twice missing."""
    at = {s.what: i for i, s in enumerate(skipped) if s.is_round}
    drop: set[int] = set()
    for i, s in enumerate(list(skipped)):  # a snapshot: round entries are rewritten below
        found = matrix_of(base_name(s.paths[0])) if is_duplicate(s) else None
        if found is None:
            continue
        (step, a, b), _ = found
        j = at.get(_round_of((step, a, b), offset))
        if j is None:
            continue
        matrix = matrix_name((step, a, b))
        rnd = skipped[j]
        caused = matrix in rnd.reason or (step == 0 and rnd.reason.startswith(NO_DRAFTS_REASON))
        told = f"{with_paths(s)}: {s.reason}" + ("" if caused else f"; {rnd.reason}")
        skipped[j] = Skipped(rnd.what, told, rnd.paths + s.paths)
        drop.add(i)
    return [s for i, s in enumerate(skipped) if i not in drop]


def fold_own_key(skipped: list[Skipped]) -> list[Skipped]:
    """A step-0 file that another offset pairs with a round (named with its round's own key, or
    another offset's) is named in the entry of that round, which lacks its step 0 ("missing
    draft_step_0_34_44 (draft_step_0_35_45 is here, ...)"), not in one of its own as well: one
    mistake, listed once. Alone (its round complete) it keeps its entry."""
    at = {s.what: i for i, s in enumerate(skipped) if s.is_round}
    drop: set[int] = set()
    out = list(skipped)
    for i, s in enumerate(skipped):
        prefix = next((p for p in (OWN_KEY_REASON, OTHER_OFFSET_REASON) if s.reason.startswith(p)), None)
        if prefix is None:
            continue
        own = re.split(r"['\s]", s.reason[len(prefix) :].strip(), maxsplit=1)[0]
        j = at.get(round_entry(own))
        found = matrix_of(s.what)  # the entry names the file, the round's hint its matrix
        if j is not None and found is not None and f"({matrix_name(found[0])}{STEP0_HERE}" in out[j].reason:
            out[j] = Skipped(out[j].what, out[j].reason, out[j].paths + s.paths)
            drop.add(i)
    return [s for i, s in enumerate(out) if i not in drop]


def _extra_file(s: Skipped, files: Container[MatrixKey]) -> Skipped:
    """A near-miss stray whose likely name is there too (dump_validate_10_20 beside validate_10_20)
    is an extra file, not a misnamed one: "did you mean validate_10_20?" would point the wrong way."""
    if not s.reason.startswith(STRAY_REASON) or len(s.paths) != 1:
        return s
    guess = near_miss(base_name(s.paths[0]))
    found = matrix_of(guess)
    if found is None or found[1] or found[0] not in files:
        return s
    told = f"; did you mean {guess}?"
    extra = f"; {guess} is here too, so this is an extra file (remove or move it)"
    return Skipped(s.what, s.reason.replace(told, extra), s.paths)


def companions_words(companions: Sequence[str], owners: int) -> str:
    """Companions named after the data file(s) they go with, saying whose they are: " (with its
    companion X)" after one file, " (with X, the companion of both)" after two files that hold the
    same matrix (" of all 3" after three); "" without companions."""
    if not companions:
        return ""
    noun = "companion" if len(companions) == 1 else "companions"
    if owners == 1:
        return f" (with its {noun} {listed(companions)})"
    return f" (with {listed(companions)}, the {noun} of {'both' if owners == 2 else f'all {owners}'})"


def _with_companions(skipped: list[Skipped]) -> list[Skipped]:
    """A companion without its data file (validate_10_20.scores) whose data file is there under a
    near-miss name (validation_10_20) is named in that file's entry: "validation_10_20 (with its
    companion validate_10_20.scores)", as duplicates name theirs."""
    orphans: dict[MatrixKey, list[int]] = defaultdict(list)
    for i, s in enumerate(skipped):
        found = matrix_of(base_name(s.paths[0])) if s.reason == ORPHAN_REASON and len(s.paths) == 1 else None
        if found is not None:
            orphans[found[0]].append(i)
    if not orphans:
        return skipped
    drop: set[int] = set()
    out = list(skipped)
    for i, s in enumerate(skipped):
        found = matrix_of(near_miss(base_name(s.paths[0]))) if is_stray(s) and len(s.paths) == 1 else None
        if found is None or found[1] or not orphans.get(found[0]):
            continue
        mine = orphans.pop(found[0])
        names = [skipped[k].what for k in mine]
        out[i] = Skipped(
            f"{s.what}{companions_words(names, 1)}", s.reason, s.paths + tuple(skipped[k].paths[0] for k in mine)
        )
        drop.update(mine)
    return [s for i, s in enumerate(out) if i not in drop]


def fold_near_misses(skipped: list[Skipped], files: Container[MatrixKey], offset: tuple[int, int]) -> list[Skipped]:
    """A stray file whose likely name (near_miss) is a matrix missing from a listed round is named in
    that round's entry, its companions with it, not in one of its own: "validation_10_20" and "round
    10_20: draft files without validate_10_20" are one mistake, counted once. So is a companion
    whose data file the round lacks under any name ("validate_10_20.scores is here without its data
    file")."""
    skipped = _with_companions([_extra_file(s, files) for s in skipped])
    at = {s.what: i for i, s in enumerate(skipped) if s.is_round}
    if not at:
        return skipped
    folded: dict[int, list[tuple[str, int]]] = defaultdict(list)  # round entry → (the words, the entry folded)
    for i, s in enumerate(skipped):
        name = base_name(s.paths[0]) if s.paths else ""
        if is_stray(s):
            guess = near_miss(name)
            found = matrix_of(guess)
            if found is None or found[0] in files:
                continue  # that matrix is there: the stray is something else
            ext = PurePosixPath(name).suffix if not s.reason.startswith(STRAY_REASON) else ""
            shown = s.what + (f" ({EXT_REASON.format(ext=printable(ext))})" if ext else "")
            words = f"{shown} is here: did you mean {guess}?"
        elif s.reason == ORPHAN_REASON and len(s.paths) == 1:
            found = matrix_of(name)
            words = f"{s.what} is here without its data file"
        else:
            continue
        j = at.get(_round_of(found[0], offset)) if found is not None else None
        if j is not None:
            folded[j].append((words, i))
    drop = {i for entries in folded.values() for _, i in entries}
    out = []
    for i, s in enumerate(skipped):
        if i in drop:
            continue
        if i in folded:
            told = "; ".join(words for words, _ in folded[i])
            s = Skipped(
                s.what, f"{s.reason}; {told}", s.paths + tuple(p for _, k in folded[i] for p in skipped[k].paths)
            )
        out.append(s)
    return out


def misspelt_companion(entry: Skipped, data_path: str, kind: str, files: Sequence[Skipped]) -> Skipped:
    """A round's ``entry``, skipped because ``data_path`` has no ``kind`` companion ("scores",
    "parents") while the grouping listed, among ``files``, one named nearly like it
    (draft_step_0_9_19.scroes): the file's did-you-mean goes in the round's entry, which names the
    file (listed_once then drops the file's own entry): one mistake, one entry."""
    lacking = matrix_of(base_name(data_path))
    for s in files:
        guess = near_miss(base_name(s.paths[0])) if is_stray(s) else None
        if lacking is not None and matrix_of(guess) == (lacking[0], COMPANION_KIND[f".{kind}"]):
            return Skipped(
                entry.what, f"{entry.reason}; {with_paths(s)} is here: did you mean {guess}?", entry.paths + s.paths
            )
    return entry


def listed_once(files: Sequence[Skipped], rounds: Sequence[Skipped]) -> tuple[Skipped, ...]:
    """The grouping's entries (``files``) less the strays a round's entry names (misspelt_companion),
    then the rounds' entries."""
    named = {p for s in rounds for p in s.paths[1:]}
    return tuple(s for s in files if not (is_stray(s) and set(s.paths) <= named)) + tuple(rounds)


NEAREST_ROUNDS = 5  # rounds named when --round names one the dump does not have


def no_such_round(key: Key, keys: Sequence[Key] | np.ndarray, where: str, skipped: Iterable[Skipped] = ()) -> str:
    """The one message of every command's ``--round KEY`` when ``where`` cannot replay round KEY.

    ``keys``: the rounds it can replay, (a, b) pairs or a [2, N] array; ``skipped``: its skip
    entries. A round whose files are there but incomplete is named with the reason; otherwise the
    rounds nearest to KEY (smallest |Δa| + |Δb|) are listed first, so a typo shows its fix.
    """
    name = round_name(key)
    for s in skipped:
        if s.what == round_entry(name):
            return f"--round {name}: that round in {where} cannot be replayed: {s.reason}"
    arr = np.asarray(keys, dtype=np.int64)
    arr = arr.T if arr.ndim == 2 and arr.shape[0] == 2 and arr.shape[1] != 2 else arr.reshape(-1, 2)
    if not len(arr):
        return f"--round {name}: no such round in {where}, which has no round to replay"
    dist = np.abs(arr[:, 0].astype(np.float64) - key[0]) + np.abs(
        arr[:, 1].astype(np.float64) - key[1]
    )  # float: no int64 overflow
    nearest = arr[np.lexsort((arr[:, 1], arr[:, 0], dist))[:NEAREST_ROUNDS]]
    listed = ", ".join(round_name(key) for key in nearest.tolist())
    return (
        f"--round {name}: no such round in {where}; nearest of its {len(arr)} round(s): {listed} (A_B of validate_A_B)"
    )


def lost_last_steps(rounds: list[RoundFiles], skipped: list[Skipped], gamma: int | None) -> list[RoundFiles]:
    """Rounds whose next draft step is named by a stray file: a near-miss name (Draft_Step_2_10_20),
    an orphan companion (draft_step_2_10_20.scores alone) or files that hold the same matrix
    (draft_step_2_10_20 and draft_step_2_10_20.txt). Such a round lost its last step; replayed with
    the steps left it would pass as a round that stopped early. It is skipped instead, its entry
    naming the missing file and the strays (which are not listed again). A round that has ``gamma``
    draft steps lost none: a stray beyond them keeps its own entry (a companion without its data file)."""
    evidence: dict[tuple[int, int, int], list[int]] = defaultdict(list)  # the matrix strays name → their entries
    for i, s in enumerate(skipped):
        duplicate = is_duplicate(s)
        if len(s.paths) != 1 and not duplicate:
            continue
        name = base_name(s.paths[0])
        if s.reason == ORPHAN_REASON or duplicate:
            guess: str | None = name
        elif is_stray(s):
            guess = near_miss(name)
        else:
            continue
        named = matrix_of(guess)
        if named is None or named[0][0] == -1:  # step -1: a validate file
            continue
        evidence[named[0]].append(i)
    if not evidence:
        return rounds
    kept, drop = [], set()
    for r in rounds:
        n = len(r.steps)  # the step after the last one present (n >= 1: step 0 is never the lost "last")
        a, b = r.key
        strays = evidence.get((n, a, b)) if gamma is None or n < gamma else None
        if not strays:
            kept.append(r)
            continue
        drop.update(strays)
        found = ", ".join(_stray_words(skipped[i]) for i in strays)
        head = "cannot choose" if any(is_duplicate(skipped[i]) for i in strays) else "missing"
        skipped.append(
            Skipped(
                round_entry(round_name((a, b))),
                f"{head} {matrix_name((n, a, b))}: found {found}; without its last draft step the round would "
                "replay as one that stopped early",
                (*(fs.data for fs in r.steps), r.validate.data, *(p for i in strays for p in skipped[i].paths)),
            )
        )
    skipped[:] = [s for i, s in enumerate(skipped) if i not in drop]
    return kept


def _stray_words(s: Skipped) -> str:
    """How _lost_last_steps names a stray that names a round's lost last step."""
    if is_duplicate(s):
        return f"{s.what} ({s.reason})"
    name = base_name(s.paths[0])
    if s.reason == ORPHAN_REASON:
        return f"{printable(name)} (a companion without its data file)"
    return f"{printable(name)} (did you mean {near_miss(name)}?)"
