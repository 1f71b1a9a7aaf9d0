"""``specreplay recommend``: tree shapes for a node budget from measured acceptance, with proof.

Pipeline: replay the dumps → visits → ShapeModel (analysis.shape_model) → exact shape search
(analysis.shape_search) → predicted vs measured block efficiency for the shapes a replay can
measure exactly. ``recommend_section`` renders the result for the analysis report.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from replay.commands import add_dump_options, options_from_args
from replay.config import TreeConfig
from replay.errors import SpecReplayError
from replay.rebuild import SELECT_FALLBACK, SELECT_ROOT
from replay.replayer import DirectoryReplay, RoundResult, replay_directory
from replay.vocab import PAD_TOKEN

from .shape_cost import CostCurve, linear_cost, load_cost_curve
from .shape_model import DEFAULT_MIN_COUNT, Z95, ShapeModel, Visits, bootstrap_models, collect_visits, estimate_model
from .shape_search import Path, SearchResult, Shape, engine_paths, expected_accepted, render_shape, search_shapes


@dataclass(frozen=True)
class Measured:
    """A measured mean accepted length (bonus excluded) and its standard error."""

    mean_accepted: float
    se: float
    rounds: int
    how: str


@dataclass(frozen=True)
class Comparison:
    label: str
    config: TreeConfig
    nodes: int
    predicted_be: float
    predicted_se: float
    measured: Measured | None

    @property
    def predicted_ci(self) -> tuple[float, float]:
        return self.predicted_be - Z95 * self.predicted_se, self.predicted_be + Z95 * self.predicted_se

    @property
    def measured_be(self) -> float | None:
        return None if self.measured is None else self.measured.mean_accepted + 1.0

    @property
    def error(self) -> float | None:
        return None if self.measured is None else self.predicted_be - self.measured_be

    @property
    def agree(self) -> bool | None:
        """|pred − meas| ≤ 1.96 · sqrt(se_pred² + se_meas²)."""
        if self.measured is None:
            return None
        return abs(self.error) <= Z95 * math.hypot(self.predicted_se, self.measured.se) + 1e-12

    def to_json(self) -> dict:
        m = self.measured
        return {
            "label": self.label,
            "config": self.config.to_json(),
            "nodes": self.nodes,
            "predicted_block_efficiency": self.predicted_be,
            "predicted_ci95": list(self.predicted_ci),
            "measured_block_efficiency": self.measured_be,
            "measured_ci95": None if m is None else [self.measured_be - Z95 * m.se, self.measured_be + Z95 * m.se],
            "measured_rounds": None if m is None else m.rounds,
            "measured_how": None if m is None else m.how,
            "error": self.error,
            "agree": self.agree,
        }


Measure = Callable[[TreeConfig], "Measured | None"]


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[0] == 0:
        return float("nan"), float("nan")
    se = float(arr.std(ddof=1) / math.sqrt(arr.shape[0])) if arr.shape[0] > 1 else float("inf")
    return float(arr.mean()), se


def predict_with_se(model: ShapeModel, paths: Sequence[Path], boots: Sequence[ShapeModel]) -> tuple[float, float]:
    """Expected accepted length of a fixed node set and its bootstrap standard error (0 without data)."""
    value = expected_accepted(paths, model)
    if not boots:
        return value, 0.0
    draws = np.array([expected_accepted(paths, b) for b in boots])
    return value, float(draws.std(ddof=1))


def compare_predictions(
    model: ShapeModel,
    shapes: Sequence[TreeConfig | Shape],
    measure: Measure,
    bootstrap: int = 200,
    seed: int = 0,
    boots: Sequence[ShapeModel] | None = None,
) -> list[Comparison]:
    """Predicted block efficiency (bootstrap over rounds) vs ``measure`` for each shape.

    The prediction for a config is the model's value of the tree the engine builds for it
    (engine_paths); ``measure`` returns the measured mean accepted length, or None when the dumps
    cannot decide it (the row is still listed, without a measurement).
    """
    boots = bootstrap_models(model, bootstrap, seed) if boots is None else boots
    rows = []
    for k, item in enumerate(shapes):
        cfg = item.config if isinstance(item, Shape) else item
        paths = engine_paths(cfg, model)
        value, se = predict_with_se(model, paths, boots)
        rows.append(Comparison(f"#{k + 1}", cfg, len(paths), value + 1.0, se, measure(cfg)))
    return rows


# -- measurements a replay can make exactly ---------------------------------------------------


def round_paths(res: RoundResult) -> dict[Path, int]:
    """Rank path → node id of one replayed round's tree."""
    tree = res.tree
    out: dict[Path, int] = {(): 0}
    by_id: list[Path] = [()]
    for u in range(1, tree.num_nodes + 1):
        path = by_id[int(tree.parents[u])] + (int(tree.ranks[u]),)
        by_id.append(path)
        out[path] = u
    return out


