"""Which cost model a run's speedups use, and the words that say so. In order:

1. a cost model given by the user (``--cost FILE``): ``given: FILE``;
2. ``cost_curve.json`` beside the dump (in it, in its parent, or a sweep's OUT/ for
   OUT/dumps/<name>/): ``measured: cost_curve.json`` — a draft step it lacks is taken from the
   manifest's round timings;
3. the manifest's round timings (``draft_time_s``, ``verify_time_s``): ``measured: manifest timings``;
4. otherwise the default relative cost: ``modelled: default relative cost``, with a warning.

How a curve is built from manifest timings: docs/analysis.md, "Where the costs come from, and
measured speedup".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from replay.engine.runs import RunReplay
from replay.io.manifest import Manifest
from replay.util.bounded import read_json_file
from replay.util.errors import SpecReplayError
from replay.util.pathcheck import is_inline_json

from .model import SOURCE_DEFAULT, CostModel
from .replayed import ReplayedRounds, keep_replayed, replayed_rounds
from .timings import (
    SWEEP_DUMPS_DIR,
    Speedup,
    Timings,
    comparable_baseline,
    measured_speedup,
    read_timings,
    speedup_warnings,
)

CURVE_NAME = "cost_curve.json"
SOURCE_CURVE = "measured: cost_curve.json"
SOURCE_MANIFEST = "measured: manifest timings"
GIVEN_PREFIX = "given: "
UNMEASURED_T1 = "t_verify(1)"  # in a source: the target-only step was not measured, only guessed


def given_cost(text: str | Path) -> CostModel:
    """A cost model given by the user (``--cost``): a file, or inline JSON."""
    text = str(text)
    return replace(CostModel.parse(text), source=f"{GIVEN_PREFIX}{'inline JSON' if is_inline_json(text) else text}")


def cost_from_options(
    cost: str | None, verify_cost: tuple[float, float] | None = None, draft_cost: float | None = None
) -> CostModel | None:
    """The cost model the user gave: ``--cost`` (given_cost) or ``--verify-cost A,B`` (a line),
    ``--draft-cost S`` pricing the draft step of either; None when none was given (each run then
    takes its own: run_cost)."""
    if cost and verify_cost:
        raise SpecReplayError("give either --cost FILE or --verify-cost A,B, not both")
    if cost:
        curve = given_cost(cost)
        return curve if draft_cost is None else curve.with_draft_step(draft_cost)
    if verify_cost:
        return CostModel.linear(*verify_cost, draft_cost or 0.0)
    if draft_cost is not None:
        raise SpecReplayError("--draft-cost needs --verify-cost A,B or --cost FILE")
    return None


def find_cost_curve(directory: str | Path) -> Path | None:
    """``cost_curve.json`` in the dump directory, its parent, or a sweep's OUT for OUT/dumps/<name>."""
    d = Path(directory)
    places = [d / CURVE_NAME, d.parent / CURVE_NAME]
    if d.parent.name == SWEEP_DUMPS_DIR:
        places.append(d.parent.parent / CURVE_NAME)
    return next((p for p in places if p.is_file()), None)


def manifest_draft_step(t: Timings) -> float:
    """Σ draft_time_s / Σ draft_steps: the mean seconds of one draft step in the recorded rounds."""
    return float(t.draft_s.sum() / t.steps.sum())


def cost_from_timings(t: Timings) -> CostModel:
    """The cost model of a run's own measured times (see the module docstring)."""
    tokens = t.nodes + 1  # [R] tokens each round's target forward verified
    ks = np.unique(tokens)
    verify = np.array([t.verify_s[tokens == k].mean() for k in ks], dtype=np.float64)
    source = SOURCE_MANIFEST + (f" ({t.left_out})" if t.left_out else "")
    baseline = comparable_baseline(t)  # a baseline timed apart from these rounds ran at another speed
    if baseline is not None and ks[0] > 1:
        ks = np.concatenate([[1], ks])
        verify = np.concatenate([[baseline.decode_s / baseline.forwards], verify])
    elif ks[0] > 1:
        how = "flat at the" if ks.shape[0] == 1 else "extrapolated from the"
        why = (
            "no target-only baseline"
            if t.baseline is None
            else "target-only baseline not timed together with these rounds"
        )
        source += f" ({why}: {UNMEASURED_T1} {how} {int(ks[0])}-token time)"
    if ks.shape[0] >= 2 and verify[-1] < verify[-2]:
        # noisy timings (e.g. a baseline run slower than the speculative one): a forward never gets
        # cheaper with more tokens, so the curve is held flat past its last point, not extrapolated down
        ks = np.concatenate([ks, [ks[-1] + 1]])
        verify = np.concatenate([verify, [verify[-1]]])
        source += f" (verify time falls with tokens here: held flat beyond {int(ks[-2])} tokens)"
    return CostModel(ks.astype(np.float64), verify, manifest_draft_step(t), source)


