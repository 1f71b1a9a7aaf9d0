"""The acceptance model's count tables: what the replayed rounds say, before anything is estimated.

A *visit* is a (round, node) pair the acceptance walk reached (the root and the accepted nodes)
where the node was expanded (its full candidate row is recorded) and the target's top-1 is known:
the node's depth d, its own draft rank q, and the draft rank r of the target's top-1 among its
candidates (MISS when absent). ``ShapeStats`` holds the visits and hits per (round group, d, q, r),
the rounds whose walk was still alive after each draft step and that went on drafting or stopped
early there (``step_tables``) per round group, and the draft's recorded log-probability totals
per (d, q, r); a round group is a run of consecutive rounds of one dump, the unit the bootstrap
resamples. analysis.shapes.model estimates the model from these tables; analysis.shapes.stats
computes them batch by batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MISS = -1  # hit_rank of a visit whose target top-1 is not among the recorded candidates
MAX_GROUPS = 1000  # round groups per dump for the bootstrap (one round per group below this)


# --------------------------------------------------------------------------------------------
# The draft's log-probability totals


def draft_column_totals(
    depth: np.ndarray, own_rank: np.ndarray, columns: np.ndarray, depths: int, cols: int
) -> tuple[np.ndarray, np.ndarray]:
    """(sum [depths, cols, cols] float64, count [depths, cols, cols] int64) of the finite recorded
    draft log-probabilities of the rank-r column at expanded nodes of (d, q).

    depth, own_rank: [E] int64 per expanded node; columns: [c, E] float log-probabilities, column r
    of every expanded node (c <= cols), as the batch statistics hold them.
    """
    c = min(int(columns.shape[0]), cols)
    keep = (depth < depths) & (own_rank < cols)
    every = bool(keep.all())
    row = depth * cols + own_rank if every else (depth * cols + own_rank)[keep]  # [E'] the (d, q) cell row
    lp = np.ascontiguousarray(columns[:c] if every else columns[:c, keep], dtype=np.float64)  # [c, E']
    size = depths * cols
    total = np.zeros((size, cols))
    count = np.zeros((size, cols), dtype=np.int64)
    # one column r at a time: [E'] temporaries, no [E', c] cell index (each cell still sums its values in
    # node order, so the totals are the same bits as one bincount over every (node, r))
    for r in range(c):
        ok = np.isfinite(lp[r])
        at = row[ok]
        total[:, r] = np.bincount(at, weights=lp[r][ok], minlength=size)
        count[:, r] = np.bincount(at, minlength=size)
    return total.reshape(depths, cols, cols), count.reshape(depths, cols, cols)


# --------------------------------------------------------------------------------------------
# Sufficient statistics


@dataclass(frozen=True, eq=False)
class ShapeStats:
    """Count tables of the acceptance model per round group, and the draft's log-probability totals.

    A round group is a run of consecutive rounds of one dump; the bootstrap resamples groups.
    """

    n: np.ndarray  # [G, depths, cols] int64 visits of (d, q)
    k: np.ndarray  # [G, depths, cols, cols] int64 visits of (d, q) whose target top-1 is the rank-r candidate
    group_rounds: np.ndarray  # [G] int64 rounds per group
    draft_sum: np.ndarray  # [depths, cols, cols] float64
    draft_count: np.ndarray  # [depths, cols, cols] int64
    num_rounds: int
    max_tree_depth: int  # deepest recorded tree (draft steps) = depths
    went_on: np.ndarray  # [G, depths] int64 rounds that drafted the next step (step_tables)
    stopped: np.ndarray  # [G, depths] int64 rounds that stopped early (step_tables)

    def __post_init__(self) -> None:
        g, d, c = self.n.shape
        if self.k.shape != (g, d, c, c):
            raise ValueError(f"ShapeStats.k: expected {(g, d, c, c)}, got {self.k.shape}")
        if self.group_rounds.shape != (g,):
            raise ValueError(f"ShapeStats.group_rounds: expected ({g},), got {self.group_rounds.shape}")
        for name in ("went_on", "stopped"):
            if getattr(self, name).shape != (g, d):
                raise ValueError(f"ShapeStats.{name}: expected {(g, d)}, got {getattr(self, name).shape}")
        for name in ("draft_sum", "draft_count"):
            if getattr(self, name).shape != (d, c, c):
                raise ValueError(f"ShapeStats.{name}: expected {(d, c, c)}, got {getattr(self, name).shape}")

    @property
    def cols(self) -> int:
        return int(self.n.shape[2])

    @property
    def depths(self) -> int:
        return int(self.n.shape[1])

    @property
    def groups(self) -> int:
        return int(self.n.shape[0])

    @property
    def num_visits(self) -> int:
        return int(self.n.sum())


def num_groups(rounds: int) -> int:
    return max(1, min(rounds, MAX_GROUPS))


def group_of(position: np.ndarray, rounds: int) -> np.ndarray:
    """[N] int64 round group of each round position 0..rounds-1 (consecutive rounds share a group)."""
    return (np.asarray(position, dtype=np.int64) * num_groups(rounds)) // max(rounds, 1)


def count_tables(
    group: np.ndarray,
    depth: np.ndarray,
    own_rank: np.ndarray,
    hit_rank: np.ndarray,
    groups: int,
    depths: int,
    cols: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(n [groups, depths, cols], k [groups, depths, cols, cols]) int64 from one entry per visit ([V] int64 each)."""
    keep = (depth < depths) & (own_rank < cols)
    g, d, q, r = group[keep], depth[keep], own_rank[keep], hit_rank[keep]
    row = (g * depths + d) * cols + q
    n = np.bincount(row, minlength=groups * depths * cols).reshape(groups, depths, cols)
    hit = (r != MISS) & (r < cols)
    k = np.bincount(row[hit] * cols + r[hit], minlength=groups * depths * cols * cols).reshape(
        groups, depths, cols, cols
    )
    return n.astype(np.int64), k.astype(np.int64)


