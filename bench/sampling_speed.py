"""Sampling-mode replay speed: rounds/s at one temperature against the greedy batch replay.

    python bench/sampling_speed.py            # the run recorded in docs/benchmarks.md
    python bench/sampling_speed.py --quick    # a smoke run in seconds
    python bench/sampling_speed.py --validate-cols 6   # rows as generate records the article tree (its widest topKSpec)

One synthetic article run ([[6],[2,2],[1,1]]/[1,2,2], all layout, 16 validate columns with
scores by default, ``--validate-cols K`` for another width; replay.testing.batch_synth + replay.testing.sampling_ref.with_validate_scores), one thread.
Timed in the same process, warmed up, interleaved, repeated: the greedy ``replay_batch`` (the
yardstick: the machine is shared, read the ratios); the whole ``batch_sampling`` at T (chunk by
chunk it rebuilds the trees, reads each expanded slot's validate row, finds the rows'
T-independent statistics, then the rule); ``column_bounds`` at T on rows already laid out column-major ([E, K, R]: the statistics
found and the rule, chunk by chunk); the rule alone at T and at T = 1 (the recording temperature:
no rescaling), ``PreparedColumns.bounds`` on rows prepared once (``prepare_columns``, its
statistics found by the warm-up call); and the report's curve on these rounds: prepare once, then
the rule at the 16 T of analysis.compare.sampling.TEMPERATURE_GRID (counted per round and T).
Printed: median rounds/s, the min..max spread, and each median time over the greedy replay's.
Timed by default in this process's CPU time (``--clock cpu``, time.process_time: one thread, so the
seconds a core spent on it), which a loaded machine's waits for a core do not inflate; ``--clock
wall`` for time.perf_counter.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchkit import machine_line  # bench/benchkit.py

from analysis.compare.sampling import TEMPERATURE_GRID
from replay.core.config import TreeConfig
from replay.core.sampling_columns import column_bounds, prepare_columns
from replay.engine.batch import replay_batch
from replay.engine.batch.sampling import batch_sampling, shape_chunks, shape_layout
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.sampling_ref import with_validate_scores

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
VOCAB = 150_000  # the target's vocabulary size handed to batch_sampling (the T > 1 bounds need one)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 5,000 rounds, 2 repeats (its rates are not the recorded ones)",
    )
    ap.add_argument("--rounds", type=int, default=200_000, help="synthetic article rounds (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved timed repeats after one warm-up")
    ap.add_argument("--temperature", type=float, default=0.7, help="the one T timed (default %(default)s)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="process CPU time (default) or wall time")
    ap.add_argument(
        "--validate-cols", type=int, default=16, help="recorded candidates per validate row (generate's default: 6)"
    )
    args = ap.parse_args()
    rounds, repeats = (5_000, 2) if args.quick else (args.rounds, args.repeats)
    k = args.validate_cols
    batch = with_validate_scores(synth_batch(SynthSpec(ARTICLE, rounds, target_cols=k, vocab=50_000)), 0, 50_000)
    res = replay_batch(batch, ARTICLE, workers=1)
    shape = res.shapes[0]
    assert (res.error == 0).all() and len(res.shapes) == 1, "the synthetic run is one shape, every round replayed"
    # every round in one chunk: the tokens, each expanded slot's node and its row, laid out once
    _, _, (ids, lp, has), tokens, row_node = next(
        shape_chunks(batch, shape, True, res.layout == 1, chunk_rounds=rounds)
    )

    rows = lambda lo, hi: (ids[..., lo:hi], lp[..., lo:hi], has[:, lo:hi])  # noqa: E731
    tree = shape_layout(shape)
    prepared = prepare_columns(tree, rows, tokens, row_node, VOCAB)

    def curve():
        again = prepare_columns(tree, rows, tokens, row_node, VOCAB)
        return [again.bounds(t) for t in TEMPERATURE_GRID]

    t = args.temperature
    n_t = len(TEMPERATURE_GRID)
    curve_name = f"prepare once + {n_t} T (rate per round and T; time / greedy for all {n_t})"
    jobs = {
        "greedy replay_batch": lambda: replay_batch(batch, ARTICLE, workers=1),
        f"batch_sampling T={t:g} (whole)": lambda: batch_sampling(batch, res, ARTICLE, t, VOCAB),
        f"column_bounds T={t:g} (statistics + rule)": lambda: column_bounds(tree, rows, tokens, row_node, t, VOCAB),
        f"rule T={t:g}, rows prepared": lambda: prepared.bounds(t),
        "rule T=1, rows prepared": lambda: prepared.bounds(1.0),
        curve_name: curve,
    }
    per_call = {name: rounds * (n_t if name == curve_name else 1) for name in jobs}
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    load_start = os.getloadavg()[0]
    for fn in jobs.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for _ in range(repeats):  # interleaved
        for name, fn in jobs.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    print(machine_line())
    print(f"load average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(
        f"{rounds} article rounds, {k} validate columns, one thread, {repeats} interleaved repeats, {args.clock} time\n"
    )
    print("| what | M rounds/s (median) | spread (min..max) | time / greedy |")
    print("|---|---|---|---|")
    greedy = statistics.median(times["greedy replay_batch"])
    for name, ts in times.items():
        med, n = statistics.median(ts), per_call[name]
        print(
            f"| {name} | {n / med / 1e6:.3f} | {n / max(ts) / 1e6:.3f}..{n / min(ts) / 1e6:.3f} | {med / greedy:.2f} |"
        )


if __name__ == "__main__":
    main()
