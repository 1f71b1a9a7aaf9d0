"""The packed run format on disk: packed.json's schema and checksums, checked reads of blocks.

Everything a reader takes from a packed run passes through here and is checked before use
(docs/packed-format.md, "Integrity"):

- ``packed.json`` carries ``meta_sha256``, a sha256 of its own canonical JSON without that field;
  it is recomputed on open, then every field is checked for type and range (a hand-edited or
  re-hashed file still cannot make a reader index out of range or allocate more than the array
  files hold: every count is tied to a file size).
- every array file's size and ``.npy`` header must agree with packed.json before its first read;
- every block of every array has a CRC-32 in packed.json, checked as the block is read (a bit flip
  costs its block's rounds, reported as skipped, never a wrong result); ``verify`` re-hashes whole
  files with sha256 as well.

Problems with packed.json or an array file's structure raise DumpError (the run cannot be
trusted); a block whose bytes do not match raises PackedBlockError, which callers turn into
skipped rounds.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .errors import DumpError
from .grouping import Key, Skipped
from .matrix_io import SCORE_AUTO, SCORE_LOGPROB, SCORE_PROB, RawSpec

PACKED_NAME = "packed.json"
PACKED_FORMAT = "specreplay-packed"
PACKED_VERSION = 2  # 2: meta_sha256 and per-block CRC-32 (version 1 had whole-file sha256 only)
META_HASH_FIELD = "meta_sha256"
BLOCK_CHECKSUM = "crc32"  # zlib.crc32 of each block's bytes: ~3.7 GB/s, sha256 ~1.3 GB/s here
COPIED_FILES = ("manifest.json", "config.json")
HASH_CHUNK = 1 << 20  # one reused buffer: hashing a file allocates 1 MB, whatever its size

# What each array file may hold: ndim with the block axis first and the round axis last.
_INT_DTYPES = frozenset({"<i4", "<i8", ">i4", ">i8"})
_FLOAT_DTYPES = frozenset({"<f4", "<f8", ">f4", ">f8"})
_ROUND_ARRAYS = {"keys": 3, "root": 2, "ordinal": 2}  # keys [blocks, 2, B], the others [blocks, B]
_MATRIX_STEM = re.compile(r"^(s(0|[1-9][0-9]*)|v)_(ids|logp|parents)$")
_GROUP_NAME = re.compile(r"^g[0-9]{3,}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MAX_DIM = 2**31 - 1  # far above any real matrix; keeps products of dimensions sane
_NPY_MAGIC_LEN = 8  # b"\x93NUMPY" + major + minor


class PackedBlockError(DumpError):
    """One block of one array file does not match packed.json: its rounds cannot be trusted.

    Readers skip that block's rounds (listed with this message) and read the rest of the run.
    """

    def __init__(self, path: str | Path, group: str, block: int, message: str):
        super().__init__(path, message, f"block {block}")
        self.group = group
        self.block = block


def looks_packed(path: str | Path) -> bool:
    """packed.json is there, or a group's arrays are: a packed run that lost packed.json must not
    read as an empty dump directory."""
    path = Path(path)
    return (path / PACKED_NAME).is_file() or (path / "g000" / "keys.npy").is_file() or (path / "g000" / "ordinal.npy").is_file()


# --------------------------------------------------------------------------------------------
# The metadata checksum


def canonical_json(obj: Any) -> bytes:
    """The bytes meta_sha256 is computed over: sorted keys, no spaces, ASCII, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def meta_digest(body: Mapping[str, Any]) -> str:
    """sha256 of packed.json's canonical JSON without its own ``meta_sha256`` field."""
    return hashlib.sha256(canonical_json({k: v for k, v in body.items() if k != META_HASH_FIELD})).hexdigest()


