"""The CSV writer's scan of a string column's bytes for characters that need quotes agrees with a
look at every cell, on slices, nulls, empty cells and non-ASCII text."""

import numpy as np
import pyarrow as pa
import pytest

from replay.io.table_files import _csv_field, _holds_quote_bytes, _quoted

_ALPHABET = ["a", "b", "_", "1", "é", "字", ",", '"', "\n", "\r", " ", ""]


def _column(rng: np.random.Generator, n: int, special: float, kind) -> pa.Array:
    cells = []
    for _ in range(n):
        if rng.random() < 0.1:
            cells.append(None)
            continue
        picks = rng.choice(len(_ALPHABET), size=int(rng.integers(0, 6)))
        text = "".join(_ALPHABET[k] for k in picks if k < 6 or k == 10 or rng.random() < special)
        cells.append(text)
    return pa.array(cells, type=kind)


@pytest.mark.parametrize("kind", [pa.large_string(), pa.string()])
@pytest.mark.parametrize("special", [0.0, 0.05, 0.5])
def test_the_scan_agrees_with_every_cell(kind, special: float) -> None:
    rng = np.random.default_rng(int(special * 100))
    col = _column(rng, 400, special, kind)
    for lo, hi in [(0, 400), (0, 0), (3, 17), (100, 101), (250, 400)]:
        part = col.slice(lo, hi - lo)
        cells = part.to_pylist()
        needs = any(c is not None and c != _csv_field(c) for c in cells)
        assert _holds_quote_bytes(part) == needs  # pyarrow's nulls hold no bytes
        got = _quoted(part).to_pylist()
        assert got == [None if c is None else _csv_field(c) for c in cells]