def rank_major_paths(cfg: TreeConfig) -> list[Path]:
    """The tree of ``cfg`` under the fallback selection (rank, then parent order) — data-free."""
    out: list[Path] = []
    level: list[Path] = [()]
    for i in range(cfg.gamma):
        order = sorted(range(len(level)), key=lambda j: (level[j][-1] if level[j] else 0, j))
        chosen = [level[j] for j in order[: cfg.top_head[i]]]
        level = [u + (r,) for u, w in zip(chosen, cfg.top_k_spec[i]) for r in range(w)]
        out.extend(level)
    return out


def expands_every_level(cfg: TreeConfig) -> bool:
    sizes = (1,) + cfg.level_sizes
    return all(cfg.top_head[i] == sizes[i] for i in range(cfg.gamma))


def walk_subtree(res: RoundResult, ids: dict[Path, int], paths: set[Path]) -> int:
    """Greedy acceptance restricted to ``paths`` (all recorded in the round): accepted length."""
    tree, node, path, length = res.tree, 0, (), 0
    while True:
        want = int(res.target_top1[node])
        if want == PAD_TOKEN:
            return length
        r, nxt = 0, None
        while path + (r,) in paths:
            child = ids[path + (r,)]
            if int(tree.tokens[child]) == want:
                nxt = child
                break
            r += 1
        if nxt is None:
            return length
        node, path, length = nxt, path + (r,), length + 1


def replay_measure(results: Sequence[RoundResult], recorded: TreeConfig) -> Measure:
    """Exact measurements from a replay: the recorded config itself, and — when every round used
    the rank-major fallback (no scores, so the recorded tree's rank paths are fixed) — any config
    whose fallback tree is contained in every round's tree, and any config that expands every
    node of every level (no selection) contained in every round's tree. Other shapes need a re-selection
    (analysis.subtree) or a live run: None.
    """
    fallback = all(all(s in (SELECT_FALLBACK, SELECT_ROOT) for s in r.rebuilt.selection) for r in results)
    tables = [round_paths(r) for r in results]

    def measure(cfg: TreeConfig) -> Measured | None:
        if not results:
            return None
        if (cfg.top_k_spec, cfg.top_head) == (recorded.top_k_spec, recorded.top_head):
            mean, se = mean_se([r.acceptance.accepted_length for r in results])
            return Measured(mean, se, len(results), "replay of the recorded config")
        # a config that expands every node of every level selects nothing: its tree is data-free
        if not (fallback or expands_every_level(cfg)):
            return None
        want = set(rank_major_paths(cfg))
        if not all(want <= t.keys() for t in tables):
            return None
        mean, se = mean_se([walk_subtree(r, t, want) for r, t in zip(results, tables)])
        return Measured(mean, se, len(results), "exact replay of the contained rank-major subtree")

    return measure


