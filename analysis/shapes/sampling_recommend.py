"""``recommend --temperature T``: the tree shapes within a node budget ranked by expected block
efficiency at T, each measured on the recorded rounds by the sampling walk on its sub-tree.

The greedy recommendation models acceptance by (depth, rank) and searches every shape; at T the
walk takes any edge, and the dump determines a shape's sub-tree only where the recording holds it.
So the search at T is exact and exhaustive over the shapes the dump can check: every static config
contained in the recorded one (analysis.compare.subtree.contained_configs) within the budget and
the depth cap, measured by analysis.compare.sampling_batch.compare_sampling_run, the same function as
``compare --temperature``. Shapes are ranked by the all-rounds lower bound of the expected block
efficiency (an undetermined round counts at E[L] = 0, a round's tail bound at its low end): the
ranking never credits what the dump does not show. Ties keep the smaller tree first.

On a run loaded in batches the search is two passes, so that memory does not grow with rounds x
candidates: every candidate's ranking number, the run read chunk by chunk, each chunk's determined
E[L] lower bounds folded into an exactly rounded sum per candidate as they are made (``_rank_numbers``:
the sum summarize_sampling_arrays takes, order-independent, so the same number; nothing per round is
kept); then the full comparison of the shapes shown (the top N and the recorded one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.compare.sampling import ExactSum, SamplingComparison
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.compare.sampling_parts import NOT_REFUSED, sampling_parts
from analysis.compare.sampling_subtrees import AtT
from analysis.compare.subtree import contained_configs
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig
from replay.core.sampling_recorded import recorded_column
from replay.engine.runs import iter_run_chunks, open_run

RANK_BY = "all_rounds_block_efficiency_lo"


@dataclass(frozen=True, eq=False)
class ShapesAtT:
    """One dump's shapes at T, best first (the recorded config's row is ``recorded``)."""

    label: str
    recorded_config: TreeConfig
    candidates: int  # shapes checked (contained, within the budget and depth)
    ranked: pd.DataFrame  # analysis.compare.sampling.SAMPLING_COLUMNS + "rank", best first, top N
    recorded: pd.DataFrame  # the recorded config's row (rank among all candidates, or NaN when outside the budget)
    comparison: SamplingComparison


def candidate_shapes(recorded: TreeConfig, budget: int, max_depth: int) -> list[TreeConfig]:
    """The static configs contained in ``recorded`` with at most ``budget`` nodes and ``max_depth`` steps."""
    return [c for c in contained_configs(recorded) if c.num_nodes <= budget and c.gamma <= max_depth]


def shapes_at_temperature(
    run: LabelledRun,
    budget: int,
    max_depth: int | None,
    temperature: float,
    vocab_size: int | None = None,
    top: int = 5,
    progress: Callable[[int, int], None] | None = None,
) -> ShapesAtT:
    """Rank the candidate shapes of one dump at T (module docstring); ``max_depth`` defaults to the recorded gamma.
    Measured on the run's batch arrays (analysis.compare.sampling_batch)."""
    shapes, configs = shapes_and_configs(run.config, budget, max_depth)
    nodes = run.replay.manifest.node_logprob_temperatures
    if recorded_column(temperature, nodes) is None:
        return _two_passes(run, configs, shapes, temperature, vocab_size, top, progress)
    done = compare_sampling_run(run, configs, [temperature], vocab_size, None, progress)
    return ranked_comparison(run.label, run.config, configs, shapes, done, top)


def shapes_and_configs(
    recorded: TreeConfig, budget: int, max_depth: int | None
) -> tuple[list[TreeConfig], list[TreeConfig]]:
    """(the candidate shapes, the configs compared: the recorded one first, then the other shapes)."""
    shapes = candidate_shapes(recorded, budget, recorded.gamma if max_depth is None else max_depth)
    configs = [recorded, *[c for c in shapes if c.short() != recorded.short() or c.top_head != recorded.top_head]]
    return shapes, configs


