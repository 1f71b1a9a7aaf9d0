"""Measured times a dump carries: per-round draft and verify seconds and the run totals in the
harness's ``manifest.json`` (replay/live/dumps.py, replay/live/run.py), and the target-only
baseline (``totals.baseline``, or a sweep's ``baseline.json``). From them: the measured speedup.

Measured speedup (analysis.definitions), from totals T total_s, P prefill_s, N new_tokens:

    measured_speedup      = ((T_base − P_base) / N_base) / ((T_spec − P_spec) / N_spec)   decode only
    measured_speedup_wall = (N_spec / T_spec) / (N_base / T_base)    the harness's own ``speedup``
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from replay.bounded import read_json_file
from replay.errors import DumpError
from replay.manifest import Manifest

ROUND_TIMING_FIELDS = ("draft_time_s", "verify_time_s", "draft_steps", "num_nodes")
SWEEP_DUMPS_DIR = "dumps"  # a sweep writes OUT/dumps/<name>/ and OUT/baseline.json (replay/live/sweep.py)
SWEEP_BASELINE = "baseline.json"


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


@dataclass(frozen=True)
class MeasuredSpeedup:
    decode: float  # measured_speedup: prefill excluded
    wall: float  # measured_speedup_wall: prefill included (the harness's ``speedup``)
    speculative: DecodeTotals
    baseline: DecodeTotals

    def to_json(self) -> dict[str, Any]:
        def side(t: DecodeTotals) -> dict[str, Any]:
            return {"new_tokens": t.new_tokens, "total_s": t.total_s, "prefill_s": t.prefill_s, "source": t.source}

        return {"measured_speedup": self.decode, "measured_speedup_wall": self.wall,
                "speculative": side(self.speculative), "baseline": side(self.baseline)}

    def describe(self) -> str:
        s, b = self.speculative, self.baseline
        return (f"measured speedup {self.decode:.3f} (decode: {s.new_tokens} tokens in {s.decode_s:.2f} s against "
                f"{b.new_tokens} in {b.decode_s:.2f} s for the target alone, prefill excluded), "
                f"{self.wall:.3f} wall-clock (prefill included; the harness's speedup)")


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
    for k, rec in enumerate(rounds):
        for f in ROUND_TIMING_FIELDS:
            if not isinstance(rec, Mapping) or f not in rec:
                raise DumpError(path, "missing (other rounds record timings)", f"rounds[{k}].{f}")
            integer = f in ("draft_steps", "num_nodes")
            cols[f].append(_number(rec[f], path, f"rounds[{k}].{f}", 1 if integer else 0, integer))
    totals = body.get("totals")
    spec = read_totals(totals, path, "totals")
    base = read_totals(totals.get("baseline") if isinstance(totals, Mapping) else None, path, "totals.baseline")
    if base is None:
        base = _sweep_baseline(Path(directory))
    return Timings(
        path,
        np.asarray(cols["draft_steps"], dtype=np.int64),
        np.asarray(cols["num_nodes"], dtype=np.int64),
        np.asarray(cols["draft_time_s"], dtype=np.float64),
        np.asarray(cols["verify_time_s"], dtype=np.float64),
        spec,
        base,
    )


def measured_speedup(timings: Timings | None) -> MeasuredSpeedup | None:
    """Speculative against target-only decoding, when both totals are recorded."""
    if timings is None or timings.speculative is None or timings.baseline is None:
        return None
    s, b = timings.speculative, timings.baseline
    return MeasuredSpeedup(b.decode_s_per_token / s.decode_s_per_token, s.tokens_per_s / b.tokens_per_s, s, b)