def recorded_trees_check(model: ShapeModel, results: Sequence[RoundResult], boots: Sequence[ShapeModel], label: str) -> Comparison:
    """Model vs replay on the trees actually recorded (each round's own selection): checks the
    independence model and its estimate without the ordering assumption."""
    sets = [tuple(p for p in round_paths(r) if p) for r in results]

    def value(m: ShapeModel) -> float:
        return float(np.mean([expected_accepted(s, m) for s in sets]))

    pred = value(model)
    se = float(np.std([value(b) for b in boots], ddof=1)) if len(boots) > 1 else 0.0
    mean, mse = mean_se([r.acceptance.accepted_length for r in results])
    nodes = int(round(np.mean([len(s) for s in sets])))
    return Comparison(label, first_round_shape(results), nodes, pred + 1.0, se, Measured(mean, mse, len(results), "replay, recorded per-round trees"))


def first_round_shape(results: Sequence[RoundResult]) -> TreeConfig:
    """The shape of the first round's tree (what the row shows; rounds may stop early)."""
    heads, widths = results[0].tree.shape()
    return TreeConfig.from_lists(widths, heads)


# -- the whole recommendation -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Recommendation:
    directories: tuple[str, ...]
    model: ShapeModel
    search: SearchResult
    comparisons: tuple[Comparison, ...]
    recorded: tuple[TreeConfig, ...]
    rounds: int
    skipped: int
    cost: CostCurve | None
    notes: tuple[str, ...] = field(default=())


def merge_visits(parts: Sequence[Visits]) -> Visits:
    offsets = np.cumsum([0] + [v.num_rounds for v in parts[:-1]])
    cat = lambda name: np.concatenate([getattr(v, name) for v in parts]) if parts else np.zeros(0, np.int64)  # noqa: E731
    return Visits(
        np.concatenate([v.round_index + o for v, o in zip(parts, offsets)]) if parts else np.zeros(0, np.int64),
        cat("depth"),
        cat("own_rank"),
        cat("hit_rank"),
        int(sum(v.num_rounds for v in parts)),
        max((v.cols for v in parts), default=1),
        max((v.max_tree_depth for v in parts), default=1),
    )


def recommend(
    replays: Sequence[DirectoryReplay],
    budget: int,
    max_depth: int | None = None,
    cost: CostCurve | None = None,
    top: int = 5,
    min_count: int = DEFAULT_MIN_COUNT,
    bootstrap: int = 200,
    seed: int = 0,
) -> Recommendation:
    """Estimate, search and compare. ``max_depth`` defaults to the deepest recorded tree."""
    if budget < 1:
        raise SpecReplayError(f"--budget must be at least 1, got {budget}")
    usable = [r for r in replays if r.results]
    if not usable:
        raise SpecReplayError("no round could be replayed: nothing to estimate from")
    visits = merge_visits([collect_visits(r.results) for r in usable])
    if visits.depth.shape[0] == 0:
        raise SpecReplayError("no reached node has both a draft row and a target top-1: cannot estimate acceptance")
    model = estimate_model(visits, min_count)
    depth = visits.max_tree_depth if max_depth is None else max_depth
    if depth < 1:
        raise SpecReplayError(f"--max-depth must be at least 1, got {depth}")
    result = search_shapes(model, budget, depth, cost, top)
    boots = bootstrap_models(model, bootstrap, seed)
    comparisons: list[Comparison] = []
    notes: list[str] = []
    for rep in usable:
        shapes = list(dict.fromkeys([s.config for s in result.by_block_efficiency + result.by_speedup] + [rep.tree]))
        rows = compare_predictions(model, shapes, replay_measure(rep.results, rep.tree), boots=boots)
        for row in rows:
            label = "recorded" if row.config == rep.tree else _rank_label(row.config, result)
            comparisons.append(Comparison(label, row.config, row.nodes, row.predicted_be, row.predicted_se, row.measured))
        comparisons.append(recorded_trees_check(model, rep.results, boots, "recorded trees"))
    if depth > model.depths or model.extrapolated.any():
        notes.append(f"depths beyond {int((~model.extrapolated).sum()) - 1} are extrapolated from the deepest estimated depth")
    if not result.all_exact:
        notes.append("some shapes are not certified optimal (rank-dependent model): value shown with the relaxation bound")
    return Recommendation(
        tuple(r.directory for r in replays), model, result, tuple(comparisons), tuple(r.tree for r in usable),
        visits.num_rounds, sum(len(r.skipped) for r in replays), cost, tuple(notes),
    )


