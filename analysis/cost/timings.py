"""Measured times a dump carries: per-round draft and verify seconds and the run totals in the
harness's ``manifest.json`` (replay/live/dumps.py, replay/live/run.py), and the target-only
baseline (``totals.baseline``, or an old sweep's ``baseline.json``). From them: the measured speedup.

The two measured speedups and when a baseline is comparable: docs/analysis.md, "Where the costs
come from, and measured speedup", and docs/vocabulary.md, "Measured speedup".
``comparable_baseline`` is the one rule for both the measured speedup and the cost model's t_verify(1).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.tables.definitions import label
from replay.io.dumpnames import Key
from replay.io.manifest import Manifest
from replay.util.bounded import read_json_file
from replay.util.errors import DumpError

ROUND_TIMING_FIELDS = ("draft_time_s", "verify_time_s", "draft_steps", "num_nodes")
SWEEP_DUMPS_DIR = "dumps"  # a sweep writes OUT/dumps/<name>/ and OUT/baseline.json (replay/live/sweep/runner.py)
SWEEP_BASELINE = "baseline.json"
# The method names a timing session records in totals.timing.methods (replay/live/run.py SPECULATIVE,
# TARGET_ONLY; analysis does not import the live harness, so they are spelled here as the format).
SPECULATIVE, TARGET_ONLY = "speculative", "target-only"
DECODE_LABEL = label("measured_speedup")  # "measured speedup (decode only, prefill excluded)"
END_TO_END_LABEL = label("measured_speedup_wall")  # "measured speedup (end to end, prefill included)"
# "Probably wrong": a forward over k ≥ 2 tokens timed this much faster than one target-only decode.
FASTER_VERIFY_TOLERANCE = 0.9


@dataclass(frozen=True)
class DecodeTotals:
    """One decoding run's totals (RunSummary of replay/live/run.py)."""

    new_tokens: int
    total_s: float  # wall seconds, prefill included
    prefill_s: float
    forwards: int  # target forwards after prefill
    source: str  # file (and field) the numbers come from

    @property
    def decode_s(self) -> float:
        return self.total_s - self.prefill_s

    @property
    def decode_s_per_token(self) -> float:
        return self.decode_s / self.new_tokens

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.total_s


@dataclass(frozen=True)
class PassRatios:
    """The interleaved session's end-to-end speedup pass by pass (``totals.timing``)."""

    ratios: tuple[float, ...]  # per pass: tokens/s speculative over tokens/s target-only

    @property
    def median(self) -> float:
        return float(statistics.median(self.ratios))


@dataclass(frozen=True, eq=False)
class Timings:
    """Measured seconds of a speculative run, as its manifest records them."""

    source: str  # the manifest's path
    steps: np.ndarray  # [R] int64 draft steps per round
    nodes: np.ndarray  # [R] int64 draft nodes per round (root excluded)
    draft_s: np.ndarray  # [R] float64 draft seconds per round
    verify_s: np.ndarray  # [R] float64 verify seconds per round (target forward + acceptance)
    speculative: DecodeTotals | None
    baseline: DecodeTotals | None
    # Both methods' passes when one interleaved session timed them together (totals.timing), else None.
    session: PassRatios | None = None
    # Why there is no such session, when there is none (see comparable_baseline).
    unpaired: str | None = None
    keys: tuple[Key, ...] = ()  # [R] each round record's key
    left_out: str = ""  # which recorded rounds' times are not here and why (analysis.cost.replayed), else ""


def _side(t: DecodeTotals) -> dict[str, Any]:
    return {"new_tokens": t.new_tokens, "total_s": t.total_s, "prefill_s": t.prefill_s, "source": t.source}


