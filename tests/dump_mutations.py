"""Small dump directories in every encoding, and the ways an attacker (or a disk) damages them.

Shared by tests/test_read_boundary.py and tests/test_fuzz_readers.py. The corpora are subsets of
the bundled samples (sample_dumps/article_round, sample_dumps/synthetic_article) converted with the
project's own writers where it has them (dumpwrite: .npz, text) and numpy / hand-built pickles
otherwise (.npy, .pt, raw), so a reader is never tested only on files it wrote itself.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.testing.synth import write_text_matrix

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
SYNTH = ROOT / "sample_dumps" / "synthetic_article"
MB = 1 << 20
RAW_COLUMNS = {"draft": 8, "validate": 4}  # synthetic_article: drafts keep 8 ids, validate rows 4
SYNTH_ROUNDS = ((100, 116), (108, 124), (116, 132))  # the first three rounds of synthetic_article


# --- byte-level builders ----------------------------------------------------------------------------


def npy_header(shape, descr: str = "<i8", fortran: bool = False) -> bytes:
    """A version 1.0 .npy header for any shape (also negative or absurd ones), 64-byte aligned."""
    text = "{'descr': %r, 'fortran_order': %s, 'shape': %r, }" % (descr, fortran, tuple(shape))
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()


def zip_bytes(entries) -> bytes:
    """A zip archive written byte by byte, so sizes, methods and flags can lie.

    entries: (name bytes, method, stored bytes, crc, declared uncompressed size, flags).
    """
    out, central = bytearray(), bytearray()
    for name, method, data, crc, size, flags in entries:
        offset = len(out)
        out += (
            struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, method, 0, 0, crc, len(data), size, len(name), 0)
            + name
            + data
        )
        central += (
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                flags,
                method,
                0,
                0,
                crc,
                len(data),
                size,
                len(name),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + name
        )
    start = len(out)
    out += central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), start, 0)
    return bytes(out)


def deflate_bomb_npz(declared_mb: int, shape=None) -> bytes:
    """An .npz whose ids.npy deflates from ~declared_mb KB to declared_mb MB of zeros (honest sizes)."""
    cells = declared_mb * MB // 8
    body = npy_header(shape or (cells // 1024, 1024))
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    crc = zlib.crc32(body)
    parts = [comp.compress(body)]
    block = bytes(MB)
    for _ in range(declared_mb):
        parts.append(comp.compress(block))
        crc = zlib.crc32(block, crc)
    return zip_bytes([(b"ids.npy", 8, b"".join(parts) + comp.flush(), crc, len(body) + declared_mb * MB, 0)])


def _u(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _pint(v: int) -> bytes:
    if -(2**31) <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw  # LONG1


def _ptuple(values) -> bytes:
    return b"(" + b"".join(_pint(v) for v in values) + b"t"


_STORAGE = {np.dtype(np.int64): "LongStorage", np.dtype(np.float32): "FloatStorage", np.dtype(np.int32): "IntStorage"}


def tensor_pickle(key: str, offset: int, size, stride, storage: str = "LongStorage", numel: int = 0) -> bytes:
    """The pickle opcodes torch.save writes for one tensor (a _rebuild_tensor_v2 call), any values."""
    pid = b"(" + _u("storage") + b"ctorch\n" + storage.encode() + b"\n" + _u(key) + _u("cpu") + _pint(numel) + b"tQ"
    args = b"(" + pid + _pint(offset) + _ptuple(size) + _ptuple(stride) + b"\x89}t"
    return b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"


def pt_dict_bytes(arrays: dict[str, np.ndarray], views: dict[str, tuple] | None = None) -> bytes:
    """What torch.save({name: tensor}) writes, without torch: one storage per array.

    views: name -> (offset, size, stride) to describe instead of the array's own contiguous view.
    """
    pkl = b"\x80\x02}("
    storages = {}
    for k, (name, arr) in enumerate(arrays.items()):
        arr = np.ascontiguousarray(arr)
        view = (views or {}).get(name) or (0, arr.shape, tuple(s // arr.itemsize for s in arr.strides))
        pkl += _u(name) + tensor_pickle(str(k), view[0], view[1], view[2], _STORAGE[arr.dtype], arr.size)
        storages[str(k)] = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    pkl += b"u."
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", b"little")
        for key, raw in storages.items():
            z.writestr(f"archive/data/{key}", raw)
    return buf.getvalue()


# --- corpora ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    name: str
    path: Path
    argv: tuple[str, ...] = ()  # extra CLI arguments it needs (--raw)


def _synth_round_files(key) -> list[Path]:
    a, b = key
    later = sorted(SYNTH.glob(f"draft_step_*_{a}_{b}.npz"))  # early-stopped rounds have fewer steps
    return [SYNTH / f"draft_step_0_{a - 1}_{b - 1}.npz", *later, SYNTH / f"validate_{a}_{b}.npz"]


def _synth_manifest(out: Path, extra: dict | None = None) -> None:
    body = json.loads((SYNTH / "manifest.json").read_text())
    body["rounds"] = [r for r in body["rounds"] if tuple(r["key"]) in SYNTH_ROUNDS]
    body.pop("hit_probs", None)
    body.update(extra or {})
    (out / "manifest.json").write_text(json.dumps(body, indent=1))


def build_corpora(base: Path) -> list[Corpus]:
    """The article's round (text, without and with parents) and three synthetic rounds as .npz,
    .npy, .pt, raw and text (scores in companion files where the encoding holds one array)."""
    base.mkdir(parents=True, exist_ok=True)
    corpora = [Corpus("article", base / "article"), Corpus("article_parents", base / "article_parents")]
    shutil.copytree(ARTICLE, corpora[0].path)
    shutil.copytree(ARTICLE, corpora[1].path)
    # The article's parents (docs/dump-format.md): step 1 expands nodes 1, 2; step 2 nodes 7, 9.
    for name, parents in (
        ("draft_step_0_123_139", "0"),
        ("draft_step_1_124_140", "1\n2"),
        ("draft_step_2_124_140", "7\n9"),
    ):
        (corpora[1].path / f"{name}.parents").write_text(parents + "\n")
    for kind in ("npz", "npy", "pt", "raw", "text"):
        out = base / kind
        out.mkdir()
        for key in SYNTH_ROUNDS:
            for src in _synth_round_files(key):
                stem = src.name[: -len(".npz")]
                with np.load(src) as z:
                    ids, scores = z["ids"], z["scores"]
                if kind == "npz":
                    shutil.copy(src, out / src.name)
                elif kind == "npy":
                    np.save(out / f"{stem}.npy", ids)
                    np.save(out / f"{stem}.scores.npy", scores)
                elif kind == "pt":
                    (out / f"{stem}.pt").write_bytes(pt_dict_bytes({"ids": ids, "scores": scores}))
                elif kind == "raw":
                    (out / f"{stem}.bin").write_bytes(ids.astype("<i4").tobytes())
                    (out / f"{stem}.scores.bin").write_bytes(scores.astype("<f4").tobytes())
                else:
                    write_text_matrix(out / stem, ids)
                    (out / f"{stem}.scores.txt").write_text(
                        "\n".join(" ".join(repr(float(v)) for v in row) for row in scores) + "\n"
                    )
        enc = {"encoding": {"format": "raw", "dtype": "int32", "columns": RAW_COLUMNS}} if kind == "raw" else None
        _synth_manifest(out, enc)
        corpora.append(Corpus(kind, out))
    return corpora


def data_files(d: Path) -> list[str]:
    """Names of the dump files (matrices and companions) in d, sorted."""
    return sorted(p.name for p in d.iterdir() if p.name.startswith(("draft_step_", "validate_")))


# --- damage --------------------------------------------------------------------------------------


def replace_entry(path: Path, kind: str) -> None:
    """Turn the dump file ``path`` into something that is not a regular file."""
    path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink to a directory":
        path.symlink_to(path.parent)
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "character device":
        path.symlink_to("/dev/zero")
    elif kind == "broken symlink":
        path.symlink_to(path.parent / "no such file")
    elif kind == "symlink loop":
        path.symlink_to(path)
    else:
        raise ValueError(kind)


ENTRY_KINDS = ("directory", "symlink to a directory", "FIFO", "character device", "broken symlink", "symlink loop")


def deep_json(depth: int) -> bytes:
    return b'{"rounds": ' + b"[" * depth + b"]" * depth + b"}"


def zip_headers(data: bytes) -> list[tuple[str, int]]:
    """(kind, offset) of every local ('local') and central ('central') header signature."""
    out = []
    for sig, kind in ((b"PK\x03\x04", "local"), (b"PK\x01\x02", "central")):
        start = data.find(sig)
        while start >= 0:
            out.append((kind, start))
            start = data.find(sig, start + 1)
    return sorted(out, key=lambda t: t[1])


# field name -> (offset in a local header, offset in a central header, struct format)
ZIP_FIELDS = {
    "flags": (6, 8, "<H"),
    "method": (8, 10, "<H"),
    "crc": (14, 16, "<I"),
    "compressed size": (18, 20, "<I"),
    "size": (22, 24, "<I"),
    "name length": (26, 28, "<H"),
    "extra length": (28, 30, "<H"),
}


def set_zip_field(data: bytes, header_offset: int, kind: str, field: str, value: int) -> bytes:
    local, central, fmt = ZIP_FIELDS[field]
    at = header_offset + (local if kind == "local" else central)
    value &= (1 << (8 * struct.calcsize(fmt))) - 1
    return data[:at] + struct.pack(fmt, value) + data[at + struct.calcsize(fmt) :]