def _curve(path: Path, timings: Timings | None) -> CostModel:
    body = read_json_file(path, lambda message: SpecReplayError(f"cost model {path}: {message}"))
    if not isinstance(body, dict):
        raise SpecReplayError(f"cost model {path}: expected a JSON object")
    source = SOURCE_CURVE
    if body.get("draft_step_s") is None:
        if timings is None:
            raise SpecReplayError(
                f"cost model {path}: draft_step_s is null (curve measured without a draft model) and the "
                "dump's manifest has no round timings to take it from; pass --cost FILE with a draft_step_s"
            )
        body = {**body, "draft_step_s": manifest_draft_step(timings)}
        source += " + manifest draft step" + (f" ({timings.left_out})" if timings.left_out else "")
    return CostModel.from_json(body, source)


def used_timings(directory: str | Path, manifest: Manifest, rounds: ReplayedRounds | None) -> Timings | None:
    """The manifest's round timings the cost model uses: with ``rounds`` (the run's replay), only
    those of replayed rounds whose shape agrees (analysis.cost.replayed); every record without."""
    return _kept_timings(read_timings(directory, manifest), rounds)


def _kept_timings(timings: Timings | None, rounds: ReplayedRounds | None) -> Timings | None:
    """used_timings of timings already read."""
    return keep_replayed(timings, rounds) if timings is not None and rounds is not None else timings


def run_cost(
    directory: str | Path, manifest: Manifest, given: CostModel | None = None, rounds: ReplayedRounds | None = None
) -> CostModel:
    """The cost model for one run's speedups, by the order of the module docstring; ``rounds``: the
    run's replayed rounds (used_timings)."""
    if given is not None:
        return given
    return _cost_of(directory, used_timings(directory, manifest, rounds))


def _cost_of(directory: str | Path, timings: Timings | None) -> CostModel:
    """The cost model of a run without a given one: its cost curve, else its used timings, else the default."""
    curve = find_cost_curve(directory)
    if curve is not None:
        return _curve(curve, timings)
    if timings is not None:
        return cost_from_timings(timings)
    return CostModel.default()


def cost_warning(cost: CostModel, what: str) -> str | None:
    """The warning line printed when ``what``'s speedups rest on a guess: the default relative cost,
    or measured round timings without the target-only step they are divided by."""
    if cost.source == SOURCE_DEFAULT:
        return (
            f"WARNING: {what}: no measured timings (manifest.json round timings or {CURVE_NAME}) beside the dump; "
            "speedups are MODELLED from the default relative cost (a memory-bound accelerator guess), not measured; "
            "pass --cost FILE for real costs"
        )
    if cost.source.startswith(SOURCE_MANIFEST) and UNMEASURED_T1 in cost.source:
        # on a CPU run without a timed baseline the modelled speedups are far too high (2.402 for every config
        # of a run whose baseline, once timed, measured 0.80)
        return (
            f"WARNING: {what}: the target-only step was not timed with these rounds, so the modelled speedups "
            f"take its cost from the forwards measured (cost model: {cost.source}); "
            "where one token costs less than several (a CPU) they are too high: record a baseline "
            f"(generate --baseline), a {CURVE_NAME} (specreplay cost-curve), or pass --cost FILE"
        )
    return None


@dataclass(frozen=True)
class RunPricing:
    """What every command shows about one run's speed: its cost model, its measured speedup (None
    without a baseline in the manifest) and the lines that say the measured number is probably wrong."""

    cost: CostModel
    measured: Speedup | None
    suspicious: list[str]


def replay_cost(replay: RunReplay, given: CostModel | None = None) -> CostModel:
    """run_cost of a replayed run: timings only from the rounds it replayed (used_timings)."""
    return run_cost(replay.directory, replay.manifest, given, replayed_rounds(replay))


def run_pricing(replay: RunReplay, label: str, given: CostModel | None = None) -> RunPricing:
    """The cost model (replay_cost), measured speedup and its warnings of a replayed run."""
    every = read_timings(replay.directory, replay.manifest)
    measured = measured_speedup(every)  # run totals: every round
    timings = _kept_timings(every, replayed_rounds(replay))
    cost = given if given is not None else _cost_of(replay.directory, timings)
    return RunPricing(cost, measured, speedup_warnings(label, timings, measured))
