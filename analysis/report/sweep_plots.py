"""Plots of a tree-config sweep table (``specreplay sweep``'s results): what each tree buys.

Columns used: ``config`` (points are labelled with the canonical spelling the sweep prints; a
table without it falls back to ``name``), ``nodes``, ``mean_acceptance_length`` (bonus included: tokens per
target forward, the engine's block_efficiency), ``tokens_per_s`` (and ``speedup`` when present). Offline side:
matplotlib (Agg) and pandas only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def pareto_front(
    table: pd.DataFrame, x: str = "nodes", y: str = "mean_acceptance_length", x_is_cost: bool = True
) -> pd.DataFrame:
    """Rows that no other row beats on both axes (higher ``y`` is better; lower ``x`` is better when
    ``x_is_cost``, higher otherwise). Sorted along ``x`` from best to worst."""
    rows = table.sort_values([x, y], ascending=[x_is_cost, False])
    best = float("-inf")
    keep = []
    for idx, row in rows.iterrows():
        if row[y] > best:
            keep.append(idx)
            best = row[y]
    return rows.loc[keep]


def plot_sweep(table: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Write nodes_vs_mean_acceptance_length.png, nodes_vs_tokens_per_s.png, pareto.png; return the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for y, fname, label in (
        (
            "mean_acceptance_length",
            "nodes_vs_mean_acceptance_length.png",
            "mean acceptance length (bonus included; tokens / target forward)",
        ),
        ("tokens_per_s", "nodes_vs_tokens_per_s.png", "tokens / s"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        _scatter(ax, table, "nodes", y)
        front = pareto_front(table, "nodes", y)
        ax.plot(front["nodes"], front[y], "-", color="tab:red", alpha=0.6, label="Pareto front")
        ax.set_xlabel("tree nodes verified per round")
        ax.set_ylabel(label)
        ax.legend(loc="best")
        paths.append(_save(fig, out / fname))
    fig, ax = plt.subplots(figsize=(6, 4))
    front = pareto_front(table, "mean_acceptance_length", "tokens_per_s", x_is_cost=False).sort_values(
        "mean_acceptance_length"
    )
    _scatter(ax, table, "mean_acceptance_length", "tokens_per_s")
    ax.plot(front["mean_acceptance_length"], front["tokens_per_s"], "o-", color="tab:red", label="Pareto front")
    ax.set_xlabel("mean acceptance length (bonus included)")
    ax.set_ylabel("tokens / s")
    ax.set_title("speed against acceptance: the front is where to pick a tree")
    ax.legend(loc="best")
    paths.append(_save(fig, out / "pareto.png"))
    return paths


def _scatter(ax, table: pd.DataFrame, x: str, y: str) -> None:
    """Points with their config names; names in the right part of the plot are written leftwards and
    the axes get margins, so no name runs off the figure."""
    ax.scatter(table[x], table[y], color="tab:blue")
    lo, hi = float(table[x].min()), float(table[x].max())
    label = "config" if "config" in table.columns else "name"
    for _, row in table.iterrows():
        right = hi > lo and (row[x] - lo) / (hi - lo) > 0.6
        ax.annotate(
            str(row[label]),
            (row[x], row[y]),
            fontsize=7,
            xytext=(-4 if right else 4, 4),
            textcoords="offset points",
            ha="right" if right else "left",
        )
    ax.margins(x=0.08, y=0.12)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")  # annotations outside the axes stay in the picture
    plt.close(fig)
    tmp.replace(path)
    return path
