"""``specreplay recommend``: the CLI over analysis.shapes.recommend (reads dumps in batches), and with
--temperature T over analysis.shapes.sampling_recommend (each dump's contained shapes ranked at T; the
options the search at T does not use are refused)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from analysis.shapes.model import DEFAULT_MIN_COUNT
from replay.core.json_figures import figures_text, frame_records
from replay.core.temperature import format_temperature
from replay.engine.render import rounds_with_scores
from replay.io.sources import require_dump_source
from replay.util.pathcheck import input_file_or_json
from replay.util.progress import phase_progress, progress_enabled, progress_while

from .options import (
    JSON_OBJECT_HELP,
    LEFT_OUT,
    ExitStatus,
    add_command,
    add_dump_input,
    add_dump_options,
    add_no_progress,
    add_sampling_options,
    at_least_one,
    note_on_stderr,
    options_from_args,
    print_json,
    print_notes,
    print_skipped,
    refuse_at_temperature,
    sampling_vocab,
    vocab_sizes_json,
)

EPILOG = (
    """\
examples:
  specreplay recommend sample_dumps/synthetic_article --budget 12
  specreplay recommend DUMPS1 DUMPS2 --budget 16 --max-depth 5 --cost cost_curve.json
  specreplay recommend PACKED_RUN --budget 16 --verify-cost 0.35,0.04 --draft-cost 0.02 --json
  specreplay recommend sample_dumps/synthetic_article --budget 8 --temperature 0.7   # shapes at T = 0.7

