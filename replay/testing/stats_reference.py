"""recommend's statistics counted round by round from reference RoundResults: the oracle of the batch
statistics pass (analysis.shapes.stats.StatsBuilder, which recommend and report use).

``collect_visits`` lists the visits of replayed rounds (analysis.shapes.counts says what a visit
is), ``stats_from_visits`` reduces them to the count tables, ``dump_stats_from_results`` gives the
whole DumpStats of a replayed run and ``estimate_model`` the model; tests/test_shape_stats.py holds
the batch pass equal to these. No run-time module imports this (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.shapes.counts import (
    MISS,
    ShapeStats,
    count_tables,
    draft_column_totals,
    fit,
    group_of,
    num_groups,
    step_tables,
)
from analysis.shapes.model import DEFAULT_MIN_COUNT, ShapeModel, model_from_stats
from analysis.shapes.stats import DumpStats, TreeCounts
from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import RankPath
from replay.testing.replayer import RoundResult


@dataclass(frozen=True, eq=False)
class Visits:
    """One entry per (round, reached expanded node), plus the draft's recorded log-probabilities."""

    round_index: np.ndarray  # [V] int64, index into the rounds used
    depth: np.ndarray  # [V] int64, depth of the visited node (root 0)
    own_rank: np.ndarray  # [V] int64, the node's own draft rank (root 0)
    hit_rank: np.ndarray  # [V] int64, draft rank of the target's top-1 among the node's candidates, MISS if absent
    num_rounds: int
    cols: int  # recorded candidate columns (widest row seen)
    max_tree_depth: int  # deepest recorded tree (draft steps)
    round_steps: np.ndarray  # [num_rounds] int64 draft steps of each round
    round_accepted: np.ndarray  # [num_rounds] int64 accepted length of each round
    recorded_gamma: int | None  # the recording config's gamma (None: every round taken as complete)
    draft_sum: np.ndarray | None = None  # [max_tree_depth, cols, cols] float64, see DraftTotals
    draft_count: np.ndarray | None = None  # [max_tree_depth, cols, cols] int64

    def __post_init__(self) -> None:
        v = self.round_index.shape
        for name in ("depth", "own_rank", "hit_rank"):
            arr = getattr(self, name)
            if arr.shape != v or arr.ndim != 1:
                raise ValueError(f"Visits.{name}: expected shape {v}, got {arr.shape}")
        for name in ("round_steps", "round_accepted"):
            if getattr(self, name).shape != (self.num_rounds,):
                raise ValueError(f"Visits.{name}: expected ({self.num_rounds},), got {getattr(self, name).shape}")


def collect_visits(results: Sequence[RoundResult], recorded_gamma: int | None = None) -> Visits:
    """Visits of the root and the accepted nodes that were expanded and have a target top-1, the
    recorded draft log-probabilities of every expanded node and each round's draft steps (the
    reference, round by round). recorded_gamma: the recording config's gamma, which tells an early
    stop from a complete round (``step_tables``); None takes every round as complete."""
    rounds, depth, own, hit = [], [], [], []
    rows_d, rows_q, rows_lp = [], [], []
    cols, max_depth = 1, 0
    for k, res in enumerate(results):
        tree = res.tree
        order = tree.expanded_order
        row_of = {int(u): j for j, u in enumerate(order)}  # node id → row of rebuilt.candidates
        cand = res.rebuilt.candidates
        cols = max(cols, int(cand.shape[1]))
        max_depth = max(max_depth, tree.num_steps)
        lp = res.rebuilt.candidate_logp
        if lp is not None:
            for j, u in enumerate(order.tolist()):
                rows_d.append(int(tree.depths[u]))
                rows_q.append(0 if u == 0 else int(tree.ranks[u]))
                rows_lp.append(lp[j])
        for u in (0,) + tuple(res.acceptance.accepted_nodes):
            j = row_of.get(u)
            want = int(res.target_top1[u])
            if j is None or want == PAD_TOKEN:
                continue  # no candidate row (a leaf) or no target row: nothing to learn here
            match = np.flatnonzero(cand[j] == want)
            rounds.append(k)
            depth.append(int(tree.depths[u]))
            own.append(0 if u == 0 else int(tree.ranks[u]))
            hit.append(int(match[0]) if match.shape[0] else MISS)
    as_int = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    draft_sum = draft_count = None
    if rows_lp:
        lp_rows = np.full((len(rows_lp), cols), -np.inf)
        for i, row in enumerate(rows_lp):
            lp_rows[i, : row.shape[0]] = row
        draft_sum, draft_count = draft_totals(as_int(rows_d), as_int(rows_q), lp_rows, max(1, max_depth), cols)
    steps = as_int([res.tree.num_steps for res in results])
    lengths = as_int([res.acceptance.accepted_length for res in results])
    return Visits(
        as_int(rounds),
        as_int(depth),
        as_int(own),
        as_int(hit),
        len(results),
        cols,
        max_depth,
        steps,
        lengths,
        recorded_gamma,
        draft_sum,
        draft_count,
    )


