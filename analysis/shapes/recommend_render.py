"""``recommend``'s output: the text report, the JSON object and the HTML section of a Recommendation.

Everything here formats what analysis.shapes.recommend computed; nothing is estimated or searched again.
The CLI (replay.cli.cmd_recommend) prints ``render_recommendation`` or ``recommendation_json``; the
analysis report embeds ``recommend_section``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

from analysis.tables.intervals import wilson
from replay.core.config import TreeConfig, grid_item
from replay.core.vocab import DEPTH_RULE
from replay.io.skipped import describe_skipped

from .model import ShapeModel, step_rows
from .paths import Shape, render_shape
from .recommend import Recommendation, ShapeCheck, depth_table


def config_line(cfg: TreeConfig) -> str:
    """A shape's config as every output writes it (the canonical form, e.g. ``[3]|[2,1,1]|[1]``);
    --json keeps the config's JSON object."""
    return cfg.short()


def shape_line(k: int, s: Shape) -> str:
    cert = "exact" if s.exact else f"bound {s.upper_bound + 1:.3f}"
    extra = f"  speedup {s.speedup:.3f}x (round {s.round_time_s * 1e3:.1f} ms)" if s.speedup is not None else ""
    flag = ("  [extrapolated depth]" if s.extrapolated else "") + ("  [pooled]" if s.pooled else "")
    return (
        f"{k}. {config_line(s.config)}\n"
        f"   nodes {s.num_nodes}, depth {s.depth}: E[accepted] {s.expected_accepted:.3f}, "
        f"E[block_efficiency] {s.expected_block_efficiency:.3f} ({cert}){extra}{flag}"
    )


def model_lines(model: ShapeModel, extrapolate: bool = False, ranks: int = 4) -> list[str]:
    """Per depth: visits and the pooled-over-q acceptance by child rank with Wilson intervals.

    Model row d (the parent at level d, docs/shape-search.md's p[d, q, r]) is printed as depth d + 1:
    the draft token it accepts, the numbering of ``stats`` (replay.core.vocab.DEPTH_RULE)."""
    lines = [
        f"  acceptance by depth ({DEPTH_RULE}):",
        (
            "  visits = rounds whose path reached depth d − 1 at an expanded node with a target row; "
            "r<k> = share of them whose d-th token is the draft's rank-k candidate [95% Wilson interval]"
        ),
    ]
    table = depth_table(model)
    for d in range(model.depths):
        why = _no_estimate(model, extrapolate) if model.extrapolated[d] else ""
        if table is None or d >= table[0].shape[0]:
            lines.append(
                f"  depth {d + 1}: no visit; p = " + ", ".join(f"{x:.3f}" for x in model.p[d, 0, :ranks]) + why
            )
            continue
        n, k = table[0][d], table[1][d]
        lo, hi = wilson(k[:ranks], n)
        cells = [f"r{r} {k[r] / max(n, 1):.3f} [{lo[r]:.3f},{hi[r]:.3f}]" for r in range(min(ranks, model.cols))]
        pooled = int(model.pooled[d].sum())
        lines.append(
            f"  depth {d + 1}: {int(n)} visits; " + "; ".join(cells) + f"; {pooled}/{model.cols} q-rows pooled{why}"
        )
    stops = early_stop_line(model)
    return lines + ([stops] if stops else [])


def early_stop_line(model: ShapeModel) -> str | None:
    """How early stops enter the values (model.continuation), with the counts behind each share; None
    when no round stopped early (then every share is 1)."""
    src = model.source
    if src is None or not src.stopped.any():
        return None
    went, could = step_rows(src.went_on.sum(axis=0), src.stopped.sum(axis=0), model.depths)
    shares = []
    for d in range(1, model.depths):
        told = f"{int(went[d])}/{int(could[d])} = " if could[d] else "no round could, reused: "
        shares.append(f"step {d} {told}{model.go_on[d]:.3f}")  # draft_step_d: the nodes of depth d + 1
    return (
        f"  early stops: {int(src.stopped.sum())} of {src.num_rounds} rounds stopped drafting before gamma with their path "
        "still accepted; of the rounds whose path reached depth d and that could go on, the share that ran "
        "draft step d (draft_step_d, the nodes of depth d + 1): "
        + ", ".join(shares)
        + " (a node counts only where its step runs: its P and the shapes' E[accepted] "
        "include the shares up to its depth)"
    )


