"""Which recorded rounds' timings a run's cost model may use: those of the rounds that were replayed,
and, when the run is replayed with its manifest's own tree, only those whose replay gives the draft
nodes and draft steps the manifest records (a disagreeing record prices a tree shape nobody timed).
The rule: docs/analysis.md, "Where the costs come from, and measured speedup".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from replay.engine.runs import RunReplay
from replay.io.manifest import checks_recorded_rounds, named_rounds
from replay.util.words import round_name

from .timings import Timings


@dataclass(frozen=True, eq=False)
class ReplayedRounds:
    """The rounds a replay accepted, with the shape it gave each."""

    keys: np.ndarray  # [2, R] int64 round keys
    nodes: np.ndarray  # [R] draft nodes per round (root excluded)
    steps: np.ndarray  # [R] draft steps per round
    checked: bool  # replayed with the manifest's own tree: its records' shapes must match


def replayed_rounds(replay: RunReplay) -> ReplayedRounds:
    """The accepted rounds of ``replay`` and their shapes."""
    res, ok = replay.result, replay.result.ok
    checked = checks_recorded_rounds(replay.manifest, replay.tree)
    return ReplayedRounds(res.keys[:, ok], res.num_nodes[ok], res.num_steps[ok], checked)


def keep_replayed(t: Timings, rounds: ReplayedRounds) -> Timings | None:
    """``t`` restricted to the round records the cost model may use (module docstring); ``left_out``
    says which were dropped and why. None when no record is left."""
    shape = {
        (int(a), int(b)): (int(n), int(s))
        for a, b, n, s in zip(rounds.keys[0], rounds.keys[1], rounds.nodes, rounds.steps)
    }
    keep = np.zeros(len(t.keys), dtype=bool)
    missing: list[str] = []
    differ: list[str] = []
    for i, key in enumerate(t.keys):
        got = shape.get(key)
        name = round_name(key)
        if got is None:
            missing.append(name)
        elif rounds.checked and got != (int(t.nodes[i]), int(t.steps[i])):
            differ.append(name)
        else:
            keep[i] = True
    if keep.all():
        return t
    if not keep.any():
        return None
    why = [f"{len(missing)} not replayed ({named_rounds(missing, ', ')})"] if missing else []
    why += [f"{len(differ)} whose replay disagrees with the record ({named_rounds(differ, ', ')})"] if differ else []
    note = f"timings of {int(keep.sum())} of {len(keep)} recorded rounds; left out: {'; '.join(why)}"
    return replace(
        t,
        steps=t.steps[keep],
        nodes=t.nodes[keep],
        draft_s=t.draft_s[keep],
        verify_s=t.verify_s[keep],
        keys=tuple(k for k, y in zip(t.keys, keep) if y),
        left_out=note,
    )
