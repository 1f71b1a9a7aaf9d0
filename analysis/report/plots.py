"""Acceptance plots (matplotlib, headless Agg), each from a metric table of analysis.tables.metrics.

Every function returns a ``matplotlib.figure.Figure`` built without pyplot's global state, with
labelled axes, units and the number of rounds; ``save_figure`` writes PNG and SVG.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

if "matplotlib.pyplot" not in sys.modules:  # headless by default, never fight an interactive user
    matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.tables.build import IN_BEYOND, IN_KEPT, IN_NOWHERE
from analysis.tables.definitions import label as metric_label
from analysis.tables.metrics import DEPTH_RATE_N
from replay.core.config import TreeConfig
from replay.engine.render import rounds_with_scores
from replay.util.file_formats import require_formats
from replay.util.words import counted

FORMATS = ("png", "svg")
DPI = 110
_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
_OUTCOME_COLORS = {IN_KEPT: "#2ca02c", IN_BEYOND: "#ff7f0e", IN_NOWHERE: "#d62728"}


def save_figure(fig: Figure, out_dir: str | Path, stem: str, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``stem.png`` / ``stem.svg`` under ``out_dir``; returns the paths."""
    require_formats(formats, FORMATS, "image")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        write_figure(fig, path, fmt)
        paths.append(path)
    return paths


def write_figure(fig: Figure, target, fmt: str) -> None:
    """``fig.savefig`` whose bytes depend on the figure only: an SVG carries no date and its element
    ids come from a fixed salt (matplotlib's default salt is random), so two runs give equal files."""
    with matplotlib.rc_context({"svg.hashsalt": "specreplay"}):
        fig.savefig(target, format=fmt, dpi=DPI, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)


def _run_label(run: str, rounds: int) -> str:
    return f"{run} ({counted(rounds, 'round')})"


def _rounds_text(counts: dict[str, int]) -> str:
    if len(counts) == 1:
        return counted(next(iter(counts.values())), "round")
    return ", ".join(f"{r}: {n}" for r, n in counts.items()) + " rounds"


def _legend_below(fig: Figure, ax, columns: int = 3) -> None:
    """One figure legend under the axes: with several runs an in-axes legend covers bars."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="outside lower center", ncols=min(columns, len(handles)), fontsize=8, frameon=False
        )


def _legend(ax, **kwargs) -> None:
    """The axes' legend, drawn only when something on them is labelled: an empty one is a box with
    nothing in it (and matplotlib warns on stderr)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def _grouped_bars(ax, x: np.ndarray, series: list[tuple[str, np.ndarray]], width_total: float = 0.8) -> None:
    """Bars of several series side by side at integer positions x."""
    k = max(len(series), 1)
    w = width_total / k
    for i, (label, y) in enumerate(series):
        ax.bar(x - width_total / 2 + w * (i + 0.5), y, width=w, label=label, color=_COLORS[i % len(_COLORS)])


def _rate_bars(ax, depth: pd.DataFrame, x: np.ndarray, rate: str) -> None:
    """Per-depth bars of ``rate`` per run with its 95% Wilson interval as a whisker and its n
    (the rate's denominator, metrics.DEPTH_RATE_N) written above: a 0.667 from 3 rounds must not
    look as solid as one from 3,000. A depth with n = 0 has neither bar nor whisker."""
    groups = list(depth.groupby("run", sort=False))
    counts = depth.groupby("run", sort=False)["rounds"].first().to_dict()
    k = max(len(groups), 1)
    w = 0.8 / k
    for i, (run, grp) in enumerate(groups):
        g = grp.set_index("depth").reindex(x)
        n = g[DEPTH_RATE_N[rate]].fillna(0).to_numpy(dtype=np.int64)
        y = g[rate].to_numpy(dtype=float)
        lo, hi = g[f"{rate}_ci95_lo"].to_numpy(dtype=float), g[f"{rate}_ci95_hi"].to_numpy(dtype=float)
        xs = x - 0.4 + w * (i + 0.5)
        ax.bar(xs, np.nan_to_num(y), width=w, label=_run_label(run, counts[run]), color=_COLORS[i % len(_COLORS)])
        has = n > 0
        ax.errorbar(
            xs[has], y[has], yerr=[y[has] - lo[has], hi[has] - y[has]], fmt="none", ecolor="black", capsize=3, lw=1
        )
        for xv, top, nv in zip(xs[has], hi[has], n[has]):
            ax.text(xv, top + 0.01, f"n={nv}", ha="center", va="bottom", fontsize=7)


