"""``specreplay recommend``: tree shapes for a node budget from measured acceptance, with proof.

Pipeline: replay the dumps → visits → ShapeModel (analysis.shape_model) → exact shape search
(analysis.shape_search) → predicted vs measured block efficiency: every shape contained in the
recorded config is replayed exactly by analysis.subtree; the others need a live run, whose command
line is printed. ``recommend_section`` renders the result for the analysis report.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from replay.cliopts import JSON_OBJECT_HELP, add_dump_input, add_no_progress
from replay.commands import add_dump_options, options_from_args
from replay.config import TreeConfig
from replay.errors import SpecReplayError
from replay.pathcheck import input_file
from replay.progress import progress_enabled
from replay.live.grid import grid_item
from replay.replayer import DirectoryReplay, RoundResult, replay_directory
from replay.sources import require_dump_source

from .costmodel import CostModel
from .shape_model import DEFAULT_MIN_COUNT, Z95, ShapeModel, Visits, bootstrap_models, collect_visits, estimate_model
from .shape_search import Path, SearchResult, Shape, engine_paths, expected_accepted, render_shape, search_shapes
from .subtree import contained_configs, is_contained, replay_subconfig_all


@dataclass(frozen=True)
class Measured:
    """A measured accepted length (bonus excluded) of one config on recorded rounds.

    ``mean_accepted`` and its standard error ``se`` are over the ``rounds`` decided rounds. When the
    dump cannot decide ``undecidable`` further rounds, ``lower`` / ``upper`` are the mean over all
    rounds with each undecidable round at its lower / upper bound (both equal the mean otherwise).
    """

    mean_accepted: float
    se: float
    rounds: int
    how: str
    undecidable: int = 0
    lower: float | None = None
    upper: float | None = None

    @property
    def decided(self) -> bool:
        return self.undecidable == 0


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
        """Measured engine block efficiency (accepted + 1) over the decided rounds."""
        return None if self.measured is None else self.measured.mean_accepted + 1.0

    @property
    def measured_ci(self) -> tuple[float, float] | None:
        m = self.measured
        return None if m is None else (self.measured_be - Z95 * m.se, self.measured_be + Z95 * m.se)

    @property
    def measured_bounds(self) -> tuple[float, float] | None:
        """Engine block efficiency over all rounds, undecidable ones at their lower / upper bound."""
        m = self.measured
        if m is None:
            return None
        if m.decided:
            return self.measured_be, self.measured_be
        return m.lower + 1.0, m.upper + 1.0

    @property
    def error(self) -> float | None:
        """predicted − measured, only when every round is decided."""
        return None if self.measured is None or not self.measured.decided else self.predicted_be - self.measured_be

    @property
    def agree(self) -> bool | None:
        """|pred − meas| ≤ 1.96 · sqrt(se_pred² + se_meas²).

        With undecidable rounds the all-rounds mean is only known to lie between its bounds: the
        shape agrees when both bounds pass (then every value between them does), disagrees when
        both fail on the same side, and is not judged otherwise. The decided-rounds mean alone is
        never judged: it may be biased.
        """
        m = self.measured
        if m is None or not m.rounds:
            return None
        tol = Z95 * math.hypot(self.predicted_se, m.se) + 1e-12
        lo, hi = self.measured_bounds
        ok = [abs(self.predicted_be - v) <= tol for v in (lo, hi)]
        if all(ok):
            return True
        if not any(ok) and (self.predicted_be - lo) * (self.predicted_be - hi) > 0:
            return False
        return None

    def to_json(self) -> dict:
        m = self.measured
        return {
            "label": self.label,
            "config": self.config.to_json(),
            "nodes": self.nodes,
            "predicted_block_efficiency": self.predicted_be,
            "predicted_ci95": list(self.predicted_ci),
            "measured_block_efficiency": self.measured_be,
            "measured_ci95": None if m is None else list(self.measured_ci),
            "measured_rounds": None if m is None else m.rounds,
            "measured_undecidable_rounds": None if m is None else m.undecidable,
            "measured_bounds": None if m is None else list(self.measured_bounds),
            "measured_how": None if m is None else m.how,
            "error": self.error,
            "agree": self.agree,
        }


Measure = Callable[[TreeConfig], "Measured | None"]

CONTAINED_ROWS = 3  # best contained shapes added to the comparison besides the listed ones


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


def subtree_measure(results: Sequence[RoundResult], recorded: TreeConfig) -> Measure:
    """Exact measurements by analysis.subtree for every config contained in ``recorded``: each round
    replayed with the config and the recording's own selection rule, recorded early stops inherited
    (as ``specreplay compare`` does). Not contained (or no rounds): None, a live run is needed.
    """

    def measure(cfg: TreeConfig) -> Measured | None:
        if not results or not is_contained(cfg, recorded):
            return None
        outs = replay_subconfig_all(results, cfg, 0.0, None, recorded.gamma)
        mean, se = mean_se([o.lower for o in outs if o.decided])
        lower = float(np.mean([o.lower for o in outs]))
        upper = float(np.mean([o.upper for o in outs]))
        decided = sum(o.decided for o in outs)
        return Measured(mean, se, decided, "exact replay of the contained config (analysis.subtree)", len(outs) - decided, lower, upper)

    return measure


def best_contained(model: ShapeModel, recorded: TreeConfig, budget: int, max_depth: int, count: int = 3) -> list[TreeConfig]:
    """The ``count`` configs contained in ``recorded`` with the highest modelled block efficiency
    within the node budget and depth cap: the best shapes the dump itself can check exactly."""
    fits = [c for c in contained_configs(recorded) if c.num_nodes <= budget and c.gamma <= max_depth]
    value = {c: expected_accepted(engine_paths(c, model), model) for c in fits}
    return sorted(fits, key=lambda c: (-round(value[c], 12), c.num_nodes, c.gamma))[:count]


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
    cost: CostModel | None
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
    cost: CostModel | None = None,
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
        labels: dict[tuple, tuple[TreeConfig, str]] = {_key(rep.tree): (rep.tree, "recorded")}
        for prefix, configs in (("BE", [x.config for x in result.by_block_efficiency]), ("speed", [x.config for x in result.by_speedup])):
            for k, cfg in enumerate(configs):
                labels.setdefault(_key(cfg), (cfg, f"{prefix}#{k + 1}"))
        # the best shapes this dump can check exactly, besides those already listed
        extra = [c for c in best_contained(model, rep.tree, budget, depth, len(labels) + CONTAINED_ROWS) if _key(c) not in labels]
        labels.update({_key(c): (c, f"contained#{k + 1}") for k, c in enumerate(extra[:CONTAINED_ROWS])})
        labels[_key(rep.tree)] = labels.pop(_key(rep.tree))  # the recorded row last, as a reference
        rows = compare_predictions(model, [c for c, _ in labels.values()], subtree_measure(rep.results, rep.tree), boots=boots)
        comparisons += [replace(row, label=label) for row, (_, label) in zip(rows, labels.values())]
        comparisons.append(recorded_trees_check(model, rep.results, boots, "recorded trees"))
    if depth > model.depths or model.extrapolated.any():
        notes.append(f"depths beyond {int((~model.extrapolated).sum()) - 1} are extrapolated from the deepest estimated depth")
    if not result.all_exact:
        notes.append("some shapes are not certified optimal (rank-dependent model): value shown with the relaxation bound")
    return Recommendation(
        tuple(r.directory for r in replays), model, result, tuple(comparisons), tuple(r.tree for r in usable),
        visits.num_rounds, sum(len(r.skipped) for r in replays), cost, tuple(notes),
    )


def _key(cfg: TreeConfig) -> tuple:
    return cfg.top_k_spec, cfg.top_head


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


def measured_cells(c: Comparison) -> tuple[str, str, str]:
    """(measured BE [95% CI], error, verdict) as the text table and the report show them."""
    m = c.measured
    if m is None:
        return "not contained", "", "live run needed (command below)"
    lo, hi = c.measured_ci
    meas = f"{c.measured_be:.3f} [{lo:.3f},{hi:.3f}]" if m.rounds else "no decided round"
    if not m.decided:
        b_lo, b_hi = c.measured_bounds
        total = m.rounds + m.undecidable
        bounds = f"{m.undecidable}/{total} rounds undecidable, all rounds {b_lo:.3f}..{b_hi:.3f}"
        verdict = {True: "yes (both bounds)", False: "NO (both bounds)", None: "not judged"}[c.agree]
        return meas, "", f"{verdict}: {bounds}"
    return meas, f"{c.error:+.3f}", "yes" if c.agree else "NO"


def comparison_lines(rows: Sequence[Comparison]) -> list[str]:
    head = f"  {'shape':<14} {'config':<26} {'nodes':>5}  {'predicted BE [95% CI]':<24} {'measured BE [95% CI]':<24} {'error':>7}  agree"
    out = [head]
    for c in rows:
        lo, hi = c.predicted_ci
        pred = f"{c.predicted_be:.3f} [{lo:.3f},{hi:.3f}]"
        meas, err, ok = measured_cells(c)
        out.append(f"  {c.label:<14} {c.config.short():<26} {c.nodes:>5}  {pred:<24} {meas:<24} {err:>7}  {ok}")
    return out


def live_command(rec: Recommendation) -> str | None:
    """The ``specreplay sweep`` command that measures, live, every listed shape a replay cannot."""
    todo = list(dict.fromkeys(grid_item(c.config) for c in rec.comparisons if c.measured is None))
    if not todo:
        return None
    return (
        f'specreplay sweep --draft DRAFT --target TARGET --prompts PROMPTS --grid "{";".join(todo)}" '
        f"--max-new-tokens 64 --out runs/shapes_b{rec.search.budget}"
    )


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
    lines += ["", "prediction vs exact replay (block efficiency = accepted + 1; measured over decided rounds):",
              *comparison_lines(rec.comparisons)]
    cmd = live_command(rec)
    if cmd:
        lines += ["", "shapes not contained in the recorded config need a live run (DRAFT, TARGET, PROMPTS: yours; "
                  "results.csv holds each shape's block efficiency):", "  " + cmd]
    lines += [f"note: {n}" for n in rec.notes]
    return lines


def finite_json(obj):
    """NaN/inf (a shape with no decided round) become null: strict JSON parsers reject NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


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
        "live_command": live_command(rec),
        "notes": list(rec.notes),
    }


