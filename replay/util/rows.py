"""The distinct rows of an integer matrix: np.unique(axis=0) without its per-field sort."""

from __future__ import annotations

import numpy as np


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(a, axis=0, return_inverse=True) for ``a`` [R, W] of any integer dtype, the inverse
    flat [R] int64: the same rows in the same order.

    np.unique with an axis sorts a structured view field by field; one 1-D sort of the rows as
    opaque bytes finds the distinct rows, and a lexsort of those few puts them in np.unique's
    (signed, row-lexicographic) order. Bytes stand for values only for integers: a float's -0.0
    and 0.0, or its NaNs, would not compare as np.unique compares them, hence the dtype check.
    """
    if a.ndim != 2 or a.dtype.kind not in "iub":
        raise ValueError(f"unique_rows: expected an [R, W] integer array, got {a.shape} {a.dtype}")
    if not a.shape[0] or not a.shape[1]:  # no bytes to view: numpy's answer is cheap here
        rows, inverse = np.unique(a, axis=0, return_inverse=True)
        return rows, inverse.reshape(-1).astype(np.int64)
    c = np.ascontiguousarray(a)
    keys = c.view(np.dtype((np.void, c.dtype.itemsize * c.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rows = c[first]
    order = np.lexsort(rows.T[::-1])
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rows[order], rank[inverse.reshape(-1)].astype(np.int64)
