"""packed.json read and checked: its own sha256 first, then every field for type and range.

A hand-edited or re-hashed packed.json still cannot make a reader index out of range or allocate
more than the array files hold: every count is tied to a file size (docs/packed-format.md,
"Integrity"). Every failure is a DumpError naming the field. The records it returns and the
checksum rules are replay.io.packed.format.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from replay.io.dumpnames import Key
from replay.io.formats.matrix_io import MAX_NODE_LOGPROB_COLUMNS, SCORE_AUTO, SCORE_LOGPROB, SCORE_PROB, RawSpec
from replay.io.skipped import Skipped
from replay.io.step0 import Step0Check
from replay.util.errors import DumpError

from .format import (
    BLOCK_CHECKSUM,
    COPIED_FILES,
    META_HASH_FIELD,
    PACKED_FORMAT,
    PACKED_NAME,
    PACKED_VERSION,
    SIZE_STEMS,
    ArraySpec,
    CopiedSpec,
    GroupSpec,
    PackedMeta,
    looks_packed,
    meta_digest,
)

# What each array file may hold: ndim with the block axis first and the round axis last.
_INT_DTYPES = frozenset({"<i4", "<i8", ">i4", ">i8"})
_FLOAT_DTYPES = frozenset({"<f4", "<f8", ">f4", ">f8"})
_ROUND_ARRAYS = {"keys": 3, "root": 2, "ordinal": 2}  # keys [blocks, 2, B], the others [blocks, B]
_MATRIX_STEM = re.compile(r"^(s(0|[1-9][0-9]*)|v)_(ids|logp|parents|node_logp|rows|cols|prows)$")
_MATRIX_NDIM = {
    "ids": 4,
    "logp": 4,
    "parents": 3,
    "node_logp": 4,
    **{size: 2 for size in SIZE_STEMS},
}  # [blocks, ..., B]
_GROUP_NAME = re.compile(r"^g[0-9]{3,}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MAX_DIM = 2**31 - 1  # far above any real matrix; keeps products of dimensions sane
_NPY_MAGIC_LEN = 8  # b"\x93NUMPY" + major + minor


class _Fields:
    """Typed access to one JSON object of packed.json; every failure names the field."""

    def __init__(self, meta_path: Path, obj: Any, where: str):
        self.meta_path, self.where = meta_path, where
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {_kind(obj)}")
        self.obj = obj

    def fail(self, name: str, message: str) -> NoReturn:
        raise DumpError(self.meta_path, message, name)

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str) -> Any:
        if key not in self.obj:
            self.fail(self.name(key), "missing")
        return self.obj[key]

    def int(self, key: str, lo: int = 0, hi: int | None = None) -> int:
        return _int(self.meta_path, self.get(key), self.name(key), lo, hi)

    # The methods int, str and list shadow the builtins in this class's annotations, hence builtins.*.
    def str(self, key: builtins.str, pattern: re.Pattern[builtins.str] | None = None) -> builtins.str:
        value = self.get(key)
        if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
            want = f"a string matching {pattern.pattern}" if pattern else "a string"
            self.fail(self.name(key), f"expected {want}, got {_show(value)}")
        return value

    def list(self, key: builtins.str, length: builtins.int | None = None) -> builtins.list[Any]:
        value = self.get(key)
        if not isinstance(value, list) or (length is not None and len(value) != length):
            want = f"a list of {length}" if length is not None else "a list"
            self.fail(self.name(key), f"expected {want}, got {_show(value)}")
        return value

    def sub(self, key: builtins.str) -> _Fields:
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
    if (
        not isinstance(value, list)
        or not all(isinstance(v, str) for v in value)
        or (length is not None and len(value) != length)
    ):
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
            raise DumpError(
                meta_path,
                "missing: the directory holds a packed run's arrays (g000/) but not its metadata; repack the dump directory",
            ) from None
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
        hint = (
            "; it has no per-block checksums: repack the dump directory with `specreplay pack`"
            if body.get("version") == 1
            else ""
        )
        top.fail("version", f"{_show(body.get('version'))} is not supported (this reader: {PACKED_VERSION}){hint}")
    stored = top.str(META_HASH_FIELD, _SHA256)
    try:
        actual = meta_digest(body)
    except ValueError:  # NaN or Infinity: never written by pack
        actual = ""
    if actual != stored:
        top.fail(
            META_HASH_FIELD,
            "differs from the sha256 of packed.json's content: the file was edited or is corrupt; repack the dump directory",
        )
    return _parse_meta(meta_path, top, body)


def _parse_meta(meta_path: Path, top: _Fields, body: dict[str, Any]) -> PackedMeta:
    ro = top.sub("read_options")
    step0 = ro.list("step0_offset", 2)
    offset = (
        _int(meta_path, step0[0], "read_options.step0_offset[0]", -(2**62)),
        _int(meta_path, step0[1], "read_options.step0_offset[1]", -(2**62)),
    )
    score_kind = ro.get("score_kind")
    if score_kind not in (SCORE_AUTO, SCORE_PROB, SCORE_LOGPROB):
        ro.fail("read_options.score_kind", f"expected one of auto, prob, logprob, got {_show(score_kind)}")
    raw = _parse_raw(meta_path, ro.get("raw"))
    step0_check = _parse_step0_check(meta_path, ro.obj.get("step0_check"), offset)
    rounds = top.int("rounds")
    packed_rounds = top.int("packed_rounds")
    block_rounds = top.int("block_rounds", 1)
    source = top.str("source")
    skipped = tuple(_parse_skipped(meta_path, s, f"skipped[{i}]") for i, s in enumerate(top.list("skipped")))
    unreadable = tuple(
        _parse_unreadable(meta_path, u, f"unreadable[{i}]", rounds) for i, u in enumerate(top.list("unreadable"))
    )
    ords = [o for o, _, _ in unreadable]
    if ords != sorted(set(ords)):
        top.fail("unreadable", "ordinals must be unique and in increasing order")
    groups = []
    for i, g in enumerate(top.list("groups")):
        groups.append(_parse_group(meta_path, _Fields(meta_path, g, f"groups[{i}]")))
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
        source,
        offset,
        raw,
        score_kind,
        rounds,
        packed_rounds,
        block_rounds,
        skipped,
        unreadable,
        tuple(groups),
        tuple(copied),
        checksum.str("run", _SHA256),
        body,
        step0_check,
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


_MAX_SOURCE = 100  # characters of read_options.step0_check.source (it is quoted in messages)


def _parse_step0_check(meta_path: Path, obj: Any, offset: tuple[int, int]) -> Step0Check:
    """read_options.step0_check: what pack's grouping said about the step-0 offset (optional)."""
    if obj is None:
        return Step0Check(offset, "packed run")  # older runs: nothing known, nothing to say
    f = _Fields(meta_path, obj, "read_options.step0_check")

    def pair(key: str) -> tuple[int, int] | None:
        if f.get(key) is None:
            return None
        a, b = (_int(meta_path, x, f"{f.name(key)}[{j}]", -(2**62)) for j, x in enumerate(f.list(key, 2)))
        return (a, b)

    if pair("offset") != offset:
        f.fail(f.name("offset"), f"differs from read_options.step0_offset {list(offset)}")
    source = f.str("source")
    if len(source) > _MAX_SOURCE or not source.isprintable():
        f.fail(f.name("source"), f"expected a short printable string, got {_show(source)}")
    counts = [f.int(k) for k in ("rounds", "step0_files", "grouped", "other_grouped")]
    cited = f.int("cited", 0, counts[1]) if "cited" in obj else 0  # absent: packed before it was recorded
    return Step0Check(
        offset,
        source,
        counts[0],
        counts[1],
        counts[2],
        pair("other"),
        counts[3],
        pair("example"),
        packed=True,
        cited=cited,
    )


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


