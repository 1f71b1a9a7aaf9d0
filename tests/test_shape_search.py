"""The shape search against brute force over every expressible static config."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.cost.model import CostModel
from analysis.shapes.model import ShapeModel, pava_nonincreasing
from analysis.shapes.paths import config_from_paths, engine_paths, render_shape
from analysis.shapes.search import best_first, search_shapes
from replay.testing.selection_ref import select_ref
from replay.util.errors import SpecReplayError
from tests.shape_builders import enumerate_configs, model_from_hits

COLS = 4


def tied(row: np.ndarray, seed: int) -> np.ndarray:
    """Odd seeds: probabilities on a coarse grid (as fp16 dumps round them), so that siblings and
    cousins share path probabilities and the tie rule decides which the engine expands."""
    return np.floor(row * 8) / 8 if seed % 2 else row


def random_model(seed: int, depends_on_q: bool) -> ShapeModel:
    """p[d, q, r] with rows non-increasing in r and sums below 1 (odd seeds: ties, see tied)."""
    rng = np.random.default_rng(seed)
    depths = 3
    p = np.zeros((depths, COLS, COLS))
    for d in range(depths):
        base = np.sort(rng.dirichlet(np.ones(COLS + 1)))[::-1][:COLS]
        for q in range(COLS):
            row = np.sort(rng.dirichlet(np.ones(COLS + 1)))[::-1][:COLS] if depends_on_q else base
            p[d, q] = tied(pava_nonincreasing(row), seed)
    z = np.zeros((depths, COLS))
    return ShapeModel(p, p, p, z.astype(np.int64), z.astype(bool), np.zeros(depths, bool), 0, 0)


def simple_value(cfg, model: ShapeModel) -> float:
    """Independent reference: build the engine's tree level by level, sum path probabilities."""
    level = [((), 1.0, 0)]  # (path, prob, own rank)
    total = 0.0
    for i in range(cfg.gamma):
        # tree order is the list order; the engine takes the most probable (ties: rank_ties)
        order = select_ref([u[1] for u in level], cfg.top_head[i])
        nxt = []
        for j, width in zip(order, cfg.top_k_spec[i]):
            path, prob, q = level[j]
            for r in range(width):
                pr = prob * (model.p[i, q, r] if r < COLS else 0.0)
                nxt.append((path + (r,), pr, r))
                total += pr
        level = nxt
    return total


def brute_force(model: ShapeModel, budget: int, depth: int):
    best = {}
    for cfg in enumerate_configs(budget, depth, COLS):
        v = simple_value(cfg, model)
        key = (cfg.num_nodes, cfg.gamma)
        if key not in best or v > best[key][0] + 1e-12:
            best[key] = (v, cfg)
    return best


def best_at(best, n: int, cap: int):
    return max((best[(m, g)] for (m, g) in best if m == n and g <= cap), key=lambda t: t[0])


