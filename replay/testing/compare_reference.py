"""The sub-tree comparison round by round over reference RoundResults: the oracles of the batch walk.

``compare_configs`` (compare's frames) and ``simulate_strategies`` (the dynamic-gamma strategies)
replay each config on every RoundResult with replay.testing.subtree_walk.replay_subconfig; the
commands get the same frames from the batch arrays (analysis.compare.batch: compare_run,
simulate_run_strategies), and tests/test_compare_batch.py holds the two equal. ``simulate_strategy``
walks a strategy round by round from the first (analysis.compare.gamma_strategies.simulate_strategy_arrays
is checked against it, tests/test_gamma_strategies_arrays.py); ``round_sizes`` gives modelled_speedup's
sizes of reference RoundResults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from analysis.compare.configs import COMPARE_COLUMNS, is_own_tree, summarize_arrays
from analysis.compare.gamma_strategies import (
    GAMMA_FIELDS,
    STRATEGY_NAMES,
    GammaOutcomes,
    RoundOutcome,
    StrategyResult,
    _Branch,  # the walk itself is run-time code: simulate_strategy_arrays goes on with it
    _Walk,
)
from analysis.compare.subtree import truncated
from analysis.cost.model import CostModel
from analysis.tables.runs import RoundSizes
from replay.core.config import TreeConfig
from replay.testing.replayer import RoundResult

from .subtree_walk import SubOutcome, replay_subconfig


def summarize_outcomes(outcomes: Sequence[SubOutcome], cfg: TreeConfig, recorded: TreeConfig, cost: CostModel) -> dict:
    """One comparison row (COMPARE_COLUMNS) from a config's per-round outcomes (summarize_arrays)."""
    field = lambda name: np.array([getattr(o, name) for o in outcomes], dtype=np.int64)  # noqa: E731
    decided = np.array([o.decided for o in outcomes], dtype=bool)
    return summarize_arrays(
        cfg,
        recorded,
        cost,
        decided,
        field("lower"),
        field("upper"),
        field("steps_lo"),
        field("steps_hi"),
        field("nodes_lo"),
        field("nodes_hi"),
    )


def as_replayed(res: RoundResult, walked: SubOutcome) -> SubOutcome:
    """The replay's own outcome of ``res`` (is_own_tree), on the walk's record of the selection rule."""
    acc, tree = res.acceptance, res.tree
    length = acc.accepted_length
    return dataclasses.replace(
        walked,
        decided=True,
        lower=length,
        upper=length,
        accepted_tokens=tuple(acc.accepted_tokens),
        bonus_token=acc.bonus_token,
        bonus_kind=acc.bonus_kind,
        stop=acc.stop,
        steps_lo=tree.num_steps,
        steps_hi=tree.num_steps,
        nodes_lo=tree.num_nodes,
        nodes_hi=tree.num_nodes,
        reason="",
    )


