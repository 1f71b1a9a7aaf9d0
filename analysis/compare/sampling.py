"""The table of other configs at temperature T (``compare --temperature``, the report's curve,
``recommend --temperature``): its columns, the summary rule (means over the determined rounds,
exactly rounded sums: ExactSum), its display and the words of the undetermined rounds.

The configs' sub-trees are walked at T on the batch arrays (analysis.compare.sampling_batch,
analysis.compare.sampling_subtrees; docs/analysis.md "Other configs at T").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from replay.core.config import TreeConfig
from replay.core.headline import summary_row, summed_rounds
from replay.engine.sampling import NO_SCORES

from .subtree import is_contained

REACHED = "a node the walk can reach"  # the reasons' words for a node (analysis.compare.subtree.reason_text)

SAMPLING_COLUMNS = [
    "config",
    "top_head",
    "nodes",
    "contained",
    "temperature",
    "rounds",  # rounds with a sampling replay at T (the others are skipped, with the reason)
    "determined",
    "undetermined",
    "exact",  # determined rounds the dump proves exact (replay.core.point_value), not those whose bounds met
    "expected_accepted_length_lo",  # mean over the determined rounds
    "expected_accepted_length_hi",
    "expected_block_efficiency_lo",  # the same + 1
    "expected_block_efficiency_hi",
    "length_at_least_lo",  # lists: mean P(L >= d) over the determined rounds, d = 1 .. gamma
    "length_at_least_hi",
    "all_rounds_block_efficiency_lo",  # every round: an undetermined one counts at E[L] in [0, steps run]
    "all_rounds_block_efficiency_hi",
]

SAMPLING_PER_ROUND_COLUMNS = [
    "config",
    "temperature",
    "round",
    "determined",
    "expected_accepted_length_lo",
    "expected_accepted_length_hi",
    "exact",
    "reason",
]


@dataclass(frozen=True, eq=False)
class SamplingComparison:
    """compare --temperature's results for one run: a row per (config, T), a row per (config, T, round)."""

    table: pd.DataFrame  # SAMPLING_COLUMNS
    per_round: pd.DataFrame  # SAMPLING_PER_ROUND_COLUMNS
    skipped: Sequence[
        tuple[str, float, str]
    ]  # (round, T, reason): no sampling replay of the recorded round (a list, or SkippedRounds made as read)
    needs_vocab: bool  # some T > 1 without a vocabulary size: the lower bounds are 0 (refused)
    # config label -> how often each reason made a round undetermined, where the per-round frame is
    # not kept (the batch path's sums); None: count them in per_round (undetermined_counts)
    undetermined: Mapping[str, Counter] | None = None


