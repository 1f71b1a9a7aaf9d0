"""Shape prediction checked on the committed real-model dumps (Qwen2.5-Coder 0.5B → 1.5B):
every contained shape's predicted block efficiency agrees with its exact offline replay."""

from pathlib import Path

import pytest

from replay.testing.replayer import replay_directory
from tests.reference_runs import recommend

REAL = Path(__file__).resolve().parent.parent / "sample_dumps" / "qwen2.5-coder"


@pytest.mark.parametrize("name", ["article", "wide", "deep", "chain4"])
def test_contained_shapes_agree_on_real_dumps(name):
    rec = recommend([replay_directory(REAL / name)], budget=12, bootstrap=100)
    measured = [c for c in rec.comparisons if c.measured is not None]
    assert any(c.label == "recorded" for c in measured)
    assert len(measured) >= 3
    for c in measured:  # judged on both bounds where some rounds are undecidable
        assert c.agree is True, c.to_json()
