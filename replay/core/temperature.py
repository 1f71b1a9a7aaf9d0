"""The temperature of sampling mode as the user gives it and every message prints it: T >= 0 (0 is
greedy), never below MIN_TEMPERATURE, shown short yet never as a different number.
"""

from __future__ import annotations

import math
from typing import Any

# The smallest T > 0 taken: at T = 1e-310 the rule's 1/T overflows and every bound would be NaN;
# T = 1e-300 gives the greedy answer, as T -> 0 must.
MIN_TEMPERATURE = 1e-300


def check_temperature(value: Any) -> float:
    """T as a float: finite and >= 0 (0 means greedy). Raises ValueError with the words to show."""
    if isinstance(value, bool):
        raise ValueError(f"temperature: expected a number >= 0, got {str(value).lower()}")
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"temperature: expected a number >= 0, got {value!r}") from None
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"temperature: expected a finite number >= 0 (0 = greedy), got {value!r}")
    if 0.0 < t < MIN_TEMPERATURE or (t == 0.0 and isinstance(value, str) and _nonzero_text(value)):
        raise ValueError(
            f"temperature: expected 0 (greedy) or a number >= {MIN_TEMPERATURE:g}, got {value!r} "
            "(a smaller T reads as 0 or has no finite 1/T)"
        )
    return t + 0.0  # -0.0 is 0: shown as "T = 0", never "-0"


def format_temperature(t: float) -> str:
    """T as every message and label prints it: short (``0.7``, ``1e-09``), yet never a different
    number than the one used (``0.80000001`` is not shown as ``0.8``)."""
    short = f"{t:g}"
    return short if float(short) == t else repr(float(t))


def _nonzero_text(text: str) -> bool:
    """A number written with a non-zero digit before its exponent ("1e-400", which float() reads as 0)."""
    mantissa = text.strip().lower().split("e")[0]
    return any(ch in "123456789" for ch in mantissa)
