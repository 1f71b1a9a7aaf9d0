"""Simulate the engine's dynamic-gamma strategies on a recorded run (docs/analysis.md).

A strategy picks round t's gamma from earlier rounds' acceptance; round t then runs the config's
first gamma_t steps. Truncating a static tree in depth keeps every selection of the remaining
steps, so each round is an exact sub-tree replay (analysis.compare.subtree_batch) — when the base config is
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from analysis.cost.model import CostModel
from replay.core.config import TreeConfig

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


def _hull(bounds: Iterable[list]) -> list:
    """[the least lo, the greatest hi] of [lo, hi] pairs: the bounds over branches merged into one."""
    pairs = list(bounds)
    return [min(p[0] for p in pairs), max(p[1] for p in pairs)]


@dataclass
class _Branch:
    gamma: int
    ema: float | None
    acc: list  # [lo, hi]
    gsum: list
    cost: list
    path: list  # gammas so far (kept while there is one branch)


@dataclass(frozen=True)
class RoundOutcome:
    """The fields of a sub-tree replay's outcome (GAMMA_FIELDS) that the strategies read, for one round and gamma."""

    decided: bool
    lower: int
    upper: int
    steps_lo: int
    steps_hi: int
    nodes_lo: int
    nodes_hi: int


GAMMA_FIELDS = ("decided", "lower", "upper", "steps_lo", "steps_hi", "nodes_lo", "nodes_hi")


@dataclass(frozen=True, eq=False)
class GammaOutcomes:
    """Every truncation's sub-tree replay (analysis.compare.batch.outcomes_by_gamma_run) as arrays: row
    g - 1 is the truncation to gamma g, column r round r (run order)."""

    decided: np.ndarray  # [G, R] bool
    lower: np.ndarray  # [G, R] int64
    upper: np.ndarray  # [G, R] int64
    steps_lo: np.ndarray  # [G, R] int64
    steps_hi: np.ndarray  # [G, R] int64
    nodes_lo: np.ndarray  # [G, R] int64
    nodes_hi: np.ndarray  # [G, R] int64

    def __len__(self) -> int:
        return int(self.lower.shape[1])

    def rounds(self, start: int = 0) -> Iterator[dict[int, RoundOutcome]]:
        """Rounds ``start``, ``start + 1``, ... as dicts gamma -> RoundOutcome (the walk's input)."""
        gammas = range(1, self.lower.shape[0] + 1)
        rows = [list(zip(*(getattr(self, f)[g - 1, start:].tolist() for f in GAMMA_FIELDS))) for g in gammas]
        for per_round in zip(*rows):
            yield {g: RoundOutcome(*o) for g, o in zip(gammas, per_round)}


