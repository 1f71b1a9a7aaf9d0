"""Many runs at once with Dask: one partition per run (or per block), the pandas API on top.

Each partition is the batch replay of one packed run (or dump directory) as per-round records
(``BatchResult.to_frame``: replay.core.records' columns, docs/output-schema.md; rejected rounds are
not records, they are a run's skipped list); Dask schedules partitions over a cluster's workers, so a fleet's
dumps are analysed where they are stored (docs/scale.md). dask is optional: install the
``scale`` extra (``pip install specreplay[scale]``); nothing under replay/ imports it.

    from distributed import Client, LocalCluster
    from analysis.tables.dask_tables import rounds_frame, summarize_runs
    with Client(LocalCluster(n_workers=2, processes=False)):
        rounds = rounds_frame(["day1.run", "day2.run"])
        print(summarize_runs(rounds).compute())
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

try:
    import dask.dataframe as dd
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("analysis.tables.dask_tables needs dask: pip install 'specreplay[scale]'") from exc

from replay.core.records import COLUMNS
from replay.engine.batch import empty_result, replay_batch
from replay.engine.batch.frames import Coded, NullableInts, record_columns
from replay.engine.options import ReplayOptions
from replay.engine.runs import open_run, replay_run

RUN_COLUMN = "run"


def _with_run(frame: pd.DataFrame, run: str) -> pd.DataFrame:
    frame.insert(0, RUN_COLUMN, pd.Series([run] * len(frame), dtype="str", index=frame.index))
    return frame


def run_table(path: str | Path, opts: ReplayOptions | None = None) -> pd.DataFrame:
    """Per-round records of one run (replayed rounds), with a ``run`` column first."""
    rep = replay_run(path, opts or ReplayOptions(), workers=1)
    return _with_run(rep.result.to_frame(), str(path))


def block_table(path: str | Path, group: int, block: int, opts: ReplayOptions | None = None) -> pd.DataFrame:
    """Per-round records of one block of a packed run: partitions of bounded size for huge runs."""
    run = open_run(path, opts or ReplayOptions())
    if run.packed is None:
        raise ValueError(f"{path}: per-block partitions need a packed run (specreplay pack)")
    g = run.packed.groups[group]
    res = replay_batch(run.packed.block(g, block, run.options.layout), run.tree, workers=1)
    return _with_run(res.to_frame(), str(path))


def _partition_dtype(column) -> str:
    """The dtype a record column (record_columns) takes in a partition (frame_of): numbers keep
    theirs, ids with missing cells are ``Int64``, texts ``str``, a text column that may be None
    (the bonus kind) and lists ``object``."""
    if isinstance(column, NullableInts):
        return "Int64"
    if isinstance(column, np.ndarray):
        return str(column.dtype)
    if isinstance(column, Coded) and not column.values.null_count:
        return "str"
    return "object"


def table_meta() -> pd.DataFrame:
    """The empty frame with the tables' columns and dtypes (Dask's ``meta``): the columns of a result
    of no rounds, as record_columns makes them."""
    columns = record_columns(empty_result(1))
    return _with_run(pd.DataFrame({c: pd.Series(dtype=_partition_dtype(columns[c])) for c in COLUMNS}), "")


def rounds_frame(
    paths: Sequence[str | Path],
    opts: ReplayOptions | None = None,
    partition: str = "run",
) -> dd.DataFrame:
    """A Dask DataFrame of every round of every run; ``partition`` "run" (one per run) or "block"."""
    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("no runs given")
    meta = table_meta()
    if partition == "run":
        return dd.from_map(run_table, paths, opts=opts, meta=meta, enforce_metadata=False)
    if partition != "block":
        raise ValueError(f"partition must be 'run' or 'block', got {partition!r}")
    parts = []
    for p in paths:
        packed = open_run(p, opts or ReplayOptions()).packed
        if packed is None:
            raise ValueError(f"{p}: per-block partitions need a packed run (specreplay pack)")
        parts += [(p, gi, k) for gi, g in enumerate(packed.groups) for k in range(g.blocks)]
    return dd.from_map(lambda part: block_table(*part, opts=opts), parts, meta=meta, enforce_metadata=False)


def summarize_runs(rounds: dd.DataFrame | pd.DataFrame):
    """Per run: rounds replayed, mean acceptance length (bonus included: accepted + 1, derived where
    bonus_known < 1), mean accepted length, bonus-known share (docs/vocabulary.md).

    Works on the Dask frame (returns a lazy frame: call ``.compute()``) and on a pandas one.
    """
    known = rounds.assign(bonus_known=rounds["bonus_token"].notnull().astype("int64"))
    grouped = known.groupby(RUN_COLUMN)
    out = grouped.agg(
        rounds=("accepted_length", "count"),
        mean_accepted_length=("accepted_length", "mean"),
        bonus_known=("bonus_known", "mean"),
    )
    out = out.assign(mean_acceptance_length=out["mean_accepted_length"] + 1.0)
    return out[["rounds", "mean_acceptance_length", "mean_accepted_length", "bonus_known"]]


def accepted_length_histogram(rounds: dd.DataFrame | pd.DataFrame):
    """Rounds per (run, accepted length): the acceptance histogram of every run at once."""
    return rounds.groupby([RUN_COLUMN, "accepted_length"])["round"].count()
