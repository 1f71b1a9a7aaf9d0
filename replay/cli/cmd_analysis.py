"""``specreplay stats | plot | compare | report``: thin CLI layers over the analysis library.

Heavy modules (pandas, matplotlib) are imported inside the command functions, so ``--help``
stays fast. Every command reads dump directories with the replay's options (add_dump_options).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from replay.atomic import atomic_path
from .options import (
    JSON_OBJECT_HELP, add_command, add_dump_input, add_dump_options, add_no_progress, add_output, options_from_args, parse_key, print_skipped,
)
from replay.errors import SpecReplayError
from replay.pathcheck import input_file_or_json, output_dir, output_file
from replay.progress import progress_enabled
from replay.records import csv_frame
from replay.sources import require_dump_source

TABLE_NAMES = ("summary", "accepted_length", "depth_acceptance", "rank_of_hit", "hit_outcome", "parent_slot", "node_hits", "rounds", "nodes")

STATS_EPILOG = """\
examples:
  specreplay stats sample_dumps/synthetic_article
  specreplay stats engine_dump/ harness_dump/ --label engine --label harness
  specreplay stats DUMP --table depth_acceptance --csv > depth.csv
  specreplay stats DUMP --json > metrics.json      # one JSON object: every table
  specreplay stats DUMP -o tables/                 # also every table as CSV and Parquet

Metrics and their formulas: docs/analysis.md. Exit status 1 when some rounds were skipped.
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

COMPARE_EPILOG = """\
examples:
  specreplay compare sample_dumps/synthetic_article
  specreplay compare DUMP --configs "[6]|[2,2]|[1,1]" 4,1x1,1 "[[3],[1,1]]" other_tree.json
  specreplay compare DUMP --grid "6,2x2,1x1;4|6,1x1;2_1" --cost '{"tokens": [1, 16], "verify_s": [0.38, 0.95], "draft_step_s": 0.08}'
  specreplay compare DUMP --generate "root=2,4,6 heads=1,2 width=1,2 gamma=1:3" --cost cost.json
  specreplay compare DUMP --contained --top 15 --csv > configs.csv
  specreplay compare DUMP --gamma-strategies 0 1 2 3 4 --ema-window 4
  specreplay compare DUMP --plot compare.svg --per-round rounds.csv --json > compare.json

A config is in any form of docs/config-grammar.md: [6]|[2,2]|[1,1] (what the config column
prints), 6,2x2,1x1 (sweep's grid form), 6_2x2_1x1 (a sweep's run name), a topKSpec list
[[6],[2,2],[1,1]] (topHead = row lengths), a JSON tree or specTree object, or a file. --grid is a
list of configs separated by ';', as sweep --grid ('|' alternatives in grid-form items). --generate
builds funnels: root width, heads per step, width per head, gamma (a:b = range). Every config is replayed exactly on each recorded round; rounds the dump cannot decide
(the config would expand a node the recording did not) are counted and bound the results:
x.xxx..y.yyy. Without configs: the recorded one and a few contained ones. The cost model gives the
modelled speedup  (Σ (L + 1)) · t_verify(1) / Σ (steps · draft_step_s + t_verify(nodes + 1)).
Its source, printed per run: --cost {"tokens": [...], "verify_s": [...], "draft_step_s": x} (a file or inline),
else cost_curve.json beside the dump, else the manifest's measured round timings, else the default
relative cost (a WARNING says the speedup is then only modelled). When the manifest holds a
target-only baseline, the recorded config's measured speedup is shown next to the modelled one.
"""

REPORT_EPILOG = """\
examples:
  specreplay report sample_dumps/synthetic_article -o report/
  specreplay report engine_dump/ harness_dump/ -o report/ --label engine --label harness
  specreplay report DUMP -o report/ --configs "[4]|[2,2]|[1,1]" --cost cost.json --tokenizer tok.json
  specreplay report DUMP -o report/ --budget 16 --max-depth 4    (tree-shape recommendation)
  specreplay report sample_dumps/qwen2.5-coder/* -o report/     (measured and modelled speedup side by side)

Writes OUTPUT/index.html (self-contained: images embedded, no external assets) and every table
as CSV and Parquet under OUTPUT/tables/.
"""


