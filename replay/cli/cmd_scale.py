"""``specreplay pack``, ``verify-pack`` and ``batch``: commands for runs of millions of rounds."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace

from replay.engine.batch.frames import record_arrow
from replay.engine.batch.json_lines import write_batch_json_lines
from replay.engine.batch.sampling_frames import (
    sampling_arrow,
    write_sampling_json_lines,
)
from replay.engine.render import batch_sampling_summary, run_summary
from replay.engine.runs import RunReplay, replay_run
from replay.engine.sampling_runs import replay_sampling
from replay.io.formats.matrix_io import RawSpec
from replay.io.manifest import read_manifest
from replay.io.packed.pack import DEFAULT_BLOCK_ROUNDS, PackedRun, pack_directory
from replay.io.skipped import count_skipped, describe_skipped
from replay.io.sources import require_directory, require_dump_source
from replay.io.table_files import TABLE_FORMATS, write_arrow_table
from replay.util.errors import SpecReplayError
from replay.util.pathcheck import output_dir, output_file
from replay.util.progress import progress_enabled
from replay.util.words import counted

from .options import (
    JSON_LINES_HELP,
    ExitStatus,
    add_command,
    add_dump_input,
    add_dump_options,
    add_no_progress,
    add_output,
    add_reading_options,
    add_sampling_options,
    at_least_one,
    note_on_stderr,
    note_written,
    options_from_args,
    parse_key,
    print_missing_node_logprobs,
    print_needs_vocab,
    print_notes,
    print_reading,
    print_skipped,
    require_rounds,
    sampling_vocab,
    step0_offset_from_args,
    writing_bar,
)

PACK_EPILOG = """\
examples:
  specreplay pack DUMP -o RUN                  # every file read once, on every core
  specreplay replay RUN                        # every command that reads a dump directory reads RUN too
  specreplay batch RUN -o rounds.parquet       # vectorised replay, one table row per round
  specreplay verify-pack RUN                   # re-check every block and file: exit 0 OK, 2 corrupt

Reading options (--step0-offset, --raw, --scores) are applied while packing and recorded in the
run (a step-0 offset detected from the names too, with its note); the tree config is not needed to pack (it comes with the copied manifest.json/config.json,
or --config when replaying). Every read checks packed.json's own sha256 and each block's CRC-32:
a damaged block's rounds are listed as skipped (exit 1), never replayed. Format:
docs/packed-format.md.
"""

VERIFY_EPILOG = """\
examples:
  specreplay verify-pack RUN      # RUN: OK (exit 0), or each problem and exit 2

Checks packed.json's meta_sha256 and fields, every array file's size and .npy header, every
block's CRC-32 and every file's sha256, and the copied manifest.json/config.json.
"""

BATCH_EPILOG = """\
examples:
  specreplay batch sample_dumps/synthetic_article      # the summary of `specreplay replay`, vectorised
  specreplay batch RUN --json > rounds.jsonl           # JSON Lines, one round per line (as replay --json)
  specreplay batch RUN -o rounds.parquet               # one table row per round (.parquet or .csv)
  specreplay batch RUN --workers 16 --no-progress     # 16 reader processes, or the usable cores if fewer (default: up to 2)
  specreplay batch sample_dumps/synthetic_article --temperature 0.7   # + expected acceptance at T = 0.7
  specreplay batch RUN --temperature 0.7 -o rounds.parquet   # + per round expected_accepted_length_lo/_hi, ...

"""


def render_run_summary(rep: RunReplay) -> list[str]:
    """``specreplay replay``'s summary with the batch title and the speed line."""
    replayed = int(
        rep.result.ok.sum()
    )  # the rounds the summary counts: a round the kernel rejected is listed as skipped
    rate = replayed / rep.seconds if rep.seconds > 0 else float("inf")
    speed = f"read and replayed {replayed} round(s) in {rep.seconds:.3f} s ({rate:,.0f} rounds/s)"
    return run_summary(rep, f"summary of {rep.directory} ({rep.kind}, batch replay)", [speed])


