"""Decode ``.npy`` files and ``.npz`` archives within limits, without ``np.load``.

numpy's own public parser reads the header; its shape and dtype are then checked against the
bytes actually present before any array is made, so a 192-byte file that claims 10**12 cells is
refused, not allocated, and an ``.npz`` member is inflated only after its header agreed with the
member's declared size (which ``replay.util.bounded`` checked first). An archive in np.savez's own
plain form (stored members, CRCs matching) is read straight from its bytes, and a header in
np.save's own form is matched rather than compiled (docs/benchmarks.md, "``.npz`` directories");
anything else takes the zipfile path, which words every error.
"""

from __future__ import annotations

import io
import math
import re
import struct
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.util.bounded import (
    MAX_MATRIX_CELLS,
    MAX_MATRIX_FILE_BYTES,
    BoundedZip,
    Fail,
    check_cells,
    dump_fail,
    read_file_bytes,
    too_many_zip_entries,
)
from replay.util.errors import DumpError

NPY_MAGIC = b"\x93NUMPY"
MAX_NPY_HEADER_BYTES = 10_000  # numpy's own safety limit for the header's Python literal
MAX_NDIM = 32
NUMBER_KINDS = "biuf"  # bool, signed, unsigned, float: everything else is refused before reading data
PICKLE_PROTO = b"\x80"  # first byte of a binary pickle (numpy's object arrays, a bare pickle.dump)
EMPTY_MATRIX_FILE = "empty file: no matrix rows"  # the one wording: the .npy, text and raw readers refuse with it
PICKLED = "holds pickled objects; refusing to unpickle (save plain numeric arrays)"  # a .npy, an .npz, a dtype
HEADER_ENDS_EARLY = "truncated numpy file: the header ends early"

# The header dict exactly as np.save writes it (keys in this order, shape as repr(tuple) with no
# leading zeros, space padding, one newline). ast.literal_eval reads every string this matches to
# the same (descr, fortran_order, shape), so matching it skips compile() (~60 us a header); any
# other form still goes through numpy's own parser.
_NUM = rb"(?:0|[1-9][0-9]{0,17})"
_NPY_HEADER = re.compile(
    rb"\{'descr': '([<>|=][biuf][0-9]{1,2})', 'fortran_order': (False|True), 'shape': \((|"
    + _NUM
    + rb",|"
    + _NUM
    + rb"(?:, "
    + _NUM
    + rb")+)\), \} *\n"
)
_DESCR_DTYPES: dict[bytes, np.dtype | None] = {}  # bounded: _NPY_HEADER admits a few thousand descrs


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    offset: int  # bytes from the start of the .npy stream to its data
    version: tuple[int, int]  # (major, minor) as its magic says

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def read_npy_header(
    read: Callable[[int], bytes], path: str | Path, field: str | None = None, max_cells: int | None = MAX_MATRIX_CELLS
) -> NpyHeader:
    """Parse and check a .npy header from ``read(n)`` (the first bytes of the stream): the one .npy
    header parser, for dump files and a packed run's array files alike.

    Refuses object, structured, complex and string dtypes, negative or too many dimensions and more
    than ``max_cells`` values (None: no limit, for a packed array whose size packed.json bounds),
    before any data is read.
    """
    fail = dump_fail(path, field)
    prefix = read(len(NPY_MAGIC) + 2)
    if not prefix:
        raise fail(EMPTY_MATRIX_FILE)
    if not prefix.startswith(NPY_MAGIC):
        if prefix.startswith(PICKLE_PROTO):
            raise fail(PICKLED)
        raise fail("corrupt or truncated numpy file (no valid .npy/.npz header)")
    if len(prefix) < 8:
        raise fail(HEADER_ENDS_EARLY)
    major = prefix[6]
    if major not in (1, 2, 3):
        raise fail(f"unsupported .npy format version {major}.{prefix[7]}")
    len_format = "<H" if major == 1 else "<I"
    raw_len = read(struct.calcsize(len_format))
    if len(raw_len) < struct.calcsize(len_format):
        raise fail(HEADER_ENDS_EARLY)
    (header_len,) = struct.unpack(len_format, raw_len)
    if header_len > MAX_NPY_HEADER_BYTES:
        raise fail(
            f"header of {header_len:,} bytes (numpy writes under 200; refusing more than {MAX_NPY_HEADER_BYTES:,})"
        )
    header = read(header_len)
    if len(header) < header_len:
        raise fail(HEADER_ENDS_EARLY)
    common = _common_header(header) if major == 1 else None
    if common is not None:
        shape, fortran_order, dtype = common
    else:
        shape, fortran_order, dtype = _numpy_parse(major, raw_len + header, fail)
    _check_dtype(dtype, fail)
    if len(shape) > MAX_NDIM or any(d < 0 for d in shape):
        raise fail(f"invalid shape {' × '.join(map(str, shape))} in the .npy header")
    cells = math.prod(shape)
    check_cells(cells, lambda: f"header claims {shape_words(shape)} ({cells:,} values)", fail, max_cells)
    return NpyHeader(
        dtype, tuple(shape), bool(fortran_order), len(prefix) + len(raw_len) + header_len, (major, prefix[7])
    )


