"""_unique_rows equals np.unique(axis=0, return_inverse=True) on random parents arrays."""

import numpy as np
import pytest

from replay.core.sampling import _unique_rows


@pytest.mark.parametrize("seed", range(20))
def test_unique_rows_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r, w = int(rng.integers(1, 400)), int(rng.integers(1, 20))
    distinct = int(rng.integers(1, r + 1))  # few to many distinct trees
    trees = rng.integers(-1, 3, (distinct, w)).astype(np.int64)
    a = trees[rng.integers(0, distinct, r)]
    want_rows, want_inv = np.unique(a, axis=0, return_inverse=True)
    rows, inv = _unique_rows(a)
    assert np.array_equal(rows, want_rows)
    assert np.array_equal(inv, want_inv.reshape(-1))
