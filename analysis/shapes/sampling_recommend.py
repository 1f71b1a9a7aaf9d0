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
candidates: every candidate's ranking number, batch by batch, keeping per round and candidate only
its determined flag and E[L] lower bound (``_rank_numbers``: the sum summarize_sampling_arrays takes,
over the same array); then the full comparison of the shapes shown (the top N and the recorded one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.compare.batch import per_batch_parts
from analysis.compare.sampling import SamplingComparison, exact_sums
from analysis.compare.sampling_batch import NOT_REFUSED, AtT, compare_sampling_run, sampling_parts
from analysis.compare.subtree import contained_configs
from analysis.tables.runs import BatchReplay, LabelledRun
from replay.core.config import TreeConfig
from replay.core.sampling_recorded import recorded_column

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
    A run loaded in batches is measured on its batch arrays (analysis.compare.sampling_batch)."""
    label, recorded = run.label, run.config
    shapes = candidate_shapes(recorded, budget, recorded.gamma if max_depth is None else max_depth)
    configs = [recorded, *[c for c in shapes if c.short() != recorded.short() or c.top_head != recorded.top_head]]
    nodes = run.replay.manifest.node_logprob_temperatures
    if isinstance(run.replay, BatchReplay) and recorded_column(temperature, nodes) is None:
        return _two_passes(run, configs, shapes, temperature, vocab_size, top, progress)
    done = compare_sampling_run(run, configs, [temperature], vocab_size, None, progress)
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
    """Each config's RANK_BY on a batch-loaded run: per batch, each config's determined flags and E[L]
    lower bounds only; then summarize_sampling_arrays' sum (exactly rounded) of the lower bounds."""

    def slim(batch, res, tree) -> list:
        out = []
        for p in sampling_parts(batch, res, run.config, configs, [t], vocab_size, 0.0, _flags_and_lo):
            use = p.refused[t > 0.0] == NOT_REFUSED
            at = [p.outcomes[(c, t)] for c in range(len(configs))]
            out.append((p.ordinals, use, np.stack([a.determined[use] for a in at]), np.stack([a.lo[use] for a in at])))
        return out

    parts = per_batch_parts(run, lambda b, res, tree: [_Slim(*x) for x in slim(b, res, tree)], progress)
    order = np.argsort(np.concatenate([p.ordinals[p.use] for p in parts] or [np.zeros(0, np.int64)]), kind="stable")
    n = order.shape[0]
    if not n:
        return np.full(len(configs), np.nan)
    det = np.concatenate([p.determined for p in parts], axis=1)[:, order]
    lo = np.concatenate([p.lo for p in parts], axis=1)[:, order]
    return np.asarray([float(exact_sums(lo[c][det[c], None])[0]) / n + 1.0 for c in range(len(configs))])


def _flags_and_lo(at: AtT) -> AtT:
    """What the ranking reads of a chunk's AtT: the determined flags and E[L] lower bounds (the rest emptied)."""
    f, i = np.zeros(0), np.zeros(0, dtype=np.int64)
    g, b, w = np.zeros((0, 0)), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int8)
    return AtT(at.determined, at.lo, f, g, g, b, i, w, i, i, at.needs_vocab)


@dataclass(frozen=True, eq=False)
class _Slim:
    """One part: its rounds' run positions, which are used at T, and per config [configs, used] the
    determined flag and the E[L] lower bound."""

    ordinals: np.ndarray  # per_batch_parts counts every round of every part
    use: np.ndarray
    determined: np.ndarray
    lo: np.ndarray
