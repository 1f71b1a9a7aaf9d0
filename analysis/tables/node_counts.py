"""The node metrics' counts straight from the per-node arrays of a batch
(analysis.tables.batch._Nodes), without a node table.

How every run load_run reads counts its node metrics, block by block: a block of a packed run
holds ~200,000 node rows, and grouping them as a pandas frame cost three quarters of ``stats``.
Here each count is a numpy bincount over integer codes of the ``[n, C]`` arrays of one tree shape,
summed over the block's shapes into one small table per metric, which combine_node_counts
finishes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from replay.core.config import TreeConfig
from replay.core.vocab import NO_RANK
from replay.engine.batch import BatchResult, TreeShape, config_tree_shape
from replay.engine.batch.frames import NullableInts, frame_of

from .build import IN_NO_ROW, TARGET_IN
from .path_metrics import OUTCOMES

_NO_ROW = TARGET_IN.index(IN_NO_ROW)
_IN_NAMES = np.asarray(TARGET_IN, dtype=object)
_OUTCOME_CODES = {name: TARGET_IN.index(name) for name in OUTCOMES}


@dataclass(eq=False)
class NodeCounts:
    """The counts of some rounds of one run, added shape by shape (``add``), then as tables (``tables``)."""

    run: str
    canon: list[tuple[int, int]]  # metrics.shape_signature of the config's static shape
    rank_of_hit: Counter = field(default_factory=Counter)  # (depth, target_in code, target_rank) -> count
    hit_outcome: Counter = field(default_factory=Counter)  # (depth, target_in code) -> attempts
    parent_slot: Counter = field(default_factory=Counter)  # (depth, expanded slot, level rank) -> rounds
    present: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per static slot
    hits: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    other_shape: int = 0
    named: dict = field(default_factory=dict)  # rank path -> [rounds present, on path]

    def __post_init__(self) -> None:
        self.present = np.zeros(len(self.canon) + 1, dtype=np.int64)
        self.hits = np.zeros(len(self.canon) + 1, dtype=np.int64)

    def add(self, f, shape: TreeShape, res: BatchResult) -> None:
        """Count the rounds of ``res`` (all of one shape, all replayed) from their facts ``f``."""
        node, col = np.nonzero(f.on_path)  # the path's nodes (a few per round), each (node, round)
        d, slot = shape.depths[node], f.expanded_slot[node, col]
        path = slot >= 0  # the path's expanded nodes: they verify their children at depth + 1
        tin, rank = f.target_in[node[path], col[path]], f.target_rank[node[path], col[path]]
        _count(self.hit_outcome, d[path] + 1, tin)
        row = tin != _NO_ROW
        _count(self.rank_of_hit, d[path][row] + 1, tin[row], rank[row])
        steps = np.asarray(res.num_steps, dtype=np.int64)[col]
        on = (d >= 1) & (d < steps)  # a draft step ran at the path's node's depth
        _count(self.parent_slot, d[on], slot[on], f.level_rank[node[on], col[on]])
        self._add_slots(f, shape)
        paths = f.ranked
        present = np.bincount(paths.index.ravel(), minlength=len(paths.paths))
        hit = np.bincount(paths.index[node, col], minlength=len(paths.paths))
        for p, k, h in zip(paths.paths, present.tolist(), hit.tolist()):
            if k:
                got = self.named.setdefault(p, [0, 0])
                got[0] += k
                got[1] += h

    def _add_slots(self, f, shape: TreeShape) -> None:
        """The slot_hits table's counts: rounds whose (parent's slot, rank) per node is a prefix of the static shape's."""
        n, c = f.parent.shape
        if n > len(self.canon) + 1:
            self.other_shape += c
            return
        canon_slot = np.asarray([p for p, _ in self.canon[: n - 1]], dtype=np.int64)
        canon_rank = np.asarray([r for _, r in self.canon[: n - 1]], dtype=np.int64)
        parent_slot = np.take_along_axis(f.expanded_slot, f.parent[1:], axis=0)  # [n - 1, C]
        same = (parent_slot == canon_slot[:, None]).all(axis=0) & bool((shape.ranks[1:] == canon_rank).all())
        self.other_shape += int(c - same.sum())
        self.present[:n] += int(same.sum())
        self.hits[:n] += (f.on_path if same.all() else f.on_path[:, same]).sum(axis=1)

    def tables(self) -> dict:
        """The counts, one small table per node metric (combine_node_counts finishes them)."""
        return {
            "rank_of_hit": _frame(
                self.run,
                self.rank_of_hit,
                ["depth", "target_in", "target_rank"],
                "count",
                lambda d, t, r: (d, _IN_NAMES[t], NullableInts(r, r < 0)),
            ),
            "hit_outcome": self._outcomes(),
            "parent_slot": _frame(
                self.run,
                self.parent_slot,
                ["depth", "expanded", "expanded_slot", "level_rank"],
                "rounds",
                lambda d, s, k: (d, s >= 0, NullableInts(s, s < 0), NullableInts(k, k < 0)),
            ),
            "slot_hits": {self.run: (self.present, self.hits, self.other_shape)},
            "node_hits": self._named(),
        }

    def _outcomes(self) -> list[dict]:
        rows = []
        for depth in sorted({d for d, _ in self.hit_outcome}):
            by = {t: k for (d, t), k in self.hit_outcome.items() if d == depth}
            attempts = sum(by.values())
            row = {
                "run": self.run,
                "depth": depth,
                "attempts": attempts,
                "with_target_row": attempts - by.get(_NO_ROW, 0),
            }
            rows.append(row | {name: by.get(code, 0) for name, code in _OUTCOME_CODES.items()})
        return rows

    def _named(self) -> pd.DataFrame:
        from replay.core.tree import node_name

        paths = list(self.named)
        counts = np.asarray(list(self.named.values()), dtype=np.int64).reshape(-1, 2)
        return pd.DataFrame(
            {
                "run": np.full(len(paths), self.run, dtype=object),
                "name": np.asarray([node_name(p) for p in paths], dtype=object),
                "depth": np.asarray([len(p) for p in paths], dtype=np.int64),
                "rank": np.asarray([p[-1] if p else NO_RANK for p in paths], dtype=np.int64),
                "rounds_present": counts[:, 0],
                "on_path": counts[:, 1],
                "_path": pd.Series(paths, dtype=object),
            }
        )


