"""bench/predict_check.py: the offline recomputation of a recorded duel's predictions (no torch)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_predict_check_reproduces_the_recorded_duels_predictions(tmp_path, capsys):
    """bench/predict_check.py on the recorded duel: its "as recorded" prediction (one-token draft
    steps on the unfitted curve) equals what the duel printed, row by row, and the measured
    speedups are the duel's own."""
    spec = importlib.util.spec_from_file_location("predict_check", ROOT / "bench" / "predict_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    duel_json = ROOT / "bench" / "results" / "duel_livespeed.json"
    out = tmp_path / "check.json"
    assert check.main([str(duel_json), "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    result = json.loads(duel_json.read_text())
    assert records.keys() == result["dtypes"].keys()
    for dtype, recs in records.items():
        duel = {r["method"]: r for r in result["dtypes"][dtype]["duel"]}
        assert recs and all(r["raw"] == pytest.approx(r["recorded"], rel=1e-12) for r in recs)
        for r in recs:
            if r["where"] == "duel":
                assert r["measured"] == duel[r["method"]]["speedup_vs_target_only"]["median"]
                assert r["draft_ms_measured"] == duel[r["method"]]["draft_ms_per_round"]
    assert "live round, fitted curve" in capsys.readouterr().out
    assert check.main([str(tmp_path / "missing.json")]) == 2
