"""``generate --config auto`` and the predicted-vs-measured lines of ``sweep``: the glue between the
live harness (cost curve, calibration run) and the analysis that predicts speedups
(analysis.shapes.speedpredict). CLI layer: it imports both sides; neither imports the other.

The steps of auto, and what stays in the run's directory so that every printed number can be
recomputed: docs/live-harness.md, "generate --config auto".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.compare.subtree import is_contained
from analysis.cost.model import CostModel
from analysis.shapes.dumps import scan_run
from analysis.shapes.speedpredict import (
    Ceiling,
    SpeedPrediction,
    best_prediction,
    candidate_configs,
    ceiling,
    ceiling_lines,
    nondecreasing,
    predict_speedups,
    prediction_lines,
)
from replay.core.config import TreeConfig, distinct_configs, parse_tree
from replay.core.config_grammar import parse_spec
from replay.core.temperature import format_temperature
from replay.live.sweep.directory import dumps_dir
from replay.live.timing import Clock
from replay.util.atomic import write_json_atomic
from replay.util.errors import SpecReplayError

if TYPE_CHECKING:  # torch: imported by calibrate() only, so the CLI checks options before loading it
    from replay.live.costs import CostCurve
    from replay.live.generate import DecodeOptions
    from replay.live.models.load import LiveModel

AUTO = "auto"
# Width 6 at the root, two heads below, then a chain to depth 6: the shapes it contains (and can
# therefore replay exactly) include every chain up to depth 6, the narrow trees a CPU can afford
# and the article's tree (6,2x2,1x1). A calibration round costs about one 16-token forward.
CALIBRATION_TREE = "6,2x2,1x1,1,1,1"
CALIBRATION_PROMPTS = 2  # the first prompts of the run
CALIBRATION_TOKENS = 24  # new tokens per calibration prompt (fewer when the run asks for fewer)
CALIBRATION_DIR = "calibration"  # inside the run's directory
CURVE_FILE = "cost_curve.json"  # analysis.cost.source finds it beside the run's dump
AUTO_FILE = "auto.json"
CURVE_REPEATS = 2


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


def is_auto(text: str) -> bool:
    return text.strip().lower() == AUTO


def check_auto_options(temperature: float) -> None:
    """auto predicts from greedy acceptance replayed on the calibration rounds: refuse sampling."""
    if temperature > 0:
        raise SpecReplayError(
            f"--config auto: predicts greedy acceptance; got --temperature {format_temperature(temperature)} (use 0, or give a config)"
        )


def curve_sizes(nodes: int) -> list[int]:
    """Token counts to time: every count up to 6 (chains and narrow trees), then a sparser grid up
    to ``nodes + 1`` (the calibration tree's own forward), the largest always included."""
    top = nodes + 1
    return sorted({*range(1, min(6, top) + 1), *(n for n in (8, 12, 16, 24, 32) if n < top), top})


def cost_model(curve: CostCurve) -> CostModel:
    """The analysis cost model of a measured curve with its draft step and draft times by token
    count (which price the live round's catch-up and expansion forwards)."""
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
    from replay.live.costs import measure_cost_curve, write_cost_curve
    from replay.live.generate import DecodeOptions
    from replay.live.run import run_speculative, save_run_manifest

    out = Path(out)
    tree = parse_spec(calibration, "calibration tree").tree
    if cost is None:
        curve = measure_cost_curve(target, draft, curve_sizes(tree.num_nodes), repeats=CURVE_REPEATS, clock=clock)
        write_cost_curve(out / CURVE_FILE, curve)
        cost = cost_model(curve)
    else:
        write_json_atomic(out / CURVE_FILE, cost.to_json())
    calib_dir = out / CALIBRATION_DIR
    calib_dir.mkdir(parents=True, exist_ok=True)
    calib_opts = DecodeOptions(
        min(tokens, options.max_new_tokens), options.temperature, options.seed, options.record_k, options.eos_token_id
    )
    used = list(prompts[: max(1, prompts_used)])
    generations = run_speculative(draft, target, used, tree, calib_opts, calib_dir)
    save_run_manifest(calib_dir, tree, draft, target, calib_opts, generations, extra={"auto": "calibration run"})
    return choose(calib_dir, cost, extra)


def choose(calibration_dir: str | Path, cost: CostModel, extra: Sequence[TreeConfig] = ()) -> AutoChoice:
    """Step 3: predict every candidate (and ``extra`` shapes) on the calibration dump, pick the best;
    the curve is fitted non-decreasing first (one noisy size must not pick the shape)."""
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


def write_choice(out: str | Path, choice: AutoChoice, measured: float | None) -> Path:
    path = Path(out) / AUTO_FILE
    write_json_atomic(path, choice_json(choice, measured))
    return path


# ------------------------------------------------------------------------------------------ sweep


def sweep_prediction_lines(out: str | Path, table) -> list[str]:
    """Predicted beside measured speedup for a sweep's rows: acceptance from the dump of the config
    with the most nodes that contains the most others (the sweep's widest tree is its calibration),
    costs from the sweep's cost_curve.json. Nothing when there is no curve or only one row."""
    out = Path(out)
    curve_path = out / CURVE_FILE
    if not curve_path.is_file() or len(table) < 1:
        return []
    body = json.loads(curve_path.read_text(encoding="utf-8"))
    if body.get("draft_step_s") is None:
        return []
    cost = nondecreasing(CostModel.from_json(body, f"measured: {curve_path}"))
    configs = [parse_tree(json.loads(s), "results table config_json") for s in table["config_json"]]
    k = max(
        range(len(configs)), key=lambda i: (sum(is_contained(o, configs[i]) for o in configs), configs[i].num_nodes)
    )
    dump_dir = dumps_dir(out) / str(table["name"].iloc[k])
    predictions = predict_speedups(scan_run(str(dump_dir)), configs, cost)
    measured = {c.short(): float(s) for c, s in zip(configs, table["speedup"])}
    return [  # the config in its canonical spelling, as the table above prints it
        f"predicted vs measured speedup (acceptance: exact replay on the rounds of {configs[k].short()}; cost: {curve_path.name}; "
        "predicted leaves prefill out, measured is end to end, prefill included)",
        *prediction_lines(predictions, measured),
        *ceiling_lines(ceiling(predictions, cost)),
    ]