def plot_accepted_length(dist: pd.DataFrame) -> Figure:
    """Histogram of accepted length per run (analysis.tables.metrics.accepted_length_distribution)."""
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    counts = dist.groupby("run", sort=False)["rounds"].sum().to_dict()
    x = np.sort(dist["accepted_length"].unique())
    series = []
    for run, grp in dist.groupby("run", sort=False):
        y = grp.set_index("accepted_length")["fraction"].reindex(x, fill_value=0.0).to_numpy()
        series.append((_run_label(run, counts[run]), y))
    _grouped_bars(ax, x.astype(float), series)
    ax.set_xticks(x)
    ax.set_xlabel("accepted length L (draft tokens per round, bonus excluded)")
    ax.set_ylabel("fraction of rounds")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Accepted length distribution — {_rounds_text(counts)}")
    _legend_below(fig, ax)
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_depth_acceptance(depth: pd.DataFrame) -> Figure:
    """Conditional (left) and per-position (right: vLLM's name for P(L ≥ d)) acceptance per depth, per run,
    each bar with its 95% Wilson interval and n (_rate_bars)."""
    fig = Figure(figsize=(10.0, 4.4), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    counts = depth.groupby("run", sort=False)["rounds"].first().to_dict()
    x = np.sort(depth["depth"].unique())
    for ax, col, title in (
        (axes[0], "conditional", "Conditional: P(L ≥ d | L ≥ d−1)"),
        (axes[1], "per_position_acceptance_rate", "Per-position acceptance rate (vLLM): P(L ≥ d)"),
    ):
        _rate_bars(ax, depth, x, col)
        if col == "conditional":
            k = depth["run"].nunique()
            for i, (run, grp) in enumerate(depth.groupby("run", sort=False)):
                y = grp.set_index("depth")["conditional_when_expanded"].reindex(x).to_numpy(dtype=float)
                off = -0.4 + 0.8 / k * (i + 0.5)
                ax.plot(x + off, y, "k_", markersize=14, label="when the node had children" if i == 0 else None)
        ax.set_xticks(x)
        ax.set_xlabel("depth d (the d-th draft token)")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("acceptance rate (fraction)")
    axes[0].set_ylim(0, 1.12)  # room for the n labels above a whisker at 1
    _legend_below(fig, axes[0])
    fig.suptitle(f"Per-depth acceptance — {_rounds_text(counts)}; whiskers: 95% Wilson interval over n rounds")
    return fig


def plot_rank_heatmap(rank: pd.DataFrame, outcome: pd.DataFrame, run: str, cfg: TreeConfig | None = None) -> Figure:
    """Depth x draft rank of the target's choice on the path (rank_of_hit), and kept/beyond/nowhere."""
    r = rank[rank["run"] == run]
    o = outcome[outcome["run"] == run]
    depths = sorted(o["depth"].unique()) or [1]
    max_rank = int(r["target_rank"].max()) + 1 if r["target_rank"].notna().any() else 1
    grid = np.zeros((len(depths), max_rank + 1))
    for _, row in r.iterrows():
        di = depths.index(int(row["depth"]))
        col = max_rank if pd.isna(row["target_rank"]) else int(row["target_rank"])
        grid[di, col] += row["fraction"]
    fig = Figure(figsize=(10.5, 0.9 + 0.75 * len(depths) + 1.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1.3]})
    im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=max(grid.max(), 1e-9))
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if grid[i, j] > 0:
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if grid[i, j] < 0.6 * grid.max() else "black",
                )
    if cfg is not None:
        for i, d in enumerate(depths):
            if d - 1 < cfg.gamma:
                w = max(cfg.top_k_spec[d - 1])
                ax.plot([w - 0.5, w - 0.5], [i - 0.5, i + 0.5], color="red", lw=2)
        ax.plot([], [], color="red", lw=2, label="kept width (topKSpec)")
        _legend(ax, fontsize=7, loc="lower right")
    ax.set_xticks(range(max_rank + 1))
    ax.set_xticklabels([str(k) for k in range(max_rank)] + ["none"])
    ax.set_yticks(range(len(depths)))
    ax.set_yticklabels([str(d) for d in depths])
    ax.set_xlabel("draft rank of the target's token among the recorded candidates (0 = draft top-1)")
    ax.set_ylabel("depth d")
    fig.colorbar(im, ax=ax, label="fraction of attempts at depth d")
    attempts = ", ".join(f"d{int(d)}: {int(n)}" for d, n in zip(o["depth"], o["with_target_row"]))
    ax.set_title(f"{run}: where the target's choice sat (attempts {attempts})", fontsize=9)
    bottom = np.zeros(len(depths))
    for k in (IN_KEPT, IN_BEYOND, IN_NOWHERE):
        vals = o.set_index("depth")[f"{k}_fraction"].reindex(depths).fillna(0).to_numpy()
        label = {IN_KEPT: "kept (hit)", IN_BEYOND: "beyond kept width", IN_NOWHERE: "not recorded"}[k]
        ax2.barh(range(len(depths)), vals, left=bottom, color=_OUTCOME_COLORS[k], label=label)
        bottom += vals
    ax2.set_yticks(range(len(depths)))
    ax2.set_yticklabels([str(d) for d in depths])
    ax2.invert_yaxis()
    ax2.set_xlim(0, 1)
    ax2.set_xlabel("fraction of attempts")
    ax2.set_title("hit / near miss / miss", fontsize=9)
    _legend(ax2, fontsize=7, loc="lower right")
    n = int(o["attempts"].iloc[0]) if len(o) else 0
    fig.suptitle(f"Rank of hit — {run}, {counted(n, 'round')}", fontsize=11)
    return fig


