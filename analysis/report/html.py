"""A self-contained HTML report of one or more runs: configs, every table and plot, offline
comparison of tree configs, dynamic-gamma strategies and the tree-shape recommendation. Images are embedded (base64 PNG or
inline SVG); the page loads nothing from outside and reads offline.
"""

from __future__ import annotations

import base64
import datetime as _dt
import io
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import jinja2
import pandas as pd
from markupsafe import Markup

from analysis.compare.batch import ema_window_of, priced_comparison, simulate_run_strategies
from analysis.compare.configs import (
    beyond_recorded_notes,
    compare_display,
    runs_side_by_side,
    simulated_threshold_note,
    speed_row,
    strategies_display,
    unsimulated_threshold_notes,
)
from analysis.compare.gamma_strategies import STRATEGY_NAMES
from analysis.compare.sampling import TEMPERATURE_GRID, has_scores, sampling_display, without_scores
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.compare.subtree import fit_levels
from analysis.cost.model import CostModel
from analysis.cost.source import RunPricing, cost_warning, run_pricing
from analysis.shapes.recommend import recommend, recommend_runs
from analysis.shapes.recommend_render import recommend_section
from analysis.tables.build import Tables, build_tables, export_tables
from analysis.tables.definitions import DEFINITIONS, SUMMARY_NAMES, Definition, definitions_rows, label
from analysis.tables.metrics import DEPTH_HEADER, all_metrics, depth_display, derived_notes, static_shape
from analysis.tables.runs import BatchReplay, LabelledRun
from analysis.tables.stream import write_run_tables
from replay.core.config import TreeConfig
from replay.core.selection import uses_fallback
from replay.core.temperature import format_temperature
from replay.engine.sampling import vocab_size_of
from replay.io.dumpnames import Key
from replay.io.skipped import Skipped, describe_skipped
from replay.util.atomic import atomic_path, clear_leftovers, staged_directory
from replay.util.bounded import read_json_file
from replay.util.errors import SpecReplayError
from replay.util.words import counted

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
    sampling: bool = True  # the temperature curve, for every run whose validate rows carry scores
    temperatures: Sequence[float] = TEMPERATURE_GRID  # its grid
    vocab_size: int | None = None  # the target's vocabulary size: lower bounds at T > 1
    # progress(phase name) -> that phase's progress(done, total): a bar per run and phase
    # (replay.util.progress.phase_progress), as one phase can take a minute on a large run
    progress: Callable[[str], Callable[[int, int], None]] | None = field(default=None, compare=False)
    # on_skipped(run label, one entry per round): the rounds the temperature curve left out (besides
    # the page's note), for the CLI to list on stderr with exit status 1 as every --temperature command does
    on_skipped: Callable[[str, list[Skipped]], None] | None = field(default=None, compare=False)


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
        "determined round (at T)",
        "in the temperature curve and compare --temperature: a round whose config tree the walk at T cannot leave for a part the recording does not determine; the others are undetermined, counted anywhere in [0, their draft steps]",
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


@dataclass(frozen=True)
class Figure:
    """One embedded image: inline SVG markup or base64 PNG data, and its caption."""

    caption: str
    svg: Markup | None = None  # the <svg> element, prolog and doctype dropped
    png_base64: str | None = None


def _figure(fig, caption: str, fmt: str) -> Figure:
    buf = io.BytesIO()
    if fmt == "svg":
        fig.savefig(buf, format="svg", bbox_inches="tight")
        svg = buf.getvalue().decode("utf-8")
        return Figure(caption, svg=Markup(svg[svg.find("<svg") :]))  # inline SVG must not carry the XML prolog
    fig.savefig(buf, format="png", dpi=plots.DPI, bbox_inches="tight")
    return Figure(caption, png_base64=base64.b64encode(buf.getvalue()).decode("ascii"))


