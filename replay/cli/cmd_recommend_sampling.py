"""``specreplay recommend --temperature T``: glue over analysis.shapes.sampling_recommend.

Refuses the options the search at T does not use, ranks each dump's contained shapes at T, prints
them (text or --json) and lists the rounds without a sampling replay at T (exit 1; 2 when none is left).
"""

from __future__ import annotations

import argparse
import json
import sys

from analysis.shapes.model import DEFAULT_MIN_COUNT
from replay.core.temperature import format_temperature
from replay.engine.render import rounds_with_scores
from replay.engine.sampling import refused_with_scores, sampling_skip
from replay.util.errors import SpecReplayError
from replay.util.progress import progress_enabled, tqdm_progress

from .options import no_rounds_error, no_rounds_in_runs, print_skipped, sampling_vocab, vocab_sizes_json

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
    if given:
        raise SpecReplayError(
            f"{' and '.join(given)} with --temperature: the search at T measures every contained shape exactly "
            "and ranks by expected block efficiency (no acceptance model, no cost); drop "
            + " and ".join(given)
            + " or --temperature"
        )
    from analysis.shapes.recommend import check_budget, check_max_depth

    check_budget(args.budget)
    check_max_depth(args.max_depth)


def run_recommend_sampling(args: argparse.Namespace) -> int:
    from analysis.shapes.sampling_recommend import shapes_along, shapes_at_temperature
    from analysis.tables.runs import TABLES_KEYS

    from .cmd_analysis import load_runs_from_args, skipped_status

    check_recommend_sampling_options(args)
    args.dirs, args.label = args.dir, None
    t = args.temperature
    # the search reads the batch arrays as they are read (and the round keys): no round or node table
    # (0.8 GB at 10^5)
    along = shapes_along(args.budget, args.max_depth, t, lambda manifest: sampling_vocab(args, manifest))
    runs = load_runs_from_args(args, TABLES_KEYS, per_run=along)
    found, skipped = [], {}
    args.vocab_used = {}
    for run in runs:
        vocab = sampling_vocab(args, run.replay.manifest)  # --vocab-size, else the manifest's
        args.vocab_used[run.label] = vocab
        update, close = tqdm_progress(
            f"recommend {run.label} at T = {format_temperature(t)}", progress_enabled(args.no_progress)
        )
        try:
            res = shapes_at_temperature(
                run,
                args.budget,
                args.max_depth,
                t,
                vocab,
                args.top,
                update,
            )
        finally:
            close()
        why = [sampling_skip(n, t, w) for n, _, w in res.comparison.skipped]
        skipped[run.label] = why
        if not int(res.recorded["rounds"].iloc[0]):
            if len(runs) == 1:
                raise no_rounds_error(run.replay.directory, [*run.replay.skipped, *why])
            continue
        found.append(res)
    if not found:
        for run in runs:
            print_skipped(skipped[run.label], run.label)
        raise no_rounds_in_runs([run.replay.directory for run in runs], t)
    _print(found, args)
    status = skipped_status(runs, args)
    for run in runs:
        print_skipped(skipped[run.label], run.label if len(runs) > 1 else None)
    return 1 if status or any(skipped.values()) else 0


def _print(found, args: argparse.Namespace) -> None:
    from analysis.compare.sampling import sampling_display

    if args.json:
        records = lambda df: json.loads(df.to_json(orient="records", double_precision=15))  # noqa: E731
        body = {
            "temperature": args.temperature,
            "vocab_size": vocab_sizes_json(args.vocab_used),
            "budget": args.budget,
            "max_depth": args.max_depth,
            "ranked_by": "all_rounds_block_efficiency_lo",
            "note": RANKING_NOTE,
            "dumps": [
                {
                    "label": f.label,
                    "recorded_config": f.recorded_config.short(),
                    "candidates": f.candidates,
                    "shapes": records(f.ranked),
                    "recorded": records(f.recorded)[0],
                }
                for f in found
            ],
        }
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
        return
    for f in found:
        depth = f"{f.recorded_config.gamma} (the recorded gamma)" if args.max_depth is None else str(args.max_depth)
        rounds = int(f.recorded["rounds"].iloc[0])
        refused = refused_with_scores(why for _, _, why in f.comparison.skipped)
        print(
            f"{f.label}: {rounds_with_scores(rounds, args.temperature, refused)} at T = {format_temperature(args.temperature)}; "
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
