"""Packed runs: a whole dump directory as a few column-major arrays per matrix signature.

A day of traffic is millions of rounds in millions of small files; a packed run holds the same
content (every matrix, score and parent index the readers return, losslessly) in one directory of
``.npy`` files that load at disk speed and stream block by block. Layout (docs/packed-format.md):

    RUN/packed.json             format, version, read options, groups, skipped files, checksums
    RUN/manifest.json           verbatim copy of the dump's manifest (config, layout, ...), if any
    RUN/config.json             verbatim copy, if any
    RUN/g000/keys.npy           [blocks, 2, B] int64     (a, b) of each round's validate file
    RUN/g000/root.npy           [blocks, B] int64        root token (PAD_TOKEN when unknown)
    RUN/g000/ordinal.npy        [blocks, B] int64        position of the round in key order
    RUN/g000/s0_ids.npy         [blocks, rows, cols, B]  int32 (int64 when an id needs it)
    RUN/g000/s0_logp.npy        [blocks, rows, cols, B]  float32 (float64 when float32 would round)
    RUN/g000/s0_parents.npy     [blocks, prows, B]
    RUN/g000/s1_... v_ids.npy v_logp.npy v_parents.npy

A group holds the rounds of one signature (matrix shapes, dtypes, optional arrays, file
extensions); B rounds per block (the last block of a group is padded). Files grow block by block
while packing, so packing streams too. This module writes runs and reads them; what is on disk and
how every read is checked (packed.json's own sha256, each block's CRC-32, each file's sha256) is
replay.packed_format.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .atomic import write_json_atomic
from .roundbatch import MatrixStack, RoundBatch, SourceNames
from .errors import DumpError
from .grouping import Key, Skipped
from .matrix_io import SCORE_AUTO, RawSpec
from .packed_format import (  # noqa: F401  (re-exported: the format's names were this module's)
    BLOCK_CHECKSUM,
    COPIED_FILES,
    PACKED_FORMAT,
    PACKED_NAME,
    PACKED_VERSION,
    ArraySpec,
    GroupSpec,
    PackedBlockError,
    PackedMeta,
    check_array_file,
    file_sha256,
    looks_packed,
    read_block,
    read_meta,
    seal_meta,
    verify_array,
)
from .rounds import Round

DEFAULT_BLOCK_ROUNDS = 16384  # = the batch kernel's chunk: one block is replayed in one go


def is_packed_run(path: str | Path) -> bool:
    """A directory holding packed.json, or a packed run's arrays without it (reading that fails loudly)."""
    return looks_packed(path)


# --------------------------------------------------------------------------------------------
# Writing


class _Appender:
    """A ``.npy`` file whose first axis grows one block at a time; sha256 of its data, CRC-32 per block.

    numpy pads every header so that the first axis can grow (``GROWTH_AXIS_MAX_DIGITS``); the
    header is rewritten in place with the final count when the file is closed.
    """

    def __init__(self, root: Path, rel: str, dtype: np.dtype, block_shape: tuple[int, ...]):
        self.rel, self.dtype, self.block_shape = rel, np.dtype(dtype), tuple(block_shape)
        self.fh = open(root / rel, "wb")
        self.count = 0
        self.sha = hashlib.sha256()
        self.crcs: list[int] = []
        self.header_len = self._write_header()

    def _write_header(self) -> int:
        self.fh.seek(0)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (self.count, *self.block_shape)}
        np.lib.format.write_array_header_1_0(self.fh, header)
        return self.fh.tell()

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape != self.block_shape:
            raise ValueError(f"{self.rel}: block of shape {block.shape}, expected {self.block_shape}")
        data = memoryview(block).cast("B")
        self.fh.write(data)
        self.sha.update(data)
        self.crcs.append(zlib.crc32(data))
        self.count += 1

    def close(self) -> dict[str, Any]:
        end = self.fh.tell()
        if self._write_header() != self.header_len:
            raise RuntimeError(f"{self.rel}: .npy header changed size on rewrite")
        self.fh.close()
        return {
            "file": self.rel,
            "dtype": self.dtype.str,
            "shape": [self.count, *self.block_shape],
            "bytes": end,
            "sha256": self.sha.hexdigest(),
            "block_crc32": self.crcs,
        }


