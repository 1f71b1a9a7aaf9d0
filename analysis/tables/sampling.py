"""``stats --temperature T``: the summary metrics, the accepted-length histogram and the per-depth
rates as expectations at temperature T, each with its bounds (docs/analysis.md "Sampling-mode
replay"; docs/vocabulary.md for the metrics).

Each round gives bounds on P(L >= d) (replay.engine.sampling, lo == hi where exact). Every metric
here is a sum of those over rounds (a mean, or a sum over a sum of fixed node counts), so summing
the per-round lower (upper) bounds bounds it below (above), and it is exact when every round is:

    mean_accepted_length   = (1/R) sum_r E[L_r]               mean_acceptance_length = that + 1
    draft_acceptance_rate  = sum_r E[L_r] / sum_r nodes_r     full_depth_fraction = (1/R) sum_r P(L_r >= steps_r)
    P(L = d)               = (1/R) sum_r (P(L_r >= d) - P(L_r >= d + 1))
    per_position_acceptance_rate_d = (1/R) sum_r P(L_r >= d)
    conditional_d          = sum_r P(L_r >= d) / sum_r P(L_r >= d - 1)   (the ratio of expected counts)

P(L = d) per round lies in [max(0, lo_d - hi_{d+1}), min(1, hi_d - lo_{d+1})] (replay.engine.sampling
.length_at_bounds); the conditional rate
in [sum lo_d / sum hi_{d-1}, min(1, sum hi_d / sum lo_{d-1})]. Greedy-only tables (hit outcome,
parent slot, slot and node hits, conditional_when_expanded) read the target's top-1 at each node and
have no counterpart here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from replay.core.headline import (
    EXPECTED,
    SAME_AT_ANY_T,
    SUMMARY_METRICS,
    Rounds,
    bound_rounds,
    metric_text,
    summary_row,
)
from replay.engine.sampling import length_at_bounds
from replay.engine.sampling_runs import sampling_means
from replay.io.skipped import Skipped

from .runs import LabelledRun

# The summary metrics (replay.core.headline.SUMMARY_METRICS) by what each is at T: bounds
# (NAME_lo, NAME_hi) or one value; the greedy-only ones are absent.
EXPECTED_SUMMARY = tuple(m.name for m in SUMMARY_METRICS if m.at_t == EXPECTED)
SAME_AT_ANY_T_SUMMARY = tuple(m.name for m in SUMMARY_METRICS if m.at_t == SAME_AT_ANY_T)
SAMPLING_TABLES = ("summary", "accepted_length", "depth_acceptance")


@dataclass(frozen=True, eq=False)
class RunSampling:
    """One run's replayed rounds at temperature T, as arrays over its usable rounds."""

    label: str
    temperature: float
    expected_lo: np.ndarray  # [R] E[accepted length]
    expected_hi: np.ndarray
    ge_lo: np.ndarray  # [R, D+2] P(L >= d), d = 0..D+1 (column 0 is 1, the last 0)
    ge_hi: np.ndarray
    exact: np.ndarray  # [R] bool
    from_node_logprobs: np.ndarray  # [R] bool
    # [R] each: the round columns the summary formulas read (ROUND_COLUMNS_READ["summary"] but "run"),
    # integers as int64
    rounds: Mapping[str, np.ndarray]
    skipped: tuple[Skipped, ...]  # rounds sampling mode cannot use at T, with the reason
    needs_vocab: bool
    # the usable rounds whose walk at a recorded T cannot read node_logprobs (parents layout; without
    # the array), by name (replay.engine.batch.recorded.node_logprob_gaps_batch); None: not counted
    gaps: tuple[list[str], list[str]] | None = None

    @property
    def num_nodes(self) -> np.ndarray:
        """[R] int64 each round's draft nodes."""
        return self.rounds["num_nodes"]

    @property
    def num_steps(self) -> np.ndarray:
        """[R] int64 each round's draft steps."""
        return self.rounds["num_steps"]

    def side(self, side: str) -> Rounds:
        """The rounds as the summary formulas read them on one side ("lo" or "hi") of the bounds."""
        if side == "lo":
            return bound_rounds(self.expected_lo, self.ge_lo, self.rounds)
        return bound_rounds(self.expected_hi, self.ge_hi, self.rounds)


def run_sampling(
    run: LabelledRun, temperature: float, vocab_size: int | None, node_temperatures: Sequence[float] | None
) -> RunSampling:
    """Every replayed round of ``run`` at T, from the batch arrays (analysis.tables.sampling_batch)."""
    from .sampling_batch import batch_run_sampling

    return RunSampling(*batch_run_sampling(run, temperature, vocab_size, node_temperatures))


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else np.nan


