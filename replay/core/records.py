"""The one per-round record: its columns, how a replayed round becomes one, how it is written and read.

Every per-round output uses these columns with these meanings (docs/output-schema.md):
``replay --json`` and ``batch --json`` (JSON Lines), ``batch -o FILE.parquet|.csv``, the analysis
round table (``stats --table rounds``, ``report``'s rounds.parquet, ``replay.cli.api.rounds_table``;
it adds analysis columns after these). Lists stay lists in JSON and Parquet; CSV holds them as
text (ids separated by spaces, notes by `` | ``) and ``CSV_CONVERTERS`` reads them back.
Whatever the file, ``normalize_frame`` gives the same frame: lists as Python lists, nullable ids
as pandas ``Int64``, a missing bonus kind as None.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from replay.util.atomic import atomic_path, writes_in_place

from .vocab import PAD_TOKEN

if TYPE_CHECKING:  # imported where used: reading a record needs neither
    import numpy as np
    import pandas as pd

NOTE_SEPARATOR = " | "  # CSV text of the notes list (a note never contains it)


@dataclass(frozen=True)
class RoundRecord:
    """One replayed round (bonus excluded from accepted_length; see docs/vocabulary.md)."""

    round: str  # key a_b: the validate file's numbers
    key_a: int
    key_b: int
    root_token: int | None  # the last committed token before the round; None when unknown
    num_steps: int  # draft steps run this round (fewer than gamma after an early stop)
    num_nodes: int  # draft nodes, root excluded
    shape: str  # widths per step actually present, short form "[6]|[2,2]|[1,1]" (topHead = lengths)
    layout: str  # validate layout: parents or all
    layout_source: str  # stated or detected
    selection: str  # how expanded nodes were chosen (path_probability, parents, rank_major_fallback, root)
    accepted_length: int  # draft tokens accepted, bonus excluded
    accepted_tokens: tuple[int, ...]  # their token ids, root side first
    accepted_nodes: tuple[int, ...]  # their tree-order node ids
    bonus_token: int | None  # target's top-1 at the last accepted node; None when not in the dump
    bonus_kind: str | None  # correction or leaf_bonus; None when the bonus is unknown
    stop: str  # why the walk stopped: leaf, mismatch, no_target_row
    committed_tokens: tuple[int, ...]  # accepted tokens, then the bonus token when known
    num_committed: int  # len(committed_tokens) = accepted_length + (bonus known)
    notes: tuple[str, ...]  # replay notes (fallbacks, disagreements)

    def to_json(self) -> dict[str, Any]:
        return {name: list(v) if name in LIST_COLUMNS else v for name, v in ((n, getattr(self, n)) for n in COLUMNS)}


COLUMNS = tuple(f.name for f in fields(RoundRecord))
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
LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens", "notes")
INT_LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens")
NULLABLE_INT_COLUMNS = ("root_token", "bonus_token")


def shape_text(widths: Sequence[Sequence[int]]) -> str:
    """Short form of a round's shape, as TreeConfig.short(): ``[6]|[2,2]|[1,1]``."""
    return "|".join("[" + ",".join(str(int(w)) for w in row) + "]" for row in widths)


def records_of_batch(result: Any) -> Iterable[RoundRecord]:  # a replay.engine BatchResult
    """The records of a batch replay's replayed rounds (replay.engine.batch.BatchResult), in its order."""
    for obj in result.iter_json():
        kw: dict[str, Any] = {k: tuple(v) if k in LIST_COLUMNS else v for k, v in obj.items()}
        yield RoundRecord(**kw)


def json_line(obj: dict[str, Any]) -> str:
    """One record's JSON Lines line: ``obj`` is RoundRecord.to_json() (its keys in COLUMNS order)."""
    return json.dumps(obj) + "\n"


# Columns that vary round by round; the others follow from a few small codes (see _batch_templates).
_ROUND_VALUES = (
    "round",
    "key_a",
    "key_b",
    "root_token",
    "accepted_length",
    "accepted_tokens",
    "accepted_nodes",
    "bonus_token",
    "committed_tokens",
    "num_committed",
)


