"""Predicted speedup of tree shapes from a calibration dump and a measured cost curve, the shape
``generate --config auto`` picks, and the ceiling (docs/analysis.md, "Predicted speedup and the
ceiling").

Acceptance: each candidate shape contained in the calibration dump's (wide) tree is replayed
exactly on the dump's rounds (analysis.shapes.dumps ``measure_many``): its mean accepted length A
over the rounds it decides, and (analysis.compare.subtree_batch's walk) the fraction f of those
rounds whose accepted path ends at a leaf of the shape. Cost: ``CostModel.live_round_cost`` of a
static shape, the round as the live loop runs it (analysis.cost.model): the draft's catch-up
forward over 1 token, or 2 after a path that ended at a leaf, one draft forward over the
``topHead[i]`` heads of each later step, and one target forward over the root and every node. So

    predicted speedup = (A + 1) * t_verify(1) / (draft(f) + t_verify(nodes + 1))
    draft(f) = (1 - f) * t_draft(1) + f * t_draft(2) + Σ_{i=1}^{gamma-1} t_draft(topHead[i])

with the calibration rounds' acceptance; a curve without draft times by token count charges every
draft forward ``draft_step_s`` (draft(f) = gamma * draft_step_s). Callers that measured the curve
themselves fit it non-decreasing first (``nondecreasing``). It leaves prefill out (the target's
prompt forward on both sides, the draft's first catch-up over the whole prompt on the speculative
side): a measured speedup over whole generations lies closer to 1 than the prediction.

The ceiling of a pair on a machine, from the same two measurements:

* ``best``: the best predicted speedup over the searched shapes (every static shape contained in
  the calibration tree that the shape search ranks among its best by modelled speedup, and every
  chain up to the calibration depth), each with its exactly replayed acceptance;
* ``bound``: max over depths d >= 1 of (d + 1) * t_verify(1) / (d * t_draft(1) + t_verify(d + 1)),
  the speedup if every drafted token were accepted. A round that drafts d steps commits at most
  d + 1 tokens and costs at least d draft forwards of one token or more and one target forward
  over d + 1 tokens (a shape of depth d has at least d nodes), so no shape of any acceptance beats
  it with these costs (on a fitted, non-decreasing curve). On a measured verify curve that dips
  (noise), t_verify(d + 1) is read as the least time of any forward over d + 1 or more tokens.
  Below 1 at every depth, speculation cannot pay on this machine.

Shapes with gammaThreshold (dynamic depth) vary their rounds and are not predicted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.compare.subtree import is_contained
from analysis.cost.model import CostModel
from replay.core.config import TreeConfig, distinct_configs

from .dumps import DumpInput, Measured
from .model import DEFAULT_MIN_COUNT, model_from_stats, pava_nonincreasing
from .search import search_shapes

BOUND_MAX_DEPTH = 16  # depths the all-accepted bound looks at; it falls long before on any real curve
SEARCH_TOP = 8  # shapes the search proposes by modelled speedup besides the chains


@dataclass(frozen=True)
class SpeedPrediction:
    """One shape's predicted speedup over the target alone (None with ``refused`` saying why)."""

    config: TreeConfig
    accepted: float | None  # mean accepted length (bonus excluded) over the decided calibration rounds
    rounds: int  # calibration rounds that decide it
    undecidable: int  # calibration rounds it cannot be decided on
    round_s: float | None  # modelled seconds of one round
    speedup: float | None
    refused: str | None = None
    leaf_stops: float = 0.0  # fraction of the decided rounds whose accepted path ends at a leaf (2-token catch-up next)

    @property
    def block_efficiency(self) -> float | None:
        return None if self.accepted is None else self.accepted + 1.0


@dataclass(frozen=True)
class Ceiling:
    best: SpeedPrediction | None  # the best predicted shape (None: nothing could be predicted)
    bound: float  # the all-accepted bound, max over depths
    bound_depth: int  # the depth where it is reached
    bound_by_depth: tuple[float, ...]  # [d - 1] = the bound at depth d, d = 1..BOUND_MAX_DEPTH