@dataclass(frozen=True)
class MeasuredSpeedup:
    """Both sides timed together (one interleaved session): the two measured speedups."""

    decode: float  # measured_speedup: prefill excluded
    wall: float  # measured_speedup_wall: end to end, prefill included (the harness's ``speedup``)
    speculative: DecodeTotals
    baseline: DecodeTotals
    passes: tuple[float, ...] = ()  # the end-to-end ratio of every pass
    comparable = True
    reason = None

    def to_json(self) -> dict[str, Any]:
        return {
            "comparable": True,
            "reason": None,
            "measured_speedup": self.decode,
            "measured_speedup_wall": self.wall,
            "passes": list(self.passes),
            "speculative": _side(self.speculative),
            "baseline": _side(self.baseline),
        }

    def describe(self) -> str:
        s, b = self.speculative, self.baseline
        spread = f", passes {min(self.passes):.3f}-{max(self.passes):.3f}" if len(self.passes) > 1 else ""
        how = f"median of {len(self.passes)} interleaved pass(es){spread}; " if self.passes else ""
        return (
            f"{DECODE_LABEL} {self.decode:.3f}: {s.new_tokens} tokens in {s.decode_s:.2f} s against "
            f"{b.new_tokens} in {b.decode_s:.2f} s for the target alone; "
            f"{END_TO_END_LABEL} {self.wall:.3f} ({how}the harness's speedup)"
        )

    def summary_lines(self) -> list[str]:
        """The two lines ``generate`` prints (the same words as ``compare``)."""
        spread = (
            f" (median of {len(self.passes)} interleaved passes; min {min(self.passes):.3f}, max {max(self.passes):.3f})"
            if self.passes
            else ""
        )
        return [f"{END_TO_END_LABEL}: {self.wall:.3f}x{spread}", f"{DECODE_LABEL}: {self.decode:.3f}x"]


@dataclass(frozen=True)
class NotComparable:
    """Totals on both sides, but not timed together: no measured speedup, and why.

    ``decode`` and ``wall`` are NaN, so a table that forgets to ask still shows no number."""

    reason: str
    speculative: DecodeTotals
    baseline: DecodeTotals | None
    comparable = False
    decode = math.nan
    wall = math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "comparable": False,
            "reason": self.reason,
            "measured_speedup": None,
            "measured_speedup_wall": None,
            "speculative": _side(self.speculative),
            "baseline": _side(self.baseline) if self.baseline else None,
        }

    def describe(self) -> str:
        return f"measured speedup: not comparable: {self.reason}"

    def summary_lines(self) -> list[str]:
        return [self.describe()]


Speedup = MeasuredSpeedup | NotComparable


