"""``specreplay compare --temperature T``: other configs at temperature T (the table:
analysis.compare.sampling; walked on the batch arrays of a run loaded in batches, analysis.compare.sampling_batch).

Glue only: the options compare --temperature cannot use are refused, each run's configs are compared
at T, the table is printed (text, --csv, --json), the per-round outcomes written with --per-round,
and the rounds without a sampling replay at T listed as skipped (exit 1; exit 2 when none is left).
"""

from __future__ import annotations

import argparse
import json
import sys

from replay.core.temperature import format_temperature
from replay.engine.render import rounds_with_scores
from replay.engine.sampling import refused_with_scores, sampling_skip
from replay.util.atomic import atomic_path
from replay.util.errors import SpecReplayError
from replay.util.progress import progress_enabled

from .cmd_analysis import check_config_args, configs_from_args, load_runs_from_args, skipped_status
from .options import (
    no_rounds_error,
    no_rounds_in_runs,
    print_missing_node_logprobs,
    print_needs_vocab,
    print_skipped,
    print_unrecorded_temperature,
    sampling_vocab,
    vocab_sizes_json,
)

# compare's options that price or plot the greedy comparison: taken with --temperature they would do nothing.
_GREEDY_ONLY = {
    "cost": "--cost",
    "gamma_strategies": "--gamma-strategies",
    "ema_window": "--ema-window",
    "plot": "--plot",
}

SAMPLING_NOTE = (
    "a round is determined at T when the walk cannot reach a part of the config's tree that the recording "
    "does not determine; expected values are means over the determined rounds (lo..hi: bounds where the "
    "top-K scores leave the tail open), all_rounds also counts each undetermined round anywhere in "
    "[0, its draft steps] (docs/analysis.md, Other configs at T)"
)


def check_sampling_options(args: argparse.Namespace) -> None:
    """Refuse the options --temperature does not use, naming them (before any work)."""
    given = [flag for name, flag in _GREEDY_ONLY.items() if getattr(args, name, None) is not None]
    if given:
        raise SpecReplayError(
            f"{' and '.join(given)} with --temperature: compare at T reports expected acceptance only "
            "(no cost, strategies or plot); drop " + " and ".join(given) + " or --temperature"
        )


