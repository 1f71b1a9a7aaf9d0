"""The per-round record as one object per round (RoundRecord, which the reference replayer makes),
its JSON line and frame made record by record, and tables written by pandas: the references the
run-time forms are held equal to (replay.engine.batch.frames' columns, json_lines.write_batch_json_lines;
replay.io.table_files.write_arrow_table, write_frame_csv and frame_csv_lines)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

from replay.core.records import COLUMNS, INT_LIST_COLUMNS, LIST_COLUMNS, NOTE_SEPARATOR, normalize_frame
from replay.io.table_files import table_format
from replay.util.atomic import atomic_path


@dataclass(frozen=True)
class RoundRecord:
    """One replayed round: a field per column of replay.core.records.COLUMNS, in order (their meanings
    in COLUMN_MEANINGS there)."""

    round: str
    key_a: int
    key_b: int
    root_token: int | None
    num_steps: int
    num_nodes: int
    shape: str
    layout: str
    layout_source: str
    selection: str
    accepted_length: int
    accepted_tokens: tuple[int, ...]
    accepted_nodes: tuple[int, ...]
    bonus_token: int | None
    bonus_kind: str | None
    stop: str
    committed_tokens: tuple[int, ...]
    num_committed: int
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {name: list(v) if name in LIST_COLUMNS else v for name, v in ((n, getattr(self, n)) for n in COLUMNS)}


def records_of_batch(result: Any) -> Iterable[RoundRecord]:  # a replay.engine BatchResult
    """The records of a batch replay's replayed rounds (replay.engine.batch.BatchResult), in its order."""
    for obj in result.iter_json():
        kw: dict[str, Any] = {k: tuple(v) if k in LIST_COLUMNS else v for k, v in obj.items()}
        yield RoundRecord(**kw)


def json_line(obj: dict[str, Any]) -> str:
    """One record's JSON Lines line: ``obj`` is RoundRecord.to_json() (its keys in COLUMNS order)."""
    return json.dumps(obj) + "\n"


def records_frame(records: Iterable[RoundRecord]) -> pd.DataFrame:
    """The records as a pandas DataFrame in COLUMNS order (lists as lists, nullable ids Int64)."""
    rows = [rec.to_json() for rec in records]
    frame = (
        pd.DataFrame(rows, columns=list(COLUMNS))
        if rows
        else pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    )
    return normalize_frame(frame)


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
