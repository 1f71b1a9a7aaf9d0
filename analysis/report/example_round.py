"""Which round to draw as a run's example: a typical FAILING round, unless one is asked for.

A round *fails* when its walk stopped on a mismatch: the target's token matched none of the last
accepted node's children (stop ``mismatch``). A walk that reached a leaf did all the tree allowed,
and ``no_target_row`` is a gap in the dump, not a verdict.

The *typical* failing round: take the failure length L* = the most common accepted length among
the failing rounds (ties: the shorter), then, of the failing rounds with L = L*, the middle one in
dump order (index (n − 1) // 2, the lower median). With no failing round, the middle round of the
most common accepted length over all rounds is drawn, and the caption says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from replay.core.vocab import STOP_MISMATCH
from replay.engine.replayer import RoundResult
from replay.io.dumpnames import Key
from replay.util.errors import SpecReplayError
from replay.util.words import counted


@dataclass(frozen=True, eq=False)
class ExampleRound:
    result: RoundResult
    why: str  # one sentence for the caption: how the round was chosen


RoundSummaries = tuple[list[int], list[str], list[tuple[int, int]]]  # accepted length, stop, key per round


def _summaries(results: Sequence[RoundResult]) -> RoundSummaries:
    """What the choice needs per round. A run loaded on the batch path (analysis.tables.runs.LazyResults)
    knows it from its round table, so only the round drawn is replayed round-by-round."""
    known = getattr(results, "summaries", None)
    if known is not None:
        return known
    return (
        [r.acceptance.accepted_length for r in results],
        [r.acceptance.stop for r in results],
        [tuple(r.key) for r in results],
    )


def _middle_of_mode(lengths: list[int], members: list[int]) -> tuple[int, int, int]:
    """(index of the lower-median round of the most common accepted length among ``members``,
    that length, its count)."""
    counts = Counter(lengths[i] for i in members)
    length = min(counts, key=lambda k: (-counts[k], k))
    same = [i for i in members if lengths[i] == length]
    return same[(len(same) - 1) // 2], length, len(same)


def typical_failing_round(results: Sequence[RoundResult]) -> ExampleRound:
    """The typical failing round of one run, as the module docstring defines it."""
    if not len(results):
        raise SpecReplayError("no rounds to pick an example round from")
    lengths, stops, _ = _summaries(results)
    failing = [i for i, stop in enumerate(stops) if stop == STOP_MISMATCH]
    if failing:
        pick, length, n = _middle_of_mode(lengths, failing)
        return ExampleRound(
            results[pick],
            f"a typical failing round: {len(failing)} of {counted(len(results), 'round')} failed on a mismatch, "
            f"most often after accepting {length} token(s) ({n} rounds); the middle of those in dump order",
        )
    pick, length, n = _middle_of_mode(lengths, list(range(len(lengths))))
    return ExampleRound(
        results[pick],
        f"no round failed on a mismatch; a typical round: accepted length {length} is the most common "
        f"({n} of {counted(len(results), 'round')}); the middle of those in dump order",
    )


def example_round(results: Sequence[RoundResult], key: Key | None = None) -> ExampleRound | None:
    """The round with ``key`` when given (None when this run has no such round), else the typical failing one."""
    if key is None:
        return typical_failing_round(results)
    _, _, keys = _summaries(results)
    pick = next((i for i, k in enumerate(keys) if k == tuple(key)), None)
    return None if pick is None else ExampleRound(results[pick], f"round {key[0]}_{key[1]}, as asked")
