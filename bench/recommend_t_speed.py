"""recommend --temperature's walk of every candidate shape at T on a packed run: each candidate's
own walk against the shared walk (analysis.compare.sampling_reach: the recorded config's walk,
each candidate's reach summed from it), in one process, interleaved, CPU seconds on one thread.

    PYTHONPATH=. python bench/million.py --scores --rounds 100000 --dir /tmp/m --keep
    PYTHONPATH=. python bench/recommend_t_speed.py /tmp/m/run_100000_scored --repeats 3

Each pass folds every candidate's outcomes into FoldedSums (what recommend at T reads, the run's
replay included); the two passes' tables must be equal, value for value.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pandas as pd
from benchkit import machine_line

import analysis.compare.sampling_parts as parts
from analysis.compare.sampling_sums import folded_sums
from analysis.shapes.sampling_recommend import shapes_and_configs
from analysis.tables.runs import load_run
from replay.engine.runs import iter_run_chunks, open_run


def one_pass(run, configs, t: float, shared: bool) -> tuple[float, pd.DataFrame]:
    """(CPU seconds, the comparison table) of every config at T folded over the run on this thread."""
    keep: Callable = parts._reach_applies
    if not shared:
        parts._reach_applies = lambda *_: False  # type: ignore[assignment]
    try:
        sums, per_batch = folded_sums(configs, [t], None, 0.0, run.replay.manifest.node_logprob_temperatures)
        start = time.process_time()
        for _ in iter_run_chunks(open_run(run.replay.directory, run.options), 1, per_batch=per_batch):
            pass
        seconds = time.process_time() - start
    finally:
        parts._reach_applies = keep  # type: ignore[assignment]
    return seconds, sums.comparison(run.config).table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    run = load_run(args.run, "run")
    configs = shapes_and_configs(run.config, args.budget, None)[1]
    one_pass(run, configs[:2], args.temperature, True)  # warm up: numba's compiled loops, the page cache
    times: dict[bool, list[float]] = {False: [], True: []}
    tables = {}
    for _ in range(args.repeats):
        for shared in (False, True):
            seconds, tables[shared] = one_pass(run, configs, args.temperature, shared)
            times[shared].append(seconds)
    pd.testing.assert_frame_equal(tables[False], tables[True], check_exact=True)
    print(machine_line())
    print(f"{run.rounds:,} rounds, {len(configs)} configs at T = {args.temperature} (CPU s, one thread)")
    for shared, label in ((False, "each candidate's own walk"), (True, "shared walk (sampling_reach)")):
        ts = times[shared]
        print(f"  {label:30s} median {statistics.median(ts):7.2f}  range {min(ts):.2f}-{max(ts):.2f}")
    ratios = [a / b for a, b in zip(times[False], times[True])]
    print(f"  ratio own / shared: median {statistics.median(ratios):.1f}x, range {min(ratios):.1f}-{max(ratios):.1f}x")


if __name__ == "__main__":
    main()
