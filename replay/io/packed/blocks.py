"""Checked reads of a packed run's array files: structure on open, CRC-32 per block, sha256 on verify.

Each array file's size and ``.npy`` header must agree with packed.json before its first read
(DumpError otherwise); each block's bytes must match its CRC-32 as it is read (PackedBlockError
otherwise). docs/packed-format.md, "Integrity".
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from replay.io.formats.npyfile import read_npy_header
from replay.util.errors import DumpError
from replay.util.hashing import file_sha256

from .format import ArraySpec, PackedBlockError, block_checksum


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
    head = read_npy_header(io.BytesIO(header).read, path, "header", max_cells=None)  # packed.json bounds the size
    if head.version not in ((1, 0), (2, 0)):
        raise DumpError(path, f"damaged .npy header (.npy version {head.version} (packed runs write 1.0))", "header")
    shape, fortran, dtype, end = head.shape, head.fortran_order, head.dtype, head.offset
    if shape != spec.shape or dtype != spec.dtype or fortran or end != spec.header_len:
        raise DumpError(
            path,
            f"header says {dtype.str} {list(shape)}{' fortran' if fortran else ''} with {end} header bytes, "
            f"packed.json {spec.dtype.str} {list(spec.shape)} with {spec.header_len}",
            "header",
        )


def read_block(root: Path, group: str, spec: ArraySpec, k: int, check: bool = True) -> np.ndarray:
    """Block ``k`` of an array file, read into memory: ``spec.block_shape``; CRC-32 checked.

    Read with pread, not a memory map: a file cut short after it was opened gives an error here,
    not a SIGBUS later.
    """
    path = root / spec.file
    out = np.empty(spec.block_shape, dtype=spec.dtype)
    buf = out.data.cast("B") if out.nbytes else memoryview(b"")
    start = spec.header_len + k * spec.block_bytes
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            done = 0
            while done < len(buf):
                n = os.preadv(fd, [buf[done:]], start + done)
                if n <= 0:
                    raise PackedBlockError(
                        path,
                        group,
                        k,
                        f"file ends at byte {start + done}, inside the block (bytes {start}-{start + len(buf) - 1})",
                    )
                done += n
        finally:
            os.close(fd)
    except PackedBlockError:
        raise
    except OSError as exc:
        raise PackedBlockError(path, group, k, f"cannot read: {exc.strerror or exc}") from None
    if check and block_checksum(out) != spec.block_crc32[k]:
        raise PackedBlockError(
            path,
            group,
            k,
            f"bytes {start}-{start + len(buf) - 1} do not match the block's CRC-32 in packed.json: corrupt or modified",
        )
    return out


def verify_array(root: Path, group: str, spec: ArraySpec) -> list[str]:
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
    if not problems and file_sha256(root / spec.file, spec.header_len) != spec.sha256:
        problems.append(f"{root / spec.file}: sha256 of the data differs from packed.json (corrupt or modified)")
    return problems