@dataclass
class _Walk:
    """The strategy's branches after some rounds (module docstring), and what it counted."""

    branches: dict
    undecidable: int = 0
    envelope: bool = False

    def run(
        self, outcomes: Iterable[dict], G: int, strategy: int, cost: CostModel, ema_window: int, max_states: int
    ) -> None:
        """Walk ``outcomes`` (one dict gamma -> outcome per round), round by round."""
        costs: dict[tuple[int, int], float] = {}  # round_cost of each (steps, nodes): a few distinct pairs

        def round_cost(steps: int, nodes: int) -> float:
            if (steps, nodes) not in costs:
                costs[steps, nodes] = float(cost.round_cost(steps, nodes))
            return costs[steps, nodes]

        for per_g in outcomes:
            if self.envelope:
                self._bound(per_g, G, round_cost)
                continue
            self._step(per_g, strategy, G, ema_window, round_cost)
            if len(self.branches) > max_states:
                self.envelope = True
                bs = self.branches.values()
                merged = _Branch(
                    0, None, _hull(b.acc for b in bs), _hull(b.gsum for b in bs), _hull(b.cost for b in bs), []
                )
                self.branches = {None: merged}

    def _bound(self, per_g: dict, G: int, round_cost: Callable[[int, int], float]) -> None:
        """A round past max_states: the extremes over every gamma."""
        los = [o.lower for o in per_g.values()]
        his = [o.upper for o in per_g.values()]
        cl = [round_cost(o.steps_lo, o.nodes_lo) for o in per_g.values()]
        ch = [round_cost(o.steps_hi, o.nodes_hi) for o in per_g.values()]
        b = self.branches[None]
        b.acc = [b.acc[0] + min(los), b.acc[1] + max(his)]
        b.gsum = [b.gsum[0] + 1, b.gsum[1] + G]
        b.cost = [b.cost[0] + min(cl), b.cost[1] + max(ch)]
        self.undecidable += any(not o.decided for o in per_g.values())

    def _step(self, per_g: dict, strategy: int, G: int, ema_window: int, round_cost) -> None:
        """One round: every branch, for every accepted length its outcome allows."""
        new: dict = {}
        any_undecided = False
        single = len(self.branches) == 1
        for b in self.branches.values():
            o = per_g[b.gamma]
            any_undecided |= not o.decided
            c_lo = round_cost(o.steps_lo, o.nodes_lo)
            c_hi = round_cost(o.steps_hi, o.nodes_hi)
            if single:  # the path of the one branch, extended in place (its children share it)
                b.path.append(b.gamma)
            for L in range(o.lower, o.upper + 1):
                g2, e2 = next_gamma(strategy, b.gamma, L, b.ema, G, ema_window)
                key = (g2, None if e2 is None else round(e2, 12))
                acc = [b.acc[0] + L, b.acc[1] + L]
                gs = [b.gsum[0] + b.gamma, b.gsum[1] + b.gamma]
                cs = [b.cost[0] + c_lo, b.cost[1] + c_hi]
                if key in new:
                    m = new[key]
                    m.acc, m.gsum, m.cost = _hull((m.acc, acc)), _hull((m.gsum, gs)), _hull((m.cost, cs))
                    m.path = []
                else:
                    new[key] = _Branch(g2, e2, acc, gs, cs, b.path if single else [])
        self.undecidable += any_undecided
        self.branches = new

    def result(self, strategy: int, ema_window: int, cfg: TreeConfig, rounds: int) -> StrategyResult:
        bs = list(self.branches.values())
        exact = not self.envelope and self.undecidable == 0
        traj = tuple(bs[0].path) if exact and len(bs) == 1 else None
        return StrategyResult(
            strategy,
            ema_window,
            cfg.short(),
            rounds,
            self.undecidable,
            exact,
            tuple(_hull(b.acc for b in bs)),
            tuple(_hull(b.gsum for b in bs)),
            tuple(_hull(b.cost for b in bs)),
            traj,
        )


def simulate_strategy_arrays(
    outs: GammaOutcomes,
    cfg: TreeConfig,
    strategy: int,
    cost: CostModel,
    ema_window: int = 1,
    max_states: int = 4096,
) -> StrategyResult:
    """One strategy over the per-gamma outcomes (module docstring): while the strategy follows one
    trajectory (every round it reaches has one accepted length) the gammas are found with numpy
    (_trajectory) and the sums taken over the arrays, in the walk's order; from the first round
    with a range of lengths on, the walk goes on round by round."""
    G, R = cfg.gamma, len(outs)
    traj, stop, g_stop, ema = _trajectory(outs, G, strategy, ema_window)
    cols = np.arange(stop)
    rows = traj - 1
    c_lo = cost.round_costs(outs.steps_lo[rows, cols], outs.nodes_lo[rows, cols])
    c_hi = cost.round_costs(outs.steps_hi[rows, cols], outs.nodes_hi[rows, cols])
    acc = int(outs.lower[rows, cols].sum())
    gsum = int(traj.sum())
    # np.cumsum adds left to right, as the walk does (np.sum would add pairwise: other last bits)
    lo = float(np.cumsum(c_lo)[-1]) if stop else 0.0
    hi = float(np.cumsum(c_hi)[-1]) if stop else 0.0
    walk = _Walk(
        {(g_stop, ema): _Branch(g_stop, ema, [acc, acc], [gsum, gsum], [lo, hi], traj.tolist())},
        int((~outs.decided[rows, cols]).sum()),
    )
    if stop < R:
        walk.run(outs.rounds(stop), G, strategy, cost, ema_window, max_states)
    return walk.result(strategy, ema_window, cfg, R)