def _rank_label(cfg: TreeConfig, result: SearchResult) -> str:
    for k, s in enumerate(result.by_block_efficiency):
        if s.config == cfg:
            return f"BE#{k + 1}"
    for k, s in enumerate(result.by_speedup):
        if s.config == cfg:
            return f"speed#{k + 1}"
    return "-"


# -- output -----------------------------------------------------------------------------------


def config_line(cfg: TreeConfig) -> str:
    return json.dumps(cfg.to_json(), separators=(", ", ": "))


def shape_line(k: int, s: Shape) -> str:
    cert = "exact" if s.exact else f"bound {s.upper_bound + 1:.3f}"
    extra = f"  speedup {s.speedup:.3f}x (round {s.round_time_s * 1e3:.1f} ms)" if s.speedup is not None else ""
    flag = "  [extrapolated depth]" if s.extrapolated else ""
    return (
        f"{k}. {config_line(s.config)}\n"
        f"   nodes {s.num_nodes}, depth {s.depth}: E[accepted] {s.expected_accepted:.3f}, "
        f"E[block_efficiency] {s.expected_block_efficiency:.3f} ({cert}){extra}{flag}"
    )


def model_lines(model: ShapeModel, ranks: int = 4) -> list[str]:
    """Per depth: visits and the pooled-over-q acceptance by child rank with Wilson intervals."""
    lines = []
    src = model.source
    for d in range(model.depths):
        if src is None:
            lines.append(f"  depth {d}: p = " + ", ".join(f"{x:.3f}" for x in model.p[d, 0, :ranks]))
            continue
        sel = src.depth == d
        n = int(sel.sum())
        cells = []
        for r in range(min(ranks, model.cols)):
            k = int(np.count_nonzero(src.hit_rank[sel] == r))
            lo, hi = _wilson1(k, n)
            cells.append(f"r{r} {k / max(n, 1):.3f} [{lo:.3f},{hi:.3f}]")
        flag = "  (extrapolated)" if model.extrapolated[d] else ""
        pooled = int(model.pooled[d].sum())
        lines.append(f"  depth {d}: {n} visits; " + "; ".join(cells) + f"; {pooled}/{model.cols} q-rows pooled{flag}")
    return lines


def _wilson1(k: int, n: int) -> tuple[float, float]:
    from .shape_model import wilson

    lo, hi = wilson(np.array(k), np.array(n))
    return float(lo), float(hi)


def comparison_lines(rows: Sequence[Comparison]) -> list[str]:
    head = f"  {'shape':<14} {'config':<26} {'nodes':>5}  {'predicted BE [95% CI]':<24} {'measured BE [95% CI]':<24} {'error':>7}  agree"
    out = [head]
    for c in rows:
        lo, hi = c.predicted_ci
        pred = f"{c.predicted_be:.3f} [{lo:.3f},{hi:.3f}]"
        if c.measured is None:
            meas, err, ok = "not decidable offline", "", "live run needed"
        else:
            m = c.measured_be
            meas = f"{m:.3f} [{m - Z95 * c.measured.se:.3f},{m + Z95 * c.measured.se:.3f}]"
            err, ok = f"{c.error:+.3f}", "yes" if c.agree else "NO"
        out.append(f"  {c.label:<14} {c.config.short():<26} {c.nodes:>5}  {pred:<24} {meas:<24} {err:>7}  {ok}")
    return out