def plot_parent_slot(parent: pd.DataFrame, run: str, n_rounds: int) -> Figure:
    """Which expanded parent slot the path went through per depth, or the level rank when unexpanded."""
    p = parent[parent["run"] == run]
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    depths = sorted(p["depth"].unique())
    rows = [(_slot_label(row), row["depth"], row["fraction"]) for _, row in p.iterrows()]
    cats = list(dict.fromkeys(label for label, _, _ in rows))
    bottom = np.zeros(len(depths))
    for ci, c in enumerate(cats):
        vals = np.zeros(len(depths))
        for label, depth, fraction in rows:
            if label == c:
                vals[depths.index(depth)] += fraction
        color = _COLORS[ci % len(_COLORS)] if c.startswith("expanded") else (0.55 + 0.08 * (ci % 5),) * 3
        ax.bar([str(d) for d in depths], vals, bottom=bottom, label=c, color=color, edgecolor="white")
        bottom += vals
    ax.set_xlabel("depth d of the path's node (expanded at draft step d, if at all)")
    ax.set_ylabel("fraction of rounds reaching depth d")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"topHead signal — {run}, {counted(n_rounds, 'round')}", fontsize=10)
    _legend(ax, fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def _slot_label(row: pd.Series) -> str:
    if row["expanded"]:
        return f"expanded slot {int(row['expanded_slot'])}"
    if pd.isna(row["level_rank"]):
        return "not expanded (level rank ?)"
    return f"not expanded, level rank {int(row['level_rank'])}"


def plot_compare_runs(summary: pd.DataFrame, depth: pd.DataFrame) -> Figure:
    """Side-by-side bars of several runs: mean acceptance length (bonus included; labelled derived
    when a run's dump lacks bonus tokens) and mean accepted length, and the per-position acceptance
    rate P(L ≥ d) per depth."""
    fig = Figure(figsize=(11.0, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    derived = summary.loc[summary["bonus_known_fraction"] < 1, "run"].tolist()
    note = f" (derived: accepted + 1 for {', '.join(map(str, derived))})" if derived else ""
    metrics = [
        ("mean_acceptance_length", metric_label("mean_acceptance_length") + note),
        ("mean_accepted_length", metric_label("mean_accepted_length")),
    ]
    x = np.arange(len(metrics), dtype=float)
    series = [
        (_run_label(r["run"], int(r["rounds"])), np.array([r[m] for m, _ in metrics], dtype=float))
        for _, r in summary.iterrows()
    ]
    _grouped_bars(ax, x, series)
    ax.set_xticks(x)
    ax.set_xticklabels([textwrap.fill(t, 24) for _, t in metrics], fontsize=8)
    ax.set_ylabel("tokens per round")
    _legend_below(fig, ax)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Tokens per round", fontsize=10)
    dx = np.sort(depth["depth"].unique())
    _rate_bars(ax2, depth, dx, "per_position_acceptance_rate")
    ax2.set_xticks(dx)
    ax2.set_xlabel("depth d (the d-th draft token)")
    ax2.set_ylabel(metric_label("per_position_acceptance_rate"))
    ax2.set_ylim(0, 1.12)
    ax2.grid(axis="y", alpha=0.3)
    ax2.set_title(
        "Per-position acceptance rate (vLLM) per depth; whiskers: 95% Wilson interval over n rounds", fontsize=9
    )
    fig.suptitle(f"Runs side by side — {_rounds_text({r['run']: int(r['rounds']) for _, r in summary.iterrows()})}")
    return fig


def plot_compare_configs(table: pd.DataFrame, run: str, cost_source: str = "") -> Figure:
    """Offline comparison of configs: mean accepted length and modelled speedup with bounds; a
    measured speedup (``measured_speedup`` column, analysis.compare.configs.with_speed) is marked beside
    its config's bar."""
    fig = Figure(figsize=(max(7.0, 0.7 * len(table) + 3), 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    labels = [f"{c}\n{n} nodes" for c, n in zip(table["config"], table["nodes"])]
    x = np.arange(len(table), dtype=float)
    for a, name, ylabel in (
        (ax, "mean_accepted_length", metric_label("mean_accepted_length")),
        (ax2, "modelled_speedup", metric_label("modelled_speedup")),
    ):
        lo = table[f"{name}_lo"].to_numpy(dtype=float)
        hi = table[f"{name}_hi"].to_numpy(dtype=float)
        colors = ["#1f77b4" if u == 0 else "#aec7e8" for u in table["undecidable"]]
        a.bar(x, lo, color=colors)
        wide = hi > lo  # a whisker only where undecidable rounds leave a range: none of zero height
        a.errorbar(
            x[wide], lo[wide], yerr=[np.zeros(int(wide.sum())), (hi - lo)[wide]], fmt="none", ecolor="black", capsize=3
        )
        a.set_xticks(x)
        a.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        a.set_ylabel(ylabel)
        a.grid(axis="y", alpha=0.3)
    ax2.axhline(1.0, color="grey", lw=1, ls="--")
    if "measured_speedup" in table.columns and table["measured_speedup"].notna().any():
        m = table["measured_speedup"].to_numpy(dtype=float)
        ax2.plot(x, m, "D", color="#d62728", markersize=7, label=metric_label("measured_speedup"))
        _legend(ax2, fontsize=7, loc="lower left")
    n = int(table["rounds"].iloc[0]) if len(table) else 0
    ax.set_title("light bars: some rounds undecidable (whisker = upper bound)", fontsize=8)
    ax2.set_title(f"cost model: {cost_source}", fontsize=8, wrap=True)
    fig.suptitle(f"Offline config comparison — {run}, {counted(n, 'round')}")
    return fig


def plot_temperature_curve(
    curve: pd.DataFrame, run: str, recorded: str, lower_refused_above_one: bool = False
) -> Figure:
    """Expected block efficiency E[L] + 1 against the temperature, one band per config (fill between
    the all-rounds lower and upper bound: the tail the top-K scores leave open, and undetermined
    rounds anywhere in [0, their steps]); the recorded config drawn first and thicker.
    ``curve``: analysis.compare.sampling.SAMPLING_COLUMNS rows of one run over a grid of T.
    ``lower_refused_above_one``: without the vocabulary size the lower bounds at T > 1 are refused
    (replay.core.sampling): they are not drawn there, and the title says so."""
    fig = Figure(figsize=(8.0, 4.8), layout="constrained")
    ax = fig.subplots()
    for k, (cfg, g) in enumerate(curve.groupby("config", sort=False)):
        g = g.sort_values("temperature")
        t = g["temperature"].to_numpy(dtype=float)
        lo = g["all_rounds_block_efficiency_lo"].to_numpy(dtype=float)
        hi = g["all_rounds_block_efficiency_hi"].to_numpy(dtype=float)
        if lower_refused_above_one:
            lo = np.where(t > 1.0, np.nan, lo)
        color = _COLORS[k % len(_COLORS)]
        undetermined = int(g["undetermined"].max())
        name = f"{cfg} ({int(g['nodes'].iloc[0])} nodes)" + (" recorded" if cfg == recorded else "")
        if undetermined:
            name += f", up to {undetermined} round{'' if undetermined == 1 else 's'} undetermined"
        ax.fill_between(t, lo, hi, color=color, alpha=0.22, lw=0)
        width = 2.2 if cfg == recorded else 1.2
        ax.plot(t, lo, color=color, lw=width, label=name)
        ax.plot(t, hi, color=color, lw=width, ls="--")
    ax.set_xlabel("target sampling temperature T (0 = greedy)")
    ax.set_ylabel("expected block efficiency E[L] + 1 (tokens per target forward)")
    ax.grid(alpha=0.3)
    n = int(curve["rounds"].max()) if len(curve) else 0
    title = "solid: lower bound, dashed: upper bound, band: the values the dump allows"
    if lower_refused_above_one:
        title += "\nabove T = 1 only the upper bound: the lower one needs the vocabulary size (--vocab-size)"
    ax.set_title(title, fontsize=8)
    fig.suptitle(f"Sampling at temperature T — {run}, {rounds_with_scores(n, 1.0)}")
    _legend_below(fig, ax, columns=2)
    return fig
