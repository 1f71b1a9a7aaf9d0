"""Tree shapes under a ShapeModel: the tree the engine builds for a config, its value, its picture.

A tree is a set of rank paths (root excluded): node (r1, ..., rk) is the rank-rk child of the rank
r(k-1) child of ... of the root. Under the model, node v is accepted with probability P(v), the
product of p[d, q, r] along its path (independence assumption), and the expected accepted length
of a tree is the sum of P over its nodes.

The engine decides which nodes a config expands: at step i the topHead[i] nodes of highest *draft*
path probability (``ShapeModel.order_key``), which need not be the most acceptable ones;
``engine_paths`` builds that tree, ``config_from_paths`` goes back from a node set to a config.
The search over configs is analysis.shapes.search; docs/shape-search.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from analysis.cost.model import CostModel
from replay.core.config import TreeConfig
from replay.core.headline import summary_row, summed_rounds
from replay.core.selection import select_top
from replay.core.tree import Tree
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import RankPath

from .model import ShapeModel


@dataclass(frozen=True)
class Shape:
    """One recommended shape and what the model expects of it."""

    config: TreeConfig
    paths: tuple[RankPath, ...]  # the engine's tree under the model ordering, tree order
    expected_accepted: float  # sum of path probabilities (bonus excluded)
    exact: bool  # certified: the search over every expressible config finished
    upper_bound: float  # bound on expected accepted length of any config with this many nodes
    depth_cap: int
    extrapolated: bool  # uses a depth the dumps could not estimate
    speedup: float | None = None  # modelled, when a cost model is given
    round_time_s: float | None = None
    notes: tuple[str, ...] = field(default=())
    pooled: bool = False  # uses a row pooled over parent rank (thin data)

    @property
    def num_nodes(self) -> int:
        return len(self.paths)

    @property
    def depth(self) -> int:
        return max((len(p) for p in self.paths), default=0)

    @property
    def expected_block_efficiency(self) -> float:
        """Committed tokens per round: accepted + the bonus/correction token the target always adds
        (the mean acceptance length's formula, on this one expectation)."""
        figure = "mean_acceptance_length"
        return summary_row(summed_rounds(self.expected_accepted, 1), names=(figure,))[figure]


def engine_paths(config: TreeConfig, model: ShapeModel) -> list[RankPath]:
    """The tree the engine builds for ``config`` when the draft ranks nodes as ``model.order_key`` says.

    Level by level: nodes in tree order (expanded parents in selection order, then child rank);
    the engine expands the topHead[i] nodes that rank first (ties: rank_ties (replay/core/selection.py)) and keeps
    topKSpec[i][j] children of the j-th. Returns rank paths in tree order.
    """
    out: list[RankPath] = []
    level: list[RankPath] = [()]
    for i in range(config.gamma):
        chosen = select_by_probability(level, model, config.top_head[i])
        level = next_level(chosen, config.top_k_spec[i])
        out.extend(level)
    return out


def next_level(expanded: Sequence[RankPath], widths: Sequence[int]) -> list[RankPath]:
    """The level below ``expanded`` (selection order) in tree order: the j-th node's first widths[j]
    children by rank.

    Trees under the model are built here, level by level, not by replay.engine.batch's rank_paths
    (which reads a finished selection): each level's selection reads the model's keys of its paths.
    """
    return [u + (r,) for u, w in zip(expanded, widths) for r in range(w)]


def select_by_probability(level: Sequence[RankPath], model: ShapeModel, heads: int) -> list[RankPath]:
    """The ``heads`` nodes of ``level`` (tree order) of highest draft path probability (replay.core.selection)."""
    return [level[j] for j in select_top([model.order_key(u) for u in level], heads)]


def config_from_paths(paths: Sequence[RankPath], model: ShapeModel) -> TreeConfig:
    """topHead/topKSpec for a node set closed under parent and lower sibling.

    Per level, the expanded nodes in the engine's selection order, each with its number of
    children. The engine rebuilds exactly this set only when the expanded nodes are the first of
    their level in that order: check with ``engine_paths``.
    """
    present = set(paths)
    depth = max(len(p) for p in paths)
    heads, spec = [], []
    level: list[RankPath] = [()]
    for _ in range(depth):
        width = {u: _children_count(u, present) for u in level}
        expanded = [u for u in select_by_probability(level, model, len(level)) if width[u]]
        heads.append(len(expanded))
        spec.append([width[u] for u in expanded])
        level = next_level(expanded, [width[u] for u in expanded])
    return TreeConfig.from_lists(spec, heads)


def _children_count(u: RankPath, present: set[RankPath]) -> int:
    r = 0
    while u + (r,) in present:
        r += 1
    return r


def expected_accepted(paths: Sequence[RankPath], model: ShapeModel) -> float:
    return float(sum(model.path_probability(p) for p in paths))


def with_cost(shape: Shape, cost: CostModel) -> Shape:
    """The shape with its modelled speedup (CostModel.speedup; docs/analysis.md): one round of the
    shape costs ``cost.round_cost(depth, nodes)`` and commits E[block efficiency] tokens."""
    round_s = float(cost.round_cost(shape.depth, shape.num_nodes))
    speed = cost.speedup(shape.expected_block_efficiency, round_s)
    return Shape(
        shape.config,
        shape.paths,
        shape.expected_accepted,
        shape.exact,
        shape.upper_bound,
        shape.depth_cap,
        shape.extrapolated,
        speed,
        round_s,
        shape.notes,
        shape.pooled,
    )


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