@pytest.mark.parametrize("seed", range(12))
def test_search_equals_brute_force_without_q(seed):
    model = random_model(seed, depends_on_q=False)
    best = brute_force(model, 8, 3)
    result = search_shapes(model, 8, 3, top=1000)
    assert result.all_exact
    # best over everything = the search's first shape, in value and (if unique) in config
    values = sorted((v for v, _ in best.values()), reverse=True)
    top = result.by_block_efficiency[0]
    assert top.expected_accepted == pytest.approx(values[0], abs=1e-12)
    assert simple_value(top.config, model) == pytest.approx(values[0], abs=1e-12)
    if values[1] < values[0] - 1e-9:  # one (nodes, depth) reaches the best value: the search's config is one that does
        argmax = [c for c in enumerate_configs(8, 3, COLS) if simple_value(c, model) > values[0] - 1e-9]
        assert top.config in argmax
    # and for every (n, depth cap) the best-first top-n set is as good as any config
    for cap in (1, 2, 3):
        taken = best_first(model, 8, cap)
        for n in range(1, len(taken) + 1):
            v_bf, _ = best_at(best, n, cap)
            assert sum(p for _, p in taken[:n]) == pytest.approx(v_bf, abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_search_with_rank_dependence_is_exact_or_bounded(seed):
    model = random_model(100 + seed, depends_on_q=True)
    best = brute_force(model, 8, 3)
    for shape in search_shapes(model, 8, 3, top=1000).by_block_efficiency:
        v_bf, _ = best_at(best, shape.num_nodes, shape.depth_cap)
        assert simple_value(shape.config, model) == pytest.approx(shape.expected_accepted, abs=1e-12)
        assert shape.expected_accepted <= v_bf + 1e-12 <= shape.upper_bound + 2e-12
        if shape.exact:
            assert shape.expected_accepted == pytest.approx(v_bf, abs=1e-12)


def test_config_round_trip_and_picture():
    model = model_from_hits(np.array([[0.6, 0.25, 0.1, 0.05], [0.5, 0.2, 0.1, 0.05], [0.4, 0.2, 0.1, 0.05]]))
    taken = [p for p, _ in best_first(model, 7, 3)]
    cfg = config_from_paths(taken, model)
    assert set(engine_paths(cfg, model)) == set(taken)
    shape = search_shapes(model, 7, 3).by_block_efficiency[0]
    lines = render_shape(shape, model)
    assert lines[0].startswith("R") and any("A1" in x for x in lines) and len(lines) == 8


def test_enumerate_counts_small_space():
    cfgs = list(enumerate_configs(3, 3, 4))
    shorts = sorted(c.short() + str(c.top_head) for c in cfgs)
    assert len(shorts) == len(set(shorts))
    # [1] [2] [3] [1|1] [1|2] [2|1] (2 parents: [2]|[1,1] via topHead 2 only with 3 nodes) ...
    assert {c.short() for c in cfgs} == {"[1]", "[2]", "[3]", "[1]|[1]", "[1]|[2]", "[2]|[1]", "[1]|[1]|[1]"}


def test_cost_curve_and_speedup():
    # the shape search's speedup is CostModel's (docs/analysis.md), the same formula compare uses
    cost = CostModel(np.array([1.0, 4.0, 16.0]), np.array([0.4, 0.5, 1.0]), 0.05)
    assert cost.t_verify(1) == pytest.approx(0.4)
    assert cost.t_verify(10) == pytest.approx(0.75)
    assert cost.t_verify(32) == pytest.approx(1.0 + 16 * 0.5 / 12)
    lin = CostModel.linear(0.1, 0.01, 0.02)
    assert (
        lin.t_verify(9) == pytest.approx(0.19) and lin.t_verify(1) == pytest.approx(0.11) and lin.draft_step_s == 0.02
    )
    assert lin.with_draft_step(0.5).draft_step_s == 0.5 and lin.with_draft_step(0.5).t_verify(9) == pytest.approx(0.19)
    with pytest.raises(SpecReplayError):
        CostModel.linear(0.1, -0.01, 0.0)
    model = model_from_hits(np.array([[0.6, 0.25, 0.1, 0.05], [0.5, 0.2, 0.1, 0.05]]))
    res = search_shapes(model, 6, 2, cost=cost, top=3)
    s = res.by_speedup[0]
    expect = s.expected_block_efficiency * 0.4 / (s.depth * 0.05 + cost.t_verify(s.num_nodes + 1))
    assert s.speedup == pytest.approx(cost.speedup(s.expected_block_efficiency, cost.round_cost(s.depth, s.num_nodes)))
    assert s.speedup == pytest.approx(expect)
    assert all(a.speedup >= b.speedup for a, b in zip(res.by_speedup, res.by_speedup[1:]))


def random_draft_model(seed: int) -> ShapeModel:
    """Acceptance rows in any order (the target may prefer any draft rank), depending on the parent
    rank; the draft's own log-probabilities decrease with rank (a draft ranks its tokens by them;
    odd seeds: ties, see tied, while the tied nodes' acceptance differs)."""
    rng = np.random.default_rng(seed)
    depths = 3
    p = np.stack([np.stack([rng.dirichlet(np.ones(COLS + 1))[:COLS] for _ in range(COLS)]) for _ in range(depths)])
    draft = [
        [tied(np.sort(rng.dirichlet(np.ones(COLS + 1)))[::-1][:COLS], seed) for _ in range(COLS)] for _ in range(depths)
    ]
    with np.errstate(divide="ignore"):  # a probability floored to 0: log-probability -inf, ties too
        lp = np.log(np.array(draft))
    z = np.zeros((depths, COLS))
    return ShapeModel(p, p, p, z.astype(np.int64), z.astype(bool), np.zeros(depths, bool), 0, 0, None, lp)


def draft_value(cfg, model: ShapeModel) -> float:
    """Independent reference: the engine expands the nodes of highest draft path log-probability
    (ties: rank_ties (replay/core/selection.py)); a node's value is the product of acceptance along its rank path."""
    level = [((), 1.0, 0.0, 0)]  # (path, acceptance prob, draft log-prob, own rank)
    total = 0.0
    for i in range(cfg.gamma):
        order = select_ref([u[2] for u in level], cfg.top_head[i])
        nxt = []
        for j, width in zip(order, cfg.top_k_spec[i]):
            path, prob, key, q = level[j]
            for r in range(width):
                pr = prob * model.p[i, q, r]
                nxt.append((path + (r,), pr, key + model.draft_logp[i, q, r], r))
                total += pr
        level = nxt
    return total


@pytest.mark.parametrize("seed", range(10))
def test_search_with_draft_order_and_unsorted_rows_equals_brute_force(seed):
    model = random_draft_model(300 + seed)
    cost = CostModel.linear(0.3, 0.05, 0.02)
    values = {}
    for cfg in enumerate_configs(8, 3, COLS):
        values[(cfg.top_k_spec, cfg.top_head)] = (draft_value(cfg, model), cfg)
    result = search_shapes(model, 8, 3, cost=cost, top=4)
    assert result.all_exact
    by_n = {}
    for v, cfg in values.values():
        by_n[cfg.num_nodes] = max(by_n.get(cfg.num_nodes, -1.0), v)
    for shape in result.by_block_efficiency:  # the best config of its node count, valued as the engine builds it
        assert shape.expected_accepted == pytest.approx(draft_value(shape.config, model), abs=1e-12)
        assert shape.expected_accepted == pytest.approx(by_n[shape.num_nodes], abs=1e-12)
    assert result.by_block_efficiency[0].expected_accepted == pytest.approx(max(by_n.values()), abs=1e-12)
    speed = sorted(
        ((v + 1) * cost.t_verify(1) / cost.round_cost(cfg.gamma, cfg.num_nodes) for v, cfg in values.values()),
        reverse=True,
    )
    assert [s.speedup for s in result.by_speedup] == pytest.approx(speed[:4], abs=1e-12)
    # the relaxation bounds every config
    assert all(v <= result.bound + 1e-12 for v, _ in values.values())


@pytest.mark.parametrize("seed", range(4))
def test_best_contained_configs_equal_brute_force(seed):
    """best_configs(within=...) = the top configs by value among those a recording contains."""
    from analysis.shapes.search import best_configs, fits_within
    from replay.core.config import TreeConfig

    model = random_draft_model(500 + seed)
    recorded = TreeConfig.from_lists([[4], [2, 1, 1], [1, 1]], [1, 3, 2])
    truth = sorted(
        (draft_value(c, model) for c in enumerate_configs(8, 3, COLS) if fits_within(c, recorded)), reverse=True
    )
    found = best_configs(model, 8, 3, 5, within=recorded)
    assert all(fits_within(c, recorded) for _, c in found)
    assert [v for v, _ in found] == pytest.approx(truth[:5], abs=1e-12)
    assert [draft_value(c, model) for _, c in found] == pytest.approx(truth[:5], abs=1e-12)


def test_search_expands_equal_path_probabilities_in_tree_order():
    """The root's rank-0 and rank-1 children tie (0.4 each) and the rank-1 child's children are the
    more acceptable: a one-head step expands the rank-0 child all the same (tree order), so the best
    shapes expand both, and every shape is valued as the hand-written engine in simple_value builds it."""
    p = np.zeros((3, COLS, COLS))
    p[0, :] = [0.4, 0.4, 0.1, 0.05]
    p[1, :] = [0.3, 0.2, 0.1, 0.05]
    p[1, 0], p[1, 1] = [0.2, 0.1, 0.05, 0.0], [0.6, 0.3, 0.05, 0.0]
    p[2, :] = [0.5, 0.25, 0.1, 0.05]
    z = np.zeros((3, COLS))
    model = ShapeModel(p, p, p, z.astype(np.int64), z.astype(bool), np.zeros(3, bool), 0, 0)
    best = brute_force(model, 6, 3)
    for shape in search_shapes(model, 6, 3, top=1000).by_block_efficiency:
        assert shape.expected_accepted == pytest.approx(simple_value(shape.config, model), abs=1e-12), shape.config
        if shape.exact:
            assert shape.expected_accepted == pytest.approx(
                best_at(best, shape.num_nodes, shape.depth_cap)[0], abs=1e-12
            )