def _common_header(header: bytes) -> tuple[tuple[int, ...], bool, np.dtype] | None:
    """(shape, fortran_order, dtype) of a header in np.save's own form, else None (parse it fully)."""
    m = _NPY_HEADER.fullmatch(header)
    if m is None:
        return None
    descr = m[1]
    if descr not in _DESCR_DTYPES:
        try:  # what numpy's descr_to_dtype does with a string
            _DESCR_DTYPES[descr] = np.dtype(descr.decode("ascii"))
        except Exception:  # noqa: BLE001 - numpy's parser words the error
            _DESCR_DTYPES[descr] = None
    dtype = _DESCR_DTYPES[descr]
    if dtype is None:
        return None
    return tuple(int(d) for d in m[3].split(b",") if d), m[2] == b"True", dtype


def _numpy_parse(major: int, raw: bytes, fail: Fail) -> tuple[tuple[int, ...], bool, np.dtype]:
    parse = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns about Python 2 headers it can still read
            shape, fortran_order, dtype = parse(io.BytesIO(raw), max_header_size=MAX_NPY_HEADER_BYTES)
    # The header is a Python literal evaluated by ast.literal_eval: a hostile one raises ValueError,
    # SyntaxError, TokenError, TypeError, MemoryError or RecursionError. All mean a damaged header.
    except Exception as exc:  # noqa: BLE001 - the boundary of an untrusted-input parser
        # the parser's own words are Python's (a tokenizer tuple, a dict repr): say what is wrong instead
        text = raw.decode("latin-1")
        text = text[text.find("{") :] if "{" in text else text
        shown = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)[:60].rstrip()
        raise fail(
            "damaged .npy header: expected a dictionary like {'descr': '<i8', 'fortran_order': False, "
            f"'shape': (3, 4)}} as numpy.save writes it, found {shown!r} ({_header_problem(exc)}); the file "
            "is truncated or was changed after it was written"
        ) from None
    return shape, fortran_order, dtype


# numpy's header errors (ValueError, by the start of their text), in words that name no Python type
_HEADER_PROBLEMS = (
    ("Header is not a dictionary", "it is not a dictionary"),
    ("Header does not contain the correct keys", "its keys are not exactly 'descr', 'fortran_order' and 'shape'"),
    ("shape is not valid", "its 'shape' is not a list of whole numbers in parentheses"),
    ("fortran_order is not a valid bool", "its 'fortran_order' is neither True nor False"),
    ("descr is not a valid dtype descriptor", "its 'descr' is not a numpy dtype such as '<i8'"),
)


