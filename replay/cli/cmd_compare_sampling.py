"""``specreplay compare --temperature T``: other configs at temperature T (the table:
analysis.compare.sampling; walked on the batch arrays of a run loaded in batches, analysis.compare.sampling_batch).

Glue only: compare's way at T (AT_TEMPERATURE, run by cmd_compare.run_compare): the options compare
--temperature cannot use are refused, each run's configs are compared at T, the table is printed (text,
--csv, --json); run_compare writes --per-round and lists the rounds without a sampling replay at T as
skipped (exit 1; exit 2 when none is left).
"""

from __future__ import annotations

import argparse

from replay.core.json_figures import frame_records
from replay.core.temperature import format_temperature
from replay.engine.render import rounds_with_scores
from replay.util.progress import progress_enabled, progress_while

from .cmd_analysis import RunAtT, each_run_at_temperature
from .compare_way import Compared, CompareWay, write_csv, write_per_round
from .options import (
    print_json,
    print_missing_node_logprobs,
    print_needs_vocab,
    print_notes,
    refuse_at_temperature,
    sampling_vocab,
    vocab_sizes_json,
)

# compare's options that price or plot the greedy comparison: taken with --temperature they would do nothing.
_GREEDY_ONLY = ("--cost", "--gamma-strategies", "--ema-window", "--plot")

SAMPLING_NOTE = (
    "a round is determined at T when the walk cannot reach a part of the config's tree that the recording "
    "does not determine; expected values are means over the determined rounds (lo..hi: bounds where the "
    "top-K scores leave the tail open), all_rounds also counts each undetermined round anywhere in "
    "[0, its draft steps] (docs/analysis.md, Other configs at T)"
)


def check_sampling_options(args: argparse.Namespace) -> None:
    """Refuse the options --temperature does not use, naming them (before any work)."""
    given = [flag for flag in _GREEDY_ONLY if getattr(args, flag[2:].replace("-", "_")) is not None]
    refuse_at_temperature(given, "compare at T reports expected acceptance only (no cost, strategies or plot)")


def _along_at_temperature(args: argparse.Namespace, configs_of) -> dict:
    """The comparison reads the batch arrays, not the tables: every config at T on each batch as it is read."""
    from analysis.compare.sampling_along import comparison_along

    along = comparison_along(
        args.temperature,
        configs_of,
        lambda manifest: sampling_vocab(args, manifest),
        args.gamma_threshold,
        lambda _: bool(args.per_round),
        gaps=True,
    )
    return {"per_run": along}


def compare_at_temperature(args: argparse.Namespace, runs: list, configs_of, _checked) -> Compared:
    """Each run's configs at T (RunAtT records, the SamplingComparison as result)."""
    done = each_run_at_temperature(args, runs, lambda run, vocab: _compare_run(args, run, vocab, configs_of))
    kept = [d for d in done if d.result is not None]
    return Compared(
        [d.result.table.assign(run=d.label) for d in kept],
        [d.result.per_round.assign(run=d.label) for d in kept],
        done,
    )


def _compare_run(args: argparse.Namespace, run, vocab: int | None, configs_of):
    from analysis.compare.configs import unsimulated_threshold_notes
    from analysis.compare.sampling_along import compare_sampling_loaded

    t = args.temperature
    configs = configs_of(run.config)
    print_notes(f"note: {n}" for n in unsimulated_threshold_notes(configs, run.config, args.gamma_threshold, run.label))
    bar = f"compare {run.label} at T = {format_temperature(t)}"
    with progress_while(bar, progress_enabled(args.no_progress)) as update:
        # the per-round frame only for --per-round: at 10^6 rounds it holds ~9 GB; the table and the
        # reasons are summed block by block without it
        done = compare_sampling_loaded(
            run, configs, t, vocab, args.gamma_threshold, update, per_round=bool(args.per_round)
        )
    _note_missing_node_logprobs(run, t, {name for name, _, _ in done.skipped})
    return done, int(done.table["rounds"].max()), done.skipped


def write_at_temperature(args: argparse.Namespace, table, compared: Compared) -> None:
    """The per-round file, the table (JSON, CSV or text) and the note of a missing vocabulary size."""
    write_per_round(args, compared.per_round)
    _print(table, compared.runs, args)
    if any(d.result.needs_vocab for d in compared.runs if d.result is not None):
        print_needs_vocab("compare", args.temperature)


def _note_missing_node_logprobs(run, t: float, refused: set[str]) -> None:
    """At a T the manifest records no node_logprobs for, that the numbers are bounds; at one it records,
    which replayed rounds had none to read (the others were compared from them), and why."""
    from analysis.compare.sampling_along import loaded_gaps
    from analysis.compare.sampling_batch import node_logprob_gaps_run
    from replay.core.sampling_recorded import recorded_column

    gaps: tuple[list[str], list[str]] = ([], [])
    if recorded_column(t, run.replay.manifest.node_logprob_temperatures) is not None:  # else no gaps to read
        gaps = loaded_gaps(run, t, refused) or node_logprob_gaps_run(run, t, refused)
    print_missing_node_logprobs("compare", t, run.replay.manifest, len(gaps[0]) + len(gaps[1]), gaps)


def _print(table, done: list[RunAtT], args: argparse.Namespace) -> None:
    from analysis.compare.configs import first_row_words
    from analysis.compare.sampling import met_lines, reason_lines, sampling_display, undetermined_counts

    t = args.temperature
    if args.json:
        vocab = vocab_sizes_json({d.label: d.vocab for d in done})
        body = {"temperature": t, "vocab_size": vocab, "note": SAMPLING_NOTE}
        body["gamma_threshold"] = args.gamma_threshold  # simulated for every config; null: the recorded stops only
        body["configs"] = frame_records(table)
        print_json(body)
        return
    if args.csv:
        write_csv(table, ("top_head", "length_at_least_lo", "length_at_least_hi"))
        return
    by_label = {d.label: d for d in done}
    for run, grp in table.groupby("run", sort=False):
        first = grp.iloc[0]
        print(
            f"{run}: {rounds_with_scores(int(first['rounds']), t, by_label[run].refused)} "
            f"at T = {format_temperature(t)}, " + first_row_words(first["config"], args.gamma_threshold)
        )
        print(sampling_display(grp).to_string(index=False))
        shown = set(grp["config"])
        reasons = undetermined_counts(by_label[run].result)
        for line in met_lines(grp) + reason_lines({cfg: why for cfg, why in reasons.items() if cfg in shown}):
            print("  " + line)
        print()
    print("note: " + SAMPLING_NOTE)


AT_TEMPERATURE = CompareWay(
    check_sampling_options,
    _along_at_temperature,
    compare_at_temperature,
    "all_rounds_block_efficiency_lo",
    write_at_temperature,
)