def run_batch(args: argparse.Namespace) -> int:
    require_dump_source(args.dir)
    opts = options_from_args(args)
    if args.temperature is not None:
        return _batch_sampling(args, opts)
    rep = replay_run(args.dir, opts, workers=args.workers, progress=progress_enabled(args.no_progress))
    require_rounds(rep, int(rep.result.ok.sum()))
    out = sys.stdout
    if args.table:
        with writing_bar(args, args.table) as progress:
            _write_table(rep, args.table, progress)
    if args.json:
        with writing_bar(args, "JSON lines") as progress:
            write_batch_json_lines(rep.result, out, progress)
    else:
        sys.stdout.write("\n".join(render_run_summary(rep)) + "\n")
    print_reading(rep)
    return 1 if rep.skipped else 0


def _batch_sampling(args: argparse.Namespace, opts) -> int:
    """--temperature: the greedy summary and the sampling summary, or per round (--json, -o) the
    columns of replay --temperature --json (replay.engine.batch.sampling_frames); exact from the
    dump's node_logprobs where it records them at T (replay.engine.sampling_runs)."""
    t = args.temperature
    manifest = read_manifest(args.dir)  # a packed run holds the dump's manifest.json too
    vocab = sampling_vocab(args, manifest)
    run = replay_sampling(
        args.dir, opts, [t], lambda manifest: vocab, workers=args.workers, progress=progress_enabled(args.no_progress)
    )
    greedy, at = run.replay, run.at[0]  # greedy: the reading's skipped alone
    require_rounds(greedy, int(greedy.result.ok.sum()))
    res, smp, rows = greedy.result, at.sampling, at.rows
    rep = replace(greedy, skipped=(*greedy.skipped, *at.skipped()))
    require_rounds(rep, rows.shape[0])
    out = sys.stdout
    if args.table:
        table = sampling_arrow(res, smp, rows)
        write_arrow_table(table, args.table)
        note_written(args.table, counted(table.num_rows, "row"))
    if args.json:
        write_sampling_json_lines(res, smp, rows, out)
    else:
        lines = render_run_summary(greedy) + batch_sampling_summary(smp, res, rows)
        sys.stdout.write("\n".join(lines) + "\n")
    if smp.needs_vocab:
        print_needs_vocab("batch", t)
    print_missing_node_logprobs("batch", t, manifest, sum(map(len, at.gaps)), at.gaps)
    print_reading(rep)
    return 1 if rep.skipped else 0


def _write_table(rep: RunReplay, path: str, progress=None) -> None:
    # Arrow columns straight from the batch arrays, no frame: 10^6 rounds in seconds
    if progress:
        progress(0, int(rep.result.ok.sum()))  # the bar shows while the columns are built
    table = record_arrow(rep.result)
    write_arrow_table(table, path, progress)
    note_written(path, counted(table.num_rows, "row"))


def run_pack(args: argparse.Namespace) -> int:
    require_dump_source(args.dir)
    summary = pack_directory(
        args.dir,
        args.out,
        step0_offset_from_args(args),
        RawSpec.parse(args.raw) if args.raw else None,
        args.scores,
        args.workers,
        args.block_rounds,
        progress=progress_enabled(args.no_progress),
        force=args.force,
    )
    skipped_rounds = count_skipped(summary.skipped_items)[0]  # those the names could not group are rounds too
    note_written(
        summary.path,
        f"{summary.packed_rounds} of {summary.packed_rounds + skipped_rounds} round(s)",
        [f"{summary.groups} group(s)", f"{summary.bytes / 1e6:.2f} MB", f"sha256 {summary.checksum}"],
    )
    if summary.skipped:  # stderr, as its confirmation: pack prints nothing on stdout
        note_on_stderr(
            f"skipped: {describe_skipped(summary.skipped_items)} (each listed below; kept in packed.json, "
            f"and `specreplay replay {shlex.quote(str(summary.path))}` lists them again)"
        )
    print_notes(summary.warnings)
    print_skipped(summary.skipped_items)
    status = 1 if summary.skipped else 0
    if args.verify:
        return _verify(summary.path) or status
    return status


