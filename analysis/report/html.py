"""A self-contained HTML report of one or more runs: configs, every table and plot, offline
comparison of tree configs, dynamic-gamma strategies and the tree-shape recommendation. Images are embedded (base64 PNG or
inline SVG); the page loads nothing from outside and reads offline.

Here the page's content is computed (report_page); analysis.report.page holds it as data and
renders it, analysis.report.options says what it shows, analysis.report.sampling_curves makes its
temperature section, and analysis.report.report_dir writes it with its tables.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd
from markupsafe import Markup

from analysis.compare.batch import (
    ComparePart,
    ReadAlong,
    ema_window_of,
    priced_comparison,
    run_parts,
    simulate_run_strategies,
)
from analysis.compare.configs import (
    SPEEDUP_DIGITS,
    beyond_recorded_notes,
    compare_display,
    is_own_tree,
    runs_side_by_side,
    simulated_threshold_note,
    speed_row,
    strategies_display,
    unsimulated_threshold_notes,
)
from analysis.compare.subtree import truncated
from analysis.cost.source import RunPricing, cost_warning, run_pricing
from analysis.shapes.dumps import Totals, outcome_totals
from analysis.shapes.recommend import recommend_runs
from analysis.shapes.recommend_render import recommend_section
from analysis.tables.build import Tables, build_tables
from analysis.tables.definitions import SUMMARY_NAMES, definitions_rows, label
from analysis.tables.metrics import DEPTH_HEADER, all_metrics, depth_display, derived_notes
from analysis.tables.runs import LabelledRun
from analysis.tables.slot_hits import static_shape
from replay.core.config import TreeConfig
from replay.core.json_figures import figures_text
from replay.io.skipped import describe_skipped
from replay.util.errors import SpecReplayError, printable
from replay.util.words import round_name

from . import plots, treeplot
from .example_round import ASKED, example_round
from .options import ReportOptions, run_configs
from .page import Comparison, Figure, Note, ReportPage, RunHeader, figure_of, table_html
from .sampling_curves import sampling_curves

_SPEED_HEADERS = {
    "modelled_speedup": "modelled speedup",
    "cost_source": "cost model",
    **{n: label(n) for n in ("measured_speedup", "measured_speedup_wall")},
    "measured_status": "measured?",
}


def _compact_json(obj) -> str:
    """One key per line, lists inline: configs stay readable at a glance."""
    if isinstance(obj, dict):
        return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()) + "\n}"
    return json.dumps(obj)


def _priced(runs: Sequence[LabelledRun], opts: ReportOptions) -> dict[str, RunPricing]:
    """Each run's pricing by label, handed to ``opts.on_pricing`` too."""
    pricing = {run.label: run_pricing(run.replay, run.label, opts.cost) for run in runs}
    if opts.on_pricing:
        for label, priced in pricing.items():
            opts.on_pricing(label, priced)
    return pricing


