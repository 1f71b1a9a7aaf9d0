"""The one per-round record: its columns and their meanings, and how its files are read back.

Every per-round output uses these columns with these meanings (docs/output-schema.md):
``replay --json`` and ``batch --json`` (JSON Lines), ``batch -o FILE.parquet|.csv``, the analysis
round table (``stats --table rounds``, ``report``'s rounds.parquet, ``replay.cli.api.rounds_table``;
it adds analysis columns after these). Lists stay lists in JSON and Parquet; CSV holds them as
text (ids separated by spaces, notes by `` | ``) and ``CSV_CONVERTERS`` reads them back.
Whatever the file, ``normalize_frame`` gives the same frame: lists as Python lists, nullable ids
as pandas ``Int64``, a missing bonus kind as None. A replayed round's columns are made in
replay.engine.batch.frames; the writers are replay.engine.batch.json_lines (JSON Lines) and
replay.io.table_files (CSV and Parquet).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: reading a record needs no pandas
    import pandas as pd

NOTE_SEPARATOR = " | "  # CSV text of the notes list (a note never contains it)

# The columns in order, each with its meaning (bonus excluded from accepted_length; see docs/vocabulary.md).
COLUMN_MEANINGS = {
    "round": "round key a_b (the validate file's numbers)",
    "key_a": "first position counter",
    "key_b": "second position counter",
    "root_token": "the last committed token before the round (null/NA when unknown)",
    "num_steps": "draft steps run this round (fewer than gamma after an early stop)",
    "num_nodes": "draft nodes in this round's tree, root excluded",
    "shape": "kept widths per draft step actually present, short form [6]|[2,2]|[1,1] (topHead = their lengths)",
    "layout": "validate layout: parents or all",
    "layout_source": "stated (manifest/--layout) or detected (from the validate's row count)",
    "selection": "how expanded nodes were chosen (path_probability, parents, rank_major_fallback; root for one step)",
    "accepted_length": "draft tokens accepted (bonus excluded)",
    "accepted_tokens": "accepted token ids, root side first (list; CSV: ids separated by spaces)",
    "accepted_nodes": "tree-order ids of the accepted nodes (list; CSV: separated by spaces)",
    "bonus_token": "the target's top-1 at the last accepted node (null/NA when the dump has no row for it)",
    "bonus_kind": "correction or leaf_bonus (null/None when the bonus is unknown; CSV: empty)",
    "stop": "why the walk stopped: leaf, mismatch, no_target_row",
    "committed_tokens": "accepted tokens, then the bonus token when known (list; CSV: separated by spaces)",
    "num_committed": "committed tokens this round = accepted_length + 1 when the bonus is known",
    "notes": "replay notes: fallbacks, disagreements (list; CSV: joined by ' | ')",
}
COLUMNS = tuple(COLUMN_MEANINGS)  # in this order in every output
LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens", "notes")
INT_LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens")
NULLABLE_INT_COLUMNS = ("root_token", "bonus_token")


def shape_text(widths: Sequence[Sequence[int]]) -> str:
    """Short form of a round's shape, as TreeConfig.short(): ``[6]|[2,2]|[1,1]``."""
    return "|".join("[" + ",".join(str(int(w)) for w in row) + "]" for row in widths)


def _list_cell(v: Any) -> list[Any]:
    if v is None or (isinstance(v, float) and v != v):
        return []
    return [x.item() if hasattr(x, "item") else x for x in v]


def normalize_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Any loaded per-round frame (JSON Lines, CSV read with CSV_CONVERTERS, Parquet) to one form."""

    frame = frame.copy()
    for c in LIST_COLUMNS:
        if c in frame.columns:
            frame[c] = [_list_cell(v) for v in frame[c]]
    for c in NULLABLE_INT_COLUMNS:
        if c in frame.columns:
            frame[c] = frame[c].astype("Int64")
    if "bonus_kind" in frame.columns:
        frame["bonus_kind"] = [v if isinstance(v, str) and v else None for v in frame["bonus_kind"]]
    return frame


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split()]


def _notes(text: str) -> list[str]:
    return text.split(NOTE_SEPARATOR) if text else []


# pd.read_csv(path, converters=CSV_CONVERTERS, dtype=CSV_DTYPES) reads a per-round CSV back.
CSV_CONVERTERS = {**{c: _ints for c in INT_LIST_COLUMNS}, "notes": _notes, "bonus_kind": lambda s: s or None}
CSV_DTYPES = {c: "Int64" for c in NULLABLE_INT_COLUMNS} | {"round": str}
# pd.read_json(path, lines=True, dtype=JSON_DTYPES) keeps the round key "124_140" a string and the
# nullable ids integers (a null would make them float). A null bonus_kind still reads as NaN there
# (pandas 3 reads JSON text as its str dtype, whose missing value is NaN): read_json gives None.
JSON_DTYPES = {"round": str} | {c: "Int64" for c in NULLABLE_INT_COLUMNS}


def read_json(path_or_buffer: Any) -> pd.DataFrame:
    """Per-round JSON (``replay``/``batch --json`` lines, or the array ``stats --table rounds --json``
    prints) back as records_frame gave it: a null bonus_kind is None, null ids are pandas NA."""
    import io

    import pandas as pd

    if hasattr(path_or_buffer, "read"):
        text = path_or_buffer.read()
    else:
        with open(path_or_buffer, encoding="utf-8") as f:
            text = f.read()
    lines = not text.lstrip().startswith("[")
    return normalize_frame(pd.read_json(io.StringIO(text), lines=lines, dtype=JSON_DTYPES))


def read_csv(path: str | Path) -> pd.DataFrame:
    """A per-round CSV (``batch -o FILE.csv``, ``stats -o DIR``) back as records_frame gave it."""
    import pandas as pd

    return normalize_frame(pd.read_csv(path, converters=CSV_CONVERTERS, dtype=CSV_DTYPES))