def _no_estimate(model: ShapeModel, extrapolate: bool) -> str:
    """Why model row d is not estimated, and what the search does about it (with or without --extrapolate)."""
    deepest = model.supported_depth  # visits only shrink with depth: the deepest estimated depth is the one reused
    few = f"fewer than {model.min_count} visits (--min-count)"
    if extrapolate:
        return f"  ({few}: --extrapolate uses depth {deepest}'s estimate here)"
    return f"  ({few}: no estimate, so the search stops at depth {deepest}; --extrapolate would reuse depth {deepest}'s estimate)"


def measured_cells(c: ShapeCheck) -> tuple[str, str, str]:
    """(measured BE [95% CI], error, verdict) as the text table and the report show them."""
    m = c.measured
    if m is None:
        return "not contained", "", "live run needed (command below)"
    lo, hi = c.measured_ci
    meas = f"{c.measured_be:.3f} [{lo:.3f},{hi:.3f}]" if m.rounds else "no decided round"
    if m.rounds and not (math.isfinite(lo) and math.isfinite(hi)):  # one round: no spread to build a CI from
        meas = f"{c.measured_be:.3f} [CI n/a: {m.rounds} round{'' if m.rounds == 1 else 's'}]"
        if m.decided and c.predicted_be is not None:
            return meas, f"{c.error:+.3f}", "not judged (no interval from one round)"
    if not m.decided:
        b_lo, b_hi = c.measured_bounds
        total = m.rounds + m.undecidable
        bounds = f"{m.undecidable}/{total} rounds undecidable, all rounds {b_lo:.3f}..{b_hi:.3f}"
        verdict = {True: "yes (both bounds)", False: "NO (both bounds)", None: "not judged"}[c.agree]
        return meas, "", f"{verdict}: {bounds}"
    if c.predicted_be is None:
        return meas, "", "not judged (no prediction)"
    return meas, f"{c.error:+.3f}", "yes" if c.agree else "NO"


def predicted_cell(c: ShapeCheck) -> str:
    if c.predicted_be is None:
        return "refused"
    lo, hi = c.predicted_ci
    return f"{c.predicted_be:.3f} [{lo:.3f},{hi:.3f}]"


def comparison_lines(rows: Sequence[ShapeCheck]) -> list[str]:
    head = f"  {'shape':<14} {'config':<26} {'nodes':>5}  {'predicted BE [95% CI]':<24} {'measured BE [95% CI]':<24} {'error':>7}  agree"
    out = [head]
    for c in rows:
        meas, err, ok = measured_cells(c)
        out.append(
            f"  {c.label:<14} {c.config.short():<26} {c.nodes:>5}  {predicted_cell(c):<24} {meas:<24} {err:>7}  {ok}"
        )
    for c in rows:
        if c.refused:
            out.append(f"  {c.label}: no prediction: {c.refused}")
    return out


def live_command(rec: Recommendation) -> str | None:
    """The ``specreplay sweep`` command that measures, live, every listed shape a replay cannot."""
    todo = list(dict.fromkeys(grid_item(c.config) for c in rec.comparisons if c.measured is None))
    if not todo:
        return None
    return (
        f'specreplay sweep --draft DRAFT --target TARGET --prompts PROMPTS --grid "{";".join(todo)}" '
        f"--max-new-tokens 64 -o shapes_b{rec.search.budget}"
    )