def _refused_lower(cell: str) -> str:
    """A display cell (``lo..hi``, several for P(L >= d)) with its refused lower bounds as "—"."""
    return " ".join("—.." + tok.split("..", 1)[1] if ".." in tok else tok for tok in str(cell).split(" "))


def _table_html(df: pd.DataFrame, index: bool = False) -> Markup:
    """pandas' own table markup (cells escaped by pandas), or "(empty)"."""
    if df is None or len(df) == 0:
        return Markup("<p><em>(empty)</em></p>")
    return Markup(df.to_html(index=index, escape=True, na_rep="–", float_format=lambda v: f"{v:.4g}", border=0))


def _compact_json(obj) -> str:
    """One key per line, lists inline: configs stay readable at a glance."""
    if isinstance(obj, dict):
        return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()) + "\n}"
    return json.dumps(obj)


@dataclass(frozen=True)
class RunHeader:
    """A run's block under "Runs and configs"."""

    label: str
    directory: str
    config_source: str
    replayed: int
    skipped_text: str  # describe_skipped
    config_json: str
    unknown: dict | None  # config keys the replay does not use
    manifest_source: str | None
    notes: list[str]
    fallback_rounds: int  # rounds whose expanded nodes came from the rank-major fallback
    skipped: list[tuple[str, str]]  # (what, reason) of the first 50 skipped inputs
    more_skipped: int  # how many beyond those


@dataclass(frozen=True)
class Comparison:
    """A run's part of "Offline comparison of tree configs": configs, then dynamic-gamma strategies."""

    label: str
    recorded: str  # the recorded config, short form
    cost_source: str
    cost_json: str
    cost_warning: str | None
    notes: list[str]
    table: Markup
    figure: Figure
    ema_window: int
    gamma_strategy: str  # the engine's gammaStrategy setting
    strategies: Markup


@dataclass(frozen=True)
class SamplingCurve:
    """A run's part of "Sampling at temperature T": the curve of every compared config, or why none."""

    label: str
    figure: Figure | None  # None: the run has no scores on its validate rows
    table: Markup
    notes: list[str]


@dataclass(frozen=True)
class Note:
    text: str
    warn: bool = True  # drawn in the note colour


@dataclass(frozen=True)
class ReportPage:
    """Everything the page shows, in page order; render_page turns it into HTML."""

    title: str
    num_runs: int
    num_rounds: int
    stamp: str
    runs: list[RunHeader]
    summary: Markup
    summary_notes: list[str]
    summary_definitions: Markup
    speed: Markup
    speed_notes: list[Note]
    accepted_figure: Figure
    accepted: Markup
    depth_figure: Figure
    depth_header: str
    depth: Markup
    runs_figure: Figure | None  # only with several runs
    rank_figures: list[Figure]
    hit_outcome: Markup
    rank_of_hit: Markup
    parent_figures: list[Figure]
    parent_slot: Markup
    shape_figures: list[Figure]  # per run: the static shape's hits, then the example round
    slot_hits: Markup
    node_hits: Markup
    comparisons: list[Comparison]
    recommend: bool
    recommendations: list[tuple[str, Markup | None, str | None]]  # (run, section, why there is none)
    definitions: Sequence[Definition] = DEFINITIONS
    glossary: Sequence[tuple[str, str]] = tuple(GLOSSARY_TERMS)
    sampling: list[SamplingCurve] = field(
        default_factory=list
    )  # empty: the section is left out (ReportOptions.sampling)
    # the tables written under tables/ beside the page (names, no suffix): the page names only those
    # (report --no-tables writes none, a run without scores no sampling_curve)
    table_files: frozenset[str] = frozenset()


def build_report(
    runs: Sequence[LabelledRun], opts: ReportOptions = ReportOptions()
) -> tuple[str, dict[str, pd.DataFrame]]:
    """(the HTML page, every table by name) for ``runs``."""
    page, out_tables = report_page(runs, opts)
    return render_page(page), out_tables


