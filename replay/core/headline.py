"""A run's acceptance figures, each computed by one formula here, and its headline in the engines'
words (vLLM's speculative-decoding metrics). ``SUMMARY_METRICS`` holds the formula of every summary
metric over ``Rounds`` (per-round accepted lengths and columns: the greedy replay's, or one side of
the bounds at a temperature); ``per_position_rates`` the per-position acceptance rate. ``stats``,
``report`` and ``stats --temperature`` apply them per run (analysis.tables.metrics, .sampling),
``compare`` per config (analysis.compare.configs), and ``headline`` for ``replay --summary``,
``batch``, ``generate`` and ``sweep``. The words for each (name, formula, meaning, the engines'
names) are in analysis.tables.definitions (docs/vocabulary.md).

    mean acceptance length          = 1 + Σ_r L_r / R     bonus included (vLLM, SGLang's accept
                                                          length, the engine's block_efficiency)
    draft acceptance rate           = Σ_r L_r / Σ_r nodes_r
    per-position acceptance rate_d  = #{r : L_r >= d} / R,  d = 1 .. the deepest round's steps

L_r: accepted length of round r (bonus excluded); nodes_r: its draft nodes, root excluded (the
draft tokens the target verified). Every round commits its accepted tokens and one token of the
target (a correction or a leaf bonus), so the acceptance length is L_r + 1 whether or not the dump
holds that token. When it does not (the parents layout has no row after a leaf), the + 1 is not
in the dump: the figure is then *derived* (accepted + 1), and every output says so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal

import numpy as np

# The decimals a run's acceptance figures are printed with (mean acceptance and accepted length,
# draft and per-position acceptance rates, their values or bounds at a temperature): replay
# --summary, batch, stats, compare, report, generate, sweep and recommend --temperature print one
# value as one string. Speedups keep their own three decimals.
METRIC_DIGITS = 4
# A printed figure is read from its value to this many decimals: two sums of one quantity that
# differ only in their last bits (a different summation order) then print the same digits.
READ_DECIMALS = 10
_WIDE = Context(prec=400)  # room for any float64's digits, so quantize never runs out of precision


def fixed_text(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, as every command prints a figure: read to READ_DECIMALS
    decimals and rounded half to even, so a value and the value + 1 round alike on a decimal tie
    (1.30265 and 2.30265 print 1.3026 and 2.3026). Non-finite values print as Python writes them."""
    value = float(value)
    if not np.isfinite(value):
        return f"{value:.{digits}f}"
    read = Decimal(repr(round(value, READ_DECIMALS)))
    return f"{read.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_EVEN, context=_WIDE):f}"


def metric_text(value: float) -> str:
    """An acceptance figure as every command prints it (METRIC_DIGITS decimals)."""
    return fixed_text(value, METRIC_DIGITS)


ENGINE_NAMES = "vLLM's names; SGLang's accept length and the engine's block_efficiency are the mean acceptance length"


# What a summary metric is at temperature T (stats --temperature): EXPECTED, its formula read on each
# side of the bounds on the rounds' accepted lengths (NAME_lo, NAME_hi); SAME_AT_ANY_T, a formula that
# reads no accepted length (the tree's size does not depend on T); GREEDY_ONLY, none (at T the bonus
# token is the target's draw, which a dump cannot hold).
EXPECTED, SAME_AT_ANY_T, GREEDY_ONLY = "expected", "same at any T", "greedy only"


@dataclass(frozen=True, eq=False)
class Rounds:
    """R rounds as a summary formula reads them: the greedy replay's (greedy_rounds), or one side of
    the bounds at temperature T (analysis.tables.sampling)."""

    accepted: np.ndarray  # [R] L_r (int64), at T a bound on E[L_r] (float64)
    at_least: Callable[[np.ndarray], np.ndarray]  # [R] int64 depths -> [R] P(L_r >= depth_r)
    # [R] each: the round columns the formulas read (analysis.tables.definitions.ROUND_COLUMNS_READ)
    columns: Mapping[str, np.ndarray]

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    @staticmethod
    def mean(values: np.ndarray) -> float:
        """(1/R) Σ_r values_r, NaN without rounds; values: [R] numbers or bools (integers are summed exactly)."""
        return mean_of_sum(float(values.sum()), values.shape[0])

    @staticmethod
    def ratio(num: np.ndarray, den: np.ndarray) -> float:
        """Σ_r num_r / Σ_r den_r, NaN when the denominator's sum is not positive; [R] each."""
        bottom = float(den.sum())
        return float(num.sum()) / bottom if bottom > 0 else float("nan")