def recommend_section(rec: Recommendation, title: str = "Tree-shape recommendation") -> str:
    """An HTML fragment for the analysis report: top shapes, best tree, prediction vs replay."""
    esc = html.escape
    s = rec.search
    ranked = [(f"BE#{k + 1}", x) for k, x in enumerate(s.by_block_efficiency)] + [(f"speed#{k + 1}", x) for k, x in enumerate(s.by_speedup)]
    rows = "".join(
        f"<tr><td>{label}</td><td><code>{esc(config_line(x.config))}</code></td><td>{x.num_nodes}</td>"
        f"<td>{x.expected_block_efficiency:.3f}</td><td>{'' if x.speedup is None else f'{x.speedup:.3f}'}</td>"
        f"<td>{'exact' if x.exact else f'≤ {x.upper_bound + 1:.3f}'}</td></tr>"
        for label, x in ranked
    )
    best = s.by_speedup[0] if s.by_speedup else s.by_block_efficiency[0]
    comp = "".join(
        f"<tr><td>{esc(c.label)}</td><td>{esc(c.config.short())}</td><td>{c.nodes}</td>"
        f"<td>{c.predicted_be:.3f} [{c.predicted_ci[0]:.3f}, {c.predicted_ci[1]:.3f}]</td>"
        + "".join(f"<td>{esc(x)}</td>" for x in measured_cells(c))
        + "</tr>"
        for c in rec.comparisons
    )
    cmd = live_command(rec)
    live = f"<p>Shapes not contained in the recorded config need a live run:</p><pre>{esc(cmd)}</pre>" if cmd else ""
    cost = f" Modelled speedup with the cost model {esc(rec.cost.source)} (docs/analysis.md)." if rec.cost else ""
    notes = "".join(f"<li>{esc(n)}</li>" for n in rec.notes)
    return (
        f"<section class='shape-search'><h3>{esc(title)}</h3>"
        f"<p>{rec.rounds} rounds; budget {s.budget} nodes, max depth {s.max_depth}. Expected block efficiency "
        "= expected accepted length + 1, from per-depth, per-rank acceptance (docs/shape-search.md)." + cost + "</p>"
        "<table><tr><th>rank</th><th>config</th><th>nodes</th><th>E[block_efficiency]</th><th>speedup</th><th>optimality</th></tr>"
        f"{rows}</table><h4>Best shape {esc(best.config.short())}</h4><pre>{esc(chr(10).join(render_shape(best, rec.model)))}</pre>"
        "<h4>Prediction vs exact replay</h4><p>Every shape contained in the recorded config is replayed exactly "
        "(analysis.subtree); with undecidable rounds, agreement is judged on the bounds of the all-rounds mean (both must agree).</p>"
        "<table><tr><th>shape</th><th>config</th><th>nodes</th><th>predicted BE [95% CI]</th>"
        f"<th>measured BE [95% CI]</th><th>error</th><th>agree</th></tr>{comp}</table>{live}"
        f"{'<ul>' + notes + '</ul>' if notes else ''}</section>"
    )