def report_page(
    runs: Sequence[LabelledRun], opts: ReportOptions = ReportOptions()
) -> tuple[ReportPage, dict[str, pd.DataFrame]]:
    """(what the page shows, every table by name) for ``runs``: all the computing, no markup but
    pandas' tables and the figures."""
    pricing = _priced(runs, opts)
    fmt = opts.image_format
    tables: Tables = build_tables(runs)
    metrics = all_metrics(tables)
    out_tables: dict[str, pd.DataFrame] = {"rounds": tables.rounds, "nodes": tables.nodes, **metrics}
    if len(runs) > 1:
        out_tables["runs_side_by_side"] = runs_side_by_side(tables.rounds).reset_index()  # index: a header row
    summary = table_html(out_tables["runs_side_by_side"] if len(runs) > 1 else metrics["summary"])
    out_tables["speedup"] = speed = pd.DataFrame(
        [speed_row(r.label, r.sizes, pricing[r.label].cost, pricing[r.label].measured) for r in runs if r.rounds]
    )
    comparisons, compare_tables, strategy_tables, walked = _comparisons(runs, opts, pricing)
    if comparisons:
        out_tables["compare"] = pd.concat(compare_tables, ignore_index=True)
        out_tables["gamma_strategies"] = pd.concat(strategy_tables, ignore_index=True)
    with_results = [run for run in runs if run.rounds]
    sh = metrics["slot_hits"]
    page = ReportPage(
        title=opts.title,
        num_runs=len(runs),
        num_rounds=len(tables.rounds),
        stamp=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        runs=[_run_header(run) for run in runs],
        summary=summary,
        summary_notes=derived_notes(metrics["summary"]),  # an acceptance length the dump cannot show is derived
        summary_definitions=table_html(pd.DataFrame(definitions_rows(SUMMARY_NAMES))),
        speed=table_html(speed.rename(columns=_SPEED_HEADERS), digits=SPEEDUP_DIGITS),
        speed_notes=[note for run in runs for note in _speed_notes(run.label, pricing[run.label])],
        accepted_figure=figure_of(
            plots.plot_accepted_length(metrics["accepted_length"]),
            "Accepted-length histogram (fraction of rounds).",
            fmt,
        ),
        accepted=table_html(metrics["accepted_length"]),
        depth_figure=figure_of(
            plots.plot_depth_acceptance(metrics["depth_acceptance"]),
            "Conditional P(L ≥ d | L ≥ d−1) and per-position acceptance rate P(L ≥ d) (vLLM's name) per depth; "
            "whiskers: 95% Wilson interval over n rounds (written above); dashes: conditional when the node had children.",
            fmt,
        ),
        depth_header=DEPTH_HEADER,
        depth=table_html(depth_display(metrics["depth_acceptance"])),
        runs_figure=figure_of(
            plots.plot_compare_runs(metrics["summary"], metrics["depth_acceptance"]), "Runs side by side.", fmt
        )
        if len(runs) > 1
        else None,
        rank_figures=[
            figure_of(
                plots.plot_rank_heatmap(metrics["rank_of_hit"], metrics["hit_outcome"], run.label, run.config),
                f"{run.label}: draft rank of the target's token at each depth (left) and kept / beyond / not recorded (right).",
                fmt,
            )
            for run in with_results
        ],
        hit_outcome=table_html(metrics["hit_outcome"]),
        rank_of_hit=table_html(metrics["rank_of_hit"]),
        parent_figures=[
            figure_of(
                plots.plot_parent_slot(metrics["parent_slot"], run.label, run.rounds),
                f"{run.label}: slot of the expanded parent the accepted path went through, or the level rank of an unexpanded one.",
                fmt,
            )
            for run in with_results
        ],
        parent_slot=table_html(metrics["parent_slot"]),
        shape_figures=[f for run in with_results for f in _shape_figures(run, sh, opts)],
        slot_hits=table_html(sh),
        node_hits=table_html(metrics["node_hits"]),
        comparisons=comparisons,
        recommend=opts.recommend,
        recommendations=_recommendations(with_results, opts, pricing, walked) if opts.recommend else [],
        sampling=sampling_curves(runs, opts, out_tables) if opts.sampling else [],
    )
    return page, out_tables


def _run_header(run: LabelledRun) -> RunHeader:
    rep = run.replay
    return RunHeader(
        label=run.label,
        kind_words=rep.kind_words,
        directory=printable(str(rep.directory)),  # the page is UTF-8: a file name's undecodable bytes as \xff
        config_source=printable(str(rep.config_source)),
        replayed=run.rounds,
        skipped_text=describe_skipped(rep.skipped),
        config_json=_compact_json(rep.config.to_json()),
        unknown=dict(rep.config.unknown) if rep.config.unknown else None,
        manifest_source=(rep.manifest.body.get("source") if rep.manifest.body else None) or None,
        notes=list(rep.notes),
        warnings=list(rep.warnings),
        skipped=[(s.what, s.reason) for s in rep.skipped[:50]],
        more_skipped=max(0, len(rep.skipped) - 50),
    )