def write_batch_json_lines(result: Any, out: IO[str], progress: Callable[[int, int], None] | None = None) -> int:
    """The JSON Lines of records_of_batch(result), one json_line per record, formatted from the result's arrays;
    ``progress(lines written, lines)`` after each block.

    result: a replay.engine.batch.BatchResult. Each line is json_line(result.round_json(i)) byte for byte:
    the columns that depend only on a round's codes (shape, layout, selection, bonus kind, stop)
    come from round_json of one round per distinct code tuple (a template), the rest are
    formatted column by column in Arrow from the arrays as round_json builds them, and spliced
    into the templates' literal text; the first line of every code tuple is checked against
    json_line(round_json).
    """
    import numpy as np

    ok = np.flatnonzero(result.ok)  # [R'] int64
    if not ok.size:
        return 0
    own_notes = _own_notes(result, ok)  # [R'] bool
    templates, which, checked = _batch_templates(result, ok, own_notes)
    pieces = [_template_pieces(t) for t in templates]
    which_rows = np.asarray(which, dtype=np.int64)  # [R'] template of each round
    for start in range(0, ok.shape[0], _JSON_ROWS_PER_BLOCK):
        rows = np.arange(start, min(start + _JSON_ROWS_PER_BLOCK, ok.shape[0]))
        lines = _json_block(result, ok[rows], own_notes[rows], which_rows[rows], pieces)
        for j in sorted(k for k in checked if start <= k < start + rows.shape[0]):
            i = int(ok[j])
            if lines[j - start].as_py() != json_line(result.round_json(i)):
                key = "_".join(str(int(v)) for v in result.keys[:, i])
                raise ValueError(f"round {key}: the batch line differs from json_line(round_json)")
        out.write(_utf8_text(lines))
        if progress:
            progress(start + rows.shape[0], ok.shape[0])
    return int(ok.shape[0])


_JSON_ROWS_PER_BLOCK = 16_384  # lines formatted at a time: ~7 MB of text, bounded memory at millions of rounds


def _template_pieces(template: str) -> list[tuple[str, str | None]]:
    """A str.format template as (literal text, column name or None) pieces, in order."""
    import string

    return [(lit, name) for lit, name, _, _ in string.Formatter().parse(template)]


