"""Names nearly like a dump file's (validation_10_20, Draft_Step_0_9_19, dump_validate_10_20,
valdiate_10_20): the name each was probably meant to have, so that a listing of skipped files,
and the error of a run without a replayable round, show the likely fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from replay.util.errors import printable

from .dumpnames import COMPANIONS, is_dump_name, takes_ext

# A name nearly like a dump file's: another word for the kind, other case, a prefix, a suffix.
_NEAR = re.compile(
    r"^(?P<prefix>(?:.*[_\-. ])?)"
    r"(?:(?P<draft>draft(?:[_\-. ]?steps?)?)[_\-. ]?(?P<step>\d+)"
    r"|(?P<validate>validat(?:e|es|ed|ion|ions)|valid|verif(?:y|ied|ication)?|val))"
    r"[_\-. ](?P<a>-?\d+)[_\-., ](?P<b>-?\d+)(?P<rest>.*)$",
    re.IGNORECASE | re.ASCII | re.DOTALL,
)


_WORD_IN = re.compile(r"[._-]([A-Za-z]+)")  # the words after a name's counters: companion, extension
COMPANION_WORDS = tuple(companion[1:] for companion in COMPANIONS)  # "scores", "parents"


_LAST_EXT = re.compile(r"(\.[A-Za-z0-9]+)$")


# A word spelt like "validate" or "draft step" but for a typo (valdiate_10_20, draft_stpe_1_9_19): the
# ratio of difflib's matching characters, high enough that other words with two numbers
# (variance_10_20, valiant_1_2) are not taken for dump names.
_WORDED = re.compile(
    r"(?P<word>[A-Za-z]{4,}(?:[_\-. ]?[A-Za-z]{3,})?)"
    r"(?:[_\-. ]?(?P<step>\d+))?[_\-. ](?P<a>-?\d+)[_\-., ](?P<b>-?\d+)",
    re.ASCII,
)


TYPO_RATIO = 0.85


def _respelt(name: str) -> str:
    """``name`` with a misspelt dump word spelt right (valdiate_10_20 → validate_10_20), the word
    starting at the name's start or after any separator (a prefix such as dump_ stays, for _NEAR to
    drop); ``name`` itself when it has none."""
    starts = [0] + [i + 1 for i, ch in enumerate(name) if ch in "_-. "]
    for start in starts:
        m = _WORDED.match(name, start)
        if m is None:
            continue
        word = re.sub(r"[_\-. ]", "", m.group("word").lower())
        target, spelt = ("draftstep", "draft_step") if m.group("step") is not None else ("validate", "validate")
        # a typo changes a letter or two, not the word's length by more than one (revalidate is a word)
        if abs(len(word) - len(target)) <= 1 and difflib.SequenceMatcher(None, word, target).ratio() >= TYPO_RATIO:
            return name[: m.start("word")] + spelt + name[m.end("word") :]
    return name


def _is_typo_of(word: str, target: str) -> bool:
    """A letter or two changed, dropped or swapped (score, socres: scores), not another word."""
    return abs(len(word) - len(target)) <= 1 and difflib.SequenceMatcher(None, word, target).ratio() >= 0.8


def _companion_in(rest: str) -> str | None:
    """The companion word ("scores", "parents") that ``rest`` (a name after its counters) spells, or
    spells with a typo (.score, .socres.npy, _parents.txt), or None."""
    for m in _WORD_IN.finditer(rest):
        word = m.group(1).lower()
        found = next((c for c in COMPANION_WORDS if _is_typo_of(word, c)), None)
        if found is not None:
            return found
    return None


def near_miss(name: str) -> str | None:
    """The dump file name ``name`` was probably meant to be, or None (a dump name, or nothing like one).

    ``validation_10_20`` → ``validate_10_20``; ``Draft_Step_0_9_19.txt`` → ``draft_step_0_9_19.txt``;
    ``dump_validate_10_20`` → ``validate_10_20``; ``validate_10_20_ids.npy`` → ``validate_10_20.npy``;
    ``valdiate_10_20`` → ``validate_10_20`` (_respelt); ``draft_step_1_10_20.socres`` →
    ``draft_step_1_10_20.scores`` (a companion's word with a typo).
    """
    if is_dump_name(name):
        return None
    m = _NEAR.match(name) or _NEAR.match(_respelt(name))
    if m is None:
        return None
    rest = m.group("rest")
    comp = _companion_in(rest)
    ext = _LAST_EXT.search(rest)
    tail = (f".{comp}" if comp else "") + (ext.group(1) if ext and takes_ext(ext.group(1)) else "")
    head = f"draft_step_{int(m.group('step'))}" if m.group("draft") else "validate"
    guess = f"{head}_{m.group('a')}_{m.group('b')}{tail}"
    return guess if guess != name and is_dump_name(guess) else None


def near_miss_names_hint(names: Iterable[str]) -> str:
    """near_miss_hint over file names (a directory's listing)."""
    found: list[tuple[str, str]] = []
    for name in names:
        guess = near_miss(name)
        if guess is not None:
            found.append((name, guess))
    if not found:
        return ""
    name, guess = found[0]
    more = f" and {len(found) - 1} more file(s) named like it" if len(found) > 1 else ""
    return f"; did you mean {guess} (for {printable(name)}{more})?"
