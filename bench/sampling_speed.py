"""Sampling-mode replay speed (issue 20): rounds/s at one temperature against the greedy batch replay.

    python bench/sampling_speed.py            # the run recorded in docs/benchmarks.md
    python bench/sampling_speed.py --quick    # a smoke run in seconds

One synthetic article run ([[6],[2,2],[1,1]]/[1,2,2], all layout, 16 validate columns with
scores; replay.testing.batch_synth + replay.testing.sampling_ref.with_validate_scores), one thread.
Timed in the same process, warmed up, interleaved, repeated: the greedy ``replay_batch``; the
whole ``batch_sampling`` (it rebuilds the trees and lays out every node's row, then the rule); and
the rule alone (``replay.core.sampling.sampling_bounds`` on prepared per-node arrays). Printed:
median rounds/s, the min..max spread, and each ratio to the greedy replay.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from benchkit import machine_line  # bench/benchkit.py

from replay.core.config import TreeConfig
from replay.core.sampling import sampling_bounds
from replay.engine.batch import rebuilt_levels, replay_batch
from replay.engine.batch.sampling import _node_rows, batch_sampling, shape_arrays
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.sampling_ref import with_validate_scores

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=0.7)
    args = ap.parse_args()
    rounds, repeats = (5_000, 2) if args.quick else (args.rounds, args.repeats)
    batch = with_validate_scores(synth_batch(SynthSpec(ARTICLE, rounds, target_cols=16, vocab=50_000)), 0, 50_000)
    res = replay_batch(batch, ARTICLE, workers=1)
    shape = res.shapes[0]
    levels = rebuilt_levels(batch, shape, True)
    parents, depths = shape_arrays(shape, levels.chosen)
    tokens = np.zeros(parents.shape, dtype=np.int64)
    for i, tok in enumerate(levels.tokens):
        tokens[:, shape.starts[i + 1] : shape.starts[i + 1] + tok.shape[0]] = tok.T
    ids, lp, has = _node_rows(batch, shape, parents, res.layout == 1)
    t = args.temperature
    jobs = {
        "greedy replay_batch": lambda: replay_batch(batch, ARTICLE, workers=1),
        f"batch_sampling T={t:g}": lambda: batch_sampling(batch, res, ARTICLE, t, 150_000),
        f"sampling_bounds T={t:g} (rule only)": lambda: sampling_bounds(tokens, parents, depths[None], ids, lp, has, t),
        "sampling_bounds T=1 (rule only)": lambda: sampling_bounds(tokens, parents, depths[None], ids, lp, has, 1.0),
    }
    for fn in jobs.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for _ in range(repeats):  # interleaved
        for name, fn in jobs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    print(machine_line())
    print(f"{rounds} article rounds, 16 validate columns, one thread, {repeats} interleaved repeats\n")
    print("| what | M rounds/s (median) | spread (min..max) | time / greedy |")
    print("|---|---|---|---|")
    greedy = statistics.median(times["greedy replay_batch"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"| {name} | {rounds / med / 1e6:.3f} | {rounds / max(ts) / 1e6:.3f}..{rounds / min(ts) / 1e6:.3f} "
            f"| {med / greedy:.2f} |"
        )


if __name__ == "__main__":
    main()
