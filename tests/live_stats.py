"""A goodness-of-fit check with a stated false-alarm rate, for the sampling-losslessness tests,
and the bound that says how surely it catches a given wrong distribution.

Total variation between the empirical distribution of n i.i.d. draws and the exact one:
  E[TV] <= 1/2 * sum_k sqrt(p_k (1 - p_k) / n)            (Jensen, per outcome)
  P(TV - E[TV] >= t) <= exp(-2 n t^2)                      (McDiarmid: one draw moves TV by <= 1/n)
so with t = sqrt(ln(1/alpha) / (2n)) a correct sampler fails the check with probability <= alpha.
Outcomes drawn that the exact distribution gives probability 0 count in full.

Power: if the draws come from q instead, TV(emp, p) >= TV(q, p) - TV(emp, q), and TV(emp, q)
obeys the two bounds above with q in place of p; so the check passes with probability at most
exp(-2 n m^2), m = TV(q, p) - threshold - E_q[TV] (when m > 0).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TvCheck:
    tv: float
    threshold: float
    n: int
    alpha: float

    @property
    def passed(self) -> bool:
        return self.tv <= self.threshold


def expected_tv_bound(dist: Mapping[Hashable, float], n: int) -> float:
    """Upper bound on E[TV] between n draws from ``dist`` and ``dist`` itself."""
    return 0.5 * sum(math.sqrt(p * (1 - p) / n) for p in dist.values())


def tv_threshold(exact: Mapping[Hashable, float], n: int, alpha: float) -> float:
    return expected_tv_bound(exact, n) + math.sqrt(math.log(1 / alpha) / (2 * n))


def tv_distance(p: Mapping[Hashable, float], q: Mapping[Hashable, float]) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def tv_check(draws: list[Hashable], exact: Mapping[Hashable, float], alpha: float) -> TvCheck:
    n = len(draws)
    counts = Counter(draws)
    tv = 0.5 * sum(abs(counts.get(k, 0) / n - p) for k, p in exact.items())
    tv += 0.5 * sum(c / n for k, c in counts.items() if k not in exact)
    return TvCheck(tv, tv_threshold(exact, n, alpha), n, alpha)


def miss_bound(exact: Mapping[Hashable, float], wrong: Mapping[Hashable, float], n: int, alpha: float) -> float:
    """Upper bound on the probability that n draws from ``wrong`` pass ``tv_check`` against ``exact``."""
    margin = tv_distance(wrong, exact) - tv_threshold(exact, n, alpha) - expected_tv_bound(wrong, n)
    return math.exp(-2 * n * margin * margin) if margin > 0 else 1.0
