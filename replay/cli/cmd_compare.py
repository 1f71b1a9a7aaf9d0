"""``specreplay compare | report``: thin CLI layers over analysis.compare.configs and analysis.report.html.

Both take configs (--configs, --grid, --generate) and a cost model (--cost); reading the dumps is
shared with stats and plot (cmd_analysis.py).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.core.json_figures import figures_text, frame_records
from replay.util.atomic import atomic_path
from replay.util.errors import SpecReplayError, printable
from replay.util.pathcheck import OutputDir, input_file_or_json
from replay.util.progress import progress_enabled, progress_while
from replay.util.words import counted

from .cmd_analysis import (
    PLOT_FORMATS,
    add_runs_input,
    check_round_arg,
    check_round_replayed,
    configs_for,
    load_runs_from_args,
    parse_config_options,
    skipped_status,
)
from .compare_way import Compared, CompareWay, run_first, write_csv, write_per_round
from .options import (
    CSV_FORMATS,
    LEFT_OUT,
    ExitStatus,
    add_command,
    add_json_csv,
    add_output,
    add_output_file,
    add_sampling_options,
    at_least_one,
    gamma_threshold_arg,
    note_on_stderr,
    note_written,
    parse_key,
    print_json,
    print_notes,
    print_skipped,
)

if TYPE_CHECKING:  # the analysis modules are imported by the commands that use them
    from analysis.cost.source import RunPricing

COMPARE_EPILOG = """\
examples:
  specreplay compare sample_dumps/synthetic_article
  specreplay compare DUMP --configs "[6]|[2,2]|[1,1]" 4,1x1,1 "[[3],[1,1]]" other_tree.json
  specreplay compare DUMP --grid "6,2x2,1x1;4|6,1x1;2_1" --cost '{"tokens": [1, 16], "verify_s": [0.38, 0.95], "draft_step_s": 0.08}'
  specreplay compare DUMP --generate "root=2,4,6 heads=1,2 width=1,2 gamma=1:3" --cost cost.json
  specreplay compare DUMP --contained --top 15 --csv > configs.csv
  specreplay compare DUMP --gamma-strategies 0 1 2 3 4 --ema-window 4
  specreplay compare DUMP --plot compare.svg --per-round rounds.csv --json > compare.json
  specreplay compare sample_dumps/synthetic_article --contained --top 5 --temperature 0.7   # configs at T = 0.7

