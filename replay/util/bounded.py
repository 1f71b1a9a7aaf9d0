"""Read untrusted files within fixed limits: regular files only, sizes checked before allocating.

Every dump reader (text, raw, .npy, .npz, .pt, manifest and config JSON) takes its bytes from here,
so a directory, FIFO or device named like a dump file is refused without being read (a FIFO would
block), no file larger than its limit is read, and a zip member is inflated only up to the size it
declares, after that size has been checked. Failures are SpecReplayErrors naming the file; the
limits are documented in docs/dump-format.md ("Limits").
"""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn

import numpy as np

from .errors import DumpError, SpecReplayError, printable

MiB = 1 << 20
MAX_MATRIX_FILE_BYTES = 1024 * MiB  # a .npy/.npz/.pt/raw file; also one .npz member or .pt storage, inflated
MAX_TEXT_FILE_BYTES = 16 * MiB  # text matrices: the line-by-line parser holds ~60 bytes per value
MAX_MATRIX_CELLS = 1 << 27  # values in one matrix: 1 GiB once widened to int64/float64
MAX_JSON_BYTES = 512 * MiB  # manifest.json / config JSON (a harness manifest holds ~450 bytes per round)
MAX_JSON_DEPTH = 64  # nesting of JSON arrays/objects; ours are 5 deep
MAX_ZIP_MEMBERS = 4096  # entries in an .npz/.pt archive (a dump file's holds 1-4 arrays)
# Smaller files cannot hold more central-entry signatures than MAX_ZIP_MEMBERS (too_many_zip_entries).
MANY_ZIP_ENTRIES_BYTES = 4 * (MAX_ZIP_MEMBERS + 1)
MAX_INFLATE_RATIO = 100  # a compressed member may declare at most this many bytes per stored byte...
INFLATE_FREE_BYTES = 16 * MiB  # ...once it declares more than this (small padding blocks compress ~1000x)
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}  # what numpy and torch write

# open(2) flags for the bulk readers' dump files: no fd leak to children, no controlling tty, and no
# blocking when a FIFO is swapped in after the directory was listed.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0)
Fail = Callable[[str], SpecReplayError]  # message -> the error to raise (it names the file)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def expansion_allowance(stored_bytes: int) -> int:
    """Bytes a file of ``stored_bytes`` may expand to (inflated members, broadcast tensor views)."""
    return min(MAX_MATRIX_FILE_BYTES, max(INFLATE_FREE_BYTES, MAX_INFLATE_RATIO * stored_bytes))


def check_cells(cells: int, what: Callable[[], str], fail: Fail, limit: int | None = MAX_MATRIX_CELLS) -> None:
    """The cell limit of one matrix, checked before it is made (None: no limit): ``what()`` words what
    claimed more values, with their count, for every reader alike."""
    if limit is not None and cells > limit:
        raise fail(f"{what()}; matrices are read up to {limit:,} values")


def too_many_zip_entries(data: bytes | bytearray) -> bool:
    """Whether an archive may hold more than MAX_ZIP_MEMBERS entries. Each central-directory entry
    starts with a signature, counted before zipfile builds one object per entry: an upper bound (an
    array's values may hold the signature too), so the answer depends on every byte of a large file."""
    return len(data) >= MANY_ZIP_ENTRIES_BYTES and data.count(b"PK\x01\x02") > MAX_ZIP_MEMBERS


def dump_fail(path: str | Path, field: str | None = None) -> Fail:
    return lambda message: DumpError(path, message, field)


def _raise(fail: Fail, message: str) -> NoReturn:
    raise fail(message)


def file_kind(mode: int) -> str:
    """'a directory', 'a FIFO (named pipe)', ... for a stat mode that is not a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def not_regular_reason(path: str | Path) -> str | None:
    """None when ``path`` is (a symlink to) a regular file, else why it cannot be read as one.

    Only stats the path: never opens it (opening a FIFO blocks, opening a device may act).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"is a broken symbolic link{_link_words(path)}" if os.path.islink(path) else "does not exist"
    except OSError as exc:
        return f"cannot be examined: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if os.path.islink(path):  # the link is what the user sees in the directory: name it and its target
        return f"is a symbolic link{_link_words(path)}, {file_kind(mode)}, not a regular file"
    return f"is {file_kind(mode)}, not a regular file"


def _link_words(path: str | Path) -> str:
    """ " to /dev/zero": the target symlink ``path`` names, and where the chain ends when that is another
    path (a relative target, a link to a link); "" when it cannot be read. Reads links only, opens nothing."""
    try:
        target = os.readlink(path)
    except OSError:
        return ""
    end = os.path.realpath(path)
    ends = "" if end == target else f" (which is {printable(end)})"
    return f" to {printable(target)}{ends}"


