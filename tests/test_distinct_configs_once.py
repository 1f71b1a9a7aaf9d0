"""Which configs count as the same is one rule, replay.core.config.distinct_configs (they print the
same), used by compare's option configs, the report's default and per-run sets, --generate, the
sweep's config lists and generate --config auto's candidates. No other library module keeps a
config only when its printed or run name is new."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pandas as pd

from replay.cli import main
from replay.core.config import TreeConfig, distinct_configs
from tests.library_scan import assert_one_place

HOME = "replay/core/config.py"
NAMERS = {"short", "run_name", "format_config", "grid_item"}

# (module, the expression's source text) → why it looks a config's name up without deduplicating.
ALLOWED = {
    (
        "analysis/shapes/auto_choice.py",
        "p.config.short() in choice.candidates",
    ): "marks the predictions that were candidates",
    ("analysis/compare/sampling_sums.py", "undetermined.setdefault("): "counts undetermined rounds per config",
}


def _names_a_config(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and (getattr(n.func, "attr", None) in NAMERS or getattr(n.func, "id", None) in NAMERS)
        for n in ast.walk(node)
    )


def _dedupes(path: Path) -> list[str]:
    """Source text of every membership test on, or set/dict insertion of, a config's printed name
    (or a name assigned from one, as ``key = (c.short(), c.top_head)``)."""
    text = path.read_text()
    tree = ast.parse(text)
    keys = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _names_a_config(node.value)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        keyed = None
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            keyed = node.left
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in {"add", "setdefault"} and node.args:
            keyed = node.args[0]
        if keyed is not None and (_names_a_config(keyed) or (isinstance(keyed, ast.Name) and keyed.id in keys)):
            found.append(ast.get_source_segment(text, node) or "dedupe")
    return found


def test_only_distinct_configs_says_which_configs_are_the_same():
    assert_one_place(HOME, _dedupes, "configs deduplicated", "distinct_configs", allowed=ALLOWED)


def test_distinct_configs_keeps_the_first_of_each_printed_form():
    a = TreeConfig.from_lists([[6], [2, 2], [1, 1]])
    a_again = TreeConfig.from_lists([[6], [2, 2], [1, 1]], gamma_threshold=0.0)
    with_threshold = TreeConfig.from_lists([[6], [2, 2], [1, 1]], gamma_threshold=0.2)
    dynamic = TreeConfig.from_lists([[6], [2, 2], [1, 1]], tree_type=1)
    chain = TreeConfig.from_lists([[1], [1]])
    got = distinct_configs([chain, a, with_threshold, a_again, dynamic, chain])
    assert [c.short() for c in got] == ["[1]|[1]", "[6]|[2,2]|[1,1]", "[6]|[2,2]|[1,1]@0.2", "[6]|[2,2]|[1,1]+dyn"]
    assert got[1] is a


def test_compare_shows_a_repeated_config_once(capsys):
    """The recorded config first, then each named config once, whichever spelling repeats it."""
    configs = ["[4]|[2,2]", "4,2x2", "[6]|[2,2]|[1,1]", "[2]|[1]", "2_1"]
    assert main(["compare", "sample_dumps/synthetic_article", "--no-progress", "--csv", "--configs", *configs]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(rows["config"]) == ["[6]|[2,2]|[1,1]", "[4]|[2,2]", "[2]|[1]"]
