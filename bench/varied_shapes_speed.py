"""``replay DIR --json`` on a dump of varied matrix shapes, the same dump packed,
and the batch fixed cost.

    python bench/varied_shapes_speed.py                      # 8,000 rounds, 3 repeats, 10^5 for the fixed cost
    python bench/varied_shapes_speed.py --old-tree /work/main   # also the tree before (per-shape batches)
    python bench/varied_shapes_speed.py --rounds 500 --repeat 1 --fixed-rounds 5000   # a smoke run
    python bench/varied_shapes_speed.py --cases packed --rounds 100000 --repeat 1 --old-tree OLD  # packed, 10^5

Builds two text dumps of the article config ([[6],[2,2],[1,1]]/[1,2,2], no scores, 5 % early
stops): ``varied`` (replay.testing.batch_synth.varied_run: per round widest topKSpec + 0-3
columns, 0-2 padding rows per step, 1-3 validate columns) and ``uniform`` (one shape). Then, after
a warm-up of each, interleaved, ``--repeat`` times: ``specreplay replay DIR --json --workers 1``
in a fresh process (the user's way, interpreter start included), with this tree and with
``--old-tree``. Printed per case: median wall and CPU seconds (the process and its readers,
from wait4) with min-max spread, rounds per wall and per CPU second. On a shared machine the
CPU columns measure the command; the wall clock measures the neighbours too.

Packed: the varied dump packed with ``specreplay pack`` by each tree (the old tree writes its own
format: one group per exact shape), then ``replay RUN --json``, ``batch RUN`` and ``batch RUN
--json`` (default workers) on each tree's run, in fresh processes, interleaved, ``--repeat``
times; printed per case: median wall and CPU, rounds per CPU second, the run's groups and blocks
(a packed run replays one kernel batch per block for a static tree) and size on disk.

Fixed cost: ``--fixed-rounds`` rounds of varied shapes as arrays, replayed in the batches that
this tree forms and in the per-shape batches (replay.testing.batch_synth.exact_parts, what the
readers formed before), in process: CPU seconds of each, batches, and the share of a one-round
batch's CPU time times the batches that ``replay DIR`` forms (one per read task and step count) in its total.
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

from benchkit import child_env, machine_line  # bench/benchkit.py

from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.engine.runs import open_run
from replay.testing.batch_synth import SynthSpec, exact_parts, synth_batch, varied_run, write_text_rounds

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
    return run_cmd(tree, ["replay", str(d), "--json", "--workers", "1"])


def run_cmd(tree: Path, args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``specreplay ARGS --no-progress`` with ``tree`` on the path (output dropped)."""
    env = child_env(tree)
    argv = [sys.executable, "-m", "replay.cli", *args, "--no-progress"]
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=null, env=env, cwd=tree)  # warnings: the same each run
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} exited {status}")
    return wall, usage.ru_utime + usage.ru_stime


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def fixed_cost(rounds: int) -> None:
    batches = varied_run(ARTICLE, rounds, seed=2, early_stop_rate=0.05, with_scores=False)
    exact = [p for b in batches for p in exact_parts(b)]
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


PACKED_COMMANDS = (("replay", "--json"), ("batch",), ("batch", "--json"))