def nondecreasing(cost: CostModel) -> CostModel:
    """The measured verify times, and the draft times by token count when the curve has them,
    fitted non-decreasing in tokens (least squares, pool adjacent violators): a forward over more
    tokens never costs less, while a loaded machine's timings dip and jump by tens of percent.
    ``draft_step_s`` is kept as measured."""
    fit = -pava_nonincreasing(-cost.verify_s)
    draft = None if cost.draft_s is None else -pava_nonincreasing(-cost.draft_s)
    if np.array_equal(fit, cost.verify_s) and (draft is None or np.array_equal(draft, cost.draft_s)):
        return cost
    what = "verify times" if draft is None else "verify and draft times"
    return CostModel(cost.tokens, fit, cost.draft_step_s, f"{cost.source} ({what} fitted non-decreasing)", draft)


def least_verify_s(cost: CostModel, tokens: int) -> float:
    """The cheapest target forward over ``tokens`` or more tokens: t_verify itself on a curve that
    never falls; on a noisy measured curve that dips, the dip, so the bound stays a bound."""
    top = max(int(cost.tokens[-1]), tokens, BOUND_MAX_DEPTH + 1)
    return float(np.min(cost.t_verify(np.arange(tokens, top + 1))))


def all_accepted_speedup(cost: CostModel, depth: int) -> float:
    """(d + 1) * t_verify(1) / (d * t_draft(1) + t_verify(d + 1)): every drafted token accepted
    (t_verify(d + 1) read as ``least_verify_s``)."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    return cost.speedup(depth + 1, depth * float(cost.t_draft(1)) + least_verify_s(cost, depth + 1))


def predict(
    config: TreeConfig, measured: Measured | None, cost: CostModel, calibration: TreeConfig, leaf_stops: float = 0.0
) -> SpeedPrediction:
    """One shape's prediction from its exact replay on the calibration rounds (``measured``, and
    ``leaf_stops``: the fraction of them whose accepted path ends at a leaf, ``leaf_stop_fractions``;
    it prices the next round's catch-up and matters only with draft times by token count)."""
    if config.gamma_threshold > 0:
        return SpeedPrediction(
            config, None, 0, 0, None, None, "gammaThreshold: rounds vary in depth and size; not predicted"
        )
    if not is_contained(config, calibration):
        return SpeedPrediction(
            config, None, 0, 0, None, None, f"not contained in the calibration tree {calibration.short()}"
        )
    if measured is None or measured.rounds == 0:
        undecided = 0 if measured is None else measured.undecidable
        return SpeedPrediction(config, None, 0, undecided, None, None, "no calibration round decides it")
    round_s = cost.live_round_cost(config.top_head, config.num_nodes, leaf_stops)
    speed = cost.speedup(measured.mean_accepted + 1.0, round_s)
    return SpeedPrediction(
        config, measured.mean_accepted, measured.rounds, measured.undecidable, round_s, speed, None, leaf_stops
    )


def leaf_stop_fractions(dump: DumpInput, configs: Sequence[TreeConfig]) -> list[float]:
    """Per config, the fraction of the calibration rounds it decides whose accepted path ends at a
    leaf of its tree (the sub-tree walk's leaf stop: the last accepted node was never expanded, so
    the next round's catch-up feeds it with the new root); 0.0 where none is decided, the config is
    not contained or it simulates an early stop. From the batch arrays (scan_run's DumpInput.leaf_stops)."""
    if dump.leaf_stops is None:
        raise ValueError(f"{dump.directory}: leaf stops need a dump read by analysis.shapes.dumps.scan_run")
    plain = [c.gamma_threshold <= 0 for c in configs]
    fractions = dump.leaf_stops([c for c, ok in zip(configs, plain) if ok])
    found = iter(fractions)
    return [(next(found) or 0.0) if ok else 0.0 for ok in plain]