def _json_block(result: Any, ok: Any, own_notes: Any, which: Any, pieces: list[list[tuple[str, str | None]]]) -> Any:
    """pyarrow large_string array: the JSON lines of rounds ``ok`` (each line ends with a newline)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    n = ok.shape[0]
    lengths = result.accepted_length[ok].astype(np.int64)
    bonus = result.bonus_token[ok].astype(np.int64)
    known = bonus != PAD_TOKEN
    keys = result.keys[:, ok].astype(np.int64)
    roots = result.root_tokens[ok].astype(np.int64)

    def ints(v: Any, missing: Any = None) -> Any:
        s = pc.cast(pa.array(v), text)
        return s if missing is None else pc.if_else(pa.array(missing), pa.scalar("null", text), s)

    def listed(values2d: Any, counts: Any) -> Any:  # [R, W] row-major, the first counts[r] of each row, as JSON lists
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        flat = values2d[np.arange(values2d.shape[1])[None, :] < counts[:, None]].astype(np.int64)
        joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), ints(flat)), pa.scalar(", ", text))
        return pc.binary_join_element_wise(pa.scalar("[", text), joined, pa.scalar("]", text), pa.scalar("", text))

    g = result.accepted_tokens.shape[0]
    tokens = result.accepted_tokens[:, ok].T.astype(np.int64)
    committed = np.zeros((n, g + 1), dtype=np.int64)
    committed[:, :g] = tokens
    at = np.minimum(lengths, g)
    committed[np.arange(n), at] = np.where(known, bonus, committed[np.arange(n), at])
    quote = pa.scalar('"', text)
    cols = {
        "round": pc.binary_join_element_wise(
            quote, ints(keys[0]), pa.scalar("_", text), ints(keys[1]), quote, pa.scalar("", text)
        ),
        "key_a": ints(keys[0]),
        "key_b": ints(keys[1]),
        "root_token": ints(roots, roots == PAD_TOKEN),
        "accepted_length": ints(lengths),
        "accepted_tokens": listed(tokens, lengths),
        "accepted_nodes": listed(result.accepted_nodes[:, ok].T, lengths),
        "bonus_token": ints(bonus, ~known),
        "committed_tokens": listed(committed, lengths + known),
        "num_committed": ints(lengths + known),
        "notes": pa.array([json.dumps(result.notes(i)) for i in ok[own_notes].tolist()], type=text),
    }
    note_at = np.cumsum(own_notes) - 1  # row -> index into cols["notes"] for rows with own notes
    parts, order = [], []
    empty = pa.scalar("", text)
    for t in np.unique(which).tolist():
        rows = np.flatnonzero(which == t)
        take = pa.array(rows)
        args = []
        for lit, name in pieces[t]:
            if lit:
                args.append(pa.scalar(lit, text))
            if name == "notes":
                args.append(cols["notes"].take(pa.array(note_at[rows])))
            elif name is not None:
                args.append(cols[name].take(take))
        parts.append(
            pc.binary_join_element_wise(*args, empty) if len(args) > 1 else pa.array([lit] * rows.shape[0], text)
        )
        order.append(rows)
    lines = pa.concat_arrays(parts)
    return lines.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def _utf8_text(lines: Any) -> str:
    """The concatenated text of a large_string array (its data buffer, without a copy per line)."""
    import numpy as np

    if not len(lines):
        return ""
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return memoryview(data)[int(ends[0]) : int(ends[-1])].tobytes().decode("utf-8")


def _own_notes(result: Any, ok: np.ndarray) -> np.ndarray:
    """[R'] bool: rounds with selection notes of their own; other rounds' notes follow from their codes."""
    import numpy as np

    return np.isin(ok, np.fromiter(result.selection_notes, dtype=np.int64, count=len(result.selection_notes)))


def _batch_templates(result: Any, ok: np.ndarray, own: np.ndarray) -> tuple[list[str], list[int], set[int]]:
    """(one str.format template per distinct code tuple, each ok round's template index, the
    positions in ``ok`` of each template's first round, whose line the caller checks).

    ok: [R'] int64 the rounds written; own: [R'] bool their _own_notes. A template holds a line with every column but _ROUND_VALUES
    filled in from round_json of its first round, and is checked on that round. The codes are
    everything round_json reads besides _ROUND_VALUES' arrays (notes: the selection column, the
    extra validate rows and the layout; a round with selection notes of its own formats its notes).
    """
    import numpy as np

    codes = np.concatenate(
        (
            result.shape_index[ok][None],
            result.layout[ok][None],
            result.layout_stated[ok][None],
            result.selection[:, ok],
            result.bonus_kind[ok][None],
            result.stop[ok][None],
            result.validate_extra_rows[ok][None],
            own[None],
        )
    ).astype(np.int64)  # [codes, R']
    _, first, which = np.unique(codes, axis=1, return_index=True, return_inverse=True)
    templates = []
    for i, mine in zip(ok[first].tolist(), own[first].tolist()):
        per_round = _ROUND_VALUES + ("notes",) if mine else _ROUND_VALUES
        obj = result.round_json(i)
        if tuple(obj) != COLUMNS:
            raise ValueError(f"batch record keys {tuple(obj)} differ from the record's columns {COLUMNS}")
        fixed = ", ".join(
            f"{json.dumps(c)}: "
            + ("{" + c + "}" if c in per_round else json.dumps(obj[c]).replace("{", "{{").replace("}", "}}"))
            for c in COLUMNS
        )
        template = "{{" + fixed + "}}\n"
        templates.append(template)
    return templates, which.reshape(-1).tolist(), set(first.tolist())


def records_frame(records: Iterable[RoundRecord]) -> pd.DataFrame:
    """The records as a pandas DataFrame in COLUMNS order (lists as lists, nullable ids Int64)."""
    import pandas as pd

    rows = [rec.to_json() for rec in records]
    frame = (
        pd.DataFrame(rows, columns=list(COLUMNS))
        if rows
        else pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    )
    return normalize_frame(frame)


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


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its list columns as CSV text (ids separated by spaces, notes by `` | ``)."""
    frame = frame.copy()
    for c in INT_LIST_COLUMNS:
        if c in frame.columns:
            frame[c] = [" ".join(str(int(t)) for t in v) for v in frame[c]]
    if "notes" in frame.columns:
        frame["notes"] = [NOTE_SEPARATOR.join(v) for v in frame["notes"]]
    return frame


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


def table_format(path: str | Path) -> str | None:
    """ "parquet" or "csv", the format a per-round table is written in at ``path``: from its suffix
    (any case), CSV text for a device or FIFO (``/dev/null``, ``/dev/stdout``, which have none);
    None for any other name (the caller says what it takes)."""
    name = str(path).lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".csv"):
        return "csv"
    return "csv" if writes_in_place(path) else None  # /dev/stdout to a file, a pipe or a terminal too


# pyarrow's Parquet options for every table the toolkit writes (batch -o, stats -o, report's tables/):
# snappy, pyarrow's default, and no min/max statistics: at 10^6 rounds their text columns' min/max
# cost a fifth of the node table's writing (bench/parquet_options.py); the values are the same
PARQUET_OPTIONS = {"compression": "snappy", "write_statistics": False}