def mean_of_sum(total: float, rounds: int) -> float:
    """The mean of R = ``rounds`` values from their sum, NaN without rounds: every formula's mean."""
    return total / rounds if rounds else float("nan")


def summed_rounds(accepted_sum: float, rounds: int) -> Rounds:
    """Rounds known only by the sum of their accepted lengths (compare at T keeps exactly rounded sums,
    not rounds: analysis.compare.sampling), for the formulas that read their mean alone: one round
    holding the mean, whose mean is itself. No round column, no P(L >= d)."""
    return Rounds(np.array([mean_of_sum(accepted_sum, rounds)]), _no_at_least, {})


def _no_at_least(depths: np.ndarray) -> np.ndarray:
    raise ValueError("rounds known by their sum alone hold no P(L >= d)")


def greedy_rounds(accepted: np.ndarray, columns: Mapping[str, np.ndarray]) -> Rounds:
    """Rounds replayed greedily: accepted [R] int64 accepted lengths; columns [R] each."""
    return Rounds(accepted, lambda depths: accepted >= depths, columns)


def bound_rounds(expected: np.ndarray, ge: np.ndarray, columns: Mapping[str, np.ndarray]) -> Rounds:
    """Rounds at T on one side of their bounds: expected [R] float64 a bound on E[L_r]; ge [R, D+1]
    float64 the same side's P(L_r >= d), d = 0..D (deeper reads column D); columns [R] each."""
    lanes = np.arange(ge.shape[0])
    return Rounds(expected, lambda depths: ge[lanes, np.minimum(depths, ge.shape[1] - 1)], columns)


@dataclass(frozen=True)
class SummaryMetric:
    """A summary metric's value from a run's rounds, greedy and at T alike: ``value(rounds)`` reads a
    Rounds (``accepted``: L_r, at T one side of the bounds on E[L_r]; ``at_least(depths)``:
    P(L_r >= depth_r); ``rounds[column]``: a round column, num_nodes, num_steps or bonus_known)."""

    name: str  # a Definition's name (analysis.tables.definitions)
    at_t: str  # EXPECTED, SAME_AT_ANY_T or GREEDY_ONLY
    value: Callable[[Rounds], float]


# The summary metrics in the order stats prints them, each as its formula (its Definition in
# analysis.tables.definitions in words): stats, report, -o, --csv, the API, stats --temperature,
# compare and the headline take a new one or a changed one from here.
SUMMARY_METRICS = (
    SummaryMetric("mean_acceptance_length", EXPECTED, lambda r: r.mean(r.accepted) + 1.0),
    SummaryMetric("draft_acceptance_rate", EXPECTED, lambda r: r.ratio(r.accepted, r["num_nodes"])),
    SummaryMetric("mean_accepted_length", EXPECTED, lambda r: r.mean(r.accepted)),
    SummaryMetric("bonus_known_fraction", GREEDY_ONLY, lambda r: r.mean(r["bonus_known"])),
    SummaryMetric("full_depth_fraction", EXPECTED, lambda r: r.mean(r.at_least(r["num_steps"]))),
    SummaryMetric("mean_num_nodes", SAME_AT_ANY_T, lambda r: r.mean(r["num_nodes"])),
    SummaryMetric("mean_num_steps", SAME_AT_ANY_T, lambda r: r.mean(r["num_steps"])),
)
# The figures a headline and compare's rows show of SUMMARY_METRICS (they read num_nodes only).
ACCEPTANCE_FIGURES = ("mean_acceptance_length", "draft_acceptance_rate", "mean_accepted_length")


def summary_row(rounds: Rounds, at_t: Collection[str] = (), names: Collection[str] = ()) -> dict[str, float]:
    """Each SUMMARY_METRICS metric of the kinds ``at_t`` (EXPECTED, ...) or named in ``names``, by its formula."""
    return {m.name: m.value(rounds) for m in SUMMARY_METRICS if m.at_t in at_t or m.name in names}