def ranked_comparison(
    label: str,
    recorded: TreeConfig,
    configs: list[TreeConfig],
    shapes: list[TreeConfig],
    done: SamplingComparison,
    top: int,
) -> ShapesAtT:
    """ShapesAtT from the comparison ``done`` of every config in ``configs`` at one T."""
    table = done.table.copy()
    # the recorded config is always shown, as a reference; it is ranked only when within the budget
    table["candidate"] = [configs[0] in shapes] + [True] * (len(configs) - 1)
    ranked = table[table["candidate"]].sort_values([RANK_BY, "nodes"], ascending=[False, True], kind="stable")
    ranked = ranked.assign(rank=range(1, len(ranked) + 1))
    rec_row = table.iloc[[0]].assign(rank=ranked["rank"].get(0, float("nan")))
    return ShapesAtT(label, recorded, len(ranked), ranked.head(top), rec_row, done)


def _rank(table: pd.DataFrame) -> pd.DataFrame:
    """The candidates of ``table`` best first (RANK_BY high first, then fewer nodes; stable), with their rank."""
    ranked = table[table["candidate"]].sort_values([RANK_BY, "nodes"], ascending=[False, True], kind="stable")
    return ranked.assign(rank=range(1, len(ranked) + 1))


def _two_passes(run, configs, shapes, t, vocab_size, top, progress) -> ShapesAtT:
    """shapes_at_temperature on a batch-loaded run (module docstring): the same rows, ranks and skipped list."""
    keys = pd.DataFrame(
        {
            "position": range(len(configs)),
            RANK_BY: _rank_numbers(run, configs, t, vocab_size, progress),
            "nodes": [c.num_nodes for c in configs],
            "candidate": [configs[0] in shapes] + [True] * (len(configs) - 1),
        }
    )
    order = _rank(keys)
    shown = sorted({0, *order["position"].head(top).tolist()})
    done = compare_sampling_run(run, [configs[i] for i in shown], [t], vocab_size, None, None, per_round=False)
    table = done.table.assign(candidate=keys["candidate"].iloc[shown].to_list(), position=shown)
    got = table[RANK_BY].to_numpy()
    want = keys[RANK_BY].iloc[shown].to_numpy()
    if not np.array_equal(got, want, equal_nan=True):
        raise RuntimeError("recommend at T: the shown shapes' ranking numbers differ between its passes (a bug)")
    rank = dict(zip(order["position"], order["rank"]))
    table = table.assign(rank=[rank.get(p, float("nan")) for p in shown])
    ranked = table.set_index("position").loc[order["position"].head(top).tolist()].reset_index(drop=True)
    ranked = ranked.drop(columns="rank").assign(rank=range(1, len(ranked) + 1))
    rec_row = table.iloc[[0]].drop(columns=["position", "rank"]).assign(rank=rank.get(0, float("nan")))
    return ShapesAtT(run.label, run.config, len(order), ranked, rec_row, done)


def _rank_numbers(run, configs, t: float, vocab_size, progress) -> np.ndarray:
    """Each config's RANK_BY on a batch-loaded run: the run read again chunk by chunk, each chunk's
    determined E[L] lower bounds folded into one exactly rounded sum per config as they are made
    (summarize_sampling_arrays' sum: order-independent, so the same number as over the run's array)
    and the used rounds counted; nothing per round is kept."""
    sums = [ExactSum() for _ in configs]
    lock = threading.Lock()
    used, rounds = [0], [0]  # rounds used at T, rounds replayed
    total = run.rounds
    nodes = run.replay.manifest.node_logprob_temperatures

    def fold(c: int, _t: float, at: AtT, _ordinals: np.ndarray) -> None:  # the chunk's used rounds (replay threads)
        lo = at.lo[at.determined]
        with lock:
            sums[c].add(lo)

    def per_batch(batch, res, tree) -> None:
        parts = sampling_parts(batch, res, run.config, configs, [t], vocab_size, 0.0, fold, nodes)
        with lock:
            used[0] += sum(int((p.refused_at(t) == NOT_REFUSED).sum()) for p in parts)
            rounds[0] += sum(p.ordinals.shape[0] for p in parts)
            if progress:
                progress(rounds[0], total)

    for _ in iter_run_chunks(open_run(run.replay.directory, run.options), None, per_batch=per_batch):
        pass
    if rounds[0] != total:
        raise RuntimeError(
            f"recommend replayed {rounds[0]} rounds of {run.label}, the run has {total}: a bug in the batch path"
        )
    n = used[0]
    if not n:
        return np.full(len(configs), np.nan)
    return np.asarray([float(s.sums()[0]) / n + 1.0 for s in sums])
