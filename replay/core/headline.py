"""A run's headline figures in the engines' words (vLLM's speculative-decoding metrics), from
per-round accepted lengths and drafted tokens: the one place they are computed. ``replay
--summary``, ``batch``, ``stats``, ``generate`` and ``sweep`` lead with them; their names,
formulas and the engines' names are in analysis/tables/definitions.py (docs/vocabulary.md).

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The decimals a run's acceptance figures are printed with (mean acceptance and accepted length,
# draft and per-position acceptance rates, their values or bounds at a temperature): replay
# --summary, batch, stats, compare, report, generate, sweep and recommend --temperature print one
# value as one string. Speedups keep their own three decimals.
METRIC_DIGITS = 4


def metric_text(value: float) -> str:
    """An acceptance figure as every command prints it (METRIC_DIGITS decimals)."""
    return f"{value:.{METRIC_DIGITS}f}"


ENGINE_NAMES = "vLLM's names; SGLang's accept length and the engine's block_efficiency are the mean acceptance length"


@dataclass(frozen=True)
class Headline:
    rounds: int
    accepted: int  # Σ L_r, draft tokens accepted
    drafted: int  # Σ nodes_r, draft tokens the target verified
    per_position: tuple[float, ...]  # P(L >= d), d = 1 .. max steps
    bonus_known: int | None = None  # rounds whose bonus token the dump holds; None: all (a live run)

    @property
    def mean_accepted_length(self) -> float:
        return self.accepted / self.rounds if self.rounds else float("nan")

    @property
    def mean_acceptance_length(self) -> float:
        return self.mean_accepted_length + 1.0

    @property
    def draft_acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def derived(self) -> bool:
        """Some round's + 1 (its bonus token) is not in the dump: the acceptance length is derived."""
        return self.bonus_known is not None and self.bonus_known < self.rounds


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
    depth = int(st.max()) if st.shape[0] else 0
    rates = per_position_rates(acc, depth)
    return Headline(int(acc.shape[0]), int(acc.sum()), int(nodes.sum()), tuple(float(v) for v in rates), bonus_known)


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
