"""The one binomial interval every acceptance rate is shown with: the Wilson score interval (95%).

A rate k/n from a few rounds looks as solid as one from thousands (0.667 from 3 rounds); its
interval says how much it can move. Wilson's interval stays inside [0, 1] and keeps a sensible
width at k = 0 or k = n, where the normal (Wald) interval collapses to zero width:

    centre = (p̂ + z²/(2n)) / (1 + z²/n)
    half   = z · sqrt(p̂(1 − p̂)/n + z²/(4n²)) / (1 + z²/n),    p̂ = k/n, z = 1.959964 (95%)

Used by the per-depth acceptance table (analysis.tables.metrics.depth_acceptance), its plots and report,
and recommend's acceptance model (analysis.shapes.model). docs/analysis.md states it.
"""

from __future__ import annotations

import numpy as np

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: two-sided 95%


def wilson(k, n) -> tuple[np.ndarray, np.ndarray]:
    """95% Wilson score interval (lo, hi) of k successes in n trials; k, n broadcastable arrays.

    Where n == 0 nothing is known: (0, 1). The interval holds k/n: at k = 0 its lower end is 0
    exactly (mid - half would cancel to a rounding error, 5.6e-17 for 0 of 3, which an error bar
    reads as a negative length), and at k = n its upper end is 1.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    safe = np.where(n > 0, n, 1.0)  # n == 0 is answered below; any divisor keeps the arithmetic finite
    ph = k / safe
    z2 = Z95**2
    den = 1 + z2 / safe
    mid = (ph + z2 / (2 * safe)) / den
    half = Z95 * np.sqrt(np.maximum(ph * (1 - ph), 0.0) / safe + z2 / (4 * safe**2)) / den
    lo = np.where(n > 0, np.clip(np.minimum(mid - half, ph), 0, 1), 0.0)
    hi = np.where(n > 0, np.clip(np.maximum(mid + half, ph), 0, 1), 1.0)
    return lo, hi
