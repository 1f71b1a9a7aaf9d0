"""Every table with a run column lists the runs in the order they were named, in every command and
mode (analysis.tables.path_metrics.in_run_order for the node tables that sort): stats' rank_of_hit,
hit_outcome and parent_slot sorted them by name, and compare --top did too."""

from __future__ import annotations

import json
import shutil

import pytest

from replay.cli import main

SYNTH = "sample_dumps/synthetic_article"


def _run_orders(body: dict) -> dict[str, list[str]]:
    """Per table of a --json body with a run column: its runs in order of first appearance."""
    out = {}
    for name, rows in body.items():
        if isinstance(rows, list) and rows and isinstance(rows[0], dict) and "run" in rows[0]:
            out[name] = list(dict.fromkeys(r["run"] for r in rows))
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["stats"],
        ["stats", "--temperature", "0.7"],
        ["compare", "--configs", "[4]|[2,2]", "[2]|[1]"],
        ["compare", "--configs", "[4]|[2,2]", "[2]|[1]", "--top", "1"],
        ["compare", "--temperature", "0.7", "--configs", "[4]|[2,2]", "[2]|[1]", "--top", "1"],
    ],
)
def test_tables_keep_the_runs_in_the_order_named(capsys, tmp_path, argv):
    dumps = [tmp_path / "zeta", tmp_path / "alpha"]  # named out of alphabetical order
    for d in dumps:
        shutil.copytree(SYNTH, d)
    assert main([argv[0], *map(str, dumps), "--json", "--no-progress", *argv[1:]]) == 0
    orders = _run_orders(json.loads(capsys.readouterr().out))
    assert orders and all(runs == ["zeta", "alpha"] for runs in orders.values()), orders
