"""The statistics pass of ``recommend``: one dump (directory or packed run) → count tables, in batches.

Everything ``recommend`` needs from the rounds, computed batch by batch with array operations
(replay.engine.batch for the acceptance walk and the recorded selection) and reduced at once, so memory
stays that of a few batches whatever the dump's size:

* ``ShapeStats`` (analysis.shapes.counts): visits and hits per (round group, d, q, r), the rounds
  still alive after each draft step that went on drafting or stopped early, the draft's
  log-probability totals;
* ``TreeCounts``: the recorded trees as rank paths, rounds per group holding each path (the
  "recorded trees" check of the model);
* the recorded accepted lengths (sum, sum of squares).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replay.core.acceptance import validate_row
from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import BatchResult, RankPath, RoundBatch, TreeShape, rank_paths

from .counts import (
    MISS,
    ShapeStats,
    count_tables,
    draft_column_totals,
    fit,
    group_of,
    num_groups,
    step_tables,
)


@dataclass(frozen=True, eq=False)
class TreeCounts:
    """Recorded trees as rank paths: per round group, how many rounds' trees hold each path."""

    paths: tuple[RankPath, ...]
    counts: np.ndarray  # [G, P] int64

    def __post_init__(self) -> None:
        if self.counts.ndim != 2 or self.counts.shape[1] != len(self.paths):
            raise ValueError(f"TreeCounts.counts: expected [G, {len(self.paths)}], got {self.counts.shape}")


@dataclass(frozen=True, eq=False)
class DumpStats:
    """What recommend keeps of one dump after the statistics pass."""

    stats: ShapeStats
    trees: TreeCounts
    accepted_sum: float  # Σ accepted length over the replayed rounds
    accepted_sq: float  # Σ accepted length²
    rounds: int  # replayed rounds
    nodes_sum: int  # Σ recorded tree size (root excluded)
    first_shape: TreeConfig | None  # the first replayed round's tree shape (rounds may stop early)

    @property
    def mean_se_accepted(self) -> tuple[float, float]:
        """Mean recorded accepted length and its standard error."""
        n = self.rounds
        if n == 0:
            return float("nan"), float("nan")
        mean = self.accepted_sum / n
        if n < 2:
            return mean, float("inf")
        var = max(self.accepted_sq - n * mean * mean, 0.0) / (n - 1)
        return mean, float(np.sqrt(var / n))


