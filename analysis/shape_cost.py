"""Draft/verify cost model for the shape search: a measured curve or a linear model.

Cost curve JSON (the live harness writes this format):
``{"tokens": [1, 2, 4, ...], "verify_s": [...], "draft_step_s": x}``: one target forward over k
tokens takes verify(k) seconds (linear interpolation; linear extrapolation from the two nearest
points outside the measured range, never below 0); one draft step takes draft_step_s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.errors import SpecReplayError


@dataclass(frozen=True, eq=False)
class CostCurve:
    tokens: np.ndarray  # [k] float64, increasing token counts verified in one forward
    verify_s: np.ndarray  # [k] float64 seconds per forward
    draft_step_s: float
    source: str = ""

    def __post_init__(self) -> None:
        t, v = np.asarray(self.tokens, np.float64), np.asarray(self.verify_s, np.float64)
        if t.ndim != 1 or t.shape != v.shape or t.shape[0] < 1:
            raise SpecReplayError(f"cost curve {self.source}: tokens {t.shape} and verify_s {v.shape} must be equal non-empty lists")
        if np.any(np.diff(t) <= 0) or np.any(v <= 0) or self.draft_step_s < 0:
            raise SpecReplayError(f"cost curve {self.source}: tokens must increase, verify_s be > 0, draft_step_s >= 0")
        object.__setattr__(self, "tokens", t)
        object.__setattr__(self, "verify_s", v)

    def verify(self, k: float) -> float:
        """Seconds for one target forward over ``k`` tokens."""
        t, v = self.tokens, self.verify_s
        if t.shape[0] == 1:
            return float(v[0])
        if k < t[0] or k > t[-1]:
            j = 0 if k < t[0] else t.shape[0] - 2  # extend the nearest segment
            slope = (v[j + 1] - v[j]) / (t[j + 1] - t[j])
            return float(max(v[j] + slope * (k - t[j]), 1e-12))
        return float(np.interp(k, t, v))

    def to_json(self) -> dict:
        return {"tokens": self.tokens.tolist(), "verify_s": self.verify_s.tolist(), "draft_step_s": self.draft_step_s}


def load_cost_curve(path: str | Path) -> CostCurve:
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecReplayError(f"{path}: cannot read a cost curve: {exc}") from None
    missing = [k for k in ("tokens", "verify_s", "draft_step_s") if k not in obj]
    if missing:
        raise SpecReplayError(f"{path}: cost curve lacks {missing} (expected tokens, verify_s, draft_step_s)")
    return CostCurve(np.asarray(obj["tokens"], np.float64), np.asarray(obj["verify_s"], np.float64), float(obj["draft_step_s"]), str(path))


def linear_cost(a: float, b: float, draft_step_s: float) -> CostCurve:
    """t_verify(k) = a + b * k as a two-point curve (extrapolated linearly everywhere)."""
    if a + b <= 0 or b < 0:
        raise SpecReplayError(f"--verify-cost {a},{b}: need a + b > 0 and b >= 0")
    return CostCurve(np.array([1.0, 2.0]), np.array([a + b, a + 2 * b]), float(draft_step_s), f"linear {a}+{b}k")
