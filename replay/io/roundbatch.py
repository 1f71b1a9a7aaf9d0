"""Many rounds of one matrix signature as column-major arrays: what readers yield and kernels take.

A RoundBatch is the reading side's unit (replay.io.fastread and replay.io.packed.pack build them, replay.engine.batch
replays them); it lives below both so that reading never imports the replay kernels
(docs/architecture.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .formats.matrix_io import DumpMatrix
from .rounds import Round

LAYOUT_NAMES = ("parents", "all")  # layout codes 0, 1


def _check_array(arr: np.ndarray, name: str, ndim: int, kind: str, rounds: int | None, axis: int = -1) -> None:
    if not isinstance(arr, np.ndarray) or arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got {getattr(arr, 'shape', type(arr).__name__)}")
    if arr.dtype.kind not in kind:
        raise ValueError(f"{name}: expected dtype kind {kind!r}, got {arr.dtype}")
    if rounds is not None and arr.shape[axis] != rounds:
        raise ValueError(f"{name}: expected {rounds} rounds in axis {axis}, got {arr.shape[axis]}")


@dataclass(frozen=True, eq=False)
class MatrixStack:
    """One dump matrix (a draft step or the validate) of R rounds with identical matrix shapes.

    Column-major: the round axis is last, so each cell of the matrix is one contiguous vector over
    rounds. The kernel reads whole cells (a copy at memory speed) instead of gathering them from
    round-major rows (~1 ns per cell and round, a quarter of the kernel's time when measured).
    """

    ids: np.ndarray  # [rows, cols, R] int32/int64 token ids, PAD_TOKEN padding
    logp: np.ndarray | None = None  # [rows, cols, R] float32/float64 natural-log probabilities
    parents: np.ndarray | None = None  # [prows, R] int32/int64 tree-order node per row, prows >= rows

    def __post_init__(self) -> None:
        _check_array(self.ids, "ids", 3, "iu", None)
        r = self.ids.shape[-1]
        if self.logp is not None:
            _check_array(self.logp, "logp", 3, "f", r)
            if self.logp.shape != self.ids.shape:
                raise ValueError(f"logp: shape {self.logp.shape} differs from ids {self.ids.shape}")
        if self.parents is not None:
            _check_array(self.parents, "parents", 2, "iu", r)
            if self.parents.shape[0] < self.ids.shape[0]:
                raise ValueError(f"parents: {self.parents.shape[0]} entries per round for {self.ids.shape[0]} rows")

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def cols(self) -> int:
        return int(self.ids.shape[1])

    @property
    def rounds(self) -> int:
        return int(self.ids.shape[2])

    def take(self, index: np.ndarray | slice) -> MatrixStack:
        """Rounds ``index`` (a slice gives views, an index array copies)."""
        return MatrixStack(
            self.ids[..., index],
            None if self.logp is None else self.logp[..., index],
            None if self.parents is None else self.parents[..., index],
        )

    def matrix(self, i: int, path: str) -> DumpMatrix:
        """Round ``i`` as the DumpMatrix that read_matrix would have returned."""
        return DumpMatrix(
            path,
            np.array(self.ids[:, :, i], dtype=np.int64),
            None if self.logp is None else np.array(self.logp[:, :, i], dtype=np.float64),
            None if self.parents is None else np.array(self.parents[:, i], dtype=np.int64),
        )

    @classmethod
    def stack(cls, mats: Sequence[DumpMatrix]) -> MatrixStack:
        """Column-major stack of equally shaped matrices."""
        return cls(
            np.stack([m.ids for m in mats], axis=-1),
            None if mats[0].logp is None else np.stack([m.logp for m in mats], axis=-1),
            None if mats[0].parents is None else np.stack([m.parents for m in mats], axis=-1),
        )


@dataclass(frozen=True)
class SourceNames:
    """Rebuilds each matrix's original file path, so messages name the files a directory replay names."""

    directory: str
    exts: tuple[str, ...]  # per matrix, draft steps then validate: ".npz", "" (text), ...
    step0_offset: tuple[int, int] = (1, 1)
    # ordinal → the round's real paths, for the rare names that do not round-trip ("007")
    overrides: Mapping[int, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)

    @cached_property
    def _prefix(self) -> str:
        """os.path.join(directory, name) is this + name for any name not starting with a separator."""
        return os.path.join(self.directory, "")

    def step_path(self, key: tuple[int, int], step: int) -> str:
        a, b = key
        if step == 0:
            a, b = a - self.step0_offset[0], b - self.step0_offset[1]
        return f"{self._prefix}draft_step_{step}_{a}_{b}{self.exts[step]}"

    def validate_path(self, key: tuple[int, int]) -> str:
        return f"{self._prefix}validate_{key[0]}_{key[1]}{self.exts[-1]}"

    def paths(self, key: tuple[int, int], steps: int, ordinal: int | None = None) -> tuple[str, ...]:
        """Every matrix's path, draft steps then validate."""
        if ordinal is not None and ordinal in self.overrides:
            return tuple(self.overrides[ordinal])
        return tuple(self.step_path(key, s) for s in range(steps)) + (self.validate_path(key),)


@dataclass(frozen=True, eq=False)
class RoundBatch:
    """R rounds whose matrices have identical shapes (and optional arrays): one packed group."""

    keys: np.ndarray  # [2, R] int64 (a, b) of each round's validate file
    root_tokens: np.ndarray  # [R] int64, PAD_TOKEN when unknown
    steps: tuple[MatrixStack, ...]  # draft_step_0 .. draft_step_{S-1}
    validate: MatrixStack
    layout: str | None = None  # "parents"/"all" when stated, None to detect per round
    names: SourceNames | None = None
    ordinals: np.ndarray | None = None  # [R] int64 position of each round in its run (key order)

    def __post_init__(self) -> None:
        _check_array(self.keys, "keys", 2, "iu", None)
        r = self.keys.shape[1]
        if self.keys.shape[0] != 2:
            raise ValueError(f"keys: expected [2, R], got {self.keys.shape}")
        _check_array(self.root_tokens, "root_tokens", 1, "iu", r, 0)
        if not self.steps:
            raise ValueError("a round has at least one draft step")
        for i, st in enumerate((*self.steps, self.validate)):
            if st.rounds != r:
                raise ValueError(f"matrix {i}: {st.rounds} rounds, keys have {r}")
        if self.layout not in (None, *LAYOUT_NAMES):
            raise ValueError(f"layout: expected None, 'parents' or 'all', got {self.layout!r}")
        if self.ordinals is not None:
            _check_array(self.ordinals, "ordinals", 1, "iu", r, 0)

    def __len__(self) -> int:
        return int(self.keys.shape[1])

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def take(self, index: np.ndarray | slice) -> RoundBatch:
        return RoundBatch(
            self.keys[:, index],
            self.root_tokens[index],
            tuple(s.take(index) for s in self.steps),
            self.validate.take(index),
            self.layout,
            self.names,
            None if self.ordinals is None else self.ordinals[index],
        )

    def key(self, i: int) -> tuple[int, int]:
        return (int(self.keys[0, i]), int(self.keys[1, i]))

    def round_at(self, i: int) -> Round:
        """Round ``i`` as the Round that load_round would have returned (for the reference replay)."""
        key = self.key(i)
        if self.names is None:
            paths = tuple(f"draft_step_{s}" for s in range(self.num_steps)) + ("validate",)
        else:
            ordinal = None if self.ordinals is None else int(self.ordinals[i])
            paths = self.names.paths(key, self.num_steps, ordinal)
        steps = tuple(st.matrix(i, paths[s]) for s, st in enumerate(self.steps))
        return Round(key, steps, self.validate.matrix(i, paths[-1]), int(self.root_tokens[i]), self.layout)


def signature_of(rnd: Round) -> tuple:
    """Rounds with equal signatures stack into one RoundBatch (matrix shapes and optional arrays)."""
    return tuple(
        (m.ids.shape, m.logp is not None, None if m.parents is None else m.parents.shape[0])
        for m in (*rnd.steps, rnd.validate)
    )


def batch_from_rounds(rounds: Sequence[Round], ordinals: Sequence[int] | None = None) -> list[RoundBatch]:
    """Group in-memory rounds by signature (tests, small runs); fast paths build arrays directly."""
    groups: dict[tuple, list[int]] = {}
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
