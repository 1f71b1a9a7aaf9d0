"""A .npy header is parsed in one place: replay.io.formats.npyfile.read_npy_header, for dump files
and a packed run's array files alike (replay.io.packed.blocks calls it with no cell limit, since
packed.json bounds the size), so a damaged header is refused with the same checks and words
wherever it is read."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import numpy as np
import pytest

from replay.io.formats.npyfile import read_npy_header
from replay.util.bounded import MAX_MATRIX_CELLS
from replay.util.errors import DumpError
from tests.library_scan import assert_one_place

HOME = "replay/io/formats/npyfile.py"
PARSERS = ("read_magic", "read_array_header_1_0", "read_array_header_2_0", "_read_array_header", "descr_to_dtype")


def _header_parses(path: Path) -> list[str]:
    """Source text of each use of numpy's .npy header readers."""
    text = path.read_text()
    return [
        ast.get_source_segment(text, node) or node.attr
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Attribute) and node.attr in PARSERS
    ]


def test_npy_headers_are_parsed_by_read_npy_header_only():
    assert_one_place(HOME, _header_parses, "a .npy header parsed", "read_npy_header")


def _header_of(shape: tuple[int, ...]) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": "<i4", "fortran_order": False, "shape": shape})
    return out.getvalue()


def test_the_cell_limit_is_the_callers():
    big = (MAX_MATRIX_CELLS + 1,)
    with pytest.raises(DumpError, match="matrices are read up to"):
        read_npy_header(io.BytesIO(_header_of(big)).read, "x.npy")
    head = read_npy_header(io.BytesIO(_header_of(big)).read, "x.npy", "header", max_cells=None)
    assert head.shape == big and head.version == (1, 0) and head.offset == len(_header_of(big))