def run_compare_sampling(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.compare.configs import top_rows, unsimulated_threshold_notes
    from analysis.compare.sampling import undetermined_counts
    from analysis.compare.sampling_along import compare_sampling_loaded, comparison_along
    from analysis.tables.runs import TABLES_KEYS
    from replay.util.progress import tqdm_progress

    check_sampling_options(args)
    check_config_args(args)
    t = args.temperature
    # the comparison reads the batch arrays, not the tables: every config at T on each batch as it is read
    along = comparison_along(
        t,
        lambda tree: configs_from_args(args, tree),
        lambda manifest: sampling_vocab(args, manifest),
        args.gamma_threshold,
        lambda _: bool(args.per_round),
        gaps=True,
    )
    runs = load_runs_from_args(args, TABLES_KEYS, per_run=along)
    tables, per_round, reasons, skipped, needs_vocab = [], [], {}, {}, False
    args.vocab_used = {}  # per run, what _print's JSON reports
    args.refused_with_scores = {}  # per run, rounds with scores refused at T (a bad row): _print's count
    for run in runs:
        vocab = sampling_vocab(args, run.replay.manifest)  # --vocab-size, else the manifest's
        args.vocab_used[run.label] = vocab
        configs = configs_from_args(args, run.config)
        for note in unsimulated_threshold_notes(configs, run.config, args.gamma_threshold, run.label):
            print(f"specreplay: note: {note}", file=sys.stderr)
        update, close = tqdm_progress(
            f"compare {run.label} at T = {format_temperature(t)}", progress_enabled(args.no_progress)
        )
        try:
            # the per-round frame only for --per-round: at 10^6 rounds it holds ~9 GB; the table and the
            # reasons are summed block by block without it
            done = compare_sampling_loaded(
                run, configs, t, vocab, args.gamma_threshold, update, per_round=bool(args.per_round)
            )
        finally:
            close()
        skipped[run.label] = [sampling_skip(name, t, why) for name, _, why in done.skipped]
        args.refused_with_scores[run.label] = refused_with_scores(why for _, _, why in done.skipped)
        _note_missing_node_logprobs(run, t, {name for name, _, _ in done.skipped})
        if not int(done.table["rounds"].max()):
            if len(runs) == 1:
                raise no_rounds_error(run.replay.directory, [*run.replay.skipped, *skipped[run.label]], (), None)
            continue
        needs_vocab |= done.needs_vocab
        tables.append(done.table.assign(run=run.label))
        per_round.append(done.per_round.assign(run=run.label))
        reasons[run.label] = undetermined_counts(done)
    if not tables:
        for run in runs:
            print_skipped(skipped[run.label], run.label)
        raise no_rounds_in_runs([run.replay.directory for run in runs], t)
    table = pd.concat(tables, ignore_index=True)
    table = table[["run", *[c for c in table.columns if c != "run"]]]
    if args.top:
        table = top_rows(table, args.top, "all_rounds_block_efficiency_lo")
    if args.per_round:
        rounds = pd.concat(per_round, ignore_index=True)
        with atomic_path(args.per_round) as tmp:
            rounds[["run", *[c for c in rounds.columns if c != "run"]]].to_csv(tmp, index=False)
        print(f"wrote {args.per_round}", file=sys.stderr)
    _print(table, reasons, args)
    if needs_vocab:
        print_needs_vocab("compare", t)
    status = skipped_status(runs, args)
    for run in runs:
        print_skipped(skipped[run.label], run.label if len(runs) > 1 else None)
    return 1 if status or any(skipped.values()) else 0


def _note_missing_node_logprobs(run, t: float, refused: set[str]) -> None:
    """At a T the manifest records node_logprobs for, the rounds that carry them were compared from
    them (compare_sampling_run): say which replayed rounds had none to read, and why."""
    from analysis.compare.sampling_along import loaded_gaps
    from analysis.compare.sampling_batch import node_logprob_gaps_run
    from replay.core.sampling_recorded import recorded_column

    if recorded_column(t, run.replay.manifest.node_logprob_temperatures) is None:
        print_unrecorded_temperature("compare", t, run.replay.manifest)
        return
    gaps = loaded_gaps(run, t, refused) or node_logprob_gaps_run(run, t, refused)
    print_missing_node_logprobs("compare", t, run.replay.manifest, len(gaps[0]) + len(gaps[1]), gaps)


def _print(table, reasons, args: argparse.Namespace) -> None:
    from analysis.compare.configs import first_row_words
    from analysis.compare.sampling import reason_lines, sampling_display

    if args.json:
        body = {"temperature": args.temperature, "vocab_size": vocab_sizes_json(args.vocab_used), "note": SAMPLING_NOTE}
        body["gamma_threshold"] = args.gamma_threshold  # simulated for every config; null: the recorded stops only
        body["configs"] = json.loads(table.to_json(orient="records", double_precision=15))
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
        return
    if args.csv:
        compact = lambda v: json.dumps(list(v), separators=(",", ":"))  # noqa: E731  lists as JSON text
        lists = {c: table[c].map(compact) for c in ("top_head", "length_at_least_lo", "length_at_least_hi")}
        table.assign(**lists).to_csv(sys.stdout, index=False)
        return
    for run, grp in table.groupby("run", sort=False):
        first = grp.iloc[0]
        print(
            f"{run}: {rounds_with_scores(int(first['rounds']), args.temperature, args.refused_with_scores[run])} "
            f"at T = {format_temperature(args.temperature)}, " + first_row_words(first["config"], args.gamma_threshold)
        )
        print(sampling_display(grp).to_string(index=False))
        shown = set(grp["config"])
        for line in reason_lines({cfg: why for cfg, why in reasons[run].items() if cfg in shown}):
            print("  " + line)
        print()
    print("note: " + SAMPLING_NOTE)