def _header_problem(exc: Exception) -> str:
    """What is wrong with a header numpy's parser refused, in plain words (never Python's exception text)."""
    if isinstance(exc, ValueError):
        for start, words in _HEADER_PROBLEMS:
            if str(exc).startswith(start):
                return words
    return "it is cut short or garbled (not a readable dictionary)"


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


# What a numpy dtype kind that is no number holds, in words (dtype_words).
_KIND_WORDS = {"U": "text", "S": "bytes", "c": "complex numbers", "M": "dates", "m": "time spans", "V": "raw records"}


def dtype_words(dtype: np.dtype) -> str:
    """What an array of ``dtype`` holds, the dtype named once: "text (numpy dtype <U1)"."""
    if dtype.fields is not None:
        what = "structured records"
    elif dtype.subdtype is not None:
        what = "sub-arrays"
    else:
        what = _KIND_WORDS.get(dtype.kind, "values")
    return f"{what} (numpy dtype {dtype})"


def _check_dtype(dtype: np.dtype, fail: Fail) -> None:
    if dtype.hasobject:
        raise fail(PICKLED)
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in NUMBER_KINDS or dtype.itemsize < 1:
        raise fail(f"holds {dtype_words(dtype)}: token ids must be integers, scores real numbers")


def whole_npy_header(buf: bytes | bytearray, path: str | Path, field: str | None = None) -> NpyHeader:
    """The checked header of ``buf``, a whole .npy stream (a file, an archive member): refused unless
    its data fills the rest of ``buf`` exactly."""
    header = read_npy_header(io.BytesIO(buf).read, path, field)
    have, need = len(buf) - header.offset, header.data_bytes
    if have != need:
        what = "truncated" if have < need else "trailing bytes after the data"
        raise dump_fail(path, field)(
            f"{what}: the header says {shape_words(header.shape)} of {header.dtype}, which needs {need:,} data bytes;"
            f" the file has {have:,}"
        )
    return header


def array_from_buffer(buf: bytearray | bytes, header: NpyHeader) -> np.ndarray:
    """The array a header describes over ``buf``, which it fills from ``header.offset`` (whole_npy_header,
    or an archive member of the size the header needs)."""
    flat = np.frombuffer(buf, dtype=header.dtype, count=math.prod(header.shape), offset=header.offset)
    return flat.reshape(header.shape, order="F" if header.fortran_order else "C")


def read_npy(path: str | Path) -> np.ndarray:
    """The array of a .npy file, checked against the file's real size before it is made."""
    buf = read_file_bytes(path, MAX_MATRIX_FILE_BYTES)
    return array_from_buffer(buf, whole_npy_header(buf, path))


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
            raise DumpError(path, PICKLED)
    fast = _read_stored_npz(data, path, names)
    if fast is not None:
        return fast
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
    return array_from_buffer(buf, header)


# Zip records as np.savez writes them (uncompressed "stored" members, no comment, no zip64 in the
# central directory): end record, central-directory entry, local header (APPNOTE.TXT 4.3).
_EOCD = struct.Struct("<4s4H2LH")
_CDIR = struct.Struct("<4s6H3L5H2L")
_LOCAL = struct.Struct("<4s5H3L2H")
_FAST_MAX_MEMBERS = 16  # a dump file holds 1-4 arrays; more goes through zipfile
_ZIP_MAX_VERSION = 63  # zipfile refuses archives needing a later version (NotImplementedError)


def _read_stored_npz(
    data: bytearray, path: str | Path, names: Iterable[str]
) -> tuple[dict[str, np.ndarray], tuple[str, ...]] | None:
    """read_npz's answer, from the bytes directly, for an archive as np.savez writes it; else None.

    None means "not the common form" (compressed, commented, zip64, flags, bad CRC, any header
    that is not np.save's, ...): read_npz then reads it through BoundedZip and zipfile, which
    decide and word every error. So this accepts only archives that path would read, with the
    same arrays (stored_arrays, stored_member).
    """
    members = stored_arrays(data)
    if members is None:
        return None
    out: dict[str, np.ndarray] = {}
    for name in names:
        if name not in members:
            continue
        read = stored_member(data, members[name], path, name)
        if read is None:
            return None
        out[name] = array_from_buffer(*read)
    return out, tuple(members)


