"""Exact search over static tree shapes (gamma/topHead/topKSpec) under a ShapeModel.

A tree is a set of rank paths (root excluded): node (r1, ..., rk) is the rank-rk child of the rank
r(k-1) child of ... of the root. Under the model, node v is accepted with probability P(v), the
product of p[d, q, r] along its path (independence assumption), and the expected accepted length
of a tree is the sum of P over its nodes. Proof of exactness and the engine-selection caveat:
docs/shape-search.md.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from replay.config import TreeConfig
from replay.selection import select_top
from replay.tree import Tree
from replay.vocab import PAD_TOKEN

from .costmodel import CostModel
from .shape_model import ShapeModel

Path = tuple[int, ...]


@dataclass(frozen=True)
class Shape:
    """One recommended shape and what the model expects of it."""

    config: TreeConfig
    paths: tuple[Path, ...]  # the engine's tree under the model ordering, tree order
    expected_accepted: float  # sum of path probabilities (bonus excluded)
    exact: bool  # certified optimal among all shapes with this many nodes and depth cap
    upper_bound: float  # relaxation bound on expected accepted length for (nodes, depth cap)
    depth_cap: int
    extrapolated: bool  # uses a depth the dumps could not estimate
    speedup: float | None = None  # modelled, when a cost model is given
    round_time_s: float | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def num_nodes(self) -> int:
        return len(self.paths)

    @property
    def depth(self) -> int:
        return max((len(p) for p in self.paths), default=0)

    @property
    def expected_block_efficiency(self) -> float:
        """Committed tokens per round: accepted + the bonus/correction token the target always adds."""
        return self.expected_accepted + 1.0


def best_first(model: ShapeModel, budget: int, max_depth: int) -> list[tuple[Path, float]]:
    """The ``budget`` rank paths of highest path probability within ``max_depth``, in the order taken.

    Every prefix of the returned list is the top-n set (ties: shorter, then lexicographically
    smaller rank path first), closed under parent and lower sibling because factors are <= 1 and
    non-increasing in r, so it is a valid top-k tree.
    """
    if budget < 1 or max_depth < 1:
        raise ValueError(f"budget ({budget}) and max_depth ({max_depth}) must be at least 1")
    # entries: (-prob, depth, path, prob, parent's prob); the key makes ties deterministic
    heap: list[tuple[float, int, Path, float, float]] = []

    def push(path: Path, parent_prob: float) -> None:
        q = path[-2] if len(path) > 1 else 0
        prob = parent_prob * model.factor(len(path) - 1, q, path[-1])
        heapq.heappush(heap, (-prob, len(path), path, prob, parent_prob))

    push((0,), 1.0)
    taken: list[tuple[Path, float]] = []
    while heap and len(taken) < budget:
        _, _, path, prob, parent_prob = heapq.heappop(heap)
        taken.append((path, prob))
        if len(path) < max_depth:
            push(path + (0,), prob)
        if path[-1] + 1 < model.cols:
            push(path[:-1] + (path[-1] + 1,), parent_prob)
    return taken


def engine_paths(config: TreeConfig, model: ShapeModel) -> list[Path]:
    """The tree the engine builds for ``config`` when the draft ranks nodes as the model does.

    Level by level: nodes in tree order (expanded parents in selection order, then child rank);
    the engine expands the topHead[i] nodes of highest path probability (ties by tree order) and
    keeps topKSpec[i][j] children of the j-th. Returns rank paths in tree order.
    """
    out: list[Path] = []
    level: list[Path] = [()]
    for i in range(config.gamma):
        chosen = select_by_probability(level, model, config.top_head[i])
        level = [u + (r,) for u, w in zip(chosen, config.top_k_spec[i]) for r in range(w)]
        out.extend(level)
    return out


def select_by_probability(level: Sequence[Path], model: ShapeModel, heads: int) -> list[Path]:
    """The ``heads`` nodes of ``level`` (tree order) with the highest path probability, stable."""
    return [level[j] for j in select_top([model.path_probability(u) for u in level], heads)]


def config_from_paths(paths: Sequence[Path], model: ShapeModel) -> TreeConfig:
    """topHead/topKSpec for a node set closed under parent and lower sibling.

    Per level, the expanded nodes in the engine's selection order (path probability, ties by tree
    order), each with its number of children. The engine rebuilds exactly this set only when the
    expanded nodes are the most probable of their level: check with ``engine_paths``.
    """
    present = set(paths)
    depth = max(len(p) for p in paths)
    heads, spec = [], []
    level: list[Path] = [()]
    for _ in range(depth):
        width = {u: _children_count(u, present) for u in level}
        expanded = [u for u in select_by_probability(level, model, len(level)) if width[u]]
        heads.append(len(expanded))
        spec.append([width[u] for u in expanded])
        level = [u + (r,) for u in expanded for r in range(width[u])]
    return TreeConfig.from_lists(spec, heads)


def _children_count(u: Path, present: set[Path]) -> int:
    r = 0
    while u + (r,) in present:
        r += 1
    return r


def expected_accepted(paths: Sequence[Path], model: ShapeModel) -> float:
    return float(sum(model.path_probability(p) for p in paths))


def candidate_shapes(model: ShapeModel, budget: int, max_depth: int) -> list[Shape]:
    """The best shape for every (nodes n <= budget, depth cap D <= max_depth), deduplicated.

    One best-first pass per D yields the top-n sets for all n. When the top-n set is a tree the
    engine would build (its expanded nodes are the most probable of their level), it is optimal
    (exact); otherwise the engine's tree for the derived config is reported with the relaxation's
    value as an upper bound (not certified).
    """
    seen: dict[tuple, Shape] = {}
    for cap in range(1, max_depth + 1):
        taken = best_first(model, budget, cap)
        for n in range(1, len(taken) + 1):
            top = [p for p, _ in taken[:n]]
            bound = float(sum(prob for _, prob in taken[:n]))
            cfg = config_from_paths(top, model)
            built = engine_paths(cfg, model)
            exact = set(built) == set(top)
            value = expected_accepted(built, model)
            notes = () if exact else ("the top-n set expands a less probable node; engine tree shown, value below the bound",)
            shape = Shape(cfg, tuple(built), value, exact, bound, cap, any(model.is_extrapolated(len(p) - 1) for p in built), notes=notes)
            key = (cfg.top_k_spec, cfg.top_head)
            old = seen.get(key)
            if old is None or (shape.exact and not old.exact):
                seen[key] = shape
    return list(seen.values())


def with_cost(shape: Shape, cost: CostModel) -> Shape:
    """The shape with its modelled speedup (CostModel.speedup; docs/analysis.md): one round of the
    shape costs ``cost.round_cost(depth, nodes)`` and commits E[block efficiency] tokens."""
    round_s = float(cost.round_cost(shape.depth, shape.num_nodes))
    speed = cost.speedup(shape.expected_block_efficiency, round_s)
    return Shape(
        shape.config, shape.paths, shape.expected_accepted, shape.exact, shape.upper_bound, shape.depth_cap,
        shape.extrapolated, speed, round_s, shape.notes,
    )


@dataclass(frozen=True)
class SearchResult:
    by_block_efficiency: tuple[Shape, ...]  # best first
    by_speedup: tuple[Shape, ...]  # best first; empty without a cost model
    budget: int
    max_depth: int
    all_exact: bool  # every listed shape certified optimal for its (nodes, depth cap)


def search_shapes(model: ShapeModel, budget: int, max_depth: int, cost: CostModel | None = None, top: int = 5) -> SearchResult:
    """Top shapes by expected block efficiency and, with a cost model, by modelled speedup."""
    shapes = candidate_shapes(model, budget, max_depth)
    if cost is not None:
        shapes = [with_cost(s, cost) for s in shapes]
    by_be = sorted(shapes, key=lambda s: (-round(s.expected_accepted, 12), s.num_nodes, s.depth))[:top]
    by_sp = sorted(shapes, key=lambda s: (-round(s.speedup, 12), s.num_nodes, s.depth))[:top] if cost is not None else []
    listed = list(by_be) + list(by_sp)
    return SearchResult(tuple(by_be), tuple(by_sp), budget, max_depth, all(s.exact for s in listed))


def enumerate_configs(budget: int, max_depth: int, max_width: int, limit: int = 200_000) -> Iterator[TreeConfig]:
    """Every static config with at most ``budget`` nodes, depth <= max_depth, widths <= max_width.

    For brute-force checks; raises ValueError past ``limit`` configs.
    """
    count = 0

    def compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
        if parts == 0:
            if total == 0:
                yield ()
            return
        for first in range(1, min(max_width, total - parts + 1) + 1):
            for rest in compositions(total - first, parts - 1):
                yield (first,) + rest

    def grow(heads: list[int], spec: list[tuple[int, ...]], level: int, left: int) -> Iterator[TreeConfig]:
        nonlocal count
        if spec:
            count += 1
            if count > limit:
                raise ValueError(f"more than {limit} configs: lower the budget or depth")
            yield TreeConfig.from_lists(spec, heads)
        if len(spec) == max_depth:
            return
        for h in range(1, level + 1):
            for used in range(h, left + 1):
                for widths in compositions(used, h):
                    yield from grow(heads + [h], spec + [widths], sum(widths), left - used)

    yield from grow([], [], 1, budget)


def shape_tree(shape: Shape) -> Tree:
    """A replay Tree of the shape's rank paths (tokens unknown) for names and drawing."""
    index = {(): 0}
    parents, ranks = [-1], [-1]
    for k, path in enumerate(shape.paths, start=1):
        index[path] = k
        parents.append(index[path[:-1]])
        ranks.append(path[-1])
    return Tree.from_lists([PAD_TOKEN] * len(parents), parents, ranks)


def render_shape(shape: Shape, model: ShapeModel) -> list[str]:
    """The article-style sideways tree of a shape: node names, rank paths, acceptance probability."""
    tree = shape_tree(shape)
    names = tree.names()
    paths = ((),) + shape.paths
    kids = [tree.children(u).tolist() for u in range(len(paths))]
    expanded = tree.has_children()

    def label(u: int) -> str:
        if u == 0:
            return "R (root, last committed token)"
        path = paths[u]
        mark = " ▸" if expanded[u] else ""
        extra = " (extrapolated depth)" if model.is_extrapolated(len(path) - 1) else ""
        ranks = "/".join(str(r) for r in path)
        return f"{names[u]}  ranks {ranks}  P(accepted)={model.path_probability(path):.3f}{mark}{extra}"

    lines = [label(0)]

    def walk(u: int, prefix: str) -> None:
        for k, v in enumerate(kids[u]):
            last = k == len(kids[u]) - 1
            lines.append(prefix + ("└── " if last else "├── ") + label(v))
            walk(v, prefix + ("    " if last else "│   "))

    walk(0, "")
    return lines
