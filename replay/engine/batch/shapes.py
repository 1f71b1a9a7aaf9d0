"""Tree shapes of the batch replay: one shape per group of rounds, and the index maps it implies.

A static tree has one shape per number of draft steps (``config_tree_shape``); a dynamic tree
gives each round its own, read from the dump (``dynamic_shapes``), and rounds are grouped by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from replay.core.config import TreeConfig
from replay.core.selection import rank_major_keys, select_top
from replay.core.tree import Tree
from replay.core.vocab import LAYOUT_PARENTS, NO_PARENT, NO_RANK, PAD_TOKEN
from replay.io.roundbatch import RoundBatch
from replay.util.rows import unique_rows

from .codes import ERR_NO_ROWS, ERR_OK


@dataclass(frozen=True)
class TreeShape:
    """One round shape: heads and widths per draft step actually run (early stop = fewer steps)."""

    heads: tuple[int, ...]
    widths: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if len(self.heads) != len(self.widths) or not self.heads or self.heads[0] != 1:
            raise ValueError(f"bad shape heads={self.heads} widths={self.widths}")
        for h, w in zip(self.heads, self.widths):
            if len(w) != h or min(w) < 1:
                raise ValueError(f"bad shape heads={self.heads} widths={self.widths}")

    @property
    def num_steps(self) -> int:
        return len(self.heads)

    @cached_property
    def level_sizes(self) -> tuple[int, ...]:
        """Nodes per level 0..S (level 0 = the root)."""
        return (1,) + tuple(sum(w) for w in self.widths)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        """Tree-order id of each level's first node."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.level_sizes)[:-1]]))

    @property
    def num_nodes(self) -> int:
        """Draft nodes, root excluded."""
        return sum(self.level_sizes) - 1

    @property
    def num_expanded(self) -> int:
        return sum(self.heads)

    def validate_rows(self, layout: str) -> int:
        """The validate rows a round of this shape has in ``layout``: one per expanded node (parents),
        or one per node with the root (all)."""
        return self.num_expanded if layout == LAYOUT_PARENTS else self.num_nodes + 1

    @cached_property
    def depths(self) -> np.ndarray:
        """[num_nodes + 1] int64 each node's depth (the root's is 0), the same in every round; read-only."""
        return _read_only(np.repeat(np.arange(self.num_steps + 1, dtype=np.int64), self.level_sizes))

    @cached_property
    def ranks(self) -> np.ndarray:
        """[num_nodes + 1] int64 each node's draft rank among its parent's candidates, NO_RANK at the
        root; read-only."""
        return _read_only(np.concatenate([[NO_RANK]] + [m.slot_rank for m in self.maps]).astype(np.int64))

    @cached_property
    def head_offsets(self) -> tuple[int, ...]:
        """Row of step i's first expanded node in a parents-layout validate."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.heads)[:-1]]))

    @cached_property
    def maps(self) -> tuple[_StepMaps, ...]:
        return tuple(_StepMaps.build(self, i) for i in range(self.num_steps))

    def to_json(self) -> dict:
        return {"topHead": list(self.heads), "topKSpec": [list(w) for w in self.widths]}


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` locked: one shape's arrays are shared by every batch and tree of that shape (tree_shape caches it)."""
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class _StepMaps:
    """Index maps of draft step i, the same for every round of a shape."""

    slot_parent: np.ndarray  # [L_{i+1}] int64: which expanded position j each new slot hangs under
    slot_rank: np.ndarray  # [L_{i+1}] int64: the slot's draft rank r
    child_offset: np.ndarray  # [h_i] int64: level-local index of the j-th expanded node's first child
    width: np.ndarray  # [h_i] int64
    fallback: np.ndarray  # [h_i] int64 level-local nodes chosen by the rank-major fallback

    @classmethod
    def build(cls, shape: TreeShape, i: int) -> _StepMaps:
        w = np.asarray(shape.widths[i], dtype=np.int64)
        rs, js = _rank_and_parent(w)
        offs = np.concatenate([[0], np.cumsum(w)[:-1]]).astype(np.int64)
        if i == 0:
            fallback = np.zeros(1, dtype=np.int64)
        else:
            # The same for every round of the shape: the scalar rule, once per shape.
            ranks, parent_pos = _rank_and_parent(shape.widths[i - 1])
            fallback = np.asarray(select_top(rank_major_keys(ranks, parent_pos), shape.heads[i]))
        return cls(js, rs, offs, w, fallback.astype(np.int64))