# A stored archive member: (data offset, size, CRC, local header offset, central entry offset).
StoredMember = tuple[int, int, int, int, int]


def stored_arrays(data: bytes | bytearray) -> dict[str, StoredMember] | None:
    """{array name: its member} of every ``NAME.npy`` member of a plain stored archive (as np.savez
    writes it: see _read_stored_npz), in the archive's order; None for any other archive."""
    members = _stored_members(data)
    if members is None:
        return None  # a name twice is among the forms refused
    return {n[: -len(".npy")]: m for n, m in members.items() if n.endswith(".npy")}


def stored_member(
    data: bytes | bytearray, member: StoredMember, path: str | Path, field: str
) -> tuple[bytes | bytearray, NpyHeader] | None:
    """(the member's bytes, its header) when its CRC matches and its .npy header passes
    read_npy_header and its data fills the member exactly; else None (zipfile's path words it)."""
    start, size, crc, _, _ = member
    block = data[start : start + size]  # a copy: the array owns aligned memory, as zipfile's read gives
    if zlib.crc32(block) != crc:
        return None
    try:
        return block, whole_npy_header(block, path, field)
    except DumpError:
        return None


def _stored_members(data: bytes | bytearray) -> dict[str, StoredMember] | None:
    """{member name: StoredMember} of a plain stored archive (see _read_stored_npz), else None."""
    end = len(data) - _EOCD.size
    if end < 0 or too_many_zip_entries(data):
        return None
    sig, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = _EOCD.unpack_from(data, end)
    if sig != b"PK\x05\x06" or comment or disk or cd_disk or n_disk != n_total or n_total > _FAST_MAX_MEMBERS:
        return None
    if cd_offset + cd_size != end or (end >= 20 and data[end - 20 : end - 16] == b"PK\x06\x07"):
        return None  # data before the archive, or a zip64 end locator: zipfile's general reading
    members: dict[str, StoredMember] = {}
    pos = cd_offset
    while pos < end:
        if pos + _CDIR.size > end:
            return None
        entry = _CDIR.unpack_from(data, pos)
        central = pos
        sig, _, need, flags, method, _, _, crc, packed, size, n_name, n_extra, n_comment, vol, _, _, local = entry
        raw = bytes(data[pos + _CDIR.size : pos + _CDIR.size + n_name])
        pos += _CDIR.size + n_name + n_extra + n_comment
        if sig != b"PK\x01\x02" or need > _ZIP_MAX_VERSION or flags or method != 0 or n_extra or n_comment:
            return None
        if vol or packed != size or pos > end or not raw.isascii() or b"\x00" in raw:
            return None
        start = _local_data_start(data, local, raw, cd_offset - size)
        if start is None or raw.decode("ascii") in members:
            return None
        members[raw.decode("ascii")] = (start, size, crc, local, central)
    return members if pos == end and len(members) == n_total else None


def _local_data_start(data: bytes | bytearray, offset: int, name: bytes, last: int) -> int | None:
    """Where the data of the member whose local header is at ``offset`` starts (at most ``last``)."""
    if offset + _LOCAL.size > last:
        return None
    sig, _, flags, method, _, _, _, _, _, n_name, n_extra = _LOCAL.unpack_from(data, offset)
    start = offset + _LOCAL.size + n_name + n_extra
    if sig != b"PK\x03\x04" or flags or method != 0 or start > last:
        return None
    return start if data[offset + _LOCAL.size : offset + _LOCAL.size + n_name] == name else None
