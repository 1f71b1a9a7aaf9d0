"""One formula per acceptance figure: the mean acceptance length, the draft acceptance rate, the mean
accepted length and the per-position acceptance rate are computed by replay.core.headline
(SUMMARY_METRICS, per_position_rates) and nowhere else; stats, stats --temperature, compare,
compare --temperature (its sums: headline.summed_rounds), replay --summary, batch, generate and sweep
read them from there.

A static scan of the package: a value given to one of these names (a dict key, a keyword, an
assignment, a property) that is arithmetic of its own (``a / b``, ``x + 1``, ``v.mean()``) is a second
formula. The few left are listed with the reason they are not the rounds' formula; the list must
shrink, never silently grow."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from replay.core.headline import (
    ACCEPTANCE_FIGURES,
    SUMMARY_METRICS,
    greedy_rounds,
    headline,
    per_position_rates,
    summary_row,
)

ROOT = Path(__file__).resolve().parent.parent
HOME = Path("replay/core/headline.py")
# compare --temperature's names of the same figures over one side of the bounds
# (analysis.compare.sampling.SAMPLING_COLUMNS: the mean accepted length, the mean acceptance length
# over the determined rounds and over every round)
AT_T_FIGURES = ("expected_accepted_length", "expected_block_efficiency", "all_rounds_block_efficiency")
FIGURES = (*ACCEPTANCE_FIGURES, "per_position_acceptance_rate", *AT_T_FIGURES)

# (file, name): why its arithmetic is not a second copy of the rounds' formula.
OTHER_FORMULAS = {
    # a lazy Dask frame's per-run reduction (docs/scale.md); tests/test_scale_dask.py holds it to stats
    ("analysis/tables/dask_tables.py", "mean_acceptance_length"): "Dask groupby mean",
    # a gamma strategy's walk keeps each branch's sums, not its rounds
    ("analysis/compare/gamma_strategies.py", "mean_acceptance_length_lo"): "sums of a strategy walk",
    ("analysis/compare/gamma_strategies.py", "mean_acceptance_length_hi"): "sums of a strategy walk",
    # at T: the mean over rounds of each round's bounds on P(L >= d), not a count of accepted lengths
    ("analysis/tables/sampling.py", "per_position_acceptance_rate_lo"): "expectation at T",
    ("analysis/tables/sampling.py", "per_position_acceptance_rate_hi"): "expectation at T",
}


def _is_figure(name: str | None) -> bool:
    return name is not None and name.removesuffix("_lo").removesuffix("_hi") in FIGURES


def _is_arithmetic(value: ast.expr) -> bool:
    """``a / b``, ``x + 1``, ``v.mean()`` / ``v.sum()``, or a conditional choosing one of them."""
    if isinstance(value, ast.IfExp):
        return _is_arithmetic(value.body) or _is_arithmetic(value.orelse)
    if isinstance(value, ast.BinOp):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("mean", "sum")


def _computed_figures(tree: ast.AST) -> list[str]:
    """The figure names ``tree`` gives a value by arithmetic of its own."""
    found = []
    for node in ast.walk(tree):
        pairs: list[tuple[str | None, ast.expr | None]] = []
        if isinstance(node, ast.Dict):
            pairs = [(k.value if isinstance(k, ast.Constant) else None, v) for k, v in zip(node.keys, node.values)]
        elif isinstance(node, ast.keyword):
            pairs = [(node.arg, node.value)]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [
                t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None for t in targets
            ]
            pairs = [(n, node.value) for n in names]
        elif isinstance(node, ast.FunctionDef):
            returns = [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
            pairs = [(node.name, r) for r in returns]
        found += [
            name
            for name, value in pairs
            if isinstance(name, str) and _is_figure(name) and value is not None and _is_arithmetic(value)
        ]
    return found


def package_files() -> list[Path]:
    files = [*(ROOT / "replay").rglob("*.py"), *(ROOT / "analysis").rglob("*.py")]
    return sorted(p.relative_to(ROOT) for p in files if "testing" not in p.relative_to(ROOT).parts[:2])


def test_each_acceptance_figure_is_computed_in_one_place():
    found = {
        (str(path), name)
        for path in package_files()
        if path != HOME
        for name in _computed_figures(ast.parse((ROOT / path).read_text()))
    }
    assert found - OTHER_FORMULAS.keys() == set(), "a second formula: compute the figure with replay.core.headline"
    assert OTHER_FORMULAS.keys() - found == set(), "listed but gone: take it off OTHER_FORMULAS"


def test_the_scan_finds_a_second_formula():
    planted = ast.parse(
        "def row(acc, n):\n"
        "    return {'mean_acceptance_length': acc.mean() + 1, 'draft_acceptance_rate_lo': acc.sum() / n}\n"
        "class H:\n"
        "    @property\n"
        "    def mean_accepted_length(self):\n"
        "        return self.accepted / self.rounds if self.rounds else float('nan')\n"
        "def at_t(lo_sum, nd):\n"
        "    return {'expected_block_efficiency_lo': lo_sum / nd + 1.0 if nd else float('nan')}\n"
    )
    assert sorted(_computed_figures(planted)) == [
        "draft_acceptance_rate_lo",
        "expected_block_efficiency_lo",
        "mean_acceptance_length",
        "mean_accepted_length",
    ]


@pytest.mark.parametrize("accepted", [[2, 2, 1], [0, 0, 0], [], [3, 1, 4, 1, 5]])
def test_the_headline_is_the_summary_formulas(accepted):
    """replay --summary's headline and stats' summary row are one computation: equal to the last bit,
    NaN alike without rounds or without drafted tokens."""
    acc = np.array(accepted, dtype=np.int64)  # [R]
    nodes = np.full(acc.shape[0], 0 if not accepted or max(accepted) == 0 else 5, dtype=np.int64)  # [R]
    steps = np.full(acc.shape[0], 5, dtype=np.int64)  # [R]
    head = headline(acc, nodes, steps)
    row = summary_row(greedy_rounds(acc, {"num_nodes": nodes}), names=ACCEPTANCE_FIGURES)
    for name in ACCEPTANCE_FIGURES:
        assert np.array_equal(getattr(head, name), row[name], equal_nan=True), name
    assert np.array_equal(head.per_position, per_position_rates(acc, 5 if accepted else 0), equal_nan=True)
    assert {m.name for m in SUMMARY_METRICS} >= set(ACCEPTANCE_FIGURES)