A config is in any form of docs/config-grammar.md: [6]|[2,2]|[1,1] (what the config column
prints), 6,2x2,1x1 (sweep's grid form), 6_2x2_1x1 (a sweep's run name), a topKSpec list
[[6],[2,2],[1,1]] (topHead = row lengths), a JSON tree or specTree object, or a file. --grid is a
list of configs separated by ';', as sweep --grid ('|' alternatives in grid-form items). --generate
builds funnels: root width, heads per step, width per head, gamma (a:b = range). Every config is replayed exactly on each recorded round; rounds the dump cannot decide
(the config would expand a node the recording did not) are counted and bound the results:
x.xxxx..y.yyyy. Without configs: the recorded one and a few contained ones. The cost model gives the
modelled speedup  (Σ (L + 1)) · t_verify(1) / Σ (steps · draft_step_s + t_verify(nodes + 1)).
Its source, printed per run: --cost {"tokens": [...], "verify_s": [...], "draft_step_s": x} (a file or inline),
else cost_curve.json beside the dump, else the manifest's measured round timings, else the default
relative cost (a WARNING says the speedup is then only modelled). When the manifest holds a
target-only baseline timed together with the run (one interleaved session: totals.timing), the
recorded config's measured speedup, decode only (prefill excluded) in the table and end to end
(prefill included) in the line above it, is shown next to the modelled one; a baseline timed apart
(an older manifest: totals.timing null) shows "not comparable" with the reason. The columns
modelled_speedup_lo/_hi (--csv, --json) are modelled, never measured (docs/output-schema.md).
--temperature T: each config's expected accepted length and block efficiency when the target
samples at T (the sampling walk on the config's sub-tree; needs scores on the validate rows), over
the rounds where the recording determines the reachable sub-tree; the others are counted as
undetermined, with why (docs/analysis.md "Other configs at T"). --top then ranks by the
all-rounds block efficiency lower bound.
"""

REPORT_EPILOG = """\
examples:
  specreplay report sample_dumps/synthetic_article -o report/
  specreplay report engine_dump/ harness_dump/ -o report/ --label engine --label harness
  specreplay report DUMP -o report/ --configs "[4]|[2,2]|[1,1]" --cost cost.json --tokenizer tok.json
  specreplay report DUMP -o report/ --budget 16 --max-depth 4    # tree-shape recommendation
  specreplay report sample_dumps/qwen2.5-coder/* -o report/     # measured and modelled speedup side by side
  specreplay report sample_dumps/qwen2.5-coder/article -o report/ --vocab-size 151936   # temperature curve, bounds to T = 1.5

Writes OUTPUT/index.html (self-contained: images embedded, no external assets) and every table
under OUTPUT/tables/ as CSV and Parquet, but the row-level tables (rounds: a row per round, nodes: a row
per draft node) as Parquet only unless --csv-tables. OUTPUT is new, empty, or an earlier report (every file listed in
its .specreplay-report.json), whose index.html and tables/ are replaced whole (no table of the
earlier one stays); a directory holding anything else is refused (exit 2) before any work. A run whose validate rows carry scores gets a temperature
curve (expected block efficiency at T = 0, 0.1, ..., 1.5 for each compared config, with bounds);
--vocab-size V gives its lower bounds above T = 1.
"""
REPORT_SKIPPED = (
    f"{LEFT_OUT}; the temperature curve's rounds included (one it cannot replay at some T is listed once, with the T)"
)


REPORT_DIR = OutputDir("the page to {dir}/index.html and the tables to {dir}/tables/")  # -o's type

# --- compare -----------------------------------------------------------------------------------


def run_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.tables.runs import TABLES_KEYS

    if args.temperature is not None:
        from .cmd_compare_sampling import AT_TEMPERATURE as way
    else:
        way = GREEDY
    checked = way.check(args)
    given = parse_config_options(args)
    configs_of = lambda tree: configs_for(given, tree, args.contained)  # noqa: E731
    # compare replays the configs itself, on each batch or run as it is read: it reads no table
    loaded = load_runs_from_args(args, TABLES_KEYS, **way.along(args, configs_of))
    compared = way.compare_runs(args, loaded.runs, configs_of, checked)  # a table at least: each run has rounds
    table = run_first(pd.concat(compared.tables, ignore_index=True))
    if args.top:
        from analysis.compare.configs import top_rows

        table = top_rows(table, args.top, way.rank_by)
    way.write(args, table, compared)
    return skipped_status(loaded, {d.label: d.skipped for d in compared.runs})


def _along_greedy(args: argparse.Namespace, configs_of) -> dict:
    from analysis.compare.batch import compare_along

    return {"per_batch": compare_along(configs_of, args.gamma_threshold)}


@dataclass(frozen=True)
class PricedRun:
    """compare's record of one run: its pricing and its dynamic-gamma strategies (--gamma-strategies, else None)."""

    label: str
    pricing: RunPricing
    strategies: Any
    skipped: tuple = ()  # a greedy replay leaves no round out after reading


def _compare_greedy(args: argparse.Namespace, runs: list, configs_of, given) -> Compared:
    """Each run: its pricing, its configs compared (notes on stderr), its strategies simulated."""
    import pandas as pd

    from analysis.compare.batch import ema_window_of, priced_comparison, simulate_run_strategies
    from analysis.compare.configs import beyond_recorded_notes, unsimulated_threshold_notes
    from analysis.cost.source import run_pricing

    tables, per_round, priced = [], [], []
    for run in runs:
        pricing = run_pricing(run.replay, run.label, given)
        configs = configs_of(run.config)
        with progress_while(f"compare {run.label}", progress_enabled(args.no_progress)) as update:
            table, rounds = priced_comparison(
                run, configs, pricing, args.gamma_threshold, update, per_round=bool(args.per_round)
            )
        notes = beyond_recorded_notes(table, configs, run.config, run.label)
        print_notes(
            f"note: {n}"
            for n in notes + unsimulated_threshold_notes(configs, run.config, args.gamma_threshold, run.label)
        )
        tables.append(table.assign(run=run.label))
        per_round.append(rounds.assign(run=run.label))
        strategies = None
        if args.gamma_strategies is not None:
            window = ema_window_of(run, args.ema_window)
            sims = simulate_run_strategies(
                run, run.config, args.gamma_strategies or list(range(5)), pricing.cost, window, args.gamma_threshold
            )
            strategies = run_first(pd.DataFrame([s.to_row(pricing.cost) for s in sims]).assign(run=run.label))
        priced.append(PricedRun(run.label, pricing, strategies))
    return Compared(tables, per_round, priced)


def _write_greedy(args: argparse.Namespace, table, compared: Compared) -> None:
    """The plot, the per-round file and the table (JSON, CSV or text); the warnings on stderr."""
    import pandas as pd

    from analysis.cost.source import cost_warning

    priced = {p.label: p for p in compared.runs}
    if args.plot:  # after --top: the plot shows the rows the table shows
        from analysis.report import plots  # matplotlib: ~0.5 s to import, only for --plot
        from analysis.report.fonts import any_script

        for run, grp in table.groupby("run", sort=False):
            target = Path(args.plot).with_stem(Path(args.plot).stem + (f"_{run}" if len(priced) > 1 else ""))
            with atomic_path(target) as tmp, any_script(note_on_stderr):
                figure = plots.plot_compare_configs(grp, run, priced[run].pricing.cost.source)
                plots.write_figure(figure, tmp, PLOT_FORMATS.of("--plot", args.plot))
            note_written(target)
    cost_warnings = [w for w in (cost_warning(p.pricing.cost, label) for label, p in priced.items()) if w]
    suspicious = [w for p in priced.values() for w in p.pricing.suspicious]
    print_notes(suspicious)  # a number that is probably wrong: on stderr whatever the output format
    write_per_round(args, compared.per_round)
    strategies = [p.strategies for p in priced.values() if p.strategies is not None]
    if args.json:
        body = {
            "cost_models": {
                r: {"source": p.pricing.cost.source, **p.pricing.cost.to_json()} for r, p in priced.items()
            },
            "measured": {r: (p.pricing.measured.to_json() if p.pricing.measured else None) for r, p in priced.items()},
            "warnings": cost_warnings + suspicious,
            "gamma_threshold": args.gamma_threshold,  # simulated for every config; null: the recorded stops only
            "configs": frame_records(table),
        }
        if strategies:
            body["gamma_strategies"] = frame_records(pd.concat(strategies))
        print_json(body)
    elif args.csv:
        write_csv(table, ("top_head", "per_position_acceptance_rate_lo", "per_position_acceptance_rate_hi"))
    else:
        _print_compare_text(table, priced, strategies, args.gamma_threshold)
    # about the input: on stderr in every format, once the output is written (JSON lists them)
    print_notes(cost_warnings)


def _print_compare_text(table, priced: dict, strategies: list, gamma_threshold: float | None) -> None:
    """compare's text output: per run its cost model and configs, then strategies and definitions."""
    import pandas as pd

    from analysis.compare.configs import compare_display, first_row_words, strategies_display
    from analysis.tables.definitions import HEADLINE_NAMES, definitions_text

    for run, grp in table.groupby("run", sort=False):
        shown = compare_display(grp)
        print(
            f"{run}: {counted(int(grp['rounds'].iloc[0]), 'round')}, "
            + first_row_words(grp["config"].iloc[0], gamma_threshold)
        )
        cost = priced[run].pricing.cost
        print(f"  cost model: {cost.source} {figures_text(cost.to_json())}")
        speed = priced[run].pricing.measured
        if speed is not None:
            print(f"  {speed.describe()}")
        print(
            "  mean_acceptance_length = mean_accepted_length + 1 (bonus included): derived for every row, as a config "
            "that was not run has no target token in the dump"
        )
        print(shown.to_string(index=False) + "\n")
    if strategies:
        st = strategies_display(pd.concat(strategies, ignore_index=True))
        print("dynamic-gamma strategies (docs/analysis.md):")
        print(st.to_string(index=False) + "\n")
    print(
        "definitions (docs/vocabulary.md):\n"
        + definitions_text(
            [
                *HEADLINE_NAMES,
                "mean_accepted_length",
                "modelled_speedup",
                "measured_speedup",
                "measured_speedup_wall",
            ]
        )
    )


def _check_greedy(args: argparse.Namespace):
    """Refused before any work: options that would be taken and then do nothing (saying which to
    drop), a bad --cost. The cost model of --cost, or None."""
    if args.csv and args.gamma_strategies is not None:
        raise SpecReplayError(
            "--gamma-strategies with --csv: the CSV is the configs table alone, the strategies would be "
            "simulated and dropped; use --json (it holds both) or the text output, or drop --gamma-strategies"
        )
    from analysis.compare.gamma_strategies import USES_EMA
    from analysis.cost.source import cost_from_options

    if args.ema_window is not None and (
        args.gamma_strategies is None or (args.gamma_strategies and not set(args.gamma_strategies) & set(USES_EMA))
    ):
        given = (
            "without --gamma-strategies"
            if args.gamma_strategies is None
            else f"with --gamma-strategies {' '.join(map(str, args.gamma_strategies))}"
        )
        raise SpecReplayError(
            f"--ema-window {args.ema_window} {given}: only the EMA strategies {' and '.join(map(str, USES_EMA))} use it; "
            f"add them (--gamma-strategies {' '.join(map(str, USES_EMA))}) or drop --ema-window"
        )
    return cost_from_options(args.cost)


GREEDY = CompareWay(_check_greedy, _along_greedy, _compare_greedy, "modelled_speedup_lo", _write_greedy)


# --- report ------------------------------------------------------------------------------------


def run_report(args: argparse.Namespace) -> int:
    from analysis.cost.source import cost_from_options
    from analysis.report.options import LOADED_BYTES, ReportOptions
    from analysis.report.report_dir import TABLES_DIR, check_report_dir, report_files, write_report
    from analysis.report.treeplot import load_decoder
    from replay.util.progress import phase_progress

    check_report_dir(Path(args.output))  # before any work: a directory of other files is refused

    from analysis.shapes.recommend import check_budget, check_max_depth

    if args.budget is not None:
        check_budget(args.budget)
    check_max_depth(args.max_depth)
    decode = load_decoder(args.tokenizer) if args.tokenizer else None  # bad inputs fail before any work
    cost = cost_from_options(args.cost)
    given = parse_config_options(args)
    check_round_arg(args)
    from analysis.report.sampling_curves import scores_along
    from analysis.tables.runs import TABLES_METRICS, TABLES_ROUNDS

    # tables/ (the round and node tables themselves) is written block by block before the page
    # (analysis.tables.stream), from the batches kept as the runs are read (LOADED_BYTES), as are the
    # comparison and the recommendation, and counts the node metrics in that pass (without tables/,
    # the loading counts them); whether the validate rows carry scores is noted as the runs are read
    # (a run without has no temperature curve)
    how = TABLES_METRICS if args.no_tables else TABLES_ROUNDS
    loaded = load_runs_from_args(args, how, per_batch=scores_along, keep_bytes=LOADED_BYTES)
    runs = loaded.runs
    check_round_replayed(runs, args)
    configs = configs_for(given, runs[0].config) if given else None
    start_phase, close = phase_progress(progress_enabled(args.no_progress))
    curve_skipped: dict[str, list] = {}  # per run, the temperature curve's skipped rounds (the page notes them)
    pricing: dict[str, RunPricing] = {}  # per run, the cost model of the page's speedups
    try:
        opts = ReportOptions(
            configs=configs,
            cost=cost,
            ema_window=args.ema_window,
            gamma_threshold=args.gamma_threshold,
            decode=decode,
            image_format="svg" if args.svg else "png",
            title=printable(args.title) if args.title else "specreplay report: " + ", ".join(r.label for r in runs),
            budget=args.budget,
            max_depth=args.max_depth,
            example_round=args.show_round,
            vocab_size=args.vocab_size,
            progress=start_phase,
            on_skipped=curve_skipped.__setitem__,
            on_pricing=pricing.__setitem__,
        )
        from analysis.report.fonts import any_script

        with any_script(note_on_stderr):
            path = write_report(runs, args.output, opts, tables=not args.no_tables, csv_tables=args.csv_tables)
    finally:
        close()
    tables = [f for f in report_files(path.parent) if f != path.name]
    note_written(
        path, listing=[f"{counted(len(tables), 'table file')} in {path.parent / TABLES_DIR}/"] if tables else []
    )
    from analysis.cost.source import cost_warning

    # the page's warning under its speedups, on stderr too (as compare says it), once written
    print_notes(w for w in (cost_warning(pricing[run.label].cost, run.label) for run in runs) if w)
    status = skipped_status(loaded)
    for label, skipped in curve_skipped.items():  # listed as replay/compare --temperature list theirs: exit 1
        print_skipped(skipped, label)
    return 1 if status or any(curve_skipped.values()) else 0


# --- registration ------------------------------------------------------------------------------


def _add_compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--configs",
        nargs="+",
        metavar="CONFIG",
        help="configs to compare, each in any config form: 6,2x2,1x1, [6]|[2,2]|[1,1], 6_2x2_1x1, [[6],[2,2],[1,1]], a JSON object or file (docs/config-grammar.md)",
    )
    p.add_argument(
        "--grid",
        metavar="LIST",
        help='a list of configs separated by ";", as sweep --grid: "6,2x2,1x1;4|6,1x1;[2]|[1,1]"',
    )
    p.add_argument(
        "--generate",
        metavar="FUNNELS",
        help='generate funnel configs: "root=2,4,6 heads=1,2 width=1,2 gamma=1:3" (a:b = range)',
    )
    p.add_argument(
        "--cost",
        type=input_file_or_json,
        help='cost model: a JSON file or inline JSON {"tokens": [...], "verify_s": [...], "draft_step_s": x}',
    )
    p.add_argument(
        "--gamma-threshold",
        type=gamma_threshold_arg,
        default=None,
        metavar="X",
        help="simulate this gammaThreshold early stop, X in (0, 1] (docs/analysis.md); default (and 0, the "
        "config grammar's 'off'): only the recorded early stops",
    )
    p.add_argument(
        "--ema-window",
        type=at_least_one,
        default=None,
        help="emaWindow for the EMA strategies (default: the run's setting, else 1)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "compare",
        run_compare,
        help="compare tree configs offline on recorded dumps",
        description="Replay other tree configs exactly on recorded rounds; report nodes, mean acceptance "
        "length (bonus included), draft acceptance rate, per-position acceptance rate, mean accepted length "
        "and modelled speedup, with bounds where the dump cannot decide.",
        epilog=COMPARE_EPILOG,
        exits=ExitStatus(LEFT_OUT),
    )
    add_runs_input(p)
    _add_compare_options(p)
    p.add_argument("--contained", action="store_true", help="add every config contained in the recorded one")
    p.add_argument(
        "--top", type=at_least_one, help="show the recorded config and the N best by modelled speedup lower bound"
    )
    p.add_argument(
        "--gamma-strategies",
        nargs="*",
        type=int,
        choices=range(5),
        metavar="S",
        help="also simulate dynamic-gamma strategies (0..4; no value = all; default: none)",
    )
    add_output_file(
        p, "--plot", formats=PLOT_FORMATS, metavar="FILE.png", help="also draw the comparison (.png, .svg or .pdf)"
    )
    add_output_file(
        p,
        "--per-round",
        formats=CSV_FORMATS,
        metavar="FILE.csv",
        help="also write every config's per-round outcome to this CSV file",
    )
    add_json_csv(p, " (cost model, configs, gamma strategies)", "CSV output")
    add_sampling_options(p)
    _register_report(sub)


def _register_report(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "report",
        run_report,
        help="self-contained HTML report with every table and plot",
        description="Write a self-contained HTML page (images embedded) with configs, metrics, plots, "
        "offline config comparison, dynamic-gamma strategies and the tree-shape recommendation.",
        epilog=REPORT_EPILOG,
        exits=ExitStatus(REPORT_SKIPPED),
    )
    add_runs_input(p)
    _add_compare_options(p)
    add_output(p, REPORT_DIR, "output directory (index.html, tables/)", dest="output", metavar="DIR", required=True)
    p.add_argument("--tokenizer", help="tokenizer.json (or a model directory) for token text on round pictures")
    p.add_argument("--svg", action="store_true", help="inline SVG instead of base64 PNG")
    tables = p.add_mutually_exclusive_group()
    tables.add_argument("--no-tables", action="store_true", help="do not write tables/ beside the page")
    tables.add_argument(
        "--csv-tables",
        action="store_true",
        help="write the per-round and per-node tables (rounds, nodes) as CSV too (default: Parquet only; "
        "at 10^6 rounds nodes.csv is over 1 GB)",
    )
    p.add_argument("--title", help="page title")
    p.add_argument(
        "--vocab-size",
        type=at_least_one,
        default=None,
        metavar="V",
        help="the target's vocabulary size: the temperature curve's lower bounds at T > 1 (default: each dump's manifest vocab_size; docs/analysis.md)",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=None,
        help="tree-shape recommendation: draft nodes per tree (default: the recorded config's)",
    )
    p.add_argument(
        "--max-depth",
        type=int,
        default=None,
        help="tree-shape recommendation: maximum gamma (default: the recorded gamma)",
    )
    p.add_argument(
        "--round",
        dest="show_round",
        type=parse_key,
        help="round to draw per run, as A_B (default: a typical failing round, docs/analysis.md)",
    )
