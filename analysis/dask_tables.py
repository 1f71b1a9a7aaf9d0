"""Many runs at once with Dask: one partition per run (or per block), the pandas API on top.

Each partition is the batch replay of one packed run (or dump directory) as a per-round table
(``BatchResult.to_frame``); Dask schedules partitions over a cluster's workers, so a fleet's
dumps are analysed where they are stored (docs/scale.md). dask is optional: install the
``scale`` extra (``pip install specreplay[scale]``); nothing under replay/ imports it.

    from distributed import Client, LocalCluster
    from analysis.dask_tables import rounds_frame, summarize_runs
    with Client(LocalCluster(n_workers=2, processes=False)):
        rounds = rounds_frame(["day1.run", "day2.run"])
        print(summarize_runs(rounds).compute())
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

try:
    import dask.dataframe as dd
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("analysis.dask_tables needs dask: pip install 'specreplay[scale]'") from exc

from replay.batch import empty_result, replay_batch
from replay.replayer import ReplayOptions
from replay.runs import open_run, replay_run

RUN_COLUMN = "run"


def _with_run(frame: pd.DataFrame, run: str) -> pd.DataFrame:
    frame.insert(0, RUN_COLUMN, pd.Series([run] * len(frame), dtype="str", index=frame.index))
    return frame


def run_table(path: str | Path, opts: ReplayOptions | None = None, rank_columns: int | None = None) -> pd.DataFrame:
    """Per-round table of one run (rejected rounds included, ``ok`` False), with a ``run`` column."""
    rep = replay_run(path, opts or ReplayOptions(), workers=1)
    return _with_run(rep.result.to_frame(rank_columns), str(path))


def block_table(path: str | Path, group: int, block: int, opts: ReplayOptions | None = None, rank_columns: int | None = None) -> pd.DataFrame:
    """Per-round table of one block of a packed run: partitions of bounded size for huge runs."""
    run = open_run(path, opts or ReplayOptions())
    if run.packed is None:
        raise ValueError(f"{path}: per-block partitions need a packed run (specreplay pack)")
    g = run.packed.groups[group]
    res = replay_batch(run.packed.block(g, block, run.options.layout), run.tree, workers=1)
    return _with_run(res.to_frame(rank_columns), str(path))


def table_meta(rank_columns: int) -> pd.DataFrame:
    """The empty frame with the tables' columns and dtypes (Dask's ``meta``)."""
    return _with_run(empty_result(rank_columns).to_frame(rank_columns), "")


def max_depth(paths: Iterable[str | Path], opts: ReplayOptions | None = None) -> int:
    """The largest gamma among the runs' configs (read from manifests; nothing is replayed)."""
    return max(open_run(p, opts or ReplayOptions()).tree.gamma for p in paths)


def rounds_frame(
    paths: Sequence[str | Path],
    opts: ReplayOptions | None = None,
    partition: str = "run",
) -> "dd.DataFrame":
    """A Dask DataFrame of every round of every run; ``partition`` "run" (one per run) or "block"."""
    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("no runs given")
    depth = max_depth(paths, opts)
    meta = table_meta(depth)
    if partition == "run":
        return dd.from_map(run_table, paths, opts=opts, rank_columns=depth, meta=meta, enforce_metadata=False)
    if partition != "block":
        raise ValueError(f"partition must be 'run' or 'block', got {partition!r}")
    parts = []
    for p in paths:
        packed = open_run(p, opts or ReplayOptions()).packed
        if packed is None:
            raise ValueError(f"{p}: per-block partitions need a packed run (specreplay pack)")
        parts += [(p, gi, k) for gi, g in enumerate(packed.groups) for k in range(g.blocks)]
    return dd.from_map(
        lambda part: block_table(*part, opts=opts, rank_columns=depth), parts, meta=meta, enforce_metadata=False
    )


def summarize_runs(rounds: "dd.DataFrame | pd.DataFrame"):
    """Per run: rounds replayed, mean accepted length, block efficiency, bonus-known share.

    Works on the Dask frame (returns a lazy frame: call ``.compute()``) and on a pandas one.
    """
    ok = rounds[rounds["ok"]]
    ok = ok.assign(bonus_known=(ok["bonus_token"] >= 0).astype("int64"))
    grouped = ok.groupby(RUN_COLUMN)
    out = grouped.agg(
        rounds=("accepted_length", "count"),
        mean_accepted_length=("accepted_length", "mean"),
        block_efficiency=("num_committed", "mean"),
        bonus_known=("bonus_known", "mean"),
    )
    return out


def accepted_length_histogram(rounds: "dd.DataFrame | pd.DataFrame"):
    """Rounds per (run, accepted length): the acceptance histogram of every run at once."""
    ok = rounds[rounds["ok"]]
    return ok.groupby([RUN_COLUMN, "accepted_length"])["ok"].count()