def seal_meta(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``meta_sha256`` last (the writer's last step)."""
    out = {k: v for k, v in body.items() if k != META_HASH_FIELD}
    out[META_HASH_FIELD] = meta_digest(out)
    return out


def block_checksum(block: np.ndarray) -> int:
    """CRC-32 of a block's bytes (C order), as stored in ``block_crc32``."""
    return zlib.crc32(memoryview(np.ascontiguousarray(block)).cast("B"))


def file_sha256(path: Path, start: int = 0, progress: Callable[[int], None] | None = None) -> str:
    """sha256 of a file's bytes from ``start`` (an array file's data after its header)."""
    sha = hashlib.sha256()
    buf = bytearray(HASH_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        while n := fh.readinto(buf):
            sha.update(view[:n])
            if progress:
                progress(n)
    return sha.hexdigest()


# --------------------------------------------------------------------------------------------
# The metadata, checked


@dataclass(frozen=True)
class ArraySpec:
    """One array file as packed.json describes it: ``[blocks, *block_shape]``."""

    stem: str
    file: str  # relative to the run: "g000/v_ids.npy"
    dtype: np.dtype
    shape: tuple[int, ...]
    bytes: int  # the whole file, header included
    sha256: str  # of the data bytes (after the header)
    block_crc32: tuple[int, ...]  # [blocks]

    @property
    def block_shape(self) -> tuple[int, ...]:
        return self.shape[1:]

    @property
    def block_bytes(self) -> int:
        return int(np.prod(self.block_shape, dtype=object)) * self.dtype.itemsize

    @property
    def data_bytes(self) -> int:
        return self.shape[0] * self.block_bytes

    @property
    def header_len(self) -> int:
        return self.bytes - self.data_bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "dtype": self.dtype.str,
            "shape": list(self.shape),
            "bytes": self.bytes,
            "sha256": self.sha256,
            "block_crc32": list(self.block_crc32),
        }


@dataclass(frozen=True)
class GroupSpec:
    name: str
    rounds: int
    block_rounds: int
    blocks: int
    steps: int
    exts: tuple[str, ...] | None  # per matrix, draft steps then validate
    path_overrides: Mapping[int, tuple[str, ...]]  # ordinal → the round's real paths
    arrays: Mapping[str, ArraySpec]  # stem → file


@dataclass(frozen=True)
class CopiedSpec:
    file: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class PackedMeta:
    """packed.json after its checksum and every field were checked."""

    source: str
    step0_offset: tuple[int, int]
    raw: RawSpec | None
    score_kind: str
    rounds: int  # rounds the source's names group into: packed + unreadable
    packed_rounds: int
    block_rounds: int
    skipped: tuple[Skipped, ...]
    unreadable: tuple[tuple[int, Key | None, Skipped], ...]  # (ordinal, key, why), by ordinal
    groups: tuple[GroupSpec, ...]
    copied: tuple[CopiedSpec, ...]
    run_checksum: str
    body: Mapping[str, Any]  # the parsed JSON, as read


class _Fields:
    """Typed access to one JSON object of packed.json; every failure names the field."""

    def __init__(self, meta_path: Path, obj: Any, where: str):
        self.meta_path, self.where = meta_path, where
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {_kind(obj)}")
        self.obj = obj

    def fail(self, name: str, message: str):
        raise DumpError(self.meta_path, message, name)

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str) -> Any:
        if key not in self.obj:
            self.fail(self.name(key), "missing")
        return self.obj[key]

    def int(self, key: str, lo: int = 0, hi: int | None = None) -> int:
        return _int(self.meta_path, self.get(key), self.name(key), lo, hi)

    def str(self, key: str, pattern: re.Pattern | None = None) -> str:
        value = self.get(key)
        if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
            want = f"a string matching {pattern.pattern}" if pattern else "a string"
            self.fail(self.name(key), f"expected {want}, got {_show(value)}")
        return value

    def list(self, key: str, length: int | None = None) -> list:
        value = self.get(key)
        if not isinstance(value, list) or (length is not None and len(value) != length):
            want = f"a list of {length}" if length is not None else "a list"
            self.fail(self.name(key), f"expected {want}, got {_show(value)}")
        return value

    def sub(self, key: str) -> "_Fields":
        return _Fields(self.meta_path, self.get(key), self.name(key))


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (int, float, str, bool, type(None))) else _kind(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(meta_path: Path, value: Any, name: str, lo: int = 0, hi: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
        rng = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        raise DumpError(meta_path, f"expected {rng}, got {_show(value)}", name)
    return value


def _str_list(meta_path: Path, value: Any, name: str, length: int | None = None) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or (length is not None and len(value) != length):
        want = "a list of strings" if length is None else f"a list of {length} strings"
        raise DumpError(meta_path, f"expected {want}, got {_show(value)}", name)
    return tuple(value)


def read_meta(root: Path) -> PackedMeta:
    """packed.json of the run at ``root``, its checksum and every field checked (DumpError if not)."""
    meta_path = root / PACKED_NAME
    try:
        text = meta_path.read_bytes().decode("utf-8")
        body = json.loads(text)
    except FileNotFoundError:
        if looks_packed(root):
            raise DumpError(meta_path, "missing: the directory holds a packed run's arrays (g000/) but not its metadata; repack the dump directory") from None
        raise DumpError(root, f"not a packed run (no {PACKED_NAME})") from None
    except OSError as exc:
        raise DumpError(meta_path, f"cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise DumpError(meta_path, f"not valid JSON at line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # bad UTF-8, integers beyond the parser's limit, nesting
        raise DumpError(meta_path, f"not valid JSON: {str(exc)[:80]}") from None
    top = _Fields(meta_path, body, "")
    if body.get("format") != PACKED_FORMAT:
        top.fail("format", f"is {_show(body.get('format'))}, expected {PACKED_FORMAT!r}")
    if body.get("version") != PACKED_VERSION:
        hint = "; it has no per-block checksums: repack the dump directory with `specreplay pack`" if body.get("version") == 1 else ""
        top.fail("version", f"{_show(body.get('version'))} is not supported (this reader: {PACKED_VERSION}){hint}")
    stored = top.str(META_HASH_FIELD, _SHA256)
    try:
        actual = meta_digest(body)
    except ValueError:  # NaN or Infinity: never written by pack
        actual = ""
    if actual != stored:
        top.fail(META_HASH_FIELD, "differs from the sha256 of packed.json's content: the file was edited or is corrupt; repack the dump directory")
    return _parse_meta(meta_path, top, body)


def _parse_meta(meta_path: Path, top: _Fields, body: dict) -> PackedMeta:
    ro = top.sub("read_options")
    step0 = ro.list("step0_offset", 2)
    offset = (_int(meta_path, step0[0], "read_options.step0_offset[0]", -(2**62)), _int(meta_path, step0[1], "read_options.step0_offset[1]", -(2**62)))
    score_kind = ro.get("score_kind")
    if score_kind not in (SCORE_AUTO, SCORE_PROB, SCORE_LOGPROB):
        ro.fail("read_options.score_kind", f"expected one of auto, prob, logprob, got {_show(score_kind)}")
    raw = _parse_raw(meta_path, ro.get("raw"))
    rounds = top.int("rounds")
    packed_rounds = top.int("packed_rounds")
    block_rounds = top.int("block_rounds", 1)
    source = top.str("source")
    skipped = tuple(_parse_skipped(meta_path, s, f"skipped[{i}]") for i, s in enumerate(top.list("skipped")))
    unreadable = tuple(_parse_unreadable(meta_path, u, f"unreadable[{i}]", rounds) for i, u in enumerate(top.list("unreadable")))
    ords = [o for o, _, _ in unreadable]
    if ords != sorted(set(ords)):
        top.fail("unreadable", "ordinals must be unique and in increasing order")
    groups = []
    for i, g in enumerate(top.list("groups")):
        groups.append(_parse_group(meta_path, _Fields(meta_path, g, f"groups[{i}]"), offset))
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        top.fail("groups", f"group names repeat: {names}")
    if sum(g.rounds for g in groups) != packed_rounds:
        top.fail("packed_rounds", f"{packed_rounds}, but the groups hold {sum(g.rounds for g in groups)} rounds")
    if packed_rounds + len(unreadable) != rounds:
        top.fail("rounds", f"{rounds}, expected packed_rounds + unreadable rounds = {packed_rounds + len(unreadable)}")
    copied = []
    for i, c in enumerate(top.list("copied")):
        f = _Fields(meta_path, c, f"copied[{i}]")
        name = f.str("file")
        if name not in COPIED_FILES:
            f.fail(f.name("file"), f"expected one of {', '.join(COPIED_FILES)}, got {_show(name)}")
        copied.append(CopiedSpec(name, f.int("bytes"), f.str("sha256", _SHA256)))
    if len({c.file for c in copied}) != len(copied):
        top.fail("copied", "a file is listed twice")
    checksum = top.sub("checksum")
    if checksum.get("algorithm") != "sha256" or checksum.get("block") != BLOCK_CHECKSUM:
        checksum.fail("checksum", f"expected algorithm 'sha256' and block {BLOCK_CHECKSUM!r}")
    return PackedMeta(
        source, offset, raw, score_kind, rounds, packed_rounds, block_rounds, skipped, unreadable,
        tuple(groups), tuple(copied), checksum.str("run", _SHA256), body,
    )


def _parse_raw(meta_path: Path, obj: Any) -> RawSpec | None:
    if obj is None:
        return None
    f = _Fields(meta_path, obj, "read_options.raw")
    dtype, score_dtype, cols, force = f.str("dtype"), f.str("score_dtype"), f.get("columns"), f.get("force")
    for name, value in (("dtype", dtype), ("score_dtype", score_dtype)):
        try:
            np.dtype(value)
        except (TypeError, ValueError):
            f.fail(f.name(name), f"not a numpy dtype: {_show(value)}")
    if not isinstance(cols, dict) or not all(k in ("draft", "validate") for k in cols):
        f.fail(f.name("columns"), f"expected {{draft: N, validate: M}}, got {_show(cols)}")
    columns = {k: _int(meta_path, v, f"read_options.raw.columns.{k}") for k, v in cols.items()}
    if not isinstance(force, bool):
        f.fail(f.name("force"), f"expected true or false, got {_show(force)}")
    return RawSpec(dtype, columns, score_dtype, force)


def _parse_skipped(meta_path: Path, obj: Any, where: str) -> Skipped:
    f = _Fields(meta_path, obj, where)
    return Skipped(f.str("what"), f.str("reason"), _str_list(meta_path, f.get("paths"), f.name("paths")))


def _parse_unreadable(meta_path: Path, obj: Any, where: str, rounds: int) -> tuple[int, Key | None, Skipped]:
    f = _Fields(meta_path, obj, where)
    ordinal = f.int("ordinal", 0, rounds - 1) if rounds else f.fail(f.name("ordinal"), "the run has no rounds")
    key = f.get("key")
    if key is not None:
        key = tuple(_int(meta_path, v, f"{f.name('key')}[{j}]", -(2**63)) for j, v in enumerate(f.list("key", 2)))
    return ordinal, key, _parse_skipped(meta_path, obj, where)


def _parse_group(meta_path: Path, f: _Fields, step0: tuple[int, int]) -> GroupSpec:
    name = f.str("name", _GROUP_NAME)
    rounds = f.int("rounds", 1)
    block = f.int("block_rounds", 1)
    blocks = f.int("blocks", 1)
    if blocks != -(-rounds // block):
        f.fail(f.name("blocks"), f"{blocks}, but {rounds} rounds in blocks of {block} make {-(-rounds // block)}")
    steps = f.int("steps", 1)
    exts = f.get("exts")
    if exts is not None:
        exts = _str_list(meta_path, exts, f.name("exts"), steps + 1)
    over = f.get("path_overrides")
    if not isinstance(over, dict):
        f.fail(f.name("path_overrides"), f"expected an object, got {_kind(over)}")
    overrides = {}
    for k, v in over.items():
        if not k.isdigit():
            f.fail(f.name("path_overrides"), f"keys are ordinals, got {_show(k)}")
        overrides[int(k)] = _str_list(meta_path, v, f"{f.name('path_overrides')}.{k}", steps + 1)
    arrays_obj = f.sub("arrays")
    arrays = {stem: _parse_array(meta_path, arrays_obj.sub(stem), stem, name, blocks, block) for stem in arrays_obj.obj}
    _check_group_arrays(meta_path, f, arrays, steps)
    return GroupSpec(name, rounds, block, blocks, steps, exts, overrides, arrays)


def _parse_array(meta_path: Path, f: _Fields, stem: str, group: str, blocks: int, block_rounds: int) -> ArraySpec:
    m = _MATRIX_STEM.match(stem)
    if stem not in _ROUND_ARRAYS and not m:
        f.fail(f.where, "unknown array (expected keys, root, ordinal, s<i>_ids/logp/parents, v_ids/logp/parents)")
    file = f.str("file")
    if file != f"{group}/{stem}.npy":  # never a path outside the run
        f.fail(f.name("file"), f"expected {group}/{stem}.npy, got {_show(file)}")
    dtype_s = f.str("dtype")
    allowed = _FLOAT_DTYPES if stem.endswith("_logp") else _INT_DTYPES
    if dtype_s not in allowed:
        f.fail(f.name("dtype"), f"expected one of {', '.join(sorted(allowed))}, got {_show(dtype_s)}")
    ndim = _ROUND_ARRAYS.get(stem) or (3 if m.group(3) == "parents" else 4)
    raw_shape = f.list("shape", ndim)
    shape = tuple(_int(meta_path, v, f"{f.name('shape')}[{j}]", 0, _MAX_DIM) for j, v in enumerate(raw_shape))
    if shape[0] != blocks or shape[-1] != block_rounds or (stem == "keys" and shape[1] != 2):
        want = "[blocks, 2, B]" if stem == "keys" else "[blocks, ..., B]"
        f.fail(f.name("shape"), f"{list(shape)} does not fit {want} with blocks={blocks}, B={block_rounds}")
    crcs = f.list("block_crc32", blocks)
    crc = tuple(_int(meta_path, v, f"{f.name('block_crc32')}[{j}]", 0, 2**32 - 1) for j, v in enumerate(crcs))
    spec = ArraySpec(stem, file, np.dtype(dtype_s), shape, f.int("bytes"), f.str("sha256", _SHA256), crc)
    if not _NPY_MAGIC_LEN < spec.header_len <= 65536:  # numpy's headers are 64-byte aligned, ~128 bytes here
        f.fail(f.name("bytes"), f"{spec.bytes} bytes cannot hold a .npy header and {spec.data_bytes} data bytes")
    return spec


def _check_group_arrays(meta_path: Path, f: _Fields, arrays: Mapping[str, ArraySpec], steps: int) -> None:
    """Every array a RoundBatch of ``steps`` draft steps needs, and no other, with matching shapes."""
    prefixes = [f"s{i}" for i in range(steps)] + ["v"]
    needed = {"keys", "root", "ordinal", *(f"{p}_ids" for p in prefixes)}
    allowed = needed | {f"{p}_{x}" for p in prefixes for x in ("logp", "parents")}
    missing, extra = sorted(needed - set(arrays)), sorted(set(arrays) - allowed)
    if missing or extra:
        f.fail(f.name("arrays"), f"missing {missing}, unexpected {extra} for {steps} draft step(s)")
    for p in prefixes:
        ids, logp, parents = arrays[f"{p}_ids"], arrays.get(f"{p}_logp"), arrays.get(f"{p}_parents")
        if logp is not None and logp.shape != ids.shape:
            f.fail(f.name(f"arrays.{p}_logp.shape"), f"{list(logp.shape)} differs from {p}_ids {list(ids.shape)}")
        if parents is not None and parents.shape[1] < ids.shape[1]:
            f.fail(f.name(f"arrays.{p}_parents.shape"), f"{parents.shape[1]} entries per round for {ids.shape[1]} rows")


# --------------------------------------------------------------------------------------------
# Array files


def check_array_file(root: Path, spec: ArraySpec) -> None:
    """The file exists, has packed.json's size, and its .npy header says packed.json's dtype/shape."""
    path = root / spec.file
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            header = fh.read(min(size, spec.header_len))
    except FileNotFoundError:
        raise DumpError(path, "missing (listed in packed.json)") from None
    except OSError as exc:
        raise DumpError(path, f"cannot read: {exc.strerror or exc}") from None
    if size != spec.bytes:
        raise DumpError(path, f"{size} bytes, packed.json says {spec.bytes} (truncated or replaced)", "size")
    try:
        shape, fortran, dtype, end = _parse_npy_header(header)
    except Exception as exc:  # numpy's header parser raises many types on damaged bytes
        raise DumpError(path, f"damaged .npy header ({_first_line(exc)})", "header") from None
    if tuple(shape) != spec.shape or dtype != spec.dtype or fortran or end != spec.header_len:
        raise DumpError(
            path,
            f"header says {dtype.str} {list(shape)}{' fortran' if fortran else ''} with {end} header bytes, "
            f"packed.json {spec.dtype.str} {list(spec.shape)} with {spec.header_len}",
            "header",
        )


def _first_line(exc: Exception) -> str:
    """numpy's message, without object addresses (messages must not change from run to run)."""
    text = (str(exc).splitlines() or [type(exc).__name__])[0]
    return re.sub(r" (object )?at 0x[0-9a-fA-F]+", "", text)[:100]


def _parse_npy_header(header: bytes) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, header length) of a .npy file's first bytes."""
    fh = io.BytesIO(header)
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f".npy version {version} (packed runs write 1.0)")
    return shape, fortran, dtype, fh.tell()


def read_block(root: Path, group: str, spec: ArraySpec, k: int, check: bool = True) -> np.ndarray:
    """Block ``k`` of an array file, read into memory: ``spec.block_shape``; CRC-32 checked.

    Read with pread, not a memory map: a file cut short after it was opened gives an error here,
    not a SIGBUS later.
    """
    path = root / spec.file
    out = np.empty(spec.block_shape, dtype=spec.dtype)
    buf = memoryview(out).cast("B") if out.nbytes else memoryview(b"")
    start = spec.header_len + k * spec.block_bytes
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            done = 0
            while done < len(buf):
                n = os.preadv(fd, [buf[done:]], start + done)
                if n <= 0:
                    raise PackedBlockError(path, group, k, f"file ends at byte {start + done}, inside the block (bytes {start}-{start + len(buf) - 1})")
                done += n
        finally:
            os.close(fd)
    except PackedBlockError:
        raise
    except OSError as exc:
        raise PackedBlockError(path, group, k, f"cannot read: {exc.strerror or exc}") from None
    if check and zlib.crc32(buf) != spec.block_crc32[k]:
        raise PackedBlockError(
            path, group, k,
            f"bytes {start}-{start + len(buf) - 1} do not match the block's CRC-32 in packed.json: corrupt or modified",
        )
    return out


def verify_array(root: Path, group: str, spec: ArraySpec, progress: Callable[[int], None] | None = None) -> list[str]:
    """Every problem of one array file: structure, each block's CRC-32, the whole file's sha256."""
    try:
        check_array_file(root, spec)
    except DumpError as exc:
        return [str(exc)]
    problems = []
    for k in range(spec.shape[0]):
        try:
            read_block(root, group, spec, k)
        except PackedBlockError as exc:
            problems.append(str(exc))
        if progress:
            progress(spec.block_bytes)
    if not problems and file_sha256(root / spec.file, spec.header_len) != spec.sha256:
        problems.append(f"{root / spec.file}: sha256 of the data differs from packed.json (corrupt or modified)")
    return problems