def report_page(
    runs: Sequence[LabelledRun], opts: ReportOptions = ReportOptions()
) -> tuple[ReportPage, dict[str, pd.DataFrame]]:
    """(what the page shows, every table by name) for ``runs``: all the computing, no markup but
    pandas' tables and the figures."""
    pricing = {run.label: run_pricing(run.replay.directory, run.replay.manifest, run.label, opts.cost) for run in runs}
    fmt = opts.image_format
    tables: Tables = build_tables(runs)
    metrics = all_metrics(tables)
    out_tables: dict[str, pd.DataFrame] = {"rounds": tables.rounds, "nodes": tables.nodes, **metrics}
    if len(runs) > 1:
        out_tables["runs_side_by_side"] = runs_side_by_side(tables.rounds).reset_index()  # index: a header row
    summary = _table_html(out_tables["runs_side_by_side"] if len(runs) > 1 else metrics["summary"])
    out_tables["speedup"] = speed = pd.DataFrame(
        [speed_row(r.label, r.results, pricing[r.label].cost, pricing[r.label].measured) for r in runs if r.results]
    )
    comparisons, compare_tables, strategy_tables = _comparisons(runs, opts, pricing)
    if comparisons:
        out_tables["compare"] = pd.concat(compare_tables, ignore_index=True)
        out_tables["gamma_strategies"] = pd.concat(strategy_tables, ignore_index=True)
    with_results = [run for run in runs if len(run.results)]
    sh = metrics["slot_hits"]
    page = ReportPage(
        title=opts.title,
        num_runs=len(runs),
        num_rounds=len(tables.rounds),
        stamp=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        runs=[_run_header(run, tables.rounds) for run in runs],
        summary=summary,
        summary_notes=derived_notes(metrics["summary"]),  # an acceptance length the dump cannot show is derived
        summary_definitions=_table_html(pd.DataFrame(definitions_rows(SUMMARY_NAMES))),
        speed=_table_html(speed.rename(columns=_SPEED_HEADERS)),
        speed_notes=[note for run in runs for note in _speed_notes(run.label, pricing[run.label])],
        accepted_figure=_figure(
            plots.plot_accepted_length(metrics["accepted_length"]),
            "Accepted-length histogram (fraction of rounds).",
            fmt,
        ),
        accepted=_table_html(metrics["accepted_length"]),
        depth_figure=_figure(
            plots.plot_depth_acceptance(metrics["depth_acceptance"]),
            "Conditional P(L ≥ d | L ≥ d−1) and per-position acceptance rate P(L ≥ d) (vLLM's name) per depth; "
            "whiskers: 95% Wilson interval over n rounds (written above); dashes: conditional when the node had children.",
            fmt,
        ),
        depth_header=DEPTH_HEADER,
        depth=_table_html(depth_display(metrics["depth_acceptance"])),
        runs_figure=_figure(
            plots.plot_compare_runs(metrics["summary"], metrics["depth_acceptance"]), "Runs side by side.", fmt
        )
        if len(runs) > 1
        else None,
        rank_figures=[
            _figure(
                plots.plot_rank_heatmap(metrics["rank_of_hit"], metrics["hit_outcome"], run.label, run.config),
                f"{run.label}: draft rank of the target's token at each depth (left) and kept / beyond / not recorded (right).",
                fmt,
            )
            for run in with_results
        ],
        hit_outcome=_table_html(metrics["hit_outcome"]),
        rank_of_hit=_table_html(metrics["rank_of_hit"]),
        parent_figures=[
            _figure(
                plots.plot_parent_slot(metrics["parent_slot"], run.label, len(run.results)),
                f"{run.label}: slot of the expanded parent the accepted path went through, or the level rank of an unexpanded one.",
                fmt,
            )
            for run in with_results
        ],
        parent_slot=_table_html(metrics["parent_slot"]),
        shape_figures=[f for run in with_results for f in _shape_figures(run, sh, opts)],
        slot_hits=_table_html(sh),
        node_hits=_table_html(metrics["node_hits"]),
        comparisons=comparisons,
        recommend=opts.recommend,
        recommendations=_recommendations(with_results, opts, pricing) if opts.recommend else [],
        sampling=_sampling_curves(runs, opts, out_tables) if opts.sampling else [],
    )
    return page, out_tables


