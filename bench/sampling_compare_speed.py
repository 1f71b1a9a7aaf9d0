"""Compare at temperature T on a packed run: the batch arrays (analysis.compare.sampling_batch) against
the round path (replay.testing.compare_at_t.compare_sampling), on the report's temperature curve (16 T:
0 .. 1.5) for the recorded config and one narrower one.

    PYTHONPATH=. python bench/sampling_compare_speed.py [ROUNDS] [REFERENCE_ROUNDS]

A synthetic article-tree run (replay.testing.batch_synth, scores on the validate rows:
replay.testing.sampling_ref.with_validate_scores, 5 % early stops) is packed to a temporary
directory. The batch path runs on all ROUNDS (default 100000); the round path, far slower, on the
first REFERENCE_ROUNDS (default 2000) of the same run, and both on those, in one process, so that
the ratio holds on a loaded machine. ``curve_seconds(path)`` is the function a bench table can call.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from analysis.compare.sampling import TEMPERATURE_GRID
from analysis.compare.sampling_batch import compare_sampling_run
from analysis.tables.runs import load_run
from replay.core.config import TreeConfig
from replay.io.packed.pack import pack_batches
from replay.testing.batch_synth import synth_run
from replay.testing.compare_at_t import compare_sampling
from replay.testing.sampling_ref import with_validate_scores
from tests.reference_runs import load_reference

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
NARROWER = TreeConfig.from_lists([[6], [2], [1]], [1, 1, 1])
VOCAB = 50_000


def make_run(directory: Path, rounds: int, seed: int = 0) -> Path:
    batches = synth_run(ARTICLE, rounds, seed=seed, early_stop_rate=0.05, target_cols=8, vocab=VOCAB)
    scored = [with_validate_scores(b, seed + k, VOCAB) for k, b in enumerate(batches)]
    pack_batches(scored, directory, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    return directory


def curve_seconds(path: str | Path, configs=(ARTICLE, NARROWER), temperatures=TEMPERATURE_GRID) -> float:
    """Wall seconds of the report's temperature curve on a run, by the batch path (loading included)."""
    start = time.perf_counter()
    run = load_run(str(path), "r", progress=False)
    compare_sampling_run(run, list(configs), list(temperatures), VOCAB, per_round=False)
    return time.perf_counter() - start


def reference_seconds(path: str | Path, configs=(ARTICLE, NARROWER), temperatures=TEMPERATURE_GRID) -> float:
    """The same curve by the round path (the reference's replay of the run included)."""
    start = time.perf_counter()
    ref = load_reference(str(path), "r", progress=False)
    compare_sampling(list(ref.results), ref.config, list(configs), list(temperatures), VOCAB)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rounds", nargs="?", type=int, default=100_000, help="rounds of the batch path's run")
    ap.add_argument("reference_rounds", nargs="?", type=int, default=2_000, help="rounds of the round path's run")
    args = ap.parse_args()
    rounds, small = args.rounds, args.reference_rounds
    with tempfile.TemporaryDirectory() as tmp:
        big = make_run(Path(tmp) / "big", rounds)
        little = make_run(Path(tmp) / "small", small)
        fast_small = curve_seconds(little)
        slow_small = reference_seconds(little)
        fast_big = curve_seconds(big)
    print(
        f"curve: 16 T x 2 configs; round path {small} rounds: {slow_small:.2f} s ({small / slow_small:,.0f} rounds/s)"
    )
    print(
        f"batch path {small} rounds: {fast_small:.2f} s ({small / fast_small:,.0f} rounds/s), {slow_small / fast_small:.1f}x"
    )
    print(f"batch path {rounds} rounds: {fast_big:.2f} s ({rounds / fast_big:,.0f} rounds/s)")


if __name__ == "__main__":
    main()
