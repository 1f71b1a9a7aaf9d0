"""Per-round and analysis tables as files: Parquet through pyarrow, CSV encoded column by column in
Arrow (the bytes pandas' ``to_csv`` writes of the frame with its list columns as text: ids separated
by spaces, notes by `` | ``; replay/testing/records_reference.py holds the pandas writer they are
checked against). ``batch -o``, ``stats -o``/``--csv``, ``compare --csv``/``--per-round``, the
report's tables/ and a sweep's results table write through here: in the reading layer, which the
engine, the analysis and the live harness may all import."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from replay.core.records import INT_LIST_COLUMNS, LIST_COLUMNS, NOTE_SEPARATOR
from replay.util.atomic import atomic_path
from replay.util.file_formats import FileFormats

# A per-round table is Parquet or CSV by its name; CSV text to a device or FIFO (/dev/stdout).
TABLE_FORMATS = FileFormats((".parquet", ".csv"), device="csv")


def table_format(path: str | Path) -> str | None:
    """ "parquet" or "csv", the format a per-round table is written in at ``path`` (TABLE_FORMATS);
    None for any other name (the caller says what it takes)."""
    return TABLE_FORMATS.named(path)


# pyarrow's Parquet options for every table the toolkit writes (batch -o, stats -o, report's tables/):
# snappy, pyarrow's default, and no min/max statistics: at 10^6 rounds their text columns' min/max
# cost a fifth of the node table's writing (bench/parquet_options.py); the values are the same
PARQUET_OPTIONS = {"compression": "snappy", "write_statistics": False}


def arrow_sink(path: Any) -> IO[bytes]:
    """``path`` opened for pyarrow to write into, never the path itself: pyarrow encodes a path as
    strict UTF-8, which a name holding other bytes (kept by Python as lone surrogates, ``-o $'\\xfe/t'``)
    fails, while Python's open takes any name the file system does. Every Parquet file goes through here."""
    return open(path, "wb")


_CSV_ROWS_PER_WRITE = 65_536  # rows encoded at a time: bounded memory at millions of rounds


def write_arrow_table(table: Any, path: Any, progress: Callable[[int, int], None] | None = None) -> None:
    """A per-round pyarrow Table (replay.engine.batch.frames.record_arrow) to ``path``, atomically:
    the bytes pandas writes of the same rows as a frame (for CSV, of replay.testing.records_reference's
    csv_frame; tests/test_batch_tables.py), encoded column by column in Arrow rather than cell by cell. ``progress(rows written, rows)``:
    after each block of a CSV, at the start and the end of a Parquet file (pyarrow writes it at once)."""
    with atomic_path(path) as tmp:
        if progress:
            progress(0, table.num_rows)
        if table_format(path) == "parquet":
            import pyarrow.parquet as pq

            with arrow_sink(tmp) as out:
                pq.write_table(table, out, **PARQUET_OPTIONS)
        else:
            with open(tmp, "wb") as out:
                out.write(csv_header(table.column_names))
                for start in range(0, table.num_rows, _CSV_ROWS_PER_WRITE):
                    out.write(_csv_lines(table.slice(start, _CSV_ROWS_PER_WRITE)))
                    if progress:
                        progress(min(start + _CSV_ROWS_PER_WRITE, table.num_rows), table.num_rows)
        if progress:
            progress(table.num_rows, table.num_rows)


