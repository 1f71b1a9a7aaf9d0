"""``specreplay stats | plot``: thin CLI layers over the analysis library, and the input handling
every analysis command shares (``compare`` and ``report`` are in cmd_compare.py).

Heavy modules (pandas, matplotlib) are imported inside the command functions, so ``--help``
stays fast. Every command reads dump directories with the replay's options (add_dump_options).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.tables.definitions import METRIC_TABLES
from replay.core.config import distinct_configs
from replay.core.headline import metric_text
from replay.core.json_figures import figures_text, frame_records
from replay.core.point_value import BOUNDS_MET, met_not_exact
from replay.core.temperature import format_temperature
from replay.io.skipped import count_skipped, counted_skips, describe_skipped, disagreement, why_no_rounds
from replay.io.sources import require_dump_source
from replay.io.table_files import frame_csv_text
from replay.util.atomic import staged_directory
from replay.util.errors import SpecReplayError
from replay.util.file_formats import FileFormats
from replay.util.pathcheck import OutputDir
from replay.util.progress import progress_enabled, tqdm_progress
from replay.util.words import round_name

from .options import (
    LEFT_OUT,
    ExitStatus,
    add_command,
    add_dump_input,
    add_dump_options,
    add_json_csv,
    add_no_progress,
    add_output,
    add_sampling_options,
    no_rounds_error,
    no_rounds_in_runs,
    note_files_left,
    note_on_stderr,
    note_written,
    options_from_args,
    parse_key,
    print_grid_skipped,
    print_json,
    print_missing_node_logprobs,
    print_needs_vocab,
    print_notes,
    print_reading,
    print_skipped,
    sampling_vocab,
)

TABLE_NAMES = (*METRIC_TABLES, "rounds", "nodes")

STATS_EPILOG = """\
examples:
  specreplay stats sample_dumps/synthetic_article
  specreplay stats engine_dump/ harness_dump/ --label engine --label harness
  specreplay stats DUMP --table depth_acceptance --csv > depth.csv
  specreplay stats DUMP --json > metrics.json      # one JSON object: every table
  specreplay stats DUMP -o tables/                 # also every table as CSV and Parquet
  specreplay stats sample_dumps/synthetic_article --temperature 0.7   # expectations at T = 0.7, lo..hi

Metrics and their formulas: docs/analysis.md.
"""

PLOT_EPILOG = """\
examples:
  specreplay plot sample_dumps/synthetic_article -o plots/
  specreplay plot engine_dump/ harness_dump/ -o plots/ --format png
  specreplay plot sample_dumps/article_round -o plots/ --round 124_140 --tokenizer tokenizer.json

