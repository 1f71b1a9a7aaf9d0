"""A goodness-of-fit check with a stated false-alarm rate, for the sampling-losslessness tests.

Total variation between the empirical distribution of n i.i.d. draws and the exact one:
  E[TV] <= 1/2 * sum_k sqrt(p_k (1 - p_k) / n)            (Jensen, per outcome)
  P(TV - E[TV] >= t) <= exp(-2 n t^2)                      (McDiarmid: one draw moves TV by <= 1/n)
so with t = sqrt(ln(1/alpha) / (2n)) a correct sampler fails the check with probability <= alpha.
Outcomes drawn that the exact distribution gives probability 0 count in full.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Mapping


@dataclass(frozen=True)
class TvCheck:
    tv: float
    threshold: float
    n: int
    alpha: float

    @property
    def passed(self) -> bool:
        return self.tv <= self.threshold


def tv_check(draws: list[Hashable], exact: Mapping[Hashable, float], alpha: float) -> TvCheck:
    n = len(draws)
    counts = Counter(draws)
    tv = 0.5 * sum(abs(counts.get(k, 0) / n - p) for k, p in exact.items())
    tv += 0.5 * sum(c / n for k, c in counts.items() if k not in exact)
    expected = 0.5 * sum(math.sqrt(p * (1 - p) / n) for p in exact.values())
    return TvCheck(tv, expected + math.sqrt(math.log(1 / alpha) / (2 * n)), n, alpha)
