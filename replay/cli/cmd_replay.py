"""``specreplay replay``: the CLI over the batch replay (replay.engine.runs.replay_run), trees drawn from its arrays."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import numpy as np

from replay.engine.batch.json_lines import write_batch_json_lines
from replay.engine.batch.sampling_frames import round_sampling_at, write_sampling_json_lines
from replay.engine.batch.view import round_views
from replay.engine.render import batch_sampling_summary, render_round, run_summary, sampling_lines
from replay.engine.runs import replay_run
from replay.engine.sampling_runs import replay_sampling
from replay.io.sources import require_dump_source
from replay.util.errors import SpecReplayError
from replay.util.progress import progress_enabled

from .options import (
    JSON_LINES_HELP,
    ExitStatus,
    add_command,
    add_dump_input,
    add_dump_options,
    add_no_progress,
    add_sampling_options,
    at_least_one,
    options_from_args,
    parse_key,
    print_missing_node_logprobs,
    print_needs_vocab,
    print_notes,
    print_reading,
    require_rounds,
    sampled_run_note,
    sampling_vocab,
    writing_bar,
)

REPLAY_EPILOG = (
    """\
examples:
  specreplay replay sample_dumps/article_round
  specreplay replay DUMP --config tree.json --round 124_140
  specreplay replay DUMP --json > rounds.jsonl                # JSON Lines, one round per line
  specreplay replay DUMP --json --workers 1 > rounds.jsonl    # the same, one reader process
  specreplay replay sample_dumps/synthetic_article --summary  # the summary only, no trees
  specreplay replay DUMP --raw int32:16 --layout parents      # headerless engine buffers
  specreplay replay sample_dumps/synthetic_article --temperature 0.7 --summary  # sampling at T = 0.7

The config comes from --config, else the directory's manifest.json, else its config.json.
Step 0 of a round is named one position earlier than the round's other files
(draft_step_0_123_139 belongs to validate_124_140); change that with --step0-offset. Without it
(and without step0_offset in manifest.json), names that pair one to one at another offset are
grouped at that offset, and a note on stderr says so.
"""
    + """\
A round that replays differently from what manifest.json records for it (accepted_length, num_nodes,
draft_steps) is a WARNING on stderr and leaves the exit status alone: the numbers are suspect, no
input was skipped.
"""
)


def run_replay(args: argparse.Namespace) -> int:
    if args.workers is not None and not (args.json or args.summary):
        # only --json and --summary read in worker processes; the tree text is read in this one
        raise SpecReplayError(
            f"--workers {args.workers} without --json or --summary: only those read in worker processes; drop --workers"
        )
    require_dump_source(args.dir)
    if args.temperature is not None:
        return _replay_sampling(args)
    if args.json or args.summary:
        return _replay_batches(args)
    return _replay_trees(args)


def _replay_trees(args: argparse.Namespace) -> int:
    """Every replayed round's tree drawn from its batch's arrays (replay.engine.batch.view), then the summary."""
    rep = replay_run(
        args.dir,
        options_from_args(args),
        progress=progress_enabled(args.no_progress),
        per_batch=lambda b, res, cfg: round_views(b, res),
    )
    require_rounds(rep, int(rep.result.ok.sum()))
    views = {key: view for part in rep.per_batch for key, view in part.items()}
    out = sys.stdout
    for key in rep.result.key_list(np.flatnonzero(rep.result.ok)):
        out.write("\n".join(render_round(views[key])) + "\n\n")
    out.write("\n".join(run_summary(rep)) + "\n")
    return _told(rep, args.dir)


def _told(rep, directory: str) -> int:
    """A greedy replay's stderr (warnings, skips, and the note on a sampled run) and its exit status."""
    print_reading(rep)
    note = sampled_run_note(rep.manifest, directory)
    if note:
        print_notes([note])
    return 1 if rep.skipped else 0


def _replay_batches(args: argparse.Namespace) -> int:
    """No trees to draw (--json, --summary): the records, or the summary's figures, from the batch arrays."""
    rep = replay_run(
        args.dir, options_from_args(args), workers=args.workers, progress=progress_enabled(args.no_progress)
    )
    require_rounds(rep, int(rep.result.ok.sum()))
    if args.json:
        with writing_bar(args, "JSON lines") as progress:
            write_batch_json_lines(rep.result, sys.stdout, progress)
    else:
        sys.stdout.write("\n".join(run_summary(rep)) + "\n")
    return _told(rep, args.dir)


def _replay_sampling(args: argparse.Namespace) -> int:
    """--temperature: each replayed round's expected acceptance at T, batch by batch (the dump's
    node_logprobs where it records them at T: replay.engine.sampling_runs)."""
    t = args.temperature
    drawn = not (args.json or args.summary)
    run = replay_sampling(
        args.dir,
        options_from_args(args),
        [t],
        lambda manifest: sampling_vocab(args, manifest),
        workers=args.workers,
        progress=progress_enabled(args.no_progress),
        also=(lambda b, res, cfg: round_views(b, res)) if drawn else None,
    )
    greedy, at = run.replay, run.at[0]  # greedy: the reading's skipped alone
    res, smp, rows = greedy.result, at.sampling, at.rows
    rep = replace(greedy, skipped=(*greedy.skipped, *at.skipped()))
    require_rounds(rep, rows.shape[0])
    out = sys.stdout
    if args.json:
        write_sampling_json_lines(res, smp, rows, out)
    else:
        if drawn:
            views = {key: view for part in run.also for key, view in part.items()}
            for i, key in zip(rows.tolist(), res.key_list(rows)):
                out.write("\n".join(render_round(views[key]) + sampling_lines(round_sampling_at(smp, res, i))) + "\n\n")
        out.write("\n".join(run_summary(greedy) + batch_sampling_summary(smp, res, rows)) + "\n")
    if smp.needs_vocab:
        print_needs_vocab("replay", t)
    print_missing_node_logprobs("replay", t, rep.manifest, sum(map(len, at.gaps)), at.gaps)
    print_reading(rep)
    note = sampled_run_note(rep.manifest, args.dir) if t == 0 else None  # T = 0 is the greedy walk
    if note:
        print_notes([note])
    return 1 if rep.skipped else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "replay",
        run_replay,
        help="rebuild every round's tree and replay its acceptance (greedy, or expected at --temperature T)",
        description="Rebuild each round's draft tree from draft_step_* files and walk greedy acceptance "
        "against validate_* (one path, plus the bonus token when the dump has it); with --temperature T, "
        "the expected acceptance when the target samples at T, from the validate rows' scores.",
        epilog=REPLAY_EPILOG,
        exits=ExitStatus(
            ": rounds, those the directory's manifest.json lists but the directory lacks, or holds but the manifest "
            "does not list, included"
        ),
    )
    add_dump_input(p)
    add_dump_options(p)
    p.add_argument("--round", type=parse_key, help="only this round, as A_B (the validate file's numbers)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help=JSON_LINES_HELP)
    shown.add_argument("--summary", action="store_true", help="print only the summary, not every round's tree")
    p.add_argument(
        "--workers",
        type=at_least_one,
        default=None,
        help="with --json or --summary: reader processes, at most this machine's cores (default: up to 2)",
    )
    add_sampling_options(p)
    add_no_progress(p)