def _speed_notes(label: str, pricing: RunPricing) -> list[Note]:
    """Under the speedup table, per run: the cost model's warning, the measured speedup in words, and
    the lines that say the measured number is probably wrong."""
    notes = []
    warn = cost_warning(pricing.cost, label)
    if warn:
        notes.append(Note(warn))
    if pricing.measured is not None:
        notes.append(Note(f"{label}: {pricing.measured.describe()}.", warn=False))
    notes.extend(Note(w) for w in pricing.suspicious)
    return notes


def _shape_figures(run: LabelledRun, slot_hits: pd.DataFrame, opts: ReportOptions) -> list[Figure]:
    """The static shape coloured by slot hits, and one round drawn (the asked one, else a typical failing one)."""
    fmt = opts.image_format
    hits = figure_of(
        treeplot.plot_tree_hits(
            static_shape(run.config), slot_hits[slot_hits["run"] == run.label], run.label, run.config
        ),
        f"{run.label}: static shape coloured by how often each slot (depth, expanded parent in selection "
        "order, child rank) lay on the accepted path.",
        fmt,
    )
    pick = example_round(run, opts.example_round)
    if pick is None:
        pick = example_round(run)
        missing = f"no round {round_name(opts.example_round)} in this run; "
    else:
        missing = ""
    drawn = figure_of(
        treeplot.plot_round_tree(pick.result, opts.decode, run.label, pick.why),
        f"{run.label}: round {pick.result.name}{', ' if pick.why == ASKED else ': '}{missing}{pick.why}.",
        fmt,
    )
    return [hits, drawn]


def _comparisons(
    runs: Sequence[LabelledRun], opts: ReportOptions, pricing: dict[str, RunPricing]
) -> tuple[list[Comparison], list[pd.DataFrame], list[pd.DataFrame], dict[str, dict[TreeConfig, Totals]]]:
    """Per run with rounds: the offline comparison of configs and the dynamic-gamma strategies, and
    their tables (a "run" column first) for tables/; by run label, the sums of the configs walked
    (_walked_totals: the recommendation measures those again only where they differ)."""
    comparisons, tables, strategies = [], [], []
    walked: dict[str, dict[TreeConfig, Totals]] = {}
    for run in runs:
        if not run.rounds:
            continue
        cost = pricing[run.label].cost
        configs = run_configs(run, opts)
        tick = opts.progress(f"compare {run.label}") if opts.progress else None
        compared, by_gamma, walked[run.label] = _replayed_once(run, configs, opts.gamma_threshold, tick)
        table, _ = priced_comparison(compared, configs, pricing[run.label], opts.gamma_threshold, per_round=False)
        table.insert(0, "run", run.label)
        tables.append(table)
        window = ema_window_of(run, opts.ema_window)
        sims = simulate_run_strategies(by_gamma, run.config, opts.strategies, cost, window, opts.gamma_threshold)
        st = pd.DataFrame([s.to_row(cost) for s in sims])
        st.insert(0, "run", run.label)
        strategies.append(st)
        comparisons.append(
            Comparison(
                label=run.label,
                recorded=run.config.short(),
                cost_source=cost.source,
                cost_json=figures_text(cost.to_json()),
                cost_warning=cost_warning(cost, run.label),
                notes=_comparison_notes(table, configs, run, opts.gamma_threshold),
                table=table_html(compare_display(table.drop(columns=["run"]))),
                figure=figure_of(
                    plots.plot_compare_configs(table, run.label, cost.source),
                    f"{run.label}: offline comparison.",
                    opts.image_format,
                ),
                ema_window=window,
                gamma_strategy=str(run.replay.config.settings.get("gammaStrategy", "not set")),
                strategies=table_html(strategies_display(st).drop(columns=["run", "config"])),
            )
        )
    return comparisons, tables, strategies, walked