def _add_common(p: argparse.ArgumentParser, many: bool = True) -> None:
    add_dump_input(p, "dirs", many=True, help="dump directory or packed run (several: side by side)")
    add_dump_options(p)
    p.add_argument("--label", action="append", help="name of a run, once per DUMP in order (default: directory names)")
    add_no_progress(p)


def _load(args):
    """Replay every DUMP; a run without a single replayable round is reported and left out."""
    from analysis.runs import load_runs

    for d in args.dirs:
        require_dump_source(d)
    runs = load_runs(args.dirs, options_from_args(args), args.label, progress_enabled(args.no_progress))
    kept = []
    for run in runs:
        if run.results:
            kept.append(run)
            continue
        why = "; ".join(f"{s.what}: {s.reason}" for s in run.replay.skipped[:3]) or "no round files found"
        print(f"specreplay: {run.label}: no round could be replayed ({why}); left out", file=sys.stderr)
    if not kept:
        raise SpecReplayError("no round could be replayed in " + ", ".join(args.dirs))
    args.runs_left_out = len(runs) - len(kept)  # the exit status says so (see _skipped_status)
    return kept


def _skipped_status(runs, args=None) -> int:
    """Exit status: 1 when rounds were skipped or runs left out (all listed on stderr), else 0."""
    for run in runs:
        print_skipped(run.replay.skipped, run.label)
    left_out = getattr(args, "runs_left_out", 0) if args is not None else 0
    return 1 if left_out or any(run.replay.skipped for run in runs) else 0


def _print_table(df, args, out=None) -> None:
    out = out or sys.stdout  # looked up per call: tests and pipes swap sys.stdout
    if getattr(args, "json", False):
        out.write(df.to_json(orient="records", indent=1) + "\n")
    elif getattr(args, "csv", False):
        csv_frame(df).to_csv(out, index=False)  # list columns as text (replay.records)
    else:
        out.write(df.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="–") + "\n")


def _configs_from_args(args, recorded):
    from analysis.report import default_comparison_configs
    from analysis.subtree import contained_configs

    configs = list(_option_configs(args))
    if getattr(args, "contained", False):
        configs.extend(contained_configs(recorded))
    if not configs:
        return default_comparison_configs(recorded)
    seen, out = set(), []
    for c in [recorded] + configs:
        key = (c.short(), c.top_head)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _option_configs(args) -> list:
    """The configs of --configs, --grid and --generate, parsed once (notes printed once)."""
    if getattr(args, "parsed_configs", None) is None:
        args.parsed_configs = _parse_config_options(args)
    return args.parsed_configs


def _parse_config_options(args) -> list:
    from analysis.compare import generate_funnels, is_generator_text, parse_config_arg, parse_config_list_arg

    configs = []
    for text in args.configs or []:
        configs.extend(parse_config_arg(text, "--configs"))
    if args.grid and is_generator_text(args.grid):
        print('specreplay: note: --grid "root=... heads=..." is deprecated; use --generate (--grid is a list of configs)', file=sys.stderr)
        configs.extend(generate_funnels(args.grid, "--grid"))
    elif args.grid:
        listed, skipped = parse_config_list_arg(args.grid, "--grid")
        for s in skipped:
            print(f"specreplay: skipped grid combination {s}", file=sys.stderr)
        configs.extend(listed)
    if getattr(args, "generate", None):
        configs.extend(generate_funnels(args.generate, "--generate"))
    return configs


