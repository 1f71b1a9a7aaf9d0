"""BatchResult: per-round replay outcomes as arrays, and their JSON / pandas output."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from replay.core.selection import FALLBACK_WARNING, fallback_guesses, is_parents_mismatch_note, selection_summary
from replay.core.vocab import LAYOUTS, PAD_TOKEN
from replay.io.roundbatch import MatrixStack, RoundBatch
from replay.util.words import round_name

from .codes import ERR_OK, ERROR_NAMES, SEL_FALLBACK, SEL_NONE, SELECTION_NAMES, BonusCode, StopCode
from .frames import record_dicts, record_frame, replayed
from .shapes import TreeShape


@dataclass(frozen=True, eq=False)
class BatchResult:
    """Per-round replay outcomes as arrays (R rounds, G = the config's gamma), round axis last.

    Rejected rounds (``error != 0``) hold PAD_TOKEN/0 in every outcome field.
    """

    keys: np.ndarray  # [2, R] int64
    root_tokens: np.ndarray  # [R] int64
    error: np.ndarray  # [R] int8 ERR_* code, 0 = replayed
    # [3, R] int64 where the error's check failed: (draft step, row, detail) as replay.engine.batch.codes
    # says per code, -1 where a code has no such place (and in replayed rounds)
    error_at: np.ndarray
    # [R] int16 into ``shapes``; -1 when no shape could be derived. A round rejected at a draft step
    # without valid rows (dynamic trees) has the shape of the steps before it.
    shape_index: np.ndarray
    shapes: tuple[TreeShape, ...]
    layout: np.ndarray  # [R] int8: 0 parents, 1 all
    layout_stated: np.ndarray  # [R] bool
    validate_extra_rows: np.ndarray  # [R] int32 rows beyond the layout (ignored as padding)
    selection: np.ndarray  # [G, R] int8 SEL_* per draft step
    accepted_nodes: np.ndarray  # [G, R] int32 tree-order ids, PAD_TOKEN after the path
    accepted_tokens: np.ndarray  # [G, R] int64, PAD_TOKEN after the path
    accepted_ranks: np.ndarray  # [G, R] int8 draft rank of each accepted node, PAD_TOKEN after
    accepted_length: np.ndarray  # [R] int8
    bonus_token: np.ndarray  # [R] int64, PAD_TOKEN when the dump has no target row for it
    bonus_kind: np.ndarray  # [R] int8 BonusCode
    stop: np.ndarray  # [R] int8 StopCode (index into STOP_CODES)
    scored: np.ndarray  # [R] bool: the round's draft or validate files carry scores
    ordinals: np.ndarray | None = None  # [R] int64 position in the run, when known
    # round → its notes from the rebuild: parents that differ from path probability, a draft row repeated
    # beyond topHead
    selection_notes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    # [H, R] int32 the tree the replay rebuilt: slot j of draft step i (row shape.head_offsets[i] + j of
    # the round's shape) holds the level-local node it expanded, -1 past the shape's slots and in
    # rejected rounds; the sampling replay reads it instead of rebuilding the trees. None: not kept.
    expanded: np.ndarray | None = None

    def __post_init__(self) -> None:
        r = self.keys.shape[-1]
        for name in _ROUND_ARRAYS:
            arr = getattr(self, name)
            if arr.shape[-1] != r:
                raise ValueError(f"{name}: {arr.shape[-1]} rounds in the last axis, keys have {r}")
        if self.expanded is not None and (self.expanded.ndim != 2 or self.expanded.shape[1] != r):
            raise ValueError(f"expanded: shape {self.expanded.shape}, expected [slots, {r}]")
        depths = {
            getattr(self, n).shape[0] for n in ("selection", "accepted_nodes", "accepted_tokens", "accepted_ranks")
        }
        if len(depths) != 1:
            raise ValueError(f"per-depth arrays disagree on gamma: {sorted(depths)}")

    def __len__(self) -> int:
        return int(self.keys.shape[1])

    @property
    def gamma(self) -> int:
        return int(self.selection.shape[0])

    @property
    def ok(self) -> np.ndarray:
        """[R] bool: rounds replayed (the others are rejected, with a reason in ``error``)."""
        return self.error == ERR_OK

    def clear_outcomes(self, rounds: np.ndarray) -> None:
        """Every outcome of ``rounds`` ([k] int64 positions) back to the default a rejected round holds."""
        for name, fill in _OUTCOME_DEFAULTS:
            getattr(self, name)[..., rounds] = fill
        if self.expanded is not None:
            self.expanded[:, rounds] = -1

    def reject(self, rounds: np.ndarray, code: int, row: np.ndarray, detail: int) -> None:
        """Reject replayed ``rounds`` ([k] int64 positions) after the kernel: ``code`` at their validate
        matrix, ``row``: [k] int64 (codes.py says what per code), ``detail`` the code's message."""
        self.error[rounds] = code
        self.error_at[:, rounds] = np.stack([np.full(len(rounds), -1), row, np.full(len(rounds), detail)])
        self.clear_outcomes(rounds)

    @property
    def num_committed(self) -> np.ndarray:
        """[R] int8 accepted tokens plus the bonus token when known."""
        return (self.accepted_length + (self.bonus_token != PAD_TOKEN)).astype(np.int8)

    def _shape_table(self, attr: Callable[[TreeShape], int]) -> np.ndarray:
        table = np.asarray([attr(s) for s in self.shapes] + [0], dtype=np.int64)
        return table[self.shape_index]  # -1 picks the trailing 0

    @property
    def num_steps(self) -> np.ndarray:
        """[R] int64 draft steps of each round (0 when rejected before a shape was known)."""
        return self._shape_table(lambda s: s.num_steps)

    @property
    def num_nodes(self) -> np.ndarray:
        return self._shape_table(lambda s: s.num_nodes)

    @property
    def parents_differ(self) -> np.ndarray:
        """[R] bool: rounds whose dump parents differ from the path-probability selection: exactly the
        rounds with a parents_mismatch_note."""
        out = np.zeros(len(self), dtype=bool)
        differ = [k for k, v in self.selection_notes.items() if k < len(self) and any(map(is_parents_mismatch_note, v))]
        out[differ] = True
        return out

    def selection_summary(self, i: int) -> str:
        """Round i's selection methods of steps 1.., in first-use order."""
        return selection_summary([SELECTION_NAMES[int(c)] for c in self.selection[1:, i] if c != SEL_NONE])

    @cached_property  # notes(i) asks it of every round that may have a note: computed once
    def fallback_guessed(self) -> np.ndarray:
        """[R] bool: some step's rank-major fallback chose among two or more nodes
        (replay.core.selection.fallback_guesses; a chain's fallback guesses nothing)."""
        g = self.selection.shape[0]
        sizes = np.zeros((len(self.shapes) + 1, g), dtype=np.int64)  # the last row: rounds without a shape
        for k, shape in enumerate(self.shapes):
            n = min(g, shape.num_steps)
            sizes[k, :n] = shape.level_sizes[:n]  # step i expands level i
        guesses = fallback_guesses(sizes)
        out: np.ndarray = ((self.selection == SEL_FALLBACK) & guesses[self.shape_index].T).any(axis=0)
        return out

    def notes(self, i: int) -> list[str]:
        out = list(self.selection_notes.get(i, ()))
        if self.fallback_guessed[i]:
            out.append(FALLBACK_WARNING)
        extra = int(self.validate_extra_rows[i])
        if extra > 0:
            out.append(f"validate: {extra} row(s) beyond the {LAYOUTS[self.layout[i]]} layout ignored as padding")
        return out

    def key_list(self, rows: np.ndarray) -> list[tuple[int, int]]:
        """The keys of rounds ``rows`` (a bool mask or an int index into this result), in its order."""
        return [(int(a), int(b)) for a, b in self.keys[:, rows].T.tolist()]

    def round_json(self, i: int) -> dict:
        """Round i's record (replay.core.records.COLUMNS) as a dict (the round must be ok)."""
        if self.error[i] != ERR_OK:
            raise ValueError(
                f"round {round_name(self.keys[:, i].tolist())} was rejected ({ERROR_NAMES[int(self.error[i])]})"
            )
        return record_dicts(self.take(np.asarray([i])))[0]

    def iter_json(self) -> Iterable[dict]:
        """The record of every replayed round, in this result's order."""
        return iter(record_dicts(replayed(self)))

    def take(self, index: np.ndarray) -> BatchResult:
        """Rounds ``index`` (an int array), notes renumbered."""
        index = np.asarray(index, dtype=np.int64)
        notes: dict[int, tuple[str, ...]] = {}
        if self.selection_notes:  # most runs have none; else each old round's new position, the last where
            pos = np.full(len(self), -1, dtype=np.int64)  # index repeats it (-1: not taken): an array, not a dict
            taken = index >= 0
            np.maximum.at(pos, index[taken], np.flatnonzero(taken))
            notes = {int(pos[k]): v for k, v in self.selection_notes.items() if 0 <= k < len(pos) and pos[k] >= 0}
        return BatchResult(
            **{name: getattr(self, name)[..., index] for name in _ROUND_ARRAYS},
            shapes=self.shapes,
            ordinals=None if self.ordinals is None else self.ordinals[index],
            selection_notes=notes,
            expanded=None if self.expanded is None else self.expanded[:, index],
        )

    def sorted_by_ordinal(self) -> BatchResult:
        if self.ordinals is None:
            return self
        return self.take(np.argsort(self.ordinals, kind="stable"))

    @staticmethod
    def concat(parts: Sequence[BatchResult]) -> BatchResult:
        """One result from several (shapes are merged; ordinals kept when every part has them)."""
        if not parts:
            raise ValueError("nothing to concatenate")
        gammas = {p.gamma for p in parts}
        if len(gammas) != 1:
            raise ValueError(f"results of different gamma {sorted(gammas)}")
        shapes: list[TreeShape] = []
        where: dict[TreeShape, int] = {}
        arrays: dict[str, list[np.ndarray]] = {name: [] for name in _ROUND_ARRAYS}
        notes: dict[int, tuple[str, ...]] = {}
        base = 0
        for p in parts:
            remap = np.empty(len(p.shapes) + 1, dtype=np.int16)
            remap[-1] = -1
            for k, s in enumerate(p.shapes):
                if s not in where:
                    where[s] = len(shapes)
                    shapes.append(s)
                remap[k] = where[s]
            for name in _ROUND_ARRAYS:
                arr = getattr(p, name)
                arrays[name].append(remap[arr] if name == "shape_index" else arr)
            notes.update({base + k: v for k, v in p.selection_notes.items()})
            base += len(p)
        ords = None if any(p.ordinals is None for p in parts) else np.concatenate([p.ordinals for p in parts])
        return BatchResult(
            **{name: np.concatenate(v, axis=-1) for name, v in arrays.items()},
            shapes=tuple(shapes),
            ordinals=ords,
            selection_notes=notes,
            expanded=_concat_expanded([p.expanded for p in parts]),
        )

    def to_frame(self):
        """One row per replayed round (pandas), the per-round record's columns (replay.core.records,
        docs/output-schema.md) in this result's order; rejected rounds are not records."""
        return record_frame(self)


def _concat_expanded(parts: Sequence[np.ndarray | None]) -> np.ndarray | None:
    """The parts' expanded slots side by side, each padded with -1 to the most slots; None unless every part kept them."""
    if any(e is None for e in parts):
        return None
    kept = [e for e in parts if e is not None]
    rows = max(e.shape[0] for e in kept)
    out = np.full((rows, sum(e.shape[1] for e in kept)), -1, dtype=np.int32)
    at = 0
    for e in kept:
        out[: e.shape[0], at : at + e.shape[1]] = e
        at += e.shape[1]
    return out


_ROUND_ARRAYS = (
    "keys",
    "root_tokens",
    "error",
    "error_at",
    "shape_index",
    "layout",
    "layout_stated",
    "validate_extra_rows",
    "selection",
    "accepted_nodes",
    "accepted_tokens",
    "accepted_ranks",
    "accepted_length",
    "bonus_token",
    "bonus_kind",
    "stop",
    "scored",
)

# what a rejected round holds in every outcome field
_OUTCOME_DEFAULTS = (
    ("layout", 0),
    ("validate_extra_rows", 0),
    ("selection", SEL_NONE),
    ("accepted_nodes", PAD_TOKEN),
    ("accepted_tokens", PAD_TOKEN),
    ("accepted_ranks", PAD_TOKEN),
    ("accepted_length", 0),
    ("bonus_token", PAD_TOKEN),
    ("bonus_kind", BonusCode.NONE),
    ("stop", StopCode.LEAF),
)


def replayed_by_shape(
    batch: RoundBatch, res: BatchResult
) -> Iterator[tuple[TreeShape, np.ndarray, RoundBatch, BatchResult]]:
    """(shape, [C] int64 positions in the batch, those rounds' batch, their result) per tree shape of
    the rounds ``res`` replayed."""
    for k, shape in enumerate(res.shapes):
        members = np.flatnonzero(res.ok & (res.shape_index == k))
        if members.shape[0] == len(batch):  # the common batch: every round, one shape (no copy of its arrays)
            yield shape, members, batch, res
        elif members.shape[0]:
            yield shape, members, batch.take(members), res.take(members)


def empty_result(gamma: int) -> BatchResult:
    """A result of zero rounds (a run whose rounds were all unreadable)."""
    z = np.zeros((2, 0), dtype=np.int64)
    empty = RoundBatch(
        z,
        z[0].copy(),
        (MatrixStack(np.zeros((1, 1, 0), dtype=np.int64)),),
        MatrixStack(np.zeros((1, 1, 0), dtype=np.int64)),
    )
    return _empty_result(empty, gamma)


def _empty_result(batch: RoundBatch, gamma: int) -> BatchResult:
    r = len(batch)
    return BatchResult(
        keys=np.asarray(batch.keys, dtype=np.int64),
        root_tokens=np.asarray(batch.root_tokens, dtype=np.int64),
        error=np.zeros(r, dtype=np.int8),
        error_at=np.full((3, r), -1, dtype=np.int64),
        shape_index=np.full(r, -1, dtype=np.int16),
        shapes=(),
        layout=np.zeros(r, dtype=np.int8),
        layout_stated=np.full(r, batch.layout is not None),
        validate_extra_rows=np.zeros(r, dtype=np.int32),
        selection=np.full((gamma, r), SEL_NONE, dtype=np.int8),
        accepted_nodes=np.full((gamma, r), PAD_TOKEN, dtype=np.int32),
        accepted_tokens=np.full((gamma, r), PAD_TOKEN, dtype=np.int64),
        accepted_ranks=np.full((gamma, r), PAD_TOKEN, dtype=np.int8),
        accepted_length=np.zeros(r, dtype=np.int8),
        bonus_token=np.full(r, PAD_TOKEN, dtype=np.int64),
        bonus_kind=np.zeros(r, dtype=np.int8),
        stop=np.zeros(r, dtype=np.int8),
        scored=np.full(r, any(st.logp is not None for st in (*batch.steps, batch.validate))),
        ordinals=None if batch.ordinals is None else np.asarray(batch.ordinals, dtype=np.int64),
    )