def _replayed_once(
    run: LabelledRun, configs: list[TreeConfig], gamma_threshold: float | None, tick
) -> tuple[LabelledRun, LabelledRun, dict[TreeConfig, Totals]]:
    """``run`` with the compared configs' outcomes, and with those of the recorded config's truncations
    (the gamma strategies'), as read along (analysis.compare.batch.ReadAlong): both from one reading
    and replay of the run, a config among both (the default set holds every truncation) walked once;
    and the sums of those walks that the recommendation's exact measurement takes (_walked_totals).
    Each config's outcomes are its own whatever the others replayed with it."""
    subs = [truncated(run.config, g) for g in range(1, run.config.gamma + 1)]
    union = list(configs) + [s for s in subs if s not in configs]
    parts = run_parts(run, union, gamma_threshold, tick)
    threshold = 0.0 if gamma_threshold is None else float(gamma_threshold)

    def along(wanted: list[TreeConfig]) -> LabelledRun:
        at = [union.index(c) for c in wanted]
        kept = [replace(p, outcomes=[p.outcomes[i] for i in at]) for p in parts]
        return replace(run, read_along=(ReadAlong(tuple(wanted), threshold, kept),))

    return along(configs), along(subs), _walked_totals(run, union, parts, gamma_threshold)


def _walked_totals(
    run: LabelledRun, union: list[TreeConfig], parts: list[ComparePart], gamma_threshold: float | None
) -> dict[TreeConfig, Totals]:
    """Per config of ``union`` (``parts``' outcomes, in ``union``'s order), the sums that
    recommend's exact measurement (analysis.shapes.dumps) adds of its greedy walk without the early
    stop: none under a simulated gammaThreshold, and not a dynamic recording's own config (its
    outcome here is the replay's, is_own_tree), which recommend walks."""
    if gamma_threshold:
        return {}
    return {
        c: outcome_totals(p.outcomes[i] for p in parts)
        for i, c in enumerate(union)
        if not is_own_tree(c, run.config, gamma_threshold)
    }


def _comparison_notes(
    table: pd.DataFrame, configs: list[TreeConfig], run: LabelledRun, gamma_threshold: float | None
) -> list[str]:
    """The comparison's notes: configs beyond the recording, thresholds simulated or not."""
    simulated = simulated_threshold_note(gamma_threshold)
    return (
        beyond_recorded_notes(table, configs, run.config, run.label)
        + unsimulated_threshold_notes(configs, run.config, gamma_threshold, run.label)
        + ([f"{run.label}: {simulated}"] if simulated else [])
    )


def _recommendations(
    runs: Sequence[LabelledRun],
    opts: ReportOptions,
    pricing: dict[str, RunPricing],
    walked: dict[str, dict[TreeConfig, Totals]],
) -> list[tuple[str, Markup | None, str | None]]:
    out: list[tuple[str, Markup | None, str | None]] = []
    for run in runs:
        budget = run.config.num_nodes if opts.budget is None else opts.budget
        depth = run.config.gamma if opts.max_depth is None else opts.max_depth
        tick = opts.progress(f"recommend {run.label}") if opts.progress else None
        if tick:
            tick(0, 1)  # the search reports no steps: the bar names the phase while it runs
        try:
            rec = _recommend(run, budget, depth, pricing[run.label].cost, walked.get(run.label, {}))
        except SpecReplayError as exc:
            out.append((run.label, None, str(exc)))
            continue
        out.append((run.label, Markup(recommend_section(rec, run.label)), None))  # escaped by recommend_section
    return out


def _recommend(run: LabelledRun, budget: int, depth: int, cost, walked: dict[TreeConfig, Totals]):
    """recommend_runs on the batches the report's loading kept, where it kept them, with the sums of
    the configs the comparison walked."""
    return recommend_runs([run.replay.directory], run.options, budget, depth, cost, loaded=[run], known=[walked])
