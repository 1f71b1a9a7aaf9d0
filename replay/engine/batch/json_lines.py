"""The JSON Lines of a batch replay's records (``replay --json``, ``batch --json``), formatted in
Arrow from the record's columns (replay.engine.batch.frames.record_columns): each line is
replay.core.records.json_line of the round's record, byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from replay.core.records import COLUMNS
from replay.io.table_files import joined_text

from .frames import Coded, NullableInts, record_columns, replayed, rows_of

_JSON_ROWS_PER_BLOCK = 16_384  # lines formatted at a time: ~7 MB of text, bounded memory at millions of rounds

# JSON text that json.dumps writes as it is, between quotes: printable ASCII but '"' and '\'
_PLAIN = r"^[ !#-\[\]-~]*$"


def write_batch_json_lines(result: Any, out: IO[str], progress: Callable[[int, int], None] | None = None) -> int:
    """The JSON Lines of the replayed rounds of ``result`` (a replay.engine.batch.BatchResult), one
    json_line(result.round_json(i)) per round; ``progress(lines written, lines)`` after each block.

    Each column's cells are formatted as JSON in Arrow (a text once per distinct value) and joined
    with the literal keys between them."""
    res = replayed(result)
    n = len(res)
    columns = {c: _quoted(v) for c, v in record_columns(res).items()}
    for start in range(0, n, _JSON_ROWS_PER_BLOCK):
        rows = slice(start, min(start + _JSON_ROWS_PER_BLOCK, n))
        out.write(joined_text(_json_lines({c: rows_of(v, rows) for c, v in columns.items()})))
        if progress:
            progress(rows.stop, n)
    return n


def _json_lines(columns: dict) -> Any:
    """pyarrow large_string array: the JSON line of each row of ``columns`` (keys in COLUMNS order,
    texts already quoted by _quoted; each line ends with a newline)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    args = []
    for k, c in enumerate(COLUMNS):
        args += [pa.scalar(("{" if k == 0 else ", ") + json.dumps(c) + ": ", text), _json_cells(columns[c])]
    return pc.binary_join_element_wise(*args, pa.scalar("}\n", text), pa.scalar("", text))


def _quoted(column):
    """``column`` with its texts (Coded values, text list items) as their JSON text: quoted once for
    the whole run, not per block."""
    import pyarrow as pa

    if isinstance(column, Coded):
        return Coded(_json_strings(column.values), column.codes)
    if isinstance(column, pa.ListArray) and pa.types.is_large_string(column.type.value_type):
        return pa.ListArray.from_arrays(column.offsets, _json_strings(column.values))
    return column


def _json_cells(column) -> Any:
    """[R] pyarrow large_string: each cell's JSON text (json.dumps' separators), texts already quoted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    if isinstance(column, NullableInts):
        return pc.if_else(pa.array(column.missing), pa.scalar("null", text), pc.cast(pa.array(column.values), text))
    if isinstance(column, Coded):
        return column.values.take(pa.array(column.codes))
    if isinstance(column, np.ndarray):
        return pc.cast(pa.array(column), text)
    joined = pc.binary_join(column.cast(pa.large_list(text)), pa.scalar(", ", text))  # a list column
    return pc.binary_join_element_wise(pa.scalar("[", text), joined, pa.scalar("]", text), pa.scalar("", text))


def _json_strings(texts: Any) -> Any:
    """[V] pyarrow large_string: json.dumps of each of ``texts`` (large_string; "null" where missing),
    made by Arrow where json.dumps only adds the quotes, by json.dumps elsewhere."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    quote = pa.scalar('"', text)
    out = pc.binary_join_element_wise(quote, texts, quote, pa.scalar("", text))
    escaped = np.flatnonzero(
        ~pc.fill_null(pc.match_substring_regex(texts, _PLAIN), True).to_numpy(zero_copy_only=False)
    )
    if escaped.shape[0]:
        mask = np.zeros(len(texts), dtype=bool)
        mask[escaped] = True
        dumped = pa.array([json.dumps(t) for t in texts.take(pa.array(escaped)).to_pylist()], type=text)
        out = pc.replace_with_mask(out, pa.array(mask), dumped)
    return pc.fill_null(out, pa.scalar("null", text))