def compare_configs(
    results: Sequence[RoundResult],
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    cost: CostModel | None = None,
    gamma_threshold: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary: one row per config, outcomes: one row per config and round), round by round (the
    reference; analysis.compare.batch.compare_run gives the same from the batch arrays).

    gamma_threshold: simulate this early-stop threshold (our model, replay.testing.subtree_walk) for every
    config; None inherits the recorded early stops only, so the recorded config's own row
    always equals the replay whatever rule the engine's gammaThreshold really follows.
    """
    cost = cost or CostModel.default()
    gamma_threshold = 0.0 if gamma_threshold is None else gamma_threshold
    rows, per_round = [], []
    for k, cfg in enumerate(configs):
        outs = [replay_subconfig(r, cfg, gamma_threshold, None, recorded.gamma) for r in results]
        if is_own_tree(cfg, recorded, gamma_threshold):
            outs = [as_replayed(r, o) for r, o in zip(results, outs)]
        rows.append(summarize_outcomes(outs, cfg, recorded, cost))
        for res, o in zip(results, outs):
            per_round.append(
                {
                    "config": cfg.short(),
                    "round": res.name,
                    "decided": o.decided,
                    "lower": o.lower,
                    "upper": o.upper,
                    "stop": o.stop,
                    "steps_lo": o.steps_lo,
                    "steps_hi": o.steps_hi,
                    "rule": o.rule,
                    "reason": o.reason,
                }
            )
        if progress:
            progress(k + 1, len(configs))
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS), pd.DataFrame(per_round)


def outcomes_by_gamma(
    results: Sequence[RoundResult],
    cfg: TreeConfig,
    gamma_threshold: float | None = None,
    recorded_gamma: int | None = None,
) -> list[dict[int, SubOutcome]]:
    """For every round, the exact sub-tree replay of each truncation gamma = 1..cfg.gamma.

    recorded_gamma: the recording config's gamma (early-stopped rounds keep their stop).
    gamma_threshold: simulate this early stop; None inherits the recorded stops only.
    """
    gamma_threshold = 0.0 if gamma_threshold is None else gamma_threshold
    subs = {g: truncated(cfg, g) for g in range(1, cfg.gamma + 1)}
    return [
        {g: replay_subconfig(res, c, gamma_threshold, None, recorded_gamma) for g, c in subs.items()} for res in results
    ]


def simulate_strategies(
    results: Sequence[RoundResult],
    cfg: TreeConfig,
    strategies: Sequence[int] = tuple(STRATEGY_NAMES),
    cost: CostModel | None = None,
    ema_window: int = 1,
    gamma_threshold: float | None = None,
    recorded_gamma: int | None = None,
) -> list[StrategyResult]:
    """Every requested strategy on the same per-gamma outcomes (computed once)."""
    cost = cost or CostModel.default()
    outs = outcomes_by_gamma(results, cfg, gamma_threshold, recorded_gamma)
    return [simulate_strategy(outs, cfg, s, cost, ema_window) for s in strategies]


def simulate_strategy(
    outcomes: Sequence[dict[int, SubOutcome]] | Sequence[dict[int, RoundOutcome]],
    cfg: TreeConfig,
    strategy: int,
    cost: CostModel,
    ema_window: int = 1,
    max_states: int = 4096,
) -> StrategyResult:
    """Run one strategy over precomputed per-gamma outcomes (``outcomes_by_gamma``), round by round
    from the first: the reference of analysis.compare.gamma_strategies.simulate_strategy_arrays
    (its numpy trajectory, then the same walk)."""
    G = cfg.gamma
    walk = _Walk({(G, None): _Branch(G, None, [0, 0], [0, 0], [0.0, 0.0], [])})
    walk.run(outcomes, G, strategy, cost, ema_window, max_states)
    return walk.result(strategy, ema_window, cfg, len(outcomes))


def gamma_outcomes(outcomes: Sequence[dict[int, SubOutcome] | dict[int, RoundOutcome]], gamma: int) -> GammaOutcomes:
    """The arrays of outcomes_by_gamma's list (one dict gamma -> outcome per round), as the batch
    path gives them (analysis.compare.batch.outcomes_by_gamma_run)."""
    cols = {f: [[getattr(per_g[g], f) for per_g in outcomes] for g in range(1, gamma + 1)] for f in GAMMA_FIELDS}
    dtype = {f: bool if f == "decided" else np.int64 for f in GAMMA_FIELDS}
    return GammaOutcomes(**{f: np.asarray(v, dtype=dtype[f]).reshape(gamma, len(outcomes)) for f, v in cols.items()})


def round_sizes(results: Sequence[RoundResult]) -> RoundSizes:
    """([R] accepted length, [R] draft steps, [R] draft nodes) int64 of reference RoundResults, in order."""
    return (
        np.asarray([r.acceptance.accepted_length for r in results], dtype=np.int64),
        np.asarray([r.tree.num_steps for r in results], dtype=np.int64),
        np.asarray([r.tree.num_nodes for r in results], dtype=np.int64),
    )