def _number(value: Any, path: str, field: str, minimum: float = 0.0, integer: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= minimum
    if ok and integer and float(value) != int(value):
        ok = False
    if not ok:
        kind = "an integer" if integer else "a number"
        raise DumpError(path, f"expected {kind} >= {minimum:g}, got {value!r}", field)
    return int(value) if integer else float(value)


def read_totals(body: Any, path: str, where: str) -> DecodeTotals | None:
    """Totals of one run (``where`` names the field, e.g. ``totals`` or ``totals.baseline``); None
    when absent or without the fields a speed needs."""
    if not isinstance(body, Mapping) or not all(k in body for k in ("new_tokens", "total_s", "prefill_s")):
        return None
    new_tokens = _number(body["new_tokens"], path, f"{where}.new_tokens", 1, integer=True)
    total_s = _number(body["total_s"], path, f"{where}.total_s")
    prefill_s = _number(body["prefill_s"], path, f"{where}.prefill_s")
    if total_s <= prefill_s:
        raise DumpError(path, f"total_s {total_s} must exceed prefill_s {prefill_s}", f"{where}.total_s")
    forwards = _number(body.get("rounds", new_tokens), path, f"{where}.rounds", 1, integer=True)
    return DecodeTotals(int(new_tokens), total_s, prefill_s, int(forwards), f"{path}#{where}")


def _sweep_baseline(directory: Path) -> DecodeTotals | None:
    """A sweep's dump lies in OUT/dumps/<name>/ and its target-only run in OUT/baseline.json."""
    if directory.parent.name != SWEEP_DUMPS_DIR:
        return None
    path = directory.parent.parent / SWEEP_BASELINE
    if not path.is_file():
        return None
    body = read_json_file(path)
    return read_totals(body.get("summary") if isinstance(body, Mapping) else None, str(path), "summary")


def read_timings(directory: str | Path, manifest: Manifest) -> Timings | None:
    """The measured times of a dump directory (or packed run), or None when its manifest has none.

    A manifest that records timings must record all of ROUND_TIMING_FIELDS on every round; a bad
    value is a DumpError naming the manifest and the field.
    """
    body = manifest.body or {}
    rounds = body.get("rounds") or []
    path = manifest.path or str(Path(directory) / "manifest.json")
    if not isinstance(rounds, list) or not any(isinstance(r, Mapping) and "verify_time_s" in r for r in rounds):
        return None
    cols: dict[str, list[float]] = {f: [] for f in ROUND_TIMING_FIELDS}
    keys = manifest.round_keys or ()  # read_manifest checked every record's key
    for k, rec in enumerate(rounds):
        for f in ROUND_TIMING_FIELDS:
            if not isinstance(rec, Mapping) or f not in rec:
                raise DumpError(path, "missing (other rounds record timings)", f"rounds[{k}].{f}")
            integer = f in ("draft_steps", "num_nodes")
            cols[f].append(_number(rec[f], path, f"rounds[{k}].{f}", 1 if integer else 0, integer))
    totals = body.get("totals")
    spec = read_totals(totals, path, "totals")
    base = read_totals(totals.get("baseline") if isinstance(totals, Mapping) else None, path, "totals.baseline")
    session, unpaired = None, None
    if base is None:
        base = _sweep_baseline(Path(directory))
        if base is not None:
            unpaired = (
                f"the target-only baseline is the sweep's {SWEEP_BASELINE}, a separate run not timed together with "
                "this config's rounds; re-run the sweep with the current harness, which times both together"
            )
    elif isinstance(totals, Mapping):
        session, unpaired = _session(totals.get("timing"), path)
    return Timings(
        path,
        np.asarray(cols["draft_steps"], dtype=np.int64),
        np.asarray(cols["num_nodes"], dtype=np.int64),
        np.asarray(cols["draft_time_s"], dtype=np.float64),
        np.asarray(cols["verify_time_s"], dtype=np.float64),
        spec,
        base,
        session,
        unpaired,
        keys,
    )


_RETIME = "re-run `specreplay generate --baseline` with the current harness, which interleaves the two"


def _session(timing: Any, path: str) -> tuple[PassRatios | None, str | None]:
    """(the session's per-pass ratios, None) when ``totals.timing`` timed both methods together,
    else (None, why not). A session that is there but malformed is a DumpError naming the field."""
    if timing is None:
        return None, (
            "the target-only baseline was not timed together with the speculative run: manifest totals.timing "
            f"is null or absent, so no interleaved timing session; {_RETIME}"
        )
    where = "totals.timing.methods"
    methods = timing.get("methods") if isinstance(timing, Mapping) else None
    if not isinstance(methods, Mapping):
        raise DumpError(
            path, f"expected an object of timed methods ({SPECULATIVE!r}, {TARGET_ONLY!r}), got {methods!r:.80}", where
        )
    missing = [m for m in (SPECULATIVE, TARGET_ONLY) if m not in methods]
    if missing:
        return None, (
            f"the timing session (totals.timing) did not time {' and '.join(repr(m) for m in missing)}, so the "
            f"baseline in totals.baseline was timed apart from it; {_RETIME}"
        )
    per: dict[str, tuple[list[float], list[float]]] = {}
    for name in (SPECULATIVE, TARGET_ONLY):
        body = methods[name]
        field = f"{where}.{name}"
        if (
            not isinstance(body, Mapping)
            or not isinstance(body.get("seconds"), list)
            or not isinstance(body.get("tokens"), list)
        ):
            raise DumpError(path, 'expected {"seconds": [...], "tokens": [...]} (one value per pass)', field)
        seconds = [_number(v, path, f"{field}.seconds[{k}]") for k, v in enumerate(body["seconds"])]
        tokens = [_number(v, path, f"{field}.tokens[{k}]", 1, integer=True) for k, v in enumerate(body["tokens"])]
        if not seconds or len(seconds) != len(tokens) or not all(v > 0 for v in seconds):
            raise DumpError(
                path,
                f"expected one positive seconds and one tokens value per pass, got {len(seconds)} and {len(tokens)}",
                field,
            )
        per[name] = (seconds, tokens)
    (ss, st), (bs, bt) = per[SPECULATIVE], per[TARGET_ONLY]
    if len(ss) != len(bs):
        raise DumpError(
            path,
            f"{SPECULATIVE!r} has {len(ss)} pass(es), {TARGET_ONLY!r} {len(bs)}: one session times both in every pass",
            where,
        )
    # As replay/live/timing.py Timing.ratio: tokens/s of each method per pass, their ratio pass by pass.
    return PassRatios(tuple((t1 / s1) / (t2 / s2) for s1, t1, s2, t2 in zip(ss, st, bs, bt))), None


def comparable_baseline(timings: Timings) -> DecodeTotals | None:
    """The target-only totals when they may be set against the speculative run's: both timed in one
    interleaved session (``timings.session``). The one rule for a measured speedup and for the cost
    model's t_verify(1); ``timings.unpaired`` says why not otherwise."""
    return timings.baseline if timings.session is not None else None


def measured_speedup(timings: Timings | None) -> Speedup | None:
    """Speculative against target-only decoding: a MeasuredSpeedup when both sides were timed together,
    NotComparable (with the reason) when totals are there but were not; None when the dump records
    no speculative totals at all."""
    if timings is None or timings.speculative is None:
        return None
    s, b = timings.speculative, timings.baseline
    if b is None:
        return NotComparable(
            "the manifest has no target-only baseline (totals.baseline); run `specreplay generate --baseline`", s, None
        )
    if comparable_baseline(timings) is None or timings.session is None:
        return NotComparable(timings.unpaired or "the two sides were not timed together", s, b)
    return MeasuredSpeedup(
        b.decode_s_per_token / s.decode_s_per_token, timings.session.median, s, b, timings.session.ratios
    )


def run_speedup(directory: str | Path, manifest: Manifest) -> Speedup | None:
    """``measured_speedup(read_timings(directory, manifest))``: what every command shows for a run."""
    return measured_speedup(read_timings(directory, manifest))


def speedup_warnings(label: str, timings: Timings | None, measured: Speedup | None) -> list[str]:
    """ "This number is probably wrong" lines for a measured speedup that contradicts the run's own
    cost data: a gain (> 1) while a verify of k ≥ 2 tokens was timed faster than one target-only
    decode (a forward over more tokens never costs less), so the two sides ran at different speeds."""
    if timings is None or not isinstance(measured, MeasuredSpeedup) or not measured.decode > 1.0:
        return []
    base = measured.baseline
    per_forward = base.decode_s / base.forwards
    tokens = timings.nodes + 1
    out = []
    for k in np.unique(tokens):
        if k < 2:
            continue
        mean = float(timings.verify_s[tokens == k].mean())
        if mean < FASTER_VERIFY_TOLERANCE * per_forward:
            out.append(
                f"WARNING: {label}: {DECODE_LABEL} {measured.decode:.3f} is probably wrong: one verify of {int(k)} tokens "
                f"took {mean:.3f} s (mean over the rounds), less than one target-only decode ({per_forward:.3f} s per "
                f"forward in {base.source}), and a forward over more tokens is never cheaper; the two sides ran at "
                f"different speeds. {_RETIME[0].upper()}{_RETIME[1:]} on a quiet machine"
            )
            break
    return out