def draft_totals(
    depth: np.ndarray, own_rank: np.ndarray, logp: np.ndarray, depths: int, cols: int
) -> tuple[np.ndarray, np.ndarray]:
    """(sum [depths, cols, cols] float64, count [depths, cols, cols] int64) of the finite recorded
    draft log-probabilities of the rank-r column at expanded nodes of (d, q).

    depth, own_rank: [E] int64 per expanded node; logp: [E, c] float log-probabilities, c <= cols.
    """
    if logp.ndim != 2 or logp.shape[0] != depth.shape[0] or own_rank.shape != depth.shape:
        raise ValueError(
            f"draft_totals: expected [E] depth/own_rank and [E, c] logp, got {depth.shape}, {own_rank.shape}, {logp.shape}"
        )
    return draft_column_totals(depth, own_rank, np.asarray(logp).T, depths, cols)


def stats_from_visits(visits: Visits) -> ShapeStats:
    depths = max(1, visits.max_tree_depth)
    cols = visits.cols
    groups = num_groups(visits.num_rounds)
    g = group_of(visits.round_index, visits.num_rounds)
    n, k = count_tables(g, visits.depth, visits.own_rank, visits.hit_rank, groups, depths, cols)
    per_group = np.bincount(group_of(np.arange(visits.num_rounds), visits.num_rounds), minlength=groups).astype(
        np.int64
    )
    if visits.draft_sum is None:
        dsum, dcount = np.zeros((depths, cols, cols)), np.zeros((depths, cols, cols), dtype=np.int64)
    else:
        dsum, dcount = fit(visits.draft_sum, (depths, cols, cols)), fit(visits.draft_count, (depths, cols, cols))
    went_on, stopped = step_tables(
        group_of(np.arange(visits.num_rounds), visits.num_rounds),
        visits.round_steps,
        visits.round_accepted,
        visits.recorded_gamma,
        groups,
        depths,
    )
    return ShapeStats(n, k, per_group, dsum, dcount, visits.num_rounds, depths, went_on, stopped)


def dump_stats_from_results(results: Sequence[RoundResult], recorded_gamma: int | None = None) -> DumpStats:
    """The same statistics from replayed rounds (the reference path; rounds numbered in list order).
    recorded_gamma: the recording config's gamma (StatsBuilder's)."""
    visits = collect_visits(results, recorded_gamma)
    stats = stats_from_visits(visits)
    groups = stats.groups
    group = group_of(np.arange(len(results)), len(results))
    counts: dict[RankPath, np.ndarray] = {}
    lengths = np.array([r.acceptance.accepted_length for r in results], dtype=np.float64)
    nodes = 0
    for g, res in zip(group.tolist(), results):
        tree = res.tree
        by_id: list[RankPath] = [()]
        for u in range(1, tree.num_nodes + 1):
            path = by_id[int(tree.parents[u])] + (int(tree.ranks[u]),)
            by_id.append(path)
            counts.setdefault(path, np.zeros(groups, dtype=np.int64))[g] += 1
        nodes += tree.num_nodes
    paths = tuple(sorted(counts, key=lambda p: (len(p), p)))
    table = np.stack([counts[p] for p in paths], axis=1) if paths else np.zeros((groups, 0), dtype=np.int64)
    first = None
    if results:
        heads, widths = results[0].tree.shape()
        first = TreeConfig.from_lists(widths, heads)
    return DumpStats(
        stats, TreeCounts(paths, table), float(lengths.sum()), float((lengths**2).sum()), len(results), nodes, first
    )


def estimate_model(visits: Visits, min_count: int = DEFAULT_MIN_COUNT, depths: int | None = None) -> ShapeModel:
    """model_from_stats on the visits of replayed rounds (the reference path)."""
    return model_from_stats(stats_from_visits(visits), min_count, depths)


def round_paths(res: RoundResult) -> dict[RankPath, int]:
    """Rank path → node id of one replayed round's tree."""
    tree = res.tree
    out: dict[RankPath, int] = {(): 0}
    by_id: list[RankPath] = [()]
    for u in range(1, tree.num_nodes + 1):
        path = by_id[int(tree.parents[u])] + (int(tree.ranks[u]),)
        by_id.append(path)
        out[path] = u
    return out
