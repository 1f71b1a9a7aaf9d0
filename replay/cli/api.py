"""The notebook API (docs/api.md): a few plain functions over the analysis package.

Thin on purpose: each function calls what the commands call (runs.load_runs, tables.build_tables,
metrics.all_metrics, compare.batch.priced_comparison, cost.source.run_pricing, ...), so a notebook and
``specreplay stats | compare | report`` print the same numbers. Plots: ``analysis.report.plots`` and
``analysis.report.treeplot`` take the tables these functions return and give matplotlib Figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Union

import pandas as pd

from analysis.compare.batch import priced_comparison
from analysis.compare.configs import parse_config_arg, speed_row
from analysis.cost.model import CostModel
from analysis.cost.source import replay_cost, run_pricing
from analysis.report.example_round import ExampleRound, example_round as _example_round
from analysis.tables.build import Tables, build_tables
from analysis.tables.definitions import definitions_rows
from analysis.tables.metrics import all_metrics
from analysis.tables.runs import LabelledRun, load_runs
from replay.core.config import SpecConfig, TreeConfig, distinct_configs, load_config, parse_config
from replay.core.config_grammar import parse_spec
from replay.core.sampling_problems import VocabTooSmall
from replay.core.temperature import format_temperature
from replay.engine.batch.sampling_frames import sampling_objects
from replay.engine.runs import ReplayOptions
from replay.engine.sampling import SAMPLING_KEYS, VocabBelowCandidates, vocab_size_of
from replay.engine.sampling_runs import replay_sampling
from replay.io.dumpnames import parse_round_key
from replay.util.errors import SpecReplayError
from replay.util.words import round_name

PathLike = Union[str, Path]


def _config(config: PathLike | Mapping | SpecConfig | None) -> SpecConfig | None:
    if config is None or isinstance(config, SpecConfig):
        return config
    if isinstance(config, Mapping):
        return parse_config(dict(config), "<config given to replay.cli.api.load>")
    if isinstance(config, Path):
        return load_config(config)
    return parse_spec(config, "config")  # any form of docs/config-grammar.md, a file path included


def load(
    paths: PathLike | Sequence[PathLike],
    labels: Sequence[str] | None = None,
    *,
    config: PathLike | Mapping | SpecConfig | None = None,
    layout: str | None = None,
    step0_offset: tuple[int, int] | None = None,
    progress: bool = False,
) -> list[LabelledRun]:
    """Replay one or more dump directories or packed runs (``specreplay pack``); one LabelledRun each.

    Reading options default to each dump's manifest, as on the command line; ``config`` (a JSON
    file, a dict or a SpecConfig) overrides the recorded tree config. Rounds that cannot be replayed
    are listed in ``run.replay.skipped`` with their reason, never dropped silently.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    opts = ReplayOptions(config=_config(config), layout=layout, step0_offset=step0_offset)
    return load_runs([str(p) for p in paths], opts, labels, progress)


def _tables(runs_or_tables: Sequence[LabelledRun] | Tables) -> Tables:
    return runs_or_tables if isinstance(runs_or_tables, Tables) else build_tables(runs_or_tables)


def tables(runs: Sequence[LabelledRun]) -> Tables:
    """The round and node tables of ``runs`` (``.rounds``, ``.nodes``; columns in docs/analysis.md)."""
    return build_tables(runs)


def rounds_table(runs: Sequence[LabelledRun]) -> pd.DataFrame:
    """One row per round of every run (column ``run`` tells them apart)."""
    return build_tables(runs).rounds


def nodes_table(runs: Sequence[LabelledRun]) -> pd.DataFrame:
    """One row per tree node of every round, root included."""
    return build_tables(runs).nodes


def metrics(runs_or_tables: Sequence[LabelledRun] | Tables) -> dict[str, pd.DataFrame]:
    """Every metric table by name: summary, accepted_length, depth_acceptance, rank_of_hit,
    hit_outcome, parent_slot, slot_hits, node_hits (what ``specreplay stats`` prints)."""
    return all_metrics(_tables(runs_or_tables))


def definitions() -> pd.DataFrame:
    """name, formula, meaning and the engines' name of every metric (docs/vocabulary.md)."""
    return pd.DataFrame(definitions_rows())


def cost_model(run: LabelledRun, cost: CostModel | None = None) -> CostModel:
    """The cost model the run's speedups use: ``cost`` when given, else measured timings beside
    the dump (cost_curve.json, then the manifest), else the default relative cost; ``.source`` says which."""
    return replay_cost(run.replay, cost)


def speed(runs: Sequence[LabelledRun], cost: CostModel | None = None) -> pd.DataFrame:
    """Per run: modelled speedup with its cost source, and the measured speedups (NaN without a baseline
    timed together with the run; ``measured_status`` says ``measured`` or ``not comparable: REASON``)."""
    rows = []
    for run in runs:
        if run.rounds:
            pricing = run_pricing(run.replay, run.label, cost)
            rows.append(speed_row(run.label, run.sizes, pricing.cost, pricing.measured))
    return pd.DataFrame(rows)