def _pad(arr: np.ndarray, n: int) -> np.ndarray:
    """Pad the round axis (last) to ``n`` with zeros: the last block of a group."""
    if arr.shape[-1] == n:
        return arr
    out = np.zeros(arr.shape[:-1] + (n,), dtype=arr.dtype)
    out[..., : arr.shape[-1]] = arr
    return out


def _block_arrays(batch: RoundBatch) -> dict[str, np.ndarray]:
    """Every array of a RoundBatch under its file stem (round axis last)."""
    out = {"keys": batch.keys, "root": batch.root_tokens, "ordinal": batch.ordinals}
    for prefix, st in [(f"s{i}", s) for i, s in enumerate(batch.steps)] + [("v", batch.validate)]:
        out[f"{prefix}_ids"] = st.ids
        if st.logp is not None:
            out[f"{prefix}_logp"] = st.logp
        if st.parents is not None:
            out[f"{prefix}_parents"] = st.parents
    return out


class _GroupWriter:
    """Buffers one signature's rounds and writes them a block at a time."""

    def __init__(self, root: Path, name: str, block_rounds: int):
        self.root, self.name, self.block_rounds = root, name, block_rounds
        self.pending: list[RoundBatch] = []
        self.pending_n = 0
        self.rounds = 0
        self.block: int | None = None  # rounds per block, fixed by the first block written
        self.appenders: dict[str, _Appender] = {}
        self.sample: RoundBatch | None = None
        self.overrides: dict[int, tuple[str, ...]] = {}

    def add(self, batch: RoundBatch) -> None:
        if batch.ordinals is None:
            raise ValueError("packing needs each round's ordinal (its position in key order)")
        self.sample = self.sample or batch
        if batch.names is not None:
            self.overrides.update(batch.names.overrides)
        self.pending.append(batch)
        self.pending_n += len(batch)
        while self.pending_n >= self.block_rounds:
            self._flush(self.block_rounds)

    def _flush(self, n: int) -> None:
        from .fastread import concat_batches

        merged = concat_batches(self.pending)
        head, rest = merged.take(slice(0, n)), merged.take(slice(n, None))
        if self.block is None:
            self.block = n
            (self.root / self.name).mkdir()
        for stem, arr in _block_arrays(head).items():
            arr = _pad(np.asarray(arr), self.block)
            if stem not in self.appenders:
                self.appenders[stem] = _Appender(self.root, f"{self.name}/{stem}.npy", arr.dtype, arr.shape)
            self.appenders[stem].append(arr)
        self.rounds += n
        self.pending = [rest] if len(rest) else []
        self.pending_n = len(rest)

    def close(self) -> dict[str, Any]:
        if self.pending_n:
            self._flush(self.pending_n)
        s = self.sample
        names = s.names
        return {
            "name": self.name,
            "rounds": self.rounds,
            "block_rounds": self.block,
            "blocks": -(-self.rounds // self.block),
            "steps": s.num_steps,
            "exts": list(names.exts) if names else None,
            "path_overrides": {str(k): list(v) for k, v in sorted(self.overrides.items())},
            "arrays": {stem: a.close() for stem, a in self.appenders.items()},
        }


def _raw_json(raw: RawSpec | None) -> dict | None:
    if raw is None:
        return None
    return {"dtype": raw.dtype, "columns": dict(raw.columns), "score_dtype": raw.score_dtype, "force": raw.force}


def _skipped_json(s: Skipped) -> dict:
    return {"what": s.what, "reason": s.reason, "paths": list(s.paths)}


def run_checksum(files: Sequence[dict]) -> str:
    """One digest for the run: sha256 over "file dtype shape sha256" lines, sorted by file."""
    lines = sorted(f"{f['file']} {f.get('dtype', '')} {f.get('shape', '')} {f['sha256']}" for f in files)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@dataclass(frozen=True)
class PackSummary:
    path: str
    rounds: int  # rounds the dump's names group into (readable or not)
    packed_rounds: int
    groups: int
    bytes: int
    checksum: str
    skipped: int  # name-level skips plus unreadable rounds


class PackWriter:
    """Streams RoundBatches into a packed run; nothing appears at ``out`` until ``finish``."""

    def __init__(self, out: str | Path, source: str, step0_offset: tuple[int, int], raw: RawSpec | None, score_kind: str, block_rounds: int = DEFAULT_BLOCK_ROUNDS, force: bool = False):
        self.out = Path(out)
        if self.out.exists() and not (force and is_packed_run(self.out)):
            why = "a packed run: pass --force to replace it" if is_packed_run(self.out) else "and is not a packed run; choose another path"
            raise DumpError(self.out, f"already exists {why}")
        if block_rounds < 1:
            raise ValueError(f"block_rounds must be positive, got {block_rounds}")
        self.tmp = self.out.parent / f".{self.out.name}.packing-{os.getpid()}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        self.source, self.step0_offset, self.raw, self.score_kind = source, step0_offset, raw, score_kind
        self.block_rounds = block_rounds
        self.groups: dict[tuple, _GroupWriter] = {}
        self.unreadable: list[tuple[int, Skipped]] = []

    def add(self, batch: RoundBatch, signature: tuple | None = None) -> None:
        from .fastread import batch_signature

        sig = batch_signature(batch) if signature is None else signature
        if sig not in self.groups:
            self.groups[sig] = _GroupWriter(self.tmp, f"g{len(self.groups):03d}", self.block_rounds)
        self.groups[sig].add(batch)

    def add_unreadable(self, items: Sequence[tuple[int, Skipped]]) -> None:
        self.unreadable.extend(items)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def finish(
        self,
        rounds: int,
        skipped: Sequence[Skipped],
        copy_from: str | Path | None = None,
        keys_of_unreadable: dict[int, Key] | None = None,
        manifest: dict | None = None,
    ) -> PackSummary:
        """Close every file, write packed.json, then move the run into place in one rename.

        copy_from: the dump directory whose manifest.json/config.json are copied verbatim;
        manifest: a manifest body to write instead (in-memory runs).
        """
        groups = [g.close() for g in self.groups.values()]
        files = [a for g in groups for a in g["arrays"].values()]
        if manifest is not None:
            from .dumpwrite import write_manifest

            write_manifest(self.tmp, manifest)
        elif copy_from is not None:
            for name in COPIED_FILES:
                if (Path(copy_from) / name).is_file():
                    shutil.copyfile(Path(copy_from) / name, self.tmp / name)
        copied = [
            {"file": name, "sha256": file_sha256(self.tmp / name), "bytes": (self.tmp / name).stat().st_size}
            for name in COPIED_FILES
            if (self.tmp / name).is_file()
        ]
        keys = keys_of_unreadable or {}
        body = {
            "format": PACKED_FORMAT,
            "version": PACKED_VERSION,
            "source": self.source,
            "read_options": {"step0_offset": list(self.step0_offset), "raw": _raw_json(self.raw), "score_kind": self.score_kind},
            "rounds": rounds,
            "packed_rounds": sum(g["rounds"] for g in groups),
            "block_rounds": self.block_rounds,
            "skipped": [_skipped_json(s) for s in skipped],
            "unreadable": [
                {"ordinal": o, "key": list(keys[o]) if o in keys else None, **_skipped_json(s)} for o, s in sorted(self.unreadable, key=lambda t: t[0])
            ],
            "groups": groups,
            "copied": copied,
            "checksum": {
                "algorithm": "sha256",
                "covers": "each array file's data bytes after its .npy header; copied files whole",
                "block": BLOCK_CHECKSUM,
                "block_covers": "each block's bytes in each array file (block_crc32[k] = block k)",
                "run": run_checksum(files + copied),
                "meta": "meta_sha256 = sha256 of this object without meta_sha256 as JSON with sorted keys, separators (',', ':'), ASCII",
            },
        }
        write_json_atomic(self.tmp / PACKED_NAME, seal_meta(body))
        os.chmod(self.tmp / PACKED_NAME, 0o644)  # mkstemp made it private; the run is plain data
        old = None
        if self.out.exists():  # --force on a previous packed run: swap, then delete the old one
            old = self.out.parent / f".{self.out.name}.old-{os.getpid()}"
            os.replace(self.out, old)
        os.replace(self.tmp, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        total = sum(f["bytes"] for f in files + copied) + (self.out / PACKED_NAME).stat().st_size
        return PackSummary(str(self.out), rounds, body["packed_rounds"], len(groups), total, body["checksum"]["run"], len(skipped) + len(self.unreadable))


# --------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True, eq=False)
class PackedGroup:
    name: str
    rounds: int
    block_rounds: int
    blocks: int
    steps: int
    names: SourceNames | None
    arrays: dict[str, ArraySpec]  # stem → file, dtype, shape, bytes, sha256, block_crc32

    def block_size(self, k: int) -> int:
        """Rounds in block ``k`` (the last block of a group is padded to ``block_rounds``)."""
        return min(self.block_rounds, self.rounds - k * self.block_rounds)

    def block_sizes(self) -> list[int]:
        return [self.block_size(k) for k in range(self.blocks)]


def _group(spec: GroupSpec, meta: PackedMeta) -> PackedGroup:
    names = None
    if spec.exts is not None:
        names = SourceNames(meta.source, spec.exts, meta.step0_offset, dict(spec.path_overrides))
    return PackedGroup(spec.name, spec.rounds, spec.block_rounds, spec.blocks, spec.steps, names, dict(spec.arrays))


@dataclass(frozen=True, eq=False)
class BadBlock:
    """A block whose rounds are skipped: which, how many, where it sits in key order, and why."""

    group: str
    block: int
    rounds: int
    position: int  # where it is listed among skipped rounds: its first ordinal, or the run's
    # round count (last) when its own ordinals are unreadable
    keys: np.ndarray | None  # [2, rounds] int64 when the keys are readable
    skipped: Skipped


@dataclass(frozen=True, eq=False)
class PackedRun:
    """An opened packed run: packed.json checked on open, every block checked as it is read.

    ``check_blocks=False`` skips the per-block CRC-32 (benchmarks measure its cost); the structure
    (sizes, headers, ordinal ranges) is checked either way.
    """

    path: Path
    meta: dict[str, Any]  # packed.json as read (its checksum verified)
    groups: tuple[PackedGroup, ...]
    spec: PackedMeta = field(repr=False)
    check_blocks: bool = True

    @classmethod
    def open(cls, path: str | Path, check_blocks: bool = True) -> "PackedRun":
        """Read and check packed.json, the copied files and every array file's size and header."""
        path = Path(path)
        spec = read_meta(path)
        for g in spec.groups:
            for a in g.arrays.values():
                check_array_file(path, a)
        _check_copied(path, spec)
        return cls(path, dict(spec.body), tuple(_group(g, spec) for g in spec.groups), spec, check_blocks)

    @property
    def num_rounds(self) -> int:
        """Rounds the source's names grouped into, readable or not (replay_directory's total)."""
        return self.spec.rounds

    @property
    def step0_offset(self) -> tuple[int, int]:
        return self.spec.step0_offset

    @property
    def raw(self) -> RawSpec | None:
        return self.spec.raw

    @property
    def score_kind(self) -> str:
        return self.spec.score_kind

    @property
    def skipped(self) -> list[Skipped]:
        """Files the source's names could not place in a round (grouping), in order."""
        return list(self.spec.skipped)

    @property
    def unreadable(self) -> list[tuple[int, Key | None, Skipped]]:
        """(ordinal, key, why) of rounds whose files could not be read when packing."""
        return list(self.spec.unreadable)

    @property
    def nbytes(self) -> int:
        return sum(a.bytes for g in self.groups for a in g.arrays.values())

    def read(self, group: PackedGroup, stem: str, k: int) -> np.ndarray:
        """Block ``k`` of one array, ``[..., B]``, checked (PackedBlockError when it does not match)."""
        arr = read_block(self.path, group.name, group.arrays[stem], k, self.check_blocks)
        if stem == "ordinal":
            self._check_ordinals(group, k, arr[: group.block_size(k)])
        return arr

    def _check_ordinals(self, group: PackedGroup, k: int, ords: np.ndarray) -> None:
        # [n] int: the CRC says the bytes are the writer's; this keeps a re-hashed edit from indexing out of range
        if ords.shape[0] and (int(ords.min()) < 0 or int(ords.max()) >= self.num_rounds):
            raise PackedBlockError(
                self.path / group.arrays["ordinal"].file, group.name, k,
                f"ordinals in [{int(ords.min())}, {int(ords.max())}], the run has {self.num_rounds} rounds",
            )

    def block(self, group: PackedGroup, k: int, layout: str | None = None, load: bool = True) -> RoundBatch:
        """Block ``k`` of ``group`` as a RoundBatch, read into memory and checked.

        Raises PackedBlockError when any of its arrays does not match packed.json (``load`` is
        kept for callers of the memory-mapped reader: blocks are always read, to check them).
        """
        n = group.block_size(k)

        def get(stem: str) -> np.ndarray | None:
            if stem not in group.arrays:
                return None
            return self.read(group, stem, k)[..., :n]

        def stack(prefix: str) -> MatrixStack:
            return MatrixStack(get(f"{prefix}_ids"), get(f"{prefix}_logp"), get(f"{prefix}_parents"))

        return RoundBatch(
            get("keys"),
            get("root"),
            tuple(stack(f"s{i}") for i in range(group.steps)),
            stack("v"),
            layout,
            group.names,
            get("ordinal"),
        )

    def bad_block(self, group: PackedGroup, k: int, exc: PackedBlockError) -> BadBlock:
        """What to report for a block that failed its check: every damaged array, readable keys/ordinals."""
        n = group.block_size(k)
        found: dict[str, np.ndarray | PackedBlockError] = {}
        for stem in group.arrays:  # all of them, in packed.json's order: the same report whoever read first
            try:
                found[stem] = self.read(group, stem, k)[..., :n]
            except PackedBlockError as e:
                found[stem] = e
        errors = [e for e in found.values() if isinstance(e, PackedBlockError)] or [exc]
        ords, keys = (None if isinstance(found[s], PackedBlockError) else found[s].astype(np.int64) for s in ("ordinal", "keys"))
        what = f"block {k} of group {group.name} ({n} round{'s' if n != 1 else ''})"
        why = "; ".join(str(e) for e in errors) + f"; the rest of the run is read (check it: specreplay verify-pack {self.path})"
        position = self.num_rounds if ords is None else int(ords.min())
        return BadBlock(group.name, k, n, position, keys, Skipped(what, why, tuple(e.path for e in errors)))

    def iter_blocks(self, layout: str | None = None) -> Iterator[RoundBatch | BadBlock]:
        """Every block of every group, a RoundBatch or, when it fails its check, a BadBlock."""
        for g in self.groups:
            for k in range(g.blocks):
                try:
                    yield self.block(g, k, layout)
                except PackedBlockError as exc:
                    yield self.bad_block(g, k, exc)

    def iter_batches(self, layout: str | None = None, load: bool = True) -> Iterator[RoundBatch]:
        """Every block of every group; memory stays one block whatever the run's size.

        Raises PackedBlockError at the first block that fails its check (iter_blocks reports
        bad blocks and goes on).
        """
        for g in self.groups:
            for k in range(g.blocks):
                yield self.block(g, k, layout)

    def locate(self, key: Key) -> tuple[list[tuple[PackedGroup, int]], list[BadBlock]]:
        """Blocks whose keys hold round ``key``, and bad blocks whose keys cannot be read (may hold it)."""
        found, unknown = [], []
        for g in self.groups:
            for k, n in enumerate(g.block_sizes()):
                try:
                    keys = self.read(g, "keys", k)[..., :n]
                except PackedBlockError as exc:
                    unknown.append(self.bad_block(g, k, exc))
                    continue
                if ((keys[0] == key[0]) & (keys[1] == key[1])).any():
                    found.append((g, k))
        return found, unknown

    def all_keys(self) -> np.ndarray:
        """[2, N] int64 keys of every packed round (any order); PackedBlockError on a bad block."""
        parts = [self.read(g, "keys", k)[..., :n] for g in self.groups for k, n in enumerate(g.block_sizes())]
        return np.concatenate(parts, axis=-1).astype(np.int64) if parts else np.zeros((2, 0), dtype=np.int64)

    def iter_rounds(self, layout: str | None = None, only: Key | None = None) -> Iterator[tuple[int, Round | Skipped]]:
        """(ordinal, Round, or why it is skipped) in key order, one block per group cached.

        A bad block is one Skipped, at its first round's place (at the end when its ordinals are
        unreadable). ``only``: just the rounds with that key (and bad blocks that may hold it).
        """
        if only is not None:
            yield from self._iter_only(layout, only)
            return
        n = self.num_rounds
        gid = np.full(n, -1, dtype=np.int32)  # n <= the keys files' size: checked on open
        pos = np.full(n, -1, dtype=np.int64)
        unreadable = {o: s for o, _, s in self.unreadable}
        for o in unreadable:
            gid[o] = -2
        lost: list[BadBlock] = []
        for gi, g in enumerate(self.groups):
            for k, size in enumerate(g.block_sizes()):
                try:
                    ords = self.read(g, "ordinal", k)[:size]
                except PackedBlockError as exc:
                    lost.append(self.bad_block(g, k, exc))
                    continue
                if (gid[ords] != -1).any() or np.unique(ords).shape[0] != size:
                    raise DumpError(self.path / g.arrays["ordinal"].file, f"block {k} repeats an ordinal of another round", "ordinal")
                gid[ords] = gi
                pos[ords] = k * g.block_rounds + np.arange(size)
        cache: dict[int, tuple[int, RoundBatch | BadBlock]] = {}
        for o in range(n):
            gi = int(gid[o])
            if gi < 0:
                if o in unreadable:
                    yield o, unreadable[o]
                continue
            g = self.groups[gi]
            k, i = divmod(int(pos[o]), g.block_rounds)
            if gi not in cache or cache[gi][0] != k:
                try:
                    cache[gi] = (k, self.block(g, k, layout))
                except PackedBlockError as exc:
                    cache[gi] = (k, self.bad_block(g, k, exc))
                    yield o, cache[gi][1].skipped
            item = cache[gi][1]
            if isinstance(item, RoundBatch):
                yield o, item.round_at(i)
        for bad in lost:
            yield bad.position, bad.skipped

    def _iter_only(self, layout: str | None, key: Key) -> Iterator[tuple[int, Round | Skipped]]:
        found, unknown = self.locate(key)
        out: list[tuple[int, Round | Skipped]] = [(o, s) for o, k, s in self.unreadable if k == key]
        for g, k in found:
            try:
                b = self.block(g, k, layout)
            except PackedBlockError as exc:
                bad = self.bad_block(g, k, exc)
                out.append((bad.position, bad.skipped))
                continue
            for i in np.flatnonzero((b.keys[0] == key[0]) & (b.keys[1] == key[1])):
                out.append((int(b.ordinals[i]), b.round_at(int(i))))
        out += [(bad.position, bad.skipped) for bad in unknown]
        yield from sorted(out, key=lambda t: t[0])

    def verify(self, progress: Callable[[int], None] | None = None) -> list[str]:
        """Problems found (empty when intact): each file's structure, every block's CRC-32, sha256."""
        problems = []
        files = []
        for g in self.groups:
            for a in g.arrays.values():
                files.append(a.to_json())
                problems += verify_array(self.path, g.name, a, progress)
        for c in self.spec.copied:
            files.append({"file": c.file, "sha256": c.sha256})
            p = self.path / c.file
            if not p.is_file() or file_sha256(p) != c.sha256:
                problems.append(f"{p}: missing or sha256 differs from packed.json")
        if run_checksum(files) != self.spec.run_checksum:
            problems.append(f"{self.path / PACKED_NAME}: run checksum differs (files added, removed or renamed)")
        return problems


def _check_copied(root: Path, spec: PackedMeta) -> None:
    """manifest.json/config.json as packed (they decide the config and layout), none added since."""
    listed = {c.file: c for c in spec.copied}
    for name in COPIED_FILES:
        p = root / name
        if name not in listed:
            if p.exists():
                raise DumpError(p, "was added after packing (not in packed.json); pass --config to replay with another config, or repack")
            continue
        c = listed[name]
        try:
            size = p.stat().st_size
            ok = size == c.bytes and file_sha256(p) == c.sha256
        except OSError:
            raise DumpError(p, "missing (listed in packed.json)") from None
        if not ok:
            raise DumpError(p, "differs from the copy packed.json records (edited or corrupt); pass --config to replay with another config, or repack")


# --------------------------------------------------------------------------------------------
# Packing a directory


def pack_directory(
    directory: str | Path,
    out: str | Path,
    step0_offset: tuple[int, int] | None = None,
    raw: RawSpec | None = None,
    score_kind: str | None = None,
    workers: int | None = None,
    block_rounds: int = DEFAULT_BLOCK_ROUNDS,
    progress: bool = False,
    force: bool = False,
) -> PackSummary:
    """Read ``directory`` (in parallel, each file once) and write it as a packed run at ``out``.

    Reading options default to the directory's manifest, as for ``replay``; the tree config is not
    needed (it is applied when the run is replayed, from the copied manifest/config or --config).
    """
    from .fastread import ReadOptions, iter_read_chunks, plan_items
    from .grouping import group_directory
    from .manifest import check_manifest_rounds, read_manifest

    directory = Path(directory)
    if not directory.is_dir():
        raise DumpError(directory, "not a directory")
    if is_packed_run(directory):
        raise DumpError(directory, "is already a packed run")
    manifest = read_manifest(directory)
    offset = step0_offset or manifest.step0_offset or (1, 1)
    raw = raw or manifest.raw
    kind = score_kind or manifest.score_kind or SCORE_AUTO
    grouping = check_manifest_rounds(group_directory(directory, offset), manifest)
    items = plan_items(grouping, manifest.root_tokens)
    keys = {o: rf.key for o, rf, _ in items}
    writer = PackWriter(out, str(directory), offset, raw, kind, block_rounds, force)
    try:
        for chunk in iter_read_chunks(directory, items, ReadOptions(offset, raw, kind, None), workers, progress=progress):
            for b in chunk.batches:
                writer.add(b)
            writer.add_unreadable(chunk.unreadable)
        return writer.finish(len(grouping.rounds), grouping.skipped, directory, keys)
    except BaseException:
        writer.abort()
        raise


def pack_batches(
    batches: Sequence[RoundBatch] | Iterator[RoundBatch],
    out: str | Path,
    block_rounds: int = DEFAULT_BLOCK_ROUNDS,
    force: bool = False,
    manifest: dict | None = None,
) -> PackSummary:
    """Pack in-memory RoundBatches (synthetic runs, benchmarks); ``manifest`` becomes manifest.json.

    Batches without ordinals are numbered in the order given.
    """
    writer = PackWriter(out, "<memory>", (1, 1), None, SCORE_AUTO, block_rounds, force)
    rounds = 0
    try:
        for b in batches:
            if b.ordinals is None:
                b = RoundBatch(b.keys, b.root_tokens, b.steps, b.validate, b.layout, b.names, np.arange(rounds, rounds + len(b)))
            writer.add(b)
            rounds += len(b)
        return writer.finish(rounds, (), manifest=manifest)
    except BaseException:
        writer.abort()
        raise