# -- CLI --------------------------------------------------------------------------------------

EPILOG = """\
examples:
  specreplay recommend sample_dumps/synthetic_article --budget 12
  specreplay recommend DUMP1 DUMP2 --budget 16 --max-depth 5 --cost cost_curve.json
  specreplay recommend DUMP --budget 16 --verify-cost 0.35,0.04 --draft-cost 0.02 --json   # one JSON object

Cost curve JSON (the live harness writes it): {"tokens": [1, 2, 4, ...], "verify_s": [...], "draft_step_s": x}.
Shapes contained in the recorded config are replayed exactly (analysis.subtree); for the others a
`specreplay sweep` command line is printed. Speedup and cost model: docs/analysis.md.
Exit status: 0; 1 when rounds were skipped (listed) or a measured shape disagrees with its
prediction; 2 on errors.
"""


def parse_pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
        return a, b
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A,B (seconds), got {text!r}") from None


def cost_from_args(args: argparse.Namespace) -> CostModel | None:
    if args.cost and args.verify_cost:
        raise SpecReplayError("give either --cost FILE or --verify-cost A,B, not both")
    if args.cost:
        curve = CostModel.load(args.cost)
        return curve if args.draft_cost is None else curve.with_draft_step(args.draft_cost)
    if args.verify_cost:
        return CostModel.linear(*args.verify_cost, args.draft_cost or 0.0)
    if args.draft_cost is not None:
        raise SpecReplayError("--draft-cost needs --verify-cost A,B or --cost FILE")
    return None