class StatsBuilder:
    """Accumulates the statistics of one dump batch by batch (rounds numbered 0..num_rounds-1 in
    run order; consecutive rounds share a round group). recorded_gamma: the recording config's
    gamma, which tells an early stop from a complete round (counts.step_tables)."""

    def __init__(self, num_rounds: int, recorded_gamma: int | None = None):
        self.num_rounds = max(num_rounds, 1)
        self.recorded_gamma = recorded_gamma
        self.groups = num_groups(self.num_rounds)
        self.depths, self.cols = 1, 1
        self.n = np.zeros((self.groups, 1, 1), dtype=np.int64)
        self.k = np.zeros((self.groups, 1, 1, 1), dtype=np.int64)
        self.group_rounds = np.zeros(self.groups, dtype=np.int64)
        self.went_on = np.zeros((self.groups, 1), dtype=np.int64)
        self.stopped = np.zeros((self.groups, 1), dtype=np.int64)
        self.draft_sum = np.zeros((1, 1, 1))
        self.draft_count = np.zeros((1, 1, 1), dtype=np.int64)
        self.tree_paths: dict[RankPath, np.ndarray] = {}  # rank path → [G] rounds
        self.acc_sum = self.acc_sq = 0.0
        self.rounds = self.nodes = 0
        self.max_steps = 0
        self.first: tuple[int, TreeConfig] | None = None

    def _grow(self, depths: int, cols: int) -> None:
        if depths <= self.depths and cols <= self.cols:
            return
        d, c = max(depths, self.depths), max(cols, self.cols)
        self.n = fit(self.n, (self.groups, d, c))
        self.k = fit(self.k, (self.groups, d, c, c))
        self.went_on = fit(self.went_on, (self.groups, d))
        self.stopped = fit(self.stopped, (self.groups, d))
        self.draft_sum = fit(self.draft_sum, (d, c, c))
        self.draft_count = fit(self.draft_count, (d, c, c))
        self.depths, self.cols = d, c

    def add_batch(
        self, batch: RoundBatch, res: BatchResult, expanded: list[np.ndarray], shape: TreeShape, positions: np.ndarray
    ) -> None:
        """Rounds of ``batch`` (all of ``shape``; ``res.error == 0`` ones count). positions: [R] int64
        run order; expanded: per step [h_i, R] the recorded selection (replay.engine.batch.expanded_nodes)."""
        ok = np.flatnonzero(res.error == 0)
        if not ok.shape[0]:
            return
        steps = shape.num_steps
        cols = max(st.cols for st in batch.steps)
        self._grow(steps, cols)
        self.max_steps = max(self.max_steps, steps)
        group = group_of(positions[ok], self.num_rounds)
        val0 = batch.validate.ids[:, 0, :][:, ok].astype(np.int64)  # [vrows, R']
        is_all = res.layout[ok].astype(bool)
        chosen = [e[:, ok] for e in expanded]
        length = res.accepted_length[ok].astype(np.int64)
        depth_l, own_l, hit_l, group_l = [], [], [], []
        for d in range(steps):
            ids = batch.steps[d].ids[:, :, ok]  # [h, cols, R']
            if d == 0:
                reached = np.ones(ok.shape[0], dtype=bool)
                j = np.zeros(ok.shape[0], dtype=np.int64)
                q = np.zeros(ok.shape[0], dtype=np.int64)
                want = val0[0]
            else:
                node = res.accepted_nodes[d - 1, ok].astype(np.int64) - shape.starts[d]  # level-local
                eq = chosen[d] == node[None, :]
                reached = (length >= d) & eq.any(axis=0)  # accepted and expanded
                j = np.argmax(eq, axis=0)
                q = res.accepted_ranks[d - 1, ok].astype(np.int64)
                row = validate_row(is_all, shape.starts[d] + node, shape.head_offsets[d] + j)
                want = np.take_along_axis(val0, np.clip(row, 0, val0.shape[0] - 1)[None, :], axis=0)[0]
            keep = reached & (want != PAD_TOKEN)
            cand = np.take_along_axis(ids, j[None, None, :], axis=0)[0]  # [cols, R']
            match = cand == want[None, :]
            hit = np.where(match.any(axis=0), np.argmax(match, axis=0), MISS)
            depth_l.append(np.full(int(keep.sum()), d))
            own_l.append(q[keep])
            hit_l.append(hit[keep])
            group_l.append(group[keep])
        n, k = count_tables(
            np.concatenate(group_l),
            np.concatenate(depth_l),
            np.concatenate(own_l),
            np.concatenate(hit_l),
            self.groups,
            self.depths,
            self.cols,
        )
        self.n += n
        self.k += k
        self.group_rounds += np.bincount(group, minlength=self.groups)
        went_on, stopped = step_tables(
            group, np.full(group.shape[0], steps), length, self.recorded_gamma, self.groups, self.depths
        )
        self.went_on += went_on
        self.stopped += stopped
        self._add_draft(batch, chosen, shape, ok)
        self._add_trees(chosen, shape, group)
        self.acc_sum += float(length.sum())
        self.acc_sq += float((length * length).sum())
        self.rounds += int(ok.shape[0])
        self.nodes += int(ok.shape[0]) * shape.num_nodes
        first = int(positions[ok].min())
        if self.first is None or first < self.first[0]:
            self.first = (first, TreeConfig.from_lists(shape.widths, shape.heads))

    def _add_draft(self, batch: RoundBatch, chosen: list[np.ndarray], shape: TreeShape, ok: np.ndarray) -> None:
        if any(st.logp is None for st in batch.steps):
            return  # a round's scores are used only when every step has them
        for d, st in enumerate(batch.steps):
            h = shape.heads[d]
            q = np.zeros_like(chosen[d]) if d == 0 else shape.maps[d - 1].slot_rank[chosen[d]]  # [h, R'] own rank
            # [cols, h * R']: column r of every expanded node, nodes in (position, round) order
            lp = np.moveaxis(st.logp[:h][:, :, ok], 1, 0).reshape(st.cols, -1)
            total, count = draft_column_totals(np.full(q.size, d), q.reshape(-1), lp, self.depths, self.cols)
            self.draft_sum += total
            self.draft_count += count

    def _add_trees(self, chosen: list[np.ndarray], shape: TreeShape, group: np.ndarray) -> None:
        ranked = rank_paths(shape, chosen)
        index = ranked.index[1:]  # [nodes, R] the root's path () is not a node of the tree
        p = len(ranked.paths)
        per = np.bincount(
            np.broadcast_to(group, index.shape).reshape(-1) * p + index.reshape(-1), minlength=self.groups * p
        ).reshape(self.groups, p)
        for path, c in zip(ranked.paths[1:], per.T[1:]):
            acc = self.tree_paths.get(path)
            self.tree_paths[path] = c.astype(np.int64) if acc is None else acc + c

    def finish(self) -> DumpStats:
        stats = ShapeStats(
            self.n,
            self.k,
            self.group_rounds,
            self.draft_sum,
            self.draft_count,
            self.rounds,
            max(1, self.max_steps),
            self.went_on,
            self.stopped,
        )
        paths = tuple(sorted(self.tree_paths, key=lambda path: (len(path), path)))  # by depth, then ranks
        counts = (
            np.stack([self.tree_paths[path] for path in paths], axis=1)
            if paths
            else np.zeros((self.groups, 0), dtype=np.int64)
        )
        first = None if self.first is None else self.first[1]
        return DumpStats(stats, TreeCounts(paths, counts), self.acc_sum, self.acc_sq, self.rounds, self.nodes, first)