def _check_config_args(args) -> None:
    """Parse --configs, --grid and --generate once before the replay, so a typo fails before any work."""
    _option_configs(args)


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _plot_format(path: str) -> str:
    """The image format of --plot FILE, from its suffix (checked before any work)."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise SpecReplayError(f"--plot {path}: use a file name ending in {', '.join(PLOT_SUFFIXES)}")
    return suffix[1:]


def _cost(args):
    """The cost model named by --cost, or None: each run then takes its own (analysis.costsource)."""
    from analysis.costsource import given_cost

    return given_cost(args.cost) if args.cost else None


# --- stats -------------------------------------------------------------------------------------


def run_stats(args: argparse.Namespace) -> int:
    from analysis.compare import runs_side_by_side
    from analysis.definitions import DEPTH_NAMES, SUMMARY_NAMES, definitions_rows, definitions_text
    from analysis.metrics import all_metrics
    from analysis.tables import build_tables, export_tables

    runs = _load(args)
    tables = build_tables(runs)
    named = {**all_metrics(tables), "rounds": tables.rounds, "nodes": tables.nodes}
    if args.export:
        for path in export_tables(named, args.export):
            print(f"wrote {path}", file=sys.stderr)
    if args.table:
        _print_table(named[args.table], args)
    elif args.json:
        body = {k: json.loads(v.to_json(orient="records")) for k, v in named.items() if k not in ("rounds", "nodes")}
        body["configs"] = {r.label: r.replay.config.to_json() for r in runs}
        body["definitions"] = definitions_rows(SUMMARY_NAMES + DEPTH_NAMES)
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
    elif args.csv:
        _print_table(named["summary"], args)
    else:
        out = sys.stdout
        for run in runs:
            out.write(f"{run.label}: {run.replay.directory}  config {run.config.short()} topHead {list(run.config.top_head)} "
                      f"({len(run.results)} rounds, {len(run.replay.skipped)} skipped)\n")
            sel = tables.rounds[tables.rounds["run"] == run.label]["selection"].value_counts()
            out.write("  selection: " + ", ".join(f"{k} x{v}" for k, v in sel.items()) + "\n")
            if any("fallback" in k for k in sel.index):
                out.write("  WARNING: rounds without scores or parents: expanded nodes chosen by the rank-major fallback\n")
        out.write("\n== summary ==\n")
        if len(runs) > 1:
            out.write(runs_side_by_side(tables.rounds).to_string(float_format=lambda v: f"{v:.4f}") + "\n")
        else:
            _print_table(named["summary"], args)
        for name in ("accepted_length", "depth_acceptance", "hit_outcome", "parent_slot", "node_hits"):
            out.write(f"\n== {name} ==\n")
            _print_table(named[name], args)
        out.write("\n== definitions (docs/vocabulary.md) ==\n" + definitions_text(SUMMARY_NAMES + DEPTH_NAMES) + "\n")
    return _skipped_status(runs, args)


# --- plot --------------------------------------------------------------------------------------


def run_plot(args: argparse.Namespace) -> int:
    from analysis import plots, treeplot
    from analysis.example_round import example_round
    from analysis.metrics import all_metrics, static_shape
    from analysis.tables import build_tables

    decode = treeplot.load_decoder(args.tokenizer) if args.tokenizer else None  # a bad one fails before any work
    runs = _load(args)
    if args.show_round and not any(example_round(r.results, args.show_round) for r in runs):  # before writing
        raise SpecReplayError(f"--round {args.show_round[0]}_{args.show_round[1]}: no such round in " + ", ".join(args.dirs))
    picks = {run.label: _round_to_draw(run, args.show_round) for run in runs if run.results}
    tables = build_tables(runs)
    m = all_metrics(tables)
    fmts = args.format or list(plots.FORMATS)
    out = Path(args.output)
    written = []
    written += plots.save_figure(plots.plot_accepted_length(m["accepted_length"]), out, "accepted_length", fmts)
    written += plots.save_figure(plots.plot_depth_acceptance(m["depth_acceptance"]), out, "depth_acceptance", fmts)
    if len(runs) > 1:
        written += plots.save_figure(plots.plot_compare_runs(m["summary"], m["depth_acceptance"]), out, "runs_side_by_side", fmts)
    for run in runs:
        if not run.results:
            continue
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run.label)
        written += plots.save_figure(plots.plot_rank_heatmap(m["rank_of_hit"], m["hit_outcome"], run.label, run.config), out, f"rank_heatmap_{safe}", fmts)
        written += plots.save_figure(plots.plot_parent_slot(m["parent_slot"], run.label, len(run.results)), out, f"parent_slot_{safe}", fmts)
        nh = m["node_hits"]
        written += plots.save_figure(treeplot.plot_tree_hits(static_shape(run.config), nh[nh["run"] == run.label], run.label, run.config), out, f"tree_hits_{safe}", fmts)
        pick = picks[run.label]
        written += plots.save_figure(treeplot.plot_round_tree(pick.result, decode, run.label, pick.why), out, f"round_{safe}", fmts)
    for p in written:
        print(p)
    return _skipped_status(runs, args)


def _round_to_draw(run, key):
    """--round's round, else (or where this run lacks it) the run's typical failing round."""
    from analysis.example_round import example_round

    pick = example_round(run.results, key)
    if pick is None:  # another run has the round: this one shows its typical failing round
        pick = example_round(run.results)
        print(f"specreplay: {run.label}: no round {key[0]}_{key[1]}; drawing {pick.result.name}, {pick.why}", file=sys.stderr)
    return pick


# --- compare -----------------------------------------------------------------------------------


def run_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis import plots
    from analysis.compare import compare_configs, compare_display, strategies_display, with_speed
    from analysis.costsource import cost_warning, run_cost
    from analysis.definitions import definitions_text
    from analysis.gamma_strategies import simulate_strategies
    from analysis.timings import measured_speedup, read_timings
    from replay.progress import tqdm_progress

    plot_format = _plot_format(args.plot) if args.plot else None
    given = _cost(args)
    _check_config_args(args)
    runs = _load(args)
    tables, strategies, per_round, costs, measured = [], [], [], {}, {}
    for run in runs:
        if not run.results:
            continue
        cost = costs[run.label] = run_cost(run.replay.directory, run.replay.manifest, given)
        measured[run.label] = measured_speedup(read_timings(run.replay.directory, run.replay.manifest))
        configs = _configs_from_args(args, run.config)
        update, close = tqdm_progress(f"compare {run.label}", progress_enabled(args.no_progress))
        try:
            table, rounds = compare_configs(run.results, run.config, configs, cost, args.gamma_threshold, update)
        finally:
            close()
        table = with_speed(table, run.config, cost, measured[run.label])
        table.insert(0, "run", run.label)
        rounds.insert(0, "run", run.label)
        tables.append(table)
        per_round.append(rounds)
        if args.gamma_strategies is not None:
            window = args.ema_window or int(run.replay.config.settings.get("emaWindow", 1) or 1)
            sims = simulate_strategies(run.results, run.config, args.gamma_strategies or list(range(5)), cost, window,
                                       args.gamma_threshold, run.config.gamma)
            st = pd.DataFrame([s.to_row(cost) for s in sims])
            st.insert(0, "run", run.label)
            strategies.append(st)
    if not tables:
        raise SpecReplayError("no rounds to compare")
    table = pd.concat(tables, ignore_index=True)
    if args.top:
        table = pd.concat([g.head(1) for _, g in table.groupby("run", sort=False)] +
                          [g.iloc[1:].sort_values("speedup_lo", ascending=False).head(args.top) for _, g in table.groupby("run", sort=False)],
                          ignore_index=True).sort_values("run", kind="stable")
    if args.plot:  # after --top: the plot shows the rows the table shows
        for run, grp in table.groupby("run", sort=False):
            target = Path(args.plot).with_stem(Path(args.plot).stem + (f"_{run}" if len(runs) > 1 else ""))
            with atomic_path(target) as tmp:
                plots.plot_compare_configs(grp, run, costs[run].source).savefig(tmp, format=plot_format, dpi=plots.DPI, bbox_inches="tight")
    warnings = [w for w in (cost_warning(costs[r], r) for r in costs) if w]
    if args.json or args.csv:  # the text output carries them under each run
        for w in warnings:
            print(f"specreplay: {w}", file=sys.stderr)
    if args.per_round:
        with atomic_path(args.per_round) as tmp:
            pd.concat(per_round, ignore_index=True).to_csv(tmp, index=False)
        print(f"wrote {args.per_round}", file=sys.stderr)
    if args.json:
        body = {
            "cost_models": {r: {"source": c.source, **c.to_json()} for r, c in costs.items()},
            "measured": {r: (m.to_json() if m else None) for r, m in measured.items()},
            "warnings": warnings,
            "configs": json.loads(table.to_json(orient="records")),
        }
        if strategies:
            body["gamma_strategies"] = json.loads(pd.concat(strategies).to_json(orient="records"))
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
    elif args.csv:
        # top_head as compact JSON text "[1,2,2]": pd.read_csv(f, converters={"top_head": json.loads})
        table.assign(top_head=table["top_head"].map(lambda h: json.dumps([int(v) for v in h], separators=(",", ":")))).to_csv(sys.stdout, index=False)
    else:
        for run, grp in table.groupby("run", sort=False):
            shown = compare_display(grp)
            print(f"{run}: {int(grp['rounds'].iloc[0])} rounds, recorded {grp['config'].iloc[0]} (first row)")
            print(f"  cost model: {costs[run].source} {json.dumps(costs[run].to_json())}")
            if cost_warning(costs[run], run):
                print(f"  {cost_warning(costs[run], run)}")
            if measured[run]:
                print(f"  {measured[run].describe()}")
            print(shown.to_string(index=False) + "\n")
        if strategies:
            st = strategies_display(pd.concat(strategies, ignore_index=True))
            print("dynamic-gamma strategies (docs/analysis.md):")
            print(st.to_string(index=False) + "\n")
        print("definitions (docs/vocabulary.md):\n" + definitions_text(["mean_accepted_length", "engine_block_efficiency", "modelled_speedup",
                                                                          "measured_speedup", "measured_speedup_wall"]))
    return _skipped_status(runs, args)


# --- report ------------------------------------------------------------------------------------


def run_report(args: argparse.Namespace) -> int:
    from analysis.report import ReportOptions, write_report
    from replay.progress import tqdm_progress
    from analysis.treeplot import load_decoder

    for name in ("budget", "max_depth"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise SpecReplayError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    decode = load_decoder(args.tokenizer) if args.tokenizer else None  # bad inputs fail before any work
    cost = _cost(args)
    _check_config_args(args)
    runs = _load(args)
    configs = None
    if _option_configs(args):
        configs = _configs_from_args(args, runs[0].config)
    update, close = tqdm_progress("report", progress_enabled(args.no_progress))
    try:
        opts = ReportOptions(
            configs=configs,
            cost=cost,
            ema_window=args.ema_window,
            gamma_threshold=args.gamma_threshold,
            decode=decode,
            image_format="svg" if args.svg else "png",
            title=args.title or "specreplay report: " + ", ".join(r.label for r in runs),
            budget=args.budget,
            max_depth=args.max_depth,
            example_round=args.show_round,
            progress=update,
        )
        path = write_report(runs, args.output, opts, tables=not args.no_tables)
    finally:
        close()
    print(path)
    return _skipped_status(runs, args)


# --- registration ------------------------------------------------------------------------------


def _add_compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configs", nargs="+", metavar="CONFIG",
                   help="configs to compare, each in any config form: 6,2x2,1x1, [6]|[2,2]|[1,1], 6_2x2_1x1, [[6],[2,2],[1,1]], a JSON object or file (docs/config-grammar.md)")
    p.add_argument("--grid", metavar="LIST", help='a list of configs separated by ";", as sweep --grid: "6,2x2,1x1;4|6,1x1;[2]|[1,1]"')
    p.add_argument("--generate", metavar="FUNNELS", help='generate funnel configs: "root=2,4,6 heads=1,2 width=1,2 gamma=1:3" (a:b = range)')
    p.add_argument("--cost", type=input_file_or_json, help='cost model: a JSON file or inline JSON {"tokens": [...], "verify_s": [...], "draft_step_s": x}')
    p.add_argument("--gamma-threshold", type=float, default=None, help="simulate this gammaThreshold early stop (docs/analysis.md); default: only the recorded early stops")
    p.add_argument("--ema-window", type=int, default=None, help="emaWindow for the EMA strategies (default: the run's setting, else 1)")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "stats", run_stats, help="acceptance metrics tables of one or more dump directories",
                    description="Per-round and per-node tables and the metrics built on them.", epilog=STATS_EPILOG)
    _add_common(p)
    p.add_argument("--table", choices=TABLE_NAMES, help="print only this table")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help=JSON_OBJECT_HELP + ": every table by name (with --table: that table's rows, one JSON array)")
    out.add_argument("--csv", action="store_true", help="CSV output (the summary, or --table)")
    add_output(p, output_dir, "also write every table as CSV and Parquet into DIR", dest="export", metavar="DIR", aliases=["--export"])

    p = add_command(sub, "plot", run_plot, help="acceptance plots (PNG and SVG)", description="Draw every acceptance plot.",
                    epilog=PLOT_EPILOG)
    _add_common(p)
    add_output(p, output_dir, "output directory", dest="output", metavar="DIR", required=True)
    p.add_argument("--format", nargs="+", choices=("png", "svg"), help="image formats (default: both)")
    p.add_argument("--tokenizer", help="tokenizer.json (or a model directory) for token text on the round picture")
    p.add_argument("--round", "--show-round", dest="show_round", type=parse_key,
                   help="round to draw, as A_B (default: a typical failing round, docs/analysis.md)")

    p = add_command(sub, "compare", run_compare, help="compare tree configs offline on recorded dumps",
                    description="Replay other tree configs exactly on recorded rounds; report nodes, mean accepted "
                    "length, engine block efficiency and modelled speedup, with bounds where the dump cannot decide.",
                    epilog=COMPARE_EPILOG)
    _add_common(p)
    _add_compare_options(p)
    p.add_argument("--contained", action="store_true", help="add every config contained in the recorded one")
    p.add_argument("--top", type=int, help="show the recorded config and the N best by speedup lower bound")
    p.add_argument("--gamma-strategies", nargs="*", type=int, choices=range(5), metavar="S",
                   help="also simulate dynamic-gamma strategies (0..4; no value = all)")
    p.add_argument("--plot", metavar="FILE.png", type=output_file, help="also draw the comparison (.png, .svg or .pdf)")
    p.add_argument("--per-round", metavar="FILE.csv", type=output_file, help="also write every config's per-round outcome to this CSV file")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help=JSON_OBJECT_HELP + " (cost model, configs, gamma strategies)")
    out.add_argument("--csv", action="store_true", help="CSV output")

    p = add_command(sub, "report", run_report, help="self-contained HTML report with every table and plot",
                    description="Write a self-contained HTML page (images embedded) with configs, metrics, plots, "
                    "offline config comparison, dynamic-gamma strategies and the tree-shape recommendation.", epilog=REPORT_EPILOG)
    _add_common(p)
    _add_compare_options(p)
    add_output(p, output_dir, "output directory (index.html, tables/)", dest="output", metavar="DIR", required=True)
    p.add_argument("--tokenizer", help="tokenizer.json (or a model directory) for token text on round pictures")
    p.add_argument("--svg", action="store_true", help="inline SVG instead of base64 PNG")
    p.add_argument("--no-tables", action="store_true", help="do not write tables/ beside the page")
    p.add_argument("--title", help="page title")
    p.add_argument("--budget", type=int, default=None, help="tree-shape recommendation: draft nodes per tree (default: the recorded config's)")
    p.add_argument("--max-depth", type=int, default=None, help="tree-shape recommendation: maximum gamma (default: the recorded gamma)")
    p.add_argument("--round", dest="show_round", type=parse_key,
                   help="round to draw per run, as A_B (default: a typical failing round, docs/analysis.md)")
