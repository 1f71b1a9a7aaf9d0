"""The per-round reference over a whole run, for the oracle tests: a run replayed round by round
(replay.testing.replayer.replay_directory, every RoundResult in memory) and the run-level
computations of the round path that the batch engine must equal (stats at T, recommend's
measurements of contained configs, the leaf stops of generate --config auto).

No run-time module uses these: commands and the API replay on the batch engine
(analysis.tables.runs.load_run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from analysis.compare.subtree import is_contained
from analysis.cost.model import CostModel
from analysis.shapes.dumps import DumpInput, Measured, Totals
from analysis.shapes.recommend import Recommendation, recommend_dumps
from analysis.tables.definitions import ROUND_COLUMNS_READ
from analysis.tables.sampling import RunSampling
from replay.core.config import TreeConfig
from replay.core.vocab import STOP_LEAF
from replay.engine.options import ReplayOptions
from replay.engine.sampling import sampling_skip
from replay.testing.replayer import DirectoryReplay, RoundResult, replay_directory
from replay.testing.round_sampling import round_sampling
from replay.testing.stats_reference import dump_stats_from_results
from replay.testing.subtree_walk import replay_subconfig_all
from replay.testing.table_rows import round_rows
from replay.util.progress import tqdm_progress


@dataclass(frozen=True, eq=False)
class ReferenceRun:
    """A run replayed by the per-round reference under a label (LabelledRun's oracle)."""

    label: str
    replay: DirectoryReplay

    @property
    def results(self) -> tuple[RoundResult, ...]:
        return self.replay.results

    @property
    def config(self):
        return self.replay.tree


def load_reference(
    path: str, label: str, opts: ReplayOptions = ReplayOptions(), progress: bool | None = None
) -> ReferenceRun:
    """One run by the scalar reference path (every RoundResult in memory)."""
    update, close = tqdm_progress(f"replay {label}", progress)
    try:
        return ReferenceRun(label, replay_directory(path, opts, update))
    finally:
        close()


def reference_run_sampling(
    run: ReferenceRun, temperature: float, vocab_size: int | None, node_temperatures: Sequence[float] | None
) -> RunSampling:
    """analysis.tables.sampling.run_sampling round by round (replay.testing.round_sampling.round_sampling)."""
    lo, hi, ge_lo, ge_hi, exact, own, used, skipped = [], [], [], [], [], [], [], []
    needs_vocab = False
    for res in run.results:
        try:
            smp = round_sampling(res, temperature, vocab_size, node_temperatures)
        except ValueError as exc:
            skipped.append(sampling_skip(res.name, temperature, str(exc)))
            continue
        lo.append(smp.expected_lo)
        hi.append(smp.expected_hi)
        ge_lo.append(smp.length_ge_lo)
        ge_hi.append(smp.length_ge_hi)
        exact.append(smp.exact)
        own.append(smp.from_node_logprobs)
        used.append(round_rows(res, run.label, run.config.short()))
        needs_vocab |= smp.needs_vocab
    depth = max((len(g) for g in ge_lo), default=0)

    def table(rows: list[tuple[float, ...]]) -> np.ndarray:
        out = np.zeros((len(rows), depth + 2))
        out[:, 0] = 1.0
        for i, row in enumerate(rows):
            out[i, 1 : 1 + len(row)] = row
        return out

    return RunSampling(
        run.label,
        float(temperature),
        np.asarray(lo, dtype=np.float64),
        np.asarray(hi, dtype=np.float64),
        table(ge_lo),
        table(ge_hi),
        np.asarray(exact, dtype=bool),
        np.asarray(own, dtype=bool),
        {c: _column([row[c] for row in used]) for c in ROUND_COLUMNS_READ["summary"] if c != "run"},
        tuple(skipped),
        needs_vocab,
    )


def _column(cells: list) -> np.ndarray:
    """[R] a round column from the reference rows (replay.testing.table_rows), integers as int64."""
    values = np.asarray(cells)
    return values.astype(np.int64) if values.dtype.kind in "iu" or not values.shape[0] else values


def subtree_measure(results: Sequence[RoundResult], recorded: TreeConfig) -> Callable[[TreeConfig], Measured | None]:
    """Exact measurements by replay.testing.subtree_walk for every config contained in ``recorded``: each round
    replayed with the config and the recording's own selection rule, recorded early stops inherited
    (as ``specreplay compare`` does). Not contained (or no rounds): None, a live run is needed.
    """

    def measure(cfg: TreeConfig) -> Measured | None:
        if not results or not is_contained(cfg, recorded):
            return None
        outs = replay_subconfig_all(results, cfg, 0.0, None, recorded.gamma)
        totals = Totals()
        totals.add(
            np.array([o.decided for o in outs]), np.array([o.lower for o in outs]), np.array([o.upper for o in outs])
        )
        return totals.measured()

    return measure


def dump_from_replay(rep: DirectoryReplay) -> DumpInput:
    """A replayed directory (the reference path)."""
    measure = subtree_measure(rep.results, rep.tree)
    return DumpInput(
        rep.directory,
        rep.tree,
        dump_stats_from_results(rep.results, rep.tree.gamma),
        tuple(rep.skipped),
        lambda cfgs, progress=None: [measure(c) for c in cfgs],
        rep.warnings,
    )


def recommend(
    replays: Sequence[DirectoryReplay],
    budget: int,
    max_depth: int | None = None,
    cost: CostModel | None = None,
    **options,
) -> Recommendation:
    """Estimate, search and compare from replayed directories (the reference path). ``max_depth``
    defaults to the deepest recorded tree; ``options``: recommend_dumps' (top, min_count,
    bootstrap, seed, extrapolate, ...)."""
    return recommend_dumps([dump_from_replay(r) for r in replays], budget, max_depth, cost, **options)


def leaf_stop_fractions(rep: DirectoryReplay, configs: Sequence[TreeConfig]) -> list[float]:
    """analysis.shapes.speedpredict.leaf_stop_fractions round by round (replay.testing.subtree_walk)."""
    out = []
    for c in configs:
        if c.gamma_threshold > 0 or not is_contained(c, rep.tree):
            out.append(0.0)
            continue
        decided = [o for o in replay_subconfig_all(rep.results, c, 0.0, None, rep.tree.gamma) if o.decided]
        out.append(sum(o.stop == STOP_LEAF for o in decided) / len(decided) if decided else 0.0)
    return out


def reference_compare_sampling(
    run: ReferenceRun,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None = None,
    gamma_threshold: float | None = None,
):
    """analysis.compare.sampling_batch.compare_sampling_run round by round (replay.testing.compare_at_t)."""
    from replay.testing.compare_at_t import compare_sampling

    nodes = run.replay.manifest.node_logprob_temperatures
    return compare_sampling(
        list(run.results), run.config, configs, temperatures, vocab_size, gamma_threshold, None, nodes
    )


def reference_shapes_at_temperature(
    run: ReferenceRun, budget: int, max_depth: int | None, temperature: float, vocab_size: int | None, top: int = 5
):
    """analysis.shapes.sampling_recommend.shapes_at_temperature round by round."""
    from analysis.shapes.sampling_recommend import ranked_comparison, shapes_and_configs

    shapes, configs = shapes_and_configs(run.config, budget, max_depth)
    done = reference_compare_sampling(run, configs, [temperature], vocab_size)
    return ranked_comparison(run.label, run.config, configs, shapes, done, top)
