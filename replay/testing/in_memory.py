"""Whole runs held in memory at once (tests, benches, small runs): a directory's batches, in-memory
rounds stacked into batches, several batches replayed into one result. The commands stream a run
block by block instead (replay.engine.runs)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig
from replay.core.vocab import CHUNK_ROUNDS
from replay.engine.batch import BatchResult, replay_batch
from replay.io.dumpnames import Key
from replay.io.fastread import ReadOptions, concat_batches, iter_read_chunks, plan_items
from replay.io.grouping import Grouping
from replay.io.roundbatch import GroupKey, MatrixStack, RoundBatch, Signature, group_key, signature_of
from replay.io.rounds import Round
from replay.io.skipped import Skipped


def read_directory(
    directory: str | Path,
    grouping: Grouping,
    roots: Mapping[Key, int],
    opts: ReadOptions,
    workers: int | None = None,
    progress: bool = False,
) -> tuple[list[RoundBatch], list[tuple[int, Skipped]]]:
    """Everything in memory: one RoundBatch per group_key (rounds in key order) and the unreadable."""
    parts: dict[GroupKey, list[RoundBatch]] = {}
    unreadable: list[tuple[int, Skipped]] = []
    for chunk in iter_read_chunks(directory, plan_items(grouping, roots), opts, workers, progress=progress):
        unreadable += chunk.unreadable
        for b in chunk.batches:
            parts.setdefault(group_key(b), []).append(b)
    return [concat_batches(bs) for bs in parts.values()], unreadable


def batch_from_rounds(rounds: Sequence[Round], ordinals: Sequence[int] | None = None) -> list[RoundBatch]:
    """Group in-memory rounds by signature; the readers build their arrays directly."""
    groups: dict[tuple[Signature, str | None], list[int]] = {}
    for k, rnd in enumerate(rounds):
        groups.setdefault((signature_of(rnd), rnd.layout), []).append(k)
    out = []
    for (_, layout), members in groups.items():
        rs = [rounds[k] for k in members]
        out.append(
            RoundBatch(
                np.asarray([r.key for r in rs], dtype=np.int64).reshape(len(rs), 2).T.copy(),
                np.asarray([r.root_token for r in rs], dtype=np.int64),
                tuple(MatrixStack.stack([r.steps[s] for r in rs]) for s in range(len(rs[0].steps))),
                MatrixStack.stack([r.validate for r in rs]),
                layout,
                None,
                np.asarray(members if ordinals is None else [ordinals[k] for k in members], dtype=np.int64),
            )
        )
    return out


def replay_batches(
    batches: Iterable[RoundBatch], cfg: TreeConfig, workers: int | None = None, chunk_rounds: int = CHUNK_ROUNDS
) -> BatchResult:
    """Several batches (one run's groups) → one result in run order when ordinals are known."""
    parts = [replay_batch(b, cfg, workers, chunk_rounds) for b in batches]
    if not parts:
        raise ValueError("no rounds to replay")
    return BatchResult.concat(parts).sorted_by_ordinal()


def round_at(batch: RoundBatch, i: int) -> Round:
    """Round ``i`` of ``batch`` as the Round that load_round would have returned."""
    key = batch.key(i)
    paths = batch.paths_of(i)
    mats = [st.matrix(i, paths[s]) for s, st in enumerate((*batch.steps, batch.validate))]
    if batch.names is not None:
        ordinal = None if batch.ordinals is None else int(batch.ordinals[i])
        scores = batch.names.scores_paths(key, batch.num_steps, ordinal)
        mats = [replace(m, scores_path=sp) if sp else m for m, sp in zip(mats, scores)]
    return Round(key, tuple(mats[:-1]), mats[-1], int(batch.root_tokens[i]), batch.layout)