def _trajectory(
    outs: GammaOutcomes, G: int, strategy: int, ema_window: int
) -> tuple[np.ndarray, int, int, float | None]:
    """([stop] int64 the gamma of rounds 0 .. stop - 1, stop, the gamma and the EMA at round stop):
    the strategy's one trajectory up to the first round whose outcome at its gamma is a range of
    lengths (stop = R when there is none)."""
    R = len(outs)
    single = outs.lower == outs.upper  # [G, R]
    # the EMA is a real number: no finite table. This loop is _Walk._step's one-branch case (same
    # next_gamma), kept because the walk builds every gamma's outcome each round: ~10x slower
    if strategy in USES_EMA and ema_window > 1:
        lower, ok = outs.lower.tolist(), single.tolist()
        g, ema, gammas = G, None, []
        for r in range(R):
            if not ok[g - 1][r]:
                break
            gammas.append(g)
            g, ema = next_gamma(strategy, g, lower[g - 1][r], ema, G, ema_window)
        return np.asarray(gammas, dtype=np.int64), len(gammas), g, ema
    # gamma' = table[gamma, L] (next_gamma's; with window 1 the EMA is L itself, whatever came before)
    table = np.zeros((G + 1, G + 1), dtype=np.int64)
    for g in range(1, G + 1):
        for L in range(G + 1):
            table[g, L] = next_gamma(strategy, g, L, None, G, ema_window)[0]
    step = table[np.arange(1, G + 1)[:, None], np.clip(outs.lower, 0, G)]  # [G, R] round r's gamma' from each gamma
    full = _walk_table(step, G)  # [R + 1]
    broken = np.flatnonzero(~single[full[:R] - 1, np.arange(R)])
    stop = int(broken[0]) if broken.shape[0] else R
    ema = None
    if stop:  # after round stop - 1 (window 1: L itself, what came before multiplied by 0)
        last = int(full[stop - 1])
        ema = next_gamma(strategy, last, int(outs.lower[last - 1, stop - 1]), None, G, ema_window)[1]
    return full[:stop], stop, int(full[stop]), ema


def _walk_table(step: np.ndarray, start: int) -> np.ndarray:
    """[R + 1] g_0 = start, g_{r+1} = step[g_r - 1, r] (step: [G, R] int64 in 1..G).

    The rounds are cut into C chunks of B; walking every chunk from every gamma at once (B numpy
    steps on [C, G]) gives each chunk's map of gammas, chained over the chunks in Python (C
    steps), then every chunk is walked from its own gamma (B steps on [C]): ~2 sqrt(R) numpy steps
    in all instead of R Python ones."""
    G, R = step.shape
    if not R:
        return np.asarray([start], dtype=np.int64)
    B = math.isqrt(R)
    C = -(-R // B)
    pad = np.tile(np.arange(1, G + 1, dtype=np.int64)[:, None], (1, C * B - R))  # identity past the end
    chunks = np.concatenate([step, pad], axis=1).reshape(G, C, B)
    chunk = np.arange(C)[:, None]
    ends = np.tile(np.arange(1, G + 1, dtype=np.int64), (C, 1))  # [C, G]: where each start gamma ends
    for i in range(B):
        ends = chunks[ends - 1, chunk, i]
    starts = np.empty(C, dtype=np.int64)
    starts[0] = start
    for c in range(C - 1):
        starts[c + 1] = ends[c, starts[c] - 1]
    out = np.empty((C, B), dtype=np.int64)
    g = starts
    for i in range(B):
        out[:, i] = g
        g = chunks[g - 1, chunk[:, 0], i]
    return np.append(out.reshape(-1)[:R], g[-1])  # the padding past R keeps the last gamma