def _run_header(run: LabelledRun, rounds: pd.DataFrame) -> RunHeader:
    rep = run.replay
    return RunHeader(
        label=run.label,
        directory=str(rep.directory),
        config_source=str(rep.config_source),
        replayed=len(rep.results),
        skipped_text=describe_skipped(rep.skipped),
        config_json=_compact_json(rep.config.to_json()),
        unknown=dict(rep.config.unknown) if rep.config.unknown else None,
        manifest_source=(rep.manifest.body.get("source") if rep.manifest.body else None) or None,
        notes=list(rep.notes),
        fallback_rounds=int((rounds[rounds["run"] == run.label]["selection"].map(uses_fallback)).sum()),
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
    hits = _figure(
        treeplot.plot_tree_hits(
            static_shape(run.config), slot_hits[slot_hits["run"] == run.label], run.label, run.config
        ),
        f"{run.label}: static shape coloured by how often each slot (depth, expanded parent in selection "
        "order, child rank) lay on the accepted path.",
        fmt,
    )
    pick = example_round(run.results, opts.example_round)
    if pick is None:
        pick = example_round(run.results)
        missing = f"no round {opts.example_round[0]}_{opts.example_round[1]} in this run; "
    else:
        missing = ""
    drawn = _figure(
        treeplot.plot_round_tree(pick.result, opts.decode, run.label, pick.why),
        f"{run.label}: round {pick.result.name}: {missing}{pick.why}.",
        fmt,
    )
    return [hits, drawn]


def _comparisons(
    runs: Sequence[LabelledRun], opts: ReportOptions, pricing: dict[str, RunPricing]
) -> tuple[list[Comparison], list[pd.DataFrame], list[pd.DataFrame]]:
    """Per run with rounds: the offline comparison of configs and the dynamic-gamma strategies, and
    their tables (a "run" column first) for tables/."""
    comparisons, tables, strategies = [], [], []
    for run in runs:
        if not len(run.results):
            continue
        cost = pricing[run.label].cost
        configs = _run_configs(run, opts)
        tick = opts.progress(f"compare {run.label}") if opts.progress else None
        table, _ = priced_comparison(run, configs, pricing[run.label], opts.gamma_threshold, tick, per_round=False)
        table.insert(0, "run", run.label)
        tables.append(table)
        window = ema_window_of(run, opts.ema_window)
        sims = simulate_run_strategies(run, run.config, opts.strategies, cost, window, opts.gamma_threshold)
        st = pd.DataFrame([s.to_row(cost) for s in sims])
        st.insert(0, "run", run.label)
        strategies.append(st)
        comparisons.append(
            Comparison(
                label=run.label,
                recorded=run.config.short(),
                cost_source=cost.source,
                cost_json=json.dumps(cost.to_json()),
                cost_warning=cost_warning(cost, run.label),
                notes=_comparison_notes(table, configs, run, opts.gamma_threshold),
                table=_table_html(compare_display(table.drop(columns=["run"]))),
                figure=_figure(
                    plots.plot_compare_configs(table, run.label, cost.source),
                    f"{run.label}: offline comparison.",
                    opts.image_format,
                ),
                ema_window=window,
                gamma_strategy=str(run.replay.config.settings.get("gammaStrategy", "not set")),
                strategies=_table_html(strategies_display(st).drop(columns=["run", "config"])),
            )
        )
    return comparisons, tables, strategies


def _run_configs(run: LabelledRun, opts: ReportOptions) -> list[TreeConfig]:
    """The configs a run's comparison (and temperature curve) shows: ``opts.configs`` replace the
    default set; the run's own config first, as every table starts from what was recorded."""
    if not opts.configs:
        return default_comparison_configs(run.config)
    key = (run.config.short(), run.config.top_head)
    return [run.config] + [c for c in opts.configs if (c.short(), c.top_head) != key]


# the curve's grid points the page's table lists (tables/ has all): code is served near 0.2 and chat
# near 0.7, and a user at 0.7 should not have to open the CSV
SHOWN_TEMPERATURES = (0.0, 0.2, 0.5, 0.7, 1.0, 1.5)


def _some_temperatures(temps: Sequence[float], shown: int = 4) -> str:
    return ", ".join(format_temperature(t) for t in temps[:shown]) + (", …" if len(temps) > shown else "")


def _curve_skips(
    skipped: Iterable[tuple[str, float, str]], grid: Sequence[float]
) -> tuple[list[Skipped], list[float], str]:
    """The temperature curve's (round, T, reason) refusals as one skipped entry per round (in the order
    first refused), naming the T it was refused at ("T = 0.1, 0.2, 0.3, 0.4, … (15 of the curve's 16)")
    and why: a round refused at every T of the grid would otherwise be listed once per T. A round
    refused for different reasons at different T says each, with its own T. Also the T refused at
    and the first reason, from the same single walk: the refusals are made lazily as they are read
    (SkippedRounds), and a second walk would make them all again."""
    by_round: dict[str, dict[str, list[float]]] = {}
    temps: set[float] = set()
    first = ""
    for name, t, why in skipped:
        by_round.setdefault(name, {}).setdefault(why, []).append(t)
        temps.add(t)
        first = first or why
    out = []
    for name, whys in by_round.items():
        parts = []
        for why, at in whys.items():
            of = f" ({len(at)} of the curve's {len(grid)})" if len(at) > 1 else ""
            parts.append(f"no sampling replay at T = {_some_temperatures(sorted(at))}{of}: {why}")
        out.append(Skipped(f"round {name}", "; ".join(parts)))
    return out, sorted(temps), first


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


def _sampling_curves(
    runs: Sequence[LabelledRun], opts: ReportOptions, out_tables: dict[str, pd.DataFrame]
) -> list[SamplingCurve]:
    """Per run with rounds: expected block efficiency of each compared config over the temperature
    grid (analysis.compare.sampling_batch.compare_sampling_run), or why there is none (no scores); the curves'
    rows go to ``out_tables["sampling_curve"]``."""
    curves, tables = [], []
    for run in runs:
        if not len(run.results):
            continue
        # a run loaded in batches is compared on its batch arrays (analysis.compare.sampling_batch):
        # whether it has scores is known from that comparison, without a round-by-round replay
        done = None
        if isinstance(run.replay, BatchReplay) or has_scores(run.results):
            manifest = run.replay.manifest
            vocab = vocab_size_of(opts.vocab_size, manifest.vocab_size, manifest.path)
            tick = opts.progress(f"temperature curve {run.label}") if opts.progress else None
            done = compare_sampling_run(
                run, _run_configs(run, opts), opts.temperatures, vocab, opts.gamma_threshold, tick, per_round=False
            )
        if done is None or without_scores(done):
            why = "its validate rows have no scores: no temperature curve (sampling needs the target's log-probs; docs/dump-format.md)"
            curves.append(SamplingCurve(run.label, None, Markup(""), [f"{run.label}: {why}"]))
            continue
        table = done.table
        tables.append(table.assign(run=run.label)[["run", *table.columns]])
        shown = table[table["temperature"].isin(SHOWN_TEMPERATURES)]
        display = sampling_display(shown)
        display.insert(0, "T", shown["temperature"].to_list())
        notes = []
        if done.skipped:
            skipped, temps, first_reason = _curve_skips(done.skipped, opts.temperatures)
            notes.append(
                f"{run.label}: {len(skipped)} round(s) without a sampling replay at some T "
                f"({_some_temperatures(temps)}), left out there: " + first_reason
            )
            if opts.on_skipped:
                opts.on_skipped(run.label, skipped)
        if done.needs_vocab:
            above = (shown["temperature"] > 1.0).to_numpy()
            for col in (
                "expected_accepted_length",
                "expected_block_efficiency",
                "all_rounds_block_efficiency",
                "P(L >= d)",
            ):
                display.loc[above, col] = display.loc[above, col].map(_refused_lower)
            notes.append(
                f"{run.label}: at T > 1 the lower bounds need the vocabulary size (report --vocab-size V); "
                "without it they are refused (shown as —), the upper bounds stand"
            )
        fig = _figure(
            plots.plot_temperature_curve(table, run.label, run.config.short(), done.needs_vocab),
            f"{run.label}: expected block efficiency against the target's sampling temperature, per config "
            "(band: all-rounds bounds). At T = 1 the band narrows, and closes where every child's token is in its "
            "parent's row: the scores are the target's probabilities at T = 1 (Z = 1 is known there), so a "
            "recorded child's probability is exact; at any other T, Z depends on the unrecorded tail.",
            opts.image_format,
        )
        curves.append(SamplingCurve(run.label, fig, _table_html(display), notes))
    if tables:
        out_tables["sampling_curve"] = pd.concat(tables, ignore_index=True)
    return curves


def _recommendations(
    runs: Sequence[LabelledRun], opts: ReportOptions, pricing: dict[str, RunPricing]
) -> list[tuple[str, Markup | None, str | None]]:
    out: list[tuple[str, Markup | None, str | None]] = []
    for run in runs:
        budget = run.config.num_nodes if opts.budget is None else opts.budget
        depth = run.config.gamma if opts.max_depth is None else opts.max_depth
        tick = opts.progress(f"recommend {run.label}") if opts.progress else None
        if tick:
            tick(0, 1)  # the search reports no steps: the bar names the phase while it runs
        try:
            rec = _recommend(run, budget, depth, pricing[run.label].cost)
        except SpecReplayError as exc:
            out.append((run.label, None, str(exc)))
            continue
        out.append((run.label, Markup(recommend_section(rec, run.label)), None))  # escaped by recommend_section
    return out


_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("analysis.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
)
_TEMPLATES.filters["counted"] = counted  # {{ n | counted("round") }}: "1 round", "3 rounds"


def render_page(page: ReportPage) -> str:
    """The self-contained HTML page (analysis/report/templates/report.html.j2, autoescaped)."""
    return _TEMPLATES.get_template("report.html.j2").render(page=page)


def _recommend(run: LabelledRun, budget: int, depth: int, cost):
    """recommend on the batch path for a run loaded there (same result as from its RoundResults)."""
    options = getattr(run.replay, "options", None)
    if options is None:
        return recommend([run.replay], budget, depth, cost)
    return recommend_runs([run.replay.directory], options, budget, depth, cost)


_STREAMED = frozenset({"rounds", "nodes"})  # written block by block (analysis.tables.stream), not from the page's copy
_NOT_EXPORTED = _STREAMED | {"runs_side_by_side"}  # runs_side_by_side: the page's summary of several runs only


def write_report(
    runs: Sequence[LabelledRun],
    out_dir: str | Path,
    opts: ReportOptions = ReportOptions(),
    tables: bool = True,
) -> Path:
    """Write ``out_dir/index.html`` (and the tables as CSV + Parquet under ``out_dir/tables``).

    The round and node tables are written block by block (analysis.tables.stream: a run loaded by the
    batch path is read again), so the runs may be loaded without them (``tables=TABLES_METRICS``);
    their progress is ``opts.progress``'s phase "tables" (rounds written, rounds)."""
    out_dir = Path(out_dir)
    clear_leftovers(out_dir)
    check_report_dir(out_dir)
    shown, all_tables = report_page(runs, opts)
    exported = {k: v for k, v in all_tables.items() if k not in _NOT_EXPORTED} if tables else {}
    written = frozenset(exported) | (_STREAMED if tables else frozenset())
    page = render_page(replace(shown, table_files=written))
    del shown
    # the whole report is built beside out_dir and replaces it with renames: an interrupt leaves the
    # earlier report or this one (check_report_dir made sure out_dir holds nothing else)
    with staged_directory(out_dir, whole=True) as staging:
        (staging / "index.html").write_text(page, encoding="utf-8")
        if tables:
            export_tables(exported, staging / TABLES_DIR)
            del page, all_tables, exported
            _return_freed_memory()
            write_run_tables(runs, staging / TABLES_DIR, progress=opts.progress("tables") if opts.progress else None)
        _write_record(staging)
    return out_dir / "index.html"


def _report_files(out_dir: Path) -> list[str]:
    """index.html and tables/'s files as they are in ``out_dir`` (names relative to it)."""
    files = ["index.html"] if (out_dir / "index.html").is_file() else []
    tables = out_dir / TABLES_DIR
    if tables.is_dir() and not tables.is_symlink():
        files += [f"{TABLES_DIR}/{p.name}" for p in sorted(tables.iterdir())]
    return files


def _write_record(out_dir: Path) -> None:
    """What this report wrote, so that the next one into the directory replaces only that."""
    body = {"written_by": "specreplay report", "files": _report_files(out_dir)}
    with atomic_path(out_dir / REPORT_RECORD) as tmp:
        tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def _recorded_files(out_dir: Path) -> set[str] | None:
    """The files an earlier report recorded writing here, or None (no record, or not one of ours)."""
    record = out_dir / REPORT_RECORD
    if record.is_symlink() or not record.is_file():
        return None
    try:
        body = read_json_file(record)
    except SpecReplayError:
        return None
    files = body.get("files") if isinstance(body, dict) and body.get("written_by") == "specreplay report" else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


TABLES_DIR = "tables"
REPORT_RECORD = ".specreplay-report.json"  # the files a report wrote (what the next one may replace)
REPORT_ENTRIES = ("index.html", TABLES_DIR, REPORT_RECORD)  # what write_report writes in its directory
STAGING_PREFIX = ".tables.partial-"  # an older version's staging of tables/ inside the report: replaced with it


def check_report_dir(out_dir: Path) -> None:
    """Refuse a directory that is neither new, nor empty, nor a report written before, before any
    work: an earlier report is one whose record (REPORT_RECORD) lists every file of its index.html
    and tables/; the report replaces those, and must not delete or mix with anything else (a
    user's own index.html or tables/ is not a report's, whatever its name)."""
    if not out_dir.is_dir():
        return
    entries = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith(STAGING_PREFIX))
    if not entries:
        return
    # a link is never the report's own: writing or replacing it would change the file it points at
    foreign = [name for name in entries if name not in REPORT_ENTRIES or (out_dir / name).is_symlink()]
    tables = out_dir / TABLES_DIR
    if not foreign and tables.exists() and not tables.is_dir():
        foreign = [TABLES_DIR]
    if not foreign:
        recorded = _recorded_files(out_dir)
        present = _report_files(out_dir)
        foreign = present if recorded is None else [f for f in present if f not in recorded]
        if recorded is None and not present:
            foreign = entries
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SpecReplayError(
            f"-o {out_dir}: not empty and not a report (it holds {shown}); report writes index.html and tables/ "
            f"into a new or empty directory, or replaces those of an earlier report (the files its {REPORT_RECORD} "
            "lists): choose another directory"
        )


def _return_freed_memory() -> None:
    """Hand the memory the page's phases freed back to the system before tables/ is written: glibc's
    malloc keeps freed blocks of many threads' arenas (at 10^6 rounds ~0.7 GB of the curve's), which
    would stay resident under tables/' own blocks (malloc_trim; nothing where there is no glibc)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