class ExactSum:
    """Exactly rounded sums of float64 values per column, added in any order and in any pieces: the
    order-independent sums of the temperature table's means (math.fsum's result, column by column),
    so that the batch path can fold each block as it comes and keep nothing per round.

    Each finite x is m * 2**e (frexp), m * 2**53 an integer split into two parts of < 2**27
    summed per (column, e) in int64 (replay.core.loops.exact_sum_loop: exact up to 2**36 values a
    bin); the total is one Python integer, divided once (correctly rounded).
    Non-finite values give numpy's sum of them (NaN, +-inf)."""

    OFFSET, BINS = 1100, 2200  # frexp's exponents of float64 lie in [-1073, 1024]

    def __init__(self, k: int = 1) -> None:
        self.k = k
        self.parts = np.zeros((2, k * self.BINS), dtype=np.int64)
        self.special = np.zeros(k)  # the sum of the non-finite values (0 when none)

    def add(self, values: np.ndarray) -> None:
        """Add ``values`` ([n] for k = 1, or [n, k]) to the columns' sums."""
        from replay.core.loops import exact_sum_loop  # numba: imported at first use (about 0.35 s)

        v = np.asarray(values, dtype=np.float64).reshape(-1, self.k)
        if not v.size:
            return
        finite = np.isfinite(v)
        if not finite.all():
            self.special += np.where(finite, 0.0, v).sum(axis=0)
            v = np.where(finite, v, 0.0)
        exact_sum_loop(np.ascontiguousarray(v), self.OFFSET, self.BINS, self.parts)

    def add_outcomes(
        self, lo: np.ndarray, hi: np.ndarray, ge_lo: np.ndarray, ge_hi: np.ndarray, rows: np.ndarray
    ) -> None:
        """Add the rows ``rows`` ([n] bool) of the columns lo, hi ([n]), ge_lo.., ge_hi.. ([n, >= g]: the
        first g = (k - 2) / 2 read), as add(their [n, k] side by side) would, without making that array."""
        from replay.core.loops import exact_sum_outcomes_loop  # numba: imported at first use

        g = (self.k - 2) // 2
        arrays = [np.ascontiguousarray(a, dtype=np.float64) for a in (lo, hi, ge_lo, ge_hi)]
        exact_sum_outcomes_loop(*arrays, rows, g, self.OFFSET, self.BINS, self.parts, self.special)

    def sums(self) -> np.ndarray:
        """[k] each column's sum, correctly rounded."""
        out = np.zeros(self.k)
        scale = 53 + self.OFFSET + 200  # every bin's power of two made >= 0
        for c in range(self.k):
            high, low = self.parts[:, c * self.BINS : (c + 1) * self.BINS]
            total = 0
            for b in np.flatnonzero((high != 0) | (low != 0)).tolist():
                total += ((int(high[b]) << 27) + int(low[b])) << (b + 200)
            try:
                out[c] = total / (1 << scale) if total else 0.0
            except OverflowError:
                out[c] = np.inf if total > 0 else -np.inf
        return out + self.special


def summarize_sampling_sums(
    cfg: TreeConfig,
    recorded: TreeConfig,
    t: float,
    n: int,
    nd: int,
    exact: int,
    lo_sum: float,
    hi_sum: float,
    ge_sums: np.ndarray,
    undet_hi: float,
) -> dict:
    """One SAMPLING_COLUMNS row, the one summary rule (undetermined rounds counted, not averaged),
    from n rounds' sums: ``nd`` determined, ``lo_sum`` / ``hi_sum``
    their expected accepted length bounds summed and ``ge_sums`` [2, gamma] their P(L >= d) bounds,
    every sum exactly rounded (ExactSum: math.fsum of the values, in any order); ``exact`` /
    ``undet_hi`` the determined exact rounds and the undetermined ones' steps. A mean is its sum / nd.
    analysis.compare.sampling_sums' curve calls it with sums kept block by block."""
    lo_sum, hi_sum = float(lo_sum), float(hi_sum)
    lo, hi = means_of_sums(lo_sum, nd), means_of_sums(hi_sum, nd)
    all_lo, all_hi = means_of_sums(lo_sum, n), means_of_sums(hi_sum + undet_hi, n)
    ge = ge_sums / nd if nd else ge_sums
    return {
        "config": cfg.short(),
        "top_head": list(cfg.top_head),
        "nodes": cfg.num_nodes,
        "contained": is_contained(cfg, recorded),
        "temperature": t,
        "rounds": n,
        "determined": nd,
        "undetermined": n - nd,
        "exact": exact,
        "expected_accepted_length_lo": lo["mean_accepted_length"],
        "expected_accepted_length_hi": hi["mean_accepted_length"],
        "expected_block_efficiency_lo": lo["mean_acceptance_length"],
        "expected_block_efficiency_hi": hi["mean_acceptance_length"],
        "length_at_least_lo": ge[0].tolist() if nd else [],
        "length_at_least_hi": ge[1].tolist() if nd else [],
        "all_rounds_block_efficiency_lo": all_lo["mean_acceptance_length"],
        "all_rounds_block_efficiency_hi": all_hi["mean_acceptance_length"],
    }


