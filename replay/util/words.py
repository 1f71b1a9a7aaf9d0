"""Counted nouns in messages and titles: "1 round", "3 rounds"."""

from __future__ import annotations

import json
from collections.abc import Sequence


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural (``plural`` or noun + "s") unless n is 1."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def row_words(row: int) -> str:
    """``row 1 (0-based)``: a matrix row as every message names it. Rows count from 0, as numpy and
    docs/dump-format.md do (row 0 is the root's validate row): a user counting lines from 1 would
    otherwise look one row too far."""
    return f"row {row} (0-based)"


def value_words(value: object, limit: int = 80) -> str:
    """A value read from a JSON file as a message quotes it: true/false/null in JSON's spelling (the
    file says ``true``, not Python's ``True``), anything else as its repr, cut at ``limit``."""
    text = repr(value)
    if value is None or isinstance(value, (bool, list, dict)):
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):  # not JSON's own values (a NaN, a tuple key): as Python has it
            pass
    return text if len(text) <= limit else text[: limit - 3] + "..."


def listed(names: Sequence[str]) -> str:
    """ "a, b and c": names joined as a sentence names them (one name alone)."""
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def first_names(names: Sequence[str], count: int) -> str:
    """The first three of ``count`` names, and "…" when there are more: how a message lists rounds."""
    return ", ".join(names[:3]) + (", …" if count > 3 else "")


def round_name(key: Sequence[int]) -> str:
    """``a_b``: a round as every message, table and listing names it, by the two numbers of its
    ``validate_{a}_{b}`` file (replay.io.dumpnames.parse_round_key reads it back)."""
    return f"{key[0]}_{key[1]}"
