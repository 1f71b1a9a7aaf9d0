"""A draft tree as data: nodes in tree order with parent, depth, draft rank, token, path log-prob.

Tree order (DESIGN.md): node 0 is the root; then level 1 in draft-rank order; then each further
level grouped by expanded parent (in selection order) and child rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .vocab import NO_PARENT, NO_RANK, PAD_TOKEN


def _as_int_vector(values: Any, name: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: expected integers, got dtype {arr.dtype}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name}: expected {n} entries, got {arr.shape[0]}")
    return arr.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class Tree:
    tokens: np.ndarray  # [num_nodes + 1] int64; tokens[0] is the root (PAD_TOKEN when unknown)
    parents: np.ndarray  # [num_nodes + 1] int64; parents[0] == NO_PARENT, parents[u] < u
    depths: np.ndarray  # [num_nodes + 1] int64; depths[0] == 0
    ranks: np.ndarray  # [num_nodes + 1] int64; draft rank among the parent's candidates, NO_RANK for root
    logprobs: np.ndarray  # [num_nodes + 1] float64; path log-probability, NaN when unknown, 0 at root
    expanded: tuple[np.ndarray, ...]  # per draft step i: [heads_i] int64 node ids, selection order

    def __post_init__(self) -> None:
        n = self.tokens.shape[0]
        tokens = _as_int_vector(self.tokens, "tokens")
        parents = _as_int_vector(self.parents, "parents", n)
        depths = _as_int_vector(self.depths, "depths", n)
        ranks = _as_int_vector(self.ranks, "ranks", n)
        logprobs = np.asarray(self.logprobs, dtype=np.float64)
        if logprobs.shape != (n,):
            raise ValueError(f"logprobs: expected shape ({n},), got {logprobs.shape}")
        if n < 1 or parents[0] != NO_PARENT or depths[0] != 0:
            raise ValueError("node 0 must be the root (parent NO_PARENT, depth 0)")
        idx = np.arange(1, n)
        if np.any(parents[1:] < 0) or np.any(parents[1:] >= idx):
            raise ValueError("parents: every node's parent must come earlier in tree order")
        if np.any(depths[1:] != depths[parents[1:]] + 1):
            raise ValueError("depths: depth must be parent's depth + 1")
        expanded = tuple(_as_int_vector(e, f"expanded[{i}]") for i, e in enumerate(self.expanded))
        for name, value in (
            ("tokens", tokens),
            ("parents", parents),
            ("depths", depths),
            ("ranks", ranks),
            ("logprobs", logprobs),
            ("expanded", expanded),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def from_lists(
        cls,
        tokens: Sequence[int],
        parents: Sequence[int],
        ranks: Sequence[int] | None = None,
        logprobs: Sequence[float] | None = None,
    ) -> Tree:
        """Build a tree from tokens and parents in tree order (root first, parent -1).

        Ranks default to the order of a node among its siblings; ``expanded`` is derived: the
        nodes with children, per depth, in the order their children appear.
        """
        parents_arr = np.asarray(parents, dtype=np.int64)
        n = len(tokens)
        depths = np.zeros(n, dtype=np.int64)
        for u in range(1, n):
            depths[u] = depths[parents_arr[u]] + 1
        if ranks is None:
            seen: dict[int, int] = {}
            r = [NO_RANK]
            for u in range(1, n):
                p = int(parents_arr[u])
                r.append(seen.get(p, 0))
                seen[p] = r[-1] + 1
            ranks = r
        lp = np.full(n, np.nan) if logprobs is None else np.asarray(logprobs, dtype=np.float64)
        if logprobs is None:
            lp[0] = 0.0
        max_depth = int(depths.max()) if n else 0
        expanded: list[list[int]] = [[] for _ in range(max_depth)]
        for u in range(1, n):
            p = int(parents_arr[u])
            step = int(depths[p])
            if p not in expanded[step]:
                expanded[step].append(p)
        return cls(
            np.asarray(tokens, dtype=np.int64),
            parents_arr,
            depths,
            np.asarray(ranks, dtype=np.int64),
            lp,
            tuple(np.asarray(e, dtype=np.int64) for e in expanded),
        )

    @property
    def num_nodes(self) -> int:
        """Draft nodes, root excluded."""
        return int(self.tokens.shape[0]) - 1

    @property
    def num_steps(self) -> int:
        return len(self.expanded)

    @property
    def expanded_order(self) -> np.ndarray:
        """[num_expanded] int64: expanded nodes, step by step in selection order (= parents-layout rows)."""
        if not self.expanded:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(self.expanded)

    def children(self, node: int) -> np.ndarray:
        """[k] int64 children of ``node`` in rank order (tree order groups them already)."""
        return np.flatnonzero(self.parents == node)

    def path_to(self, node: int) -> list[int]:
        """Node ids from the root to ``node`` inclusive."""
        path = [node]
        while path[-1] != 0:
            path.append(int(self.parents[path[-1]]))
        return path[::-1]

    def has_children(self) -> np.ndarray:
        """[num_nodes + 1] bool."""
        out = np.zeros(self.tokens.shape[0], dtype=bool)
        out[self.parents[1:]] = True
        return out

    def level_sizes(self) -> list[int]:
        """Nodes per level 1..max depth."""
        sizes: list[int] = np.bincount(self.depths[1:], minlength=self.num_steps + 1)[1:].tolist()
        return sizes

    def shape(self) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        """(topHead, topKSpec flattened per step) actually present: what a dynamic round reports."""
        heads = tuple(len(e) for e in self.expanded)
        widths = tuple(tuple(int(np.count_nonzero(self.parents == u)) for u in e) for e in self.expanded)
        return heads, widths

    def names(self) -> list[str]:
        """The article's node names: R, A1..A6, B11, B12, ... (letter = depth, digits = 1-based ranks)."""
        out = ["R"]
        for u in range(1, self.tokens.shape[0]):
            out.append(node_name([int(self.ranks[v]) for v in self.path_to(u)[1:]]))
        return out