def step_tables(
    group: np.ndarray,
    steps: np.ndarray,
    accepted: np.ndarray,
    recorded_gamma: int | None,
    groups: int,
    depths: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(went_on, stopped) [groups, depths] int64 from each round's group, draft steps and accepted
    length ([N] int64 each).

    Column i is "after d = i + 1 draft steps", counting only the rounds whose acceptance walk reached
    depth d (accepted length >= d: the rounds where draft step d, counted from 0 as draft_step_d is, could add to the accepted length):
    ``went_on[g, i]`` those of group g that drafted step d, ``stopped[g, i]`` those that stopped
    early there (d steps, fewer than the recording's gamma; a round that ends at gamma is complete,
    not stopped, and None takes every round as complete, as analysis.compare.subtree does).
    """
    steps = np.asarray(steps, dtype=np.int64)
    accepted = np.asarray(accepted, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    if steps.shape[0] and (int(steps.min()) < 1 or int(steps.max()) > depths):
        raise ValueError(f"step_tables: draft steps must lie in 1..{depths}, got {steps.min()}..{steps.max()}")
    if np.any(accepted < 0) or np.any(accepted > steps):
        raise ValueError("step_tables: an accepted length must lie in 0..the round's draft steps")
    alive = np.minimum(accepted, steps - 1)  # the walk was alive after steps 1..alive and the draft went on
    per = np.bincount(group * (depths + 1) + alive, minlength=groups * (depths + 1)).reshape(groups, depths + 1)
    went_on = np.cumsum(per[:, ::-1], axis=1)[:, ::-1][:, 1:]  # [g, i] rounds with alive >= i + 1
    gamma = recorded_gamma if recorded_gamma is not None else 0
    stop = (accepted == steps) & (steps < gamma)  # alive after its last step, and gamma allowed another
    stopped = np.bincount(group[stop] * depths + steps[stop] - 1, minlength=groups * depths).reshape(groups, depths)
    return went_on.astype(np.int64), stopped.astype(np.int64)


def fit(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``arr`` zero-padded (never cropped) to ``shape``: tables of dumps with fewer depths or columns."""
    if any(a > s for a, s in zip(arr.shape, shape)):
        raise ValueError(f"cannot fit {arr.shape} into {shape}")
    out = np.zeros(shape, dtype=arr.dtype)
    out[tuple(slice(0, a) for a in arr.shape)] = arr
    return out


def merge_stats(parts: Sequence[ShapeStats]) -> ShapeStats:
    """Several dumps as one: group axes concatenated, tables padded to the widest and deepest."""
    if not parts:
        raise ValueError("nothing to merge")
    d = max(p.depths for p in parts)
    c = max(p.cols for p in parts)
    return ShapeStats(
        np.concatenate([fit(p.n, (p.groups, d, c)) for p in parts]),
        np.concatenate([fit(p.k, (p.groups, d, c, c)) for p in parts]),
        np.concatenate([p.group_rounds for p in parts]),
        sum(fit(p.draft_sum, (d, c, c)) for p in parts),
        sum(fit(p.draft_count, (d, c, c)) for p in parts),
        sum(p.num_rounds for p in parts),
        max(p.max_tree_depth for p in parts),
        np.concatenate([fit(p.went_on, (p.groups, d)) for p in parts]),
        np.concatenate([fit(p.stopped, (p.groups, d)) for p in parts]),
    )
