"""A self-contained HTML report of one or more runs: configs, every table and plot, offline
comparison of tree configs, dynamic-gamma strategies and the tree-shape recommendation. Images are embedded (base64 PNG or
inline SVG); the page loads nothing from outside and reads offline.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.compare.batch import compare_run, simulate_run_strategies
from analysis.compare.configs import (
    beyond_recorded_notes,
    compare_display,
    runs_side_by_side,
    speed_row,
    strategies_display,
    with_speed,
)
from analysis.compare.gamma_strategies import STRATEGY_NAMES
from analysis.compare.subtree import fit_levels
from analysis.cost.model import CostModel
from analysis.cost.source import cost_warning, run_cost
from analysis.cost.timings import measured_speedup, read_timings, speedup_warnings
from analysis.shapes.recommend import recommend, recommend_runs
from analysis.shapes.recommend_render import recommend_section
from analysis.tables.build import Tables, build_tables, export_tables
from analysis.tables.definitions import DEFINITIONS, SUMMARY_NAMES, definitions_rows, label
from analysis.tables.metrics import DEPTH_HEADER, all_metrics, depth_display, derived_notes, static_shape
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig
from replay.io.grouping import Key, describe_skipped
from replay.util.errors import SpecReplayError

from . import plots, treeplot
from .example_round import example_round


@dataclass(frozen=True)
class ReportOptions:
    configs: Sequence[TreeConfig] | None = None  # configs to compare offline; None: default_comparison_configs
    cost: CostModel | None = None  # None: each run's own (analysis.cost.source: measured timings, else the default)
    strategies: Sequence[int] = tuple(STRATEGY_NAMES)
    ema_window: int | None = None  # None: the run's emaWindow setting, else 1
    gamma_threshold: float | None = None  # None: each config's own
    decode: Callable[[int], str] | None = None  # token text for the round pictures
    image_format: str = "png"  # "png" (base64) or "svg" (inline)
    title: str = "specreplay report"
    budget: int | None = None  # tree-shape recommendation node budget; None: the recorded config's nodes
    max_depth: int | None = None  # its depth cap; None: the recorded gamma
    recommend: bool = True  # include the tree-shape recommendation
    example_round: Key | None = (
        None  # round to draw per run; None: a typical failing round (analysis.report.example_round)
    )
    progress: Callable[[int, int], None] | None = field(default=None, compare=False)


def default_comparison_configs(cfg: TreeConfig) -> list[TreeConfig]:
    """The recorded config and a few contained ones an engineer would try first: shallower
    (each gamma), narrower root, one head per step, and the top-1 chain."""
    out = [cfg]
    for g in range(cfg.gamma - 1, 0, -1):
        out.append(TreeConfig.from_lists(cfg.top_k_spec[:g], cfg.top_head[:g], cfg.tree_type, cfg.gamma_threshold))
    root = cfg.top_k_spec[0][0]
    for w in sorted({max(1, root - 2), max(1, (root + 1) // 2)}, reverse=True):
        if w < root:  # a narrower root feeds fewer parents to step 1: fit_levels drops the heads it no longer has
            out.append(fit_levels([[w], *cfg.top_k_spec[1:]], cfg.top_head, cfg))
    if any(h > 1 for h in cfg.top_head):
        out.append(
            TreeConfig.from_lists([[r[0]] for r in cfg.top_k_spec], [1] * cfg.gamma, cfg.tree_type, cfg.gamma_threshold)
        )
    out.append(TreeConfig.from_lists([[1]] * cfg.gamma, [1] * cfg.gamma, cfg.tree_type, cfg.gamma_threshold))
    seen, unique = set(), []
    for c in out:
        key = (c.short(), c.top_head)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;color:#222;line-height:1.4}
h1{border-bottom:2px solid #444;padding-bottom:4px} h2{margin-top:36px;border-bottom:1px solid #bbb}
table{border-collapse:collapse;font-size:12px;margin:8px 0 16px} th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f0f0f0} td:first-child,th:first-child{text-align:left}
pre{background:#f7f7f7;border:1px solid #ddd;padding:8px;font-size:12px;overflow-x:auto}
figure{margin:12px 0} figure img,figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12px;color:#555} .note{color:#8a5a00} dt{font-weight:bold;margin-top:6px} dd{margin-left:18px}
"""

