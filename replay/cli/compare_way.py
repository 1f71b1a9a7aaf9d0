"""What compare and compare --temperature T share: the record of what was computed, the way each
differs (replay.cli.cmd_compare.run_compare runs the one flow), and how the table and the
per-round outcomes are written."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replay.io.table_files import frame_csv_text, write_frame_csv_file
from replay.util.words import counted

from .options import note_written


@dataclass(frozen=True)
class Compared:
    """What compare computed, greedy or at T: per run with rounds its configs table and per-round
    outcomes (a "run" column each), and per run the way's own record (PricedRun, RunAtT)."""

    tables: list
    per_round: list
    runs: list  # each with its ``label`` and ``skipped``: its rounds without a sampling replay at T


@dataclass(frozen=True)
class CompareWay:
    """What compare and compare --temperature T do differently (the flow is run_compare's): ``check``
    refuses the options it cannot use (before any work) and gives ``compare_runs``' last argument;
    ``along`` gives load_runs_from_args' per_batch or per_run hook; ``write`` prints the table after
    --top and writes --per-round."""

    check: Callable[[argparse.Namespace], Any]
    along: Callable[..., dict]  # (args, configs_of)
    compare_runs: Callable[..., Compared]  # (args, runs, configs_of, checked)
    rank_by: str  # --top's column
    write: Callable[[argparse.Namespace, Any, Compared], None]


def run_first(frame):
    """The frame with its "run" column first."""
    return frame[["run", *[c for c in frame.columns if c != "run"]]]


def write_per_round(args: argparse.Namespace, frames: list) -> None:
    """--per-round FILE: every run's per-round outcomes, written whole or not at all."""
    import pandas as pd

    if not args.per_round:
        return
    frame = run_first(pd.concat(frames, ignore_index=True))
    write_frame_csv_file(frame, args.per_round)
    note_written(args.per_round, counted(len(frame), "row"))


def write_csv(table, list_columns: tuple[str, ...]) -> None:
    """The table as CSV on stdout, list cells as JSON text "[1,2,2]" (pd.read_csv(f, converters={"top_head": json.loads}))."""
    compact = lambda v: json.dumps(list(v), separators=(",", ":"))  # noqa: E731
    sys.stdout.write(frame_csv_text(table.assign(**{c: table[c].map(compact) for c in list_columns})))