def render_recommendation(rec: Recommendation) -> list[str]:
    s = rec.search
    lines = [
        f"model: {rec.rounds} rounds from {', '.join(rec.directories)} ({rec.skipped} skipped), "
        f"{rec.model.cols} recorded draft columns, min_count {rec.model.min_count}",
        *model_lines(rec.model),
        "",
        f"top shapes by expected block efficiency (budget {s.budget} nodes, max depth {s.max_depth}; "
        "search: exact best-first over rank paths, see docs/shape-search.md):",
    ]
    lines += [shape_line(k + 1, x) for k, x in enumerate(s.by_block_efficiency)]
    if s.by_speedup:
        lines += ["", f"top shapes by modelled speedup (cost: {rec.cost.source if rec.cost else ''}):"]
        lines += [shape_line(k + 1, x) for k, x in enumerate(s.by_speedup)]
    best = s.by_speedup[0] if s.by_speedup else s.by_block_efficiency[0]
    lines += ["", f"best shape {best.config.short()} (rank paths; P = modelled acceptance probability):"]
    lines += ["  " + x for x in render_shape(best, rec.model)]
    lines += ["", "prediction vs exact replay (block efficiency = accepted + 1):", *comparison_lines(rec.comparisons)]
    lines += [f"note: {n}" for n in rec.notes]
    return lines


def recommendation_json(rec: Recommendation) -> dict:
    def shape(x: Shape) -> dict:
        return {
            "config": x.config.to_json(),
            "nodes": x.num_nodes,
            "depth": x.depth,
            "expected_accepted": x.expected_accepted,
            "expected_block_efficiency": x.expected_block_efficiency,
            "exact": x.exact,
            "upper_bound_block_efficiency": x.upper_bound + 1.0,
            "extrapolated": x.extrapolated,
            "speedup": x.speedup,
            "round_time_s": x.round_time_s,
            "rank_paths": [list(p) for p in x.paths],
        }

    m = rec.model
    return {
        "directories": list(rec.directories),
        "rounds": rec.rounds,
        "skipped": rec.skipped,
        "budget": rec.search.budget,
        "max_depth": rec.search.max_depth,
        "model": {
            "p": m.p.tolist(),
            "ci95_low": m.lo.tolist(),
            "ci95_high": m.hi.tolist(),
            "visits": m.visits.tolist(),
            "pooled": m.pooled.tolist(),
            "extrapolated": m.extrapolated.tolist(),
            "min_count": m.min_count,
        },
        "cost": None if rec.cost is None else rec.cost.to_json(),
        "by_block_efficiency": [shape(x) for x in rec.search.by_block_efficiency],
        "by_speedup": [shape(x) for x in rec.search.by_speedup],
        "comparisons": [c.to_json() for c in rec.comparisons],
        "notes": list(rec.notes),
    }


def recommend_section(rec: Recommendation) -> str:
    """The analysis report's section (HTML fragment): top shapes, best tree, prediction vs replay."""
    esc = html.escape
    s = rec.search
    rows = "".join(
        f"<tr><td>{k + 1}</td><td><code>{esc(config_line(x.config))}</code></td><td>{x.num_nodes}</td>"
        f"<td>{x.expected_block_efficiency:.3f}</td><td>{'' if x.speedup is None else f'{x.speedup:.3f}'}</td>"
        f"<td>{'exact' if x.exact else f'≤ {x.upper_bound + 1:.3f}'}</td></tr>"
        for k, x in enumerate(s.by_block_efficiency + s.by_speedup)
    )
    best = s.by_speedup[0] if s.by_speedup else s.by_block_efficiency[0]
    comp = "".join(
        f"<tr><td>{esc(c.label)}</td><td>{esc(c.config.short())}</td><td>{c.nodes}</td>"
        f"<td>{c.predicted_be:.3f} [{c.predicted_ci[0]:.3f}, {c.predicted_ci[1]:.3f}]</td>"
        + (
            "<td>not decidable offline</td><td></td><td></td>"
            if c.measured is None
            else f"<td>{c.measured_be:.3f} ± {Z95 * c.measured.se:.3f}</td><td>{c.error:+.3f}</td><td>{'yes' if c.agree else 'NO'}</td>"
        )
        + "</tr>"
        for c in rec.comparisons
    )
    notes = "".join(f"<li>{esc(n)}</li>" for n in rec.notes)
    return (
        "<section id='shape-search'><h2>Tree-shape search</h2>"
        f"<p>{rec.rounds} rounds; budget {s.budget} nodes, max depth {s.max_depth}. Expected block efficiency "
        "= expected accepted length + 1, from per-depth, per-rank acceptance (docs/shape-search.md).</p>"
        "<table><tr><th>#</th><th>config</th><th>nodes</th><th>E[block_efficiency]</th><th>speedup</th><th>optimality</th></tr>"
        f"{rows}</table><h3>Best shape {esc(best.config.short())}</h3><pre>{esc(chr(10).join(render_shape(best, rec.model)))}</pre>"
        "<h3>Prediction vs exact replay</h3><table><tr><th>shape</th><th>config</th><th>nodes</th><th>predicted BE [95% CI]</th>"
        f"<th>measured BE ± 95%</th><th>error</th><th>agree</th></tr>{comp}</table>"
        f"{'<ul>' + notes + '</ul>' if notes else ''}</section>"
    )


