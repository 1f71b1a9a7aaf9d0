"""Decode ``.npy`` files and ``.npz`` archives within limits, without ``np.load``.

numpy's own public parser reads the header; its shape and dtype are then checked against the
bytes actually present before any array is made, so a 192-byte file that claims 10**12 cells is
refused, not allocated, and an ``.npz`` member is inflated only after its header agreed with the
member's declared size (which ``replay.util.bounded`` checked first).
"""

from __future__ import annotations

import io
import math
import struct
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.util.bounded import MAX_MATRIX_CELLS, MAX_MATRIX_FILE_BYTES, BoundedZip, Fail, dump_fail, read_file_bytes
from replay.util.errors import DumpError

NPY_MAGIC = b"\x93NUMPY"
MAX_NPY_HEADER_BYTES = 10_000  # numpy's own safety limit for the header's Python literal
MAX_NDIM = 32
NUMBER_KINDS = "biuf"  # bool, signed, unsigned, float: everything else is refused before reading data
PICKLE_PROTO = b"\x80"  # first byte of a binary pickle (numpy's object arrays, a bare pickle.dump)


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    offset: int  # bytes from the start of the .npy stream to its data

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def read_npy_header(read: Callable[[int], bytes], path: str | Path, field: str | None = None) -> NpyHeader:
    """Parse and check a .npy header from ``read(n)`` (the first bytes of the stream).

    Refuses object, structured, complex and string dtypes, negative or too many dimensions and more
    than MAX_MATRIX_CELLS values, before any data is read.
    """
    fail = dump_fail(path, field)
    prefix = read(len(NPY_MAGIC) + 2)
    if not prefix:
        raise fail("empty file: no matrix rows")
    if not prefix.startswith(NPY_MAGIC):
        if prefix.startswith(PICKLE_PROTO):
            raise fail("holds pickled objects; refusing to unpickle (save plain numeric arrays)")
        raise fail("corrupt or truncated numpy file (no valid .npy/.npz header)")
    if len(prefix) < 8:
        raise fail("truncated numpy file: the header ends early")
    major = prefix[6]
    if major not in (1, 2, 3):
        raise fail(f"unsupported .npy format version {major}.{prefix[7]}")
    len_format = "<H" if major == 1 else "<I"
    raw_len = read(struct.calcsize(len_format))
    if len(raw_len) < struct.calcsize(len_format):
        raise fail("truncated numpy file: the header ends early")
    (header_len,) = struct.unpack(len_format, raw_len)
    if header_len > MAX_NPY_HEADER_BYTES:
        raise fail(
            f"header of {header_len:,} bytes (numpy writes under 200; refusing more than {MAX_NPY_HEADER_BYTES:,})"
        )
    header = read(header_len)
    if len(header) < header_len:
        raise fail("truncated numpy file: the header ends early")
    parse = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns about Python 2 headers it can still read
            shape, fortran_order, dtype = parse(io.BytesIO(raw_len + header), max_header_size=MAX_NPY_HEADER_BYTES)
    # The header is a Python literal evaluated by ast.literal_eval: a hostile one raises ValueError,
    # SyntaxError, TypeError, MemoryError or RecursionError. All mean an invalid header.
    except Exception as exc:  # noqa: BLE001 - the boundary of an untrusted-input parser
        raise fail(
            f"invalid .npy header: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        ) from None
    _check_dtype(dtype, fail)
    if len(shape) > MAX_NDIM or any(d < 0 for d in shape):
        raise fail(f"invalid shape {shape} in the .npy header")
    cells = math.prod(shape)
    if cells > MAX_MATRIX_CELLS:
        raise fail(
            f"header claims shape {shape} ({cells:,} values); matrices are read up to {MAX_MATRIX_CELLS:,} values"
        )
    return NpyHeader(dtype, tuple(shape), bool(fortran_order), len(prefix) + len(raw_len) + header_len)


def shape_words(shape: tuple[int, ...]) -> str:
    """An array's shape as every message says it (here and in matrix_io): "1 row × 2 columns", "6 values in one dimension (1-D)".

    Never Python's tuple: "(1, 2)" beside token ids reads like two token values.
    """
    if len(shape) == 0:
        return "a single value (0-D)"
    if len(shape) == 1:
        return f"{shape[0]} value{'s' * (shape[0] != 1)} in one dimension (1-D)"
    if len(shape) == 2:
        r, c = shape
        return f"{r} row{'s' * (r != 1)} × {c} column{'s' * (c != 1)}"
    return " × ".join(map(str, shape)) + f" ({len(shape)}-D)"


def _check_dtype(dtype: np.dtype, fail: Fail) -> None:
    if dtype.hasobject:
        raise fail("holds pickled objects; refusing to unpickle (save plain numeric arrays)")
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in NUMBER_KINDS or dtype.itemsize < 1:
        raise fail(f"dtype {dtype.str!r} ({dtype}) is not read: token ids must be integers, scores real numbers")


def array_from_buffer(
    buf: bytearray | bytes, header: NpyHeader, path: str | Path, field: str | None = None
) -> np.ndarray:
    """The array a checked header describes, over ``buf`` (data starting at ``header.offset``)."""
    have = len(buf) - header.offset
    need = header.data_bytes
    if have != need:
        what = "truncated" if have < need else "trailing bytes after the data"
        raise dump_fail(path, field)(
            f"{what}: the header says {shape_words(header.shape)} of {header.dtype}, which needs {need:,} data bytes;"
            f" the file has {have:,}"
        )
    flat = np.frombuffer(buf, dtype=header.dtype, count=math.prod(header.shape), offset=header.offset)
    return flat.reshape(header.shape, order="F" if header.fortran_order else "C")


def read_npy(path: str | Path) -> np.ndarray:
    """The array of a .npy file, checked against the file's real size before it is made."""
    buf = read_file_bytes(path, MAX_MATRIX_FILE_BYTES)
    stream = io.BytesIO(buf)
    header = read_npy_header(stream.read, path)
    return array_from_buffer(buf, header, path)


def read_npz(path: str | Path, names: Iterable[str]) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """(the arrays among ``names`` that the archive holds, every array name it holds).

    Only the named members are inflated: each after its declared size passed ``BoundedZip.size`` and
    its .npy header agreed with that size, in bounded chunks that stop at the declared size.
    """
    data = read_file_bytes(path, MAX_MATRIX_FILE_BYTES)
    if not data.startswith(b"PK"):
        if data.startswith(NPY_MAGIC):
            raise DumpError(path, "a .npy file named .npz; rename it to .npy")
        if data.startswith(PICKLE_PROTO):
            raise DumpError(path, "holds pickled objects; refusing to unpickle (save plain numeric arrays)")
    with BoundedZip(data, path, "numpy file (.npz)") as archive:
        members = [n for n in archive.names() if n.endswith(".npy")]
        found = tuple(n[: -len(".npy")] for n in members)
        dupes = sorted({n for n in found if found.count(n) > 1})
        if dupes:
            raise DumpError(path, f"the archive holds {dupes[0]!r} more than once")
        out: dict[str, np.ndarray] = {}
        for name in names:
            if name in found:
                out[name] = _read_member_array(archive, name + ".npy", path, name)
    return out, found


def _read_member_array(archive: BoundedZip, member: str, path: str | Path, field: str) -> np.ndarray:
    size = archive.size(member)
    with archive.open(member) as stream:
        head = bytearray()

        def read(n: int) -> bytes:
            chunk = archive.read_exact(stream, min(n, size - len(head)), member) if len(head) < size else b""
            head.extend(chunk)
            return chunk

        header = read_npy_header(read, path, field)
        if header.offset + header.data_bytes != size:
            raise dump_fail(path, field)(
                f"the header says {shape_words(header.shape)} of {header.dtype}, which needs"
                f" {header.offset + header.data_bytes:,} bytes, "
                f"but the archive member declares {size:,} (corrupt archive)"
            )
        buf = bytearray(size)
        buf[: len(head)] = head
        buf[len(head) :] = archive.read_exact(stream, size - len(head), member)
    return array_from_buffer(buf, header, path, field)
