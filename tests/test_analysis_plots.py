"""Plots and tree pictures: every figure labelled, with the number of rounds; files written."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from analysis.compare.batch import compare_run
from analysis.report import plots, treeplot
from analysis.report.example_round import example_round
from analysis.tables.build import build_tables
from analysis.tables.metrics import all_metrics
from analysis.tables.runs import load_runs
from analysis.tables.slot_hits import static_shape
from replay.core.config import TreeConfig
from replay.util.errors import SpecReplayError


@pytest.fixture(scope="module")
def data():
    runs = load_runs(["sample_dumps/synthetic_article", "sample_dumps/article_round"], progress=False)
    tables = build_tables(runs)
    return runs, all_metrics(tables)


def _texts(fig) -> str:
    parts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        parts += [t.get_text() for t in ax.texts]
        if ax.get_legend():
            parts += [t.get_text() for t in ax.get_legend().get_texts()]
    for leg in fig.legends:
        parts += [t.get_text() for t in leg.get_texts()]
    if fig._suptitle is not None:
        parts.append(fig._suptitle.get_text())
    return "\n".join(parts)


def _labelled(fig, rounds_text: str) -> None:
    text = _texts(fig)
    assert rounds_text in text, text
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>" or not ax.axison:
            continue
        assert ax.get_xlabel() or ax.get_ylabel(), f"unlabelled axes in {text[:80]}"


@pytest.mark.slow
def test_every_plot_is_labelled_and_saved(data, tmp_path):
    runs, m = data
    synth = runs[0]
    table, _ = compare_run(synth, [synth.config, TreeConfig.from_lists([[6], [1, 1, 1], [1]])])
    figs = {
        "acc": (plots.plot_accepted_length(m["accepted_length"]), "300, article_round: 1 rounds"),
        "depth": (plots.plot_depth_acceptance(m["depth_acceptance"]), "300"),
        "rank": (
            plots.plot_rank_heatmap(m["rank_of_hit"], m["hit_outcome"], "synthetic_article", synth.config),
            "300 rounds",
        ),
        "slot": (plots.plot_parent_slot(m["parent_slot"], "synthetic_article", 300), "300 rounds"),
        "runs": (plots.plot_compare_runs(m["summary"], m["depth_acceptance"]), "article_round: 1 rounds"),
        "cmp": (plots.plot_compare_configs(table, "synthetic_article", "default"), "300 rounds"),
        "tree": (
            treeplot.plot_tree_hits(
                static_shape(synth.config),
                m["slot_hits"][m["slot_hits"]["run"] == "synthetic_article"],
                "synthetic_article",
                synth.config,
            ),
            "300 rounds",
        ),
        "round": (treeplot.plot_round_tree(example_round(runs[1]).result, run="article_round"), "1 round"),
    }
    for name, (fig, rounds_text) in figs.items():
        _labelled(fig, rounds_text)
        paths = plots.save_figure(fig, tmp_path, name)
        assert [p.suffix for p in paths] == [".png", ".svg"]
        assert all(p.stat().st_size > 5000 for p in paths)
    # the article's round: its path R → A1 → B11 → C111 fills the first slot of every level; the
    # labels name slots (expanded parent in selection order, child rank), not nodes
    art = m["slot_hits"][m["slot_hits"]["run"] == "article_round"]
    text = _texts(treeplot.plot_tree_hits(static_shape(runs[1].config), art, "article_round", runs[1].config))
    assert "A:p1c1\n100%" in text and "C:p1c1\n100%" in text and "A:p1c2\n0%" in text and "C:p2c1\n0%" in text
    assert "Per-slot hit frequency" in text and "C111" not in text


def test_hierarchical_layout_article(data):
    runs, _ = data
    tree = example_round(runs[1]).result.tree
    pos = treeplot.hierarchical_layout(tree)
    assert all(pos[u][1] == -tree.depths[u] for u in range(13))
    # leaves left to right in tree order under their parents: C111, B12, C211, B22, A3..A6
    leaves_x = [pos[u][0] for u in (11, 8, 12, 10, 3, 4, 5, 6)]
    assert leaves_x == sorted(leaves_x) and len(set(leaves_x)) == 8
    assert pos[7][0] == pos[11][0]  # B11 sits over its only child
    assert pos[1][0] == (pos[7][0] + pos[8][0]) / 2  # A1 centred over B11, B12


def test_tokenizer_text_on_round_picture(data, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel

    vocab = {"[UNK]": 0, "hello": 41824, "world": 41760, "again": 22870}
    tk = tokenizers.Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    path = tmp_path / "tokenizer.json"
    tk.save(str(path))
    decode = treeplot.load_decoder(path)
    assert decode(41824) == "hello"
    runs, _ = data
    fig = treeplot.plot_round_tree(example_round(runs[1]).result, decode, "article_round")
    text = _texts(fig)
    assert "hello" in text and "again" in text
    assert treeplot.load_decoder(tmp_path)(41760) == "world"  # a directory holding tokenizer.json


def test_tokenizer_directory_without_tokenizer_json_is_refused_without_transformers(tmp_path, monkeypatch):
    """The offline side never falls back to transformers (it would import torch): one clear error."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # any import of it would raise ImportError
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SpecReplayError, match=r"no tokenizer\.json in this directory"):
        treeplot.load_decoder(tmp_path)


