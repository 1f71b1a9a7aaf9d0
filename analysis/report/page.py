"""The report page as data (ReportPage and its parts, in page order: figures as inline SVG or base64
PNG, tables as pandas' escaped markup) and its rendering through the Jinja2 template
analysis/report/templates/report.html.j2 (autoescaped). What the page shows is computed in
analysis.report.html.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import jinja2
import pandas as pd
from markupsafe import Markup

from analysis.tables.definitions import DEFINITIONS, Definition
from replay.core.headline import METRIC_DIGITS, fixed_text
from replay.util.words import counted

from . import plots

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


@dataclass(frozen=True)
class Figure:
    """One embedded image: inline SVG markup or base64 PNG data, and its caption."""

    caption: str
    svg: Markup | None = None  # the <svg> element, prolog and doctype dropped
    png_base64: str | None = None


def figure_of(fig, caption: str, fmt: str) -> Figure:
    buf = io.BytesIO()
    if fmt == "svg":
        plots.write_figure(fig, buf, "svg")
        svg = buf.getvalue().decode("utf-8")
        return Figure(caption, svg=Markup(svg[svg.find("<svg") :]))  # inline SVG must not carry the XML prolog
    plots.write_figure(fig, buf, "png")
    return Figure(caption, png_base64=base64.b64encode(buf.getvalue()).decode("ascii"))


def table_html(df: pd.DataFrame, digits: int = METRIC_DIGITS) -> Markup:
    """pandas' own table markup (cells escaped by pandas, numbers as every command prints them: ``digits`` decimals), or "(empty)"."""
    if df is None or len(df) == 0:
        return Markup("<p><em>(empty)</em></p>")
    return Markup(
        df.to_html(index=False, escape=True, na_rep="–", float_format=lambda v: fixed_text(v, digits), border=0)
    )


@dataclass(frozen=True)
class RunHeader:
    """A run's block under "Runs and configs"."""

    label: str
    kind_words: str  # RunReplay.kind_words: "directory" or "packed run"
    directory: str
    config_source: str
    replayed: int
    skipped_text: str  # describe_skipped
    config_json: str
    unknown: dict | None  # config keys the replay does not use
    manifest_source: str | None
    notes: list[str]
    warnings: list[str]  # the replay's lines about how the files were read (stderr's, without the run's label)
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
    row_tables_csv: bool = False  # the round and node tables written as CSV too (report --csv-tables)


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
