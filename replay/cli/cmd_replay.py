"""``specreplay replay``: the CLI over replay_directory."""

from __future__ import annotations

import argparse
import sys

from replay.core.records import write_batch_json_lines
from replay.engine.render import render_round, render_summary
from replay.engine.replayer import replay_directory
from replay.engine.runs import replay_run
from replay.io.sources import require_dump_source
from replay.util.progress import progress_enabled, tqdm_progress

from .options import (
    JSON_LINES_HELP,
    add_command,
    add_dump_input,
    add_dump_options,
    add_no_progress,
    options_from_args,
    parse_key,
    print_reading,
    require_rounds,
)

REPLAY_EPILOG = """\
examples:
  specreplay replay sample_dumps/article_round
  specreplay replay DUMP --config tree.json --round 124_140
  specreplay replay DUMP --json > rounds.jsonl                # JSON Lines, one round per line
  specreplay replay DUMP --json --workers 1 > rounds.jsonl    # the same, one reader process
  specreplay replay sample_dumps/synthetic_article --summary  # the summary only, no trees
  specreplay replay DUMP --raw int32:16 --layout parents      # headerless engine buffers

The config comes from --config, else the directory's manifest.json, else its config.json.
Step 0 of a round is named one position earlier than the round's other files
(draft_step_0_123_139 belongs to validate_124_140); change that with --step0-offset. Without it
(and without step0_offset in manifest.json), names that pair one to one at another offset are
grouped at that offset, and a note on stderr says so.
Exit status: 0 when every round replayed; 1 when some were skipped (each listed on stderr), including
rounds that disagree with the directory's manifest.json; 2 on errors (a path without dump files, or
not one round replayed, too).
"""


def run_replay(args: argparse.Namespace) -> int:
    require_dump_source(args.dir)
    if args.json:
        return _replay_json(args)
    update, close = tqdm_progress("replay", progress_enabled(args.no_progress))
    try:
        rep = replay_directory(args.dir, options_from_args(args), update)
    finally:
        close()
    require_rounds(rep, len(rep.results))
    out = sys.stdout
    if not args.summary:
        for res in rep.results:
            out.write("\n".join(render_round(res)) + "\n\n")
    out.write("\n".join(render_summary(rep)) + "\n")
    print_reading(rep)
    return 1 if rep.skipped else 0


def _replay_json(args: argparse.Namespace) -> int:
    """No trees to draw: the batch replay gives the same records (tests/test_batch_samples.py), faster."""
    rep = replay_run(
        args.dir, options_from_args(args), workers=args.workers, progress=progress_enabled(args.no_progress)
    )
    require_rounds(rep, int(rep.result.ok.sum()))
    write_batch_json_lines(rep.result, sys.stdout)
    print_reading(rep)
    return 1 if rep.skipped else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "replay",
        run_replay,
        help="rebuild every round's tree and replay greedy acceptance",
        description="Rebuild each round's draft tree from draft_step_* files and walk greedy acceptance "
        "against validate_* (one path, plus the bonus token when the dump has it).",
        epilog=REPLAY_EPILOG,
    )
    add_dump_input(p)
    add_dump_options(p)
    p.add_argument("--round", type=parse_key, help="only this round, as A_B (the validate file's numbers)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help=JSON_LINES_HELP)
    shown.add_argument("--summary", action="store_true", help="print only the summary, not every round's tree")
    p.add_argument("--workers", type=int, default=None, help="with --json: reader processes (default: up to 2 cores)")
    add_no_progress(p)
