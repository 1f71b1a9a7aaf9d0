"""Reading packed runs: ``PackedRun`` opens a run, checks it, and streams it block by block.

packed.json is checked on open (replay.io.packed.meta), as are every array file's size and header
and the copied manifest/config; every block is checked as it is read (replay.io.packed.blocks). A
block that fails its check becomes a ``BadBlock``: its rounds are skipped, the rest of the run is
read. docs/packed-format.md.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from replay.io.dumpnames import Key
from replay.io.formats.matrix_io import RawSpec
from replay.io.roundbatch import ArrayNames, MatrixStack, RoundBatch, SourceNames
from replay.io.skipped import Skipped
from replay.io.step0 import Step0Check
from replay.util.errors import DumpError
from replay.util.hashing import file_sha256

from .blocks import check_array_file, read_block, verify_array
from .format import (
    COPIED_FILES,
    PACKED_NAME,
    SIZE_STEMS,
    ArraySpec,
    GroupSpec,
    PackedBlockError,
    PackedMeta,
    run_checksum,
)
from .meta import read_meta


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
    def open(cls, path: str | Path, check_blocks: bool = True) -> PackedRun:
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
        """Rounds the source's names grouped into, readable or not."""
        return self.spec.rounds

    @property
    def step0_offset(self) -> tuple[int, int]:
        return self.spec.step0_offset

    @property
    def step0(self) -> Step0Check:
        """What the grouping said about the step-0 offset when the run was packed."""
        return self.spec.step0

    @property
    def raw(self) -> RawSpec | None:
        return self.spec.raw

    @property
    def score_kind(self) -> str:
        return self.spec.score_kind

    @property
    def skipped(self) -> list[Skipped]:
        """Files the source's names could not place in a round (grouping), in order."""
        return [self.entry(s) for s in self.spec.skipped]

    @property
    def unreadable(self) -> list[tuple[int, Key | None, Skipped]]:
        """(ordinal, key, why) of rounds whose files could not be read when packing."""
        return [(o, key, self.entry(s)) for o, key, s in self.spec.unreadable]

    def entry(self, skipped: Skipped) -> Skipped:
        """``skipped``, an entry naming the files this run was packed from, as a skip of this run: its
        line names the run first (Skipped.line), the files as they were named when packing."""
        return replace(skipped, packed=(str(self.path), self.spec.source))

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
                self.path / group.arrays["ordinal"].file,
                group.name,
                k,
                f"ordinals in [{int(ords.min())}, {int(ords.max())}], the run has {self.num_rounds} rounds",
            )

    def _own_sizes(
        self,
        group: PackedGroup,
        k: int,
        prefix: str,
        ids: np.ndarray,
        parents: np.ndarray | None,
        get: Callable[[str], np.ndarray | None],
    ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """Each round's own rows, columns and parents entries of one matrix (None: every round fills
        the stored shape), from the group's *_rows/*_cols/*_prows arrays (replay.io.packed.write),
        checked like the ordinals: a re-hashed edit must not make a round larger than its arrays."""
        stored = (ids.shape[0], ids.shape[1], None if parents is None else parents.shape[0])
        out: list[np.ndarray | None] = []
        for size, n in zip(SIZE_STEMS, stored):
            arr = get(f"{prefix}_{size}")
            if arr is None or n is None:
                out.append(None)
                continue
            arr = arr.astype(np.int64)
            lo = 0 if size != "prows" else (out[0] if out[0] is not None else ids.shape[0])
            if arr.shape[0] and ((arr < lo).any() or int(arr.max()) > n):
                raise PackedBlockError(
                    self.path / group.arrays[f"{prefix}_{size}"].file,
                    group.name,
                    k,
                    f"own sizes in [{int(arr.min())}, {int(arr.max())}], the stored matrices have {n}"
                    + (" (and at least each round's rows)" if size == "prows" else ""),
                )
            out.append(None if (arr == n).all() else arr)
        return out[0], out[1], out[2]

    def block(self, group: PackedGroup, k: int, layout: str | None = None) -> RoundBatch:
        """Block ``k`` of ``group`` as a RoundBatch, read into memory and checked.

        Raises PackedBlockError when any of its arrays does not match packed.json.
        """
        n = group.block_size(k)

        def need(stem: str) -> np.ndarray:  # keys, root, ordinal and *_ids: packed.json must list them (meta.py)
            return self.read(group, stem, k)[..., :n]

        def get(stem: str) -> np.ndarray | None:
            return need(stem) if stem in group.arrays else None

        def stack(prefix: str) -> MatrixStack:
            ids, parents = need(f"{prefix}_ids"), get(f"{prefix}_parents")
            rows_of, cols_of, prows_of = self._own_sizes(group, k, prefix, ids, parents, get)
            return MatrixStack(
                ids, get(f"{prefix}_logp"), parents, rows_of, cols_of, prows_of, get(f"{prefix}_node_logp")
            )

        ordinals = need("ordinal")
        return RoundBatch(
            need("keys"),
            need("root"),
            tuple(stack(f"s{i}") for i in range(group.steps)),
            stack("v"),
            layout,
            group.names or self._array_names(group, k, ordinals),
            ordinals,
        )

    def _array_names(self, group: PackedGroup, k: int, ordinals: np.ndarray) -> ArrayNames:
        """A run packed from memory has no original files: its matrices are named by packed array."""
        prefixes = [f"s{s}" for s in range(group.steps)] + ["v"]
        logp = [group.arrays.get(f"{p}_logp") for p in prefixes]
        return ArrayNames(
            tuple(str(self.path / group.arrays[f"{p}_ids"].file) for p in prefixes),
            tuple("" if a is None else str(self.path / a.file) for a in logp),
            k,
            np.asarray(ordinals, dtype=np.int64),
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

        def readable(stem: str) -> np.ndarray | None:
            arr = found[stem]
            return None if isinstance(arr, PackedBlockError) else arr.astype(np.int64)

        ords, keys = readable("ordinal"), readable("keys")
        what = f"block {k} of group {group.name} ({n} round{'s' if n != 1 else ''})"
        why = (
            "; ".join(str(e) for e in errors)
            + f"; the rest of the run is read (check it: specreplay verify-pack {shlex.quote(str(self.path))})"
        )
        position = self.num_rounds if ords is None else int(ords.min())
        return BadBlock(group.name, k, n, position, keys, Skipped(what, why, tuple(e.path for e in errors), n))

    def iter_blocks(self) -> Iterator[RoundBatch | BadBlock]:
        """Every block of every group, a RoundBatch or, when it fails its check, a BadBlock."""
        for g in self.groups:
            for k in range(g.blocks):
                try:
                    yield self.block(g, k)
                except PackedBlockError as exc:
                    yield self.bad_block(g, k, exc)

    def iter_batches(self, layout: str | None = None) -> Iterator[RoundBatch]:
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

    def verify(self) -> list[str]:
        """Problems found (empty when intact): each file's structure, every block's CRC-32, sha256."""
        problems = []
        files = []
        for g in self.groups:
            for a in g.arrays.values():
                files.append(a.to_json())
                problems += verify_array(self.path, g.name, a)
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
                raise DumpError(
                    p,
                    "was added after packing (not in packed.json); pass --config to replay with another config, or repack",
                )
            continue
        c = listed[name]
        try:
            size = p.stat().st_size
            ok = size == c.bytes and file_sha256(p) == c.sha256
        except OSError:
            raise DumpError(p, "missing (listed in packed.json)") from None
        if not ok:
            raise DumpError(
                p,
                "differs from the copy packed.json records (edited or corrupt); pass --config to replay with another config, or repack",
            )
