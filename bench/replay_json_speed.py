"""``replay --json`` and ``batch --json`` on a text dump directory, against reading its files.

    python bench/replay_json_speed.py                 # 8,000 rounds, 5 repeats (docs/benchmarks.md)
    python bench/replay_json_speed.py --rounds 500 --repeat 3   # a smoke run

Builds a text directory of the article config ([[6],[2,2],[1,1]]/[1,2,2], no scores: 4 files a
round) from replay.testing.batch_synth, then, in this process, after one warm-up of each: the plain read
of every file's bytes (the baseline), ``specreplay replay DIR --json`` (default reader processes,
and ``--workers 1``: the one-core figure) and ``specreplay batch DIR --json`` (``replay.cli.main``
with stdout sent to a null sink), interleaved, ``--repeat`` times.
Printed: median wall seconds and spread (min-max), rounds/s, the ratio to the plain read, and CPU
seconds (this process plus its reader processes, os.times()) with rounds per CPU second and the
CPU ratio to the plain read: on a shared machine the wall clock measures the neighbours, the CPU
columns measure the command (the target, 5,000 rounds/s on one core, is read there).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchkit import write_text_dump  # bench/benchkit.py

from replay.cli import main
from replay.core.config import TreeConfig
from replay.testing.batch_synth import SynthSpec, synth_batch

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def build_text_dir(d: Path, rounds: int) -> None:
    batch = synth_batch(SynthSpec(ARTICLE, rounds, seed=1, with_scores=False))
    write_text_dump(d, batch)
    (d / "config.json").write_text(json.dumps(ARTICLE.to_json()))


class NullSink(io.TextIOBase):
    def write(self, s: str) -> int:
        return len(s)


def plain_read(d: Path) -> None:
    for entry in os.scandir(d):
        with open(entry.path, "rb") as fh:
            fh.read()


def cli(argv: list[str]):
    def run() -> None:
        with contextlib.redirect_stdout(NullSink()):
            code = main(argv)
        if code != 0:
            raise SystemExit(f"{argv}: exit {code}")

    return run


def cpu_all() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(fn) -> tuple[float, float]:
    gc.collect()
    c0, t0 = cpu_all(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu_all() - c0


def main_bench() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "text"
        d.mkdir()
        build_text_dir(d, args.rounds)
        cases = {
            "plain read (baseline)": lambda: plain_read(d),
            "replay --json": cli(["replay", str(d), "--json", "--no-progress"]),
            "replay --json --workers 1": cli(["replay", str(d), "--json", "--no-progress", "--workers", "1"]),
            "batch --json": cli(["batch", str(d), "--json", "--no-progress"]),
        }
        for fn in cases.values():  # warm-up: page cache, imports
            fn()
        walls: dict[str, list[float]] = {k: [] for k in cases}
        cpus: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeat):  # interleaved
            for name, fn in cases.items():
                w, c = measure(fn)
                walls[name].append(w)
                cpus[name].append(c)
    base = statistics.median(walls["plain read (baseline)"])
    base_cpu = statistics.median(cpus["plain read (baseline)"])
    print(
        f"{args.rounds:,} rounds ({4 * args.rounds:,} text files), {args.repeat} repeats, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        "| case | median wall s | spread (min-max) | rounds/s | × plain read | median CPU s | CPU spread | rounds per CPU s | CPU × plain read |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in cases:
        w, c = statistics.median(walls[name]), statistics.median(cpus[name])
        print(
            f"| {name} | {w:.3f} | {min(walls[name]):.3f}-{max(walls[name]):.3f} | {args.rounds / w:,.0f} | {w / base:.2f} "
            f"| {c:.3f} | {min(cpus[name]):.3f}-{max(cpus[name]):.3f} | {args.rounds / c:,.0f} | {c / base_cpu:.2f} |"
        )


if __name__ == "__main__":
    sys.exit(main_bench())