def no_named_counts() -> pd.DataFrame:
    """The node_hits counts of no rounds (combine_node_counts' table when no block named a node): the
    columns of NodeCounts' ``node_hits`` without rows (an empty node_hits table's columns are float64)."""
    return pd.DataFrame({c: [] for c in ("run", "name", "depth", "rank", "rounds_present", "on_path", "_path")})


def block_counts(parts: list[tuple], cfg: TreeConfig, run: str) -> dict:
    """The node metrics' counts of a block's rounds, from (facts, shape, result) per shape of the block."""
    from .slot_hits import shape_signature

    counts = NodeCounts(run, shape_signature(config_tree_shape(cfg, cfg.gamma)))
    for facts, shape, res in parts:
        counts.add(facts, shape, res)
    return counts.tables()


def _count(counter: Counter, *columns: np.ndarray) -> None:
    """Add the rows of ``columns`` (equal-length int arrays of small values) to ``counter``, keyed by
    their tuple: one bincount (or np.unique, for a large code space) over a mixed-radix code of the row."""
    if not columns[0].shape[0]:
        return
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    lows = [int(c.min()) for c in cols]
    bases = [int(c.max()) - lo + 1 for c, lo in zip(cols, lows)]
    if float(np.prod(bases, dtype=np.float64)) >= 2.0**62:  # the code would overflow int64: rows as they are
        rows, n = np.unique(np.stack(cols), axis=1, return_counts=True)
        for key, k in zip(rows.T.tolist(), n.tolist()):
            counter[tuple(key)] += k
        return
    code = np.zeros(cols[0].shape[0], dtype=np.int64)
    for c, lo, base in zip(cols, lows, bases):
        code = code * base + (c - lo)
    size = int(np.prod(bases, dtype=np.float64))
    if size <= 1 << 20:  # the usual case: a small code space, counted without sorting
        n = np.bincount(code, minlength=size)
        uniq = np.flatnonzero(n)
        n = n[uniq]
    else:
        uniq, n = np.unique(code, return_counts=True)
    for u, k in zip(uniq.tolist(), n.tolist()):
        key = []
        for lo, base in zip(reversed(lows), reversed(bases)):
            u, digit = divmod(u, base)
            key.append(digit + lo)
        counter[tuple(reversed(key))] += k


def _frame(run: str, counter: Counter, keys: list[str], total: str, cells) -> pd.DataFrame | None:
    """One row per key of ``counter``: ``cells(*key)`` gives its key columns' values, then its count."""
    if not counter:
        return None
    rows = sorted(counter)
    cols = list(zip(*rows))
    made = cells(*(np.asarray(c, dtype=np.int64) for c in cols))
    columns = {"run": np.full(len(rows), run, dtype=object)}
    columns.update(zip(keys, made))
    columns[total] = np.asarray([counter[r] for r in rows], dtype=np.int64)
    return frame_of(columns, ["run", *keys, total])
