"""The per-round records written record by record: the references the batch writers of
replay.core.records are held equal to (write_batch_json_lines, write_arrow_table)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO

import pandas as pd

from replay.core.records import RoundRecord, csv_frame, json_line, table_format
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
