"""Where the target's top-1 sits among a path node's draft candidates is counted twice, for two
commands: recommend's statistics pass (analysis.shapes.stats, the acceptance model's visits and hits)
and stats' rank_of_hit table (analysis.tables.node_counts). On every sample they count the same
attempts and the same ranks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.shapes.dumps import scan_run
from replay.cli import main
from replay.core.config import TreeConfig
from replay.testing.batch_synth import varied_run, write_text_rounds
from tests.test_output_schema import SAMPLES

ALL_SAMPLES = [*SAMPLES, *(f"sample_dumps/qwen2.5-coder/{s}" for s in ("article", "chain4", "deep", "wide"))]


def _varied_dump(directory, layout: str, seed: int) -> str:
    """A text dump of the article's config with real dumps' varied sizes and early stops."""
    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]])
    write_text_rounds(directory, varied_run(cfg, 400, seed, early_stop_rate=0.2, layout=layout))
    (directory / "config.json").write_text(json.dumps(cfg.to_json()))
    return str(directory)


@pytest.mark.parametrize("sample", [*ALL_SAMPLES, "varied-all", "varied-parents"])
def test_recommend_and_stats_count_the_same_target_ranks(sample, capsys, tmp_path):
    if sample.startswith("varied-"):
        sample = _varied_dump(tmp_path, sample.removeprefix("varied-"), seed=len(sample))
    model = scan_run(sample).stats.stats
    hits = model.k.sum(axis=(0, 2))  # [depths, cols]: attempts at step d whose target is the rank-r child
    visits = model.n.sum(axis=(0, 2))  # [depths]
    assert main(["stats", sample, "--json", "--no-progress"]) == 0
    rows = json.loads(capsys.readouterr().out)["rank_of_hit"]
    table = np.zeros_like(hits)
    attempts = np.zeros_like(visits)
    for r in rows:
        attempts[r["depth"] - 1] += r["count"]
        if r["target_rank"] is not None:
            table[r["depth"] - 1, r["target_rank"]] += r["count"]
    assert attempts.tolist() == visits.tolist()
    assert table.tolist() == hits.tolist()
