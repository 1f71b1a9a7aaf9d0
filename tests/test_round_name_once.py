"""A round's name ``a_b`` is spelled in one place, replay.util.words.round_name: every message,
table column and listing names a round through it, and its vectorised forms (the frames' key_names,
arrow_round_names) and its inverse (parse_round_key) agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from replay.cli import main
from replay.engine.batch.frames import arrow_round_names, key_names
from replay.io.dumpnames import matrix_name, parse_round_key
from replay.util.words import round_name
from tests.library_scan import assert_one_place

HOME = "replay/util/words.py"

# {key[0]}_{key[1]}, {keys[0, i]}_{keys[1, i]}, {a}_{b}: the two numbers of a key joined by "_"
_SPELT = re.compile(r"\{([^{}]*?)0([^{}]*)\}_\{\1 ?1\2\}|\{a\}_\{b\}|\{key_a\}_\{key_b\}")

ALLOWED = {
    ("replay/io/dumpnames.py", 'return f"validate_'): "the file name rule (tests/test_dump_names_once.py)",
    ("replay/io/dumpnames.py", 'hint = f"; did you mean'): "the user's own digits echoed, not a key",
}


def _spellings(path: Path) -> list[str]:
    """Lines of f-strings that spell a key's two numbers (docstrings may show the name's form)."""
    return [s.strip() for s in path.read_text().splitlines() if re.search(r"\bf[\"']", s) and _SPELT.search(s)]


def test_round_names_are_spelt_by_round_name_only():
    assert_one_place(HOME, _spellings, "a round's name spelt", "round_name", allowed=ALLOWED)


def test_the_scan_sees_each_spelling():
    for text in ('f"{key[0]}_{key[1]}"', 'f"{res.keys[0, i]}_{res.keys[1, i]}"', 'f"round {a}_{b}"'):
        assert _SPELT.search(text), text
    assert not _SPELT.search('f"{prefix}_{size}"')


def test_forms_of_the_name_agree():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 10**12, size=(2, 50)).astype(np.int64)  # [2, R] int64
    want = [round_name(k) for k in keys.T.tolist()]
    assert key_names(keys).tolist() == want
    assert arrow_round_names(keys).to_pylist() == want
    assert [parse_round_key(n) for n in want] == [tuple(k) for k in keys.T.tolist()]
    assert round_name((124, 140)) == "124_140"
    assert matrix_name((-1, 124, 140)) == "validate_124_140" and matrix_name((2, 124, 140)) == "draft_step_2_124_140"


def test_a_missing_round_is_named_as_the_tables_name_it(capsys):
    assert main(["replay", "sample_dumps/article_round", "--round", "7_9", "--no-progress"]) != 0
    assert "7_9" in capsys.readouterr().err
