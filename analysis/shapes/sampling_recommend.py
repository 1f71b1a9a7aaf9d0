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

On a run loaded in batches memory does not grow with rounds x candidates: each batch's outcomes are
folded into exactly rounded sums per candidate as they are made (order-independent, so the same
numbers as over the run's arrays; nothing per round is kept), while load_run reads the run
(``shapes_along``). When every candidate's full sums fit ALONG_SUMS_BYTES they give the whole
comparison, and the run is read once; otherwise only each candidate's ranking number is folded
(``_RankSums``: the sum summarize_sampling_sums takes), and the full comparison of the shapes shown
(the top N and the recorded one) reads the run again. At a T whose node_logprobs the manifest
records, every candidate is compared with its per-round outcomes in one go, as compare --temperature
does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.compare.sampling import ExactSum, SamplingComparison, means_of_sums
from analysis.compare.sampling_along import along_key, compare_sampling_loaded, comparison_along, loaded_sums
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.compare.sampling_parts import NOT_REFUSED, sampling_parts
from analysis.compare.sampling_subtrees import AtT
from analysis.compare.subtree import contained_configs
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig
from replay.core.sampling_recorded import recorded_column
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.runs import PerBatch, Run, iter_run_chunks
from replay.io.manifest import Manifest
from replay.util.errors import SpecReplayError

RANK_BY = "all_rounds_block_efficiency_lo"
# the most that every candidate's full sums may take while the run is read (shapes_along): within it
# the search at T reads the run once; above it, the shapes shown are read again
ALONG_SUMS_BYTES = 128 << 20


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
    Measured on the run's batch arrays (analysis.compare.sampling_batch): what shapes_along computed as
    load_run read the run, the rest read again."""
    shapes, configs = shapes_and_configs(run.config, budget, max_depth)
    if _per_round(temperature, run.replay.manifest):
        done = compare_sampling_loaded(run, configs, temperature, vocab_size, None, progress)
        return ranked_comparison(run.label, run.config, configs, shapes, done, top)
    key = along_key(configs, temperature, vocab_size, None, False)
    sums = loaded_sums(run, key)
    if sums is not None:
        numbers = sums.comparison(run.config).table[RANK_BY].to_numpy()
        return _shown(run, configs, shapes, numbers, top, lambda shown: sums.comparison(run.config, shown))
    ranks = _loaded_ranks(run, key)
    numbers = ranks.numbers() if ranks is not None else _rank_numbers(run, configs, temperature, vocab_size, progress)
    return _shown(
        run,
        configs,
        shapes,
        numbers,
        top,
        lambda shown: compare_sampling_run(
            run, [configs[i] for i in shown], [temperature], vocab_size, None, None, per_round=False
        ),
    )


def _per_round(temperature: float, manifest: Manifest) -> bool:
    """Whether the search at T compares every candidate with its per-round outcomes in one go: at a T
    whose node_logprobs the manifest records (else the two steps of the module docstring)."""
    return recorded_column(temperature, manifest.node_logprob_temperatures) is not None


def full_sums_fit(configs: list[TreeConfig]) -> bool:
    """Whether every candidate's full sums at one T (analysis.compare.sampling_sums.FoldedSums: an
    ExactSum of 2 + 2 gamma columns each) fit ALONG_SUMS_BYTES."""
    return sum(2 * (2 + 2 * c.gamma) * ExactSum.BINS * 8 for c in configs) <= ALONG_SUMS_BYTES


def shapes_along(
    budget: int, max_depth: int | None, temperature: float, vocab_of: Callable[[Manifest], int | None]
) -> Callable[[Run], PerBatch | None]:
    """analysis.tables.runs.load_run's ``per_run`` for recommend --temperature: shapes_at_temperature's
    numbers computed on each batch as the run is read. Every candidate's comparison where that is one
    pass (at a recorded T; or when their sums fit ALONG_SUMS_BYTES: the run is read once), else every
    candidate's ranking number (then only the shapes shown are read again). When ``vocab_of`` raises,
    nothing is computed along (the error comes where the command asks)."""

    def per_run(opened: Run) -> PerBatch | None:
        configs = shapes_and_configs(opened.tree, budget, max_depth)[1]
        per_round = _per_round(temperature, opened.manifest)
        if per_round or full_sums_fit(configs):
            return comparison_along(temperature, lambda _: configs, vocab_of, None, lambda _: per_round)(opened)
        try:
            vocab = vocab_of(opened.manifest)
        except SpecReplayError:
            return None
        ranks = _RankSums(configs, temperature, vocab, opened.manifest.node_logprob_temperatures)
        return lambda batch, res, tree: _RankAlong(ranks, ranks.fold_batch(batch, res, tree))

    return per_run


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


def _shown(run, configs, shapes, numbers: np.ndarray, top: int, compare_shown) -> ShapesAtT:
    """ShapesAtT from every candidate's ranking number (RANK_BY) and ``compare_shown(positions)``, the
    comparison of the shapes shown (the top N and the recorded one) without its per-round frame."""
    keys = pd.DataFrame(
        {
            "position": range(len(configs)),
            RANK_BY: numbers,
            "nodes": [c.num_nodes for c in configs],
            "candidate": [configs[0] in shapes] + [True] * (len(configs) - 1),
        }
    )
    order = _rank(keys)
    shown = sorted({0, *order["position"].head(top).tolist()})
    done = compare_shown(shown)
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


class _RankSums:
    """Each config's RANK_BY folded batch by batch (module docstring): per config one exactly rounded
    sum of the determined rounds' E[L] lower bounds (summarize_sampling_sums' sum: order-independent,
    so the same number as over the run's array), and the rounds used at T and replayed; nothing per
    round is kept."""

    def __init__(self, configs: list[TreeConfig], t: float, vocab_size: int | None, nodes) -> None:
        self.key = along_key(configs, t, vocab_size, None, False)
        self.configs, self.t, self.vocab_size, self.nodes = configs, t, vocab_size, nodes
        self.sums = [ExactSum() for _ in configs]
        self.lock = threading.Lock()
        self.used = self.rounds = 0

    def _fold(self, c: int, _t: float, at: AtT, _ordinals: np.ndarray) -> None:  # the replay's threads
        lo = at.lo[at.determined]
        with self.lock:
            self.sums[c].add(lo)

    def fold_batch(self, batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> int:
        """Fold a batch's rounds in (on the replay's threads); how many it replayed."""
        parts = sampling_parts(batch, res, tree, self.configs, [self.t], self._fold, self.vocab_size, 0.0, self.nodes)
        n = sum(p.ordinals.shape[0] for p in parts)
        with self.lock:
            self.used += sum(int((p.refused_at(self.t) == NOT_REFUSED).sum()) for p in parts)
            self.rounds += n
        return n

    def numbers(self) -> np.ndarray:
        """[configs] float64 each config's RANK_BY (NaN when no round was used at T)."""
        return np.asarray([means_of_sums(float(s.sums()[0]), self.used)["mean_acceptance_length"] for s in self.sums])