def compare(run: LabelledRun, configs: Sequence[str | TreeConfig], cost: CostModel | None = None) -> pd.DataFrame:
    """Replay other tree configs exactly on the run's rounds (``specreplay compare``): one row per
    config, the recorded one first. A config is a TreeConfig or text in any form of
    docs/config-grammar.md (``"[4]|[2,2]|[1,1]"``, ``"4,2x2,1x1"``, ``"[[4],[2,2],[1,1]]"``, JSON, a file)."""
    chosen = [run.config]
    for c in configs:
        chosen.extend([c] if isinstance(c, TreeConfig) else parse_config_arg(str(c)))
    pricing = run_pricing(run.replay, run.label, cost)
    table, _ = priced_comparison(run, distinct_configs(chosen), pricing, per_round=False)
    return table


def example_round(run: LabelledRun, key: str | tuple[int, int] | None = None) -> ExampleRound:
    """The round ``key`` (``"124_140"`` or a tuple), else the run's typical failing round; ``.result``
    is the round's RoundView (replay.engine.batch.view; draw it with ``analysis.report.treeplot.plot_round_tree``),
    ``.why`` how it was chosen."""
    if isinstance(key, str):
        try:
            key = parse_round_key(key)
        except ValueError as exc:
            raise SpecReplayError(f"example round: {exc}") from None
    pick = _example_round(run, key)
    if pick is None:
        raise SpecReplayError(f"{run.label}: no round {round_name(key)} in {run.replay.directory}")
    return pick


def sampling(
    path: PathLike,
    temperatures: float | Sequence[float],
    *,
    vocab_size: int | None = None,
    config: PathLike | Mapping | SpecConfig | None = None,
    layout: str | None = None,
) -> pd.DataFrame:
    """Sampling-mode replay (docs/analysis.md "Sampling-mode replay"): one row per round and temperature,
    the numbers of ``specreplay replay --temperature T --json``.

    Columns: round, then replay.engine.sampling.SAMPLING_KEYS: temperature, expected_accepted_length
    (NaN where its bounds differ: replay.core.point_value), its _lo/_hi, expected_block_efficiency_lo/_hi,
    length_at_least_lo/_hi (lists, d = 1, 2, ...), exact, accepted_length_variance (NaN unless exact), from_node_logprobs (exact from
    the dump's node_logprobs at a recorded T). ``vocab_size`` defaults to the manifest's. Rounds that
    cannot be used (no scores, bad rows) are not rows: they are in ``frame.attrs["skipped"]`` as
    (round, temperature, reason). ``frame.attrs["notes"]`` lists what the numbers need said (above
    T = 1 without a vocabulary size, the lower bounds are refused: 0). A bad temperature, a
    vocab_size that the manifest contradicts, or one below the recorded candidates per row, raises
    SpecReplayError.
    """
    from replay.core.temperature import check_temperature

    temps = [temperatures] if isinstance(temperatures, (int, float)) else list(temperatures)
    try:
        temps = [check_temperature(t) for t in temps]
    except ValueError as exc:
        raise SpecReplayError(f"sampling: {exc}") from None
    opts = ReplayOptions(config=_config(config), layout=layout)
    try:
        run = replay_sampling(path, opts, temps, lambda manifest: _vocab_of(vocab_size, manifest))
    except (VocabBelowCandidates, VocabTooSmall) as exc:  # wrong for the whole dump, in the API's words
        raise SpecReplayError(f"sampling: {exc}".replace("from --vocab-size", "from vocab_size=")) from None
    res = run.replay.result
    rows, skipped = [], [(s.what, None, s.reason) for s in run.replay.skipped]
    notes: list[str] = []
    for t, at in zip(temps, run.at):
        names = [round_name(key) for key in res.keys[:, at.rows].T.tolist()]
        rows += [{"round": n, **obj} for n, obj in zip(names, sampling_objects(at.sampling, res, at.rows))]
        skipped += [
            (round_name(key), t, why.replace("from --vocab-size", "from vocab_size=")) for key, why in at.refused
        ]
        if at.sampling.needs_vocab:  # the CLI's print_needs_vocab, for a frame: a lower bound of 0 is no measurement
            notes.append(
                f"at T = {format_temperature(t)} > 1 the lower bounds need the vocabulary size (vocab_size=V, or vocab_size in "
                "manifest.json): the _lo columns are 0 (refused), the upper bounds stand"
            )
    frame = pd.DataFrame(rows, columns=["round", *SAMPLING_KEYS])
    for c in ("expected_accepted_length", "accepted_length_variance"):
        frame[c] = frame[c].astype(float)  # None (no value) as NaN
    frame.attrs["skipped"] = skipped
    frame.attrs["notes"] = notes
    return frame


def _vocab_of(vocab_size: int | None, manifest):
    """The vocabulary size at T (replay.engine.sampling.vocab_size_of), in the API's words when it conflicts."""
    try:
        return vocab_size_of(vocab_size, manifest.vocab_size, manifest.path)
    except ValueError as exc:
        raise SpecReplayError(f"sampling: {exc}".replace("--vocab-size", "vocab_size")) from None


__all__ = [
    "load",
    "sampling",
    "tables",
    "rounds_table",
    "nodes_table",
    "metrics",
    "definitions",
    "cost_model",
    "speed",
    "compare",
    "example_round",
    "LabelledRun",
    "Tables",
]
