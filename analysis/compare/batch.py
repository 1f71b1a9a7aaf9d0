"""``compare``'s per-config, per-round outcomes from the batch arrays (replay.engine.batch), vectorised.

The run's batches are those load_run kept, else the run read again (analysis.tables.runs.each_batch);
each batch's rounds of one tree shape are replayed with every config at once by
analysis.compare.subtree_batch (numpy over rounds, loops over levels and configs). Rounds come out in run order, so every mean sums in run order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.cost.model import CostModel
from analysis.cost.source import RunPricing
from analysis.tables.batch import run_ordinals
from analysis.tables.runs import LabelledRun, each_batch
from replay.core.config import TreeConfig
from replay.core.vocab import STOP_LEAF, STOP_MISMATCH, STOP_NO_ROW
from replay.engine.batch import BatchResult, RoundBatch, expanded_nodes, replayed_by_shape
from replay.engine.batch.frames import key_names
from replay.engine.runs import PerBatch

from .configs import COMPARE_COLUMNS, PER_ROUND_COLUMNS, is_own_tree, summarize_arrays, with_speed
from .gamma_strategies import GAMMA_FIELDS, GammaOutcomes, StrategyResult, simulate_strategy_arrays
from .subtree import RULE_FALLBACK, RULE_PATH, RULE_RECORDED_ORDER, UNDECIDABLE, WHY_NONE, reason_texts, truncated
from .subtree_batch import (
    NO_CANDIDATE,
    STOP_CODE_LEAF,
    STOP_CODE_MISMATCH,
    STOP_CODE_NO_ROW,
    STOP_CODE_UNDECIDABLE,
    SubOutcomes,
    replay_contained_many,
)
from .subtree_select import CODE_FALLBACK, CODE_PATH, CODE_RECORDED, selection_rules

_STOPS = np.empty(4, dtype=object)
_STOPS[[STOP_CODE_LEAF, STOP_CODE_MISMATCH, STOP_CODE_NO_ROW, STOP_CODE_UNDECIDABLE]] = [
    STOP_LEAF,
    STOP_MISMATCH,
    STOP_NO_ROW,
    UNDECIDABLE,
]
_RULES = np.empty(3, dtype=object)
_RULES[[CODE_PATH, CODE_RECORDED, CODE_FALLBACK]] = [RULE_PATH, RULE_RECORDED_ORDER, RULE_FALLBACK]

Progress = Callable[[int, int], None]


@dataclass(frozen=True, eq=False)
class ComparePart:
    """The replayed rounds of one tree shape of one batch, with every config's outcomes."""

    ordinals: np.ndarray  # [C] int64 position of each round in its run
    keys: np.ndarray  # [2, C] int64 round keys (named a_b only for the per-round frame: a string per round)
    rules: np.ndarray  # [C] int8 subtree_batch.CODE_* selection rule
    outcomes: list[SubOutcomes]  # one per config, [C] each
    nodes: np.ndarray  # [C] int64 draft nodes of each recorded round (its own tree, as replayed)


def compare_parts(
    batch: RoundBatch,
    res: BatchResult,
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    gamma_threshold: float = 0.0,
) -> list[ComparePart]:
    """Every config replayed on the rounds of ``batch`` that ``res`` replayed (``res.ok``), one shape at a time."""
    ordinals = run_ordinals(batch, res)
    parts = []
    for shape, members, b, r in replayed_by_shape(batch, res):
        outs = replay_contained_many(
            b, r, expanded_nodes(r, shape), shape, list(configs), recorded.gamma, gamma_threshold
        )
        outs = [as_replayed(r) if is_own_tree(cfg, recorded, gamma_threshold) else o for cfg, o in zip(configs, outs)]
        parts.append(ComparePart(ordinals[members], r.keys, selection_rules(b, r, shape), outs, r.num_nodes))
    return parts


def as_replayed(res: BatchResult) -> SubOutcomes:
    """The replay's own outcome of every round of ``res`` (all replayed), as a decided sub-tree walk."""
    length = res.accepted_length.astype(np.int64)
    steps = res.num_steps.astype(np.int64)
    return SubOutcomes(
        np.ones(len(res), dtype=bool),
        length,
        length.copy(),
        res.stop.astype(np.int8),
        steps,
        steps.copy(),
        np.full(len(res), WHY_NONE, dtype=np.int8),
        np.full(len(res), NO_CANDIDATE, dtype=np.int64),
    )