def _rank_and_parent(widths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """([L] draft rank, [L] expanded position j) of the L slots that widths create."""
    w = np.asarray(widths, dtype=np.int64)
    js = np.repeat(np.arange(w.shape[0]), w)
    offs = np.concatenate([[0], np.cumsum(w)[:-1]])
    return np.arange(js.shape[0]) - offs[js], js


def node_parents(shape: TreeShape, chosen: Sequence[np.ndarray]) -> np.ndarray:
    """[num_nodes + 1, R] int64 each node's parent in tree order (NO_PARENT at the root), every round.

    chosen: per draft step i, [h_i, R] int64 the level-local nodes expanded in slots 0..h_i - 1;
    level i + 1 hangs under them slot by slot, each slot's children in rank order.
    """
    r = chosen[0].shape[1] if len(chosen) else 0
    parents = np.full((shape.num_nodes + 1, r), NO_PARENT, dtype=np.int64)
    for i, m in enumerate(shape.maps):
        lo = shape.starts[i + 1]
        parents[lo : lo + m.slot_parent.shape[0]] = shape.starts[i] + chosen[i][m.slot_parent]
    return parents


def round_tree(shape: TreeShape, chosen: Sequence[np.ndarray], tokens: np.ndarray | None = None) -> Tree:
    """One round of ``shape`` as replay.core.tree's one-round Tree, the form that naming and drawing
    read (path log-probs unknown: NaN, 0 at the root).

    chosen: per draft step i, [h_i] int64 the level-local nodes the round expanded, in slot order;
    tokens: [num_nodes + 1] int64, None for a shape without a round's tokens (PAD_TOKEN).
    """
    n1 = shape.num_nodes + 1
    parents = node_parents(shape, [np.asarray(c, dtype=np.int64)[:, None] for c in chosen])[:, 0]
    logprobs = np.full(n1, np.nan)
    logprobs[0] = 0.0
    return Tree(
        np.full(n1, PAD_TOKEN, dtype=np.int64) if tokens is None else tokens,
        parents,
        shape.depths,
        shape.ranks,
        logprobs,
        tuple(shape.starts[i] + np.asarray(c, dtype=np.int64) for i, c in enumerate(chosen)),
    )


RankPath = tuple[int, ...]  # a node by the draft ranks from the root: () is the root, (0, 2) the first child's third


@dataclass(frozen=True, eq=False)
class RankPaths:
    """Every node's RankPath for R rounds of one shape, each distinct path once."""

    paths: list[RankPath]  # the distinct rank paths, level by level, ranks in order within a level
    index: np.ndarray  # [num_nodes + 1, R] int64 each node's rank path, an index into ``paths``


def rank_paths(shape: TreeShape, chosen: Sequence[np.ndarray]) -> RankPaths:
    """The rank paths of R rounds of ``shape`` from their selection (chosen as node_parents reads it).

    A level's nodes are numbered by their distinct rank paths, in code order; a child's path is its
    parent's plus its own rank, so each level costs one bincount over codes, whatever the number of rounds.
    """
    c = chosen[0].shape[1]
    paths: list[RankPath] = [()]
    level_paths: list[RankPath] = [()]
    path_id = np.zeros((1, c), dtype=np.int64)  # index into level_paths
    index = [path_id]  # per level, index into paths
    for i, m in enumerate(shape.maps):
        parent_id = np.take_along_axis(path_id, chosen[i][m.slot_parent], axis=0)  # [L, C]
        base = int(m.slot_rank.max()) + 1
        code = parent_id * base + m.slot_rank[:, None]  # [L, C] in [0, paths of the level above × base)
        uniq = np.flatnonzero(np.bincount(code.ravel(), minlength=len(level_paths) * base))
        number = np.zeros(len(level_paths) * base, dtype=np.int64)
        number[uniq] = np.arange(uniq.shape[0])
        level_paths = [level_paths[int(u) // base] + (int(u) % base,) for u in uniq]
        path_id = number[code]
        index.append(path_id + len(paths))
        paths += level_paths
    return RankPaths(paths, np.concatenate(index, axis=0))


@lru_cache(maxsize=4096)
def tree_shape(heads: tuple[int, ...], widths: tuple[tuple[int, ...], ...]) -> TreeShape:
    """One TreeShape per (heads, widths), so its index maps are built once per run, not once per
    batch (they were a quarter of the fixed cost of a batch, measured)."""
    return TreeShape(heads, widths)


def config_tree_shape(cfg: TreeConfig, steps: int) -> TreeShape:
    """The TreeShape of a static config's first ``steps`` draft steps (heads and widths only, no nodes)."""
    return tree_shape(tuple(cfg.top_head[:steps]), tuple(tuple(w) for w in cfg.top_k_spec[:steps]))


def dynamic_shapes(batch: RoundBatch, cfg: TreeConfig) -> tuple[np.ndarray, list[TreeShape], np.ndarray]:
    """Each round's own shape when the tree is dynamic.

    Returns (shape index [R] int64; shapes; error [R] int8). A round with a draft step without
    valid rows (ERR_NO_ROWS) has the shape of the steps before it, the ones checked first.
    """
    r = len(batch)
    level = np.ones(r, dtype=np.int64)
    err = np.zeros(r, dtype=np.int8)
    parts = []
    for i, st in enumerate(batch.steps):
        pad = np.moveaxis(np.asarray(st.ids), -1, 0) == PAD_TOKEN  # [R, rows, cols]
        row_pad = pad.all(axis=2)
        valid_rows = np.where(row_pad.any(axis=1), row_pad.argmax(axis=1), st.rows)
        if st.parents is not None:
            in_valid = np.arange(st.rows)[None, :] < valid_rows[:, None]
            heads = ((np.asarray(st.parents)[: st.rows].T >= 0) & in_valid).sum(axis=1)
        else:
            heads = valid_rows
        heads = np.ones(r, dtype=np.int64) if i == 0 else np.minimum(heads, level)
        if i:
            err[(err == ERR_OK) & (heads == 0)] = ERR_NO_ROWS
        cfg_w = list(cfg.top_k_spec[i])
        want = np.asarray([cfg_w[j] if j < len(cfg_w) else cfg_w[-1] for j in range(st.rows)], dtype=np.int64)
        first_pad = np.where(pad.any(axis=2), pad.argmax(axis=2), st.cols)  # [R, rows]
        widths = np.maximum(1, np.minimum(want[None, :], first_pad))
        widths = np.where(np.arange(st.rows)[None, :] < heads[:, None], widths, 0)
        level = widths.sum(axis=1)
        parts += [heads[:, None], widths]
    code = np.concatenate(parts, axis=1)
    uniq, inverse = unique_rows(code)
    shapes, index_of = [], np.full(uniq.shape[0], -1, dtype=np.int64)
    for u, row in enumerate(uniq):  # one iteration per distinct shape, not per round
        heads, widths, pos = [], [], 0
        for st in batch.steps:
            h = int(row[pos])
            if not h:  # no valid row here, so none in the steps after it either (their level is empty)
                break
            heads.append(h)
            widths.append(tuple(int(x) for x in row[pos + 1 : pos + 1 + h]))
            pos += 1 + st.rows
        index_of[u] = len(shapes)
        shapes.append(tree_shape(tuple(heads), tuple(widths)))  # step 0 always has its one row
    return index_of[inverse], shapes, err