Reads dump directories or packed runs (specreplay pack) in batches. Cost curve JSON (the live
harness writes it): {"tokens": [1, 2, 4, ...], "verify_s": [...], "draft_step_s": x}.
Shapes contained in the recorded config are replayed exactly (analysis.compare.subtree); for the others a
`specreplay sweep` command line is printed. Depths the dumps cannot estimate are refused unless
--extrapolate. Rounds that stopped drafting before gamma count: a node's value is the share of
rounds that drafted its step (among those whose walk reached its parent's depth) times its
acceptance (the 'early stops:' line). Estimator, search and refusals: docs/shape-search.md;
cost model: docs/analysis.md.
Progress goes to stderr on a terminal (--no-progress to silence it).
"""
    + """\
A measured shape that disagrees with its prediction is a finding, not skipped input: agree = NO in the table, a warning on stderr, exit 0.
--temperature T: every shape contained in the recorded config within the budget and depth, measured
at T by the sampling walk on its sub-tree (as compare --temperature) and ranked by the lower bound
of its expected block efficiency over all rounds (docs/shape-search.md "Shapes at temperature T").
"""
)


def parse_pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
        return a, b
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A,B (seconds), got {text!r}") from None


@contextmanager
def progress_bars(enabled: bool | None) -> Iterator[Callable[[str], Callable[[int, int], None]]]:
    """stage name → a progress(done, total) bar "recommend: NAME" on stderr (tqdm decides when
    ``enabled`` is None); a new stage closes the previous stage's bar (phase_progress)."""
    start, close = phase_progress(enabled)
    try:
        yield lambda name: start(f"recommend: {name}")
    finally:
        close()


def run_recommend(args: argparse.Namespace) -> int:
    from analysis.cost.source import cost_from_options
    from analysis.shapes.recommend import recommend_runs
    from analysis.shapes.recommend_render import recommendation_json, render_recommendation
    from analysis.tables.runs import unique_labels

    for d in args.dirs:
        require_dump_source(d)
    if args.temperature is not None:
        return _recommend_at_temperature(args)
    cost = cost_from_options(args.cost, args.verify_cost, args.draft_cost)
    opts = options_from_args(args)
    with progress_bars(progress_enabled(args.no_progress)) as stage:
        rec = recommend_runs(
            args.dirs,
            opts,
            args.budget,
            args.max_depth,
            cost,
            stage,
            top=args.top,
            min_count=args.min_count,
            bootstrap=args.bootstrap,
            seed=args.seed,
            extrapolate=args.extrapolate,
        )
    if args.json:
        sys.stdout.write(figures_text(recommendation_json(rec)) + "\n")
    else:
        sys.stdout.write("\n".join(render_recommendation(rec)) + "\n")
    print_notes(rec.warnings)
    for label, skipped in zip(unique_labels(rec.directories), rec.skipped_by_dump):
        print_skipped(skipped, label)  # each dump's lines under its RUN label, as every command of DUMPs lists them
    disagree = sum(c.agree is False for c in rec.comparisons)
    if disagree:  # a result about the model, not about the input: exit 1 keeps one meaning (skipped input)
        note_on_stderr(f"warning: {disagree} measured shape(s) disagree with their prediction (agree = NO above)")
    return 1 if rec.skipped_items else 0


RANKING_NOTE = (
    "shapes contained in the recorded config, each measured on the recorded rounds by the sampling walk on its "
    "sub-tree (as compare --temperature), ranked by the LOWER bound of the expected block efficiency over all "
    "rounds (an undetermined round counts at E[L] = 0): docs/shape-search.md, Shapes at temperature T"
)


def check_recommend_sampling_options(args: argparse.Namespace) -> None:
    """The options of the greedy model and its speedups do nothing at T: refused, named."""
    given = [
        flag
        for flag, used in (
            ("--cost", args.cost is not None),
            ("--verify-cost", args.verify_cost is not None),
            ("--draft-cost", args.draft_cost is not None),
            ("--extrapolate", args.extrapolate),
            ("--min-count", args.min_count != DEFAULT_MIN_COUNT),
            ("--bootstrap", args.bootstrap != 200),
            ("--seed", args.seed != 0),
        )
        if used
    ]
    why = "the search at T measures every contained shape exactly and ranks by expected block efficiency"
    refuse_at_temperature(given, why + " (no acceptance model, no cost)")
    from analysis.shapes.recommend import check_budget, check_max_depth

    check_budget(args.budget)
    check_max_depth(args.max_depth)


def _recommend_at_temperature(args: argparse.Namespace) -> int:
    """--temperature T: each dump's contained shapes ranked at T (analysis.shapes.sampling_recommend)."""
    from analysis.shapes.sampling_recommend import shapes_along
    from analysis.tables.runs import TABLES_KEYS

    from .cmd_analysis import each_run_at_temperature, load_runs_from_args, skipped_status

    check_recommend_sampling_options(args)
    # the search reads the batch arrays as they are read (and the round keys): no round or node table
    # (0.8 GB at 10^5)
    vocab_of = lambda manifest: sampling_vocab(args, manifest)  # noqa: E731
    along = shapes_along(args.budget, args.max_depth, args.temperature, vocab_of)
    loaded = load_runs_from_args(args, TABLES_KEYS, per_run=along)
    done = each_run_at_temperature(args, loaded.runs, lambda run, vocab: _search_run(args, run, vocab))
    _print_at_temperature(done, args)
    return skipped_status(loaded, {d.label: d.skipped for d in done})


def _search_run(args: argparse.Namespace, run, vocab: int | None):
    from analysis.shapes.sampling_recommend import shapes_at_temperature

    bar = f"recommend {run.label} at T = {format_temperature(args.temperature)}"
    with progress_while(bar, progress_enabled(args.no_progress)) as update:
        res = shapes_at_temperature(run, args.budget, args.max_depth, args.temperature, vocab, args.top, update)
    return res, int(res.recorded["rounds"].iloc[0]), res.comparison.skipped


def _print_at_temperature(done: list, args: argparse.Namespace) -> None:
    from analysis.compare.sampling import sampling_display

    found = [d for d in done if d.result is not None]
    if args.json:
        body = {
            "temperature": args.temperature,
            "vocab_size": vocab_sizes_json({d.label: d.vocab for d in done}),
            "budget": args.budget,
            "max_depth": args.max_depth,
            "ranked_by": "all_rounds_block_efficiency_lo",
            "note": RANKING_NOTE,
            "dumps": [
                {
                    "label": f.label,
                    "recorded_config": f.recorded_config.short(),
                    "candidates": f.candidates,
                    "shapes": frame_records(f.ranked),
                    "recorded": frame_records(f.recorded)[0],
                }
                for f in (d.result for d in found)
            ],
        }
        print_json(body)
        return
    for d in found:
        f = d.result
        depth = f"{f.recorded_config.gamma} (the recorded gamma)" if args.max_depth is None else str(args.max_depth)
        rounds = int(f.recorded["rounds"].iloc[0])
        print(
            f"{f.label}: {rounds_with_scores(rounds, args.temperature, d.refused)} at T = {format_temperature(args.temperature)}; "
            f"{f.candidates} shapes contained in "
            f"the recorded {f.recorded_config.short()} within {args.budget} nodes and depth {depth}, best first"
            + (f" (the top {len(f.ranked)}; --top N for more):" if len(f.ranked) < f.candidates else ":")
        )
        shown = sampling_display(f.ranked)
        shown.insert(0, "rank", f.ranked["rank"].to_list())
        print(shown.to_string(index=False))
        rec = f.recorded.iloc[0]
        where = f"rank {int(rec['rank'])}" if rec["rank"] == rec["rank"] else "outside the budget or depth"
        print(
            f"  recorded {rec['config']} ({where}): expected block efficiency "
            + sampling_display(f.recorded)["all_rounds_block_efficiency"].iloc[0]
            + " over all rounds\n"
        )
    print("note: " + RANKING_NOTE)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "recommend",
        run_recommend,
        help="recommend topKSpec/topHead for a node budget from measured acceptance",
        description="Estimate acceptance by depth and rank from replayed dumps, search the static tree shapes "
        "within a node budget exactly, and compare predicted with replayed block efficiency.",
        epilog=EPILOG,
        exits=ExitStatus(LEFT_OUT),
    )
    add_dump_input(p, "dirs", many=True, help="dump directories or packed runs (pooled)")
    p.add_argument("--budget", type=int, required=True, help="draft nodes per tree (root excluded)")
    p.add_argument("--max-depth", type=int, default=None, help="maximum gamma (default: deepest recorded tree)")
    p.add_argument(
        "--cost",
        type=input_file_or_json,
        help='measured cost curve: a JSON file or inline JSON {"tokens": [...], "verify_s": [...], "draft_step_s": x}',
    )
    p.add_argument("--verify-cost", type=parse_pair, help="A,B: t_verify(k) = A + B*k seconds")
    p.add_argument("--draft-cost", type=float, default=None, help="seconds per draft step")
    p.add_argument("--top", type=at_least_one, default=5, help="shapes to list per objective")
    p.add_argument("--min-count", type=int, default=DEFAULT_MIN_COUNT, help="visits below which a rank row is pooled")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples for prediction intervals")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument(
        "--extrapolate",
        action="store_true",
        help="search depths the dumps cannot estimate (reuses the deepest estimated depth)",
    )
    p.add_argument("--json", action="store_true", help=JSON_OBJECT_HELP)
    add_dump_options(p)
    add_sampling_options(p)
    add_no_progress(p)