def test_legends_of_several_runs_sit_under_the_plot_not_on_the_bars(data):
    _, m = data
    for fig in (
        plots.plot_depth_acceptance(m["depth_acceptance"]),
        plots.plot_accepted_length(m["accepted_length"]),
        plots.plot_compare_runs(m["summary"], m["depth_acceptance"]),
    ):
        fig.canvas.draw()
        assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
        legend = fig.legends[0].get_window_extent()
        for ax in fig.axes:
            assert not legend.overlaps(ax.get_window_extent()), "the legend covers an axes"
    text = _texts(plots.plot_depth_acceptance(m["depth_acceptance"]))
    assert "Per-position acceptance rate (vLLM): P(L ≥ d)" in text and "synthetic_article (300 rounds)" in text


def test_compare_plot_marks_the_measured_speedup(data):
    import pandas as pd

    runs, _ = data
    synth = runs[0]
    table, _ = compare_run(synth, [synth.config, TreeConfig.from_lists([[1], [1], [1]])])
    table["measured_speedup"] = [1.5, float("nan")]
    fig = plots.plot_compare_configs(table, "synthetic_article", "measured: manifest timings")
    speed_ax = fig.axes[1]
    marks = [line for line in speed_ax.get_lines() if line.get_marker() == "D"]
    assert len(marks) == 1 and marks[0].get_ydata()[0] == 1.5 and pd.isna(marks[0].get_ydata()[1])
    assert "measured speedup" in _texts(fig) and "cost model: measured: manifest timings" in _texts(fig)


def test_sweep_scatter_keeps_every_name_inside_the_axes():
    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from analysis.report.sweep_plots import _scatter

    # the longest name on the rightmost point, the highest point's name at the top edge
    table = pd.DataFrame(
        {
            "name": ["1", "3,1,1", "6,2x2,1x1,1x1,1x1,1x1,1x1,1x1,1x1"],
            "mean_acceptance_length": [1.8, 2.9, 4.3],
            "tokens_per_s": [2.0, 3.0, 1.2],
        }
    )
    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _scatter(ax, table, "mean_acceptance_length", "tokens_per_s")
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)  # names inside the axes: none runs off, none hits the title
    for t in ax.texts:
        box = t.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, t.get_text()


def test_the_accepted_path_is_green_where_parents_are_not_in_node_order(tmp_path):
    """A level's parents are the previous step's expanded nodes in selection order: here A2 before
    A1, then B11' (node 9) before B21' (node 7). The edges were drawn parent by parent but coloured
    child by child, so the green path landed on other edges."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_hex

    from tests.test_user_mistakes import article_by_hand

    dump = article_by_hand(tmp_path / "d")
    for name, parents in (
        ("draft_step_0_123_139", "0"),
        ("draft_step_1_124_140", "2\n1"),
        ("draft_step_2_124_140", "9\n7"),
    ):
        (dump / f"{name}.parents").write_text(parents + "\n", encoding="utf-8")
    (run,) = load_runs([str(dump)], progress=False)
    view = example_round(run, (124, 140)).result
    assert tuple(view.acceptance.accepted_nodes) == (1, 9, 11)
    fig = treeplot.plot_round_tree(view)
    (lines,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    pos = treeplot.hierarchical_layout(view.tree)
    at = {tuple(np.round(xy, 6)): u for u, xy in pos.items()}
    green = {
        (at[tuple(np.round(seg[0], 6))], at[tuple(np.round(seg[1], 6))])
        for seg, colour in zip(lines.get_segments(), lines.get_colors())
        if to_hex(colour) == "#2ca02c"
    }
    assert green == {(0, 1), (1, 9), (9, 11)}
