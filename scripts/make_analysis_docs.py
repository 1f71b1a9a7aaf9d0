"""Regenerate docs/img/*.png and print the tables quoted in docs/analysis.md (markdown).

PYTHONPATH=. python scripts/make_analysis_docs.py            # writes docs/img, prints tables
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare.batch import compare_run, simulate_run_strategies
from analysis.compare.configs import compare_display, speed_row, strategies_display
from analysis.cost.model import CostModel
from analysis.cost.source import replay_cost
from analysis.cost.timings import run_speedup
from analysis.report import plots, treeplot
from analysis.report.example_round import example_round
from analysis.tables.build import build_tables
from analysis.tables.metrics import all_metrics, depth_display
from analysis.tables.runs import load_runs
from analysis.tables.slot_hits import static_shape
from replay.core.config import TreeConfig
from replay.core.headline import metric_text

DOC_CONFIGS = [
    ([[6], [2, 2], [1, 1]], [1, 2, 2]),  # the article's (recorded)
    ([[4], [2, 2], [1, 1]], [1, 2, 2]),
    ([[3], [1, 1], [1]], [1, 2, 1]),
    ([[6], [2], [1]], [1, 1, 1]),
    ([[6], [2, 2]], [1, 2]),
    ([[6], [1, 1], [1, 1]], [1, 2, 2]),
    ([[2], [1], [1]], [1, 1, 1]),
    ([[1], [1], [1]], [1, 1, 1]),
    ([[6], [1, 1, 1], [1]], [1, 3, 1]),  # not contained: three heads at step 1
]
# Illustrative CPU curve: DESIGN.md's two measured target points (1.5B float32 on 2 cores);
# the draft step cost is an assumption, not a measurement.
CPU_COST = {"tokens": [1, 16], "verify_s": [0.38, 0.95], "draft_step_s": 0.08}


def markdown(df: pd.DataFrame, float_text=lambda v: f"{v:.3f}") -> str:
    """``df`` as a markdown table, each float cell as ``float_text`` writes it."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for i in range(len(df)):
        cells = []
        for c in cols:
            v = df[c].iloc[i]  # per column, so integer columns stay integers
            text = float_text(v) if isinstance(v, (float, np.floating)) else str(v)
            cells.append(text.replace("|", "\\|"))  # config names contain pipes
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--img", default="docs/img")
    args = ap.parse_args()
    img = Path(args.img)
    runs = load_runs(["sample_dumps/synthetic_article", "sample_dumps/article_round"], progress=False)
    synth, article = runs
    both = build_tables(runs)
    m_both = all_metrics(both)
    m = all_metrics(build_tables([synth]))
    plots.save_figure(plots.plot_accepted_length(m["accepted_length"]), img, "accepted_length", ["png"])
    plots.save_figure(plots.plot_depth_acceptance(m["depth_acceptance"]), img, "depth_acceptance", ["png"])
    plots.save_figure(
        plots.plot_rank_heatmap(m["rank_of_hit"], m["hit_outcome"], synth.label, synth.config),
        img,
        "rank_heatmap",
        ["png"],
    )
    plots.save_figure(plots.plot_parent_slot(m["parent_slot"], synth.label, synth.rounds), img, "parent_slot", ["png"])
    plots.save_figure(
        treeplot.plot_tree_hits(static_shape(synth.config), m["slot_hits"], synth.label, synth.config),
        img,
        "tree_hits",
        ["png"],
    )
    plots.save_figure(
        treeplot.plot_round_tree(example_round(article).result, run=article.label), img, "article_round_tree", ["png"]
    )
    plots.save_figure(
        plots.plot_compare_runs(m_both["summary"], m_both["depth_acceptance"]), img, "runs_side_by_side", ["png"]
    )

    configs = [TreeConfig.from_lists(s, h) for s, h in DOC_CONFIGS]
    default = CostModel.default()
    cpu = CostModel.from_json(CPU_COST, "illustrative CPU curve")
    table, _ = compare_run(synth, configs, default)
    plots.save_figure(plots.plot_compare_configs(table, synth.label, default.source), img, "compare_configs", ["png"])
    cpu_table, _ = compare_run(synth, configs, cpu)
    shown = compare_display(table)
    shown.insert(len(shown.columns), "modelled speedup (CPU curve)", compare_display(cpu_table)["modelled speedup"])
    shown = shown.rename(columns={"modelled speedup": "modelled speedup (default)"})
    print("## compare: synthetic_article, 300 rounds\n")
    print(markdown(shown))
    art, _ = compare_run(article, configs, default)
    print("\n## compare: article_round, 1 round\n")
    print(markdown(compare_display(art)))
    sims = simulate_run_strategies(synth, synth.config, range(5), default, 1, None)
    sims3 = simulate_run_strategies(synth, synth.config, [1, 4], default, 3, None)
    st = pd.DataFrame([s.to_row(default) for s in sims + sims3])
    print("\n## gamma strategies: synthetic_article, recorded config, default cost\n")
    print(markdown(strategies_display(st).drop(columns=["config"])))
    print("\n## summary\n")
    print(markdown(m_both["summary"], metric_text))  # as stats prints it
    print("\n## depth acceptance (synthetic)\n")
    print(markdown(depth_display(m["depth_acceptance"]).drop(columns=["run"])))
    print("\n## hit outcome (synthetic)\n")
    print(markdown(m["hit_outcome"].drop(columns=["run"])))
    print(json.dumps(CPU_COST))
    real = load_runs([f"sample_dumps/qwen2.5-coder/{n}" for n in ("article", "chain4", "wide", "deep")], progress=False)
    rows = []
    for run in real:
        cost = replay_cost(run.replay)
        rows.append(speed_row(run.label, run.sizes, cost, run_speedup(run.replay.directory, run.replay.manifest)))
    print("\n## speed: real samples (measured timings)\n")
    print(markdown(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()