def node_name(ranks: Sequence[int]) -> str:
    """The article's name of the node reached by draft ranks ``ranks`` (0-based, root side first):
    a letter for the depth, then the 1-based ranks, dot-separated when one has two digits."""
    if not ranks:
        return "R"
    ones = [int(r) + 1 for r in ranks]
    sep = "." if any(r > 9 for r in ones) else ""
    return _depth_letter(len(ones)) + sep.join(str(r) for r in ones)


def _depth_letter(depth: int) -> str:
    letters = ""
    d = depth
    while d > 0:
        d, r = divmod(d - 1, 26)
        letters = chr(ord("A") + r) + letters
    return letters


def tree_layout(parents: np.ndarray, depths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Turn a tree into what one verification forward needs (the Medusa idea, as arrays).

    parents: [n] int64 in tree order, parents[0] == NO_PARENT (n counts the root)
    depths:  [n] int64
    Returns
      mask:        [n, n] bool, mask[q, k] = k is q or an ancestor of q (query row, key column)
      position:    [n] int64 offset to add to the root's position: the node's depth
      retrieve:    [num_leaves, max_depth + 1] int64 root-to-leaf node ids, PAD_TOKEN-padded
    """
    parents = np.asarray(parents)
    depths = np.asarray(depths)
    if parents.ndim != 1 or depths.shape != parents.shape:
        raise ValueError(f"parents {parents.shape} and depths {depths.shape} must be equal 1-D shapes")
    n = parents.shape[0]
    mask = np.zeros((n, n), dtype=bool)
    mask[0, 0] = True
    for u in range(1, n):  # parents come first in tree order, so their rows are complete
        mask[u] = mask[parents[u]]
        mask[u, u] = True
    is_parent = np.zeros(n, dtype=bool)
    is_parent[parents[1:]] = True
    leaves = np.flatnonzero(~is_parent)
    max_depth = int(depths.max()) if n else 0
    retrieve = np.full((leaves.shape[0], max_depth + 1), PAD_TOKEN, dtype=np.int64)
    for row, leaf in enumerate(leaves):
        path = np.flatnonzero(mask[leaf])  # ancestors in tree order = root-to-leaf order
        retrieve[row, : path.shape[0]] = path
    return mask, depths.astype(np.int64, copy=True), retrieve
