"""What a result at temperature T states as one value, and what "exact" means (docs/analysis.md "exact").

**Exact** is a proof: every edge the walk can take has its probability determined by the dump
(replay.core.sampling_columns._exact_of), never that two floats came out equal. An exact round's
upper bounds are set to its lower ones, so its bounds are one float.

**One value** (the point value: ``expected_accepted_length`` of replay and batch --temperature, a
bare number in any text at T) is stated wherever a quantity's two bounds are the same float. Every
exact round's are; so are those of a round whose bounds met to the last digit without a proof (T
near 0, a row whose recorded mass is 1 at T <= 1: the unrecorded tail is below float64's reach).
Such a value is the bound pair itself, no less precise than an exact one, and the text says it is
not exact (``BOUNDS_MET``): "0 exact" next to one bare number would read as a contradiction.
The variance is stated only where exact: it needs the distribution proved, not one sum met.
"""

from __future__ import annotations

import numpy as np

BOUNDS_MET = "bounds that meet, not exact"  # said next to one value stated for something not exact


def point_value(lo: float, hi: float) -> float | None:
    """The one value of a quantity with bounds [lo, hi]: lo where hi is the same float, else None."""
    return lo if lo == hi else None


def point_values(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """point_value of each of [n] float64 bound pairs: [n] float64, NaN where the bounds differ."""
    out: np.ndarray = np.where(lo == hi, lo, np.nan)
    return out


def met_not_exact(lo: float, hi: float, exact: bool) -> bool:
    """Whether one value is stated (point_value) for something the dump does not prove (not ``exact``):
    the text then says BOUNDS_MET."""
    return lo == hi and not exact