def run_recommend(args: argparse.Namespace) -> int:
    for d in args.dir:
        require_dump_source(d)
    cost = cost_from_args(args)
    opts = options_from_args(args)
    from .runs import load_runs

    replays = [run.replay for run in load_runs(args.dir, opts, progress=progress_enabled(args.no_progress))]
    rec = recommend(replays, args.budget, args.max_depth, cost, args.top, args.min_count, args.bootstrap, args.seed)
    if args.json:
        sys.stdout.write(json.dumps(finite_json(recommendation_json(rec)), allow_nan=False) + "\n")
    else:
        sys.stdout.write("\n".join(render_recommendation(rec)) + "\n")
    for rep in replays:
        for sk in rep.skipped:
            print(f"specreplay: skipped {sk.what}: {sk.reason}", file=sys.stderr)
    skipped = any(rep.skipped for rep in replays)
    return 1 if skipped or any(c.agree is False for c in rec.comparisons) else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "recommend",
        help="recommend topKSpec/topHead for a node budget from measured acceptance",
        description="Estimate acceptance by depth and rank from replayed dumps, search the static tree shapes "
        "within a node budget exactly, and compare predicted with replayed block efficiency.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dump_input(p, many=True, help="dump directories or packed runs (pooled)")
    p.add_argument("--budget", type=int, required=True, help="draft nodes per tree (root excluded)")
    p.add_argument("--max-depth", type=int, default=None, help="maximum gamma (default: deepest recorded tree)")
    p.add_argument("--cost", type=input_file, help="measured cost curve JSON")
    p.add_argument("--verify-cost", type=parse_pair, help="A,B: t_verify(k) = A + B*k seconds")
    p.add_argument("--draft-cost", type=float, default=None, help="seconds per draft step")
    p.add_argument("--top", type=int, default=5, help="shapes to list per objective")
    p.add_argument("--min-count", type=int, default=DEFAULT_MIN_COUNT, help="visits below which a rank row is pooled")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples for prediction intervals")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--json", action="store_true", help=JSON_OBJECT_HELP)
    add_dump_options(p)
    add_no_progress(p)
    p.set_defaults(func=run_recommend)
