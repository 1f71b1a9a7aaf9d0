"""The report's section "Sampling at temperature T": per run, the expected block efficiency of every
compared config over the temperature grid (from the batch arrays for a run loaded in batches), its
table at a few T, and the rounds left out at some T, one entry per round.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
from markupsafe import Markup

from analysis.compare.sampling import sampling_display, without_scores
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig
from replay.core.temperature import format_temperature
from replay.engine.batch import BatchResult, RoundBatch
from replay.engine.sampling import vocab_size_of
from replay.io.skipped import Skipped, round_entry

from . import plots
from .options import ReportOptions, run_configs
from .page import SamplingCurve, figure_of, table_html


def _refused_lower(cell: str) -> str:
    """A display cell (``lo..hi``, several for P(L >= d)) with its refused lower bounds as "—"."""
    return " ".join("—.." + tok.split("..", 1)[1] if ".." in tok else tok for tok in str(cell).split(" "))


# the curve's grid points the page's table lists (tables/ has all): code is served near 0.2 and chat
# near 0.7, and a user at 0.7 should not have to open the CSV
SHOWN_TEMPERATURES = (0.0, 0.2, 0.5, 0.7, 1.0, 1.5)


def _some_temperatures(temps: Sequence[float], shown: int = 4) -> str:
    return ", ".join(format_temperature(t) for t in temps[:shown]) + (", …" if len(temps) > shown else "")


def _curve_skips(
    skipped: Iterable[tuple[str, float, str]], grid: Sequence[float]
) -> tuple[list[Skipped], list[float], str]:
    """The temperature curve's (round, T, reason) refusals as one skipped entry per round (in the order
    first refused), naming the T it was refused at ("T = 0.1, 0.2, 0.3, 0.4, … (15 of the curve's 16)")
    and why: a round refused at every T of the grid would otherwise be listed once per T. A round
    refused for different reasons at different T says each, with its own T. Also the T refused at
    and the first reason, from the same single walk: the refusals are made lazily as they are read
    (SkippedRounds), and a second walk would make them all again."""
    by_round: dict[str, dict[str, list[float]]] = {}
    temps: set[float] = set()
    first = ""
    for name, t, why in skipped:
        by_round.setdefault(name, {}).setdefault(why, []).append(t)
        temps.add(t)
        first = first or why
    out = []
    for name, whys in by_round.items():
        parts = []
        for why, at in whys.items():
            of = f" ({len(at)} of the curve's {len(grid)})" if len(at) > 1 else ""
            parts.append(f"no sampling replay at T = {_some_temperatures(sorted(at))}{of}: {why}")
        out.append(Skipped(round_entry(name), "; ".join(parts)))
    return out, sorted(temps), first


@dataclass(frozen=True)
class ScoresAlong:
    """Whether one batch's validate rows carry scores or node_logprobs (scores_along)."""

    scored: bool


def scores_along(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> ScoresAlong:
    """analysis.tables.runs.load_run's ``per_batch`` for report: whether the batch's validate rows
    carry anything a sampling replay at T > 0 reads, so that a run without (every round refused at
    every T > 0) is known without reading and replaying it again for the curve."""
    return ScoresAlong(batch.validate.logp is not None or batch.validate.node_logp is not None)


def _known_without_scores(run: LabelledRun, temperatures: Sequence[float]) -> bool:
    """Whether the curve of ``run`` would be without_scores (every round refused at every T > 0, for
    want of scores), from what scores_along found as the run was loaded; False where it was not."""
    along = run.read_along
    return (
        any(t > 0.0 for t in temperatures)
        and bool(along)
        and all(isinstance(a, ScoresAlong) and not a.scored for a in along or ())
    )


def sampling_curves(
    runs: Sequence[LabelledRun], opts: ReportOptions, out_tables: dict[str, pd.DataFrame]
) -> list[SamplingCurve]:
    """Per run with rounds: expected block efficiency of each compared config over the temperature
    grid (analysis.compare.sampling_batch.compare_sampling_run), or why there is none (no scores); the curves'
    rows go to ``out_tables["sampling_curve"]``."""
    curves, tables = [], []
    for run in runs:
        if not run.rounds:
            continue
        # compared on the batch arrays (analysis.compare.sampling_batch): whether the run has scores
        # is known from that comparison
        manifest = run.replay.manifest
        vocab = vocab_size_of(opts.vocab_size, manifest.vocab_size, manifest.path)
        tick = opts.progress(f"temperature curve {run.label}") if opts.progress else None
        if _known_without_scores(run, opts.temperatures):
            if tick:
                tick(run.rounds, run.rounds)
            curves.append(_without_scores_curve(run.label))
            continue
        done = compare_sampling_run(
            run, run_configs(run, opts), opts.temperatures, vocab, opts.gamma_threshold, tick, per_round=False
        )
        if without_scores(done):
            curves.append(_without_scores_curve(run.label))
            continue
        table = done.table
        tables.append(table.assign(run=run.label)[["run", *table.columns]])
        shown = table[table["temperature"].isin(SHOWN_TEMPERATURES)]
        display = sampling_display(shown)
        display.insert(0, "T", [format_temperature(t) for t in shown["temperature"]])
        notes = []
        if done.skipped:
            skipped, temps, first_reason = _curve_skips(done.skipped, opts.temperatures)
            notes.append(
                f"{run.label}: {len(skipped)} round(s) without a sampling replay at some T "
                f"({_some_temperatures(temps)}), left out there: " + first_reason
            )
            if opts.on_skipped:
                opts.on_skipped(run.label, skipped)
        if done.needs_vocab:
            above = (shown["temperature"] > 1.0).to_numpy()
            for col in (
                "expected_accepted_length",
                "expected_block_efficiency",
                "all_rounds_block_efficiency",
                "P(L >= d)",
            ):
                display.loc[above, col] = display.loc[above, col].map(_refused_lower)
            notes.append(
                f"{run.label}: at T > 1 the lower bounds need the vocabulary size (report --vocab-size V); "
                "without it they are refused (shown as —), the upper bounds stand"
            )
        fig = figure_of(
            plots.plot_temperature_curve(table, run.label, run.config.short(), done.needs_vocab),
            f"{run.label}: expected block efficiency against the target's sampling temperature, per config "
            "(band: all-rounds bounds). At T = 1 the band narrows, and closes where every child's token is in its "
            "parent's row: the scores are the target's probabilities at T = 1 (Z = 1 is known there), so a "
            "recorded child's probability is exact; at any other T, Z depends on the unrecorded tail.",
            opts.image_format,
        )
        curves.append(SamplingCurve(run.label, fig, table_html(display), notes))
    if tables:
        out_tables["sampling_curve"] = pd.concat(tables, ignore_index=True)
    return curves


def _without_scores_curve(label: str) -> SamplingCurve:
    why = "its validate rows have no scores: no temperature curve (sampling needs the target's scores, log-probs or probabilities; docs/dump-format.md)"
    return SamplingCurve(label, None, Markup(""), [f"{label}: {why}"])