# -- CLI --------------------------------------------------------------------------------------

EPILOG = """\
examples:
  specreplay recommend sample_dumps/synthetic_article --budget 12
  specreplay recommend DUMPS1 DUMPS2 --budget 16 --max-depth 5 --cost cost_curve.json
  specreplay recommend DUMPS --budget 16 --verify-cost 0.35,0.04 --draft-cost 0.02 --json

Cost curve JSON (the live harness writes it): {"tokens": [1, 2, 4, ...], "verify_s": [...], "draft_step_s": x}.
Exit status: 0; 1 when a measured shape disagrees with its prediction; 2 on errors.
"""


def parse_pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
        return a, b
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A,B (seconds), got {text!r}") from None


def cost_from_args(args: argparse.Namespace) -> CostCurve | None:
    if args.cost and args.verify_cost:
        raise SpecReplayError("give either --cost FILE or --verify-cost A,B, not both")
    if args.cost:
        curve = load_cost_curve(args.cost)
        if args.draft_cost is not None:
            curve = CostCurve(curve.tokens, curve.verify_s, args.draft_cost, curve.source + " (draft cost from --draft-cost)")
        return curve
    if args.verify_cost:
        return linear_cost(*args.verify_cost, args.draft_cost or 0.0)
    if args.draft_cost is not None:
        raise SpecReplayError("--draft-cost needs --verify-cost A,B or --cost FILE")
    return None


def run_recommend(args: argparse.Namespace) -> int:
    cost = cost_from_args(args)
    opts = options_from_args(args)
    replays = [replay_directory(d, opts) for d in args.dir]
    rec = recommend(replays, args.budget, args.max_depth, cost, args.top, args.min_count, args.bootstrap, args.seed)
    if args.json:
        sys.stdout.write(json.dumps(recommendation_json(rec)) + "\n")
    else:
        sys.stdout.write("\n".join(render_recommendation(rec)) + "\n")
    for rep in replays:
        for sk in rep.skipped:
            print(f"specreplay: skipped {sk.what}: {sk.reason}", file=sys.stderr)
    return 1 if any(c.agree is False for c in rec.comparisons) else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "recommend",
        help="recommend topKSpec/topHead for a node budget from measured acceptance",
        description="Estimate acceptance by depth and rank from replayed dumps, search the static tree shapes "
        "within a node budget exactly, and compare predicted with replayed block efficiency.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", nargs="+", help="dump directories (pooled)")
    p.add_argument("--budget", type=int, required=True, help="draft nodes per tree (root excluded)")
    p.add_argument("--max-depth", type=int, default=None, help="maximum gamma (default: deepest recorded tree)")
    p.add_argument("--cost", help="measured cost curve JSON")
    p.add_argument("--verify-cost", type=parse_pair, help="A,B: t_verify(k) = A + B*k seconds")
    p.add_argument("--draft-cost", type=float, default=None, help="seconds per draft step")
    p.add_argument("--top", type=int, default=5, help="shapes to list per objective (default 5)")
    p.add_argument("--min-count", type=int, default=DEFAULT_MIN_COUNT, help="visits below which a rank row is pooled")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples for prediction intervals")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_dump_options(p)
    p.set_defaults(func=run_recommend)