def read_file_bytes(path: str | Path, limit: int, fail: Fail | None = None, allow_stream: bool = False) -> bytearray:
    """The whole content of the regular file ``path``, refused when larger than ``limit`` bytes.

    allow_stream: also read a pipe or character device (``--config <(...)``, ``/dev/stdin``), at
    most ``limit`` bytes; dump files never are.
    """
    fail = fail or dump_fail(path)
    reason = not_regular_reason(path)
    streaming = False
    if reason is not None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = 0
        if not (allow_stream and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))):
            _raise(fail, reason)
        streaming = True
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not streaming:
        flags |= getattr(os, "O_NONBLOCK", 0)  # if a FIFO is swapped in after the stat, open must not block
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        _raise(fail, f"cannot open: {exc.strerror or exc}")
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if streaming:
            return _read_stream(fh, limit, fail)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _raise(fail, f"is {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            _raise(fail, f"is {st.st_size:,} bytes; files of this kind are read up to {limit:,} bytes")
        buf = bytearray(st.st_size)
        view, got = memoryview(buf), 0
        try:
            while got < st.st_size:
                n = fh.readinto(view[got:])
                if not n:
                    break
                got += n
        except OSError as exc:
            _raise(fail, f"cannot read: {exc.strerror or exc}")
        if got != st.st_size:
            _raise(fail, f"shrank from {st.st_size:,} to {got:,} bytes while being read")
        return buf


def read_regular_or_none(path: str, limit: int) -> bytes | None:
    """The content of regular file ``path`` when read_file_bytes would return it unchanged, else None.

    For bulk readers (replay.io.formats.textbatch, arraybatch) that read thousands of small files,
    so four system calls and no stat: open (non-blocking, so a FIFO never blocks), lseek to the end
    for the size (a FIFO, socket or tty cannot seek: refused), one read of a byte more than that
    size from the start, close. Taken only when the size is 1 to ``limit`` bytes and the read
    returns exactly that many (a file that grew, or a device that seeks to a size it does not
    read, is not taken); on None the caller asks read_file_bytes, which names the problem. An
    empty file is left to it too: /dev/null seeks to 0 and reads nothing, as an empty file does.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        if not 0 < size <= limit:
            return None
        data = os.pread(fd, size + 1, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None


def _read_stream(fh: io.RawIOBase, limit: int, fail: Fail) -> bytearray:
    out = bytearray()
    try:
        while len(out) <= limit:
            chunk = fh.read(min(MiB, limit + 1 - len(out)))
            if not chunk:
                return out
            out += chunk
    except OSError as exc:
        _raise(fail, f"cannot read: {exc.strerror or exc}")
    _raise(fail, f"holds more than {limit:,} bytes; read up to {limit:,} bytes")


# --- JSON ----------------------------------------------------------------------------------------

_DEPTH_CHUNK = 16 * MiB
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


def json_depth(data: bytes | bytearray) -> int | None:
    """Deepest nesting of arrays/objects outside strings; None when a string is unterminated.

    Linear time and no recursion, so a 100,000-deep file is measured, not parsed. Dropping
    backslash pairs left to right is exactly JSON's escaping, so every quote left delimits a
    string, and a bracket lies inside a string when an odd number of quotes precede it.
    """
    skeleton = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    if skeleton.count(b'"') % 2:
        return None
    chars = np.frombuffer(bytes(skeleton), dtype=np.uint8)
    depth = deepest = quotes = 0
    for start in range(0, chars.size, _DEPTH_CHUNK):  # chunks keep the int32 work arrays small
        part = chars[start : start + _DEPTH_CHUNK]
        is_quote = part == ord('"')
        in_string = (quotes + np.cumsum(is_quote, dtype=np.int32)) % 2 == 1
        quotes += int(is_quote.sum())
        opens = ((part == ord("[")) | (part == ord("{"))) & ~in_string
        closes = ((part == ord("]")) | (part == ord("}"))) & ~in_string
        levels = depth + np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int32)
        if levels.size:
            deepest, depth = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def parse_json_bytes(data: bytes | bytearray, fail: Fail) -> Any:
    """A JSON document (UTF-8, a BOM allowed) no deeper than MAX_JSON_DEPTH."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        _raise(fail, f"not UTF-8 text (byte {exc.start}): JSON must be UTF-8")
    depth = json_depth(data)
    if depth is None:
        _raise(fail, "not valid JSON: a string is not terminated")
    if depth > MAX_JSON_DEPTH:
        _raise(fail, f"JSON nested {depth} levels deep; at most {MAX_JSON_DEPTH} are accepted")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _raise(fail, f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        _raise(fail, f"not valid JSON: {exc}")


def read_json_file(path: str | Path, fail: Fail | None = None) -> Any:
    """Read and parse a JSON file within MAX_JSON_BYTES and MAX_JSON_DEPTH."""
    fail = fail or dump_fail(path)
    return parse_json_bytes(read_file_bytes(path, MAX_JSON_BYTES, fail), fail)


# --- zip archives (.npz, .pt) ---------------------------------------------------------------------


class BoundedZip:
    """A zip archive over bytes already read, whose members are inflated within one budget.

    Each member's declared size is checked (method, encryption, MAX_MATRIX_FILE_BYTES, the inflate
    ratio) before it is opened, and all members read from one archive together inflate to at most
    max(INFLATE_FREE_BYTES, MAX_INFLATE_RATIO x the archive's size), capped at MAX_MATRIX_FILE_BYTES.
    zipfile itself never yields more than a member declares, and checks its CRC at the end.
    """

    def __init__(self, data: bytes | bytearray, path: str | Path, what: str):
        """what: how to name the file in errors ("numpy file (.npz)", ".pt file")."""
        self.path, self.what = path, what
        if too_many_zip_entries(data):
            raise DumpError(path, f"{what} archive with more than {MAX_ZIP_MEMBERS} entries; a dump holds a few arrays")
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
        # zipfile reports a corrupt archive with a dozen unrelated types (BadZipFile, struct.error,
        # UnicodeDecodeError, NotImplementedError, OverflowError, ...): all mean the same to us.
        except Exception as exc:  # noqa: BLE001 - the boundary of an untrusted-input parser
            raise DumpError(path, f"corrupt or truncated {what}: {_describe(exc)}") from None
        # Opening a member reads its local header (no data) and checks it against the central
        # directory: a damaged name there would otherwise just hide an array ("scores").
        for info in self._zip.infolist():
            self._check_method(info)
            self.open(info.filename).close()
        self._budget = expansion_allowance(len(data))

    def __enter__(self) -> BoundedZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self._zip.close()

    def names(self) -> list[str]:
        return self._zip.namelist()

    def has(self, name: str) -> bool:
        return name in self._zip.NameToInfo

    def size(self, name: str, limit: int = MAX_MATRIX_FILE_BYTES) -> int:
        """The declared uncompressed size of ``name`` once checked, charged to the archive's budget."""
        info = self._zip.getinfo(name)
        fail = dump_fail(self.path, name)
        size, packed = info.file_size, info.compress_size
        if size > limit:
            _raise(fail, f"declares {size:,} bytes uncompressed; members are read up to {limit:,} bytes")
        if info.compress_type == zipfile.ZIP_STORED and size != packed:
            _raise(fail, f"stored member declares {size:,} bytes but occupies {packed:,}")
        if size > max(INFLATE_FREE_BYTES, MAX_INFLATE_RATIO * packed):
            _raise(
                fail,
                f"declares {size:,} bytes from {packed:,} compressed (more than {MAX_INFLATE_RATIO}:1): "
                "refusing a likely decompression bomb; save uncompressed (np.savez, torch.save)",
            )
        if size > self._budget:
            _raise(fail, "the archive's members inflate to more than its size allows (a likely decompression bomb)")
        self._budget -= size
        return size

    def _check_method(self, info: zipfile.ZipInfo) -> None:
        fail = dump_fail(self.path, info.filename)
        if info.compress_type not in ZIP_METHODS:
            _raise(
                fail,
                f"compression method {info.compress_type} is not read (only stored or deflated, as numpy and torch write)",
            )
        if info.flag_bits & 0x1:
            _raise(fail, "encrypted archive member")

    def open(self, name: str) -> IO[bytes]:
        """A stream over member ``name`` (check ``size(name)`` first)."""
        try:
            return self._zip.open(name)
        except Exception as exc:  # noqa: BLE001 - see __init__
            raise DumpError(self.path, f"corrupt or truncated {self.what}: {_describe(exc)}", name) from None

    def read(self, name: str, limit: int = MAX_MATRIX_FILE_BYTES) -> bytes:
        """The whole member ``name``, its declared size checked first."""
        size = self.size(name, limit)
        with self.open(name) as stream:
            return self.read_exact(stream, size, name)

    def read_exact(self, stream: IO[bytes], count: int, name: str) -> bytes:
        """Exactly ``count`` bytes of member ``name`` from ``stream``, in bounded chunks; fewer is an error."""
        parts: list[bytes] = []
        got = 0
        try:
            while got < count:
                chunk = stream.read(min(count - got, 4 * MiB))
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
        except Exception as exc:  # noqa: BLE001 - see __init__ (bad CRC, zlib.error, EOFError, ...)
            raise DumpError(self.path, f"corrupt or truncated {self.what}: {_describe(exc)}", name) from None
        if got < count:
            raise DumpError(
                self.path, f"corrupt or truncated {self.what}: member ends after {got:,} of {count:,} bytes", name
            )
        return b"".join(parts)


def _describe(exc: BaseException) -> str:
    """The parser's own words, without its exception's class name (which says nothing to a user)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:200] if text else f"the archive parser gave up ({type(exc).__name__})"
