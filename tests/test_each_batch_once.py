"""A batch-loaded run's batches are read in one place: analysis.tables.runs.each_batch picks the
batches load_run kept (LabelledRun.batches), else reads and replays the run again. No other library
module reads ``.batches`` of a loaded run, except the uses listed here, which are not that choice."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.library_scan import assert_one_place

HOME = "analysis/tables/runs.py"

# (module, the expression's source text) → why it reads the kept batches itself.
ALLOWED = {
    ("analysis/shapes/dumps.py", "loaded.batches"): "scan_run's statistics pass makes its own pieces of them",
}


def _batches_reads(path: Path) -> list[str]:
    """Source text of every ``X.batches`` whose X is a plain name (a loaded run or a read chunk)."""
    text = path.read_text()
    return [
        ast.get_source_segment(text, node) or "batches"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Attribute) and node.attr == "batches" and isinstance(node.value, ast.Name)
    ]


def test_only_each_batch_chooses_between_kept_batches_and_reading_again():
    assert_one_place(
        HOME,
        _batches_reads,
        "a run's kept batches read",
        "each_batch",
        allowed=ALLOWED,
        folders=("analysis", "replay/cli"),
    )
