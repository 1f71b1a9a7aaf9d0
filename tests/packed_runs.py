"""Helpers of the tests that hold the batch path against the round-by-round reference: packed
synthetic runs, and frames compared exactly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from replay.core.config import TreeConfig
from replay.io.packed.pack import pack_batches
from replay.testing.batch_synth import synth_run


def packed_synth_run(
    path: Path, config: TreeConfig, rounds: int, *, seed: int, early_stop_rate: float, block_rounds: int
) -> Path:
    """synth_run's ``rounds`` rounds (a fraction ``early_stop_rate`` stopping early) packed at
    ``path`` in blocks of ``block_rounds``, the manifest naming the config and synth_run's "all"
    layout; returns ``path``."""
    pack_batches(
        synth_run(config, rounds, seed=seed, early_stop_rate=early_stop_rate),
        path,
        block_rounds=block_rounds,
        manifest={"config": config.to_json(), "layout": "all"},
    )
    return path


def assert_same_frames(got: Sequence[pd.DataFrame], want: Sequence[pd.DataFrame]) -> None:
    """Frame by frame: the same columns in the same order, the same dtypes, equal values exactly."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert list(g.columns) == list(w.columns)
        assert [str(t) for t in g.dtypes] == [str(t) for t in w.dtypes]
        pd.testing.assert_frame_equal(g, w, check_exact=True)
