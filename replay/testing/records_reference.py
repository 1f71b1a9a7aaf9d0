"""The per-round records written record by record, and tables written by pandas: the references the
run-time writers are held equal to (replay.engine.batch.json_lines.write_batch_json_lines;
replay.io.table_files.write_arrow_table, write_frame_csv and frame_csv_lines)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO

import pandas as pd

from replay.core.records import INT_LIST_COLUMNS, NOTE_SEPARATOR, RoundRecord, json_line
from replay.io.table_files import table_format
from replay.util.atomic import atomic_path


def write_json_lines(records: Iterable[RoundRecord], out: IO[str]) -> int:
    """JSON Lines, one record per line; returns the count."""
    n = 0
    for rec in records:
        out.write(json_line(rec.to_json()))
        n += 1
    return n


def write_table(frame: pd.DataFrame, path: str | Path) -> None:
    """A per-round frame to ``path``, atomically (.parquet keeps lists; .csv encodes them, see csv_frame)."""
    with atomic_path(path) as tmp:
        if table_format(path) == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            csv_frame(frame).to_csv(tmp, index=False)


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its list columns as CSV text (ids separated by spaces, notes by `` | ``)."""
    frame = frame.copy()
    for c in INT_LIST_COLUMNS:
        if c in frame.columns:
            frame[c] = [" ".join(str(int(t)) for t in v) for v in frame[c]]
    if "notes" in frame.columns:
        frame["notes"] = [NOTE_SEPARATOR.join(v) for v in frame["notes"]]
    return frame