@dataclass(frozen=True, eq=False)
class _RankAlong:
    """One batch's share of the ranking numbers, computed while load_run read it (shapes_along)."""

    ranks: _RankSums  # the run's, shared by its batches
    rounds: int


def _loaded_ranks(run: LabelledRun, key) -> _RankSums | None:
    """The ranking numbers' sums computed for ``key`` as the run was read (every round once), else None."""
    along = run.read_along
    if not along or not all(isinstance(a, _RankAlong) and a.ranks.key == key for a in along):
        return None
    _check_rounds(along[0].ranks.rounds, run)
    return along[0].ranks


def _check_rounds(done: int, run: LabelledRun) -> None:
    if done != run.rounds:
        raise RuntimeError(
            f"recommend replayed {done} rounds of {run.label}, the run has {run.rounds}: a bug in the batch path"
        )


def _rank_numbers(run, configs, t: float, vocab_size, progress) -> np.ndarray:
    """Each config's RANK_BY on a batch-loaded run (_RankSums), the run read again chunk by chunk."""
    ranks = _RankSums(configs, t, vocab_size, run.replay.manifest.node_logprob_temperatures)

    def per_batch(batch, res, tree) -> None:
        ranks.fold_batch(batch, res, tree)
        if progress:
            with ranks.lock:
                progress(ranks.rounds, run.rounds)

    for _ in iter_run_chunks(run.replay.reopen(run.options), None, per_batch=per_batch):
        pass
    _check_rounds(ranks.rounds, run)
    return ranks.numbers()
