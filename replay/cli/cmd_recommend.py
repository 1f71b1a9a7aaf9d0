"""``specreplay recommend``: the CLI over analysis.shapes.recommend (reads dumps in batches)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from analysis.cost.model import CostModel
from analysis.shapes.model import DEFAULT_MIN_COUNT
from replay.io.sources import require_dump_source
from replay.util.errors import SpecReplayError
from replay.util.pathcheck import input_file_or_json
from replay.util.progress import progress_enabled, tqdm_progress

from .options import (
    JSON_OBJECT_HELP,
    add_command,
    add_dump_input,
    add_dump_options,
    add_no_progress,
    add_sampling_options,
    at_least_one,
    options_from_args,
    print_notes,
    print_skipped,
)

EPILOG = """\
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
Exit status: 0; 1 when rounds were skipped (listed on stderr); 2 on errors (no round replayed too). A measured shape that disagrees
with its prediction is a finding, not skipped input: agree = NO in the table, a warning on stderr, exit 0.
--temperature T: every shape contained in the recorded config within the budget and depth, measured
at T by the sampling walk on its sub-tree (as compare --temperature) and ranked by the lower bound
of its expected block efficiency over all rounds (docs/shape-search.md "Shapes at temperature T").
"""


def parse_pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
        return a, b
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A,B (seconds), got {text!r}") from None


def cost_from_args(args: argparse.Namespace) -> CostModel | None:
    if args.cost and args.verify_cost:
        raise SpecReplayError("give either --cost FILE or --verify-cost A,B, not both")
    if args.cost:
        curve = CostModel.parse(args.cost)
        return curve if args.draft_cost is None else curve.with_draft_step(args.draft_cost)
    if args.verify_cost:
        return CostModel.linear(*args.verify_cost, args.draft_cost or 0.0)
    if args.draft_cost is not None:
        raise SpecReplayError("--draft-cost needs --verify-cost A,B or --cost FILE")
    return None


@contextmanager
def progress_bars(enabled: bool | None) -> Iterator[Callable[[str], Callable[[int, int], None] | None]]:
    """stage name → a progress(done, total) bar on stderr (tqdm decides when ``enabled`` is None);
    a new stage closes the previous stage's bar, so one line shows at a time."""
    closers = []

    def close_all() -> None:
        while closers:
            closers.pop()()

    def stage(name: str):
        close_all()
        if enabled is False:
            return None
        update, close = tqdm_progress(f"recommend: {name}", enabled)
        closers.append(close)
        return update

    try:
        yield stage
    finally:
        close_all()


def run_recommend(args: argparse.Namespace) -> int:
    from analysis.shapes.recommend import recommend_runs
    from analysis.shapes.recommend_render import finite_json, recommendation_json, render_recommendation

    for d in args.dir:
        require_dump_source(d)
    if args.temperature is not None:
        from .cmd_recommend_sampling import run_recommend_sampling

        return run_recommend_sampling(args)
    cost = cost_from_args(args)
    opts = options_from_args(args)
    with progress_bars(progress_enabled(args.no_progress)) as stage:
        rec = recommend_runs(
            args.dir,
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
        sys.stdout.write(json.dumps(finite_json(recommendation_json(rec)), allow_nan=False) + "\n")
    else:
        sys.stdout.write("\n".join(render_recommendation(rec)) + "\n")
    print_notes(rec.warnings)
    print_skipped(rec.skipped_items)
    disagree = sum(c.agree is False for c in rec.comparisons)
    if disagree:  # a result about the model, not about the input: exit 1 keeps one meaning (skipped input)
        print(
            f"specreplay: warning: {disagree} measured shape(s) disagree with their prediction (agree = NO above)",
            file=sys.stderr,
        )
    return 1 if rec.skipped_items else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "recommend",
        run_recommend,
        help="recommend topKSpec/topHead for a node budget from measured acceptance",
        description="Estimate acceptance by depth and rank from replayed dumps, search the static tree shapes "
        "within a node budget exactly, and compare predicted with replayed block efficiency.",
        epilog=EPILOG,
    )
    add_dump_input(p, many=True, help="dump directories or packed runs (pooled)")
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