def render_recommendation(rec: Recommendation) -> list[str]:
    s = rec.search
    order = (
        "the draft's recorded scores" if rec.model.draft_logp is not None else "the acceptance model (no draft scores)"
    )
    lines = [
        f"model: {rec.rounds} rounds from {', '.join(rec.directories)} (skipped: {describe_skipped(rec.skipped_items)}), "
        f"{rec.model.cols} recorded draft columns, min_count {rec.model.min_count}; engine order from {order}",
        *model_lines(rec.model, rec.extrapolate),
        "",
        f"top shapes by expected block efficiency (the best shape per node count; budget {s.budget} nodes, "
        f"{rec.depth_text()}; search: exact branch and bound over configs, {s.states} states, see docs/shape-search.md):",
    ]
    lines += [shape_line(k + 1, x) for k, x in enumerate(s.by_block_efficiency)]
    if s.by_speedup:
        lines += ["", f"top shapes by modelled speedup (cost: {rec.cost.source if rec.cost else ''}):"]
        lines += [shape_line(k + 1, x) for k, x in enumerate(s.by_speedup)]
    best = s.by_speedup[0] if s.by_speedup else s.by_block_efficiency[0]
    lines += ["", f"best shape {best.config.short()} (rank paths; P = modelled acceptance probability):"]
    lines += ["  " + x for x in render_shape(best, rec.model)]
    lines += [
        "",
        "prediction vs exact replay (block efficiency = accepted + 1; measured over decided rounds):",
        *comparison_lines(rec.comparisons),
    ]
    cmd = live_command(rec)
    if cmd:
        lines += [
            "",
            "shapes not contained in the recorded config need a live run (DRAFT, TARGET, PROMPTS: yours; "
            "results.csv holds each shape's block efficiency):",
            "  " + cmd,
        ]
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
            "pooled": x.pooled,
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
        "requested_max_depth": rec.max_depth,
        "model": {
            "depths": list(
                range(1, m.depths + 1)
            ),  # row i of p, visits, ...: depth i + 1 (replay.core.vocab.DEPTH_RULE)
            "p": m.p.tolist(),
            "ci95_low": m.lo.tolist(),
            "ci95_high": m.hi.tolist(),
            "visits": m.visits.tolist(),
            "pooled": m.pooled.tolist(),
            "extrapolated": m.extrapolated.tolist(),
            "go_on": None if m.go_on is None else m.go_on.tolist(),
            "supported_depth": m.supported_depth,
            "draft_logp": None
            if m.draft_logp is None
            else np.where(np.isfinite(m.draft_logp), m.draft_logp, np.nan).tolist(),
            "min_count": m.min_count,
        },
        "search": {
            "states": rec.search.states,
            "finished": rec.search.all_exact,
            "bound_block_efficiency": rec.search.bound + 1.0,
        },
        "cost": None if rec.cost is None else rec.cost.to_json(),
        "by_block_efficiency": [shape(x) for x in rec.search.by_block_efficiency],
        "by_speedup": [shape(x) for x in rec.search.by_speedup],
        "comparisons": [c.to_json() for c in rec.comparisons],
        "live_command": live_command(rec),
        "notes": list(rec.notes),
        "seconds": dict(rec.seconds),
    }


def recommend_section(rec: Recommendation, title: str = "Tree-shape recommendation") -> str:
    """An HTML fragment for the analysis report: top shapes, best tree, prediction vs replay."""
    esc = html.escape
    s = rec.search
    ranked = [(f"BE#{k + 1}", x) for k, x in enumerate(s.by_block_efficiency)] + [
        (f"speed#{k + 1}", x) for k, x in enumerate(s.by_speedup)
    ]
    rows = "".join(
        f"<tr><td>{label}</td><td><code>{esc(config_line(x.config))}</code></td><td>{x.num_nodes}</td>"
        f"<td>{x.expected_block_efficiency:.3f}</td><td>{'' if x.speedup is None else f'{x.speedup:.3f}'}</td>"
        f"<td>{'exact' if x.exact else f'≤ {x.upper_bound + 1:.3f}'}</td></tr>"
        for label, x in ranked
    )
    best = s.by_speedup[0] if s.by_speedup else s.by_block_efficiency[0]
    comp = "".join(
        f"<tr><td>{esc(c.label)}</td><td>{esc(c.config.short())}</td><td>{c.nodes}</td>"
        f"<td>{esc(predicted_cell(c))}</td>" + "".join(f"<td>{esc(x)}</td>" for x in measured_cells(c)) + "</tr>"
        for c in rec.comparisons
    )
    cmd = live_command(rec)
    live = f"<p>Shapes not contained in the recorded config need a live run:</p><pre>{esc(cmd)}</pre>" if cmd else ""
    cost = f" Modelled speedup with the cost model {esc(rec.cost.source)} (docs/analysis.md)." if rec.cost else ""
    notes = "".join(f"<li>{esc(n)}</li>" for n in rec.notes)
    return (
        f"<section class='shape-search'><h3>{esc(title)}</h3>"
        f"<p>{rec.rounds} rounds; budget {s.budget} nodes, {esc(rec.depth_text())}. Expected block efficiency "
        "= expected accepted length + 1, from per-depth, per-rank acceptance; the best shape per node count "
        "(docs/shape-search.md)." + cost + "</p>"
        "<table><tr><th>rank</th><th>config</th><th>nodes</th><th>E[block_efficiency]</th><th>speedup</th><th>optimality</th></tr>"
        f"{rows}</table><h4>Best shape {esc(best.config.short())}</h4><pre>{esc(chr(10).join(render_shape(best, rec.model)))}</pre>"
        "<h4>Prediction vs exact replay</h4><p>Every shape contained in the recorded config is replayed exactly "
        "(analysis.compare.subtree); with undecidable rounds, agreement is judged on the bounds of the all-rounds mean (both must agree).</p>"
        "<table><tr><th>shape</th><th>config</th><th>nodes</th><th>predicted BE [95% CI]</th>"
        f"<th>measured BE [95% CI]</th><th>error</th><th>agree</th></tr>{comp}</table>{live}"
        f"{'<ul>' + notes + '</ul>' if notes else ''}</section>"
    )