GLOSSARY_TERMS = [  # words that are not metrics; every metric's definition comes from analysis.tables.definitions
    ("accepted length L", "draft tokens on the single accepted root-to-leaf path; the bonus token is not counted"),
    (
        "rank of hit",
        "draft rank of the target's choice among the path node's recorded candidates: kept (hit), beyond the kept width (near miss: widen topKSpec), or not recorded",
    ),
    (
        "topHead signal",
        "whether the path's node at depth d was expanded, at which slot, or its level rank when not (topHead[d] ≥ rank+1 would have expanded it)",
    ),
    (
        "undecidable round",
        "the offline replay of a config would need a draft row or score the dump does not hold; counted at the lower bound in *_lo and the upper bound in *_hi",
    ),
    (
        "typical failing round",
        "the round drawn per run: among rounds that stopped on a mismatch, the middle one (dump order) of the most common accepted length",
    ),
]

_SPEED_HEADERS = {
    "modelled_speedup": "modelled speedup",
    "cost_source": "cost model",
    **{n: label(n) for n in ("measured_speedup", "measured_speedup_wall")},
    "measured_status": "measured?",
}


def _figure_html(fig, caption: str, fmt: str) -> str:
    buf = io.BytesIO()
    if fmt == "svg":
        fig.savefig(buf, format="svg", bbox_inches="tight")
        svg = buf.getvalue().decode("utf-8")
        svg = svg[svg.find("<svg") :]  # drop the XML prolog and doctype: inline SVG must not carry them
        body = svg
    else:
        fig.savefig(buf, format="png", dpi=plots.DPI, bbox_inches="tight")
        body = f'<img alt="{html.escape(caption)}" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode("ascii")}">'
    return f"<figure>{body}<figcaption>{html.escape(caption)}</figcaption></figure>"


def _table_html(df: pd.DataFrame, index: bool = False) -> str:
    if df is None or len(df) == 0:
        return "<p><em>(empty)</em></p>"
    return df.to_html(index=index, escape=True, na_rep="–", float_format=lambda v: f"{v:.4g}", border=0)


def _compact_json(obj) -> str:
    """One key per line, lists inline: configs stay readable at a glance."""
    if isinstance(obj, dict):
        return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()) + "\n}"
    return json.dumps(obj)


def _h(text: str) -> str:
    return html.escape(str(text))


