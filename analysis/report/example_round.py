"""Which round to draw as a run's example: a typical FAILING round, unless one is asked for
(the rule: docs/analysis.md, "The report", **typical failing round**).

The round drawn is replayed alone by the batch engine (``--round`` of ``replay``), and drawn from its
RoundView (replay.engine.batch.view): the run's round table gives what the choice reads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from analysis.tables.runs import LabelledRun
from replay.core.vocab import STOP_MISMATCH
from replay.engine.batch.view import RoundView, round_views
from replay.engine.runs import replay_run
from replay.io.dumpnames import Key
from replay.util.errors import SpecReplayError
from replay.util.words import counted


@dataclass(frozen=True, eq=False)
class ExampleRound:
    result: RoundView  # the round as drawn (replay.engine.render.render_round, analysis.report.treeplot)
    why: str  # one sentence for the caption: how the round was chosen


ASKED = "as asked"  # the why of the round --round named: a caption and a title name the round already

RoundSummaries = tuple[list[int], list[str], list[tuple[int, int]]]  # accepted length, stop, key per round


def _middle_of_mode(lengths: list[int], members: list[int]) -> tuple[int, int, int, str]:
    """(index of the lower-median round of the most common accepted length among ``members``,
    that length, its count, and on a tie, which goes to the shortest length, "; as many with length 2")."""
    counts = Counter(lengths[i] for i in members)
    length = min(counts, key=lambda k: (-counts[k], k))
    same = [i for i in members if lengths[i] == length]
    tied = sorted(k for k in counts if k != length and counts[k] == counts[length])
    tie = f"; as many with length {', '.join(map(str, tied))}" if tied else ""
    return same[(len(same) - 1) // 2], length, len(same), tie


def typical_failing_pick(summaries: RoundSummaries) -> tuple[int, str]:
    """(index, why) of the typical failing round of one run (docs/analysis.md, "The report")."""
    lengths, stops, _ = summaries
    if not lengths:
        raise SpecReplayError("no rounds to pick an example round from")
    failing = [i for i, stop in enumerate(stops) if stop == STOP_MISMATCH]
    if failing:
        pick, length, n, tie = _middle_of_mode(lengths, failing)
        return pick, (
            f"a typical failing round: {len(failing)} of {counted(len(lengths), 'round')} failed on a mismatch, "
            f"most often after accepting {length} token(s) ({counted(n, 'round')}{tie}); the middle of those in dump order"
        )
    pick, length, n, tie = _middle_of_mode(lengths, list(range(len(lengths))))
    return pick, (
        f"no round failed on a mismatch; a typical round: accepted length {length} is the most common "
        f"({n} of {counted(len(lengths), 'round')}{tie}); the middle of those in dump order"
    )


def example_pick(summaries: RoundSummaries, key: Key | None = None) -> tuple[int, str] | None:
    """(index, why) of the round with ``key`` when given (None when the run has no such round), else of
    the typical failing one."""
    if key is None:
        return typical_failing_pick(summaries)
    pick = next((i for i, k in enumerate(summaries[2]) if k == tuple(key)), None)
    return None if pick is None else (pick, ASKED)


def has_round(run: LabelledRun, key: Key) -> bool:
    """Whether ``key`` replayed in ``run``."""
    return example_pick(run.summaries, key) is not None


def example_round(run: LabelledRun, key: Key | None = None) -> ExampleRound | None:
    """The round with ``key`` when given (None when this run has no such round), else the typical
    failing one; its view from the batch engine's replay of that round alone."""
    got = example_pick(run.summaries, key)
    if got is None:
        return None
    pick, why = got
    chosen = run.keys[pick]
    rep = replay_run(
        run.replay.directory, replace(run.options, only_round=chosen), per_batch=lambda b, res, cfg: round_views(b, res)
    )
    views = {k: v for part in rep.per_batch for k, v in part.items()}
    return ExampleRound(views[chosen], why)