_CSV_ROWS_PER_WRITE = 65_536  # rows encoded at a time: bounded memory at millions of rounds


def write_arrow_table(table: Any, path: Any, progress: Callable[[int, int], None] | None = None) -> None:
    """A per-round pyarrow Table (replay.engine.batch.frames.record_arrow) to ``path``, atomically:
    the bytes pandas writes of the same rows as a frame (csv_frame for CSV; tests/test_batch_tables.py),
    encoded column by column in Arrow rather than cell by cell. ``progress(rows written, rows)``:
    after each block of a CSV, at the start and the end of a Parquet file (pyarrow writes it at once)."""
    with atomic_path(path) as tmp:
        if progress:
            progress(0, table.num_rows)
        if table_format(path) == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp, **PARQUET_OPTIONS)
        else:
            with open(tmp, "wb") as out:
                out.write((",".join(_csv_field(c) for c in table.column_names) + "\n").encode())
                for start in range(0, table.num_rows, _CSV_ROWS_PER_WRITE):
                    out.write(_csv_lines(table.slice(start, _CSV_ROWS_PER_WRITE)))
                    if progress:
                        progress(min(start + _CSV_ROWS_PER_WRITE, table.num_rows), table.num_rows)
        if progress:
            progress(table.num_rows, table.num_rows)


def _csv_field(text: str) -> str:
    """One CSV cell as pandas' to_csv writes it (csv.QUOTE_MINIMAL; an empty string stays empty)."""
    if any(ch in text for ch in _CSV_QUOTE_IF):
        return '"' + text.replace('"', '""') + '"'
    return text


_CSV_QUOTE_IF = ',"\r\n'


def csv_header(names: Sequence[str]) -> bytes:
    """The header line pandas' to_csv writes for these column names."""
    return (",".join(_csv_field(c) for c in names) + "\n").encode()


def frame_csv_lines(table: Any) -> memoryview:
    """Rows of a pyarrow Table converted from a pandas frame (``Table.from_pandas``) as the frame's
    ``csv_frame(df).to_csv(index=False, header=False)`` writes them, column by column in Arrow:
    bools as True/False, floats as numpy prints them (pandas' text; NaN empty), strings quoted
    where they need it."""
    return _csv_lines(table, frame_cells=True)


def _csv_lines(table: Any, frame_cells: bool = False) -> memoryview:
    """Rows of ``table`` as UTF-8 CSV lines (csv_frame's list encoding; missing cells empty).
    ``frame_cells``: frame_csv_lines' bools, floats and strings."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    cells = []
    plain = True  # no cell holds a comma, quote or line end: pyarrow's CSV writer may join them
    for name, col in zip(table.column_names, table.columns):
        col = col.combine_chunks()
        kind = col.type
        safe = name in INT_LIST_COLUMNS or any(
            is_kind(kind) for is_kind in (pa.types.is_integer, pa.types.is_boolean, pa.types.is_floating)
        )
        if name in INT_LIST_COLUMNS:
            col = pc.binary_join(col.cast(pa.large_list(text)), pa.scalar(" ", text))
        elif name == "notes":
            col = pc.binary_join(col.cast(pa.large_list(text)), pa.scalar(NOTE_SEPARATOR, text))
        elif frame_cells and pa.types.is_boolean(kind):
            col = pc.if_else(col, pa.scalar("True", text), pa.scalar("False", text))
        elif frame_cells and pa.types.is_floating(kind):
            col = _float_text(col)
        elif pa.types.is_floating(kind):  # NaN (a bound not determined) empty, as docs/output-schema.md says
            col = pc.if_else(pc.is_nan(col), pa.scalar(None, kind), col).cast(text)
        elif pa.types.is_integer(kind):
            col = _int_text(col)
        else:
            col = col.cast(text)
        if name == "notes" or pa.types.is_large_string(kind) or (frame_cells and pa.types.is_string(kind)):
            quoted = _quoted(col)
            safe, col = quoted is col, quoted
        plain &= safe
        cells.append(pc.fill_null(col, pa.scalar("", text)))
    if plain and cells and len(cells[0]):
        return _written_csv(cells, table.column_names)
    cells[-1] = pc.binary_join_element_wise(cells[-1], pa.scalar("\n", text), pa.scalar("", text))
    lines = pc.binary_join_element_wise(*cells, pa.scalar(",", text))
    if not len(lines):
        return memoryview(b"")
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return memoryview(data)[int(ends[0]) : int(ends[-1])]


def _written_csv(cells: list[Any], names: list[str]) -> memoryview:
    """Text cells without a comma, quote or line end joined into CSV lines by pyarrow's writer (no
    quoting: the bytes of the cells joined by ',' and ending in '\n'), ~2× faster than the joins."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    out = pa.BufferOutputStream()
    pa_csv.write_csv(
        pa.Table.from_arrays(cells, names=[str(k) for k in range(len(names))]),
        out,
        pa_csv.WriteOptions(include_header=False, quoting_style="none"),
    )
    return memoryview(out.getvalue())


