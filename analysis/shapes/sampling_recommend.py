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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from analysis.compare.sampling import SamplingComparison
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.compare.subtree import contained_configs
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig

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
    done = compare_sampling_run(run, configs, [temperature], vocab_size, None, progress)
    table = done.table.copy()
    # the recorded config is always shown, as a reference; it is ranked only when within the budget
    table["candidate"] = [configs[0] in shapes] + [True] * (len(configs) - 1)
    ranked = table[table["candidate"]].sort_values([RANK_BY, "nodes"], ascending=[False, True], kind="stable")
    ranked = ranked.assign(rank=range(1, len(ranked) + 1))
    rec_row = table.iloc[[0]].assign(rank=ranked["rank"].get(0, float("nan")))
    return ShapesAtT(label, recorded, len(ranked), ranked.head(top), rec_row, done)
