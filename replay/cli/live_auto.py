"""``generate --config auto`` and the predicted-vs-measured lines of ``sweep``: the glue between the
live harness (cost curve, calibration run: replay.live.calibration) and the analysis that predicts
speedups and chooses (analysis.shapes.auto_choice). CLI layer: it imports both sides; neither
imports the other.

The steps of auto, and what stays in the run's directory so that every printed number can be
recomputed: docs/live-harness.md, "generate --config auto".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.cost.model import CostModel
from analysis.shapes.auto_choice import AutoChoice, choice_json, choose, curve_cost, predict_sweep
from analysis.shapes.speedpredict import ceiling_lines, prediction_lines
from replay.core.config import TreeConfig
from replay.core.config_grammar import parse_spec
from replay.core.json_figures import json_figures
from replay.core.temperature import format_temperature
from replay.live.calibration import (
    CALIBRATION_PROMPTS,
    CALIBRATION_TOKENS,
    CALIBRATION_TREE,
    CURVE_FILE,
    measure_calibration_curve,
    run_calibration,
)
from replay.live.timing import Clock
from replay.util.atomic import write_json_atomic
from replay.util.errors import SpecReplayError

if TYPE_CHECKING:  # torch: imported by calibrate() only, so the CLI checks options before loading it
    from replay.live.generate import DecodeOptions
    from replay.live.models.load import LiveModel

AUTO = "auto"
AUTO_FILE = "auto.json"


def is_auto(text: str) -> bool:
    return text.strip().lower() == AUTO


def check_auto_options(temperature: float) -> None:
    """auto predicts from greedy acceptance replayed on the calibration rounds: refuse sampling."""
    if temperature > 0:
        raise SpecReplayError(
            f"--config auto: predicts greedy acceptance; got --temperature {format_temperature(temperature)} (use 0, or give a config)"
        )


def calibrate(
    draft: LiveModel,
    target: LiveModel,
    prompts: Sequence[Sequence[int]],
    options: DecodeOptions,
    out: str | Path,
    calibration: str = CALIBRATION_TREE,
    prompts_used: int = CALIBRATION_PROMPTS,
    tokens: int = CALIBRATION_TOKENS,
    cost: CostModel | None = None,
    clock: Clock | None = None,
    extra: Sequence[TreeConfig] = (),
) -> AutoChoice:
    """Steps 1-3 of auto (the cost curve, the calibration run, the choice); ``cost`` skips measuring the curve (tests, a known curve);
    ``extra`` shapes are predicted and reported too, never chosen."""
    out = Path(out)
    tree = parse_spec(calibration, "calibration tree").tree
    if cost is None:
        cost = curve_cost(measure_calibration_curve(draft, target, tree, out, clock))
    else:
        write_json_atomic(out / CURVE_FILE, json_figures(cost.to_json()))
    calib_dir = run_calibration(draft, target, prompts, options, out, tree, prompts_used, tokens)
    return choose(calib_dir, cost, extra)


def choice_lines(choice: AutoChoice) -> list[str]:
    return [
        f"auto: calibration tree {choice.calibration.short()} ({choice.calibration_dir}), cost: {choice.cost.source}",
        *prediction_lines(choice.predictions),
        *ceiling_lines(choice.ceiling),
        f"auto: chose {choice.config.short()} (predicted {choice.prediction.speedup:.3f}x over target-only)",
    ]


def measured_line(choice: AutoChoice, measured: float | None) -> str:
    """``measured`` is the run's end-to-end speedup (prefill included), the median of its interleaved passes."""
    m = "not measured (no baseline)" if measured is None else f"{measured:.3f}x end to end"
    return (
        f"auto: {choice.config.short()} predicted {choice.prediction.speedup:.3f}x, measured {m} "
        "(median of timed passes; measured includes prefill, the prediction leaves it out)"
    )


def write_choice(out: str | Path, choice: AutoChoice, measured: float | None) -> Path:
    path = Path(out) / AUTO_FILE
    write_json_atomic(path, json_figures(choice_json(choice, measured)))
    return path


# ------------------------------------------------------------------------------------------ sweep


def sweep_prediction_lines(out: str | Path, table) -> list[str]:
    """Predicted beside measured speedup for a sweep's rows (analysis.shapes.auto_choice.predict_sweep);
    nothing when it predicts nothing."""
    sweep = predict_sweep(out, table)
    if sweep is None:
        return []
    return [  # the config in its canonical spelling, as the table above prints it
        f"predicted vs measured speedup (acceptance: exact replay on the rounds of {sweep.calibration.short()}; "
        f"cost: {sweep.curve.name}; predicted leaves prefill out, measured is end to end, prefill included)",
        *prediction_lines(sweep.predictions, sweep.measured),
        *ceiling_lines(sweep.ceiling),
    ]
