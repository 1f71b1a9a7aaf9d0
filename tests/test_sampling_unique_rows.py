"""replay.util.rows.unique_rows equals np.unique(axis=0, return_inverse=True): random parents arrays
(the sampling groups), shape codes and reason codes (the other callers), dtypes, empty inputs."""

import numpy as np
import pytest

from replay.util.rows import unique_rows


def _same_as_numpy(a: np.ndarray) -> None:
    want_rows, want_inv = np.unique(a, axis=0, return_inverse=True)
    rows, inv = unique_rows(a)
    assert rows.dtype == a.dtype and inv.dtype == np.int64
    assert np.array_equal(rows, want_rows)
    assert np.array_equal(inv, want_inv.reshape(-1))
    assert np.array_equal(rows[inv], a)  # the inverse rebuilds the input


@pytest.mark.parametrize("seed", range(20))
def test_unique_rows_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r, w = int(rng.integers(1, 400)), int(rng.integers(1, 20))
    distinct = int(rng.integers(1, r + 1))  # few to many distinct trees
    trees = rng.integers(-1, 3, (distinct, w)).astype(np.int64)
    _same_as_numpy(trees[rng.integers(0, distinct, r)])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.int64, bool])
def test_unique_rows_orders_values_not_bytes(dtype) -> None:
    # little-endian bytes of -1 sort after those of 1, and 256 before 1: the order must be numpy's
    rng = np.random.default_rng(7)
    lo, hi = (0, 2) if dtype is bool else ((0, 300) if dtype is np.uint16 else (-100, 100))
    a = rng.integers(lo, hi, (500, 3)).astype(dtype)
    _same_as_numpy(a)


@pytest.mark.parametrize("shape", [(0, 3), (4, 0), (0, 0)])
def test_unique_rows_of_nothing(shape) -> None:
    _same_as_numpy(np.zeros(shape, dtype=np.int64))


def test_unique_rows_refuses_floats_and_vectors() -> None:
    with pytest.raises(ValueError, match="integer"):
        unique_rows(np.array([[0.0], [-0.0]]))  # equal values, different bytes
    with pytest.raises(ValueError, match=r"\[R, W\]"):
        unique_rows(np.arange(3))
