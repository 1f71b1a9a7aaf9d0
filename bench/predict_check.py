"""Predicted vs measured speedup of a finished speed duel, recomputed offline (no model, no timing):
the prediction as the duel made it (every draft forward charged as a one-token step) and with the
live round's draft as the loop runs it (analysis.cost.model ``live_round_cost``: catch-up over 1 or
2 tokens, one forward over each later step's heads, priced from the curve's draft times by token
count), each beside the measured speedup of the same run.

    PYTHONPATH=. python bench/predict_check.py bench/results/duel_livespeed.json

Inputs, all written by the duel (bench/duel.py): its JSON (measured speedups, per-call runs) and,
per dtype, ``<out>/calibration_<dtype>/``: ``cost_curve.json`` (target and draft forward times by
token count) and ``calibration/`` (the calibration dump). Both predictions fit the curve
non-decreasing first, as ``generate --config auto`` does.

Per dtype, one table over the duel's harness rows and the sweep's shapes: calibration acceptance
and leaf-stop fraction, the old and the new prediction, the measured speedup (the duel: median of
the timed passes' ratios to target-only; the sweep: one pass) and predicted/measured. For the
duel's rows it adds, from the recorded calls, the draft ms per round measured (first round's
catch-up over the whole prompt included) beside both models', the measured acceptance on the duel
prompts and the new prediction at that acceptance, and the measured decode-only speedup (pooled
tokens over seconds without the target prefill, both sides) beside the pooled whole-call one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

from analysis.cost.model import CostModel  # noqa: E402
from analysis.shapes.dumps import scan_run  # noqa: E402
from analysis.shapes.speedpredict import SpeedPrediction, nondecreasing, predict_speedups  # noqa: E402
from replay.core.config_grammar import parse_spec  # noqa: E402
from replay.util.errors import SpecReplayError  # noqa: E402

TARGET_HARNESS = "target-only (harness loop)"  # bench/duel.py's baseline row


def calibration_paths(duel_json: Path, dtype: str, auto: dict[str, Any]) -> tuple[Path, Path]:
    """(calibration dump, cost curve) of one dtype: the recorded path if it exists, else beside the JSON."""
    recorded = Path(auto.get("calibration_dir", ""))
    dump = recorded if recorded.is_dir() else duel_json.with_suffix("") / f"calibration_{dtype}" / "calibration"
    return dump, dump.parent / "cost_curve.json"


def predictions(
    dump_dir: Path, curve_path: Path, shapes: list[str]
) -> tuple[dict[str, list[SpeedPrediction]], CostModel]:
    """Each shape predicted three ways: ``raw``, the curve as measured without its draft times
    (every draft forward a one-token step, the verify curve unfitted: what the recorded duel's code
    printed); ``steps``, the same fitted non-decreasing (today's rule without draft times); ``live``,
    the fitted curve with its draft times (the live round). Returns them and the ``live`` curve."""
    full = CostModel.load(curve_path)
    if full.draft_s is None:
        raise SpecReplayError(
            f"{curve_path}: no 'draft_s' (draft forward times by token count); nothing new to predict"
        )
    steps_only = CostModel(full.tokens, full.verify_s, full.draft_step_s, f"{full.source} without draft_s")
    dump = scan_run(str(dump_dir))
    configs = [parse_spec(s, "shape").tree for s in shapes]
    live = nondecreasing(full)
    ways = {"raw": steps_only, "steps": nondecreasing(steps_only), "live": live}
    return {k: predict_speedups(dump, configs, c) for k, c in ways.items()}, live


def pooled_rates(runs: list[dict], method: str) -> tuple[float, float] | None:
    """(tokens/s over whole calls, tokens/s without the target prefill), pooled over the timed calls."""
    mine = [r for r in runs if r["method"] == method and r["repeat"] >= 0]
    if not mine:
        return None
    tokens = sum(len(r["output_ids"]) for r in mine)
    return tokens / sum(r["seconds"] for r in mine), tokens / sum(r["seconds"] - r["prefill_s"] for r in mine)


def shape_of(method: str) -> str | None:
    """The config name of a harness row ('harness auto 1_1' -> '1_1'); None for the rest."""
    if not method.startswith("harness ") or "fast path" in method:
        return None
    return method.split()[-1]


def check_rows(body: dict[str, Any], dump_dir: Path, curve_path: Path) -> list[dict[str, Any]]:
    """One record per predicted harness row of the duel and the sweep (shapes with gammaThreshold left out)."""
    rows = [("duel", r, r["speedup_vs_target_only"]["median"]) for r in body["duel"] if shape_of(r["method"])]
    rows += [("sweep", r, r["speedup_vs_target_only"]) for r in body["sweep"] if shape_of(r["method"])]
    rows = [
        (where, r, m) for where, r, m in rows if "@" not in shape_of(r["method"]) and "_t" not in shape_of(r["method"])
    ]
    shapes = [shape_of(r["method"]) for _, r, _ in rows]
    ways, cost = predictions(dump_dir, curve_path, shapes)
    base = pooled_rates(body["runs"], TARGET_HARNESS)
    out = []
    for (where, r, measured), raw, o, n in zip(rows, ways["raw"], ways["steps"], ways["live"]):
        rec: dict[str, Any] = {
            "where": where,
            "shape": shape_of(r["method"]),
            "method": r["method"],
            "accepted": n.accepted,
            "leaf_stops": n.leaf_stops,
            "recorded": r.get("predicted_speedup"),
            "raw": raw.speedup,
            "old": o.speedup,
            "new": n.speedup,
            "measured": measured,
        }
        rates = pooled_rates(body["runs"], r["method"]) if where == "duel" else None
        if rates is not None and base is not None and n.speedup is not None:
            config = n.config
            duel_acc = r["mean_accepted_length"]
            rec.update(
                draft_ms_measured=r["draft_ms_per_round"],
                draft_ms_old=1e3 * config.gamma * cost.draft_step_s,
                draft_ms_new=1e3 * cost.live_draft_cost(config.top_head, n.leaf_stops),
                verify_ms_measured=r["verify_ms_per_round"],
                verify_ms_model=1e3 * float(cost.t_verify(config.num_nodes + 1)),
                duel_accepted=duel_acc,
                new_at_duel_acceptance=cost.speedup(
                    duel_acc + 1.0, cost.live_round_cost(config.top_head, config.num_nodes, n.leaf_stops)
                ),
                pooled_whole=rates[0] / base[0],
                pooled_decode=rates[1] / base[1],
            )
        out.append(rec)
    return out


def fmt(x: float | None, spec: str = ".2f", unit: str = "x") -> str:
    return "–" if x is None else f"{x:{spec}}{unit}"


def ratio(p: float | None, m: float | None) -> str:
    return "–" if p is None or not m else f"{p / m:.2f}"


def markdown(dtype: str, recs: list[dict[str, Any]], dump_dir: Path, curve_path: Path) -> str:
    lines = [
        f"### {dtype}: predicted vs measured, recomputed offline ({dump_dir}, {curve_path.name})",
        "",
        "| shape | row | calib. accepted | leaf stops | recorded prediction | recomputed as recorded | one-token steps, fitted curve | live round, fitted curve | measured | recorded / measured | live round / measured |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in recs:
        lines.append(
            f"| {r['shape']} | {r['where']} | {fmt(r['accepted'], '.2f', '')} | {fmt(r['leaf_stops'], '.2f', '')} | {fmt(r['recorded'])} | "
            f"{fmt(r['raw'])} | {fmt(r['old'])} | {fmt(r['new'])} | {fmt(r['measured'])} | {ratio(r['recorded'], r['measured'])} | "
            f"{ratio(r['new'], r['measured'])} |"
        )
    duel = [r for r in recs if "draft_ms_measured" in r]
    if duel:
        lines += [
            "",
            "| duel row | draft ms/round: measured | one-token steps | live round | verify ms/round: measured | curve | accepted (duel prompts) | live round at that acceptance | measured pooled, whole calls | measured pooled, target prefill excluded |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in duel:
            lines.append(
                f"| {r['method']} | {r['draft_ms_measured']:.0f} | {r['draft_ms_old']:.0f} | {r['draft_ms_new']:.0f} | "
                f"{r['verify_ms_measured']:.0f} | {r['verify_ms_model']:.0f} | {r['duel_accepted']:.2f} | "
                f"{fmt(r['new_at_duel_acceptance'])} | {fmt(r['pooled_whole'])} | {fmt(r['pooled_decode'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "duel_json", help="a finished duel's JSON (bench/duel.py --out), its calibration directories beside it"
    )
    p.add_argument("--json", metavar="OUT", help="also write the records as JSON")
    args = p.parse_args(argv)
    path = Path(args.duel_json)
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        records = {}
        for dtype, body in result["dtypes"].items():
            if "auto" not in body:
                print(f"{path}: dtype {dtype} has no auto calibration, skipped", file=sys.stderr)
                continue
            dump_dir, curve_path = calibration_paths(path, dtype, body["auto"])
            records[dtype] = check_rows(body, dump_dir, curve_path)
            print(markdown(dtype, records[dtype], dump_dir, curve_path) + "\n")
    except (OSError, ValueError, KeyError, SpecReplayError) as exc:
        print(f"error: {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