def _parse_group(meta_path: Path, f: _Fields) -> GroupSpec:
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
    _check_group_arrays(f, arrays, steps)
    return GroupSpec(name, rounds, block, blocks, steps, exts, overrides, arrays)


def _parse_array(meta_path: Path, f: _Fields, stem: str, group: str, blocks: int, block_rounds: int) -> ArraySpec:
    m = _MATRIX_STEM.match(stem)
    if stem in _ROUND_ARRAYS:
        ndim = _ROUND_ARRAYS[stem]
    elif m:
        ndim = _MATRIX_NDIM[m.group(3)]
    else:
        f.fail(
            f.where,
            "unknown array (expected keys, root, ordinal, s<i>_ids/logp/parents/rows/cols/prows, "
            "v_ids/logp/parents/node_logp/rows/cols/prows)",
        )
    file = f.str("file")
    if file != f"{group}/{stem}.npy":  # never a path outside the run
        f.fail(f.name("file"), f"expected {group}/{stem}.npy, got {_show(file)}")
    dtype_s = f.str("dtype")
    allowed = _FLOAT_DTYPES if stem.endswith("_logp") else _INT_DTYPES
    if dtype_s not in allowed:
        f.fail(f.name("dtype"), f"expected one of {', '.join(sorted(allowed))}, got {_show(dtype_s)}")
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


def _check_group_arrays(f: _Fields, arrays: Mapping[str, ArraySpec], steps: int) -> None:
    """Every array a RoundBatch of ``steps`` draft steps needs, and no other, with matching shapes."""
    prefixes = [f"s{i}" for i in range(steps)] + ["v"]
    needed = {"keys", "root", "ordinal", *(f"{p}_ids" for p in prefixes)}
    allowed = needed | {f"{p}_{x}" for p in prefixes for x in ("logp", "parents", *SIZE_STEMS)} | {"v_node_logp"}
    missing, extra = sorted(needed - set(arrays)), sorted(set(arrays) - allowed)
    if missing or extra:
        f.fail(f.name("arrays"), f"missing {missing}, unexpected {extra} for {steps} draft step(s)")
    for p in prefixes:
        ids, logp, parents = arrays[f"{p}_ids"], arrays.get(f"{p}_logp"), arrays.get(f"{p}_parents")
        if logp is not None and logp.shape != ids.shape:
            f.fail(f.name(f"arrays.{p}_logp.shape"), f"{list(logp.shape)} differs from {p}_ids {list(ids.shape)}")
        if parents is not None and parents.shape[1] < ids.shape[1]:
            f.fail(f.name(f"arrays.{p}_parents.shape"), f"{parents.shape[1]} entries per round for {ids.shape[1]} rows")
        if parents is None and f"{p}_prows" in arrays:
            f.fail(f.name(f"arrays.{p}_prows"), f"own parents entries without {p}_parents")
    own = arrays.get("v_node_logp")  # [blocks, rows, T, B]: one row per validate row, 1..16 temperatures
    if own is not None and (
        own.shape[1] != arrays["v_ids"].shape[1] or not 1 <= own.shape[2] <= MAX_NODE_LOGPROB_COLUMNS
    ):
        f.fail(
            f.name("arrays.v_node_logp.shape"),
            f"{list(own.shape)}: expected [blocks, {arrays['v_ids'].shape[1]} rows (as v_ids), "
            f"1..{MAX_NODE_LOGPROB_COLUMNS} temperatures, B]",
        )
