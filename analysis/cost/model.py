"""The one cost model of specreplay: modelled speedup of a tree config, used by ``compare``,
``report`` and the shape search (``recommend``). The round cost, the curve's interpolation and the
speedup formula: docs/analysis.md, "Cost model and modelled speedup"; ``live_round_cost``:
docs/analysis.md, "Predicted speedup and the ceiling". Which curve a run uses (measured timings
beside the dump, or this module's default) is decided in ``analysis.cost.source``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

import numpy as np

from replay.util.bounded import parse_json_bytes, read_json_file
from replay.util.errors import SpecReplayError, shown
from replay.util.pathcheck import is_inline_json

SOURCE_DEFAULT = "modelled: default relative cost"  # the label every output shows for CostModel.default()


@dataclass(frozen=True, eq=False)
class CostModel:
    tokens: np.ndarray  # [k] float64, strictly increasing token counts of one target forward
    verify_s: np.ndarray  # [k] float64, seconds of that forward
    draft_step_s: float  # seconds of one draft step (one draft forward over the expanded nodes)
    source: str = "default"
    draft_s: np.ndarray | None = (
        None  # [k] float64 seconds of one draft forward over ``tokens`` tokens; None: unmeasured
    )

    def __post_init__(self) -> None:
        tokens = np.asarray(self.tokens, dtype=np.float64)
        verify = np.asarray(self.verify_s, dtype=np.float64)
        if tokens.ndim != 1 or tokens.shape != verify.shape or tokens.shape[0] < 1:
            raise SpecReplayError(
                f"cost model {self.source}: 'tokens' and 'verify_s' must be equal-length non-empty lists, got shapes "
                f"{tokens.shape} and {verify.shape}"
            )
        if np.any(np.diff(tokens) <= 0):
            raise SpecReplayError(
                f"cost model {self.source}: 'tokens' must be strictly increasing, got {tokens.tolist()}"
            )
        if np.any(verify <= 0) or not np.all(np.isfinite(verify)):
            raise SpecReplayError(
                f"cost model {self.source}: 'verify_s' must be positive numbers, got {verify.tolist()}"
            )
        if not (np.isfinite(self.draft_step_s) and self.draft_step_s >= 0):
            raise SpecReplayError(f"cost model {self.source}: 'draft_step_s' must be >= 0, got {self.draft_step_s!r}")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "verify_s", verify)
        object.__setattr__(self, "draft_step_s", float(self.draft_step_s))
        if self.draft_s is not None:
            draft = np.asarray(self.draft_s, dtype=np.float64)
            if draft.shape != tokens.shape or np.any(draft <= 0) or not np.all(np.isfinite(draft)):
                raise SpecReplayError(
                    f"cost model {self.source}: 'draft_s' must be positive numbers, one per entry of 'tokens' "
                    f"({tokens.shape[0]}), got {draft.tolist()}"
                )
            object.__setattr__(self, "draft_s", draft)

    @classmethod
    def default(cls) -> CostModel:
        """A memory-bound accelerator in relative units: verifying 64 tokens costs 1.3x one token,
        a draft step 0.1x. A placeholder: pass a measured curve for real decisions."""
        return cls(np.array([1.0, 64.0]), np.array([1.0, 1.3]), 0.1, SOURCE_DEFAULT)

    @classmethod
    def linear(cls, a: float, b: float, draft_step_s: float) -> CostModel:
        """``t_verify(k) = a + b * k`` (``--verify-cost A,B``), as a two-point curve extrapolated
        linearly on both sides; ``draft_step_s`` per draft step (``--draft-cost S``)."""
        if a + b <= 0 or b < 0:
            raise SpecReplayError(
                f"cost model --verify-cost {a},{b}: need a + b > 0 and b >= 0 (t_verify(k) = a + b*k)"
            )
        return cls(np.array([1.0, 2.0]), np.array([a + b, a + 2 * b]), float(draft_step_s), f"linear {a:g} + {b:g}*k s")

    def with_draft_step(self, draft_step_s: float) -> CostModel:
        """The same verify curve with another draft-step cost (``--draft-cost`` over a curve file);
        a measured draft curve is dropped (the override prices every draft forward the same)."""
        return CostModel(self.tokens, self.verify_s, draft_step_s, f"{self.source} (draft step {draft_step_s:g} s)")

    @classmethod
    def from_json(cls, obj: dict, source: str = "<json>") -> CostModel:
        """``draft_s`` is optional (null or absent: the draft is priced by ``draft_step_s`` alone)."""
        missing = [key for key in ("tokens", "verify_s", "draft_step_s") if key not in obj]
        if missing:
            raise SpecReplayError(
                f"cost model {source}: missing key {missing[0]!r} (need tokens, verify_s, draft_step_s)"
            )
        draft = obj.get("draft_s")
        return cls(
            _numbers(obj, "tokens", source),
            _numbers(obj, "verify_s", source),
            float(_numbers(obj, "draft_step_s", source, scalar=True)),
            source,
            None if draft is None else _numbers(obj, "draft_s", source),
        )

    @classmethod
    def parse(cls, text: str, option: str = "--cost") -> CostModel:
        """An option's value: inline JSON (it starts with '{') or a JSON file."""
        if not is_inline_json(text):
            return cls.load(text)

        def fail(message: str) -> SpecReplayError:
            return SpecReplayError(
                f"{option} {shown(text)!r}: {message}; "
                'expected a JSON file or {"tokens": [...], "verify_s": [...], "draft_step_s": x}'
            )

        obj = parse_json_bytes(text.encode("utf-8", "surrogateescape"), fail)
        if not isinstance(obj, dict):
            raise SpecReplayError(f"{option} {shown(text)!r}: expected a JSON object")
        return cls.from_json(obj, f"{option} inline JSON")

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        # bounded: a FIFO, /dev/zero or a huge file is refused instead of read without end
        obj = read_json_file(path, lambda message: SpecReplayError(f"cost model {path}: {message}"))
        if not isinstance(obj, dict):
            raise SpecReplayError(f"cost model {path}: expected a JSON object")
        return cls.from_json(obj, str(path))

    def to_json(self) -> dict:
        body = {"tokens": self.tokens.tolist(), "verify_s": self.verify_s.tolist(), "draft_step_s": self.draft_step_s}
        return body if self.draft_s is None else {**body, "draft_s": self.draft_s.tolist()}

    def t_verify(self, n_tokens) -> np.ndarray | float:
        """Seconds of one target forward over ``n_tokens`` tokens (scalar or array)."""
        return _interpolate(self.tokens, self.verify_s, n_tokens)

    def t_draft(self, n_tokens) -> np.ndarray | float:
        """Seconds of one draft forward over ``n_tokens`` tokens: the measured draft curve read as
        ``t_verify`` reads its own, or ``draft_step_s`` whatever the count without one."""
        if self.draft_s is None:
            n = np.asarray(n_tokens, dtype=np.float64)
            return self.draft_step_s if n.ndim == 0 else np.full(n.shape, self.draft_step_s)
        return _interpolate(self.tokens, self.draft_s, n_tokens)

    def live_draft_cost(self, top_head: Sequence[int], leaf_stops: float) -> float:
        """Seconds of one live round's draft (docs/analysis.md, "Predicted speedup and the ceiling"): the catch-up forward over one token,
        or two in the ``leaf_stops`` fraction of rounds that follow a path ending at a leaf, then one
        forward per expansion step over its ``top_head[i]`` heads (i >= 1)."""
        if not 0.0 <= leaf_stops <= 1.0:
            raise ValueError(f"leaf_stops is a fraction of rounds, got {leaf_stops!r}")
        catch_up = (1.0 - leaf_stops) * float(self.t_draft(1)) + leaf_stops * float(self.t_draft(2))
        return catch_up + sum(float(self.t_draft(h)) for h in top_head[1:])

    def live_round_cost(self, top_head: Sequence[int], nodes: int, leaf_stops: float) -> float:
        """``live_draft_cost`` plus the target forward over the root and the ``nodes`` draft nodes."""
        return self.live_draft_cost(top_head, leaf_stops) + float(self.t_verify(nodes + 1))

    def round_cost(self, steps, nodes) -> np.ndarray | float:
        """Seconds of one round: ``steps * draft_step_s + t_verify(nodes + 1)``."""
        return np.asarray(steps, dtype=np.float64) * self.draft_step_s + self.t_verify(
            np.asarray(nodes, dtype=np.float64) + 1
        )

    def round_costs(self, steps: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """[k] float64 ``round_cost`` of each (steps, nodes) pair ([k] int64 counts each), found once
        per distinct pair (a config's steps and nodes take few values; no sort of the rounds), each
        as a single round's float: the same number whatever the rounds beside it."""
        if not steps.shape[0]:
            return np.zeros(0)
        if int(steps.min()) < 0 or int(nodes.min()) < 0:
            raise ValueError("round_costs: steps and nodes are counts")
        width = int(nodes.max()) + 1
        key = steps * width + nodes
        table = np.zeros(int(key.max()) + 1)
        for k in np.flatnonzero(np.bincount(key)).tolist():
            table[k] = float(self.round_cost(k // width, k % width))
        return table[key]

    def speedup(self, tokens_committed: float, cost_s: float) -> float:
        """Speedup over the target alone for a total of committed tokens and of round seconds."""
        if cost_s <= 0:
            return float("nan")
        return float(tokens_committed) * float(self.t_verify(1)) / float(cost_s)


def _interpolate(tokens: np.ndarray, seconds: np.ndarray, n_tokens) -> np.ndarray | float:
    """A curve's seconds at ``n_tokens``: linear between points, extrapolated linearly from the two
    points at either end (tokens, seconds: [k] float64)."""
    n = np.asarray(n_tokens, dtype=np.float64)
    if tokens.shape[0] == 1:
        out = np.full(n.shape, seconds[0])
    else:
        out = np.interp(n, tokens, seconds)
        lo_slope = (seconds[1] - seconds[0]) / (tokens[1] - tokens[0])
        hi_slope = (seconds[-1] - seconds[-2]) / (tokens[-1] - tokens[-2])
        out = np.where(n < tokens[0], seconds[0] + (n - tokens[0]) * lo_slope, out)
        out = np.where(n > tokens[-1], seconds[-1] + (n - tokens[-1]) * hi_slope, out)
        out = np.maximum(out, 1e-12)  # extrapolating down never makes a forward free
    return float(out) if out.ndim == 0 else out


def _numbers(obj: dict, key: str, source: str, scalar: bool = False) -> np.ndarray:
    """``obj[key]`` as float64 (shape [k], or [] when ``scalar``), or an error naming the field and
    what it must be: numpy's "could not convert string to float: 'x'" names neither."""
    value = obj[key]
    items = [value] if scalar else list(value) if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(v, Real) and not isinstance(v, (bool, np.bool_)) for v in items):
        expected = "a number" if scalar else "a list of numbers"
        raise SpecReplayError(
            f"cost model {source}: {key!r} must be {expected}, got {shown(json.dumps(value, default=str))}"
        )
    return np.asarray(value, dtype=np.float64)
