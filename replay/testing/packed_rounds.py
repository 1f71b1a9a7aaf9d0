"""A packed run round by round, for the per-round reference (replay_packed): the engine reads it
block by block (replay.engine.runs)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from replay.io.dumpnames import Key
from replay.io.packed.format import PackedBlockError
from replay.io.packed.read import BadBlock, PackedRun
from replay.io.roundbatch import RoundBatch
from replay.io.rounds import Round
from replay.io.skipped import Skipped
from replay.util.errors import DumpError

from .in_memory import round_at


def packed_rounds(
    packed: PackedRun, layout: str | None = None, only: Key | None = None
) -> Iterator[tuple[int, Round | Skipped]]:
    """(ordinal, Round, or why it is skipped) in key order, one block per group cached.

    A bad block is one Skipped, at its first round's place (at the end when its ordinals are
    unreadable). ``only``: just the rounds with that key (and bad blocks that may hold it).
    """
    if only is not None:
        yield from _only_rounds(packed, layout, only)
        return
    n = packed.num_rounds
    gid = np.full(n, -1, dtype=np.int32)  # n <= the keys files' size: checked on open
    pos = np.full(n, -1, dtype=np.int64)
    unreadable = {o: s for o, _, s in packed.unreadable}
    for o in unreadable:
        gid[o] = -2
    lost: list[BadBlock] = []
    for gi, g in enumerate(packed.groups):
        for k, size in enumerate(g.block_sizes()):
            try:
                ords = packed.read(g, "ordinal", k)[:size]
            except PackedBlockError as exc:
                lost.append(packed.bad_block(g, k, exc))
                continue
            if (gid[ords] != -1).any() or np.unique(ords).shape[0] != size:
                raise DumpError(
                    packed.path / g.arrays["ordinal"].file,
                    f"block {k} repeats an ordinal of another round",
                    "ordinal",
                )
            gid[ords] = gi
            pos[ords] = k * g.block_rounds + np.arange(size)
    cache: dict[int, tuple[int, RoundBatch | BadBlock]] = {}
    for o in range(n):
        gi = int(gid[o])
        if gi < 0:
            if o in unreadable:
                yield o, unreadable[o]
            continue
        g = packed.groups[gi]
        k, i = divmod(int(pos[o]), g.block_rounds)
        if gi not in cache or cache[gi][0] != k:
            try:
                cache[gi] = (k, packed.block(g, k, layout))
            except PackedBlockError as exc:
                bad = packed.bad_block(g, k, exc)
                cache[gi] = (k, bad)
                yield o, bad.skipped
        item = cache[gi][1]
        if isinstance(item, RoundBatch):
            yield o, round_at(item, i)
    for bad in lost:
        yield bad.position, bad.skipped


def _only_rounds(packed: PackedRun, layout: str | None, key: Key) -> Iterator[tuple[int, Round | Skipped]]:
    found, unknown = packed.locate(key)
    out: list[tuple[int, Round | Skipped]] = [(o, s) for o, k, s in packed.unreadable if k == key]
    for g, k in found:
        try:
            b = packed.block(g, k, layout)
        except PackedBlockError as exc:
            bad = packed.bad_block(g, k, exc)
            out.append((bad.position, bad.skipped))
            continue
        ords = b.ordinals
        if ords is None:  # never: block() reads the ordinal array packed.json must list
            raise ValueError(f"{packed.path}: block {k} of group {g.name} without ordinals")
        for i in np.flatnonzero((b.keys[0] == key[0]) & (b.keys[1] == key[1])):
            out.append((int(ords[i]), round_at(b, int(i))))
    out += [(bad.position, bad.skipped) for bad in unknown]
    yield from sorted(out, key=lambda t: t[0])
