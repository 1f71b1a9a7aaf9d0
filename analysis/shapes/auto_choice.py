"""Step 3 of ``generate --config auto`` and the predictions of ``sweep``: every candidate shape
predicted (analysis.shapes.speedpredict) on the rounds of a calibration dump with a measured cost
curve, the best one chosen; and the JSON that records the choice (auto.json).

The calibration run that writes the dump and the curve is the live harness's
(replay.live.calibration); the CLI joins the two (replay.cli.live_auto). docs/live-harness.md,
"generate --config auto", says what stays in the run's directory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.compare.subtree import is_contained
from analysis.cost.model import CostModel
from analysis.cost.source import CURVE_NAME
from analysis.cost.timings import SWEEP_DUMPS_DIR
from replay.core.config import TreeConfig, distinct_configs, parse_tree
from replay.util.errors import SpecReplayError

from .dumps import scan_run
from .speedpredict import (
    Ceiling,
    SpeedPrediction,
    best_prediction,
    candidate_configs,
    ceiling,
    nondecreasing,
    predict_speedups,
)


@dataclass(frozen=True)
class AutoChoice:
    config: TreeConfig
    prediction: SpeedPrediction
    predictions: tuple[SpeedPrediction, ...]  # every shape predicted, best first
    candidates: tuple[str, ...]  # the shapes auto chose among (config.short()); the rest were only reported
    ceiling: Ceiling
    cost: CostModel
    calibration: TreeConfig
    calibration_dir: Path


def curve_cost(curve) -> CostModel:
    """The cost model of a measured curve (replay.live.costs.CostCurve: tokens, verify_s, draft_s,
    draft_step_s) with its draft step and draft times by token count (which price the live round's
    catch-up and expansion forwards)."""
    if curve.draft_step_s is None:
        raise SpecReplayError("cost curve: auto needs the draft step time (measure the curve with the draft)")
    return CostModel.from_json(
        {
            "tokens": list(curve.tokens),
            "verify_s": list(curve.verify_s),
            "draft_step_s": curve.draft_step_s,
            "draft_s": None if curve.draft_s is None else list(curve.draft_s),
        },
        "measured: cost curve of this run",
    )


def choose(calibration_dir: str | Path, cost: CostModel, extra: Sequence[TreeConfig] = ()) -> AutoChoice:
    """Predict every candidate (and ``extra`` shapes) on the calibration dump, pick the best; the
    curve is fitted non-decreasing first (one noisy size must not pick the shape)."""
    cost = nondecreasing(cost)
    dump = scan_run(str(calibration_dir))
    candidates = candidate_configs(dump, cost)
    predictions = predict_speedups(dump, distinct_configs(candidates + list(extra)), cost)
    best = best_prediction(predictions[: len(candidates)])  # the extra shapes are reported, not chosen
    if best is None:
        raise SpecReplayError(
            f"auto: no candidate shape could be predicted from the calibration run in {calibration_dir}"
        )
    ranked = sorted(predictions, key=lambda p: -(p.speedup if p.speedup is not None else float("-inf")))
    return AutoChoice(
        best.config,
        best,
        tuple(ranked),
        tuple(c.short() for c in candidates),
        ceiling(predictions, cost),
        cost,
        dump.tree,
        Path(calibration_dir),
    )


def prediction_json(p: SpeedPrediction) -> dict[str, Any]:
    return {
        "config": p.config.short(),
        "nodes": p.config.num_nodes,
        "gamma": p.config.gamma,
        "accepted": p.accepted,
        "block_efficiency": p.block_efficiency,
        "rounds": p.rounds,
        "undecidable": p.undecidable,
        "round_s": p.round_s,
        "leaf_stops": p.leaf_stops,
        "predicted_speedup": p.speedup,
        "refused": p.refused,
    }


def choice_json(choice: AutoChoice, measured: float | None) -> dict[str, Any]:
    """auto.json: the choice, every prediction and the ceiling; ``measured`` is the run's end-to-end speedup."""
    c = choice.ceiling
    return {
        # measured_speedup_wall: end to end, prefill included, as compare names it (its measured_speedup is decode only)
        "chosen": choice.config.short(),
        "predicted_speedup": choice.prediction.speedup,
        "measured_speedup_wall": measured,
        "calibration_tree": choice.calibration.short(),
        "calibration_dir": str(choice.calibration_dir),
        "cost": {**choice.cost.to_json(), "source": choice.cost.source},
        "predictions": [
            {**prediction_json(p), "candidate": p.config.short() in choice.candidates} for p in choice.predictions
        ],
        "ceiling": {
            "best_shape": c.best.config.short() if c.best else None,
            "best_predicted": c.best.speedup if c.best else None,
            "all_accepted_bound": c.bound,
            "all_accepted_depth": c.bound_depth,
            "all_accepted_by_depth": list(c.bound_by_depth),
        },
    }


@dataclass(frozen=True)
class SweepPrediction:
    """A sweep's rows predicted from the rounds of one of its configs (the calibration)."""

    calibration: TreeConfig  # the config whose dump gave the acceptance
    curve: Path  # the sweep's cost_curve.json
    predictions: tuple[SpeedPrediction, ...]  # one per row, in the table's order
    measured: dict[str, float]  # config.short() -> the row's measured speedup
    ceiling: Ceiling


def predict_sweep(out: str | Path, table) -> SweepPrediction | None:
    """Predicted beside measured speedup for a sweep's rows (``table``: results.csv's frame):
    acceptance from the dump of the config with the most nodes that contains the most others (the
    sweep's widest tree is its calibration), costs from the sweep's cost_curve.json. None when
    there is no curve, it has no draft step, or the table has no row."""
    out = Path(out)
    curve_path = out / CURVE_NAME
    if not curve_path.is_file() or len(table) < 1:
        return None
    body = json.loads(curve_path.read_text(encoding="utf-8"))
    if body.get("draft_step_s") is None:
        return None
    cost = nondecreasing(CostModel.from_json(body, f"measured: {curve_path}"))
    configs = [parse_tree(json.loads(s), "results table config_json") for s in table["config_json"]]
    k = max(
        range(len(configs)), key=lambda i: (sum(is_contained(o, configs[i]) for o in configs), configs[i].num_nodes)
    )
    dump_dir = out / SWEEP_DUMPS_DIR / str(table["name"].iloc[k])
    predictions = predict_speedups(scan_run(str(dump_dir)), configs, cost)
    measured = {c.short(): float(s) for c, s in zip(configs, table["speedup"])}
    return SweepPrediction(configs[k], curve_path, tuple(predictions), measured, ceiling(predictions, cost))