Writes accepted_length, depth_acceptance, runs_side_by_side (2+ runs), and per run rank_heatmap_RUN,
parent_slot_RUN, tree_hits_RUN and round_RUN (one round's tree; token text with --tokenizer). The
round drawn is a typical failing one (the middle round, in dump order, of the most common accepted
length among rounds that stopped on a mismatch; docs/analysis.md) unless --round names one.
"""


def add_runs_input(p: argparse.ArgumentParser) -> None:
    add_dump_input(p, "dirs", many=True, help="dump directory or packed run (several: side by side)")
    add_dump_options(p)
    p.add_argument("--label", action="append", help="name of a run, once per DUMP in order (default: directory names)")
    add_no_progress(p)


@dataclass(frozen=True)
class LoadedRuns:
    """The runs a command uses (each with rounds), and how many it left out (none replayed)."""

    runs: list
    left_out: int  # listed on stderr as they were read; the exit status says so (skipped_status)


def load_runs_from_args(
    args, tables: str | None = None, per_batch=None, per_run=None, keep_bytes: int = 0
) -> LoadedRuns:
    """Replay every DUMP; a run without a single replayable round is reported and left out.

    ``tables``: what the command reads besides the replay (analysis.tables.runs.TABLES_FULL, the
    default, TABLES_METRICS, TABLES_ROUNDS or TABLES_KEYS); ``per_batch``, ``per_run``: computed on each batch as it
    is read; ``keep_bytes``: the batches kept within that memory (analysis.tables.runs.load_run)."""
    from analysis.tables.runs import REFUSED_ALONE, REFUSED_EVERY, TABLES_FULL, load_runs, runs_with_rounds

    for d in args.dirs:
        require_dump_source(d)
    runs = load_runs(
        args.dirs,
        options_from_args(args),
        getattr(args, "label", None),  # recommend has no --label
        progress_enabled(args.no_progress),
        tables or TABLES_FULL,
        per_batch,
        per_run,
        keep_bytes,
    )
    use = runs_with_rounds([run.rounds for run in runs])
    if use.refused == REFUSED_ALONE:
        (run,) = runs
        raise no_rounds_error(run.replay.directory, run.replay.skipped, run.replay.warnings, run.label)
    for run in (runs[k] for k in use.left_out):  # the kept runs' warnings come with their skips
        print_reading(run.replay, run.label)  # why, before saying the run is left out
        print_notes([f"no round could be replayed{why_no_rounds(run.replay.skipped)}; left out"], run.label)
    if use.refused == REFUSED_EVERY:
        raise no_rounds_in_runs(args.dirs)
    return LoadedRuns([runs[k] for k in use.kept], len(use.left_out))


def run_heading(run) -> str:
    """A run's name in stats' header line: its directory, and its label before it only when the label
    is not the directory's own name (--label, or a #2 for a second run of that name), never "a: a"."""
    from analysis.tables.runs import dir_label

    directory = str(run.replay.directory)
    return directory if run.label == dir_label(directory) else f"{run.label}: {directory}"


def check_round_arg(args) -> None:
    """``--round A_B`` of plot and report: a round some DUMP has, checked on the file names before
    any round is read (replay.engine.runs.require_round; the message lists the nearest rounds)."""
    from replay.engine.runs import require_round

    if args.show_round is None:
        return
    for d in args.dirs:
        require_dump_source(d)
    require_round(args.dirs, args.show_round, options_from_args(args))


def check_round_replayed(runs, args) -> None:
    """After the replay: ``--round``'s round must have replayed in some run (its files can be there
    and still fail to read); else the same message, with the reason it was skipped."""
    from analysis.report.example_round import has_round
    from replay.io.skipfold import no_such_round
    from replay.util.errors import RoundNotFoundError

    key = args.show_round
    if key is None or any(has_round(r, key) for r in runs):
        return
    first = runs[0]
    keys = list(first.keys)
    raise RoundNotFoundError(
        first.replay.directory, no_such_round(key, keys, ", ".join(args.dirs), first.replay.skipped)
    )


def skipped_status(loaded: LoadedRuns, at_t: dict[str, tuple] | None = None) -> int:
    """Exit status: 1 when rounds were skipped or runs left out, else 0; all listed on stderr, the
    reading's first, then ``at_t``'s (run label -> its rounds without a sampling replay at T: each_run_at_temperature)."""
    for run in loaded.runs:
        print_reading(run.replay, run.label)
    at_t = at_t or {}
    for label, skipped in at_t.items():
        print_skipped(skipped, label)
    return 1 if loaded.left_out or any(run.replay.skipped for run in loaded.runs) or any(at_t.values()) else 0


@dataclass(frozen=True)
class RunAtT:
    """What a command computed for one run at --temperature T (each_run_at_temperature)."""

    label: str
    vocab: int | None  # --vocab-size, else the manifest's (sampling_vocab)
    result: Any  # the command's own; None when no round of the run has a sampling replay at T
    skipped: tuple  # the rounds without a sampling replay at T (sampling_skip)
    refused: int  # of those, the rounds with scores refused at T (a bad row): the headers count them apart


def each_run_at_temperature(args, runs: list, compute: Callable) -> list[RunAtT]:
    """Each run at --temperature T: ``compute(run, vocab)`` gives (its result, the rounds it used, its
    skipped rounds as (name, key, why)). A run without a round at T is refused (exit 2) when alone,
    else left out; when every run is, each one's rounds are listed and the command refused."""
    from analysis.tables.runs import REFUSED_ALONE, REFUSED_EVERY, runs_with_rounds
    from replay.engine.sampling import refused_with_scores, sampling_skip

    t = args.temperature
    done, used = [], []
    for run in runs:
        vocab = sampling_vocab(args, run.replay.manifest)
        result, rounds, skipped = compute(run, vocab)
        used.append(int(bool(rounds)))
        skips = tuple(sampling_skip(name, t, why) for name, _, why in skipped)
        refused = refused_with_scores(why for _, _, why in skipped)
        done.append(RunAtT(run.label, vocab, result if rounds else None, skips, refused))
    use = runs_with_rounds(used)
    if use.refused == REFUSED_ALONE:
        (run,), (d,) = runs, done
        raise no_rounds_error(run.replay.directory, [*run.replay.skipped, *d.skipped])
    if use.refused == REFUSED_EVERY:
        for d in done:
            print_skipped(d.skipped, d.label)
        raise no_rounds_in_runs([run.replay.directory for run in runs], t)
    return done


TYPED_COLUMNS = ("temperature",)  # printed as given (:g), not at the tables' 4 decimals


def _print_table(df, args) -> None:
    out = sys.stdout  # looked up per call: tests and pipes swap sys.stdout
    if getattr(args, "json", False):
        out.write(figures_text(frame_records(df), indent=1, separators=(",", ":")) + "\n")
    elif getattr(args, "csv", False):
        out.write(frame_csv_text(df))  # list columns as text (replay.io.table_files)
    else:
        # a temperature is a parameter the user typed, not a measurement: 1e-09 stays 1e-09, not 0.0000
        exact = {col: "{:g}".format for col in TYPED_COLUMNS if col in df.columns}
        out.write(df.to_string(index=False, float_format=metric_text, formatters=exact, na_rep="–") + "\n")


def configs_for(given: list, recorded, contained: bool = False) -> list:
    """A run's configs: ``given`` (parse_config_options) and, with ``contained``, every config contained
    in the recorded one, the recorded first; neither: the recorded one and a few contained ones."""
    from analysis.compare.subtree import contained_configs

    configs = list(given)
    if contained:
        configs.extend(contained_configs(recorded))
    if not configs:
        from analysis.report.options import default_comparison_configs  # the report and matplotlib: only here

        return default_comparison_configs(recorded)
    return distinct_configs([recorded] + configs)


def parse_config_options(args) -> list:
    """The configs of --configs, --grid and --generate (notes printed): parsed once, before the
    replay, so a typo fails before any work."""
    from analysis.compare.configs import generate_funnels, is_generator_text, parse_config_arg, parse_config_list_arg

    configs, notes = [], []
    for text in args.configs or []:
        configs.extend(parse_config_arg(text, "--configs", notes))
    if args.grid and is_generator_text(args.grid):
        note_on_stderr('note: --grid "root=... heads=..." is deprecated; use --generate (--grid is a list of configs)')
        configs.extend(generate_funnels(args.grid, "--grid"))
    elif args.grid:
        listed, skipped = parse_config_list_arg(args.grid, "--grid", notes)
        print_grid_skipped(skipped)
        configs.extend(listed)
    if getattr(args, "generate", None):
        configs.extend(generate_funnels(args.generate, "--generate"))
    print_notes(notes)
    return configs


PLOT_FORMATS = FileFormats((".png", ".svg", ".pdf"))  # --plot FILE: the image format its suffix names


# --- stats -------------------------------------------------------------------------------------


def run_stats(args: argparse.Namespace) -> int:
    from analysis.compare.configs import runs_side_by_side
    from analysis.tables.build import build_tables, export_tables
    from analysis.tables.definitions import DEPTH_NAMES, SUMMARY_NAMES, definitions_rows, definitions_text
    from analysis.tables.metrics import DEPTH_HEADER, all_metrics, depth_display, derived_notes
    from analysis.tables.runs import TABLES_FULL, TABLES_KEYS, TABLES_METRICS
    from replay.core.vocab import DEPTH_RULE

    if args.temperature is not None:  # the expectations at T read the rounds' replay, not the tables
        from analysis.tables.sampling_batch import sampling_along

        along = sampling_along(args.temperature, lambda manifest: sampling_vocab(args, manifest))
        return _stats_sampling(args, load_runs_from_args(args, TABLES_KEYS, per_run=along))
    whole = args.export or args.table in ("rounds", "nodes")  # only these show the tables themselves
    loaded = load_runs_from_args(args, TABLES_FULL if whole else TABLES_METRICS)
    runs = loaded.runs
    tables = build_tables(runs)
    named = {**all_metrics(tables), "rounds": tables.rounds, "nodes": tables.nodes}
    if args.export:
        _export(export_tables, named, args.export)
    if args.table:
        text = not (args.json or args.csv)  # files and JSON keep the interval columns apart
        _print_table(
            depth_display(named[args.table]) if text and args.table == "depth_acceptance" else named[args.table], args
        )
    elif args.json:
        body = {k: frame_records(v) for k, v in named.items() if k not in ("rounds", "nodes")}
        body["configs"] = {r.label: r.replay.config.to_json() for r in runs}
        body["definitions"] = definitions_rows(SUMMARY_NAMES + DEPTH_NAMES)
        print_json(body)
    elif args.csv:
        _print_table(named["summary"], args)
    else:
        out = sys.stdout
        for run in runs:
            out.write(
                f"{run_heading(run)}  config {run.config.short()} topHead {list(run.config.top_head)} "
                f"({run.rounds} rounds replayed, skipped: {describe_skipped(run.replay.skipped)})\n"
            )
            sel = tables.rounds[tables.rounds["run"] == run.label]["selection"].value_counts()
            out.write("  selection: " + ", ".join(f"{k} x{v}" for k, v in sel.items()) + "\n")
        out.write("\n== summary ==\n")
        if len(runs) > 1:
            out.write(runs_side_by_side(tables.rounds).to_string(float_format=metric_text) + "\n")
        else:
            _print_table(named["summary"], args)
        for note in derived_notes(named["summary"]):
            out.write(f"  note: {note}\n")
        for name in ("accepted_length", "depth_acceptance", "hit_outcome", "parent_slot", "slot_hits", "node_hits"):
            head = {"accepted_length": "", "depth_acceptance": f" ({DEPTH_HEADER})"}.get(name, f" ({DEPTH_RULE})")
            out.write(f"\n== {name}{head} ==\n")
            _print_table(depth_display(named[name]) if name == "depth_acceptance" else named[name], args)
        out.write("\n== definitions (docs/vocabulary.md) ==\n" + definitions_text(SUMMARY_NAMES + DEPTH_NAMES) + "\n")
    return skipped_status(loaded)


def _export(export_tables, named: dict, out_dir: str) -> None:
    """stats -o: every table written beside ``out_dir`` first, then moved in (an interrupt leaves the
    earlier files or the new ones); the directory's other files stay."""
    with staged_directory(out_dir, whole=False) as staging:
        paths = export_tables(named, staging)
    note_written(out_dir, files=paths)
    note_files_left(out_dir, paths)


def _stats_sampling(args: argparse.Namespace, loaded: LoadedRuns) -> int:
    """--temperature: the summary, histogram and per-depth rates as expectations at T (analysis.tables.sampling)."""
    from analysis.tables.build import export_tables
    from analysis.tables.runs import REFUSED_ALONE, REFUSED_EVERY, runs_with_rounds
    from analysis.tables.sampling import SAMPLING_TABLES, bounds_display, run_sampling, sampling_tables

    if args.table is not None and args.table not in SAMPLING_TABLES:
        raise SpecReplayError(
            f"--table {args.table} with --temperature: at T only {', '.join(SAMPLING_TABLES)} have an expectation "
            "(the others read the target's top-1 at each node: drop --temperature for them)"
        )
    t, runs = args.temperature, loaded.runs
    parts = [
        run_sampling(r, t, sampling_vocab(args, r.replay.manifest), r.replay.manifest.node_logprob_temperatures)
        for r in runs
    ]
    # a run without a round at T, beside others, stays in the header ("0 of N replayed rounds usable")
    use = runs_with_rounds([p.expected_lo.shape[0] for p in parts])
    if use.refused == REFUSED_ALONE:  # replay's words: the reasons come with the error
        (run,) = runs
        raise no_rounds_error(run.replay.directory, [*run.replay.skipped, *parts[0].skipped], run.replay.warnings)
    for run, part in zip(runs, parts):
        print_skipped(part.skipped, run.label)
    if use.refused == REFUSED_EVERY:
        raise no_rounds_in_runs(args.dirs, t)
    named = sampling_tables(parts)
    if args.export:
        _export(export_tables, {f"{k}_sampling": v for k, v in named.items()}, args.export)
    if args.table:
        _print_table(named[args.table] if args.json or args.csv else bounds_display(named[args.table]), args)
    elif args.json:
        tables = {k: frame_records(v) for k, v in named.items()}
        body = {"temperature": t, **tables}
        body["skipped"] = [{"run": p.label, "what": s.what, "reason": s.reason} for p in parts for s in p.skipped]
        print_json(body)
    elif args.csv:
        _print_table(named["summary"], args)
    else:
        out = sys.stdout
        for run, part in zip(runs, parts):
            n, exact, own = part.expected_lo.shape[0], int(part.exact.sum()), int(part.from_node_logprobs.sum())
            lo, hi = (float(a.mean()) if n else 0.0 for a in (part.expected_lo, part.expected_hi))
            met = f"; one value shown: {BOUNDS_MET}" if n and met_not_exact(lo, hi, exact == n) else ""
            # rounds the reading refused never reach T: counted apart, as the greedy header counts them
            when_read = run.replay.skipped
            read = f", {counted_skips(when_read)} when read" if any(count_skipped(when_read)) else ""
            out.write(
                f"{run_heading(run)}  config {run.config.short()} at T = {format_temperature(t)}: {n} of "
                f"{run.rounds} replayed rounds usable, {exact} exact ({own} from node_logprobs), "
                f"skipped: {len(part.skipped)} at T{read}{disagreement(when_read)}{met}\n"
            )
        for name in SAMPLING_TABLES:
            out.write(f"\n== {name} at T = {format_temperature(t)} (expected; lo..hi where the dump bounds it) ==\n")
            _print_table(bounds_display(named[name]), args)
    if any(p.needs_vocab for p in parts):
        print_needs_vocab("stats", t)
    for run, part in zip(runs, parts):  # the note of an unrecorded T, else of the rounds without node_logprobs
        missing = int((~part.from_node_logprobs).sum())
        print_missing_node_logprobs("stats", t, run.replay.manifest, missing, part.gaps)
    status = skipped_status(loaded)
    return 1 if status or any(p.skipped for p in parts) else 0


# --- plot --------------------------------------------------------------------------------------


def run_plot(args: argparse.Namespace) -> int:
    from analysis.report import plots, treeplot
    from analysis.report.fonts import any_script
    from analysis.tables.build import build_tables
    from analysis.tables.metrics import all_metrics
    from analysis.tables.runs import TABLES_METRICS
    from analysis.tables.slot_hits import static_shape

    decode = treeplot.load_decoder(args.tokenizer) if args.tokenizer else None  # a bad one fails before any work
    check_round_arg(args)
    loaded = load_runs_from_args(args, TABLES_METRICS)
    runs = loaded.runs
    check_round_replayed(runs, args)  # before writing
    picks = {run.label: _round_to_draw(run, args.show_round) for run in runs if run.rounds}
    tables = build_tables(runs)
    m = all_metrics(tables)
    fmts = args.format or list(plots.FORMATS)
    out = Path(args.output)
    written: list = []
    with_rounds = [run for run in runs if run.rounds]
    figures = 2 + (len(runs) > 1) + 4 * len(with_rounds)
    update, close = tqdm_progress("plot", progress_enabled(args.no_progress))

    def save(fig, name: str) -> None:  # one figure written: one step of the bar
        written.extend(out / p.name for p in plots.save_figure(fig, staging, name, fmts))
        update(len(written) // len(fmts), figures)

    # the figures are drawn beside -o and moved in together: an interrupt leaves the earlier ones
    with staged_directory(out, whole=False) as staging, contextlib.ExitStack() as bar, any_script(note_on_stderr):
        bar.callback(close)
        save(plots.plot_accepted_length(m["accepted_length"]), "accepted_length")
        save(plots.plot_depth_acceptance(m["depth_acceptance"]), "depth_acceptance")
        if len(runs) > 1:
            save(plots.plot_compare_runs(m["summary"], m["depth_acceptance"]), "runs_side_by_side")
        for run in with_rounds:
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run.label)
            save(
                plots.plot_rank_heatmap(m["rank_of_hit"], m["hit_outcome"], run.label, run.config),
                f"rank_heatmap_{safe}",
            )
            save(plots.plot_parent_slot(m["parent_slot"], run.label, run.rounds), f"parent_slot_{safe}")
            sh = m["slot_hits"]
            save(
                treeplot.plot_tree_hits(static_shape(run.config), sh[sh["run"] == run.label], run.label, run.config),
                f"tree_hits_{safe}",
            )
            pick = picks[run.label]
            save(treeplot.plot_round_tree(pick.result, decode, run.label, pick.why), f"round_{safe}")
    note_written(out, files=written)
    note_files_left(out, written)
    return skipped_status(loaded)


def _round_to_draw(run, key):
    """--round's round, else (or where this run lacks it) the run's typical failing round."""
    from analysis.report.example_round import example_round

    pick = example_round(run, key)
    if pick is None:  # another run has the round: this one shows its typical failing round
        pick = example_round(run)
        print_notes([f"no round {round_name(key)}; drawing {pick.result.name}, {pick.why}"], run.label)
    return pick


# --- registration ------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "stats",
        run_stats,
        help="acceptance metrics tables of one or more dump directories",
        description="Per-round and per-node tables and the metrics built on them.",
        epilog=STATS_EPILOG,
        exits=ExitStatus(LEFT_OUT),
    )
    add_runs_input(p)
    p.add_argument(
        "--table",
        choices=TABLE_NAMES,
        help="print only this table (default: --json every table, the text every table but the long rank_of_hit, --csv the summary)",
    )
    add_json_csv(
        p,
        ": every table by name (with --table: that table's rows, one JSON array)",
        "CSV output (the summary, or --table)",
    )
    add_sampling_options(p)
    add_output(
        p,
        OutputDir("every table to {dir}/NAME.csv and {dir}/NAME.parquet", prints=True),
        "also write every table as CSV and Parquet into directory DIR (made if new; its parent must exist)",
        dest="export",
        metavar="DIR",
        aliases=["--export"],
    )

    p = add_command(
        sub,
        "plot",
        run_plot,
        help="acceptance plots (PNG and SVG)",
        description="Draw every acceptance plot.",
        epilog=PLOT_EPILOG,
        exits=ExitStatus(LEFT_OUT),
    )
    add_runs_input(p)
    add_output(
        p,
        OutputDir("the plots to {dir}/NAME.png and .svg"),
        "output directory",
        dest="output",
        metavar="DIR",
        required=True,
    )
    p.add_argument("--format", nargs="+", choices=("png", "svg"), help="image formats (default: both)")
    p.add_argument("--tokenizer", help="tokenizer.json (or a model directory) for token text on the round picture")
    p.add_argument(
        "--round",
        "--show-round",
        dest="show_round",
        type=parse_key,
        help="round to draw, as A_B (default: a typical failing round, docs/analysis.md)",
    )