def per_position_rates(accepted: np.ndarray, depth: int) -> np.ndarray:
    """P(L >= d) for d = 1..depth. accepted: [R] integer accepted lengths; returns [depth] float64."""
    accepted = np.asarray(accepted, dtype=np.int64)
    if accepted.ndim != 1:
        raise ValueError(f"accepted: expected [R], got shape {accepted.shape}")
    if not accepted.shape[0]:
        return np.full(depth, np.nan)
    counts = np.bincount(accepted, minlength=depth + 1)  # rounds with L = k
    reached = counts[::-1].cumsum()[::-1]  # rounds with L >= k
    rates: np.ndarray = reached[1 : depth + 1] / accepted.shape[0]
    return rates


@dataclass(frozen=True)
class Headline:
    rounds: int
    accepted: int  # Σ L_r, draft tokens accepted
    drafted: int  # Σ nodes_r, draft tokens the target verified
    # the ACCEPTANCE_FIGURES, each by its SUMMARY_METRICS formula
    mean_acceptance_length: float
    draft_acceptance_rate: float
    mean_accepted_length: float
    per_position: tuple[float, ...]  # P(L >= d), d = 1 .. max steps (per_position_rates)
    bonus_known: int | None = None  # rounds whose bonus token the dump holds; None: all (a live run)

    @property
    def derived(self) -> bool:
        """Some round's + 1 (its bonus token) is not in the dump: the acceptance length is derived."""
        return self.bonus_known is not None and self.bonus_known < self.rounds


def headline(
    accepted: Sequence[int] | np.ndarray,
    drafted: Sequence[int] | np.ndarray,
    steps: Sequence[int] | np.ndarray,
    bonus_known: int | None = None,
) -> Headline:
    """The headline of R rounds. accepted, drafted (nodes, root excluded), steps (draft steps): [R]
    integers each; bonus_known: rounds whose bonus token the dump holds (None: every round's)."""
    acc = np.asarray(accepted, dtype=np.int64)
    nodes = np.asarray(drafted, dtype=np.int64)
    st = np.asarray(steps, dtype=np.int64)
    if not (acc.ndim == 1 and acc.shape == nodes.shape == st.shape):
        raise ValueError(f"accepted {acc.shape}, drafted {nodes.shape}, steps {st.shape}: expected equal [R] shapes")
    figures = summary_row(greedy_rounds(acc, {"num_nodes": nodes}), names=ACCEPTANCE_FIGURES)
    depth = int(st.max()) if st.shape[0] else 0
    rates = tuple(float(v) for v in per_position_rates(acc, depth))
    return Headline(
        int(acc.shape[0]),
        int(acc.sum()),
        int(nodes.sum()),
        figures["mean_acceptance_length"],
        figures["draft_acceptance_rate"],
        figures["mean_accepted_length"],
        rates,
        bonus_known,
    )


def acceptance_length_basis(h: Headline) -> str:
    """How the acceptance length was obtained, in words: derived or counted in the dump."""
    if h.bonus_known is None:
        return "counted: a live round always commits the target's token"
    if h.derived:
        return f"derived: accepted + 1; the dump holds the bonus token of {h.bonus_known} of {h.rounds} round(s)"
    return "every round's bonus token is in the dump"


def headline_lines(h: Headline) -> list[str]:
    """The headline block: mean acceptance length, draft acceptance rate, per-position rates,
    then the mean accepted length (bonus excluded) and the engines' names."""
    positions = "  ".join(f"d{d}: {metric_text(v)}" for d, v in enumerate(h.per_position, 1)) or "(no draft steps)"
    return [
        f"mean acceptance length (bonus included): {metric_text(h.mean_acceptance_length)}  ({acceptance_length_basis(h)})",
        f"draft acceptance rate: {metric_text(h.draft_acceptance_rate)}  ({h.accepted} accepted / {h.drafted} drafted tokens)",
        f"per-position acceptance rate P(L >= d): {positions}",
        f"mean accepted length (bonus excluded): {metric_text(h.mean_accepted_length)}",
        f"({ENGINE_NAMES}; docs/vocabulary.md)",
    ]