def means_of_sums(accepted_sum: float, rounds: int) -> dict[str, float]:
    """The mean accepted length and the mean acceptance length (the block efficiency) of ``rounds``
    rounds whose accepted lengths, one side of their bounds, sum to ``accepted_sum``: replay.core.headline's
    formulas of stats --temperature, read on sums."""
    return summary_row(summed_rounds(accepted_sum, rounds), names=("mean_accepted_length", "mean_acceptance_length"))


def undetermined_reasons(per_round: pd.DataFrame) -> Counter:
    """How often each reason made a round undetermined (per config and T in ``per_round``'s rows)."""
    return Counter(per_round.loc[~per_round["determined"].astype(bool), "reason"])


def sampling_display(df: pd.DataFrame) -> pd.DataFrame:
    """The SAMPLING_COLUMNS table with each [lo, hi] pair as one readable column (x.xxxx..y.yyyy)."""
    from .configs import format_bounds

    out = df[["config", "top_head", "nodes", "contained", "determined", "undetermined", "exact"]].copy()
    out["top_head"] = out["top_head"].map(lambda h: "[" + ",".join(str(v) for v in h) + "]")
    for name in ("expected_accepted_length", "expected_block_efficiency", "all_rounds_block_efficiency"):
        out[name] = [format_bounds(a, b) for a, b in zip(df[f"{name}_lo"], df[f"{name}_hi"])]
    out["P(L >= d)"] = [
        " ".join(format_bounds(a, b) for a, b in zip(lo, hi)) or "n/a"
        for lo, hi in zip(df["length_at_least_lo"], df["length_at_least_hi"])
    ]
    return out


def met_lines(df: pd.DataFrame) -> list[str]:
    """The configs of a SAMPLING_COLUMNS table shown with one expected accepted length that not every
    determined round proves (replay.core.point_value.met_not_exact): the text says so, as replay's does."""
    from replay.core.point_value import BOUNDS_MET, met_not_exact

    rows = zip(
        df["config"],
        df["expected_accepted_length_lo"],
        df["expected_accepted_length_hi"],
        df["exact"],
        df["determined"],
    )
    met = [cfg for cfg, lo, hi, exact, det in rows if det and met_not_exact(lo, hi, exact == det)]
    return [f"one value shown for {', '.join(met)}: {BOUNDS_MET}"] if met else []


def undetermined_counts(done: SamplingComparison) -> Mapping[str, Counter]:
    """Per config label, how often each reason made a round undetermined (at every T of ``done``)."""
    if done.undetermined is not None:
        return done.undetermined
    return {cfg: undetermined_reasons(g) for cfg, g in done.per_round.groupby("config", sort=False)}


def reason_lines(counts: Mapping[str, Counter]) -> list[str]:
    """Per config with undetermined rounds (undetermined_counts): how many, and the most common reason."""
    lines = []
    for cfg, why in counts.items():
        if why:
            text, k = why.most_common(1)[0]
            lines.append(f"{cfg}: {sum(why.values())} undetermined, most often ({k}): {text}")
    return lines


TEMPERATURE_GRID = tuple(round(0.1 * k, 1) for k in range(16))  # 0, 0.1, ..., 1.5: the report's curve


def without_scores(done: SamplingComparison) -> bool:
    """Whether no round of a comparison had scores: every round at every T > 0 refused for that
    (read from the comparison: on the batch arrays the rounds are not at hand)."""
    positive = done.table["temperature"] > 0.0
    return (
        bool(positive.any())
        and not done.table.loc[positive, "rounds"].any()
        and _only_reason_above_zero(done.skipped, NO_SCORES)
    )


def _only_reason_above_zero(skipped, why: str) -> bool:
    """Whether every skipped round at T > 0 is skipped for ``why``: on the reasons' arrays of
    analysis.compare.sampling_sums.SkippedRounds (15 tuples a round otherwise), else tuple by tuple."""
    only = getattr(skipped, "only_reason", None)
    if only is not None:
        return bool(only(True, why))
    return all(w == why for _, t, w in skipped if t > 0.0)
