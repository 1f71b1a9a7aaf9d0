"""The packed run format on disk: layout constants, checksums and the records packed.json describes.

What is checked, and when: docs/packed-format.md, "Integrity". The rules live here, the checks in
replay.io.packed.meta (packed.json) and replay.io.packed.blocks (array files). Problems with
packed.json or an array file's structure raise DumpError (the run cannot be trusted); a block whose
bytes do not match raises PackedBlockError.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.io.dumpnames import Key
from replay.io.formats.matrix_io import RawSpec
from replay.io.skipped import Skipped
from replay.io.step0 import Step0Check
from replay.util.errors import DumpError

PACKED_NAME = "packed.json"
PACKED_FORMAT = "specreplay-packed"
PACKED_VERSION = 2  # 2: meta_sha256 and per-block CRC-32 (version 1 had whole-file sha256 only)
META_HASH_FIELD = "meta_sha256"
BLOCK_CHECKSUM = "crc32"  # zlib.crc32 of each block's bytes: cheaper than sha256 (docs/benchmarks.md)
COPIED_FILES = ("manifest.json", "config.json")
# A group's rounds may be smaller than its stored matrices (padded, replay.io.roundbatch): then
# <matrix>_rows, _cols, _prows [blocks, B] hold each round's own rows, columns, parents entries.
SIZE_STEMS = ("rows", "cols", "prows")


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
    return (
        (path / PACKED_NAME).is_file()
        or (path / "g000" / "keys.npy").is_file()
        or (path / "g000" / "ordinal.npy").is_file()
    )


# --------------------------------------------------------------------------------------------
# Checksums


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
    data = np.ascontiguousarray(block)
    return zlib.crc32(data.data.cast("B")) if data.nbytes else 0  # a view with a 0 in its shape cannot be cast


def run_checksum(files: Sequence[Mapping[str, Any]]) -> str:
    """One digest for the run: sha256 over "file dtype shape sha256" lines, sorted by file."""
    lines = sorted(f"{f['file']} {f.get('dtype', '')} {f.get('shape', '')} {f['sha256']}" for f in files)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# What packed.json describes (replay.io.packed.meta reads and checks it)


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
    step0: Step0Check = Step0Check()  # how pack chose step0_offset (read_options.step0_check; absent in older runs)