_INT_TEXTS = 4096  # an integer column spanning at most this many values is written by lookup


def _int_text(col: Any) -> Any:
    """An integer column as text (Arrow's cast: the decimal digits): a column of few distinct values
    (ids, depths, ranks) takes each cell's text from its range's texts, ~3× faster than formatting each."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    span = pc.min_max(col).as_py()
    lo, hi = span["min"], span["max"]
    if lo is None or hi - lo >= _INT_TEXTS or hi - lo >= len(col):
        return col.cast(text)
    texts = pa.array(np.arange(lo, hi + 1).astype(str).astype(object), type=text)
    return texts.take(pc.subtract(col.cast(pa.int64()), pa.scalar(lo, pa.int64())))


# |x| in [1e-4, 1e9), not a whole number: Arrow's shortest text of a float64 is numpy's (checked on
# millions of values; outside it Arrow writes 1e-05 as 0.00001, 1.0 as 1 and large values in
# scientific form sooner)
_FLOAT_AS_ARROW = (1e-4, 1e9)


def _float_text(col: Any) -> Any:
    """[k] float cells as pandas' to_csv writes them (numpy's str of each value, NaN empty):
    Arrow's cast where it gives the same text, numpy's for the other values (once per distinct value)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    v = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)  # nulls as NaN: both are empty
    lo, hi = _FLOAT_AS_ARROW
    with np.errstate(invalid="ignore"):
        size = np.abs(v)
        other = ~((size >= lo) & (size < hi) & (v != np.trunc(v))) & ~np.isnan(v)
    out = pa.array(v).cast(text)
    if other.any():
        bits, where = np.unique(v[other].view(np.int64), return_inverse=True)  # by bits: -0.0 is not 0.0
        own = pa.array(bits.view(np.float64).astype(str).astype(object)[where.reshape(-1)], type=text)
        index = np.cumsum(other) - 1
        out = pc.if_else(pa.array(other), pc.take(own, pa.array(np.where(other, index, 0))), out)
    return pc.if_else(pa.array(np.isnan(v)), pa.scalar(None, text), out)


def _holds_quote_bytes(col: Any) -> bool:
    """Whether some byte of a string column's cells is one _csv_field quotes for (False: no cell
    needs quotes), read from its data buffer at once (several times faster than a regex over the cells). Those
    characters are ASCII, whose bytes never occur inside another character's UTF-8 bytes; a null's
    bytes (none, as pyarrow makes them) count too, so True only means the cells must be looked at."""
    import numpy as np
    import pyarrow as pa

    width = {pa.large_string(): np.int64, pa.string(): np.int32}.get(col.type)
    if width is None or not isinstance(col, pa.Array):
        return True
    _, offsets, data = col.buffers()
    if not len(col) or data is None:
        return False
    ends = np.frombuffer(offsets, dtype=width)[col.offset : col.offset + len(col) + 1]
    quote = np.zeros(256, dtype=bool)
    quote[list(_CSV_QUOTE_IF.encode())] = True
    return bool(quote[np.frombuffer(data, dtype=np.uint8)[int(ends[0]) : int(ends[-1])]].any())


def _quoted(col: Any) -> Any:
    """_csv_field of every cell of a string column; only the cells that need quotes are touched."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not _holds_quote_bytes(col):
        return col
    needs = pc.fill_null(pc.match_substring_regex(col, "[" + _CSV_QUOTE_IF + "]"), False)
    if not pc.any(needs).as_py():
        return col
    values = pc.unique(col.filter(needs)).to_pylist()
    fixed = pa.array([_csv_field(v) for v in values], type=pa.large_string())
    where = pc.index_in(col, value_set=pa.array(values, type=pa.large_string()))
    return pc.if_else(pc.is_null(where), col, pc.take(fixed, where))
