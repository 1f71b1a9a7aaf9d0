"""Exact search over static tree shapes (gamma/topHead/topKSpec) under a ShapeModel.

Every config's value is the value of the tree the engine builds for it (analysis.shapes.paths:
rank paths, the engine's selection by draft path probability, expected accepted length). The
search is a branch and bound over configs, level by level and slot by slot in the engine's own
order, so every value it computes is the value of the tree the engine builds; the bound is a
relaxation that drops the engine's selection rule except among siblings. Proof and limits:
docs/shape-search.md.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from analysis.compare.subtree import is_contained
from analysis.cost.model import CostModel
from replay.core.config import TreeConfig
from replay.core.selection import selection_order
from replay.engine.batch import RankPath

from .model import ShapeModel
from .paths import Shape, config_from_paths, engine_paths, expected_accepted, with_cost

DEFAULT_STATE_LIMIT = 400_000  # search states before giving up certification (about 10 s in Python)
_TIE = 1e-12  # values this close are ties (then fewer nodes, then shallower, then the config text)


def best_first(model: ShapeModel, budget: int, max_depth: int) -> list[tuple[RankPath, float]]:
    """The ``budget`` rank paths of highest path probability within ``max_depth``, in the order taken.

    The taken set is always closed under parent and lower sibling. When rows are non-increasing in
    r, every prefix is the top-n set by P (ties: shorter, then lexicographically smaller rank path
    first); the search uses it only as a first guess.
    """
    if budget < 1 or max_depth < 1:
        raise ValueError(f"budget ({budget}) and max_depth ({max_depth}) must be at least 1")
    # entries: (-prob, depth, path, prob, parent's prob); the key makes ties deterministic
    heap: list[tuple[float, int, RankPath, float, float]] = []

    def push(path: RankPath, parent_prob: float) -> None:
        q = path[-2] if len(path) > 1 else 0
        prob = parent_prob * model.factor(len(path) - 1, q, path[-1])
        heapq.heappush(heap, (-prob, len(path), path, prob, parent_prob))

    push((0,), 1.0)
    taken: list[tuple[RankPath, float]] = []
    while heap and len(taken) < budget:
        _, _, path, prob, parent_prob = heapq.heappop(heap)
        taken.append((path, prob))
        if len(path) < max_depth:
            push(path + (0,), prob)
        if path[-1] + 1 < model.cols:
            push(path[:-1] + (path[-1] + 1,), parent_prob)
    return taken


@dataclass(frozen=True)
class SearchResult:
    by_block_efficiency: tuple[Shape, ...]  # best first
    by_speedup: tuple[Shape, ...]  # best first; empty without a cost model
    budget: int
    max_depth: int
    all_exact: bool  # the search finished: the lists are the true top shapes under the model
    states: int = 0  # search states visited
    bound: float = float("nan")  # relaxation bound on E[accepted] of any shape within budget and depth


# --------------------------------------------------------------------------------------------
# The relaxation: best node sets below one node, the engine's rule kept only among siblings


def subtree_bounds(model: ShapeModel, budget: int, max_depth: int) -> np.ndarray:
    """F [max_depth + 1, cols, budget + 1] float64: F[d, q, k] = the largest Σ P (relative to the
    node's own P) of at most k nodes below a node of depth d and own rank q, over node sets closed
    under parent and lower sibling whose expanded children of any node are a rank prefix of its
    children (siblings are ranked by the draft in rank order), depth <= max_depth.

    It bounds every config: a config's tree is such a set, with one more constraint across
    parents (the level's expanded nodes come first in draft order) that is dropped here.
    """
    cols, k_max = model.cols, budget
    out = np.zeros((max_depth + 1, cols, k_max + 1))
    for d in range(max_depth - 1, -1, -1):
        a = np.array([[model.factor(d, q, r) for r in range(cols)] for q in range(cols)])  # [q, r]
        child = out[d + 1]  # [r, k]: F of a child (depth d+1) with own rank r
        # leaves[:, r, k]: children r, r+1, .. taken as leaves, at most k of them
        csum = np.concatenate(
            [np.cumsum(a[:, ::-1], axis=1)[:, ::-1], np.zeros((cols, 1))], axis=1
        )  # [q, r]: Σ_{t>=r} a
        leaves = np.zeros((cols, cols + 1, k_max + 1))
        for r in range(cols):
            for k in range(k_max + 1):
                end = min(cols, r + k)
                leaves[:, r, k] = csum[:, r] - csum[:, end]
        expand = np.zeros((cols, k_max + 1))  # children r.. with expansion still allowed; r = cols: nothing
        for r in range(cols - 1, -1, -1):
            best = leaves[:, r].copy()
            if d + 1 < max_depth:
                for j in range(1, k_max):  # child r expanded with j >= 1 nodes below it
                    gain = a[:, r] * (1.0 + child[r, j])  # [q]
                    best[:, j + 1 :] = np.maximum(best[:, j + 1 :], gain[:, None] + expand[:, : k_max - j])
            expand = best
        out[d] = expand
    return out


def concave_increments(f: np.ndarray) -> np.ndarray:
    """[K] non-increasing increments of the least concave majorant of f [K + 1] (f[0] = 0)."""
    hull = [0]
    for k in range(1, f.shape[0]):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (f[b] - f[a]) * (k - a) <= (f[k] - f[a]) * (b - a):
                hull.pop()
            else:
                break
        hull.append(k)
    major = np.interp(np.arange(f.shape[0]), hull, f[hull])
    return np.maximum(np.diff(major), 0.0)


# --------------------------------------------------------------------------------------------
# Branch and bound over configs


class _TopK:
    """The ``size`` best configs by a sort key; ``threshold`` is the value a newcomer must reach."""

    def __init__(self, size: int):
        self.size = size
        self.items: list[tuple[tuple, tuple]] = []  # (key, spec) sorted by key
        self.specs: set[tuple] = set()

    @property
    def threshold(self) -> float:
        return -np.inf if len(self.items) < self.size else -self.items[-1][0][0]

    def offer(self, value: float, nodes: int, depth: int, spec: tuple) -> None:
        if spec in self.specs or value < self.threshold - _TIE:
            return
        key = (-round(value, 12), nodes, depth, spec)
        if len(self.items) >= self.size and key >= self.items[-1][0]:
            return
        bisect.insort(self.items, (key, spec))
        self.specs.add(spec)
        if len(self.items) > self.size:
            _, dropped = self.items.pop()
            self.specs.discard(dropped)


class _BestByNodes:
    """The best config found for each node count 1..budget (ties: shallower, then the config text)."""

    def __init__(self, budget: int):
        self.value = [-np.inf] * (budget + 1)
        self.key: list[tuple | None] = [None] * (budget + 1)

    def offer(self, value: float, nodes: int, depth: int, spec: tuple) -> None:
        if value < self.value[nodes] - _TIE:
            return
        key = (-round(value, 12), depth, spec)
        if self.key[nodes] is None or key < self.key[nodes]:
            self.key[nodes] = key
            self.value[nodes] = max(value, self.value[nodes])

    def hopeless(self, v: float, pre: list[float], m: int) -> bool:
        """No completion of a partial config (value v, m nodes) can beat any node count's best."""
        best = self.value
        return all(v + g < best[m + k] - _TIE for k, g in enumerate(pre))

    def specs(self) -> list[tuple]:
        return [key[2] for key in self.key if key is not None]


class _SearchAborted(Exception):
    pass


@dataclass(frozen=True)
class _Objective:
    """One ranking: value(accepted, nodes, depth) and its bound from a partial config."""

    top: _TopK
    value: Callable[[float, int, int], float]
    bound: Callable[[float, list[float], int, int], float]  # (v, prefix sums of gains, nodes, min depth)


def _branch_and_bound(
    model: ShapeModel,
    budget: int,
    max_depth: int,
    objectives: Sequence[_Objective],
    by_nodes: _BestByNodes | None,
    state_limit: int,
    within: TreeConfig | None = None,
) -> tuple[int, bool]:
    """Visit every config within budget/depth/columns (and ``within``'s heads and widths) that the
    bounds cannot exclude; offer each to every objective and to the per-node-count best.
    Returns (states visited, finished)."""
    cols = model.cols
    heads_max = [10**9] * max_depth if within is None else list(within.top_head)
    width_max = None if within is None else within.top_k_spec
    bounds = subtree_bounds(model, budget, max_depth)
    inc = [[concave_increments(bounds[d, q]).tolist() for q in range(cols)] for d in range(max_depth + 1)]
    fac = [[[model.factor(d, q, r) for r in range(cols)] for q in range(cols)] for d in range(max_depth)]
    key_of = model.order_key
    states = 0

    def gains(items: list[tuple], rem: int) -> list[float]:
        """Prefix sums 0..rem of the largest relaxation gains of the items (P, depth, own rank)."""
        best = heapq.nlargest(rem, (p * g for p, d, q in items for g in inc[d][q][:rem]))
        out = [0.0]
        for g in best:
            out.append(out[-1] + g)
        out += [out[-1]] * (rem + 1 - len(out))
        return out

    def visit(spec: tuple, level: list[tuple], j: int, widths: tuple, kids: list[tuple], m: int, v: float) -> None:
        # level / kids entries: (P, depth, own rank, path)
        nonlocal states
        states += 1
        if states > state_limit:
            raise _SearchAborted
        depth = len(spec) + 1
        rem = budget - m
        items = [(u[0], u[1], u[2]) for u in level[j:]] + [(c[0], c[1], c[2]) for c in kids]
        pre = gains(items, rem)
        if (by_nodes is None or by_nodes.hopeless(v, pre, m)) and all(
            ob.bound(v, pre, m, depth) < ob.top.threshold - _TIE for ob in objectives
        ):
            return
        if j >= 1:
            closed = spec + (widths,)
            if by_nodes is not None:
                by_nodes.offer(v, m, depth, closed)
            for ob in objectives:
                ob.top.offer(ob.value(v, m, depth), m, depth, closed)
            if depth < max_depth and m < budget:
                ordered = selection_order([key_of(kid[3]) for kid in kids])  # the engine's order
                visit(closed, [kids[i] for i in ordered], 0, (), [], m, v)
        if j < len(level) and j < heads_max[depth - 1]:
            p_u, d_u, q_u, path = level[j]
            row = fac[d_u][q_u]
            w_max = min(cols, rem) if width_max is None else min(cols, rem, width_max[depth - 1][j])
            for w in range(w_max, 0, -1):
                new = [(p_u * row[r], d_u + 1, r, path + (r,)) for r in range(w)]
                visit(spec, level, j + 1, widths + (w,), kids + new, m + w, v + sum(c[0] for c in new))

    try:
        visit((), [(1.0, 0, 0, ())], 0, (), [], 0, 0.0)
    except _SearchAborted:
        return states, False
    return states, True


def fits_within(cfg: TreeConfig, within: TreeConfig | None) -> bool:
    """No more steps, heads or per-slot widths than ``within`` (None: no limit)."""
    return within is None or is_contained(cfg, within)


def _seed(
    model: ShapeModel,
    budget: int,
    max_depth: int,
    objectives: Sequence[_Objective],
    by_nodes: _BestByNodes | None,
    within: TreeConfig | None,
) -> None:
    """Offer the configs of the greedy top-n sets first: good thresholds make the bounds bite early."""
    for cap in range(1, max_depth + 1):
        taken = [p for p, _ in best_first(model, budget, cap)]
        for n in range(1, len(taken) + 1):
            cfg = config_from_paths(taken[:n], model)
            if not fits_within(cfg, within):
                continue
            built = engine_paths(cfg, model)
            v, m, depth = expected_accepted(built, model), len(built), max(len(p) for p in built)
            if by_nodes is not None:
                by_nodes.offer(v, m, depth, cfg.top_k_spec)
            for ob in objectives:
                ob.top.offer(ob.value(v, m, depth), m, depth, cfg.top_k_spec)


def best_configs(
    model: ShapeModel,
    budget: int,
    max_depth: int,
    count: int,
    within: TreeConfig | None = None,
) -> list[tuple[float, TreeConfig]]:
    """The ``count`` configs of highest expected accepted length (any node counts), best first, as
    (value, config); ``within``: only configs contained in that one. The best found when the search
    stops at DEFAULT_STATE_LIMIT."""
    if within is not None:
        max_depth = min(max_depth, within.gamma)
    ob = _Objective(_TopK(count), lambda v, m, d: v, lambda v, pre, m, d: v + pre[-1])
    _seed(model, budget, max_depth, [ob], None, within)
    _branch_and_bound(model, budget, max_depth, [ob], None, DEFAULT_STATE_LIMIT, within)
    configs = [TreeConfig.from_lists(spec) for _, spec in ob.top.items]
    return [(expected_accepted(engine_paths(c, model), model), c) for c in configs]


def _speed_objective(top: int, cost: CostModel, budget: int, max_depth: int) -> _Objective:
    t1 = float(cost.t_verify(1))
    nodes = np.arange(budget + 1)
    # rate[d][n] = t_verify(1) / round_cost(d, n): speedup per committed token
    rate = [(t1 / np.asarray(cost.round_cost(d, nodes), dtype=np.float64)).tolist() for d in range(max_depth + 1)]

    def value(v: float, m: int, d: int) -> float:
        return (v + 1.0) * rate[d][m]

    def bound(v: float, pre: list[float], m: int, d: int) -> float:
        r = rate[d]
        return max((v + g + 1.0) * r[m + k] for k, g in enumerate(pre))

    return _Objective(_TopK(top), value, bound)


def search_shapes(
    model: ShapeModel,
    budget: int,
    max_depth: int,
    cost: CostModel | None = None,
    top: int = 5,
    state_limit: int = DEFAULT_STATE_LIMIT,
    within: TreeConfig | None = None,
) -> SearchResult:
    """Over every static config with at most ``budget`` nodes, depth <= ``max_depth`` and widths
    within the recorded columns: the best config for each node count, the ``top`` of them by
    expected block efficiency, and with a cost model the ``top`` configs by modelled speedup.

    Exact unless the search visits more than ``state_limit`` states (then the best found so far,
    ``all_exact`` False, each shape with the relaxation bound for its node count). ``within``: only
    configs contained in that one (the shapes a dump recorded with it can replay).
    """
    if budget < 1 or max_depth < 1:
        raise ValueError(f"budget ({budget}) and max_depth ({max_depth}) must be at least 1")
    objectives = [] if cost is None else [_speed_objective(top, cost, budget, max_depth)]
    by_nodes = _BestByNodes(budget)
    if within is not None:
        max_depth = min(max_depth, within.gamma)
    _seed(model, budget, max_depth, objectives, by_nodes, within)
    states, finished = _branch_and_bound(model, budget, max_depth, objectives, by_nodes, state_limit, within)
    relaxed = subtree_bounds(model, budget, max_depth)[0, 0]  # [budget + 1] bound for at most n nodes

    def shape_of(spec: tuple, ranked: bool) -> Shape:
        """ranked: certified by its place in the speedup list rather than as its node count's best."""
        cfg = TreeConfig.from_lists(spec)
        built = engine_paths(cfg, model)
        value, n = expected_accepted(built, model), len(built)
        best_n = by_nodes.value[n] if finished else float(relaxed[n])
        exact = finished and (ranked or value >= best_n - _TIE)
        shape = Shape(
            cfg,
            tuple(built),
            value,
            exact,
            value if ranked and finished else best_n,
            max_depth,
            any(model.is_extrapolated(len(p) - 1) for p in built),
            pooled=any(model.uses_pooled(p) for p in built),
            notes=() if finished else (f"search stopped after {state_limit} states: best found, not certified",),
        )
        return with_cost(shape, cost) if cost is not None else shape

    per_n = sorted(
        (shape_of(spec, False) for spec in by_nodes.specs()),
        key=lambda x: (-round(x.expected_accepted, 12), x.num_nodes, x.depth),
    )
    by_sp = tuple(shape_of(spec, True) for _, spec in objectives[0].top.items) if cost is not None else ()
    return SearchResult(tuple(per_n[:top]), by_sp, budget, max_depth, finished, states, float(relaxed[budget]))