def _verify(path: str) -> int:
    """0 when every checksum matches; 2 (an error: the run is corrupt) with each problem listed."""
    problems = PackedRun.open(
        require_directory(path, "a packed run")
    ).verify()  # a run whose packed.json cannot be trusted raises
    for p in problems:
        print(f"  {p}")
    if problems:
        raise SpecReplayError(
            f"{path}: CORRUPT: {len(problems)} problem(s) listed above; rounds in bad blocks are skipped when read, repack to recover them"
        )
    print(f"{path}: OK")
    return 0


def run_verify_pack(args: argparse.Namespace) -> int:
    return _verify(args.run)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "pack",
        run_pack,
        help="pack a dump directory into one compact, checksummed file set",
        description="Read every round of a dump directory (in parallel, each file once) and write it as a packed "
        "run: a few column-major .npy arrays per kind of round (matrix sizes padded), packed.json with the reading options, "
        "skipped files and sha256 checksums, and copies of manifest.json/config.json.",
        epilog=PACK_EPILOG,
        exits=ExitStatus(rounds="packed"),
    )
    add_dump_input(p, help="dump directory")
    add_output(
        p, output_dir, "packed run directory to create", dest="out", metavar="RUN", required=True, aliases=["--out"]
    )
    add_reading_options(p)
    p.add_argument(
        "--workers",
        type=at_least_one,
        default=None,
        help="reader processes, at most this machine's cores (default: up to 2)",
    )
    p.add_argument("--block-rounds", type=int, default=DEFAULT_BLOCK_ROUNDS, help="rounds per block")
    p.add_argument("--force", action="store_true", help="replace an existing packed run at -o/--output")
    p.add_argument("--verify", action="store_true", help="re-read and check every checksum after packing")
    add_no_progress(p)

    v = add_command(
        sub,
        "verify-pack",
        run_verify_pack,
        help="check a packed run against its checksums (exit 0 intact, 2 corrupt)",
        description="Check a packed run: packed.json's own sha256, the structure it describes, every block's "
        "CRC-32 and every file's sha256; print OK (exit 0) or list each problem (exit 2).",
        epilog=VERIFY_EPILOG,
        exits=ExitStatus(None, "; a corrupt run too, each problem listed first", None),
    )
    add_dump_input(v, "run", help="packed run directory (made by specreplay pack)")

    b = add_command(
        sub,
        "batch",
        run_batch,
        help="replay a dump directory or packed run with the vectorised batch replay",
        description="Same rounds, outcomes and skipped list as `specreplay replay`, computed with numpy array "
        "operations (millions of rounds per second); prints the summary, or JSON Lines identical to "
        "`specreplay replay --json`, or a per-round table.",
        epilog=BATCH_EPILOG,
        exits=ExitStatus(),
    )
    add_dump_input(b)
    add_dump_options(b)
    b.add_argument("--round", type=parse_key, help="only this round, as A_B")
    b.add_argument("--json", action="store_true", help=JSON_LINES_HELP + " (as replay --json)")
    add_output(
        b,
        output_file,
        "also write one row per round to FILE.parquet or FILE.csv (format from the suffix, any case; a device "
        "or FIFO gets CSV; with -o /dev/stdout the summary goes to stderr)",
        dest="table",
        metavar="FILE",
        aliases=["--table"],
        formats=TABLE_FORMATS,
    )
    b.add_argument(
        "--workers",
        type=at_least_one,
        default=None,
        help="reader processes and replay threads, at most this machine's cores (default: up to 2)",
    )
    add_sampling_options(b)
    add_no_progress(b)