def sampling_summary(runs: Sequence[RunSampling]) -> pd.DataFrame:
    """One row per run: rounds, exact rounds, each EXPECTED_SUMMARY metric as _lo/_hi, node and step
    means; the means replay and batch --temperature print too (replay.engine.sampling_runs.sampling_means)."""
    rows = []
    for s in runs:
        if not s.expected_lo.shape[0]:
            continue
        m = sampling_means(s.side("lo"), s.side("hi"), s.exact)
        row = {"run": s.label, "temperature": s.temperature, "rounds": m.rounds, "exact_rounds": m.exact_rounds}
        for side in ("lo", "hi"):
            row |= {f"{name}_{side}": v for name, v in summary_row(s.side(side), (EXPECTED,)).items()}
        rows.append(row | summary_row(s.side("lo"), (SAME_AT_ANY_T,)))
    cols = ["run", "temperature", "rounds", "exact_rounds"]
    cols += [f"{m}_{side}" for m in EXPECTED_SUMMARY for side in ("lo", "hi")]
    return pd.DataFrame(rows, columns=[*cols, *SAME_AT_ANY_T_SUMMARY])


def expected_length_distribution(runs: Sequence[RunSampling]) -> pd.DataFrame:
    """P(L = d) per run for d = 0..the deepest tree, as fraction_lo/_hi and expected rounds_lo/_hi."""
    top = max((s.ge_lo.shape[1] - 2 for s in runs if s.expected_lo.shape[0]), default=0)
    rows = []
    for s in runs:
        r = s.expected_lo.shape[0]
        if not r:
            continue
        lo, hi = length_at_bounds(s.ge_lo, s.ge_hi)  # [R, D+2] d = 0..D+1
        for d in range(top + 1):
            lo_d = float(lo[:, d].sum()) if d < lo.shape[1] else 0.0
            hi_d = float(hi[:, d].sum()) if d < hi.shape[1] else 0.0
            rows.append(
                {
                    "run": s.label,
                    "accepted_length": d,
                    "expected_rounds_lo": lo_d,
                    "expected_rounds_hi": hi_d,
                    "fraction_lo": lo_d / r,
                    "fraction_hi": hi_d / r,
                }
            )
    cols = ["run", "accepted_length", "expected_rounds_lo", "expected_rounds_hi", "fraction_lo", "fraction_hi"]
    return pd.DataFrame(rows, columns=cols)


def expected_depth_acceptance(runs: Sequence[RunSampling]) -> pd.DataFrame:
    """Per run and depth d = 1..its deepest round: expected rounds reaching d, the per-position rate
    P(L >= d) and the conditional rate, each _lo/_hi."""
    rows = []
    for s in runs:
        r = s.expected_lo.shape[0]
        if not r:
            continue
        lo, hi = s.ge_lo.sum(axis=0), s.ge_hi.sum(axis=0)  # expected rounds with L >= d
        for d in range(1, int(s.num_steps.max()) + 1):
            rows.append(
                {
                    "run": s.label,
                    "depth": d,
                    "rounds": r,
                    "expected_reached_lo": float(lo[d]),
                    "expected_reached_hi": float(hi[d]),
                    "per_position_acceptance_rate_lo": float(lo[d]) / r,
                    "per_position_acceptance_rate_hi": float(hi[d]) / r,
                    "conditional_lo": _ratio(float(lo[d]), float(hi[d - 1])),
                    "conditional_hi": _conditional_hi(float(hi[d]), float(lo[d - 1]), float(hi[d - 1])),
                }
            )
    cols = ["run", "depth", "rounds", "expected_reached_lo", "expected_reached_hi"]
    cols += ["per_position_acceptance_rate_lo", "per_position_acceptance_rate_hi", "conditional_lo", "conditional_hi"]
    return pd.DataFrame(rows, columns=cols)


def _conditional_hi(hi_d: float, lo_prev: float, hi_prev: float) -> float:
    """sum hi_d / sum lo_{d-1}, at most 1; 1 when the denominator's lower bound is 0 but it may not be."""
    if lo_prev > 0:
        return min(1.0, hi_d / lo_prev)
    return 1.0 if hi_prev > 0 else np.nan


def sampling_tables(runs: Sequence[RunSampling]) -> dict[str, pd.DataFrame]:
    """The SAMPLING_TABLES by name."""
    return {
        "summary": sampling_summary(runs),
        "accepted_length": expected_length_distribution(runs),
        "depth_acceptance": expected_depth_acceptance(runs),
    }


def bounds_display(table: pd.DataFrame) -> pd.DataFrame:
    """Each NAME_lo / NAME_hi pair as one text column NAME: "lo..hi", or one number when they are equal,
    each as replay.core.headline.metric_text writes it."""
    out = {}
    cols = list(table.columns)
    for c in cols:
        if c.endswith("_hi") and c[:-3] + "_lo" in table.columns:
            continue
        if c.endswith("_lo") and c[:-3] + "_hi" in table.columns:
            name = c[:-3]
            out[name] = [_bounds_text(a, b) for a, b in zip(table[c], table[name + "_hi"])]
        else:
            out[c] = table[c]
    return pd.DataFrame(out)


def _bounds_text(lo: float, hi: float) -> str:
    if np.isnan(lo) or np.isnan(hi):
        return "–"
    a = metric_text(lo)
    # one number where the bounds are one float (replay.core.point_value), not where they round alike
    return a if lo == hi else f"{a}..{metric_text(hi)}"
