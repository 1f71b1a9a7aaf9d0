"""How a figure is written in JSON (every command's --json object, the cost model's JSON in text and
on the report page, generate --config auto's files): a float as every command reads a figure it
prints, to READ_DECIMALS decimals (replay.core.headline.fixed_text), so that two commands that sum
one quantity in different orders write the same number (but for sums within their last bits of a
decimal half-point, which no rounding escapes), the noise of a computation's last bits
(0.09999999999999999 for 0.1) never reaches the output, and fixed_text of a JSON figure is the
string the text prints; a value is written the same by every command whatever built it (a dict, a
table's rows). NaN and infinities as null, which strict JSON readers take. Per-round records (JSON
Lines) are no figures: they carry each value exactly, as their table rows and the API do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .headline import READ_DECIMALS


def json_figure(value: float) -> float | None:
    """``value`` read to READ_DECIMALS decimals, the reading fixed_text makes (json.dumps then
    writes the shortest text that reads back as it); None for NaN and infinities."""
    value = float(value)
    if not math.isfinite(value):
        return None
    return round(value, READ_DECIMALS)


def json_figures(obj: Any) -> Any:
    """``obj`` as plain JSON values with every float through json_figure: dicts, lists, tuples and
    arrays walked; numpy scalars made Python's; anything else (strings, None) as it is."""
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (float, np.floating)):
        return json_figure(float(obj))
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, Mapping):
        return {k: json_figures(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [json_figures(v) for v in obj]
    return obj


def frame_records(frame: Any) -> list[dict[str, Any]]:
    """A pandas DataFrame's rows as JSON objects (column name → cell), its figures by json_figure and
    every missing cell (NaN, None, pd.NA) null."""
    cells = frame.astype(object).where(frame.notna(), None)
    rows: list[dict[str, Any]] = json_figures(cells.to_dict(orient="records"))
    return rows


def figures_text(obj: Any, **dumps: Any) -> str:
    """json.dumps of ``obj`` by json_figures, strict (no NaN): the text of every JSON figure written."""
    return json.dumps(json_figures(obj), allow_nan=False, **dumps)
