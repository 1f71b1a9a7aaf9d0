"""Counted nouns in messages and titles: "1 round", "3 rounds" (a new user read "1 rounds" as a bug)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural (``plural`` or noun + "s") unless n is 1."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
