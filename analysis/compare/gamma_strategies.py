"""Simulate the engine's dynamic-gamma strategies on a recorded run (docs/analysis.md).

A strategy picks round t's gamma from earlier rounds' acceptance; round t then runs the config's
first gamma_t steps. Truncating a static tree in depth keeps every selection of the remaining
steps, so each round is an exact sub-tree replay (analysis.compare.subtree) — when the base config is
itself decidable on the recording. Our reading of the engine's ``gammaStrategy`` codes (G = the
config's gamma, L = last round's accepted length, g = last round's gamma, "full" = L >= g,
E = EMA of L with alpha = 2 / (emaWindow + 1), first value E = L, round() = round half up,
every result clamped to [1, G]; the first round uses G):

    0 off                         g' = G
    1 EMA rise / EMA fall         g' = round(E) + 1
    2 force rise / force fall     g' = L + 1                     (g + 1 when full)
    3 force rise / stairway fall  g' = g + 1 if full else g - 1
    4 force rise / EMA fall       g' = g + 1 if full else round(E) + 1

An undecidable round (the dump cannot tell L for that gamma) splits the trajectory; the simulation
follows every branch (L anywhere in its bounds) and reports bounds over all of them. When the
branches exceed ``max_states`` it stops tracking them and bounds the remaining rounds by the
extremes over every gamma (still sound, looser, and flagged ``exact = False``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.cost.model import CostModel
from replay.core.config import TreeConfig
from replay.engine.replayer import RoundResult

from .subtree import SubOutcome, replay_subconfig, truncated

STRATEGY_NAMES = {
    0: "off",
    1: "EMA rise / EMA fall",
    2: "force rise / force fall",
    3: "force rise / stairway fall",
    4: "force rise / EMA fall",
}
USES_EMA = (1, 4)  # the strategies that read emaWindow


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def next_gamma(
    strategy: int, gamma: int, accepted: int, ema: float | None, max_gamma: int, ema_window: int = 1
) -> tuple[int, float | None]:
    """(next gamma, updated EMA of the accepted length) after a round (module docstring)."""
    if strategy not in STRATEGY_NAMES:
        raise ValueError(f"gammaStrategy must be one of {sorted(STRATEGY_NAMES)}, got {strategy}")
    if ema_window < 1:
        raise ValueError(f"emaWindow must be at least 1, got {ema_window}")
    alpha = 2.0 / (ema_window + 1)
    new_ema = float(accepted) if ema is None else alpha * accepted + (1 - alpha) * ema
    full = accepted >= gamma
    if strategy == 0:
        g = max_gamma
    elif strategy == 1:
        g = _round_half_up(new_ema) + 1
    elif strategy == 2:
        g = accepted + 1
    elif strategy == 3:
        g = gamma + 1 if full else gamma - 1
    else:
        g = gamma + 1 if full else _round_half_up(new_ema) + 1
    return max(1, min(max_gamma, g)), (new_ema if strategy in USES_EMA else None)


@dataclass(frozen=True)
class StrategyResult:
    """Sums over rounds as [lo, hi] bounds; lo == hi everywhere when ``exact``."""

    strategy: int
    ema_window: int
    config: str
    rounds: int
    undecidable_rounds: int  # rounds undecidable for the gamma of at least one reachable branch
    exact: bool  # one trajectory, every round decided
    accepted: tuple[int, int]  # Σ L_r
    gamma: tuple[int, int]  # Σ gamma_r
    cost_s: tuple[float, float]  # Σ round cost under the cost model
    trajectory: tuple[int, ...] | None  # gamma per round when exact

    @property
    def name(self) -> str:
        return STRATEGY_NAMES[self.strategy]

    def mean_accepted(self) -> tuple[float, float]:
        return self.accepted[0] / self.rounds, self.accepted[1] / self.rounds

    def speedup(self, cost: CostModel) -> tuple[float, float]:
        lo = cost.speedup(self.accepted[0] + self.rounds, self.cost_s[1])
        hi = cost.speedup(self.accepted[1] + self.rounds, self.cost_s[0])
        return lo, hi

    def to_row(self, cost: CostModel) -> dict:
        ma = self.mean_accepted()
        sp = self.speedup(cost)
        return {
            "strategy": self.strategy,
            "name": self.name,
            "ema_window": self.ema_window,
            "config": self.config,
            "rounds": self.rounds,
            "undecidable_rounds": self.undecidable_rounds,
            "exact": self.exact,
            "mean_gamma_lo": self.gamma[0] / self.rounds,
            "mean_gamma_hi": self.gamma[1] / self.rounds,
            "mean_acceptance_length_lo": ma[0] + 1,
            "mean_acceptance_length_hi": ma[1] + 1,
            "mean_accepted_length_lo": ma[0],
            "mean_accepted_length_hi": ma[1],
            "modelled_speedup_lo": sp[0],
            "modelled_speedup_hi": sp[1],
        }


@dataclass
class _Branch:
    gamma: int
    ema: float | None
    acc: list  # [lo, hi]
    gsum: list
    cost: list
    path: list  # gammas so far (kept while there is one branch)


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


def simulate_strategy(
    outcomes: Sequence[dict[int, SubOutcome]],
    cfg: TreeConfig,
    strategy: int,
    cost: CostModel,
    ema_window: int = 1,
    max_states: int = 4096,
) -> StrategyResult:
    """Run one strategy over precomputed per-gamma outcomes (``outcomes_by_gamma``)."""
    G = cfg.gamma
    branches = {(G, None): _Branch(G, None, [0, 0], [0, 0], [0.0, 0.0], [])}
    undecidable = 0
    envelope = False
    for per_g in outcomes:
        if envelope:
            los = [o.lower for o in per_g.values()]
            his = [o.upper for o in per_g.values()]
            cl = [float(cost.round_cost(o.steps_lo, o.nodes_lo)) for o in per_g.values()]
            ch = [float(cost.round_cost(o.steps_hi, o.nodes_hi)) for o in per_g.values()]
            b = branches[None]
            b.acc = [b.acc[0] + min(los), b.acc[1] + max(his)]
            b.gsum = [b.gsum[0] + 1, b.gsum[1] + G]
            b.cost = [b.cost[0] + min(cl), b.cost[1] + max(ch)]
            undecidable += any(not o.decided for o in per_g.values())
            continue
        new: dict = {}
        any_undecided = False
        for b in branches.values():
            o = per_g[b.gamma]
            any_undecided |= not o.decided
            c_lo = float(cost.round_cost(o.steps_lo, o.nodes_lo))
            c_hi = float(cost.round_cost(o.steps_hi, o.nodes_hi))
            for L in range(o.lower, o.upper + 1):
                g2, e2 = next_gamma(strategy, b.gamma, L, b.ema, G, ema_window)
                key = (g2, None if e2 is None else round(e2, 12))
                acc = [b.acc[0] + L, b.acc[1] + L]
                gs = [b.gsum[0] + b.gamma, b.gsum[1] + b.gamma]
                cs = [b.cost[0] + c_lo, b.cost[1] + c_hi]
                if key in new:
                    m = new[key]
                    m.acc = [min(m.acc[0], acc[0]), max(m.acc[1], acc[1])]
                    m.gsum = [min(m.gsum[0], gs[0]), max(m.gsum[1], gs[1])]
                    m.cost = [min(m.cost[0], cs[0]), max(m.cost[1], cs[1])]
                    m.path = []
                else:
                    new[key] = _Branch(g2, e2, acc, gs, cs, b.path + [b.gamma] if len(branches) == 1 else [])
        undecidable += any_undecided
        branches = new
        if len(branches) > max_states:
            envelope = True
            merged = _Branch(
                0,
                None,
                [min(b.acc[0] for b in branches.values()), max(b.acc[1] for b in branches.values())],
                [min(b.gsum[0] for b in branches.values()), max(b.gsum[1] for b in branches.values())],
                [min(b.cost[0] for b in branches.values()), max(b.cost[1] for b in branches.values())],
                [],
            )
            branches = {None: merged}
    bs = list(branches.values())
    exact = not envelope and undecidable == 0
    traj = tuple(bs[0].path) if exact and len(bs) == 1 else None
    return StrategyResult(
        strategy,
        ema_window,
        cfg.short(),
        len(outcomes),
        undecidable,
        exact,
        (min(b.acc[0] for b in bs), max(b.acc[1] for b in bs)),
        (min(b.gsum[0] for b in bs), max(b.gsum[1] for b in bs)),
        (min(b.cost[0] for b in bs), max(b.cost[1] for b in bs)),
        traj,
    )


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
