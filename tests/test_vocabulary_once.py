"""Each word of the vocabulary is defined once and imported: the library holds no copy.

Greps replay/ and analysis/ for the literals of each word outside the one module that defines it.
A new copy (a layout spelled as a string, the chunk size written again, a second IN/OUT/MAYBE)
fails here, naming the file and line: import the name from its home instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("replay", "analysis")

VOCAB = "replay/core/vocab.py"
SUBTREE = "analysis/compare/subtree.py"
CODES = "replay/engine/batch/codes.py"

_LAYOUT = r"[\"'](?:parents|all)[\"']"
_SELECTION_WORD = r"[\"'](?:rank_major_fallback|path_probability|recorded_order)[\"']"
_OUTCOME_WORD = r"[\"'](?:leaf_bonus|no_target_row|mismatch)[\"']"

# (what, pattern, the one file allowed to hold it)
RULES = [
    ("layout names", rf"^LAYOUT\w*\s*=.*{_LAYOUT}|^LAYOUT\w*\s*=\s*\(", VOCAB),
    ("a layout compared with a literal", rf"layout\w*\s*(?:==|!=|not in|in)\s*\(?\s*{_LAYOUT}", VOCAB),
    ("a tuple of layout literals", rf"\(\s*{_LAYOUT}\s*,\s*{_LAYOUT}\s*\)", VOCAB),
    ("the chunk / block size", r"\b16384\b", VOCAB),
    ("selection words", _SELECTION_WORD, VOCAB),
    ("stop and bonus words", _OUTCOME_WORD, VOCAB),
    (
        "a substring match on 'fallback' (compare the selection code SEL_FALLBACK, replay/engine/batch/codes.py)",
        r"[\"']fallback[\"']",
        VOCAB,
    ),
    ("the root's rank sentinel NO_RANK", r"^NO_RANK\s*=", VOCAB),
    ("subtree outcomes IN / OUT / MAYBE", r"^\s*(?:IN|OUT|MAYBE)\b[\w\s,]*=", SUBTREE),
    ("stop and bonus codes", r"^\s*(?:class\s+(?:StopCode|BonusCode)\b|BONUS_\w*\s*(?:,\s*\w+\s*)*=\s*\d)", CODES),
    ("stop and bonus codes by arithmetic on positions", r"np\.uint8\(\d\)\s*-", None),
]


def _library_lines():
    for top in LIBRARY:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]  # comments and docstring prose may name the words
                if code.strip():
                    yield rel, no, code


@pytest.mark.parametrize(("what", "pattern", "home"), RULES, ids=[r[0] for r in RULES])
def test_each_word_defined_once(what, pattern, home):
    rx = re.compile(pattern)
    copies = [f"{rel}:{no}: {code.strip()}" for rel, no, code in _library_lines() if rx.search(code) and rel != home]
    assert not copies, f"{what} outside {home or 'any module'} (import it from there):\n" + "\n".join(copies)


DEFINED = [
    r
    for r in RULES
    if r[0]
    in (
        "layout names",
        "the chunk / block size",
        "selection words",
        "stop and bonus words",
        "the root's rank sentinel NO_RANK",
        "subtree outcomes IN / OUT / MAYBE",
        "stop and bonus codes",
    )
]


@pytest.mark.parametrize(("what", "pattern", "home"), DEFINED, ids=[r[0] for r in DEFINED])
def test_each_word_has_its_definition(what, pattern, home):
    """The patterns above still find the one definition (a pattern that matches nothing guards nothing)."""
    text = [ln.split("#", 1)[0] for ln in (ROOT / home).read_text(encoding="utf-8").splitlines()]
    assert any(re.search(pattern, ln) for ln in text), f"{what}: no definition found in {home}"


def test_a_copy_is_caught():
    """The grep fails on a new copy: each rule matches a typical copy of its word."""
    copies = {
        "layout names": 'LAYOUT_NAMES = ("parents", "all")',
        "a layout compared with a literal": 'if batch.layout == "parents":',
        "a tuple of layout literals": 'choices=("parents", "all")',
        "the chunk / block size": "CHUNK_ROUNDS = 16384",
        "selection words": 'if s == "rank_major_fallback":',
        "stop and bonus words": 'stop = "mismatch"',
        "a substring match on 'fallback' (compare the selection code SEL_FALLBACK, replay/engine/batch/codes.py)": 'str.contains("fallback")',
        "the root's rank sentinel NO_RANK": "NO_RANK = -1",
        "subtree outcomes IN / OUT / MAYBE": "OUT, IN, MAYBE = 0, 1, 2",
        "stop and bonus codes": "BONUS_NONE, BONUS_CODE_CORRECTION, BONUS_CODE_LEAF = 0, 1, 2",
        "stop and bonus codes by arithmetic on positions": "res.stop[sl] = kids * (np.uint8(2) - known)",
    }
    assert set(copies) == {r[0] for r in RULES}
    for what, pattern, _ in RULES:
        assert re.search(pattern, copies[what]), what