def build_report(
    runs: Sequence[LabelledRun], opts: ReportOptions = ReportOptions()
) -> tuple[str, dict[str, pd.DataFrame]]:
    """(the HTML page, every table by name) for ``runs``."""
    costs = {run.label: run_cost(run.replay.directory, run.replay.manifest, opts.cost) for run in runs}
    timings = {run.label: read_timings(run.replay.directory, run.replay.manifest) for run in runs}
    measured = {name: measured_speedup(t) for name, t in timings.items()}
    suspicious = {name: speedup_warnings(name, timings[name], measured[name]) for name in timings}
    fmt = opts.image_format
    tables: Tables = build_tables(runs)
    metrics = all_metrics(tables)
    out_tables: dict[str, pd.DataFrame] = {"rounds": tables.rounds, "nodes": tables.nodes, **metrics}
    parts: list[str] = []
    add = parts.append
    stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    add(f"<h1>{_h(opts.title)}</h1><p>{len(runs)} run(s), {len(tables.rounds)} rounds in all; generated {stamp}.</p>")

    add("<h2>Runs and configs</h2>")
    for run in runs:
        rep = run.replay
        add(
            f"<h3>{_h(run.label)}</h3><p>directory <code>{_h(rep.directory)}</code>; config from <code>{_h(rep.config_source)}</code>; "
            f"{len(rep.results)} rounds replayed, skipped: {describe_skipped(rep.skipped)}.</p>"
        )
        add(f"<pre>{_h(_compact_json(rep.config.to_json()))}</pre>")
        if rep.config.unknown:
            add(f"<p class='note'>config keys not used by the replay (kept): {_h(dict(rep.config.unknown))}</p>")
        src = rep.manifest.body.get("source") if rep.manifest.body else None
        if src:
            add(f"<p>manifest source: {_h(src)}</p>")
        for note in rep.notes:
            add(f"<p class='note'>note: {_h(note)}</p>")
        fallback = int((tables.rounds[tables.rounds["run"] == run.label]["selection"].str.contains("fallback")).sum())
        if fallback:
            add(
                f"<p class='note'>WARNING: {fallback} round(s) had no scores and no parents; expanded nodes were chosen by the rank-major fallback.</p>"
            )
        if rep.skipped:
            items = "".join(f"<li>{_h(s.what)}: {_h(s.reason)}</li>" for s in rep.skipped[:50])
            more = f"<li>… {len(rep.skipped) - 50} more</li>" if len(rep.skipped) > 50 else ""
            add(
                f"<details><summary>skipped ({describe_skipped(rep.skipped)})</summary><ul>{items}{more}</ul></details>"
            )

    add("<h2>Summary</h2>")
    if len(runs) > 1:
        side = runs_side_by_side(tables.rounds)
        out_tables["runs_side_by_side"] = side.reset_index()
        add(
            _table_html(side.reset_index())
        )  # the index's name would be a header row of its own, empty but for "metric"
    else:
        add(_table_html(metrics["summary"]))
    for note in derived_notes(metrics["summary"]):  # an acceptance length the dump cannot show is said to be derived
        add(f"<p class='note'>note: {_h(note)}</p>")
    add(
        "<details><summary>what the summary rows mean</summary>"
        + _table_html(pd.DataFrame(definitions_rows(SUMMARY_NAMES)))
        + "</details>"
    )

    add("<h2>Speedup: measured and modelled</h2>")
    add(
        "<p>Modelled: the recorded rounds under the run's cost model (Σ (L<sub>r</sub> + 1) · t_verify(1) / "
        "Σ (steps<sub>r</sub> · t_draft + t_verify(nodes<sub>r</sub> + 1))). Measured: the harness's timed run against "
        "target-only decoding of the same prompts (manifest totals), when the dump carries both timed together in one "
        "interleaved session (totals.timing); otherwise 'not comparable', with the reason. Decode only excludes prefill, "
        "end to end includes it. With the run's own timings modelled and decode-only measured come close: the model counts "
        "every committed token, the harness keeps those up to max_new_tokens.</p>"
    )
    speed = pd.DataFrame(
        [speed_row(run.label, run.results, costs[run.label], measured[run.label]) for run in runs if run.results]
    )
    out_tables["speedup"] = speed
    add(_table_html(speed.rename(columns=_SPEED_HEADERS)))
    for run in runs:
        warn = cost_warning(costs[run.label], run.label)
        if warn:
            add(f"<p class='note'>{_h(warn)}</p>")
        speedup = measured[run.label]
        if speedup is not None:
            add(f"<p>{_h(run.label)}: {_h(speedup.describe())}.</p>")
        for w in suspicious[run.label]:
            add(f"<p class='note'>{_h(w)}</p>")

    add("<h2>Accepted length</h2>")
    add(
        _figure_html(
            plots.plot_accepted_length(metrics["accepted_length"]),
            "Accepted-length histogram (fraction of rounds).",
            fmt,
        )
    )
    add(_table_html(metrics["accepted_length"]))

    add("<h2>Per-depth acceptance</h2>")
    add(
        _figure_html(
            plots.plot_depth_acceptance(metrics["depth_acceptance"]),
            "Conditional P(L ≥ d | L ≥ d−1) and per-position acceptance rate P(L ≥ d) (vLLM's name) per depth; "
            "whiskers: 95% Wilson interval over n rounds (written above); dashes: conditional when the node had children.",
            fmt,
        )
    )
    add(f"<p>{_h(DEPTH_HEADER)}; tables/depth_acceptance.csv holds each bound as a column.</p>")
    add(_table_html(depth_display(metrics["depth_acceptance"])))
    if len(runs) > 1:
        add(
            _figure_html(
                plots.plot_compare_runs(metrics["summary"], metrics["depth_acceptance"]), "Runs side by side.", fmt
            )
        )

    add("<h2>Rank of hit (topKSpec signal)</h2>")
    for run in runs:
        n = len(run.results)
        if not n:
            continue
        add(
            _figure_html(
                plots.plot_rank_heatmap(metrics["rank_of_hit"], metrics["hit_outcome"], run.label, run.config),
                f"{run.label}: draft rank of the target's token at each depth (left) and kept / beyond / not recorded (right).",
                fmt,
            )
        )
    add(_table_html(metrics["hit_outcome"]))
    add("<details><summary>rank-of-hit table</summary>" + _table_html(metrics["rank_of_hit"]) + "</details>")

    add("<h2>Expanded parents (topHead signal)</h2>")
    for run in runs:
        if len(run.results):
            add(
                _figure_html(
                    plots.plot_parent_slot(metrics["parent_slot"], run.label, len(run.results)),
                    f"{run.label}: slot of the expanded parent the accepted path went through, or the level rank of an unexpanded one.",
                    fmt,
                )
            )
    add(_table_html(metrics["parent_slot"]))

    add("<h2>Tree shape and per-slot hit frequency</h2>")
    sh = metrics["slot_hits"]
    for run in runs:
        if not len(run.results):
            continue
        add(
            _figure_html(
                treeplot.plot_tree_hits(static_shape(run.config), sh[sh["run"] == run.label], run.label, run.config),
                f"{run.label}: static shape coloured by how often each slot (depth, expanded parent in selection "
                "order, child rank) lay on the accepted path.",
                fmt,
            )
        )
        pick = example_round(run.results, opts.example_round)
        if pick is None:
            pick = example_round(run.results)
            missing = f"no round {opts.example_round[0]}_{opts.example_round[1]} in this run; "
        else:
            missing = ""
        add(
            _figure_html(
                treeplot.plot_round_tree(pick.result, opts.decode, run.label, pick.why),
                f"{run.label}: round {pick.result.name}: {missing}{pick.why}.",
                fmt,
            )
        )
    add("<details><summary>per-slot hit table (slot_hits)</summary>" + _table_html(sh) + "</details>")
    add(
        "<details><summary>per-node hit table (node_hits: nodes by their draft ranks from the root, "
        "B21 = top-1 child of A2)</summary>" + _table_html(metrics["node_hits"]) + "</details>"
    )

    add("<h2>Offline comparison of tree configs</h2>")
    add(
        "<p>Each config is replayed exactly on the recorded rounds; ranges are bounds from undecidable rounds. "
        "Speedups of configs that were not run can only be modelled; the recorded config's row also shows the measured one "
        "when the dump carries it.</p>"
    )
    comparisons, strategies = [], []
    for k, run in enumerate(runs):
        if not len(run.results):
            continue
        cost = costs[run.label]
        if (
            opts.configs
        ):  # they replace the default set; the run's own config first: every table starts from what was recorded
            configs = [run.config] + [
                c for c in opts.configs if (c.short(), c.top_head) != (run.config.short(), run.config.top_head)
            ]
        else:
            configs = default_comparison_configs(run.config)
        table, _ = compare_run(run, configs, cost, opts.gamma_threshold)
        table = with_speed(table, run.config, cost, measured[run.label])
        table.insert(0, "run", run.label)
        comparisons.append(table)
        add(f"<h3>{_h(run.label)}: recorded {_h(run.config.short())}</h3>")
        add(f"<p>Cost model: <strong>{_h(cost.source)}</strong> <code>{_h(json.dumps(cost.to_json()))}</code></p>")
        if cost_warning(cost, run.label):
            add(f"<p class='note'>{_h(cost_warning(cost, run.label))}</p>")
        for note in beyond_recorded_notes(table, configs, run.config, run.label):
            add(f"<p class='note'>note: {_h(note)}</p>")
        add(_table_html(compare_display(table.drop(columns=["run"]))))
        add(
            _figure_html(
                plots.plot_compare_configs(table, run.label, cost.source), f"{run.label}: offline comparison.", fmt
            )
        )
        window = opts.ema_window or int(run.replay.config.settings.get("emaWindow", 1) or 1)
        sims = simulate_run_strategies(run, run.config, opts.strategies, cost, window, opts.gamma_threshold)
        st = pd.DataFrame([s.to_row(cost) for s in sims])
        st.insert(0, "run", run.label)
        strategies.append(st)
        add(
            f"<p>Dynamic-gamma strategies on {_h(run.config.short())} (emaWindow {window}; the engine's gammaStrategy "
            f"{_h(run.replay.config.settings.get('gammaStrategy', 'not set'))}):</p>"
        )
        add(_table_html(strategies_display(st).drop(columns=["run", "config"])))
        if opts.progress:
            opts.progress(k + 1, len(runs))
    if comparisons:
        out_tables["compare"] = pd.concat(comparisons, ignore_index=True)
        out_tables["gamma_strategies"] = pd.concat(strategies, ignore_index=True)

    if opts.recommend:
        add("<h2>Tree-shape recommendation</h2>")
        add(
            "<p>Per run: the static shapes with the highest expected block efficiency for a node budget "
            "(default: the recorded config's nodes) and depth cap (default: the recorded gamma), from the "
            "acceptance measured by depth and rank; shapes contained in the recorded config are replayed "
            "exactly to check the prediction (docs/shape-search.md).</p>"
        )
        for run in runs:
            if not len(run.results):
                continue
            budget = run.config.num_nodes if opts.budget is None else opts.budget
            depth = run.config.gamma if opts.max_depth is None else opts.max_depth
            try:
                rec = _recommend(run, budget, depth, costs[run.label])
            except SpecReplayError as exc:
                add(f"<p class='note'>{_h(run.label)}: no recommendation: {_h(exc)}</p>")
                continue
            add(recommend_section(rec, run.label))

    add(
        "<h2>Definitions</h2><dl>"
        + "".join(
            f"<dt>{_h(d.name)} = {_h(d.formula)}</dt><dd>{_h(d.meaning)}{'; engines: ' + _h(d.engines) if d.engines else ''}</dd>"
            for d in DEFINITIONS
        )
        + "".join(f"<dt>{_h(a)}</dt><dd>{_h(b)}</dd>" for a, b in GLOSSARY_TERMS)
        + "</dl>"
    )
    add("<p>Full definitions and formulas: docs/analysis.md of specreplay.</p>")
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_h(opts.title)}</title><style>{_CSS}</style></head><body>" + "\n".join(parts) + "</body></html>"
    )
    return page, out_tables


def _recommend(run: LabelledRun, budget: int, depth: int, cost):
    """recommend on the batch path for a run loaded there (same result as from its RoundResults)."""
    options = getattr(run.replay, "options", None)
    if options is None:
        return recommend([run.replay], budget, depth, cost)
    return recommend_runs([run.replay.directory], options, budget, depth, cost)


def write_report(
    runs: Sequence[LabelledRun], out_dir: str | Path, opts: ReportOptions = ReportOptions(), tables: bool = True
) -> Path:
    """Write ``out_dir/index.html`` (and the tables as CSV + Parquet under ``out_dir/tables``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    page, all_tables = build_report(runs, opts)
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    if tables:
        export_tables({k: v for k, v in all_tables.items() if k != "runs_side_by_side"}, out_dir / "tables")
    return path