def predict_speedups(dump: DumpInput, configs: Sequence[TreeConfig], cost: CostModel) -> list[SpeedPrediction]:
    """Every config's prediction from one calibration dump, in the order given."""
    measured = dump.measure_many(list(configs), None)
    leaves = leaf_stop_fractions(dump, configs)
    return [predict(c, m, cost, dump.tree, f) for c, m, f in zip(configs, measured, leaves)]


def chains(depth: int) -> list[TreeConfig]:
    """The chains 1, 1_1, ... of depth 1..``depth``."""
    return [TreeConfig.from_lists([[1]] * d) for d in range(1, depth + 1)]


def candidate_configs(dump: DumpInput, cost: CostModel) -> list[TreeConfig]:
    """The shapes ``auto`` weighs: every chain up to the calibration depth, then the SEARCH_TOP shapes
    contained in the calibration tree by modelled speedup (shape search over the dump's
    acceptance model), without repeats."""
    tree = dump.tree
    found = list(chains(tree.gamma))
    if dump.stats.rounds and dump.stats.stats.num_visits:
        model = model_from_stats(dump.stats.stats, DEFAULT_MIN_COUNT, max(tree.gamma, dump.stats.stats.depths))
        search = search_shapes(model, tree.num_nodes, tree.gamma, cost, SEARCH_TOP, within=tree)
        found += [s.config for s in search.by_speedup]
    return distinct_configs(c for c in found if is_contained(c, tree))


def best_prediction(predictions: Sequence[SpeedPrediction]) -> SpeedPrediction | None:
    """The highest predicted speedup; ties go to fewer nodes, then to the shallower shape."""
    known = [p for p in predictions if p.speedup is not None]
    if not known:
        return None
    return max(known, key=lambda p: (round(p.speedup, 12), -p.config.num_nodes, -p.config.gamma))


def ceiling(predictions: Sequence[SpeedPrediction], cost: CostModel) -> Ceiling:
    """The best predicted shape and the all-accepted bound (module docstring)."""
    bounds = tuple(all_accepted_speedup(cost, d) for d in range(1, BOUND_MAX_DEPTH + 1))
    k = max(range(len(bounds)), key=lambda i: bounds[i])
    return Ceiling(best_prediction(predictions), bounds[k], k + 1, bounds)


def prediction_lines(predictions: Sequence[SpeedPrediction], measured: dict[str, float] | None = None) -> list[str]:
    """A table: shape, nodes, calibration acceptance, rounds, leaf stops, round cost, predicted (and
    measured) speedup. ``measured`` maps ``config.short()`` to a measured speedup."""
    head = f"{'shape':<24} {'nodes':>5} {'accepted':>8} {'rounds':>6} {'leaf':>5} {'round ms':>8} {'predicted':>9}"
    lines = [head + (f" {'measured':>9}" if measured is not None else "")]
    for p in predictions:
        acc = f"{p.accepted:8.2f}" if p.accepted is not None else f"{'-':>8}"
        leaf = f"{p.leaf_stops:5.2f}" if p.accepted is not None else f"{'-':>5}"
        rnd = f"{p.round_s * 1e3:8.0f}" if p.round_s is not None else f"{'-':>8}"
        pred = f"{p.speedup:8.3f}x" if p.speedup is not None else f"{'-':>9}"
        line = f"{p.config.short():<24} {p.config.num_nodes:>5} {acc} {p.rounds:>6} {leaf} {rnd} {pred}"
        if measured is not None:
            m = measured.get(p.config.short())
            line += f" {m:8.3f}x" if m is not None else f" {'-':>9}"
        if p.refused:
            line += f"  ({p.refused})"
        elif p.undecidable:
            line += f"  ({p.undecidable} calibration round(s) undecidable, left out)"
        lines.append(line)
    return lines


def ceiling_lines(c: Ceiling) -> list[str]:
    best = "none predicted" if c.best is None else f"{c.best.speedup:.3f}x ({c.best.config.short()})"
    return [
        f"ceiling, best searched shape at the measured acceptance: {best}",
        f"ceiling, every drafted token accepted: {c.bound:.3f}x (depth {c.bound_depth}; "
        "(d+1)*t_verify(1) / (d*draft_step + t_verify(d+1)))",
    ]