def join_compare(
    parts: Sequence[ComparePart],
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    cost: CostModel,
    gamma_threshold: float | None = None,
    per_round: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The (summary, per-round) frames from the parts of one run, rounds in run order.
    ``per_round=False``: the per-round frame is left empty (one row per round and config, it is most
    of compare's memory at a million rounds, and only ``--per-round`` writes it)."""
    if not parts:
        return pd.DataFrame([], columns=COMPARE_COLUMNS), pd.DataFrame([])
    ords = np.concatenate([p.ordinals for p in parts])
    order = np.argsort(ords, kind="stable")
    if per_round:
        names = key_names(np.concatenate([p.keys for p in parts], axis=1)[:, order])
        rules = _RULES[np.concatenate([p.rules for p in parts])[order]]
    fields = SubOutcomes.__dataclass_fields__ if per_round else ("decided", "lower", "upper", "steps_lo", "steps_hi")
    rows, frames = [], []
    for k, cfg in enumerate(configs):
        o = {f: np.concatenate([getattr(p.outcomes[k], f) for p in parts])[order] for f in fields}
        if is_own_tree(cfg, recorded, gamma_threshold):
            nodes_lo = nodes_hi = np.concatenate([p.nodes for p in parts])[order].astype(np.int64)
        else:
            nodes = np.concatenate([[0], np.cumsum([sum(row) for row in cfg.top_k_spec])]).astype(np.int64)
            nodes_lo, nodes_hi = nodes[o["steps_lo"]], nodes[o["steps_hi"]]  # draft nodes of the first s steps
        rows.append(
            summarize_arrays(
                cfg,
                recorded,
                cost,
                o["decided"],
                o["lower"],
                o["upper"],
                o["steps_lo"],
                o["steps_hi"],
                nodes_lo,
                nodes_hi,
            )
        )
        if not per_round:
            continue
        frames.append(
            {
                "config": np.full(names.shape[0], cfg.short(), dtype=object),
                "round": names,
                "decided": o["decided"],
                "lower": o["lower"],
                "upper": o["upper"],
                "stop": _STOPS[o["stop"]],
                "steps_lo": o["steps_lo"],
                "steps_hi": o["steps_hi"],
                "rule": rules,
                "reason": reason_texts(o["why"], o["lower"], o["why_rank"]),
            }
        )
    per_round = (
        pd.DataFrame({c: np.concatenate([f[c] for f in frames]) for c in PER_ROUND_COLUMNS})
        if configs and per_round
        else pd.DataFrame([])
    )
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS), per_round


def per_batch_parts(
    run: LabelledRun, parts_of: Callable[[RoundBatch, BatchResult, TreeConfig], list], progress: Progress | None
):
    """``parts_of(batch, result, recorded tree)`` on every batch of a batch-loaded run (analysis.tables.runs.
    each_batch: the batches load_run kept, else the run read again), on several threads; with progress
    in rounds; every round must come back once."""
    total = run.rounds
    lock, done = threading.Lock(), [0]

    def per_batch(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> list:
        parts = parts_of(batch, res, tree)
        if progress:
            with lock:  # batches are replayed on several threads
                done[0] += int(res.ok.sum())
                progress(done[0], total)
        return parts

    return _every_round([p for chunk in each_batch(run, per_batch) for ps in chunk for p in ps], run)


def _every_round(parts: list, run: LabelledRun) -> list:
    got, total = sum(p.ordinals.shape[0] for p in parts), run.rounds
    if got != total:
        raise RuntimeError(
            f"compare replayed {got} rounds of {run.label}, the run has {total}: a bug in the batch path"
        )
    return parts


@dataclass(frozen=True, eq=False)
class ReadAlong:
    """compare_parts of one batch, computed while load_run read it (compare_along)."""

    configs: tuple[TreeConfig, ...]
    gamma_threshold: float
    parts: list[ComparePart]


def compare_along(
    configs_of: Callable[[TreeConfig], Sequence[TreeConfig]], gamma_threshold: float | None = None
) -> PerBatch:
    """analysis.tables.runs.load_run's ``per_batch`` for compare: the configs ``configs_of(the run's
    tree)`` replayed on each batch as it is read, so that compare reads and replays the run once
    (run_parts takes them from ``run.read_along``)."""
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)
    lock, memo = threading.Lock(), {}

    def per_batch(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> ReadAlong:
        with lock:  # batches are replayed on several threads; the configs are found once per tree
            if tree not in memo:
                memo[tree] = tuple(configs_of(tree))
        return ReadAlong(memo[tree], threshold, compare_parts(batch, res, tree, memo[tree], threshold))

    return per_batch


def run_parts(
    run: LabelledRun,
    configs: Sequence[TreeConfig],
    gamma_threshold: float | None = None,
    progress: Progress | None = None,
) -> list[ComparePart]:
    """Every config replayed on a batch-loaded run's rounds: those load_run computed as it read the run
    (compare_along) when they are of these configs, else the run read again in batches."""
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)
    along = run.read_along
    if along and all(
        isinstance(a, ReadAlong) and a.configs == tuple(configs) and a.gamma_threshold == threshold for a in along
    ):
        return _every_round([p for a in along for p in a.parts], run)
    return per_batch_parts(run, lambda batch, res, tree: compare_parts(batch, res, tree, configs, threshold), progress)


def compare_run(
    run: LabelledRun,
    configs: Sequence[TreeConfig],
    cost: CostModel | None = None,
    gamma_threshold: float | None = None,
    progress: Progress | None = None,
    per_round: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, per-round) frames of ``configs`` replayed on a loaded run, from the batch arrays.
    ``progress(rounds done, rounds)``; ``per_round=False`` leaves the per-round frame empty (join_compare)."""
    cost = cost or CostModel.default()
    parts = run_parts(run, configs, gamma_threshold, progress)
    return join_compare(parts, run.config, configs, cost, gamma_threshold, per_round)


def outcomes_by_gamma_run(run: LabelledRun, cfg: TreeConfig, gamma_threshold: float | None = None) -> GammaOutcomes:
    """Every truncation of ``cfg`` (gamma = 1..cfg.gamma) replayed on a loaded run's batch arrays,
    as per-round arrays (recorded early stops of ``run.config`` inherited)."""
    subs = [truncated(cfg, g) for g in range(1, cfg.gamma + 1)]
    parts = run_parts(run, subs, gamma_threshold)
    order = np.argsort(np.concatenate([p.ordinals for p in parts] or [np.zeros(0, dtype=np.int64)]), kind="stable")
    # each [G, R] field filled row by row in place (rows stacked afterwards would copy them all again)
    out = {f: np.empty((len(subs), order.shape[0]), dtype=bool if f == "decided" else np.int64) for f in GAMMA_FIELDS}
    for k, sub in enumerate(subs):
        for f in ("decided", "lower", "upper", "steps_lo", "steps_hi"):
            pieces = [getattr(p.outcomes[k], f) for p in parts] or [np.zeros(0, dtype=out[f].dtype)]
            np.take(np.concatenate(pieces).astype(out[f].dtype, copy=False), order, out=out[f][k])
        nodes = np.concatenate([[0], np.cumsum([sum(row) for row in sub.top_k_spec])]).astype(np.int64)
        np.take(nodes, out["steps_lo"][k], out=out["nodes_lo"][k])
        np.take(nodes, out["steps_hi"][k], out=out["nodes_hi"][k])
    return GammaOutcomes(**out)


def simulate_run_strategies(
    run: LabelledRun,
    cfg: TreeConfig,
    strategies: Sequence[int],
    cost: CostModel | None = None,
    ema_window: int = 1,
    gamma_threshold: float | None = None,
) -> list[StrategyResult]:
    """Each gamma strategy simulated on a loaded run (recorded gamma: ``run.config``'s), its per-gamma
    outcomes from the batch arrays."""
    cost = cost or CostModel.default()
    outs = outcomes_by_gamma_run(run, cfg, gamma_threshold)
    return [simulate_strategy_arrays(outs, cfg, s, cost, ema_window) for s in strategies]


def priced_comparison(
    run: LabelledRun,
    configs: Sequence[TreeConfig],
    pricing: RunPricing,
    gamma_threshold: float | None = None,
    progress: Progress | None = None,
    per_round: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The configs with cost and measured speedup, as compare and report show them: compare_run's
    (summary, per-round) frames, the summary with_speed under ``pricing`` (analysis.cost.source.run_pricing)."""
    table, rounds = compare_run(run, configs, pricing.cost, gamma_threshold, progress, per_round)
    return with_speed(table, run.config, pricing.cost, pricing.measured), rounds


def ema_window_of(run: LabelledRun, given: int | None = None) -> int:
    """The emaWindow the EMA strategies use: ``given``, else the run's emaWindow setting, else 1."""
    return given or int(run.replay.config.settings.get("emaWindow", 1) or 1)