def write_frame_csv(frame: Any, out: IO[bytes]) -> None:
    """A pandas frame as CSV to ``out``, its header line and rows: the bytes pandas writes of
    ``csv_frame(frame).to_csv(index=False)`` (replay.testing.records_reference), encoded in Arrow."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    for i, f in enumerate(table.schema):
        if f.name not in LIST_COLUMNS and (pa.types.is_list(f.type) or pa.types.is_large_list(f.type)):
            # another list column (a config's top_head, per-position rates): pandas writes str() of each
            # cell, which the cell's Python objects decide (a NaN in a list stays nan), so from the frame
            cells = [None if _missing(v) else str(v) for v in frame[f.name]]
            table = table.set_column(i, f.name, pa.array(cells, type=pa.large_string()))
    write_csv_rows(table, out, header=True)


def write_frame_parquet(frame: Any, path: Any) -> None:
    """A pandas frame as Parquet to ``path`` with PARQUET_OPTIONS (pandas' schema metadata kept:
    ``pd.read_parquet`` gives the frame back)."""
    with arrow_sink(path) as out:
        frame.to_parquet(out, index=False, **PARQUET_OPTIONS)


def _missing(cell: Any) -> bool:
    """Whether pandas writes ``cell`` of an object column as an empty field (None or NaN)."""
    return cell is None or (isinstance(cell, float) and cell != cell)


def frame_csv_text(frame: Any) -> str:
    """write_frame_csv's bytes as text, for a text stream (stdout, or the StringIO a test puts there)."""
    import io

    out = io.BytesIO()
    write_frame_csv(frame, out)
    return out.getvalue().decode("utf-8")


def write_frame_csv_file(frame: Any, path: Any) -> None:
    """write_frame_csv to the file ``path``, atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        write_frame_csv(frame, out)


def write_csv_rows(table: Any, out: IO[bytes], header: bool) -> None:
    """frame_csv_lines of ``table`` to ``out`` block by block (bounded memory), after the header line when ``header``."""
    if header:
        out.write(csv_header(table.column_names))
    for start in range(0, table.num_rows, _CSV_ROWS_PER_WRITE):
        out.write(frame_csv_lines(table.slice(start, _CSV_ROWS_PER_WRITE)))


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
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    cells = []
    plain = True  # no cell holds a comma, quote or line end: pyarrow's CSV writer may join them
    for name, col in zip(table.column_names, table.columns):
        col = col.combine_chunks()
        if pa.types.is_dictionary(col.type):  # a pandas Categorical: its values' text
            col = col.dictionary_decode()
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
    if len(cells) == 1:  # Python's csv writes a row of one empty field as "", not as an empty line
        quoted = pc.if_else(pc.equal(cells[0], pa.scalar("", text)), pa.scalar('""', text), cells[0])
        plain &= quoted.equals(cells[0])
        cells[0] = quoted
    if plain and cells and len(cells[0]):
        return _written_csv(cells, table.column_names)
    cells[-1] = pc.binary_join_element_wise(cells[-1], pa.scalar("\n", text), pa.scalar("", text))
    return joined_bytes(pc.binary_join_element_wise(*cells, pa.scalar(",", text)))


def joined_bytes(texts: Any) -> memoryview:
    """The UTF-8 bytes of a large_string array's cells one after the other (its data buffer, without
    a copy per cell)."""
    import numpy as np

    if not len(texts):
        return memoryview(b"")
    _, offsets, data = texts.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64)[texts.offset : texts.offset + len(texts) + 1]
    return memoryview(data)[int(ends[0]) : int(ends[-1])]


def joined_text(texts: Any) -> str:
    """The text of a large_string array's cells one after the other (joined_bytes decoded)."""
    return joined_bytes(texts).tobytes().decode("utf-8")


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
    native = np.asarray(col.to_numpy(zero_copy_only=False))  # nulls as NaN: both are empty
    v = native.astype(np.float64)
    lo, hi = _FLOAT_AS_ARROW
    with np.errstate(invalid="ignore"):
        size = np.abs(v)
        other = ~((size >= lo) & (size < hi) & (v != np.trunc(v))) & ~np.isnan(v)
    if native.dtype != np.float64:  # Arrow writes a float64's text: float32 values by numpy's text of their own
        other = ~np.isnan(v)
    out = pa.array(v).cast(text)
    if other.any():
        width = np.dtype(f"i{native.dtype.itemsize}")
        bits, where = np.unique(native[other].view(width), return_inverse=True)  # by bits: -0.0 is not 0.0
        own = pa.array(bits.view(native.dtype).astype(str).astype(object)[where.reshape(-1)], type=text)
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
