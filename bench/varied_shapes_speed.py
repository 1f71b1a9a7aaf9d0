"""``replay DIR --json`` on a dump of varied matrix shapes (issue 22, item 1), and the batch fixed cost.

    python bench/varied_shapes_speed.py                      # 8,000 rounds, 3 repeats, 10^5 for the fixed cost
    python bench/varied_shapes_speed.py --old-tree /work/main   # also the tree before (per-shape batches)
    python bench/varied_shapes_speed.py --rounds 500 --repeat 1 --fixed-rounds 5000   # a smoke run

Builds two text dumps of the article config ([[6],[2,2],[1,1]]/[1,2,2], no scores, 5 % early
stops): ``varied`` (replay.testing.batch_synth.varied_run: per round widest topKSpec + 0-3
columns, 0-2 padding rows per step, 1-3 validate columns) and ``uniform`` (one shape). Then, after
a warm-up of each, interleaved, ``--repeat`` times: ``specreplay replay DIR --json --workers 1``
in a fresh process (the user's way, interpreter start included), with this tree and with
``--old-tree``. Printed per case: median wall and CPU seconds (the process and its readers,
from wait4) with min-max spread, rounds per wall and per CPU second. On a shared machine the
CPU columns measure the command; the wall clock measures the neighbours too.

Fixed cost: ``--fixed-rounds`` rounds of varied shapes as arrays, replayed in the batches that
this tree forms and in the per-shape batches (RoundBatch.exact_parts, what the readers formed
before), in process: CPU seconds of each, batches, and the share of a one-round batch's CPU time
times the batches that ``replay DIR`` forms (one per read task and step count) in its total.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import machine_line  # bench/benchkit.py

from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.engine.runs import open_run
from replay.testing.batch_synth import SynthSpec, synth_batch, varied_run, write_text_rounds

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
HERE = Path(__file__).resolve().parent.parent


def build(d: Path, rounds: int, varied: bool) -> None:
    d.mkdir()
    if varied:
        batches = varied_run(ARTICLE, rounds, seed=1, early_stop_rate=0.05, with_scores=False)
    else:
        batches = [synth_batch(SynthSpec(ARTICLE, rounds, seed=1, with_scores=False))]
    write_text_rounds(d, batches)
    (d / "config.json").write_text(json.dumps(ARTICLE.to_json()))


def run_cli(tree: Path, d: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``specreplay replay d --json --workers 1`` with ``tree`` on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-m", "replay.cli", "replay", str(d), "--json", "--no-progress", "--workers", "1"]
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, env=env, cwd=tree)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} exited {status}")
    return wall, usage.ru_utime + usage.ru_stime


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def fixed_cost(rounds: int) -> None:
    batches = varied_run(ARTICLE, rounds, seed=2, early_stop_rate=0.05, with_scores=False)
    exact = [p for b in batches for p in b.exact_parts()]
    one = max(batches, key=len).take(slice(0, 1))
    for b in (*batches, one):  # warm-up
        replay_batch(b, ARTICLE, workers=1)
    times = {"padded": [], "per-shape": [], "one-round": []}
    for _ in range(3):
        t = time.process_time()
        for b in batches:
            replay_batch(b, ARTICLE, workers=1)
        times["padded"].append(time.process_time() - t)
        t = time.process_time()
        for b in exact:
            replay_batch(b, ARTICLE, workers=1)
        times["per-shape"].append(time.process_time() - t)
        t = time.process_time()
        for _ in range(200):
            replay_batch(one, ARTICLE, workers=1)
        times["one-round"].append((time.process_time() - t) / 200)
    f = statistics.median(times["one-round"])
    print(f"\nfixed cost, {rounds} rounds of varied shapes as arrays (CPU s, median of 3, min-max):")
    for name, bs in (("padded", batches), ("per-shape", exact)):
        ts = times[name]
        print(f"  {name:10s} {len(bs):6d} batches  {statistics.median(ts):.3f} s ({min(ts):.3f}-{max(ts):.3f})")
    print(f"  one-round batch: {f * 1e3:.2f} ms CPU")
    return f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fixed-rounds", type=int, default=100_000)
    ap.add_argument("--old-tree", type=Path, help="another checkout to compare with (e.g. main before this change)")
    args = ap.parse_args()
    print(machine_line(), f"load average {os.getloadavg()[0]:.1f} at start")
    f = fixed_cost(args.fixed_rounds)
    trees = {"this": HERE} | ({"old": args.old_tree.resolve()} if args.old_tree else {})
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {}
        for kind in ("varied", "uniform"):
            dirs[kind] = Path(tmp) / kind
            build(dirs[kind], args.rounds, kind == "varied")
        batches = sum(len(load()[0]) for load in open_run(dirs["varied"]).chunks(workers=1))  # as replay DIR forms them
        cases = [(t, k) for k in dirs for t in trees]
        for t, k in cases:  # warm-up: page cache, imports
            run_cli(trees[t], dirs[k])
        res: dict = {c: ([], []) for c in cases}
        for _ in range(args.repeat):
            for c in cases:
                wall, cpu = run_cli(trees[c[0]], dirs[c[1]])
                res[c][0].append(wall)
                res[c][1].append(cpu)
    n = args.rounds
    print(f"\nreplay DIR --json --workers 1, {n} rounds, text, {args.repeat} repeats (median, min-max):")
    print(f"  {'tree':5s} {'dump':8s} {'wall':>22s} {'CPU':>22s} {'rounds/s wall':>14s} {'rounds/CPU s':>13s}")
    for (t, k), (walls, cpus) in res.items():
        mw, mc = statistics.median(walls), statistics.median(cpus)
        print(f"  {t:5s} {k:8s} {spread(walls):>22s} {spread(cpus):>22s} {n / mw:14.0f} {n / mc:13.0f}")
    if "old" in trees:
        for k in dirs:
            ratio = statistics.median(res[("old", k)][1]) / statistics.median(res[("this", k)][1])
            print(f"  {k}: this tree takes 1/{ratio:.2f} of the old tree's CPU time")
    cpu = statistics.median(res[("this", "varied")][1])
    print(
        f"  fixed cost in replay DIR (varied): ~{batches} batches x {f * 1e3:.2f} ms = {100 * batches * f / cpu:.1f} % of CPU"
    )
    print(f"load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
