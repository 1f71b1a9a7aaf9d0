"""Writing packed runs: RoundBatches streamed into growing ``.npy`` files, a few groups per kind.

Files grow block by block while packing, so packing streams; nothing appears at the output path
until ``PackWriter.finish`` moves the finished run into place in one rename. The layout and the
checksums written are replay.io.packed.format; docs/packed-format.md describes both.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.core.vocab import CHUNK_ROUNDS
from replay.io.dumpnames import Key
from replay.io.formats.matrix_io import RawSpec
from replay.io.roundbatch import MatrixStack, RoundBatch, SourceNames
from replay.io.skipped import Skipped
from replay.io.step0 import Step0Check
from replay.util.atomic import commit_staged, write_json_atomic
from replay.util.errors import DumpError
from replay.util.hashing import file_sha256

from .format import (
    BLOCK_CHECKSUM,
    COPIED_FILES,
    PACKED_FORMAT,
    PACKED_NAME,
    PACKED_VERSION,
    SIZE_STEMS,
    ArraySpec,
    block_checksum,
    looks_packed,
    run_checksum,
    seal_meta,
)

DEFAULT_BLOCK_ROUNDS = CHUNK_ROUNDS  # the batch kernel's chunk: one block is replayed in one go


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
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (self.count, *self.block_shape),
        }
        np.lib.format.write_array_header_1_0(self.fh, header)
        return self.fh.tell()

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape != self.block_shape:
            raise ValueError(f"{self.rel}: block of shape {block.shape}, expected {self.block_shape}")
        data = block.data.cast("B")
        self.fh.write(data)
        self.sha.update(data)
        self.crcs.append(block_checksum(block))
        self.count += 1

    def close(self) -> dict[str, Any]:
        end = self.fh.tell()
        if self._write_header() != self.header_len:
            raise RuntimeError(f"{self.rel}: .npy header changed size on rewrite")
        self.fh.close()
        return ArraySpec(
            Path(self.rel).stem,
            self.rel,
            self.dtype,
            (self.count, *self.block_shape),
            end,
            self.sha.hexdigest(),
            tuple(self.crcs),
        ).to_json()


def _pad(arr: np.ndarray, n: int) -> np.ndarray:
    """Pad the round axis (last) to ``n`` with zeros: the last block of a group."""
    if arr.shape[-1] == n:
        return arr
    out = np.zeros(arr.shape[:-1] + (n,), dtype=arr.dtype)
    out[..., : arr.shape[-1]] = arr
    return out


def _block_arrays(batch: RoundBatch, sized: tuple[Sized, ...]) -> dict[str, np.ndarray]:
    """Every array of a RoundBatch under its file stem (round axis last); each round's own matrix
    sizes where ``sized`` says the group records them (int32: far above any matrix)."""
    out = {"keys": batch.keys, "root": batch.root_tokens}
    if batch.ordinals is not None:  # always: _GroupWriter.add refuses a batch without them
        out["ordinal"] = batch.ordinals
    for (prefix, st), own in zip(_prefixed(batch), sized):
        out[f"{prefix}_ids"] = st.ids
        if st.logp is not None:
            out[f"{prefix}_logp"] = st.logp
        if st.parents is not None:
            out[f"{prefix}_parents"] = st.parents
        if st.node_logp is not None:  # validate only: a live dump's node_logprobs (docs/packed-format.md)
            out[f"{prefix}_node_logp"] = st.node_logp
        for size, recorded, sizes in zip(SIZE_STEMS, own, (st.own_rows(), st.own_cols(), st.own_prows())):
            if recorded and sizes is not None:
                out[f"{prefix}_{size}"] = sizes.astype(np.int32)
    return out


def _prefixed(batch: RoundBatch) -> list[tuple[str, MatrixStack]]:
    """(file stem prefix, matrix): s0, s1, ... then v."""
    return [(f"s{i}", s) for i, s in enumerate(batch.steps)] + [("v", batch.validate)]


# Per matrix: its stored rows, columns and parents entries (None without parents): a group's block shape.
Shape = tuple[int, int, int | None]
# Per matrix: whether the group records each round's own rows, columns, parents entries (*_rows,
# *_cols, *_prows arrays, format.SIZE_STEMS in this order): where its rounds' matrices are smaller than the stored shape.
Sized = tuple[bool, bool, bool]


def _shape(st: MatrixStack) -> Shape:
    return (st.rows, st.cols, None if st.parents is None else int(st.parents.shape[0]))


def _sized(st: MatrixStack) -> Sized:
    return (st.rows_of is not None, st.cols_of is not None, st.prows_of is not None)


class _GroupWriter:
    """Buffers one kind's rounds (GroupKind) and writes them a block at a time. Padding, the
    per-round size arrays and when a batch opens another group of the same kind (``fits``):
    docs/packed-format.md, "Layout".
    """

    def __init__(self, root: Path, name: str, block_rounds: int):
        self.root, self.name, self.block_rounds = root, name, block_rounds
        self.pending: list[RoundBatch] = []
        self.pending_n = 0
        self.rounds = 0
        self.block: int | None = None  # rounds per block, fixed by the first block written
        self.shape: tuple[Shape, ...] | None = None  # per matrix, fixed by the first block written
        self.sized: tuple[Sized, ...] = ()  # per matrix, fixed with the shape
        self.appenders: dict[str, _Appender] = {}
        self.sample: RoundBatch | None = None
        self.overrides: dict[int, tuple[str, ...]] = {}

    def fits(self, batch: RoundBatch) -> bool:
        """The batch can be padded to the group's shape without sizes the group does not record."""
        if self.shape is None:
            return True  # nothing written yet: the first block takes the widest
        for (_, st), shape, sized in zip(_prefixed(batch), self.shape, self.sized):
            for have, want, varies, recorded in zip(_shape(st), shape, _sized(st), sized):
                if (
                    have is not None
                    and want is not None
                    and (have > want or (not recorded and (varies or have < want)))
                ):
                    return False
        return True

    def add(self, batch: RoundBatch) -> None:
        if batch.ordinals is None:
            raise ValueError("packing needs each round's ordinal (its position in key order)")
        self.sample = self.sample or batch
        if isinstance(batch.names, SourceNames):  # a packed run's own blocks name no source file
            self.overrides.update(batch.names.overrides)
        self.pending.append(batch)
        self.pending_n += len(batch)
        while self.pending_n >= self.block_rounds:
            self._flush(self.block_rounds)

    def _flush(self, n: int) -> None:
        from replay.io.fastread import concat_batches

        merged = concat_batches(self.pending)
        if self.shape is None:
            self.shape = tuple(_shape(st) for _, st in _prefixed(merged))
            self.sized = tuple(_sized(st) for _, st in _prefixed(merged))
        merged = _padded_to(merged, self.shape)
        head, rest = merged.take(slice(0, n)), merged.take(slice(n, None))
        if self.block is None:
            self.block = n
            (self.root / self.name).mkdir()
        for stem, arr in _block_arrays(head, self.sized).items():
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
        s, block = self.sample, self.block
        if s is None or block is None:  # every round given has been flushed: only an empty batch leaves these unset
            raise ValueError(f"{self.name}: a packed group needs at least one round")
        names = s.names if isinstance(s.names, SourceNames) else None
        return {
            "name": self.name,
            "rounds": self.rounds,
            "block_rounds": block,
            "blocks": -(-self.rounds // block),
            "steps": s.num_steps,
            "exts": list(names.exts) if names else None,
            "path_overrides": {str(k): list(v) for k, v in sorted(self.overrides.items())},
            "arrays": {stem: a.close() for stem, a in self.appenders.items()},
        }


def _padded_to(batch: RoundBatch, shape: tuple[Shape, ...]) -> RoundBatch:
    """Every matrix of ``batch`` padded to a group's shape (the batch fits it: _GroupWriter.fits)."""
    mats = [st.padded_to(*sh) for (_, st), sh in zip(_prefixed(batch), shape)]
    b = batch
    return RoundBatch(b.keys, b.root_tokens, tuple(mats[:-1]), mats[-1], b.layout, b.names, b.ordinals)


# What rounds of one packed group share whatever their matrix sizes: per matrix the ids, scores
# and parents dtypes (None where absent) and the node log-probs' (columns, dtype), then the files'
# extensions and the layout.
MatrixKind = tuple[str, str | None, str | None, tuple[int, str] | None]
GroupKind = tuple[tuple[MatrixKind, ...], tuple[str, ...] | None, str | None]


def group_kind(batch: RoundBatch) -> GroupKind:
    """A packed group's kind: replay.io.roundbatch.group_key (steps, optional arrays, node_logprobs
    columns, extensions, layout) with the dtypes the arrays are stored in."""
    dtypes = tuple(
        (
            st.ids.dtype.str,
            None if st.logp is None else st.logp.dtype.str,
            None if st.parents is None else st.parents.dtype.str,
            None if st.node_logp is None else (int(st.node_logp.shape[1]), st.node_logp.dtype.str),
        )
        for _, st in _prefixed(batch)
    )
    return (dtypes, batch.names.exts if isinstance(batch.names, SourceNames) else None, batch.layout)


def _raw_json(raw: RawSpec | None) -> dict[str, object] | None:
    if raw is None:
        return None
    return {"dtype": raw.dtype, "columns": dict(raw.columns), "score_dtype": raw.score_dtype, "force": raw.force}


def _skipped_json(s: Skipped) -> dict[str, object]:
    return {"what": s.what, "reason": s.reason, "paths": list(s.paths)}


@dataclass(frozen=True)
class PackSummary:
    path: str
    rounds: int  # rounds the dump's names group into (readable or not)
    packed_rounds: int
    groups: int
    bytes: int
    checksum: str
    skipped: int  # name-level skips plus unreadable rounds
    skipped_items: tuple[Skipped, ...] = ()  # those entries, in the order a replay of the run lists them
    warnings: tuple[str, ...] = ()  # lines for stderr about how the names were grouped (Step0Check.notes)


class PackWriter:
    """Streams RoundBatches into a packed run; nothing appears at ``out`` until ``finish``."""

    def __init__(
        self,
        out: str | Path,
        source: str,
        step0_offset: tuple[int, int],
        raw: RawSpec | None,
        score_kind: str,
        block_rounds: int = DEFAULT_BLOCK_ROUNDS,
        force: bool = False,
        step0_check: Step0Check | None = None,
    ):
        self.out = Path(out)
        if self.out.exists() and not (force and looks_packed(self.out)):
            why = (
                "as a packed run: pass --force to replace it"
                if looks_packed(self.out)
                else "and is not a packed run; choose another path"
            )
            raise DumpError(self.out, f"already exists {why}")
        if block_rounds < 1:
            raise ValueError(f"block_rounds must be positive, got {block_rounds}")
        self.tmp = self.out.parent / f".{self.out.name}.packing-{os.getpid()}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        self.source, self.step0_offset, self.raw, self.score_kind = source, step0_offset, raw, score_kind
        self.step0_check = (
            step0_check  # the grouping's Step0Check, kept so a replay of the run says what the directory's says
        )
        self.block_rounds = block_rounds
        self.groups: list[_GroupWriter] = []  # in the order they were opened (g000, g001, ...)
        self.kinds: dict[GroupKind, list[_GroupWriter]] = {}  # the same, by kind
        self.unreadable: list[tuple[int, Skipped]] = []

    def add(self, batch: RoundBatch) -> None:
        """Rounds of one group_key (matrix sizes may differ), into the first group of their kind they fit."""
        same = self.kinds.setdefault(group_kind(batch), [])
        group = next((g for g in same if g.fits(batch)), None)
        if group is None:
            group = _GroupWriter(self.tmp, f"g{len(self.groups):03d}", self.block_rounds)
            self.groups.append(group)
            same.append(group)
        group.add(batch)

    def add_unreadable(self, items: Sequence[tuple[int, Skipped]]) -> None:
        self.unreadable.extend(items)

    @property
    def packed_rounds(self) -> int:
        """Rounds added so far, written or still buffered."""
        return sum(g.rounds + g.pending_n for g in self.groups)

    def skipped_items(self, skipped: Sequence[Skipped]) -> tuple[Skipped, ...]:
        """``skipped`` (the names' skips) then the unreadable rounds by ordinal: the order a replay of the run lists them."""
        return tuple(skipped) + tuple(s for _, s in sorted(self.unreadable, key=lambda t: t[0]))

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def finish(
        self,
        rounds: int,
        skipped: Sequence[Skipped],
        copy_from: str | Path | None = None,
        keys_of_unreadable: dict[int, Key] | None = None,
        manifest: dict[str, Any] | None = None,
    ) -> PackSummary:
        """Close every file, write packed.json, then move the run into place in one rename.

        copy_from: the dump directory whose manifest.json/config.json are copied verbatim;
        manifest: a manifest body to write instead (in-memory runs).
        """
        groups = [g.close() for g in self.groups]
        files = [a for g in groups for a in g["arrays"].values()]
        copied = self._write_side_files(copy_from, manifest)
        keys = keys_of_unreadable or {}
        body = {
            "format": PACKED_FORMAT,
            "version": PACKED_VERSION,
            "source": self.source,
            "read_options": {
                "step0_offset": list(self.step0_offset),
                "raw": _raw_json(self.raw),
                "score_kind": self.score_kind,
                **({"step0_check": self.step0_check.to_json()} if self.step0_check is not None else {}),
            },
            "rounds": rounds,
            "packed_rounds": sum(g["rounds"] for g in groups),
            "block_rounds": self.block_rounds,
            "skipped": [_skipped_json(s) for s in skipped],
            "unreadable": [
                {"ordinal": o, "key": list(keys[o]) if o in keys else None, **_skipped_json(s)}
                for o, s in sorted(self.unreadable, key=lambda t: t[0])
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
        self._move_into_place()
        total = sum(f["bytes"] for f in files + copied) + (self.out / PACKED_NAME).stat().st_size
        items = self.skipped_items(skipped)
        notes = self.step0_check.notes() if self.step0_check is not None else ()
        return PackSummary(
            str(self.out),
            rounds,
            body["packed_rounds"],
            len(groups),
            total,
            body["checksum"]["run"],
            len(items),
            items,
            notes,
        )

    def _write_side_files(self, copy_from: str | Path | None, manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
        """manifest.json from ``manifest``, else the dump's side files copied verbatim; each copied file's
        name, sha256 and size, for packed.json."""
        if manifest is not None:
            from replay.io.dumpwrite import write_manifest

            write_manifest(self.tmp, manifest)
        elif copy_from is not None:
            for name in COPIED_FILES:
                if (Path(copy_from) / name).is_file():
                    shutil.copyfile(Path(copy_from) / name, self.tmp / name)
        return [
            {"file": name, "sha256": file_sha256(self.tmp / name), "bytes": (self.tmp / name).stat().st_size}
            for name in COPIED_FILES
            if (self.tmp / name).is_file()
        ]

    def _move_into_place(self) -> None:
        """The finished run replaces ``out`` in one rename (--force on a previous packed run: swap,
        then delete the old one), the command's commit point: an interrupt once it is in place
        ends the command with exit 0."""
        commit_staged(self.tmp, self.out, whole=True)
