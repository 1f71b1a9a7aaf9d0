"""Many rounds as column-major arrays: what readers yield and kernels take.

Rounds whose matrices differ only in size share one RoundBatch (``group_key``): each matrix is
padded to the group's widest rows and columns (``MatrixStack.padded_to``), and each round's own
sizes are kept (``MatrixStack.rows_of``...), so the kernel and ``MatrixStack.matrix`` see what the
round's files hold. A dump of varied shapes then forms a few large batches instead of one
per shape, each paying the batch's fixed cost once.

A RoundBatch is the reading side's unit (replay.io.fastread and replay.io.packed.pack build them, replay.engine.batch
replays them); it lives below both so that reading never imports the replay kernels
(docs/architecture.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import numpy as np

from replay.core.vocab import LAYOUTS, PAD_TOKEN
from replay.util.bounded import read_regular_or_none

from .dumpnames import Key, scores_companion
from .formats.matrix_io import DumpMatrix
from .rounds import Round
from .step0 import DEFAULT_STEP0_OFFSET

_INT32 = np.iinfo(np.int32)
FilePaths = tuple[str, "str | None", "str | None"]  # a matrix's data file, scores and parents companions
# A round as it crosses to a reader process: strings pickle ~10x faster than the Paths of a RoundFiles.
RoundPaths = tuple[int, Key, tuple[FilePaths, ...], int]  # (ordinal, key, draft steps then validate, root token)
BULK_FILE_BYTES = 1 << 20  # larger files go to the file-by-file reader (its limits: replay.util.bounded)
_Info = TypeVar("_Info")


def narrow_ids(ids: np.ndarray) -> np.dtype:
    """int32 when every id fits (all real vocabularies do): half the bytes to store and to scan."""
    if ids.size == 0 or (ids.min() >= _INT32.min and ids.max() <= _INT32.max):
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def narrow_logp(logp: np.ndarray) -> np.dtype:
    """float32 when it holds every value exactly (float32 scores do), else float64: lossless."""
    with np.errstate(over="ignore", invalid="ignore"):
        back = logp.astype(np.float32).astype(np.float64)
    return np.dtype(np.float32) if np.array_equal(back, logp, equal_nan=True) else np.dtype(np.float64)


def _check_array(arr: np.ndarray, name: str, ndim: int, kind: str, rounds: int | None, axis: int = -1) -> None:
    if not isinstance(arr, np.ndarray) or arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got {getattr(arr, 'shape', type(arr).__name__)}")
    if arr.dtype.kind not in kind:
        raise ValueError(f"{name}: expected dtype kind {kind!r}, got {arr.dtype}")
    if rounds is not None and arr.shape[axis] != rounds:
        raise ValueError(f"{name}: expected {rounds} rounds in axis {axis}, got {arr.shape[axis]}")


@dataclass(frozen=True, eq=False)
class MatrixStack:
    """One dump matrix (a draft step or the validate) of R rounds, padded to common sizes.

    Column-major: the round axis is last, so each cell of the matrix is one contiguous vector over
    rounds. The kernel reads whole cells (a copy at memory speed) instead of gathering them from
    round-major rows.

    rows_of / cols_of / prows_of: each round's own matrix sizes where they differ from the stack's
    (None: every round fills the stack); cells beyond them are padding (``padded_to``).

    node_logp: a validate file's ``node_logprobs`` (docs/dump-format.md), row by row like ids, one
    column per recorded temperature; every round of a stack has the same number of columns
    (signature_of counts them), so a batch at a recorded T reads one column for all its rounds.
    """

    ids: np.ndarray  # [rows, cols, R] int32/int64 token ids, PAD_TOKEN padding
    logp: np.ndarray | None = None  # [rows, cols, R] float32/float64 natural-log probabilities
    parents: np.ndarray | None = None  # [prows, R] int32/int64 tree-order node per row, prows >= rows
    rows_of: np.ndarray | None = None  # [R] int64 each round's own rows
    cols_of: np.ndarray | None = None  # [R] int64 each round's own columns
    prows_of: np.ndarray | None = None  # [R] int64 each round's own parents entries
    node_logp: np.ndarray | None = None  # [rows, T, R] float32/float64 each row's node under its parent

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
        if self.node_logp is not None:
            _check_array(self.node_logp, "node_logp", 3, "f", r)
            if self.node_logp.shape[0] != self.ids.shape[0]:
                raise ValueError(f"node_logp: {self.node_logp.shape[0]} rows for {self.ids.shape[0]} rows of ids")
        for name in ("rows_of", "cols_of", "prows_of"):
            if getattr(self, name) is not None:
                _check_array(getattr(self, name), name, 1, "iu", r, 0)

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def cols(self) -> int:
        return int(self.ids.shape[1])

    @property
    def rounds(self) -> int:
        return int(self.ids.shape[2])

    @property
    def padded(self) -> bool:
        """Some round's matrix is smaller than the stack."""
        return self.rows_of is not None or self.cols_of is not None or self.prows_of is not None

    def own_rows(self) -> np.ndarray:
        """[R] int64 each round's own rows."""
        return np.full(self.rounds, self.rows, dtype=np.int64) if self.rows_of is None else self.rows_of

    def own_cols(self) -> np.ndarray:
        """[R] int64 each round's own columns."""
        return np.full(self.rounds, self.cols, dtype=np.int64) if self.cols_of is None else self.cols_of

    def own_prows(self) -> np.ndarray | None:
        """[R] int64 each round's own parents entries (None without parents)."""
        if self.parents is None:
            return None
        full = np.full(self.rounds, self.parents.shape[0], dtype=np.int64)
        return full if self.prows_of is None else self.prows_of

    def take(self, index: np.ndarray | slice) -> MatrixStack:
        """Rounds ``index`` (a slice gives views, an index array copies)."""

        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[..., index]

        return MatrixStack(
            self.ids[..., index],
            pick(self.logp),
            pick(self.parents),
            pick(self.rows_of),
            pick(self.cols_of),
            pick(self.prows_of),
            pick(self.node_logp),
        )

    def matrix(self, i: int, path: str) -> DumpMatrix:
        """Round ``i`` as the DumpMatrix that read_matrix would have returned."""
        rows = self.rows if self.rows_of is None else int(self.rows_of[i])
        cols = self.cols if self.cols_of is None else int(self.cols_of[i])
        prows = None if self.parents is None else self.parents.shape[0]
        if self.prows_of is not None:
            prows = int(self.prows_of[i])
        return DumpMatrix(
            path,
            np.array(self.ids[:rows, :cols, i], dtype=np.int64),
            None if self.logp is None else np.array(self.logp[:rows, :cols, i], dtype=np.float64),
            None if self.parents is None else np.array(self.parents[:prows, i], dtype=np.int64),
            None if self.node_logp is None else np.array(self.node_logp[:rows, :, i], dtype=np.float64),
        )

    @classmethod
    def stack(cls, mats: Sequence[DumpMatrix]) -> MatrixStack:
        """Column-major stack of matrices (of any sizes: padded to the widest)."""
        return cls.concat(
            [
                cls(
                    m.ids[:, :, None],
                    None if m.logp is None else m.logp[:, :, None],
                    None if m.parents is None else m.parents[:, None],
                    node_logp=None if m.node_logp is None else m.node_logp[:, :, None],
                )
                for m in mats
            ]
        )

    @classmethod
    def of_rounds(
        cls,
        ids: np.ndarray,
        logp: np.ndarray | None,
        rows_of: np.ndarray,
        cols_of: np.ndarray,
        keep: np.ndarray | None = None,
        parents: np.ndarray | None = None,  # [rows, R] int64 one node per row, PAD_TOKEN padding
    ) -> MatrixStack:
        """The bulk readers' stack: rounds ``keep`` (every round when None) of [rows, cols, R] ids and
        scores (and [rows, R] parents, one per row as read_matrix requires) padded to the widest round,
        with [R] each round's own rows and columns, cut to the widest kept round and narrowed
        losslessly; own sizes are kept only where they differ from the stack's."""
        take: slice | np.ndarray = slice(None)
        if keep is not None and keep.size != ids.shape[2]:
            rows_of, cols_of, take = rows_of[keep], cols_of[keep], keep
        rows, cols = int(rows_of.max()), int(cols_of.max())
        own_rows = None if (rows_of == rows).all() else rows_of.astype(np.int64, copy=False)
        return cls(
            ids[:rows, :cols, take],
            None if logp is None else logp[:rows, :cols, take],
            None if parents is None else parents[:rows, take],
            rows_of=own_rows,
            cols_of=None if (cols_of == cols).all() else cols_of.astype(np.int64, copy=False),
            prows_of=None if parents is None else own_rows,
        ).narrowed()

    def narrowed(self) -> MatrixStack:
        """The stack with ids and parents in the narrowest integer, scores and node log-probs in the
        narrowest float that holds every value (narrow_ids / narrow_logp), C-contiguous: every reader's
        one lossless narrowing."""

        def ints(a: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(a.astype(narrow_ids(a), copy=False))

        def floats(a: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(a.astype(narrow_logp(a), copy=False))

        return MatrixStack(
            ints(self.ids),
            None if self.logp is None else floats(self.logp),
            None if self.parents is None else ints(self.parents),
            self.rows_of,
            self.cols_of,
            self.prows_of,
            None if self.node_logp is None else floats(self.node_logp),
        )

    def padded_to(self, rows: int, cols: int, prows: int | None) -> MatrixStack:
        """The stack grown to ``rows`` x ``cols`` (parents to ``prows`` entries) with the padding values
        (PAD_TOKEN ids and parents, NaN scores and node log-probs); each round keeps its own sizes. The
        one padding rule: concat (the readers' batches) and the packed writer (a group's block shape)
        both pad with it."""
        have = None if self.parents is None else int(self.parents.shape[0])
        if rows < self.rows or cols < self.cols or (have is None) != (prows is None) or (prows or 0) < (have or 0):
            raise ValueError(f"MatrixStack.padded_to: ({rows}, {cols}, {prows}) does not hold the stack's sizes")
        if rows == self.rows and cols == self.cols and prows == have:
            return self

        def grow(a: np.ndarray, shape: tuple[int, ...], fill: float) -> np.ndarray:
            if a.shape[:-1] == shape:
                return a
            out = np.full((*shape, a.shape[-1]), fill, dtype=a.dtype)
            out[tuple(slice(0, n) for n in a.shape[:-1])] = a
            return out

        def own(sizes: np.ndarray | None, n: int, grown: int | None) -> np.ndarray | None:
            """Each round's own size: n for a round that filled the stack, now smaller than grown."""
            return sizes if sizes is not None or n == grown else np.full(self.rounds, n, dtype=np.int64)

        return MatrixStack(
            grow(self.ids, (rows, cols), PAD_TOKEN),
            None if self.logp is None else grow(self.logp, (rows, cols), np.nan),
            None if self.parents is None or prows is None else grow(self.parents, (prows,), PAD_TOKEN),
            own(self.rows_of, self.rows, rows),
            own(self.cols_of, self.cols, cols),
            None if have is None else own(self.prows_of, have, prows),
            None if self.node_logp is None else grow(self.node_logp, (rows, self.node_logp.shape[1]), np.nan),
        )

    @classmethod
    def concat(cls, stacks: Sequence[MatrixStack]) -> MatrixStack:
        """Rounds of several stacks (all with scores or all without, parents and node log-probs likewise,
        the latter with equal columns), padded to the widest."""
        first = stacks[0]
        if len(stacks) == 1:
            return first
        if any(
            (s.logp is None) != (first.logp is None)
            or (s.parents is None) != (first.parents is None)
            or _node_columns(s) != _node_columns(first)
            for s in stacks
        ):
            raise ValueError(
                "MatrixStack.concat: every stack must have scores (and parents) or none, node log-probs with equal columns or none"
            )
        rows = max(s.rows for s in stacks)
        cols = max(s.cols for s in stacks)
        prows = None if first.parents is None else max(s.parents.shape[0] for s in stacks if s.parents is not None)
        grown = [s.padded_to(rows, cols, prows) for s in stacks]

        def cat(arrays: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(arrays, axis=-1)

        def sizes(name: str, own: Callable[[MatrixStack], np.ndarray | None], n: int | None) -> np.ndarray | None:
            if n is None or all(getattr(g, name) is None for g in grown):
                return None  # every round fills the stack
            out = cat([a for g in grown if (a := own(g)) is not None])
            return None if (out == n).all() else out

        return cls(
            cat([g.ids for g in grown]),
            None if first.logp is None else cat([g.logp for g in grown if g.logp is not None]),
            None if prows is None else cat([g.parents for g in grown if g.parents is not None]),
            sizes("rows_of", MatrixStack.own_rows, rows),
            sizes("cols_of", MatrixStack.own_cols, cols),
            sizes("prows_of", MatrixStack.own_prows, prows),
            None if first.node_logp is None else cat([g.node_logp for g in grown if g.node_logp is not None]),
        )


def _node_columns(st: MatrixStack) -> int:
    """A stack's node_logprobs columns (0: none): rounds of one batch have the same number."""
    return 0 if st.node_logp is None else int(st.node_logp.shape[1])


@dataclass(frozen=True)
class SourceNames:
    """Rebuilds each matrix's original file path, so messages name the files a directory replay names."""

    directory: str
    exts: tuple[str, ...]  # per matrix, draft steps then validate: ".npz", "" (text), ...
    step0_offset: tuple[int, int] = DEFAULT_STEP0_OFFSET
    # ordinal → the round's real paths, for the rare names that do not round-trip ("007")
    overrides: Mapping[int, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)

    @cached_property
    def _prefix(self) -> str:
        """os.path.join(directory, name) is this + name for any name not starting with a separator; with
        each ``%`` doubled, as it starts the %-patterns below."""
        return _escaped(os.path.join(self.directory, ""))

    @cached_property
    def _drafts(self) -> tuple[str, ...]:
        """Draft step ``s``'s path with the key's two numbers left as ``%d`` fields: the naming rule."""
        return tuple(f"{self._prefix}draft_step_{s}_%d_%d{_escaped(ext)}" for s, ext in enumerate(self.exts))

    @cached_property
    def _validate(self) -> str:
        return f"{self._prefix}validate_%d_%d{_escaped(self.exts[-1])}"

    def step_path(self, key: tuple[int, int], step: int) -> str:
        a, b = key
        if step == 0:
            a, b = a - self.step0_offset[0], b - self.step0_offset[1]
        return self._drafts[step] % (a, b)

    def validate_path(self, key: tuple[int, int]) -> str:
        return self._validate % (key[0], key[1])

    def scores_path(self, key: tuple[int, int], ordinal: int | None = None, step: int | None = None) -> str:
        """The file a round's validate scores (step None) or draft step ``step``'s were read from, for
        messages, as the round-by-round reader names it: the ``.scores`` companion beside the data file
        where there is one (text, .npy, raw), else the data file itself (an .npz or .pt holds them)."""
        data = self.paths(key, 0, ordinal)[-1] if step is None else self.paths(key, step + 1, ordinal)[step]
        return scores_companion(data) or data

    def paths(self, key: tuple[int, int], steps: int, ordinal: int | None = None) -> tuple[str, ...]:
        """Every matrix's path, draft steps then validate."""
        if ordinal is not None and ordinal in self.overrides:
            return tuple(self.overrides[ordinal])
        return tuple(self.step_path(key, s) for s in range(steps)) + (self.validate_path(key),)

    def odd_rounds(self, items: Sequence[RoundPaths]) -> dict[int, tuple[str, ...]]:
        """ordinal → data paths of the rounds whose paths paths() does not rebuild ("007", "./"): a reader
        keeps these verbatim (the overrides). items: each with a file per matrix.

        All rounds at once: one string formatted per round and one comparison for all of them; a
        round at a time only where some name does not round-trip.
        """
        steps = len(self.exts) - 1
        joint = "\0".join((*self._drafts[:steps], self._validate))  # no path holds a NUL
        da, db = self.step0_offset
        built = "\0".join(
            [joint % (((a - da, b - db) + (a, b) * steps) if steps else (a, b)) for _, (a, b), _, _ in items]
        )
        if built == "\0".join([fs[0] for _, _, files, _ in items for fs in files]):
            return {}
        odd = {}
        for ordinal, key, files, _ in items:
            paths = tuple(fs[0] for fs in files)
            if paths != self.paths(key, len(files) - 1):
                odd[ordinal] = paths
        return odd

    def scores_paths(self, key: tuple[int, int], steps: int, ordinal: int | None = None) -> tuple[str, ...]:
        """Every matrix's scores file as a rebuilt DumpMatrix names it: "" (its reader names its own)."""
        return ("",) * (steps + 1)


def _escaped(text: str) -> str:
    """``text`` as it reads back from a %-format."""
    return text.replace("%", "%%")


@dataclass(frozen=True, eq=False)
class ArrayNames:
    """Names each matrix of one block of a run packed from memory (it has no original files) by its
    packed array and the round's place in it, e.g. ``RUN/g000/v_logp.npy[0, :, :, 5]``: a message
    about a row names what a user can open with numpy. SourceNames' interface, by ordinal."""

    ids: tuple[str, ...]  # per matrix (draft steps, then validate): its ids array's file
    logp: tuple[str, ...]  # per matrix: its logp array's file, "" when it has none
    block: int
    ordinals: np.ndarray  # [B] int64 the block's rounds' ordinals, in block order

    overrides: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # none: SourceNames' interface

    def _where(self, ordinal: int | None) -> str:
        hits = np.flatnonzero(self.ordinals == ordinal) if ordinal is not None else np.zeros(0, np.int64)
        if not hits.shape[0]:
            raise ValueError(f"no round with ordinal {ordinal} in block {self.block}")
        return f"[{self.block}, :, :, {int(hits[0])}]"

    def paths(self, key: tuple[int, int], steps: int, ordinal: int | None = None) -> tuple[str, ...]:
        where = self._where(ordinal)
        return tuple(f"{f}{where}" for f in self.ids[:steps]) + (f"{self.ids[-1]}{where}",)

    def scores_paths(self, key: tuple[int, int], steps: int, ordinal: int | None = None) -> tuple[str, ...]:
        where = self._where(ordinal)
        return tuple(f"{f}{where}" if f else "" for f in (*self.logp[:steps], self.logp[-1]))

    def scores_path(self, key: tuple[int, int], ordinal: int | None = None, step: int | None = None) -> str:
        at, steps = (-1, 0) if step is None else (step, step + 1)
        return self.scores_paths(key, steps, ordinal)[at] or self.paths(key, steps, ordinal)[at]


@dataclass(frozen=True, eq=False)
class RoundBatch:
    """R rounds of one ``group_key``: equal draft steps, optional arrays and layout; matrix sizes may differ."""

    keys: np.ndarray  # [2, R] int64 (a, b) of each round's validate file
    root_tokens: np.ndarray  # [R] int64, PAD_TOKEN when unknown
    steps: tuple[MatrixStack, ...]  # draft_step_0 .. draft_step_{S-1}
    validate: MatrixStack
    layout: str | None = None  # "parents"/"all" when stated, None to detect per round
    names: SourceNames | ArrayNames | None = None
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
        if self.layout not in (None, *LAYOUTS):
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

    def paths_of(self, i: int) -> tuple[str, ...]:
        """Round ``i``'s matrices as messages name them, draft steps then validate: their files (or
        packed arrays), or the bare matrix names for rounds not read from files."""
        if self.names is None:
            return tuple(f"draft_step_{s}" for s in range(self.num_steps)) + ("validate",)
        ordinal = None if self.ordinals is None else int(self.ordinals[i])
        return self.names.paths(self.key(i), self.num_steps, ordinal)


def batch_of_items(
    items: Sequence[RoundPaths],
    stacks: Sequence[MatrixStack],
    names: SourceNames,
    layout: str | None,
    odd: Mapping[int, tuple[str, ...]] | None = None,
) -> RoundBatch:
    """Every reader's RoundBatch of rounds ``items`` (in batch order), whose matrices are ``stacks``
    (draft steps, then validate): keys, root tokens and ordinals from the items. Rounds whose file
    names ``names`` does not rebuild keep theirs verbatim: SourceNames.odd_rounds, or ``odd`` where
    the reader found them itself."""
    odd = names.odd_rounds(items) if odd is None else odd
    if odd:
        names = SourceNames(names.directory, names.exts, names.step0_offset, odd)
    return RoundBatch(
        np.asarray([it[1] for it in items], dtype=np.int64).reshape(-1, 2).T.copy(),
        np.fromiter((it[3] for it in items), dtype=np.int64, count=len(items)),
        tuple(stacks[:-1]),
        stacks[-1],
        layout,
        names,
        np.fromiter((it[0] for it in items), dtype=np.int64, count=len(items)),
    )


def round_pieces(
    items: Sequence[RoundPaths],
    infos: Iterable[_Info | None],
    file_bytes: int,
    piece_bytes: int,
    rest: list[RoundPaths],
) -> Iterator[list[tuple[RoundPaths, _Info, list[bytes]]]]:
    """A bulk reader's rounds, each with what it says of it (``infos``, one per item: None refuses
    the round) and its files' bytes (each data file, then its scores and parents companions: those of
    read_files), in pieces of about ``piece_bytes``: memory stays proportional to one piece. A round
    refused, or with a file that is not regular or exceeds ``file_bytes`` (its first such file ends
    its reading), goes to ``rest`` for the file-by-file reader."""
    piece: list[tuple[RoundPaths, _Info, list[bytes]]] = []
    held = 0
    for item, info in zip(items, infos):
        got = None if info is None else _round_bytes(item, file_bytes)
        if info is None or got is None:
            rest.append(item)
            continue
        piece.append((item, info, got))
        held += sum(map(len, got))
        if held >= piece_bytes:
            yield piece
            piece, held = [], 0
    if piece:
        yield piece


def read_files(files: tuple[FilePaths, ...]) -> list[FilePaths]:
    """A round's files (draft steps, then validate) as rounds.load_round reads them: a validate's
    parents companion is never read, so no failure of it is the round's."""
    return [*files[:-1], (files[-1][0], files[-1][1], None)]


def _round_bytes(item: RoundPaths, limit: int) -> list[bytes] | None:
    got = []
    for fs in read_files(item[2]):
        for path in fs:
            if path is None:
                continue
            read = read_regular_or_none(path, limit)
            if read is None:
                return None
            got.append(read)
    return got


# Per matrix (draft steps, then validate): whether it has scores, whether it has parents, its
# node_logprobs columns (0: none; only validate files have them).
Signature = tuple[tuple[bool, bool, int], ...]
# A Signature, the matrices' file extensions (None: rounds not read from files), the layout.
GroupKey = tuple[Signature, tuple[str, ...] | None, str | None]


def signature_of(rnd: Round) -> Signature:
    """Rounds with equal signatures stack into one RoundBatch: the draft steps and which optional
    arrays each matrix has. Matrix sizes do not count (MatrixStack pads them)."""
    return tuple(
        (m.logp is not None, m.parents is not None, 0 if m.node_logp is None else int(m.node_logp.shape[1]))
        for m in (*rnd.steps, rnd.validate)
    )


def group_key(batch: RoundBatch) -> GroupKey:
    """The signature_of a batch's rounds, with their file extensions and layout: batches of equal
    key concatenate into one (replay.io.fastread.concat_batches)."""
    sig = tuple(
        (st.logp is not None, st.parents is not None, _node_columns(st)) for st in (*batch.steps, batch.validate)
    )
    return (sig, batch.names.exts if isinstance(batch.names, SourceNames) else None, batch.layout)
