"""Entry checks for tensor and array arguments: a wrong shape fails at the call, not deep in torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def check_shape(name: str, value: Any, shape: Sequence[int | None], dtype: Any = None) -> None:
    """Raise ValueError unless ``value`` (torch tensor or numpy array) has ``shape`` (None = any size)
    and, when given, ``dtype`` (a torch or numpy dtype, compared by equality)."""
    got = tuple(value.shape)
    if len(got) != len(shape) or any(want is not None and g != want for g, want in zip(got, shape)):
        want_txt = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name}: expected shape {want_txt}, got {list(got)}")
    if dtype is not None and value.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {dtype}, got {value.dtype}")