def packed_case(trees: dict[str, Path], d: Path, tmp: Path, rounds: int, repeat: int) -> None:
    """The varied dump packed by each tree, then PACKED_COMMANDS on each tree's run (see the docstring)."""
    runs, layout = {}, {}
    for t, tree in trees.items():
        runs[t] = tmp / f"varied-{t}.run"
        _, cpu = run_cmd(tree, ["pack", str(d), "-o", str(runs[t])])
        body = json.loads((runs[t] / "packed.json").read_text())
        mb = sum(p.stat().st_size for p in runs[t].rglob("*") if p.is_file()) / 1e6
        layout[t] = (len(body["groups"]), sum(g["blocks"] for g in body["groups"]), mb, cpu)
    cases = [(t, c) for c in PACKED_COMMANDS for t in trees]
    for t, c in cases:  # warm-up
        run_cmd(trees[t], [c[0], str(runs[t]), *c[1:]])
    res: dict = {case: ([], []) for case in cases}
    for _ in range(repeat):
        for t, c in cases:
            wall, cpu = run_cmd(trees[t], [c[0], str(runs[t]), *c[1:]])
            res[(t, c)][0].append(wall)
            res[(t, c)][1].append(cpu)
    print(f"\npacked varied dump, {rounds} rounds, {repeat} repeats (median, min-max):")
    for t, (groups, blocks, mb, cpu) in layout.items():
        print(f"  {t:5s} pack: {groups} groups, {blocks} blocks (kernel batches), {mb:.1f} MB, pack CPU {cpu:.2f} s")
    print(f"  {'tree':5s} {'command':22s} {'wall':>22s} {'CPU':>22s} {'rounds/CPU s':>13s}")
    for (t, c), (walls, cpus) in res.items():
        name = " ".join((c[0], "RUN", *c[1:]))
        print(f"  {t:5s} {name:22s} {spread(walls):>22s} {spread(cpus):>22s} {rounds / statistics.median(cpus):13.0f}")
    if "old" in trees:
        for c in PACKED_COMMANDS:
            ratio = statistics.median(res[("old", c)][1]) / statistics.median(res[("this", c)][1])
            print(f"  {' '.join((c[0], 'RUN', *c[1:]))}: this tree takes 1/{ratio:.2f} of the old tree's CPU time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fixed-rounds", type=int, default=100_000)
    ap.add_argument("--old-tree", type=Path, help="another checkout to compare with (e.g. main before this change)")
    ap.add_argument(
        "--cases", default="fixed,text,packed", help="which to run, comma-separated: fixed, text, packed (default all)"
    )
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    print(machine_line(), f"load average {os.getloadavg()[0]:.1f} at start")
    f = fixed_cost(args.fixed_rounds) if "fixed" in cases else None
    trees = {"this": HERE} | ({"old": args.old_tree.resolve()} if args.old_tree else {})
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {}
        for kind in ("varied", "uniform") if "text" in cases else ("varied",):
            dirs[kind] = Path(tmp) / kind
            build(dirs[kind], args.rounds, kind == "varied")
        if "packed" in cases:
            packed_case(trees, dirs["varied"], Path(tmp), args.rounds, args.repeat)
        if "text" in cases:
            text_case(trees, dirs, args.rounds, args.repeat, f)
    print(f"load average {os.getloadavg()[0]:.1f} at end")


def text_case(trees: dict[str, Path], dirs: dict[str, Path], n: int, repeat: int, f: float | None) -> None:
    """replay DIR --json on the varied and the uniform text dumps (see the docstring)."""
    batches = sum(len(load()[0]) for load in open_run(dirs["varied"]).chunks(workers=1))  # as replay DIR forms them
    cases = [(t, k) for k in dirs for t in trees]
    for t, k in cases:  # warm-up: page cache, imports
        run_cli(trees[t], dirs[k])
    res: dict = {c: ([], []) for c in cases}
    for _ in range(repeat):
        for c in cases:
            wall, cpu = run_cli(trees[c[0]], dirs[c[1]])
            res[c][0].append(wall)
            res[c][1].append(cpu)
    print(f"\nreplay DIR --json --workers 1, {n} rounds, text, {repeat} repeats (median, min-max):")
    print(f"  {'tree':5s} {'dump':8s} {'wall':>22s} {'CPU':>22s} {'rounds/s wall':>14s} {'rounds/CPU s':>13s}")
    for (t, k), (walls, cpus) in res.items():
        mw, mc = statistics.median(walls), statistics.median(cpus)
        print(f"  {t:5s} {k:8s} {spread(walls):>22s} {spread(cpus):>22s} {n / mw:14.0f} {n / mc:13.0f}")
    if "old" in trees:
        for k in dirs:
            ratio = statistics.median(res[("old", k)][1]) / statistics.median(res[("this", k)][1])
            print(f"  {k}: this tree takes 1/{ratio:.2f} of the old tree's CPU time")
    if f is not None:
        cpu = statistics.median(res[("this", "varied")][1])
        share = 100 * batches * f / cpu
        print(f"  fixed cost in replay DIR (varied): ~{batches} batches x {f * 1e3:.2f} ms = {share:.1f} % of CPU")


if __name__ == "__main__":
    main()
